"""Output directories (RunDirectory): vaco-jax removes only what its runs wrote (by marker and manifest), one command
at a time, and writes atomically."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from vaco_jax.core.config import ConfigError
from vaco_jax.core.files import open_atomic, write_text_atomic
from vaco_jax.runs.run_directory import MARKER, RunDirectory, notebook_dir


def _run_dir(path, entries=("config.json", "metrics.json", "metrics", "checkpoints")):
    """A directory as a run leaves it: marked, its manifest naming what it wrote, those entries present."""
    path.mkdir(parents=True, exist_ok=True)
    RunDirectory(path).mark("run-1", entries)
    for name in entries:
        if "." in name:
            (path / name).write_text("{}")
        else:
            (path / name).mkdir()
            inside = {"checkpoints": "10", "metrics": "chunk_000000000_000000010.npz"}.get(name, "inside")
            (path / name / inside).write_text("x")  # what the run writes there
    return path


def test_clear_removes_exactly_the_manifest(tmp_path):
    out = _run_dir(tmp_path / "run")
    assert RunDirectory(out).foreign_entries() == []
    removed = RunDirectory(out).clear()
    assert removed == sorted([MARKER, "checkpoints/", "config.json", "metrics.json", "metrics/"])
    assert list(out.iterdir()) == []


def test_a_file_the_run_did_not_write_blocks_clear_and_prepare(tmp_path):
    out = _run_dir(tmp_path / "run")
    (out / "notes.txt").write_text("mine")
    (out / "data").mkdir()
    assert RunDirectory(out).foreign_entries() == ["data/", "notes.txt"]
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    with pytest.raises(ConfigError, match=r"did not write \(data/, notes.txt\), so nothing was removed"):
        RunDirectory(out).clear()
    with pytest.raises(ConfigError, match="did not write"):
        RunDirectory(out).prepare("run-2", ["config.json"], overwrite=True, resume=False)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_an_unmarked_directory_is_foreign_as_a_whole(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")  # looks like results, but no run marked it
    assert RunDirectory(tmp_path).foreign_entries() == ["metrics.json"]
    with pytest.raises(ConfigError):
        RunDirectory(tmp_path).clear()


def test_a_file_inside_a_demo_variant_folder_is_found(tmp_path):
    demo = tmp_path / "demo"
    demo.mkdir()
    RunDirectory(demo).mark("run-1", ["ppo", "final_vs_lag.k.png"])
    _run_dir(demo / "ppo")
    (demo / "ppo" / "my_plot.py").write_text("mine")
    assert RunDirectory(demo).foreign_entries() == ["ppo/my_plot.py"]
    staging = RunDirectory(demo).staging
    _run_dir(staging.path)
    with pytest.raises(ConfigError, match="it was not replaced"):
        staging.publish_as(RunDirectory(demo))
    assert (demo / "ppo" / "my_plot.py").read_text() == "mine" and staging.exists()  # both sets kept


def test_a_directory_written_before_manifests_is_read_by_its_known_names(tmp_path):
    out = tmp_path / "old"
    out.mkdir()
    (out / MARKER).write_text(json.dumps({"run_id": "old"}))  # a marker of an earlier version: no manifest
    for name in ("metrics.json", "summary.json", "final_vs_lag.k.png", "eval_40.json"):
        (out / name).write_text("{}")
    (out / "tb").mkdir()
    assert RunDirectory(out).foreign_entries() == []
    (out / "thesis.tex").write_text("mine")
    assert RunDirectory(out).foreign_entries() == ["thesis.tex"]
    for mine in ("eval_notes.json", "final_vs_baseline.png"):  # the old names' shapes, not what a run wrote
        (out / mine).write_text("mine")
    assert RunDirectory(out).foreign_entries() == ["eval_notes.json", "final_vs_baseline.png", "thesis.tex"]


def test_record_entries_extends_the_manifest(tmp_path):
    out = _run_dir(tmp_path / "run")
    RunDirectory(out).record(["eval.json"])
    (out / "eval.json").write_text("{}")
    assert RunDirectory(out).foreign_entries() == []
    assert json.loads((out / MARKER).read_text())["run_id"] == "run-1"


def test_atomic_writes_leave_the_old_file_on_failure_and_no_temporary(tmp_path):
    path = tmp_path / "summary.json"
    write_text_atomic(path, "old")
    with pytest.raises(RuntimeError), open_atomic(path) as handle:
        handle.write("half of the new")
        raise RuntimeError("crash mid-write")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["summary.json"]
    with open_atomic(path) as first, open_atomic(tmp_path / "other.json") as second:
        assert first.name != second.name  # unique temporaries: two writers never share one
        first.write("new"), second.write("other")
    assert path.read_text() == "new"


@pytest.mark.parametrize("path", ["/proc/nope/x", "/sys/foo"])
def test_impossible_locations_are_refused_and_nothing_is_created(path):
    from pathlib import Path

    with pytest.raises(ConfigError, match="cannot be written"):
        RunDirectory(Path(path)).check_location()
    assert not Path(path).exists()


def test_notebooks_write_to_the_checkouts_runs_wherever_the_kernel_starts(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "vaco_jax").mkdir()
    (tmp_path / "notebooks").mkdir()
    for start in (tmp_path, tmp_path / "notebooks"):
        assert notebook_dir("01_quickstart", start) == tmp_path / "runs/notebooks/01_quickstart"
    elsewhere = tmp_path / "content"  # Colab: no checkout above the working directory
    elsewhere.mkdir()
    (tmp_path / "pyproject.toml").unlink()
    assert notebook_dir("02", elsewhere) == elsewhere / "runs/notebooks/02"


@pytest.mark.parametrize("mask", [0o022, 0o077])
def test_atomic_writes_give_files_the_mode_a_plain_write_would(tmp_path, mask):
    """A result file is readable as the user's umask allows (0644 under 022), not mkstemp's private 0600."""
    import os
    import stat

    old = os.umask(mask)
    try:
        written = write_text_atomic(tmp_path / "summary.json", "{}")
        with open_atomic(tmp_path / "chunk.npz", "wb") as handle:
            handle.write(b"x")
        (tmp_path / "plain.json").write_text("{}")
    finally:
        os.umask(old)
    want = stat.S_IMODE((tmp_path / "plain.json").stat().st_mode)
    assert want == 0o666 & ~mask
    for path in (written, tmp_path / "chunk.npz"):
        assert stat.S_IMODE(path.stat().st_mode) == want, path.name


def test_an_earlier_calibration_or_evaluation_is_never_replaced_without_overwrite(tmp_path):
    """vaco-jax calibrate replaced calibration.json silently: whatever the manifest says an earlier command wrote
    counts as results, refused without --overwrite (and no --resume hint where there is no run state to resume)."""
    out = tmp_path / "calibration"
    RunDirectory(out).prepare("run-1", ["calibration.json", "calibration.png"], overwrite=False, resume=False)
    (out / "calibration.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"already holds results \(calibration.json\); pass --overwrite") as info:
        RunDirectory(out).prepare("run-2", ["calibration.json", "calibration.png"], overwrite=False, resume=False)
    assert "--resume" not in str(info.value) and (out / "calibration.json").read_text() == "{}"
    RunDirectory(out).prepare("run-2", ["calibration.json", "calibration.png"], overwrite=True, resume=False)
    assert not (out / "calibration.json").exists()  # --overwrite clears what the manifest names


def test_a_second_command_on_a_directory_in_use_is_refused_naming_the_holder(tmp_path, capsys):
    """Two commands writing into one --out-dir would mix their results (seen: the second read the first's metric
    files): while one holds the directory, another is refused at once, naming it, and writes nothing."""
    from tests.test_cli import TINY
    from vaco_jax.cli import main

    out = tmp_path / "run"
    with RunDirectory(out).lock():
        assert main(["train", "--out-dir", str(out), *TINY]) == 2
        error = capsys.readouterr().err
        assert f"{out} is in use by another vaco-jax command (process {os.getpid()}" in error
        assert "another --out-dir" in error
        assert not out.exists()
        # --resume DIR writes into DIR, so it needs DIR's lock (it once took the default --out-dir's, runs/latest)
        out.mkdir()
        assert main(["sweep", "--resume", str(out), *TINY]) == 2
        assert f"{out} is in use by another vaco-jax command" in capsys.readouterr().err
    with RunDirectory(out).lock():  # released when the holder's block ends
        pass


def test_the_lock_lives_beside_the_directory_whatever_tmpdir_says(tmp_path, capsys, monkeypatch):
    """Two commands with different TMPDIR (two cluster jobs, two nodes on one shared filesystem) once both wrote
    into one --out-dir, the second's results silently replacing the first's: the lock is where every writer looks."""
    import tempfile

    from tests.test_cli import TINY
    from vaco_jax.cli import main

    out = tmp_path / "runs" / "shared"
    assert RunDirectory(out).lock_path() == tmp_path / "runs" / ".shared.vaco-jax-lock"
    with RunDirectory(out).lock():  # taken with this TMPDIR...
        other = tmp_path / "another-tmpdir"
        other.mkdir()
        monkeypatch.setenv("TMPDIR", str(other))
        monkeypatch.setattr(tempfile, "tempdir", str(other))  # ...and the second command has another one
        assert main(["train", "--out-dir", str(out), *TINY]) == 2
        assert f"{out} is in use by another vaco-jax command (process {os.getpid()}" in capsys.readouterr().err
        assert main(["train", "--resume", str(out), *TINY]) == 2  # a requeued job on another node: refused too
        assert f"{out} is in use by another vaco-jax command" in capsys.readouterr().err
    assert not out.exists()  # a refused command writes nothing but the lock beside (never removed: others use it)
    assert [p.name for p in (tmp_path / "runs").iterdir()] == [".shared.vaco-jax-lock"]


def test_a_parent_the_user_may_not_write_holds_no_lock_but_the_system_temporary_folder_does(tmp_path, monkeypatch):
    import vaco_jax.runs.directory_lock as directory_lock

    opened, real = [], directory_lock._open_lock

    def refuse_beside(path):
        opened.append(path)
        if len(opened) == 1:
            raise PermissionError(13, "Permission denied")
        return real(path)

    monkeypatch.setattr(directory_lock, "_open_lock", refuse_beside)
    out = tmp_path / "run"
    with RunDirectory(out).lock():
        pass
    assert opened[0] == RunDirectory(out).lock_path() and opened[1].name.startswith(f"vaco-jax-lock-{os.getuid()}-")


def test_a_lock_that_cannot_be_taken_is_one_line(tmp_path, capsys):
    from tests.test_cli import TINY
    from vaco_jax.cli import main

    out = tmp_path / "run"
    RunDirectory(out).lock_path().mkdir()  # the lock's name is taken by something it cannot open
    assert main(["train", "--out-dir", str(out), *TINY]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"vaco-jax: error: {out} cannot be locked (") and said.count("\n") == 1, said


def test_a_killed_holder_releases_its_directory(tmp_path):
    """The operating system releases the lock however the holder ends: kill -9 leaves no stale lock behind."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from vaco_jax.runs.run_directory import RunDirectory\n"
            f"with RunDirectory({str(out)!r}).lock():\n    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"process {holder.pid}, `-c`"):
            with RunDirectory(out).lock():
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with RunDirectory(out).lock():
        pass


def test_a_killed_writes_temporary_is_the_runs_own_and_is_cleaned_on_the_next_open(tmp_path):
    """A process killed inside an atomic write leaves ``.<name>.<random>.tmp``: it belongs to the run (it blocks
    neither --resume nor --overwrite) and the next command removes it; a user's look-alike file is still theirs."""
    directory = tmp_path / "run"
    directory.mkdir()
    RunDirectory(directory).mark("run-1", ["metrics.json", "summary.json"])
    (directory / "metrics.json").write_text("{}")
    leftover = directory / ".summary.json.k3j9x_2a.tmp"
    leftover.write_text("half a summary")
    users = directory / ".notes.txt.backup.tmp"  # the same shape, for a file the run never wrote
    users.write_text("my notes")
    assert RunDirectory(directory).foreign_entries() == [users.name]
    users.unlink()
    assert RunDirectory(directory).foreign_entries() == []
    RunDirectory(directory).prepare("run-1", ["metrics.json", "summary.json"], overwrite=False, resume=True)
    assert not leftover.exists() and (directory / "metrics.json").exists()


def test_a_figure_is_written_whole_or_not_at_all(tmp_path):
    """Plots go through the atomic writer: a draw that dies half way leaves the old image and no temporary."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vaco_jax.runs.plotting import save_figure

    path = tmp_path / "learning_curves.png"
    path.write_bytes(b"the old image")
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    draw = fig.savefig

    def dies_half_way(handle, **kwargs):
        handle.write(b"\x89PNG and then")
        raise KeyboardInterrupt

    fig.savefig = dies_half_way
    with pytest.raises(KeyboardInterrupt):
        save_figure(fig, path)
    assert path.read_bytes() == b"the old image" and sorted(tmp_path.iterdir()) == [path]
    fig.savefig = draw
    save_figure(fig, path, dpi=50)
    assert path.read_bytes().startswith(b"\x89PNG") and sorted(tmp_path.iterdir()) == [path]
    plt.close(fig)


def test_a_users_file_inside_a_runs_own_folders_blocks_overwrite(tmp_path):
    """--overwrite removes a run's own folders; a file the user placed inside one (checkpoints/my_notes.txt) is not
    the run's, so the directory is refused whole and nothing is removed."""
    directory = tmp_path / "run"
    (directory / "checkpoints" / "4").mkdir(parents=True)
    (directory / "checkpoints" / "6.orbax-checkpoint-tmp-17").mkdir()
    (directory / "metrics").mkdir()
    (directory / "metrics" / "chunk_000000000_000000002.npz").write_bytes(b"")
    (directory / "tb" / "lag.k=4_seed0").mkdir(parents=True)
    RunDirectory(directory).mark("run-1", ["checkpoints", "metrics", "tb"])
    assert RunDirectory(directory).foreign_entries() == []
    (directory / "checkpoints" / "my_notes.txt").write_text("keep me")
    (directory / "metrics" / "analysis").mkdir()
    assert RunDirectory(directory).foreign_entries() == ["checkpoints/my_notes.txt", "metrics/analysis/"]
    with pytest.raises(ConfigError, match="checkpoints/my_notes.txt"):
        RunDirectory(directory).clear()
    assert (directory / "checkpoints" / "my_notes.txt").read_text() == "keep me"
    assert (directory / "checkpoints" / "4").is_dir()


def test_resetting_a_runs_own_folder_keeps_a_users_file(tmp_path):
    """A resume rewrites tb/ from the stored metrics: what the run wrote there goes, a user's file stays (it was
    once removed with the whole folder)."""
    run = RunDirectory(tmp_path / "run")
    (run.tensorboard / "lag.k=4_seed0").mkdir(parents=True)
    (run.tensorboard / "lag.k=4_seed0" / "events.out").write_text("old events")
    (run.tensorboard / "README.md").write_text("my notes on these curves")
    assert run.reset_folder("tb") == run.tensorboard
    assert sorted(p.name for p in run.tensorboard.iterdir()) == ["README.md"]
    with pytest.raises(ValueError, match="not one of a run's own folders"):
        run.reset_folder("notes")


def test_each_output_folder_is_one_entry_that_the_manifest_and_the_checks_read(tmp_path):
    """An optional output's folder is declared once (run_contents.OUTPUT_FOLDERS): a run's manifest lists it exactly
    when its Output option is on, and the directory's checks know its contents whether or not the run writes it."""
    import dataclasses

    from vaco_jax.runs.output_options import Output
    from vaco_jax.runs.run_contents import OUTPUT_FOLDERS, OWNED_FOLDER_CONTENTS, train_entries

    fields = {field.name: field for field in dataclasses.fields(Output)}
    assert {folder.option for folder in OUTPUT_FOLDERS} == {"tensorboard", "wandb"}
    for folder in OUTPUT_FOLDERS:
        assert fields[folder.option].type in (bool, "bool") and OWNED_FOLDER_CONTENTS[folder.name] == folder.patterns
        on = train_entries({"lag.k": [0, 4]}, Output(**{folder.option: True}))
        off = train_entries({"lag.k": [0, 4]}, Output())
        assert folder.name in on and folder.name not in off and "final_vs_lag.k.png" in on
        assert set(on) - set(off) == {folder.name}
