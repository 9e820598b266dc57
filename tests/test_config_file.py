"""--config FILE: a run's config.json trains its config again, a hand-written JSON, TOML or YAML file sets the
defaults that presets and flags override, and every bad file is one line naming the file and what to change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vaco_jax.cli import main, parse_args
from vaco_jax.core.config import RECORD_ONLY_KEYS, Config, ConfigError, config_dict, config_from_dict
from vaco_jax.core.config_file import read_config_file
from vaco_jax.training.trainer import resolve_defaults

ROOT = Path(__file__).resolve().parents[1]
RUN_RECORD = ROOT / "benchmarks/results/demo/vaco-paper/config.json"  # a config.json written by a run

TOML = """
algorithm = "vaco"
num_iterations = 12
[env]
name = "Acrobot-v1"
[ppo]
learning_rate = 1        # an integer where a float is due
[network]
actor_hidden = [32, 32]
"""
YAML = """
algorithm: ppo
ppo:
  learning_rate: 1e-3    # YAML reads this as text: taken as the number
  clip_eps: 0.1
lag:
  max_lag: 3
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["a.toml", "a.yaml", "a.json"])
def test_a_hand_written_file_sets_its_fields_and_leaves_the_others_at_the_defaults(tmp_path, name):
    fields = {"algorithm": "vaco", "env": {"name": "Acrobot-v1"}, "ppo": {"learning_rate": 1}, "lag": {"max_lag": 3}}
    text = {
        ".toml": 'algorithm = "vaco"\n[env]\nname = "Acrobot-v1"\n[ppo]\nlearning_rate = 1\n[lag]\nmax_lag = 3\n',
        ".yaml": "algorithm: vaco\nenv:\n  name: Acrobot-v1\nppo:\n  learning_rate: 1\nlag:\n  max_lag: 3\n",
        ".json": json.dumps(fields),
    }[Path(name).suffix]
    loaded = read_config_file(write(tmp_path, name, text))
    expected = Config().replace(algorithm="vaco")
    expected = expected.replace(env=expected.env.replace(name="Acrobot-v1"))
    expected = expected.replace(ppo=expected.ppo.replace(learning_rate=1.0), lag=expected.lag.replace(max_lag=3))
    assert loaded.config == expected and not loaded.is_run_record
    assert isinstance(loaded.config.ppo.learning_rate, float)  # typed like the field, not the int the file holds


def test_a_list_field_takes_the_element_type_its_annotation_names(tmp_path):
    """lag.weights is tuple[float, ...] (an empirical lag histogram), network.actor_hidden tuple[int, ...]."""
    text = '[lag]\nkind = "empirical"\nmax_lag = 2\nweights = [0.25, 0.75, 1]\n[network]\nactor_hidden = [32, 16]\n'
    config = read_config_file(write(tmp_path, "lists.toml", text)).config
    assert config.lag.weights == (0.25, 0.75, 1.0) and all(isinstance(w, float) for w in config.lag.weights)
    assert config.network.actor_hidden == (32, 16)
    for name, text, fragment in [
        ("w.toml", '[lag]\nweights = [0.5, "x"]\n', "lag.weights = [0.5, 'x'] is not a list of numbers"),
        ("h.toml", "[network]\nactor_hidden = [64.5]\n", "network.actor_hidden = [64.5] is not a list of integers"),
    ]:
        with pytest.raises(ConfigError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
            read_config_file(write(tmp_path, name, text))


def test_an_optional_switch_takes_true_false_or_null(tmp_path):
    """env.normalize_observations is bool | None (None: the backend's default): a hand-written file's true was
    refused as "not an integer or null", the reading of an optional integer."""
    for text, expected in (("true", True), ("false", False)):
        path = write(tmp_path, f"{text}.toml", f"[env]\nnormalize_observations = {text}\n")
        assert read_config_file(path).config.env.normalize_observations is expected
    assert (
        read_config_file(
            write(tmp_path, "n.json", '{"env": {"normalize_observations": null}}')
        ).config.env.normalize_observations
        is None
    )
    with pytest.raises(ConfigError, match="env.normalize_observations = 'yes' is not true, false or null"):
        read_config_file(write(tmp_path, "yes.toml", '[env]\nnormalize_observations = "yes"\n'))
    # whatever the command's own config holds (the demo's normalises): null is the backend's default still
    normalising = Config().replace(env=Config().env.replace(normalize_observations=True, start_pool=4))
    text = '{"env": {"normalize_observations": null, "start_pool": null}}'
    read = read_config_file(write(tmp_path, "null.json", text), base=normalising).config.env
    assert (read.normalize_observations, read.start_pool) == (None, None)


def test_a_hand_written_file_applies_on_top_of_the_commands_own_defaults(tmp_path):
    base = Config().replace(num_iterations=80)
    loaded = read_config_file(write(tmp_path, "b.yaml", YAML), base=base)
    assert loaded.config.num_iterations == 80  # the file leaves it: the command's default stays
    assert (loaded.config.ppo.learning_rate, loaded.config.ppo.clip_eps, loaded.config.lag.max_lag) == (1e-3, 0.1, 3)


def test_a_runs_config_json_is_read_as_its_run_had_it():
    """Every field as the record holds it, but those whose defaults the run resolved (given_defaults), which are
    read as given and resolve to the recorded values again."""
    record = json.loads(RUN_RECORD.read_text())
    loaded = read_config_file(RUN_RECORD)
    assert loaded.is_run_record and loaded.asynchronous is None
    assert loaded.config == config_from_dict(record)
    assert loaded.given_defaults == record["given_defaults"] == {"ppo.minibatch": "auto"}  # the demo sets the other
    given = parse_args(["demo", "--config", str(RUN_RECORD)]).config  # the command line takes the given value back
    assert given.ppo.minibatch == "auto" and resolve_defaults(given) == resolve_defaults(loaded.config)
    read = config_dict(loaded.config)
    for group, value in record.items():  # every field the record holds, as it holds it (newer fields: see below)
        if group not in RECORD_ONLY_KEYS:
            assert read[group] == value if not isinstance(value, dict) else {k: read[group][k] for k in value} == value


def test_a_runs_config_json_keeps_what_its_run_had_for_fields_added_since(tmp_path):
    """A record written before ppo.minibatch existed trained on segments: it must train on segments again (a
    hand-written file that leaves the field out gets today's default instead)."""
    record = json.loads(RUN_RECORD.read_text())
    del record["ppo"]["minibatch"], record["given_defaults"]  # as a record written before either existed
    old = read_config_file(write(tmp_path, "config.json", json.dumps(record)))
    assert old.config.ppo.minibatch == "segments"
    hand_written = read_config_file(write(tmp_path, "mine.json", json.dumps({"ppo": {"num_epochs": 2}})))
    assert hand_written.config.ppo.minibatch == Config().ppo.minibatch == "auto"


def test_an_asynchronous_runs_record_makes_train_asynchronous_with_its_options(tmp_path):
    record = {**json.loads(RUN_RECORD.read_text()), "async": {"queue_size": 3}}
    path = write(tmp_path, "config.json", json.dumps(record))
    args = parse_args(["train", "--config", str(path)])
    assert args.asynchronous and args.async_options.queue_size == 3
    with pytest.raises(ConfigError, match="only train --async runs"):
        parse_args(["sweep", "--config", str(path)])


def test_flags_override_the_file_and_presets_apply_on_top_of_it(tmp_path):
    path = write(tmp_path, "a.toml", TOML)
    args = parse_args(["train", "--config", str(path), "--num-iterations", "5", "--preset", "vaco-decoupled"])
    config = args.config
    assert (config.algorithm, config.env.name, config.ppo.learning_rate, config.network.actor_hidden) == (
        "vaco",
        "Acrobot-v1",
        1.0,
        (32, 32),
    )
    assert config.num_iterations == 5  # the flag wins over the file
    assert config.vaco.align is False and config.vaco.is_weight == "truncated"  # the preset, applied on the file
    assert args.config_file == path
    sweep = parse_args(["sweep", "--config", str(write(tmp_path, "b.yaml", YAML)), "--grid", "lag.k=0,3"])
    assert sweep.config.lag.max_lag == 3 and sweep.grid == ("lag.k=0,3",)


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        (
            "typo.yaml",
            "ppo:\n  learnin_rate: 1e-3\n",
            "no config field is called ppo.learnin_rate; did you mean ppo.learning_rate?",
        ),
        ("group.toml", 'ppo = "fast"\n', "ppo is a group of fields; give it as a table"),
        (
            "int.toml",
            "[ppo]\nnum_epochs = 2.5\n",
            "ppo.num_epochs = 2.5 is not an integer; give e.g. ppo.num_epochs = 4",
        ),
        ("bool.json", '{"ppo": {"anneal_lr": "yes"}}', "ppo.anneal_lr = 'yes' is not true or false"),
        ("text.yaml", "ppo:\n  learning_rate: fast\n", "ppo.learning_rate = 'fast' is not a number"),
        ("list.toml", "[network]\nactor_hidden = 64\n", "network.actor_hidden = 64 is not a list of integers"),
        ("syntax.toml", "[ppo\nnum_epochs = 2\n", "is not valid TOML"),
        ("syntax.yaml", "ppo: [1\n", "is not valid YAML"),
        ("syntax.json", '{"ppo": }', "is not valid JSON"),
        ("list.yaml", "- 1\n- 2\n", "must hold a table of config fields"),
        ("config.ini", "[ppo]\n", "the format is told by the suffix"),
        ("record.json", '{"presets": ["vaco-paper"], "ppo": {}}', "give presets as --preset NAME"),
    ],
)
def test_a_bad_file_is_one_line_that_names_the_file_and_the_fix(tmp_path, name, text, fragment):
    path = write(tmp_path, name, text)
    with pytest.raises(ConfigError) as error:
        read_config_file(path)
    message = str(error.value)
    assert fragment in message and str(path) in message and "\n" not in message


def test_the_command_line_refuses_a_missing_file_a_directory_and_config_with_resume(tmp_path, capsys):
    for argv, fragment in [
        (["train", "--config", str(tmp_path / "none.toml")], "no such file"),
        (["train", "--config", str(RUN_RECORD.parent)], f"the run's config is {RUN_RECORD}"),
        (["train", "--config", str(RUN_RECORD), "--resume", str(tmp_path)], "--config and --resume"),
    ]:
        assert main([*argv, "--out-dir", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert fragment in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()


def test_train_from_a_file_records_the_config_that_trains_again_from_its_config_json(tmp_path, capsys):
    """End to end at CI size: the written config.json, given back as --config, is the same config; --print-config
    printed it beforehand, byte for byte, writing nothing."""
    tiny = (
        "num_iterations = 2\n[env]\nnum_envs = 4\nnum_steps = 8\n[network]\nactor_hidden = [8]\ncritic_hidden = [8]\n"
        "[ppo]\nnum_epochs = 1\nnum_minibatches = 2\nlearning_rate = 3e-3\n"
    )
    out = tmp_path / "run"
    argv = ["train", "--config", str(write(tmp_path, "tiny.toml", tiny)), "--num-seeds", "1", "--seed", "7", "--quiet"]
    capsys.readouterr()
    assert main([*argv, "--out-dir", str(out), "--print-config"]) == 0
    printed = capsys.readouterr().out
    assert not out.exists()
    assert main([*argv, "--out-dir", str(out)]) == 0
    assert printed == (out / "config.json").read_text() + "\n"
    written = json.loads((out / "config.json").read_text())
    assert written["ppo"]["learning_rate"] == 3e-3 and written["network"]["actor_hidden"] == [8]
    assert written["runs"] == {"grid": {}, "seed": 7, "num_seeds": 1}
    again = parse_args(["train", "--config", str(out / "config.json")])
    # the run's config with the defaults it resolved as it was given them (auto, None), resolved again the same way
    assert written["given_defaults"] == {"env.normalize_observations": None, "ppo.minibatch": "auto"}
    assert resolve_defaults(again.config) == resolve_defaults(parse_args(argv).config)
    assert config_dict(resolve_defaults(again.config)) == {
        key: value for key, value in written.items() if key not in RECORD_ONLY_KEYS
    }
    assert (again.seed, again.num_seeds) == (7, 1)  # the same runs, not the command's default seeds


def test_a_runs_record_trains_another_algorithm_or_env_with_that_ones_own_defaults(tmp_path, capsys):
    """A record holds its resolved defaults (ppo's minibatches of samples, gymnax's raw observations) and, under
    given_defaults, what it was given (auto, None): --config resolves those again for the command's algorithm and
    env (the resolved samples refused --algorithm impact, whose minibatches are whole segments). A value given
    explicitly stays: it is no default."""
    records = {}
    for name, flags in (("default", []), ("forced", ["--ppo.minibatch", "segments"])):
        assert main(["train", *flags, "--print-config"]) == 0
        records[name] = write(tmp_path, f"{name}.json", capsys.readouterr().out)
    impact = parse_args(["train", "--config", str(records["default"]), "--algorithm", "impact"]).config
    assert resolve_defaults(impact).ppo.minibatch == "segments"
    brax = parse_args(["train", "--config", str(records["default"]), "--env.name", "brax/hopper"]).config
    assert resolve_defaults(brax).env.normalize_observations is True  # brax's default, not gymnax's recorded false
    forced = json.loads(records["forced"].read_text())
    assert forced["ppo"]["minibatch"] == "segments" and "ppo.minibatch" not in forced["given_defaults"]
    assert parse_args(["train", "--config", str(records["forced"])]).config.ppo.minibatch == "segments"
    # a field edited in the file since keeps the edited value: only an unedited resolved default is taken back
    edited = json.loads(records["default"].read_text())
    edited["ppo"]["minibatch"], edited["env"]["normalize_observations"] = "segments", True
    mine = parse_args(["train", "--config", str(write(tmp_path, "edited.json", json.dumps(edited)))]).config
    assert (mine.ppo.minibatch, mine.env.normalize_observations) == ("segments", True)
    for bad in (["ppo.minibatch"], {"ppo.learning_rate": 1.0}):  # not a table, or not a resolved default
        path = write(tmp_path, "bad.json", json.dumps({**forced, "given_defaults": bad}))
        with pytest.raises(ConfigError, match="given_defaults must be a table of some of env.normalize_observations"):
            read_config_file(path)


def test_a_sweeps_config_json_sweeps_the_same_grid_and_seeds_again_and_flags_still_win(tmp_path, capsys):
    """A run's config.json records its grid and seeds ("runs"): sweep --config takes them as its defaults (an
    infinite value, written as "inf", read back); --grid replaces the grid, a recorded axis's own flag drops that
    axis, said; a sweep's record given to train trains the base config and says so; a train's record swept sweeps
    nothing but its seeds; calibrate and tune keep their own seeds."""
    runs = {"grid": {"lag.k": [0, 4], "ppo.w_max": [10.0, "inf"]}, "seed": 3, "num_seeds": 2}
    path = write(tmp_path, "config.json", json.dumps({**json.loads(RUN_RECORD.read_text()), "runs": runs}))
    sweep = parse_args(["sweep", "--config", str(path)])
    assert sweep.grid == ("lag.k=0,4", "ppo.w_max=10.0,inf") and (sweep.seed, sweep.num_seeds) == (3, 2)
    again = parse_args(["sweep", "--config", str(path), "--num-seeds", "8", "--grid", "lag.k=0,2"])
    assert again.grid == ("lag.k=0,2",) and (again.seed, again.num_seeds) == (3, 8)
    capsys.readouterr()
    flagged = parse_args(["sweep", "--config", str(path), "--ppo.w-max", "5"])
    assert flagged.grid == ("lag.k=0,4",) and flagged.config.ppo.w_max == 5.0
    assert "grid axes ppo.w_max are set by their flags instead" in capsys.readouterr().err
    train = parse_args(["train", "--config", str(path)])
    assert (train.seed, train.num_seeds) == (3, 2)
    said = capsys.readouterr().err
    assert "recorded a sweep (--grid lag.k=0,4 ppo.w_max=10.0,inf)" in said and "sweep --config" in said
    assert (parse_args(["calibrate", "--config", str(path)]).num_seeds, parse_args(["calibrate"]).num_seeds) == (8, 8)
    trained = {**runs, "grid": {}}
    path = write(tmp_path, "train.json", json.dumps({**json.loads(RUN_RECORD.read_text()), "runs": trained}))
    assert parse_args(["sweep", "--config", str(path)]).grid == ()
    unrecorded = {key: value for key, value in json.loads(RUN_RECORD.read_text()).items() if key != "runs"}
    older = write(tmp_path, "older.json", json.dumps(unrecorded))  # written before runs were recorded
    assert parse_args(["sweep", "--config", str(older)]).grid == parse_args(["sweep"]).grid
    for bad in ({"grid": [1, 2]}, {"grid": {}, "num_seeds": 0}, {"grid": {"lag.k": ["four"]}}, [1, 2]):
        bad_path = write(tmp_path, "bad.json", json.dumps({**json.loads(RUN_RECORD.read_text()), "runs": bad}))
        with pytest.raises(ConfigError, match="its runs record is malformed"):
            parse_args(["sweep", "--config", str(bad_path)])
