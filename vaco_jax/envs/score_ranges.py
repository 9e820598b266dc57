"""Each task's score range, from a uniform-random policy's return to the best return known: what a normalised score
(0 at chance, 1 at the best known) and an equivalence margin in percent (``vaco-jax compare --margin 5%``) are
measured on. The lag benchmark's equivalence marks and its aggregate over tasks use the same table."""

from __future__ import annotations

SCORE_RANGES: dict[str, tuple[float, float]] = {
    "CartPole-v1": (22.0, 500.0),
    "Acrobot-v1": (-499.0, -60.0),
    "Pendulum-v1": (-1217.0, -130.0),
    "Breakout-MinAtar": (0.4, 28.0),
    "brax/reacher": (-837.0, 0.0),
    "brax/inverted_double_pendulum": (252.0, 9360.0),
    "brax/hopper": (126.0, 3800.0),
    "Catch-bsuite": (-0.61, 1.0),
}
"""(a uniform-random policy's return, the best return known) per env name; fixed on 2026-12-05, before any cell of
the lag benchmark's rerun on the PPO parity defaults was made. The bottom: :func:`vaco_jax.envs.random_policy_return`
(64 envs x 1000 steps, seed 0), rounded. The top: the task's maximum (CartPole-v1 500) or gymnax's documented PPO
return (Pendulum-v1 -130, Breakout-MinAtar 28), the PPO parity benchmark's -60 on Acrobot-v1 (gymnax documents -80),
and for brax where no return at this episode length is documented, the reward's bound (reacher: 0, no distance and
no action; the inverted double pendulum: 1000 steps of its largest alive reward, 9.36) or gymnasium's Hopper
threshold (3800); Catch-bsuite's maximum, 1. Envs not listed have no known range here."""


def score_range(env_name: str) -> tuple[float, float] | None:
    """``env_name``'s range in :data:`SCORE_RANGES` (a ``gymnax/`` prefix is the same env), or None."""
    return SCORE_RANGES.get(env_name.removeprefix("gymnax/"))


__all__ = ["SCORE_RANGES", "score_range"]
