"""The run's config groups other than the algorithms' own and the environment's (:mod:`vaco_jax.core.env_config`):
networks, PPO's update, the simulated lag, sample reuse and evaluation. :class:`vaco_jax.core.config.Config` holds
one of each (and re-exports them); the algorithm families' groups are :mod:`vaco_jax.core.algorithm_options`. Each
group's ``check()`` refuses a wrong value of its own fields with an error that names the field; what spans groups is
checked by :func:`vaco_jax.core.validation.validate`."""

from __future__ import annotations

from typing import Literal

import numpy as np
from flax import struct

from vaco_jax.core.config_fields import check, check_choice, check_number, check_positive_integer, static, values

LAG_KINDS = ("fixed", "uniform", "geometric", "spread", "empirical", "replay")
LAG_KINDS_OF_K = ("fixed", "uniform", "spread")
"""The lag kinds that read lag.k (their largest lag is lag.k); geometric draws up to lag.max_lag, empirical and replay
from their values."""
LagKind = Literal[LAG_KINDS]  # type: ignore[valid-type]  # the one list of lag.kind's choices (the CLI's too)
ACTIVATIONS = ("tanh", "relu", "gelu", "silu")
CONTINUOUS_DISTRIBUTIONS = ("gaussian", "tanh_gaussian")  # network.distribution (vaco_jax.numerics.distributions)
STD_KINDS = ("state_independent", "state_dependent")  # network.std
INITIALISATIONS = ("orthogonal", "lecun_uniform")  # network.init
W_MODES = ("truncate", "mask")
DIAGNOSTIC_LEVELS = ("full", "lean", "off")
MINIBATCH_SPLITS = ("auto", "samples", "segments", "unrolls")
ANNEAL_EVERY = ("step", "update")
GAE_FORMS = ("lambda", "q")  # GAE's advantage: its own and brax's PPO's (ppo.advantage_form)


@struct.dataclass
class NetworkConfig:
    """Separate actor and critic MLPs."""

    actor_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the policy MLP, e.g. --network.actor-hidden 64 64."""
    critic_hidden: tuple[int, ...] = static((64, 64))
    """Hidden layer widths of the value MLP."""
    activation: Literal["tanh", "relu", "gelu", "silu"] = static("tanh")
    """Hidden-layer activation of both MLPs."""
    distribution: Literal["gaussian", "tanh_gaussian"] = static("gaussian")
    """Continuous actions only: gaussian (a diagonal Gaussian whose samples are clipped to the action bounds, as
    PureJaxRL and CleanRL) or tanh_gaussian (brax's PPO's: samples squashed by tanh into the bounds; the batch keeps
    the raw samples, their log-probabilities carry tanh's log-det-Jacobian, the entropy is the squashed one's)."""
    std: Literal["state_independent", "state_dependent"] = static("state_independent")
    """Continuous actions only: the policy's deviation, a learned parameter per action dimension (state_independent,
    as PureJaxRL and CleanRL) or a second output of the actor MLP, softplus(x) + 0.001 (state_dependent, as brax's
    tanh-squashed policy)."""
    init: Literal["orthogonal", "lecun_uniform"] = static("orthogonal")
    """Kernel initialisation of both MLPs: orthogonal (gain sqrt(2), the policy head 0.01 and the value head 1, as
    PureJaxRL and CleanRL) or lecun_uniform (every layer, heads included, as brax's PPO networks); biases zero."""

    def check(self) -> None:
        check_choice("network.activation", self.activation, ACTIVATIONS)
        check_choice("network.distribution", self.distribution, CONTINUOUS_DISTRIBUTIONS)
        check_choice("network.std", self.std, STD_KINDS)
        check_choice("network.init", self.init, INITIALISATIONS)
        for path, sizes in (("network.actor_hidden", self.actor_hidden), ("network.critic_hidden", self.critic_hidden)):
            check(
                all(isinstance(s, int) and s >= 1 for s in sizes),
                f"{path}={sizes!r} must be a tuple of positive layer sizes, e.g. (64, 64)",
            )


@struct.dataclass
class PPOConfig:
    """Optimisation and PPO-family hyperparameters (forward-lag knobs included)."""

    num_epochs: int = static(4)
    """Epochs over each batch (forward lag)."""
    num_minibatches: int = static(4)
    """Minibatches per epoch (forward lag); how the batch is split is ppo.minibatch."""
    minibatch: Literal["auto", "samples", "segments", "unrolls"] = static("auto")
    """How each epoch splits the batch into minibatches: samples (the whole batch flattened, shuffled and split, as
    PureJaxRL and CleanRL do), segments (whole environment rollout segments, [T, E / M] each, for the losses that
    need a rollout's time axis inside a gradient step), unrolls (the segments cut into unrolls of
    ppo.advantage_horizon steps, shuffled and split, as brax's PPO forms its minibatches) or auto (samples, unless the
    algorithm and its options need segments: IMPALA's and IMPACT's V-trace at every step, ppo.advantages_every_step,
    vaco.tv_scope=trajectory, cispo.truncation=topr; the training program resolves it and says so). Forcing segments
    on every method keeps a controlled comparison."""
    advantage_horizon: int = static(0)
    """Estimate advantages and value targets inside unrolls of this many steps, each bootstrapping from the critic's
    value of the state after it, as brax's PPO estimates GAE inside its unroll_length-step unrolls (0: along each
    whole rollout segment, as PureJaxRL and CleanRL). Must divide env.num_steps; every algorithm's estimator takes
    it (V-trace's traces are cut there too)."""
    advantage_form: Literal["lambda", "q"] = static("lambda")
    """GAE's advantage: lambda (A_t = v_t - V(s_t), GAE(lambda) itself) or q (A_t = r_t + gamma v_{t+1} - V(s_t), the
    one-step error bootstrapped from the next step's lambda-return v: brax's PPO's advantage, V-trace's q form
    on-policy). The value targets are v_t in both. For the algorithms that estimate plain GAE."""
    advantages_every_step: bool = static(False)
    """Re-estimate GAE and the value targets at every gradient step with the live critic V_phi, as brax's PPO does
    inside its loss, instead of once per iteration with V_T (for the algorithms that estimate GAE; IMPALA and IMPACT
    re-estimate V-trace so already). Each minibatch then needs a time axis: segments or unrolls."""
    learning_rate: float = 2.5e-4
    """Adam step size (its initial value when annealed)."""
    anneal_lr: bool = static(True)
    """Anneal the learning rate linearly to 0 over training (ppo.anneal_every says how often it falls)."""
    anneal_every: Literal["step", "update"] = static("step")
    """When the annealed rate falls: at every gradient step (lr x (1 - step / all steps), reaching 0) or once per
    update (lr x (1 - update / num_iterations), flat within an update, as PureJaxRL's and CleanRL's ppo.py). At every
    step the two differ by less than 1/num_iterations of the initial rate. Both count the steps applied: a step the
    NaN guard skips (counted in nonfinite/skipped_steps) delays the schedule by one step."""
    max_grad_norm: float = 0.5
    """Global gradient-norm clipping of each minibatch step (PureJaxRL and CleanRL clip at 0.5; inf: none, as brax)."""
    gamma: float = 0.99
    """Discount factor."""
    gae_lambda: float = 0.95
    """lambda of GAE and of V-trace(lambda)."""
    clip_eps: float = 0.2
    """eps: PPO's ratio clipping range [1 - eps, 1 + eps] (SPO: its penalty scale). The value loss has its own clip,
    ppo.vf_clip_eps, which does not follow it (PureJaxRL and CleanRL use one value for both: set both)."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    clip_value_loss: bool = static(True)
    """PPO-style clipping of the value loss around V_T(s), on by default as in PureJaxRL and CleanRL."""
    vf_clip_eps: float = 0.2
    """Clipping range of the value loss when clip_value_loss is on (apart from ppo.clip_eps, which PureJaxRL and
    CleanRL also use here)."""
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

    @property
    def gradient_steps_per_update(self) -> int:
        """Gradient steps in one update: ``num_epochs x num_minibatches``."""
        return self.num_epochs * self.num_minibatches

    def check(self) -> None:
        check_positive_integer("ppo.num_epochs", self.num_epochs)
        check_positive_integer("ppo.num_minibatches", self.num_minibatches)
        check_choice("ppo.minibatch", self.minibatch, MINIBATCH_SPLITS)  # its sizes: minibatch_plan.resolve_minibatch
        check_choice("ppo.anneal_every", self.anneal_every, ANNEAL_EVERY)
        check(
            type(self.advantage_horizon) is int and self.advantage_horizon >= 0,
            f"ppo.advantage_horizon={self.advantage_horizon!r} must be an integer >= 0 (steps per unroll; 0: the "
            "whole segment)",
        )
        check(
            self.minibatch != "unrolls" or self.advantage_horizon > 0,
            "ppo.minibatch=unrolls cuts the batch into unrolls of ppo.advantage_horizon steps: set "
            "--ppo.advantage-horizon (brax's unroll_length, e.g. 30)",
        )
        check(type(self.advantages_every_step) is bool, "ppo.advantages_every_step must be true or false")
        check_choice("ppo.advantage_form", self.advantage_form, GAE_FORMS)
        check(
            self.anneal_lr or self.anneal_every == "step",
            "ppo.anneal_every=update with ppo.anneal_lr off: a constant learning rate is never lowered; drop "
            "--ppo.anneal-every or --ppo.no-anneal-lr",
        )
        check_number("ppo.learning_rate", self.learning_rate, low=0, low_open=True)
        check_number(
            "ppo.max_grad_norm", self.max_grad_norm, low=0, low_open=True, allow_inf=True, hint=" (inf: no clipping)"
        )
        check_number("ppo.gamma", self.gamma, low=0, high=1)
        check_number("ppo.gae_lambda", self.gae_lambda, low=0, high=1)
        check_number("ppo.clip_eps", self.clip_eps, low=0, low_open=True)
        check_number("ppo.vf_clip_eps", self.vf_clip_eps, low=0, low_open=True)
        check_number("ppo.ent_coef", self.ent_coef, low=0)
        check_number("ppo.vf_coef", self.vf_coef, low=0)
        check_number("ppo.kl_coef", self.kl_coef, low=0)
        check_number("ppo.kl_target", self.kl_target, low=0, low_open=True)
        check_number("ppo.w_max", self.w_max, low=0, low_open=True, allow_inf=True, hint=" (inf: no truncation)")
        check_choice("ppo.w_mode", self.w_mode, W_MODES)


@struct.dataclass
class LagConfig:
    """Backward lag: the simulated fleet of stale actors (docs/algorithms.md section 2)."""

    kind: LagKind = static("fixed")
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

    def check(self) -> None:
        """Each field alone, and lag.weights against max_lag; lag.sequence's length needs the iteration count
        (:func:`vaco_jax.core.validation.validate`)."""
        check_positive_integer("lag.num_actors", self.num_actors)
        check(
            isinstance(self.max_lag, int) and self.max_lag >= 0, f"lag.max_lag={self.max_lag!r} must be an integer >= 0"
        )
        check_choice("lag.kind", self.kind, LAG_KINDS)
        check(
            self.kind != "geometric" or self.max_lag > 0,
            "lag.kind=geometric draws lags 0..lag.max_lag, and lag.max_lag=0 would make every lag 0: give the largest "
            "lag to draw, e.g. --lag.max-lag 16",
        )
        check_number("lag.k", self.k, low=0, integer=True)
        largest = max(int(k) for k in values(self.k))
        check(
            largest <= self.max_lag or self.kind not in LAG_KINDS_OF_K,
            f"lag.k={largest} exceeds lag.max_lag={self.max_lag}: raise lag.max_lag (--lag.max-lag {largest}) or "
            "lower lag.k",
        )
        check_number("lag.p", self.p, low=0, high=1, low_open=True, hint=" (geometric success probability)")
        self._check_weights()

    def read_by_this_kind(self, field: str, kind: str) -> bool:
        """Whether lag.kind is the one kind that reads the tuple field ``lag.<field>``; any other kind must leave it
        empty (it would be ignored silently)."""
        given = tuple(getattr(self, field))
        if self.kind == kind:
            return True
        check(
            not given,
            f"lag.{field} (of {len(given)} values) is read by lag.kind={kind} only (lag.kind={self.kind!r}): drop "
            f"it, or set lag.kind={kind}",
        )
        return False

    def _check_weights(self) -> None:
        """lag.weights: a histogram over lags 0..max_lag for the empirical kind, nothing for the others."""
        if not self.read_by_this_kind("weights", "empirical"):
            return
        weights = tuple(self.weights)
        check(
            len(weights) == self.max_lag + 1,
            f"lag.kind=empirical needs lag.weights with lag.max_lag + 1 = {self.max_lag + 1} values (the "
            f"frequencies of lags 0..{self.max_lag}); got {len(weights)}: give one per lag, e.g. "
            f"--lag.weights {' '.join(['1'] * (self.max_lag + 1))}",
        )
        frequencies = np.stack([np.asarray(w, dtype=np.float64) for w in weights])
        check(
            bool(np.all(np.isfinite(frequencies)) and np.all(frequencies >= 0)),
            f"lag.weights={weights!r} must be finite and >= 0 (relative frequencies of lags 0..{self.max_lag})",
        )
        check(
            bool(np.all(frequencies.sum(axis=0) > 0)),
            "lag.weights must not all be 0: give some lag a positive frequency",
        )


@struct.dataclass
class ReuseConfig:
    """Sample reuse (GePPO's; IMPACT's circular buffer): each update trains on the batches of the last M iterations."""

    num_batches: int = static(1)
    """M: the batches each update trains on, this iteration's and the M - 1 before it, kept on the device with their
    behaviour log-probs; each is scored again under pi_T and given advantages with the critic V_T at every update
    (1: no reuse). The batches share the update equally (GePPO's uniform policy weights); until M batches exist,
    the ones that do. Memory grows by about (M - 1) batches per run (see train --dry-run); a minibatch holds M times as
    many samples (the number of gradient steps stays ppo.num_epochs x ppo.num_minibatches)."""

    def check(self) -> None:
        check(
            isinstance(self.num_batches, int) and not isinstance(self.num_batches, bool) and self.num_batches >= 1,
            f"reuse.num_batches={self.num_batches!r} must be an integer >= 1 (1: each update trains on its own batch "
            "only)",
        )


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

    def check(self) -> None:
        for path, value in (("eval.every", self.every), ("eval.max_steps", self.max_steps)):
            check(
                isinstance(value, int) and not isinstance(value, bool) and value >= 0, f"{path}={value!r} must be >= 0"
            )
        check(
            isinstance(self.episodes, int) and self.episodes >= 1,
            f"eval.episodes={self.episodes!r} must be a positive integer",
        )
