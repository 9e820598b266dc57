"""The environment's config group: which env, the batch shape (environments x steps per rollout), how observations
are normalised, time limits, and how brax's and Playground's episodes restart. :class:`vaco_jax.core.config.Config`
holds one (and re-exports it)."""

from __future__ import annotations

from typing import Literal

from flax import struct

from vaco_jax.core.config_fields import check, check_choice, check_number, check_positive_integer, static

NORMALIZER_UPDATES = ("after", "before")
NORMALIZER_FORMS = ("clipped", "brax")
START_STATES = ("fresh", "cached")


def check_no_pool_beside_cached_starts(start_states: str, start_pool: int | None) -> None:
    """Refuse a start pool given beside ``env.start_states=cached``, which restarts from cached states and draws none
    (the config's check and the brax adapter's, for a ``BraxEnv`` built directly)."""
    check(
        start_states == "fresh" or not start_pool,
        f"env.start_states=cached restarts every episode from its environment's cached start state and draws no "
        f"start pool: leave env.start_pool unset (it is {start_pool})",
    )


@struct.dataclass
class EnvConfig:
    """Environment and batch shape."""

    name: str = static("CartPole-v1")
    """Environment id: a gymnax id (CartPole-v1, Pendulum-v1, Acrobot-v1), brax/<name> (brax/ant, brax/hopper) or
    playground/<Env>, MuJoCo Playground's DM Control Suite (playground/CartpoleBalance)."""
    num_envs: int = static(64)
    """Environments stepped in parallel per run."""
    num_steps: int = static(128)
    """Rollout length per iteration (T)."""
    normalize_observations: bool | None = static(None)
    """Running mean/variance observation normalisation (part of the actor snapshot). None: the backend's default,
    chosen by measurement (benchmarks/studies/normalization.py): off for gymnax, on for brax (and Playground)."""
    normalizer_update: Literal["after", "before"] = static("before")
    """When the observation statistics absorb an iteration's observations: before the gradient steps (as brax's
    PPO: the update, its critic values and the new snapshot all use statistics that include the batch; the
    default, chosen by measurement: benchmarks/studies/normalizer_order.py) or after them (the update trains with the
    statistics its batch was collected under; the order before this option existed)."""
    normalizer_form: Literal["clipped", "brax"] = static("clipped")
    """How a normalised observation is formed: clipped, (obs - mean) / sqrt(var + 1e-8) clipped to [-10, 10]; or
    brax, as brax's PPO normalises: (obs - mean) / std, unclipped, std kept within [1e-6, 1e6]."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before advantage estimation (returns are reported raw)."""
    episode_length: int = static(0)
    """Time limit in env steps, after which an episode is truncated (0: the env's own; brax: 1000; Playground: its
    config's, 1000 for the DM Control Suite)."""
    bootstrap_on_truncation: bool = static(True)
    """Bootstrap from V(s') where an episode is truncated (its time limit): a time limit is not a terminal state.
    false: a truncation ends the return like a termination, as PureJaxRL's and CleanRL's ppo.py (and brax's
    bootstrap_on_timeout=False) do."""
    action_repeat: int = static(1)
    """brax and Playground only: env steps per agent step (the action is held, rewards are summed)."""
    backend: str = static("")
    """brax: physics pipeline, one of generalized, positional, spring, mjx ('': this package's default for the env,
    spring where it runs, the fastest measured; brax's own default is generalized, its training notebook's
    positional, which the brax-<env> presets set). Playground: MJX's implementation, jax ('': every device) or warp
    (MuJoCo Warp, an NVIDIA GPU; Playground's own default)."""
    start_pool: int | None = static(None)
    """brax and Playground only: fresh start states drawn once per rollout, handed in order to the episodes that end
    in it (None: four per environment, chosen by measurement: benchmarks/speed/start_pool.py; 0: no pool, a fresh
    reset for every environment at every step, as before this option existed). Past the pool's end starts are
    reused and counted in the metric env/reused_starts."""
    start_states: Literal["fresh", "cached"] = static("fresh")
    """brax and Playground only: where a finished episode restarts. fresh: a new random start state (from the start
    pool); cached: the start state its environment got at its last reset (the run's first, or env.reset_every's), as
    the auto-reset of brax's and Playground's training does: every training episode then starts from one of num_envs
    fixed states. Evaluation episodes always start fresh."""
    reset_every: int = static(0)
    """Reset every environment after each reset_every-th iteration, abandoning the episodes in progress (never
    scored: their returns are not completed ones); 0: never, an env resets only where its episode ends. brax's
    num_resets_per_eval does this between its epochs: MuJoCo Playground's DM Control Suite config resets after every
    update at 6e7 env steps (reset_every 1; every second one at 1e8), so its training episodes never reach their
    time limit."""

    def check(self) -> None:
        check_positive_integer("env.num_envs", self.num_envs)
        check_positive_integer("env.num_steps", self.num_steps)
        check(
            isinstance(self.episode_length, int) and self.episode_length >= 0,
            f"env.episode_length={self.episode_length!r} must be an integer >= 0 (0: the environment's own limit)",
        )
        check(
            self.normalize_observations in (None, True, False),
            f"env.normalize_observations={self.normalize_observations!r} must be true, false or None (backend default)",
        )
        check_choice("env.normalizer_update", self.normalizer_update, NORMALIZER_UPDATES)
        check_choice("env.normalizer_form", self.normalizer_form, NORMALIZER_FORMS)
        check(
            isinstance(self.bootstrap_on_truncation, bool),
            f"env.bootstrap_on_truncation={self.bootstrap_on_truncation!r} must be true or false",
        )
        check(
            isinstance(self.action_repeat, int) and self.action_repeat >= 1,
            f"env.action_repeat={self.action_repeat!r} must be a positive integer",
        )
        check(
            self.start_pool is None or (isinstance(self.start_pool, int) and self.start_pool >= 0),
            f"env.start_pool={self.start_pool!r} must be a non-negative integer (0: a fresh reset at every step) or "
            "None",
        )
        check_choice("env.start_states", self.start_states, START_STATES)
        check_no_pool_beside_cached_starts(self.start_states, self.start_pool)
        check(
            type(self.reset_every) is int and self.reset_every >= 0,
            f"env.reset_every={self.reset_every!r} must be an integer >= 0 (iterations between resets; 0: never)",
        )
        check_number("env.reward_scale", self.reward_scale, low=0, low_open=True)
