"""Running observation normalisation against moments computed from all the data at once (float64)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from vaco_jax.numerics import normalization


def _pooled_moments(batches, prior_count=1e-4):
    """Mean and (population) variance of the prior pseudo-data (count 1e-4, mean 0, variance 1) and every batch
    pooled, from raw moments: E[x] and E[x^2] weighted by counts (a different route from the parallel update)."""
    counts = [prior_count] + [len(b) for b in batches]
    means = [np.zeros(batches[0].shape[1])] + [b.mean(axis=0) for b in batches]
    second = [np.ones(batches[0].shape[1])] + [(b**2).mean(axis=0) for b in batches]  # prior: var 1 + mean^2 0
    total = sum(counts)
    mean = sum(c * m for c, m in zip(counts, means, strict=True)) / total
    return mean, sum(c * s for c, s in zip(counts, second, strict=True)) / total - mean**2, total


def test_update_merges_batches_into_the_pooled_mean_and_variance():
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=3.0, scale=s, size=(n, 4)) for n, s in ((50, 2.0), (7, 0.5), (200, 5.0))]
    state = normalization.init(4)
    for batch in batches:
        state = normalization.update(state, jnp.asarray(batch, jnp.float32).reshape(-1, 1, 4))  # leading axes flatten
    mean, var, count = _pooled_moments([b.astype(np.float32).astype(np.float64) for b in batches])
    np.testing.assert_allclose(state.mean, mean, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state.var, var, rtol=1e-4)
    np.testing.assert_allclose(float(state.count), count, rtol=1e-6)


def test_normalize_standardises_and_clips():
    state = normalization.init(2)
    state = state.replace(mean=jnp.array([1.0, -2.0]), var=jnp.array([4.0, 0.25]))
    obs = jnp.array([[3.0, -2.0], [1.0, 100.0]])
    expected = np.array([[2.0 / np.sqrt(4.0 + 1e-8), 0.0], [0.0, 10.0]])  # 102 / 0.5 clipped to 10
    np.testing.assert_allclose(normalization.normalize(state, obs), expected, rtol=1e-6)


def test_the_brax_form_is_unclipped_with_its_deviation_kept_within_brax_bounds():
    """env.normalizer_form=brax, written out from brax's running_statistics.normalize: (obs - mean) / std, no clip,
    std = sqrt(var) kept within [1e-6, 1e6]; the default form clips where this one does not."""
    state = normalization.init(3)
    state = state.replace(mean=jnp.array([1.0, -2.0, 0.0]), var=jnp.array([4.0, 0.25, 1e-16]))
    obs = jnp.array([[3.0, -2.0, 0.0], [1.0, 100.0, 1e-7]])
    expected = np.array([[2.0 / 2.0, 0.0, 0.0], [0.0, 102.0 / 0.5, 1e-7 / 1e-6]])  # 204: no clip; std floored at 1e-6
    np.testing.assert_allclose(normalization.normalize(state, obs, "brax"), expected, rtol=1e-6)
    huge = state.replace(var=jnp.array([1e14, 1.0, 1.0]))
    np.testing.assert_allclose(normalization.normalize(huge, jnp.array([[2e6 + 1.0, 0.0, 0.0]]), "brax")[0, 0], 2.0)
    assert float(normalization.normalize(state, obs)[1, 1]) == 10.0  # the default clips
    with pytest.raises(ValueError, match="normalizer form 'tanh' is unknown"):
        normalization.normalize(state, obs, "tanh")


def test_the_brax_form_reaches_the_networks_and_needs_normalised_observations():
    from tests.conftest import tiny_config
    from vaco_jax import TrainProgram
    from vaco_jax.core.config import ConfigError

    config = tiny_config()
    program = TrainProgram(config.replace(env=config.env.replace(normalizer_form="brax")))
    assert program.networks.normalizer_form == "brax" and TrainProgram(config).networks.normalizer_form == "clipped"
    raw = config.replace(env=config.env.replace(normalize_observations=False, normalizer_form="brax"))
    with pytest.raises(ConfigError, match="env.normalizer_form=brax shapes normalised observations"):
        TrainProgram(raw)


def test_the_normaliser_can_absorb_the_batch_before_the_update_as_brax_does():
    """env.normalizer_update=before: the same statistics enter the new snapshot (the same batch was absorbed), but
    the gradient steps ran under them, so the parameters differ from the other order's; without normalisation
    the option changes nothing, bit for bit."""
    import jax

    from tests.conftest import tiny_config
    from vaco_jax import Driver, TrainProgram, seed_keys, stack_hparams

    def final(config):
        out = Driver(TrainProgram(config)).run(seed_keys(0, 1), stack_hparams([config]))
        return out.states

    after = tiny_config(num_iterations=1)
    after = after.replace(env=after.env.replace(normalizer_update="after"))
    before = after.replace(env=after.env.replace(normalizer_update="before"))
    a, b = final(after), final(before)
    jax.tree.map(np.testing.assert_array_equal, a.obs_norm, b.obs_norm)
    differences = [
        float(np.abs(x - y).max()) for x, y in zip(jax.tree.leaves(a.params), jax.tree.leaves(b.params), strict=True)
    ]
    assert max(differences) > 1e-6

    plain = after.replace(env=after.env.replace(normalize_observations=False))
    plain_before = plain.replace(env=plain.env.replace(normalizer_update="before"))
    jax.tree.map(np.testing.assert_array_equal, final(plain).params, final(plain_before).params)


def test_an_unknown_normaliser_order_is_a_clear_error():
    from tests.conftest import tiny_config
    from vaco_jax.core.config import ConfigError
    from vaco_jax.core.validation import validate

    config = tiny_config()
    with pytest.raises(ConfigError, match="env.normalizer_update='during' is unknown; choose one of after, before"):
        validate(config.replace(env=config.env.replace(normalizer_update="during")))


def test_the_readme_normaliser_order_table_is_the_committed_measurement():
    """The README's order figures come from benchmarks/results/normalization/normalizer_order.json, and the default
    is the order that measurement found better."""
    import json
    from pathlib import Path

    from tests.conftest import committed_table
    from vaco_jax import EnvConfig

    block, table = committed_table("normalization/normalizer_order.json", "normalizer order")
    assert block == table
    root = Path(__file__).resolve().parents[1]
    payload = json.loads((root / "benchmarks/results/normalization/normalizer_order.json").read_text())
    assert payload["verdict"]["better"] == EnvConfig().normalizer_update == "before"
