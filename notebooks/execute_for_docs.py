"""Execute the notebooks at their full budgets and write the executed copies the docs site shows.

The notebooks in this folder are committed without outputs (they open clean in Colab). The docs show them with
their outputs: this script runs each one top to bottom in a Jupyter kernel (nbclient), as Colab would, at its full
budget, and writes the executed copy to ``docs/notebooks/<name>.ipynb`` with a record of what made it (the commit,
the machine, the seconds) in the notebook's metadata. The run directories the notebooks write go to the
repository's ``runs/notebooks/`` as usual; paths to them are written relative to the repository in the outputs.

``tests/test_notebooks.py`` checks that every executed copy is current: the same cells as its notebook, every code cell
run, no error, a figure. A notebook edited without running this again fails there.

    .venv/bin/python notebooks/execute_for_docs.py                  # all of them
    .venv/bin/python notebooks/execute_for_docs.py 02_policy_lag    # one
    .venv/bin/python notebooks/execute_for_docs.py --markdown-only  # text edits only: outputs kept, nothing run

``--markdown-only`` copies the notebooks' markdown cells into their executed copies without running anything, and
only where every code cell is unchanged (the outputs are then still the ones those cells give); it is refused
otherwise, naming the notebook to run again. The record says when the text was synced and from which commit.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
EXECUTED = ROOT / "docs" / "notebooks"
RECORD_KEY = "vaco_jax_executed"  # the executed copy's metadata entry: how it was made


def machine() -> str:
    """The CPU (and accelerator, if JAX sees one) the notebooks ran on, in words."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores"


NOISE = ("TqdmWarning: IProgress not found",)  # stderr of this machine's kernel, not of the notebook's code


def tidy(notebook: object) -> None:
    """Outputs as a user's Jupyter shows them, without this machine: files under the repository named relative to
    it (no machine path in the docs), and stderr lines about the kernel's setup (no ipywidgets here) dropped."""
    prefix = str(ROOT) + os.sep
    for cell in notebook.cells:  # type: ignore[attr-defined]
        outputs = cell.get("outputs", [])
        outputs[:] = [
            o for o in outputs if not (o.get("name") == "stderr" and any(n in o.get("text", "") for n in NOISE))
        ]
        for output in outputs:
            if "text" in output:
                output["text"] = output["text"].replace(prefix, "")
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/") and isinstance(value, str):
                    output["data"][kind] = value.replace(prefix, "")


def execute(name: str) -> float:
    """Run ``notebooks/<name>.ipynb`` at its full budget and write ``docs/notebooks/<name>.ipynb``; the seconds."""
    import nbformat
    from nbclient import NotebookClient

    source = NOTEBOOKS / f"{name}.ipynb"
    if not source.exists():
        known = ", ".join(sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb")))
        raise SystemExit(f"no notebook {source.relative_to(ROOT)}; the notebooks are: {known}")
    notebook = nbformat.read(source, as_version=4)
    os.environ.pop("VACO_JAX_NOTEBOOK_BUDGET", None)  # the full budget: what a user running it sees
    os.environ.setdefault("MPLBACKEND", "Agg")
    start = time.perf_counter()
    NotebookClient(
        notebook, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    seconds = time.perf_counter() - start
    tidy(notebook)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "vaco_jax", "notebooks"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    notebook.metadata[RECORD_KEY] = {
        "command": f"python notebooks/execute_for_docs.py {name}",
        "commit": commit + (" (with uncommitted changes)" if dirty.strip() else ""),
        "machine": machine(),
        "seconds": round(seconds),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "python": platform.python_version(),
    }
    EXECUTED.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, EXECUTED / f"{name}.ipynb")
    return seconds


def sync_markdown(name: str) -> bool:
    """Copy ``notebooks/<name>.ipynb``'s markdown cells into its executed copy, where the two have the same cells
    in the same order and every code cell's source is unchanged; returns whether anything changed. SystemExit
    otherwise, naming the command that runs it again."""
    import nbformat

    source = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    target_path = EXECUTED / f"{name}.ipynb"
    if not target_path.is_file():
        raise SystemExit(f"{name}: no executed copy to sync; run python notebooks/execute_for_docs.py {name}")
    executed = nbformat.read(target_path, as_version=4)
    kinds = [cell.cell_type for cell in source.cells] == [cell.cell_type for cell in executed.cells]
    code = [c.source for c in source.cells if c.cell_type == "code"]
    if not kinds or code != [c.source for c in executed.cells if c.cell_type == "code"]:
        raise SystemExit(
            f"{name}: its code cells (or its cells' order) changed since it was executed, so its outputs may have "
            f"too: run python notebooks/execute_for_docs.py {name}"
        )
    changed = False
    for mine, theirs in zip(source.cells, executed.cells, strict=True):
        if mine.cell_type == "markdown" and mine.source != theirs.source:
            theirs.source, changed = mine.source, True
    if changed:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
        executed.metadata[RECORD_KEY]["markdown_synced"] = {
            "commit": commit.strip(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "command": f"python notebooks/execute_for_docs.py --markdown-only {name}",
        }
        nbformat.write(executed, target_path)
    return changed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="notebook names without .ipynb (default: every notebook)")
    parser.add_argument(
        "--markdown-only", action="store_true", help="copy markdown edits into the executed copies; run nothing"
    )
    args = parser.parse_args()
    names = args.names or sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    if args.markdown_only:
        for name in names:
            print(f"{name}: {'markdown synced' if sync_markdown(name) else 'unchanged'}", flush=True)
        return
    for name in names:
        print(f"{name}: running at its full budget ...", flush=True)
        seconds = execute(name)
        print(f"{name}: {seconds:.0f} s, wrote {(EXECUTED / f'{name}.ipynb').relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
