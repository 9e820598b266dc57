"""Diagnostic levels (config.diagnostics): lean and off log less, compute less, and train exactly as full does."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.conftest import tiny_config
from vaco_jax import Driver, TrainProgram, seed_keys, stack_hparams
from vaco_jax.core.config import ConfigError, set_field
from vaco_jax.numerics.diagnostics import ALWAYS_KEPT

LEVELS = ("full", "lean", "off")


@pytest.fixture(scope="module")
def runs():
    """Two seeds of the tiny config at every level (one compiled program each), with the chunk's compiled HLO."""
    made = {}
    for level in LEVELS:
        config = set_field(tiny_config(num_iterations=4), "diagnostics", level)
        driver = Driver(TrainProgram(config))
        hparams = stack_hparams([config] * 2)
        out = driver.run(seed_keys(0, 2), hparams, chunk_size=4)
        hlo = driver.lower_chunk(out.states, hparams, 4).compile().as_text()
        made[level] = (out, hlo)
    return made


def test_each_level_logs_what_it_says(runs):
    full, lean, off = (set(runs[level][0].metrics) for level in LEVELS)
    assert off == set(ALWAYS_KEPT)
    assert set(ALWAYS_KEPT) < {"loss/total", "entropy", "lag/mean", *ALWAYS_KEPT} <= lean < full
    assert not {"tv/backward", "tv/forward", "kl/update", "grad_norm", "ppo/clip_frac", "explained_variance"} & lean


def test_fewer_diagnostics_train_the_same_runs(runs):
    """What the runs learn does not depend on what they log: every kept metric and the final state are the full
    level's, to float rounding of a differently fused program."""
    reference, _ = runs["full"]
    for level in ("lean", "off"):
        out, _ = runs[level]
        for name, values in out.metrics.items():
            np.testing.assert_allclose(values, reference.metrics[name], rtol=1e-5, atol=1e-6, err_msg=f"{level} {name}")
        for got, want in zip(jax.tree.leaves(out.states.params), jax.tree.leaves(reference.states.params), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_what_is_not_logged_is_not_computed(runs):
    """The compiled chunk shrinks: the forward pass of pi_{T+1}, the TVs and the per-step statistics are gone."""
    sizes = {level: len(runs[level][1].splitlines()) for level in LEVELS}
    assert sizes["off"] <= sizes["lean"] < sizes["full"], sizes


def test_an_adaptive_algorithm_keeps_what_it_adapts_to():
    """GePPO's step size watches the update's TV: lean keeps that TV (it is computed anyway) and the step size."""
    config = set_field(tiny_config(num_iterations=2, algorithm="geppo"), "diagnostics", "lean")
    names = set(jax.eval_shape(TrainProgram(config), jax.random.key(0))[1])
    assert {"tv/forward_exact", "geppo/lr_scale"} <= names and "tv/backward" not in names


def test_an_unknown_level_is_a_clear_error():
    with pytest.raises(ConfigError, match="diagnostics='verbose' is unknown"):
        TrainProgram(set_field(tiny_config(), "diagnostics", "verbose"))


def test_the_documented_cost_of_the_diagnostics_is_the_committed_measurement():
    import json
    from pathlib import Path

    from tests.conftest import committed_table

    block, table = committed_table("diagnostics_levels.json", "diagnostics levels")
    assert block == table
    payload = json.loads(
        (Path(__file__).resolve().parents[1] / "benchmarks/results/diagnostics_levels.json").read_text()
    )
    for rows in payload["blocks"].values():
        finals = {r["final_return"] for r in rows if r["program"].startswith("vaco_jax")}
        assert len(finals) == 1  # every level trained the same runs
