"""The run's config groups other than the algorithms' own: environment and batch shape, networks, PPO's update,
the simulated lag, sample reuse and evaluation. :class:`vaco_jax.core.config.Config` holds one of each (and
re-exports them); the algorithm families' groups are :mod:`vaco_jax.core.algorithm_options`."""

from __future__ import annotations

from typing import Literal

from flax import struct

from vaco_jax.core.config_fields import static

NORMALIZER_UPDATES = ("after", "before")
LAG_KINDS = ("fixed", "uniform", "geometric", "spread", "empirical", "replay")
ACTIVATIONS = ("tanh", "relu", "gelu", "silu")
W_MODES = ("truncate", "mask")
DIAGNOSTIC_LEVELS = ("full", "lean", "off")
MINIBATCH_SPLITS = ("auto", "samples", "segments")


@struct.dataclass
class EnvConfig:
    """Environment and batch shape."""

    name: str = static("CartPole-v1")
    """Environment id: a gymnax id (CartPole-v1, Pendulum-v1, Acrobot-v1) or brax/<name> (brax/ant, brax/hopper)."""
    num_envs: int = static(64)
    """Environments stepped in parallel per run."""
    num_steps: int = static(128)
    """Rollout length per iteration (T)."""
    normalize_observations: bool | None = static(None)
    """Running mean/variance observation normalisation (part of the actor snapshot). None: the backend's default,
    chosen by measurement (benchmarks/studies/normalization.py): off for gymnax, on for brax."""
    normalizer_update: Literal["after", "before"] = static("before")
    """When the observation statistics absorb an iteration's observations: before the gradient steps (as brax's
    PPO: the update, its critic values and the new snapshot all use statistics that include the batch; the
    default, chosen by measurement: benchmarks/studies/normalizer_order.py) or after them (the update trains with the
    statistics its batch was collected under; the order before this option existed)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before advantage estimation (returns are reported raw)."""
    episode_length: int = static(0)
    """Time limit in env steps, after which an episode is truncated (0: the env's own; brax: 1000)."""
    action_repeat: int = static(1)
    """brax only: env steps per agent step (the action is held, rewards are summed)."""
    backend: str = static("")
    """brax only: physics pipeline, one of generalized, positional, spring, mjx ('': the env's default)."""
    start_pool: int | None = static(None)
    """brax only: fresh start states drawn once per rollout, handed in order to the episodes that end in it (None:
    four per environment, chosen by measurement: benchmarks/speed/start_pool.py; 0: no pool, a fresh reset for every
    environment at every step, as before this option existed). Past the pool's end starts are reused and counted
    in ``env/reused_starts``."""


@struct.dataclass
class NetworkConfig:
    """Separate actor and critic MLPs."""

    actor_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the policy MLP, e.g. --network.actor-hidden 64 64."""
    critic_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the value MLP."""
    activation: Literal["tanh", "relu", "gelu", "silu"] = static("tanh")
    """Hidden-layer activation of both MLPs."""


@struct.dataclass
class PPOConfig:
    """Optimisation and PPO-family hyperparameters (forward-lag knobs included)."""

    num_epochs: int = static(4)
    """Epochs over each batch (forward lag)."""
    num_minibatches: int = static(4)
    """Minibatches per epoch (forward lag); how the batch is split is ppo.minibatch."""
    minibatch: Literal["auto", "samples", "segments"] = static("auto")
    """How each epoch splits the batch into minibatches: samples (the whole batch flattened, shuffled and split, as
    PureJaxRL and CleanRL do), segments (whole environment rollout segments, [T, E / M] each, for the losses that
    need a rollout's time axis inside a gradient step) or auto (samples, unless the algorithm and its options need
    segments: IMPALA's and IMPACT's V-trace at every step, vaco.tv_scope=trajectory, cispo.truncation=topr; the training
    program resolves it and says so). Forcing segments on every method keeps a controlled comparison."""
    learning_rate: float = 2.5e-4
    """Adam step size (its initial value when annealed)."""
    anneal_lr: bool = static(True)
    """Anneal the learning rate linearly to 0 over training."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clipping of each minibatch step (PureJaxRL and CleanRL clip at 0.5; inf: none, as brax)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """lambda of GAE and of V-trace(lambda)."""
    clip_eps: float = 0.2
    """eps: PPO's ratio clipping range [1 - eps, 1 + eps] (SPO: its penalty scale)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    clip_value_loss: bool = static(True)
    """PPO-style clipping of the value loss around V_T(s), on by default as in PureJaxRL and CleanRL."""
    vf_clip_eps: float = 0.2
    """Clipping range of the value loss when clip_value_loss is on."""
    normalize_advantages: bool = static(True)
    """Normalise advantages per minibatch (mean 0, std 1)."""
    kl_coef: float = 1.0
    """ppo_kl: the KL penalty coefficient beta_kl (its initial value when adaptive)."""
    kl_adaptive: bool = static(False)
    """ppo_kl: adapt beta_kl once per iteration (x2 above 1.5 x kl_target, /2 below kl_target / 1.5)."""
    kl_target: float = 0.01
    """ppo_kl: the KL target of the adaptive coefficient."""
    w_max: float = 100.0
    """ppo_decoupled (and m2po.form=decoupled_mask): the bound w_max of the off-policy weight pi_T/beta (see w_mode)."""
    w_mode: Literal["truncate", "mask"] = static("truncate")
    """ppo_decoupled (and m2po.form=decoupled_mask): truncate the weight to min(pi_T/beta, w_max), or mask (drop) the
    samples whose weight exceeds w_max, as asynchronous LLM trainers do (AReaL)."""


@struct.dataclass
class LagConfig:
    """Backward lag: the simulated fleet of stale actors (spec section 2)."""

    kind: Literal["fixed", "uniform", "geometric", "spread", "empirical", "replay"] = static("fixed")
    """How each actor group's lag is drawn per iteration: fixed (k), uniform (0..k), geometric (p, capped at
    max_lag), spread (groups evenly over 0..k), empirical (from the histogram lag.weights, e.g. the lags a real
    asynchronous system measured) or replay (each group's lag at each iteration given in lag.sequence, e.g. the
    sequence a real asynchronous run measured, in order)."""
    max_lag: int = static(0)
    """Buffer holds max_lag + 1 snapshots (static: it sets the buffer shape)."""
    num_actors: int = static(1)
    """Actor groups, each acting with its own snapshot; env.num_envs must be divisible by it."""
    k: int = 0
    """Lag (fixed, spread) or maximum lag (uniform), in learner updates."""
    p: float = 0.5
    """Success probability of the geometric lag distribution, in (0, 1]."""
    weights: tuple[float, ...] = ()
    """lag.kind=empirical: relative frequencies of lags 0, 1, ..., max_lag (max_lag + 1 values >= 0, normalised
    here; traced, so runs with different histograms share one program); empty for the other kinds."""
    sequence: tuple[int, ...] = ()
    """lag.kind=replay: the lag of every actor group at every iteration, num_iterations x num_actors integers in
    0..max_lag, iteration-major (iteration 0's groups first); traced, so runs replaying different sequences share
    one program; empty for the other kinds."""


@struct.dataclass
class ReuseConfig:
    """Sample reuse (GePPO's; IMPACT's circular buffer): each update trains on the batches of the last M iterations."""

    num_batches: int = static(1)
    """M: the batches each update trains on, this iteration's and the M - 1 before it, kept on the device with their
    behaviour log-probs; each is scored again under pi_T and given advantages with the critic V_T at every update
    (1: no reuse). The batches share the update equally (GePPO's uniform policy weights); until M batches exist,
    the ones that do. Memory grows by about (M - 1) batches per run (see --dry-run); a minibatch holds M times as
    many samples (the number of gradient steps stays ppo.num_epochs x ppo.num_minibatches)."""


@struct.dataclass
class EvalConfig:
    """Evaluation episodes inside the compiled program, on environments of their own (off by default: zero cost)."""

    every: int = static(0)
    """Evaluate every N iterations and after the last one (0: never). Logged per iteration as
    eval/return_deterministic, eval/return_stochastic and eval/length (NaN at iterations without an evaluation)."""
    episodes: int = static(8)
    """Episodes per evaluation for each of the two policies (the mode, and a sample), run in parallel."""
    max_steps: int = static(0)
    """Steps an evaluation may take (0: the environment's time limit); episodes still running then are not counted."""
