"""Test configuration: strict rank promotion, a persistent compilation cache, shared compiled programs, and XLA's
cheapest code generation by default.

Most tests run a few iterations of a tiny config: compiling is most of their time. Two XLA flags halve it
(:data:`SMOKE_COMPILE_FLAGS`: the backend optimisation off, and XLA:CPU's older loop emitters instead of its MLIR
fusion emitters, about 2x less compile time on this project's programs for the same step time; measured on the
tiny config, 2.1 s -> 1.0 s). The tests whose time is in the steps (the learning tests) and those that compare
numbers recorded by default-compiled programs (the golden metrics) compile with :data:`FULL_OPTIMISATION`, what
every user's program gets. The flags reach the notebook kernels and CLI subprocesses through the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

VERIFIED_JAXLIBS = ("0.10.2",)  # the jaxlib versions whose XLA is known to take every flag below


def _xla_accepts(flag: str) -> bool:
    """Whether this jaxlib's XLA takes ``flag``: an unknown flag in XLA_FLAGS aborts the process, so a jaxlib not
    in :data:`VERIFIED_JAXLIBS` is asked in a subprocess first."""
    import subprocess
    import sys
    from importlib import metadata

    if metadata.version("jaxlib") in VERIFIED_JAXLIBS:
        return True
    probe = [sys.executable, "-c", "import jax; jax.devices('cpu')"]
    return subprocess.run(probe, env={**os.environ, "XLA_FLAGS": flag}, capture_output=True).returncode == 0


SMOKE_COMPILE_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")
FULL_OPTIMISATION = {"xla_backend_optimization_level": 3}  # XLA's default level (and emitters, where set below)
for _flag in SMOKE_COMPILE_FLAGS:  # set before jax starts its backend; a flag already in XLA_FLAGS wins
    _name = _flag.split("=")[0]
    if _name not in os.environ.get("XLA_FLAGS", "") and _xla_accepts(_flag):
        os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_flag}".strip()
if "--xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", ""):
    FULL_OPTIMISATION["xla_cpu_use_fusion_emitters"] = True  # XLA's default emitters back for a user's programs

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")
_cache = Path(os.environ.get("VACO_JAX_TEST_CACHE", Path(__file__).resolve().parents[1] / ".jax_cache"))
jax.config.update("jax_compilation_cache_dir", str(_cache))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.3)
# the CLI runs in subprocesses (Ctrl-C, kill and resume tests) share the cache: they compile the programs the
# in-process reference runs compiled
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(_cache))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.3")

from vaco_jax import Config, Driver, EnvConfig, LagConfig, NetworkConfig, PPOConfig, TrainProgram  # noqa: E402
from vaco_jax.runs.render import offscreen_gl_by_default  # noqa: E402

offscreen_gl_by_default()  # as vaco-jax render does: MuJoCo's renderer off screen, before anything imports MuJoCo


def optimised_driver(config: Config) -> Driver:
    """A driver compiled as a user's is (:data:`FULL_OPTIMISATION`): for tests whose time is in the steps."""
    return Driver(TrainProgram(config), compiler_options=FULL_OPTIMISATION)


def documentation_blocks(start: str, end: str) -> list[str]:
    """The text between the markers ``start`` and ``end`` (stripped) in every page of the documentation that
    quotes it (README.md and docs/*.md); at least one must."""
    root = Path(__file__).resolve().parents[1]
    blocks = []
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = page.read_text()
        if start in text and end in text:
            blocks.append(text[text.index(start) + len(start) : text.index(end)].strip())
    assert blocks, f"no page of the documentation holds {start} ... {end}"
    return blocks


def documentation_block(start: str, end: str) -> str:
    """:func:`documentation_blocks`, which must all be the same (a table quoted twice is quoted alike)."""
    blocks = documentation_blocks(start, end)
    assert all(block == blocks[0] for block in blocks), f"the pages quote {start} differently"
    return blocks[0]


def committed_table(results: str, marker: str) -> tuple[str, str]:
    """(the documentation's block between ``<!-- marker: start -->`` and ``<!-- marker: end -->``, the ``table`` of
    the committed results file ``benchmarks/results/<results>``), both stripped: a quoted figure and its source."""
    import json

    from benchmarks.common.provenance import block_markers

    root = Path(__file__).resolve().parents[1]
    block = documentation_block(*block_markers(marker))
    return block, json.loads((root / "benchmarks" / "results" / results).read_text())["table"].strip()


def tiny_config(**overrides) -> Config:
    """A CartPole config small enough that compilation dominates (shared by many tests)."""
    config = Config(
        num_iterations=6,
        env=EnvConfig(num_envs=8, num_steps=16, normalize_observations=True),
        network=NetworkConfig(actor_hidden=(16, 16), critic_hidden=(16, 16)),
        ppo=PPOConfig(num_epochs=2, num_minibatches=2, learning_rate=3e-3),
        lag=LagConfig(max_lag=4, num_actors=2, k=0),
    )
    return config.replace(**overrides)


@pytest.fixture(scope="session")
def tiny_driver() -> Driver:
    """One compiled driver for the tiny config, shared by every test that can use it."""
    return Driver(TrainProgram(tiny_config()))


def rollout_with_lags(program: TrainProgram, state, lags, *, num_steps: int | None = None, key: int = 1):
    """The rollout of ``state``'s iteration, actor group g acting with the snapshot ``lags[g]`` iterations old."""
    import jax.numpy as jnp

    from vaco_jax.core.types import ActorSnapshot
    from vaco_jax.numerics import lag
    from vaco_jax.training.rollout import collect_rollout

    lags = jnp.asarray(lags, jnp.int32)
    *_, rollout = collect_rollout(
        program.env,
        program.networks,
        program.dist,
        lag.gather(state.lag_buffer, state.iteration - lags),
        ActorSnapshot(state.params.actor, state.obs_norm),
        lags,
        state.env_state,
        state.observations,
        state.episode_stats,
        jax.random.key(key),
        num_steps=num_steps or program.config.env.num_steps,
    )
    return rollout
