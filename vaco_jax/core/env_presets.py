"""The env presets' families: brax's training-notebook PPO per brax env and MuJoCo Playground's PPO per DM Control
Suite env (:data:`ENV_FAMILIES`), and the presets each gives (:func:`family_presets`), which
:mod:`vaco_jax.core.presets` registers by name.

``<prefix>-<env>`` takes the reference's hyperparameters and what else the trainer's defaults can follow;
``<prefix>-<env>-as-brax`` adds brax's PPO algorithm where this trainer's defaults differ from it (its advantages
estimated inside unrolls at every gradient step, its minibatches of whole unrolls, its tanh-squashed policy with a
state-dependent deviation, its initialisation, its resets: docs/algorithms.md section 4a); ``<prefix>-<env>-cpu`` is
a smoke-sized run of the task.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple


class BraxPPO(NamedTuple):
    """One env's PPO settings in brax's training notebook (``notebooks/training.ipynb``, its ``ppo.train`` arguments).

    brax's update takes ``num_minibatches x batch_size`` unrolls of ``unroll_length`` steps; here one rollout of
    ``num_envs x num_steps`` samples supplies them. ``num_timesteps`` counts brax (physics) steps, as brax does:
    ``action_repeat`` of them make one agent step."""

    num_envs: int
    unroll_length: int
    batch_size: int
    num_minibatches: int
    epochs: int  # num_updates_per_batch
    discount: float
    learning_rate: float
    entropy_cost: float
    reward_scaling: float
    num_timesteps: float
    action_repeat: int = 1
    num_evals: int = 20
    backend: str = "positional"  # the notebook's physics pipeline ("": the env's default here)
    # brax's num_resets_per_eval: between two evaluations, this many epochs, each followed by a reset of every env
    # (0: one epoch, no reset). MuJoCo Playground's DM Control Suite config sets 10; brax's notebook leaves it at 0
    num_resets_per_eval: int = 0

    @property
    def num_steps(self) -> int:
        """Steps per environment per update: the notebook's samples per update over its ``num_envs``."""
        return self.batch_size * self.num_minibatches * self.unroll_length // self.num_envs

    @property
    def updates_per_evaluation(self) -> int:
        """brax's updates between two evaluations: ``max(num_resets_per_eval, 1)`` epochs of
        ``ceil(num_timesteps / ((num_evals - 1) x brax steps per update x max(num_resets_per_eval, 1)))`` updates
        each (brax's ``num_training_steps_per_epoch``, rounded up)."""
        brax_steps_per_update = self.num_envs * self.num_steps * self.action_repeat
        epochs = max(self.num_resets_per_eval, 1)
        per_epoch = math.ceil(self.num_timesteps / (max(self.num_evals - 1, 1) * brax_steps_per_update * epochs))
        return epochs * per_epoch

    @property
    def updates_per_reset(self) -> int:
        """brax's updates between two resets of every env: one epoch's, where ``num_resets_per_eval`` is set (every
        env is reset after each epoch); 0 (never) where it is not."""
        return self.updates_per_evaluation // self.num_resets_per_eval if self.num_resets_per_eval else 0

    @property
    def iterations(self) -> int:
        """The updates brax runs: ``num_evals - 1`` epochs of :attr:`updates_per_evaluation` (at least
        ``num_timesteps`` brax steps)."""
        return max(self.num_evals - 1, 1) * self.updates_per_evaluation


# hopper, walker2d and swimmer have no brax PPO setting (the notebook trains hopper and walker2d with SAC): they take
# ant's
_BRAX_ANT = BraxPPO(4096, 5, 2048, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 5e7, num_evals=10)
_BRAX_PPO: dict[str, BraxPPO] = {
    "ant": _BRAX_ANT,
    "halfcheetah": BraxPPO(2048, 20, 512, 32, 8, 0.95, 3e-4, 1e-3, 1.0, 5e7),
    "hopper": _BRAX_ANT,
    "walker2d": _BRAX_ANT,
    "humanoid": BraxPPO(2048, 10, 1024, 32, 8, 0.97, 3e-4, 1e-3, 0.1, 5e7, num_evals=10),
    "humanoidstandup": BraxPPO(2048, 15, 1024, 32, 8, 0.97, 6e-4, 1e-2, 0.1, 1e8),
    "inverted_pendulum": BraxPPO(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 2e6),
    "inverted_double_pendulum": BraxPPO(2048, 5, 1024, 32, 4, 0.97, 3e-4, 1e-2, 10.0, 2e7),
    "reacher": BraxPPO(2048, 50, 256, 32, 8, 0.95, 3e-4, 1e-3, 5.0, 5e7, action_repeat=4),
    "pusher": BraxPPO(2048, 30, 512, 16, 8, 0.95, 3e-4, 1e-2, 5.0, 5e7),
    "swimmer": _BRAX_ANT._replace(backend=""),  # swimmer has only the generalized pipeline
}
# brax's num_eval_envs: evaluation episodes after each of its num_evals - 1 epochs (it evaluates before training too);
# its eval/episode_reward samples the policy (deterministic_eval=False): eval/return_stochastic here
BRAX_EVAL_EPISODES = 128
# brax's PPO clips no gradient and keeps its learning rate: with its reward scaling (10 on most envs) the value
# loss's gradient dominates the norm, and PureJaxRL's clip at 0.5 then shrinks every policy step (on
# inverted_pendulum at brax's configuration, a single-seed trial balanced the pole in 17 iterations without the clip
# and annealing, 30 with them; the PPO parity benchmark compares the preset with brax's own PPO)
BRAX_OPTIMISER = {"ppo.max_grad_norm": float("inf"), "ppo.anneal_lr": False}
BRAX_POLICY_HIDDEN = (32, 32, 32, 32)  # brax's PPO network defaults
BRAX_VALUE_HIDDEN = (256, 256, 256, 256, 256)
BRAX_ESTIMATION = {"ppo.minibatch": "unrolls", "ppo.advantages_every_step": True, "ppo.advantage_form": "q"}
"""brax's estimation of advantages, with ``ppo.advantage_horizon`` its ``unroll_length``: inside each unroll, at every
gradient step with the live critic, in its own form (the one-step error bootstrapped from the next lambda-return),
over minibatches of whole unrolls."""
BRAX_POLICY = {"network.distribution": "tanh_gaussian", "network.std": "state_dependent"}
"""brax's PPO policy: a tanh-squashed Gaussian whose deviation is a second head, ``softplus(x) + 0.001``."""
BRAX_ALGORITHM = {
    **BRAX_ESTIMATION,
    **BRAX_POLICY,
    "network.init": "lecun_uniform",
    "env.normalizer_form": "brax",
    "env.start_states": "cached",
}
"""What ``<prefix>-<env>-as-brax`` adds to ``<prefix>-<env>`` (with the unroll length and the resets, per env): brax's
PPO where this trainer's defaults differ, as far as options reach (docs/algorithms.md section 4a lists what stays
different: Adam's epsilon, the entropy bonus's estimate, time limits, the evaluation before training)."""


# MuJoCo Playground's PPO for its DM Control Suite (mujoco_playground/config/dm_control_suite_params.py,
# brax_ppo_config, playground 0.2): brax's ppo.train with brax's default networks, every env at the settings below
# except where named. Its PendulumSwingUp case (action repeat 4, 4 epochs; so spelled in playground 0.2.0) never
# applies: the env is PendulumSwingup
_PLAYGROUND_SUITE = BraxPPO(
    2048, 30, 1024, 32, 16, 0.995, 1e-3, 1e-2, 10.0, 6e7, num_evals=10, backend="", num_resets_per_eval=10
)
_PLAYGROUND_EXCEPTIONS = {
    "AcrobotSwingup": {"num_timesteps": 1e8},
    "AcrobotSwingupSparse": {"num_timesteps": 1e8},
    "BallInCup": {"discount": 0.95},
    "FingerSpin": {"discount": 0.95},
    "SwimmerSwimmer6": {"num_timesteps": 1e8},
    "WalkerRun": {"num_timesteps": 1e8},
}
PLAYGROUND_SUITE_ENVS = (
    "AcrobotSwingup", "AcrobotSwingupSparse", "BallInCup", "CartpoleBalance", "CartpoleBalanceSparse",
    "CartpoleSwingup", "CartpoleSwingupSparse", "CheetahRun", "FingerSpin", "FingerTurnEasy", "FingerTurnHard",
    "FishSwim", "HopperHop", "HopperStand", "HumanoidStand", "HumanoidWalk", "HumanoidRun", "PendulumSwingup",
    "PointMass", "ReacherEasy", "ReacherHard", "SwimmerSwimmer6", "WalkerRun", "WalkerStand", "WalkerWalk",
)  # fmt: skip
_PLAYGROUND_PPO = {
    env: _PLAYGROUND_SUITE._replace(**_PLAYGROUND_EXCEPTIONS.get(env, {})) for env in PLAYGROUND_SUITE_ENVS
}


class EnvFamily(NamedTuple):
    """A family of env presets, ``<prefix>-<env>`` and ``<prefix>-<env>-cpu``: brax ``ppo.train`` settings per env."""

    prefix: str  # of the presets' names
    env_prefix: str  # of the env names
    whose: str  # whose settings, in words
    steps: str  # what the reference's num_timesteps counts
    default_pipeline: str  # what an empty env.backend runs, in words
    table: dict[str, BraxPPO]


ENV_FAMILIES = (
    EnvFamily("brax", "brax/", "brax's training-notebook PPO", "brax steps", "the env's fastest pipeline", _BRAX_PPO),
    EnvFamily(
        "playground",
        "playground/",
        "MuJoCo Playground's PPO (its DM Control Suite config)",
        "env steps",
        "MJX's jax implementation",
        _PLAYGROUND_PPO,
    ),
)


def family_presets(family: EnvFamily) -> dict[str, tuple[str, dict[str, Any]]]:
    """``<prefix>-<env>`` (the reference's PPO settings for an accelerator), ``<prefix>-<env>-as-brax`` (those with
    brax's PPO algorithm too: :data:`BRAX_ALGORITHM`, its unrolls and resets) and ``<prefix>-<env>-cpu`` (a smoke
    run) for every env of the family, as (description, dotted-field overrides): brax's ``ppo.train`` settings mapped
    onto this trainer's rollouts."""
    prefix, env_prefix, whose, steps = family.prefix, family.env_prefix, family.whose, family.steps
    presets = {}
    for env, ppo in family.table.items():
        task = {
            "env.name": f"{env_prefix}{env}",
            "env.normalize_observations": True,
            "env.reward_scale": ppo.reward_scaling,
            "env.action_repeat": ppo.action_repeat,
            "ppo.gamma": ppo.discount,
            "ppo.gae_lambda": 0.95,
            "ppo.clip_eps": 0.3,
            "ppo.ent_coef": ppo.entropy_cost,
            "ppo.clip_value_loss": False,  # brax's PPO loss: 0.5 * mean((V - v)^2), no clipping
            "ppo.minibatch": "segments",  # brax's PPO shuffles whole unrolls (its GAE runs inside each minibatch)
            **BRAX_OPTIMISER,
            "network.activation": "silu",
        }
        iterations, every = ppo.iterations, ppo.updates_per_evaluation
        repeat = f", action repeat {ppo.action_repeat}" if ppo.action_repeat > 1 else ""
        presets[f"{prefix}-{env}"] = (
            f"{env_prefix}{env}, {whose} for an accelerator: {ppo.num_envs} envs x {ppo.num_steps} steps "
            f"per update, {ppo.epochs} epochs x {ppo.num_minibatches} minibatches, {iterations} iterations "
            f"({iterations * ppo.num_envs * ppo.num_steps * ppo.action_repeat:.2g} {steps}{repeat}), "
            f"{BRAX_EVAL_EPISODES} evaluation episodes every {f'{every} iterations' if every > 1 else 'iteration'}, "
            f"{f'the {ppo.backend} pipeline' if ppo.backend else family.default_pipeline}",
            {
                **task,
                **({"env.backend": ppo.backend} if ppo.backend else {}),
                "num_iterations": iterations,
                "env.num_envs": ppo.num_envs,
                "env.num_steps": ppo.num_steps,
                "ppo.num_epochs": ppo.epochs,
                "ppo.num_minibatches": ppo.num_minibatches,
                "ppo.learning_rate": ppo.learning_rate,
                "network.actor_hidden": BRAX_POLICY_HIDDEN,
                "network.critic_hidden": BRAX_VALUE_HIDDEN,
                "eval.every": every,
                "eval.episodes": BRAX_EVAL_EPISODES,
            },
        )
        period = ppo.updates_per_reset
        brax_resets = f", every env reset after {f'each {period} updates' if period > 1 else 'every update'}"
        brax_resets = brax_resets if period else ""
        presets[f"{prefix}-{env}-as-brax"] = (
            f"{env_prefix}{env} as {prefix}-{env}, with brax's PPO algorithm too: advantages estimated inside "
            f"{ppo.unroll_length}-step unrolls at every gradient step in brax's form, minibatches of whole unrolls, a "
            f"tanh-squashed Gaussian policy with a state-dependent deviation, lecun-uniform initialisation, brax's "
            f"unclipped observation normalisation{brax_resets}",
            {
                **presets[f"{prefix}-{env}"][1],
                **BRAX_ALGORITHM,
                "ppo.advantage_horizon": ppo.unroll_length,
                "env.reset_every": ppo.updates_per_reset,
            },
        )
        presets[f"{prefix}-{env}-cpu"] = (
            f"{env_prefix}{env} smoke run for a CPU: 16 envs x 32 steps, 4 epochs x 4 minibatches, 20 iterations, "
            f"32x32 nets, learning rate 1e-3, 8 evaluation episodes every 5 iterations, {family.default_pipeline}",
            {
                **task,
                "num_iterations": 20,
                "env.num_envs": 16,
                "env.num_steps": 32,
                "ppo.num_epochs": 4,
                "ppo.num_minibatches": 4,
                "ppo.learning_rate": 1e-3,
                "network.actor_hidden": (32, 32),
                "network.critic_hidden": (32, 32),
                "eval.every": 5,
            },
        )
    return presets


__all__ = [
    "BRAX_ALGORITHM",
    "BRAX_ESTIMATION",
    "BRAX_EVAL_EPISODES",
    "BRAX_OPTIMISER",
    "BRAX_POLICY",
    "BRAX_POLICY_HIDDEN",
    "BRAX_VALUE_HIDDEN",
    "ENV_FAMILIES",
    "PLAYGROUND_SUITE_ENVS",
    "BraxPPO",
    "EnvFamily",
    "family_presets",
]
