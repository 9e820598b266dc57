"""End-to-end properties of the training program on a tiny config (one shared compilation)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.conftest import tiny_config
from vaco_jax import run_sweep, seed_keys, stack_hparams
from vaco_jax.core.config import set_field


def _run(driver, ks, seeds, chunk_size=None):
    config = driver.program.config
    hparams = stack_hparams([set_field(config, "lag.k", k) for k in ks])
    keys = seed_keys(0, max(seeds) + 1)[np.asarray(seeds)]
    return driver.run(keys, hparams, chunk_size=chunk_size)


@pytest.fixture(scope="module")
def lag_runs(tiny_driver):
    """Runs at lag 0 and lag 4 (seed 0) and lag 0 again with seed 1, in one program."""
    return _run(tiny_driver, ks=[0, 4, 0], seeds=[0, 0, 1])


def test_metrics_are_per_iteration(lag_runs):
    config = tiny_config()
    for name, value in lag_runs.metrics.items():
        assert value.shape == (3, config.num_iterations), name
    expected = {
        "lag/mean",
        "tv/backward",
        "tv/forward",
        "tv/total",
        "tv/backward_exact",
        "tv/forward_exact",
        "tv/total_exact",
        "ppo/clip_frac",
        "kl/approx",
        "loss/policy",
        "loss/value",
        "loss/total",
        "entropy",
        "explained_variance",
        "grad_norm",
        "episode/return",
        "episode/length",
        "episode/count",
        "env/nonfinite_steps",
    }
    assert expected <= set(lag_runs.metrics)
    assert "env/reused_starts" not in lag_runs.metrics  # brax's start pool only: gymnax draws every start fresh


def test_zero_lag_gives_exactly_zero_backward_tv(lag_runs):
    for name in ("tv/backward", "tv/backward_exact"):
        assert np.all(lag_runs.metrics[name][0] == 0.0), name
        assert np.all(lag_runs.metrics["lag/mean"][0] == 0.0)


def test_forward_tv_is_the_total_tv_at_zero_lag_and_not_under_lag(lag_runs):
    """tv/forward estimates TV(pi_{T+1}, pi_T); at zero lag pi_T = beta, so it equals tv/total bit for bit."""
    m = lag_runs.metrics
    for suffix in ("", "_exact"):
        np.testing.assert_array_equal(m["tv/forward" + suffix][0], m["tv/total" + suffix][0])
        assert np.all(m["tv/forward" + suffix][0] > 0)
        assert np.all(m["tv/forward" + suffix][1][1:] != m["tv/total" + suffix][1][1:])


def test_stale_actor_groups_act_with_their_own_snapshots_normaliser():
    """Spec section 7: an actor k updates old acts with the normaliser statistics of its own snapshot.

    With a learning rate so small that no parameter moves, the only difference between the lagged
    actor and the learner is the normaliser: the backward TV must be clearly positive. (Were the stale
    groups given the learner's statistics, it would be ~1e-10: float noise of the unmoved parameters.)
    """
    config = tiny_config(num_iterations=4)
    config = config.replace(ppo=config.ppo.replace(learning_rate=1e-12), lag=config.lag.replace(k=2))
    assert config.env.normalize_observations
    tv = run_sweep(config, num_seeds=1).metrics["tv/backward_exact"][0]
    assert tv[0] == 0.0
    assert np.all(tv[1:] > 1e-5), tv


def test_lag_four_gives_positive_backward_tv(lag_runs):
    lag_mean = lag_runs.metrics["lag/mean"][1]
    np.testing.assert_array_equal(lag_mean, np.minimum(np.arange(6), 4))  # clamped early, then k
    tv = lag_runs.metrics["tv/backward"][1]
    assert tv[0] == 0.0  # iteration 0: the only snapshot is the learner's own
    assert np.all(tv[1:] > 0)
    assert np.all(lag_runs.metrics["tv/backward_exact"][1][1:] > 0)
    # the exact TVs are averages over the same states of per-state TVs, a metric: the triangle inequality
    # |forward - backward| <= total <= forward + backward holds at every iteration
    m = {name: lag_runs.metrics[name + "_exact"][1] for name in ("tv/total", "tv/forward", "tv/backward")}
    assert np.all(m["tv/total"] <= m["tv/forward"] + m["tv/backward"] + 1e-6)
    assert np.all(m["tv/total"] >= np.abs(m["tv/forward"] - m["tv/backward"]) - 1e-6)


def test_same_seed_is_deterministic_and_seeds_differ(tiny_driver, lag_runs):
    again = _run(tiny_driver, ks=[0, 4, 0], seeds=[0, 0, 1])
    for name in lag_runs.metrics:
        np.testing.assert_array_equal(lag_runs.metrics[name], again.metrics[name], err_msg=name)
    assert not np.allclose(lag_runs.metrics["loss/total"][0], lag_runs.metrics["loss/total"][2])


def test_vmapped_grid_equals_separate_runs(tiny_driver, lag_runs):
    for index, (k, seed) in enumerate([(0, 0), (4, 0), (0, 1)]):
        alone = _run(tiny_driver, ks=[k], seeds=[seed])
        for name in ("loss/total", "tv/backward", "episode/return", "grad_norm"):
            np.testing.assert_allclose(
                alone.metrics[name][0],
                lag_runs.metrics[name][index],
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{name} k={k} seed={seed}",
            )


def test_chunked_driver_equals_one_program_run(tiny_driver, lag_runs):
    chunked = _run(tiny_driver, ks=[0, 4, 0], seeds=[0, 0, 1], chunk_size=3)  # 2 chunks, 1 compile
    assert len(chunked.timings) == 2
    for name in lag_runs.metrics:
        np.testing.assert_array_equal(chunked.metrics[name], lag_runs.metrics[name], err_msg=name)
    jax.tree.map(np.testing.assert_array_equal, chunked.states.params, lag_runs.states.params)


def test_unbatched_jit_train_matches_driver(tiny_driver, lag_runs):
    program = tiny_driver.program
    state, metrics = jax.jit(program)(seed_keys(0, 1)[0])
    np.testing.assert_allclose(metrics["loss/total"], lag_runs.metrics["loss/total"][0], rtol=1e-5, atol=1e-6)
    assert int(state.iteration) == program.config.num_iterations


def test_sweep_result_has_named_axes():
    config = tiny_config(num_iterations=3)
    result = run_sweep(config, {"lag.k": [0, 2], "ppo.clip_eps": [0.1, 0.2, 0.3]}, num_seeds=2)
    assert result.axes == ("lag.k", "ppo.clip_eps", "seed", "iteration")
    assert result.metrics["tv/backward"].shape == (2, 3, 2, 3)
    point = result.sel(lag_k=2, ppo_clip_eps=0.3)
    np.testing.assert_array_equal(point["tv/backward"], result.metrics["tv/backward"][1, 2])
    same = result.sel(**{"lag.k": 2, "ppo.clip_eps": 0.3})  # the names result.axes prints
    np.testing.assert_array_equal(same["tv/backward"], point["tv/backward"])
    one_seed = result.sel(lag_k=2, ppo_clip_eps=0.3, seed=1)
    np.testing.assert_array_equal(one_seed["tv/backward"], result.metrics["tv/backward"][1, 2, 1])
    with pytest.raises(KeyError, match="seed=5 is not among the seeds"):
        result.sel(lag_k=2, ppo_clip_eps=0.3, seed=5)
    assert np.all(result.sel(lag_k=0, ppo_clip_eps=0.1)["tv/backward"] == 0)
    assert result.env_steps.dtype == np.int64 and result.env_steps[-1] == 3 * config.steps_per_iteration
    assert len(result.summary()) == 6


def test_make_train_keeps_the_config_except_resolved_backend_defaults():
    """The program's config is the given one with only the backend- and algorithm-dependent defaults filled in
    (the observation normaliser, the minibatch split)."""
    from vaco_jax import EnvConfig, make_train

    config = tiny_config(env=EnvConfig(num_envs=8, num_steps=16))  # normalize_observations=None, minibatch auto
    program = make_train(config)
    assert config.env.normalize_observations is None and config.ppo.minibatch == "auto"
    resolved = config.replace(env=config.env.replace(normalize_observations=False))
    assert program.config == resolved.replace(ppo=config.ppo.replace(minibatch="samples"))


def test_the_stop_decision_is_latched_once_per_chunk(tiny_driver):
    """A stop request is read once after a chunk: the state callbacks (the checkpointer) see the same decision as
    the loop, so a signal arriving between them can never end the run without a checkpoint where it stopped."""
    config = tiny_driver.program.config
    asked, seen = [], []

    def should_stop() -> bool:
        asked.append(True)
        return len(asked) >= 1  # true from the first question on

    def on_states(done, states, last):
        seen.append((done, last))

    out = tiny_driver.run(
        seed_keys(0, 1), stack_hparams([config]), chunk_size=2, should_stop=should_stop, state_callbacks=[on_states]
    )
    assert len(asked) == 1 and seen == [(2, True)]
    assert out.states.iteration.tolist() == [2]


class _CheckpointAt:
    """A state callback that is due at one iteration count only (as a checkpointer is every N iterations)."""

    def __init__(self, events: list, at: int):
        self.events, self.at = events, at

    def due(self, done: int, last: bool) -> bool:
        return last or done == self.at

    def __call__(self, done, states, last) -> None:
        self.events.append(("states", done))


@pytest.mark.parametrize("overlap", [True, False])
def test_the_next_chunk_is_dispatched_before_the_metric_callbacks_run(tiny_driver, overlap, monkeypatch):
    """Double buffering: after a chunk where no state callback is due, the next chunk is dispatched before the
    metric callbacks (progress, files) run, while the device works. Where one is due (a checkpoint) and at the end,
    the order is serial: metrics first, then the states that follow them, then the next chunk. overlap=False is
    serial everywhere; both give the same numbers."""
    config = tiny_driver.program.config  # 6 iterations: chunks of 2 end at 2, 4, 6
    events: list[tuple[str, int]] = []
    compiled_chunk = tiny_driver.compiled_chunk

    def logged(states, hparams, num_iterations):
        compiled, seconds = compiled_chunk(states, hparams, num_iterations)
        events.append(("dispatch", 2 * len([e for e in events if e[0] == "dispatch"])))
        return compiled, seconds

    monkeypatch.setattr(tiny_driver, "compiled_chunk", logged)
    out = tiny_driver.run(
        seed_keys(0, 1),
        stack_hparams([config]),
        chunk_size=2,
        callbacks=[lambda done, metrics: events.append(("metrics", done))],
        state_callbacks=[_CheckpointAt(events, at=4)],
        overlap=overlap,
    )
    first = (
        [("states", 2), ("dispatch", 2), ("metrics", 2)]
        if overlap
        else [("metrics", 2), ("states", 2), ("dispatch", 2)]
    )
    serial = [("metrics", 4), ("states", 4), ("dispatch", 4), ("metrics", 6), ("states", 6)]
    assert events == [("dispatch", 0), *first, *serial]
    assert len(out.gaps) == 2 and len(out.timings) == 3 and out.states.iteration.tolist() == [6]
    monkeypatch.undo()
    reference = tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), chunk_size=2, overlap=not overlap)
    np.testing.assert_array_equal(out.metrics["loss/total"], reference.metrics["loss/total"])


def test_a_run_takes_its_loop_options_as_one_record_or_as_its_fields(tiny_driver):
    """Driver.run, run_sweep and run_plan take one options record (LoopOptions, SweepOptions) or its fields as
    keywords; keywords replace the record's fields; the two forms train the same; a misspelt option, a record of
    the wrong kind and a sweep told not to keep its metrics are refused, naming what to give."""
    from vaco_jax import LoopOptions, SweepOptions

    config = tiny_driver.program.config  # 6 iterations
    seen: list[int] = []
    options = LoopOptions(chunk_size=2, callbacks=[lambda done, metrics: seen.append(done)])
    as_record = tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), options=options)
    assert seen == [2, 4, 6]
    seen.clear()
    replaced = tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), options=options, chunk_size=3)
    assert seen == [3, 6]  # the keyword replaced the record's chunk size, the record's callback stayed
    as_keywords = tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), chunk_size=2)
    np.testing.assert_array_equal(as_record.metrics["loss/total"], as_keywords.metrics["loss/total"])
    assert replaced.states.iteration.tolist() == [6]

    sweep_options = SweepOptions(chunk_size=2, driver=tiny_driver, progress=False)
    swept = run_sweep(config, options=sweep_options)
    np.testing.assert_array_equal(swept.metrics["loss/total"], as_keywords.metrics["loss/total"])

    with pytest.raises(TypeError, match="Driver.run.*'chunk_sise'.*chunk_size, callbacks"):
        tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), chunk_sise=2)
    with pytest.raises(TypeError, match="run_sweep.*'progres'.*metrics_dir, progress"):
        run_sweep(config, progres=False)
    with pytest.raises(TypeError, match="takes a LoopOptions, not a SweepOptions"):
        tiny_driver.run(seed_keys(0, 1), stack_hparams([config]), options=sweep_options)
    with pytest.raises(TypeError, match="give metrics_dir instead"):
        SweepOptions(keep_metrics=False)


def test_chunk_plan_evens_chunks_out_so_a_run_compiles_one_program():
    from vaco_jax.training.driver import chunk_plan

    assert chunk_plan(100, 30) == [25] * 4  # not 30, 30, 30, 10: one chunk length, one compiled program
    assert chunk_plan(250, 100) == [50] * 5 and chunk_plan(60, 20) == [20] * 3 and chunk_plan(6, 4) == [3, 3]
    assert chunk_plan(7, 3) == [3, 3, 1]  # a prime total: no even split, a shorter last chunk
    assert chunk_plan(5, None) == [5] and chunk_plan(6, 100) == [6] and chunk_plan(0, 3) == []
    for total in range(1, 60):
        for size in range(1, 12):
            plan = chunk_plan(total, size)
            assert sum(plan) == total and max(plan) <= size and len(set(plan)) <= 2


def test_a_resumed_run_keeps_the_chunk_boundaries_of_the_uninterrupted_one():
    """Resumed at a chunk boundary of the whole run's plan, the rest runs with the same chunk programs (7 in chunks of
    3: 3, 3, 1, so a resume at 3 runs 3, 1, not the 2, 2 that 4 iterations alone would take: programs of other scan
    lengths may round differently, and the resume would no longer be exact); off the plan's boundaries, the
    remainder's own plan."""
    from vaco_jax.training.driver import chunk_plan, remaining_chunk_plan

    assert chunk_plan(4, 3) == [2, 2]
    assert remaining_chunk_plan(3, 4, 3) == [3, 1] and remaining_chunk_plan(6, 1, 3) == [1]
    assert remaining_chunk_plan(0, 7, 3) == [3, 3, 1] and remaining_chunk_plan(25, 75, 30) == [25, 25, 25]
    assert remaining_chunk_plan(2, 5, 3) == chunk_plan(5, 3)  # 2 is no boundary of 3, 3, 1
    for first in range(0, 20):
        for total in range(1, 30):
            plan = remaining_chunk_plan(first, total, 4)
            assert sum(plan) == total and max(plan) <= 4


def test_the_drivers_compiler_options_reach_xla():
    """``Driver(compiler_options=...)`` is handed to XLA for both programs: an option XLA does not know is refused
    when the init program and when the chunk program compile, and a known one is accepted."""
    from vaco_jax import Driver, TrainProgram
    from vaco_jax.training.memory import abstract_batch

    program = TrainProgram(tiny_config(num_iterations=1))
    keys, hparams = seed_keys(0, 1), stack_hparams([program.config])
    unknown = Driver(program, compiler_options={"no_such_xla_option": 1})
    with pytest.raises(Exception, match="no_such_xla_option"):
        unknown.init(keys, hparams)
    with pytest.raises(Exception, match="no_such_xla_option"):
        unknown.lower_chunk(*abstract_batch(program, 1), 1).compile()
    Driver(program, compiler_options={"xla_backend_optimization_level": 3}).init(keys, hparams)
