"""The parity benchmark's verdict (equivalent / better / worse / undecided) and the committed parity table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.studies.ppo_parity import TASKS, parity_verdict, task_config

ROOT = Path(__file__).resolve().parents[1]


def test_the_verdict_says_equivalent_only_inside_the_margin_and_undecided_when_unsure():
    rng = np.random.default_rng(0)
    reference = 480 + rng.normal(0, 5, 16)
    assert parity_verdict(reference + rng.normal(0, 1, 16), reference, margin=24)["verdict"] == "equivalent"
    # inside the margin and yet different: both labels
    assert parity_verdict(reference + 10, reference, margin=24)["verdict"] == "equivalent, ahead"
    assert parity_verdict(reference - 10, reference, margin=24)["verdict"] == "equivalent, behind"
    assert parity_verdict(reference - 100, reference, margin=24)["verdict"] == "worse"
    assert parity_verdict(reference + 100, reference, margin=24)["verdict"] == "better"
    # 8 wildly spread seeds against 8: the interval covers 0 and reaches past the margin
    wide = np.array([100.0, 500.0, 150.0, 480.0, 120.0, 470.0, 300.0, 200.0])
    assert parity_verdict(wide, wide[::-1] + 1.0, margin=24)["verdict"] == "undecided"
    # under 8 seeds a side the bootstrap's interval covers far less than it says: no verdict, however far apart
    few = parity_verdict(reference[:4] + 100, reference[4:12], margin=1)
    assert few["verdict"] == "undecided (under 8 seeds: no test)" and few["interval90"] is None


def test_the_margins_are_five_percent_of_each_tasks_score_range():
    assert TASKS["CartPole-v1"].margin == 0.05 * (500 - 22)
    assert TASKS["Acrobot-v1"].margin == 0.05 * (-60 + 500)
    assert TASKS["CartPole-v1"].num_iterations * 512 == 499_712
    assert TASKS["Breakout-MinAtar"].margin == pytest.approx(0.05 * (28.0 - 0.4))  # the tuned study's range
    assert TASKS["Breakout-MinAtar"].num_iterations == 1220  # PureJaxRL's NUM_UPDATES at 1e7 steps of 64 x 128
    assert TASKS["brax/inverted_pendulum"].margin == pytest.approx(0.05 * (1000 - 22))  # random policy to 1000


def test_the_brax_task_trains_brax_reference_batch_and_budget_with_the_preset_resized():
    """Each update of ours is one training step of brax's reference run (the same env steps, the same count), and
    the preset variant keeps brax's PPO settings while taking the task's batch, budget and pipeline."""
    task = TASKS["brax/inverted_pendulum"]
    reference = json.loads(
        (ROOT / "benchmarks/results/ppo_parity/reference/brax_brax-inverted_pendulum.json").read_text()
    )
    assert task.num_envs * task.num_steps == reference["env_steps_per_iteration"]
    assert all(len(seed) == task.num_iterations for seed in reference["returns"])
    preset = task_config(task, "preset")
    assert (preset.env.num_envs, preset.env.num_steps, preset.num_iterations) == (128, 80, 49)
    assert preset.env.backend == reference["backend"] == "positional"
    assert preset.ppo.max_grad_norm == float("inf") and not preset.ppo.anneal_lr and preset.ppo.clip_eps == 0.3
    default = task_config(task, "default")
    assert default.ppo.max_grad_norm == 0.5 and default.env.reward_scale == reference["config"]["reward_scaling"]
    with pytest.raises(ValueError, match="no variant 'legacy'"):
        task_config(task, "legacy")  # a variant the task does not run is refused, not trained as the defaults


def test_the_playground_task_trains_playgrounds_reference_batch_and_budget_with_the_preset_resized():
    """Each update of ours is one training step of Playground's own run (brax's ppo.train at its DM Control Suite
    config, 32 envs), both scored on the same evaluations: 128 episodes of the sampled policy after updates 10, 20
    and 30; the preset keeps Playground's PPO settings (16 epochs, lr 1e-3, reward scaling 10, discount 0.995)."""
    task = TASKS["playground/CartpoleBalance"]
    config = task_config(task, "preset")
    # brax: batch_size 1024 * 32 / 2048 = 16 unrolls of 30 steps x 32 minibatches per update
    assert config.env.num_envs * config.env.num_steps == 16 * 30 * 32 and config.num_iterations == 3 * 10
    assert (config.ppo.num_epochs, config.ppo.num_minibatches, config.ppo.learning_rate) == (16, 32, 1e-3)
    assert (config.env.reward_scale, config.ppo.gamma, config.ppo.clip_eps) == (10.0, 0.995, 0.3)
    assert (config.eval.every, config.eval.episodes, task.metric) == (10, 128, "eval/return_stochastic")
    path = ROOT / "benchmarks/results/ppo_parity/reference/playground_playground-CartpoleBalance.json"
    if path.exists():  # the reference's evaluations sit at the iterations ours evaluate at
        reference = json.loads(path.read_text())
        assert reference["env_steps_per_iteration"] == config.env.num_envs * config.env.num_steps
        for seed in reference["returns"]:
            assert len(seed) == 30 and [i for i, v in enumerate(seed) if v is not None] == [9, 19, 29]
        # brax resets every env after each epoch of ceil(num_timesteps / ((num_evals - 1) x steps per update x
        # num_resets_per_eval)) updates: the variant preset-reset resets after as many, and differs in nothing else
        brax = reference["config"]
        per_update = brax["batch_size"] * brax["num_minibatches"] * brax["unroll_length"] * brax["action_repeat"]
        epoch = math.ceil(brax["num_timesteps"] / ((brax["num_evals"] - 1) * per_update * brax["num_resets_per_eval"]))
        reset = task_config(task, "preset-reset")
        assert config.env.reset_every == 0 and reset == config.replace(env=config.env.replace(reset_every=epoch))
    # a diagnosis (the reference code at other values of its config) is evaluated where the reference is, named so,
    # listed after the references and tested against them
    from benchmarks.studies.ppo_parity import compare, load_references

    records = load_references(task.env)
    for record in records:
        assert record["env_steps_per_iteration"] == config.env.num_envs * config.env.num_steps
        assert all([i for i, v in enumerate(seed) if np.isfinite(v)] == [9, 19, 29] for seed in record["returns"])
    diagnoses = [r["implementation"] for r in records if r.get("overrides")]
    if diagnoses:
        assert all(name.startswith("diagnosis: ") for name in diagnoses) and not records[0].get("overrides")
        rows = {r["implementation"]: r for r in compare(task, {}, records)}
        assert all(set(rows[name]["versus_auc"]) == {records[0]["implementation"]} for name in diagnoses)
        assert "versus" not in rows[records[0]["implementation"]]


def test_the_brax_variants_add_only_brax_options_to_the_variants_they_are_tested_against():
    from benchmarks.studies.ppo_parity import compare
    from vaco_jax.core.config import with_overrides

    task = TASKS["playground/CartpoleBalance"]
    reset = task_config(task, "preset-reset")
    horizon, unrolls = task_config(task, "preset-reset-horizon"), task_config(task, "preset-reset-unrolls")
    assert horizon == with_overrides(reset, {"ppo.advantage_horizon": 30})
    brax = {"ppo.minibatch": "unrolls", "ppo.advantages_every_step": True, "ppo.advantage_form": "q"}
    assert unrolls == with_overrides(horizon, brax)
    policy = {"network.distribution": "tanh_gaussian", "network.std": "state_dependent"}
    tanh = task_config(task, "preset-reset-tanh")
    assert tanh == with_overrides(reset, policy)
    assert task_config(task, "preset-reset-unrolls-tanh") == with_overrides(unrolls, policy)
    lecun = task_config(task, "preset-reset-unrolls-tanh-lecun")
    assert lecun == with_overrides(unrolls, {**policy, "network.init": "lecun_uniform"})
    # the playground-<Env>-as-brax preset is that variant at an accelerator's size, with brax's form of the normalised
    # observations (unclipped) and its cached start states too: resized, the same config
    from vaco_jax.core.presets import apply_preset

    sized = task_config(task, "preset")
    resize = {
        "num_iterations": sized.num_iterations,
        "env.num_envs": sized.env.num_envs,
        "env.num_steps": sized.env.num_steps,
        "ppo.num_epochs": sized.ppo.num_epochs,
        "ppo.num_minibatches": sized.ppo.num_minibatches,
        "eval.every": sized.eval.every,
        "eval.episodes": sized.eval.episodes,
    }
    as_brax = with_overrides(apply_preset(f"{task.preset}-as-brax"), resize)
    assert as_brax == with_overrides(lecun, {"env.normalizer_form": "brax", "env.start_states": "cached"})
    rng = np.random.default_rng(0)
    names = ("preset-reset", "preset-reset-horizon", "preset-reset-unrolls", "preset-reset-tanh")
    both = ("preset-reset-unrolls-tanh", "preset-reset-unrolls-tanh-lecun")
    ours = {name: rng.uniform(500, 1000, (8, 30)) for name in (*names, *both)}
    rows = compare(task, ours, [])
    assert "versus_auc" not in rows[0]  # the reset variant has nothing to be tested against here
    for index in (1, 2, 3):
        assert set(rows[index]["versus_auc"]) == {rows[0]["implementation"]} == set(rows[index]["versus"])
    # brax's estimation and policy together: against each of the two alone
    assert set(rows[4]["versus_auc"]) == {rows[2]["implementation"], rows[3]["implementation"]}
    assert "--network.distribution tanh_gaussian --network.std state_dependent" in rows[4]["implementation"]
    assert set(rows[5]["versus_auc"]) == {rows[4]["implementation"]}  # and brax's initialisation: against that one
    assert rows[5]["implementation"].endswith("--network.init lecun_uniform)")


def test_the_docs_quote_the_committed_parity_table():
    from tests.conftest import committed_table

    block, table = committed_table("ppo_parity/parity.json", "ppo parity")
    assert block == table
    payload = json.loads((ROOT / "benchmarks/results/ppo_parity/parity.json").read_text())
    references = {path.name for path in (ROOT / "benchmarks/results/ppo_parity/reference").glob("*.json")}
    assert {
        "purejaxrl_CartPole-v1.json",
        "purejaxrl_Acrobot-v1.json",
        "purejaxrl_Breakout-MinAtar.json",
        "brax_brax-inverted_pendulum.json",
    } <= references
    for row in payload["rows"]:
        assert row["seeds"] >= 8
        assert row["solved"] is None if TASKS[row["env"]].solved_at is None else 0 <= row["solved"] <= row["seeds"]


# a base config unlike the references' in everything they set (what a config file under the preset could hold)
UNLIKE_THE_REFERENCES = {
    "num_iterations": 3,
    "env.num_envs": 6,
    "env.num_steps": 10,
    "env.normalize_observations": True,
    "env.reward_scale": 7.0,
    "ppo.num_epochs": 9,
    "ppo.num_minibatches": 2,
    "ppo.learning_rate": 0.1,
    "ppo.anneal_lr": False,
    "ppo.max_grad_norm": 9.0,
    "ppo.gamma": 0.5,
    "ppo.gae_lambda": 0.5,
    "ppo.clip_eps": 0.7,
    "ppo.ent_coef": 0.7,
    "ppo.vf_coef": 0.7,
    "ppo.clip_value_loss": False,
    "ppo.vf_clip_eps": 0.7,
    "ppo.normalize_advantages": False,
    "network.actor_hidden": (5,),
    "network.critic_hidden": (5,),
    "network.activation": "silu",
}


@pytest.mark.parametrize(
    ("preset", "env"),
    [("purejaxrl", "CartPole-v1"), ("cleanrl", "Acrobot-v1"), ("purejaxrl-minatar", "Breakout-MinAtar")],
)
def test_the_reference_presets_are_the_configurations_the_parity_benchmark_trains(preset, env):
    """--preset purejaxrl (or cleanrl, or purejaxrl-minatar) with the task's env is the very config whose parity
    with the reference script the benchmark measured, whatever the config it is applied to holds."""
    from vaco_jax.core.config import Config, with_overrides
    from vaco_jax.core.presets import apply_presets

    unlike = with_overrides(Config(), UNLIKE_THE_REFERENCES)
    assert with_overrides(apply_presets([preset], unlike), {"env.name": env}) == task_config(TASKS[env], "default")
    assert apply_presets(["purejaxrl-minatar"]).env.name == "Breakout-MinAtar"  # a MinAtar game, never CartPole


def test_the_reference_runners_bin_and_average_completed_episodes_as_recorded(monkeypatch):
    """benchmarks/references: CleanRL's printed episodes binned into iterations (i x B, (i + 1) x B]; PureJaxRL's
    LogWrapper flags averaged per iteration; the config read from a file's ``__main__`` block. (The runners themselves
    run in the references' own environments; a smoke run of each reproduced the recorded files' first iterations.)"""
    import importlib.util

    folder = Path(__file__).resolve().parents[1] / "benchmarks" / "references"
    monkeypatch.syspath_prepend(str(folder))  # as a script, each runner finds its sibling runner_machine.py

    def runner(name):
        path = folder / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    cleanrl, purejaxrl = runner("run_cleanrl"), runner("run_purejaxrl")
    printed = "global_step=512, episodic_return=[10.]\nx\nglobal_step=513, episodic_return=[20.5]\n"
    printed += "global_step=1024, episodic_return=[30.5]\nglobal_step=1600, episodic_return=[1e2]\n"
    assert cleanrl.binned(printed, 512, 3) == ([10.0, 25.5, None], [1, 2, 0])  # 1600 is past 3 x 512
    done = np.array([[[[True, False], [True, True]], [[False, False], [False, False]]]])  # [S=1, U=2, T=2, E=2]
    returns = np.array([[[[4.0, 99.0], [6.0, 8.0]], [[1.0, 1.0], [1.0, 1.0]]]])
    mean, count = purejaxrl.completed_returns({"returned_episode": done, "returned_episode_returns": returns})
    np.testing.assert_array_equal(count, [[3, 0]])
    assert mean[0, 0] == 6.0 and np.isnan(mean[0, 1])
    source = 'import x\nif __name__ == "__main__":\n    config = {"LR": 2.5e-4, "ANNEAL_LR": True}\n    run(config)\n'
    assert purejaxrl.main_block_config(source) == {"LR": 2.5e-4, "ANNEAL_LR": True}
    assert cleanrl.cpu_model() == purejaxrl.cpu_model() != ""  # one machine record, shared
