"""vaco-jax tune: knobs parsed and checked, trials drawn as the benchmark draws them, ranked by the mean score over
seeds (a diverged run the worst), and the winner written as a config file that train --config trains."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

from vaco_jax.cli import main
from vaco_jax.core.config import Config, ConfigError, config_dict
from vaco_jax.core.config_file import read_config_file
from vaco_jax.runs import search as search_module
from vaco_jax.runs.search import Knob, SearchResult, draw_trials, search_config


def test_a_knob_is_parsed_with_its_scale_and_refused_where_a_search_cannot_draw_it():
    config = Config()
    assert Knob.parse("ppo.learning_rate=1e-4:3e-3", config) == Knob("ppo.learning_rate", 1e-4, 3e-3, True)
    assert Knob.parse("--ppo.ent-coef=0:0.02:linear", config) == Knob("ppo.ent_coef", 0.0, 0.02, False)
    for spec, fragment in [
        ("ppo.learning_rate", "must look like FIELD=LOW:HIGH"),
        ("ppo.learning_rate=1e-4:3e-3:cubic", "must look like FIELD=LOW:HIGH"),
        ("ppo.learnin_rate=1e-4:3e-3", "no config field is called ppo.learnin_rate"),
        ("ppo.num_epochs=1:8", "ppo.num_epochs is static"),
        ("lag.k=0:4", "lag.k is int"),
        ("ppo.ent_coef=0:0.02", "a log-uniform range needs LOW > 0; add :linear"),
        ("ppo.learning_rate=3e-3:1e-4", "needs finite LOW < HIGH"),
        ("ppo.learning_rate=a:b", "LOW and HIGH must be numbers"),
    ]:
        with pytest.raises(ConfigError, match=fragment.replace("+", r"\+")):
            Knob.parse(spec, config)


def test_trials_are_drawn_in_range_on_their_scale_from_the_search_seed_alone():
    knobs = [Knob("ppo.learning_rate", 1e-4, 1e-2, True), Knob("ppo.ent_coef", 0.0, 0.02, False)]
    trials = draw_trials(knobs, 2000, seed=3)
    assert trials == draw_trials(knobs, 2000, seed=3) and trials != draw_trials(knobs, 2000, seed=4)
    rates = np.array([t["ppo.learning_rate"] for t in trials])
    entropy = np.array([t["ppo.ent_coef"] for t in trials])
    assert rates.min() >= 1e-4 and rates.max() <= 1e-2 and entropy.min() >= 0 and entropy.max() <= 0.02
    # log-uniform: half the draws below the geometric midpoint 1e-3; uniform: half below the arithmetic one
    assert abs(np.mean(rates < 1e-3) - 0.5) < 0.05 and abs(np.mean(entropy < 0.01) - 0.5) < 0.05
    rng = random.Random(3)  # the reference: one sampler, each knob drawn in order, trial after trial
    first = math.exp(rng.uniform(math.log(1e-4), math.log(1e-2))), rng.uniform(0.0, 0.02)
    assert (trials[0]["ppo.learning_rate"], trials[0]["ppo.ent_coef"]) == pytest.approx(first)


def test_trials_are_ranked_by_their_mean_over_seeds_and_a_diverged_run_is_the_worst():
    knob = Knob("ppo.learning_rate", 1e-4, 1e-2)
    points = [{"ppo.learning_rate": v} for v in (1e-4, 1e-3, 1e-2)]
    scores = np.array([[10.0, 30.0], [25.0, 24.0], [200.0, np.nan]])  # trial 2 is best but for a NaN run
    result = SearchResult(Config(), (knob,), points, [0, 1], scores, "learner", 0)
    assert result.ranking() == [1, 0, 2]
    assert result.winner == points[1] and result.winner_config().ppo.learning_rate == 1e-3
    rows = result.rows()
    assert [r["trial"] for r in rows] == [1, 0, 2] and rows[0]["mean"] == pytest.approx(24.5)
    assert result.table().splitlines()[2].split()[:3] == ["1", "1", "0.001"]


def test_a_learner_scored_search_evaluates_unless_told_when():
    assert search_config(Config(num_iterations=50), "learner").eval.every == 5
    assert (
        search_config(Config(num_iterations=50).replace(eval=Config().eval.replace(every=7)), "learner").eval.every == 7
    )
    assert search_config(Config(num_iterations=50), "train").eval.every == 0


def test_tune_ranks_the_trials_and_writes_a_winner_that_train_config_reads(tmp_path, capsys, monkeypatch):
    """End to end at CI size: two trials x two seeds, split into two programs of two runs (--runs-per-program, as a
    search too big for the device is split)."""
    out = tmp_path / "tune"
    argv = [
        "tune",
        "--knob",
        "ppo.learning_rate=1e-4:1e-2",
        "ppo.clip_eps=0.1:0.3:linear",
        "--trials",
        "2",
        "--num-seeds",
        "2",
        "--num-iterations",
        "4",
        "--env.num-envs",
        "4",
        "--env.num-steps",
        "8",
        "--network.actor-hidden",
        "8",
        "--network.critic-hidden",
        "8",
        "--eval.every",
        "2",
        "--eval.episodes",
        "2",
        "--runs-per-program",
        "2",
        "--out-dir",
        str(out),
    ]
    driven = []  # what the search hands the driver: the split reaches the programs, not only the message
    run = search_module.Driver.run
    monkeypatch.setattr(search_module.Driver, "run", lambda self, *a, **kw: driven.append(kw) or run(self, *a, **kw))
    assert main(argv) == 0
    assert [kw["runs_per_program"] for kw in driven] == [2]
    printed = capsys.readouterr().out
    assert "2 trials x 2 seeds vmapped" in printed and "vaco-jax train --config" in printed
    split = "split into 2 programs of 2 runs, run back to back (--runs-per-program 2)"
    assert split in printed
    search = json.loads((out / "search.json").read_text())
    assert search["programs"] == split
    means = {t["trial"]: np.mean(t["scores"]) for t in search["trials"]}
    assert [t["trial"] for t in search["trials"]] == sorted(means, key=lambda t: -means[t])
    assert search["winner"]["trial"] == search["trials"][0]["trial"]
    winner = read_config_file(out / "winner.json")
    assert winner.is_run_record
    assert winner.config.ppo.learning_rate == search["winner"]["point"]["ppo.learning_rate"]
    assert config_dict(winner.config)["ppo"]["clip_eps"] == search["winner"]["point"]["ppo.clip_eps"]
    assert winner.config.eval.every == 2 and winner.config.num_iterations == 4
    assert main(argv) == 2  # results there: refused without --overwrite
    assert "--overwrite" in capsys.readouterr().err
