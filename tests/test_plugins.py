"""An algorithm from outside the package: its record (loss, option group, lean metrics) registered by a plugin module
and trained from the command line, and the registry's records for the built-in algorithms."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import numpy as np
import pytest
from flax import struct

from tests.test_cli import TINY
from vaco_jax import Config
from vaco_jax.algorithms import registry
from vaco_jax.cli import main, parse_args
from vaco_jax.core import config as config_module
from vaco_jax.core import plugins
from vaco_jax.core.config import ConfigError, config_from_dict, traced_fields
from vaco_jax.numerics import diagnostics

PLUGIN = Path(__file__).parent / "data" / "ratio_penalty_plugin.py"
NAME = "ppo_ratio_penalty"


@pytest.fixture
def registry_restored():
    """The registry, the config's added groups and the loaded plugins as they were before the test."""
    algorithms, registered = dict(registry.ALGORITHMS), set(registry._REGISTERED)
    loaded = dict(plugins._LOADED)
    yield
    for name in set(registry._REGISTERED) - registered:
        registry.unregister(name)
    registry.ALGORITHMS.clear()
    registry.ALGORITHMS.update(algorithms)
    registry._REGISTERED.clear()
    registry._REGISTERED.update(registered)
    plugins._LOADED.clear()
    plugins._LOADED.update(loaded)
    assert config_module.config_class() is Config


def test_each_built_in_record_names_a_config_group_of_its_own_class():
    for spec in registry.ALGORITHMS.values():
        if spec.option_group is not None:
            assert type(getattr(Config(), spec.option_group)) is spec.options, spec.name
    assert registry.unread_config_groups("ppo") == {"vaco", "impact", "m2po", "geppo", "cispo"}
    assert registry.unread_config_groups("vaco_filter_only") == {"impact", "m2po", "geppo", "cispo"}


def test_lean_keeps_an_algorithms_own_metrics_from_its_record():
    assert registry.build(Config(algorithm="m2po")).lean_metrics == ("m2po/",)
    assert registry.build(Config(algorithm="ppo")).lean_metrics == ()
    assert diagnostics.kept("m2po/kept", "lean", own=("m2po/",))
    assert not diagnostics.kept("m2po/kept", "lean", own=("filter/",))  # another algorithm's: not kept
    assert diagnostics.kept("kl/coef", "lean", own=("kl/coef",)) and not diagnostics.kept("kl/coef", "lean")
    assert not diagnostics.kept("m2po/kept", "off", own=("m2po/",))


def test_a_plugin_registers_an_algorithm_whose_options_are_flags(registry_restored):
    args = parse_args(["--plugin", str(PLUGIN), "train", "--algorithm", NAME, "--ratio-penalty.coef", "0.25"])
    assert args.config.algorithm == NAME and args.config.ratio_penalty.coef == 0.25
    assert args.config.ratio_penalty.power == 2
    assert "ratio_penalty.coef" in traced_fields(args.config)  # a sweep vmaps over it
    assert "ratio_penalty.power" not in traced_fields(args.config)  # static: a code path
    assert "ratio_penalty" in registry.unread_config_groups("ppo")  # a PPO record leaves it out
    assert registry.unread_config_groups(NAME) == frozenset()  # it may read any group


def test_a_plugins_option_group_checks_its_values(registry_restored, tmp_path, capsys):
    argv = ["--plugin", str(PLUGIN), "train", "--algorithm", NAME, "--ratio-penalty.coef", "-1"]
    assert main([*argv, "--out-dir", str(tmp_path / "run"), *TINY]) == 2
    assert "ratio_penalty.coef=-1" in capsys.readouterr().err


def test_bad_plugins_and_groups_are_refused_with_what_to_do(registry_restored, tmp_path):
    with pytest.raises(ConfigError, match="no module of that name"):
        plugins.load("no_such_plugin_module")
    with pytest.raises(ConfigError, match="no such file"):
        plugins.load(str(tmp_path / "missing.py"))
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('half written')\n")
    with pytest.raises(ConfigError, match="RuntimeError: half written"):
        plugins.load(str(broken))
    with pytest.raises(ConfigError, match="needs a module name"):
        plugins.split_argv(["train", "--plugin"])

    @struct.dataclass
    class Options:
        x: float = 1.0

    build = registry.ALGORITHMS["ppo"].build
    with pytest.raises(ConfigError, match="already a field of Config"):
        registry.register(registry.AlgorithmSpec("clash", build, option_group="ppo", options=Options))
    with pytest.raises(ConfigError, match="not a flax.struct dataclass"):
        registry.register(registry.AlgorithmSpec("plain", build, options=dict))
    with pytest.raises(ValueError, match="already registered"):
        registry.register(registry.AlgorithmSpec("ppo", build))
    assert "clash" not in registry.ALGORITHMS and "plain" not in registry.ALGORITHMS


def test_a_plugins_algorithm_trains_and_sweeps_its_option_from_the_cli(registry_restored, tmp_path):
    """One program: the option is a traced grid axis; lean keeps the algorithm's own metric; the record names the
    plugin, and reading the record loads it again."""
    out = tmp_path / "run"
    argv = ["sweep", "--algorithm", NAME, "--grid", "ratio_penalty.coef=0,4", "--diagnostics", "lean"]
    assert main(["--plugin", str(PLUGIN), *argv, "--num-seeds", "1", "--out-dir", str(out), *TINY]) == 0
    record = json.loads((out / "config.json").read_text())
    assert record["plugins"] == [str(PLUGIN.resolve())] and record["algorithm"] == NAME
    assert record["ratio_penalty"] == {"coef": 0.5, "power": 2}
    metrics = json.loads((out / "metrics.json").read_text())
    deviation = np.asarray(metrics["metrics"]["ratio_penalty/deviation"], dtype=float)  # [coef, seed, iteration]
    assert "tv/forward" not in metrics["metrics"]  # lean
    assert np.all(np.isfinite(deviation)) and deviation.shape[0] == 2
    assert deviation[1].mean() < deviation[0].mean()  # the penalty reached the loss: it holds the ratio near 1

    def fresh_process():  # the plugin not loaded
        registry.unregister(NAME)
        plugins._LOADED.clear()
        assert config_module.config_class() is Config

    fresh_process()
    config = config_from_dict(record)
    assert config.algorithm == NAME and config.ratio_penalty.coef == 0.5 and NAME in registry.ALGORITHMS
    assert jax.tree.structure(config) != jax.tree.structure(Config())
    for argv in (["sweep", "--resume", str(out)], ["train", "--config", str(out / "config.json")]):
        fresh_process()  # resuming the run, or training its config again: the record loads the plugin, whose
        args = parse_args([*argv, "--ratio-penalty.power", "3"])  # options are flags then too
        assert args.config.algorithm == NAME, argv
        assert (args.config.ratio_penalty.coef, args.config.ratio_penalty.power) == (0.5, 3), argv


def test_registering_again_with_overwrite_replaces_the_option_group(registry_restored):
    """A notebook cell run again defines its options class anew: the group follows; a failed replacement keeps the
    group it had."""

    @struct.dataclass
    class First:
        a: float = 1.0

    @struct.dataclass
    class Second:
        b: float = 2.0

    build = registry.ALGORITHMS["ppo"].build
    registry.register(registry.AlgorithmSpec("mine", build, options=First))
    registry.register(registry.AlgorithmSpec("mine", build, options=Second), overwrite=True)
    assert config_module.extended(Config()).mine == Second()
    with pytest.raises(ConfigError, match="not a flax.struct dataclass"):
        registry.register(registry.AlgorithmSpec("mine", build, options=dict), overwrite=True)
    assert config_module.extended(Config()).mine == Second() and registry.ALGORITHMS["mine"].options is Second


def test_a_record_whose_plugin_moved_loads_with_the_plugin_given_and_says_what_to_give_without(
    registry_restored, tmp_path
):
    record = {"algorithm": NAME, "ratio_penalty": {"coef": 0.25, "power": 2}, "plugins": [str(tmp_path / "gone.py")]}
    with pytest.raises(ConfigError, match=r"option group ratio_penalty.*could not be loaded.*--plugin"):
        config_from_dict(record)
    plugins.load(str(PLUGIN))  # the plugin given again, from where it is now
    assert config_from_dict(record).ratio_penalty.coef == 0.25


def test_plugin_given_before_the_command_still_runs_a_multiprocess_command_under_the_supervisor(monkeypatch):
    from vaco_jax.runs import supervisor

    seen = []
    monkeypatch.setattr(supervisor, "supervise", lambda argv: seen.append(list(argv)) or 0)
    argv = ["--plugin", str(PLUGIN), "train", "--distributed.num-processes", "2", "--distributed.process-id", "0"]
    assert main(argv) == 0 and seen == [argv]  # the worker gets the whole command, --plugin included


def test_configs_with_an_added_group_pickle_and_a_clash_with_a_flag_group_is_refused(registry_restored, capsys):
    import pickle

    plugins.load(str(PLUGIN))
    config = config_module.extended(Config(algorithm=NAME))
    assert pickle.loads(pickle.dumps(config)) == config

    @struct.dataclass
    class Distributed:
        x: float = 1.0

    registry.register(registry.AlgorithmSpec("clashing", registry.ALGORITHMS["ppo"].build, "distributed", Distributed))
    assert main(["train", "--help"]) == 2
    assert "'distributed' of a registered algorithm has the name of vaco-jax train's own" in capsys.readouterr().err
    registry.unregister("clashing")
    registry.unregister(NAME)
    with pytest.raises(ConfigError, match="ratio_penalty of an algorithm no longer registered"):
        config_module.extended(config)


def test_a_plugins_names_used_without_it_say_to_load_it(capsys, tmp_path):
    """Forgetting --plugin: the unknown algorithm, the unknown group's flag and a grid over it each say what to give."""
    out = ["--out-dir", str(tmp_path / "run")]
    for argv in (
        ["train", "--algorithm", NAME, *out],
        ["train", "--ratio-penalty.coef", "0.5", *out],
        ["sweep", "--grid", "ratio_penalty.coef=0,1", *out],
    ):
        assert main(argv) == 2
        assert "load the module that registers it with --plugin" in capsys.readouterr().err, argv
    assert main(["train", "--ppo.learnin-rate", "0.5", *out]) == 2  # a typo of a known flag: the closest one instead
    assert "--plugin" not in capsys.readouterr().err


def test_an_option_groups_hint_is_set_apart_from_the_message():
    from vaco_jax.core.config_fields import check_number

    with pytest.raises(ConfigError, match=r"must be >= 0; e\.g\. mine\.x=0\.5$"):
        check_number("mine.x", -1.0, low=0, hint="e.g. mine.x=0.5")
    with pytest.raises(ConfigError, match=r"must be >= 0 \(inf: none\)$"):
        check_number("mine.x", -1.0, low=0, hint=" (inf: none)")


def test_a_sweep_over_an_option_its_algorithm_never_reads_is_refused(registry_restored, capsys, tmp_path):
    """Every point would train the same runs: a built-in family's group under PPO, a plugin's group under PPO."""
    out = ["--out-dir", str(tmp_path / "run"), "--dry-run"]
    assert main(["sweep", "--grid", "vaco.tv_threshold=0.1,0.2", *out]) == 2
    assert "algorithm=ppo never reads the vaco options" in capsys.readouterr().err
    assert main(["--plugin", str(PLUGIN), "sweep", "--grid", "ratio_penalty.coef=0,1", *out]) == 2
    assert f"give --algorithm {NAME}" in capsys.readouterr().err


def test_a_flag_its_algorithm_never_reads_is_warned_of(capsys, tmp_path):
    argv = ["train", "--vaco.tv-threshold", "0.1", "--out-dir", str(tmp_path / "run"), "--dry-run"]
    assert main([*argv, *TINY]) == 0
    said = capsys.readouterr().err
    assert "warning: --vaco.tv-threshold is an option of vaco, vaco_align_only, vaco_filter_only" in said
    assert main(["train", "--algorithm", "vaco", *argv[1:], "--overwrite", *TINY]) == 0
    assert "warning" not in capsys.readouterr().err
