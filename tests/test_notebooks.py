"""The three notebooks run top to bottom in a Jupyter kernel (nbclient), as in Colab, on a small budget."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


def test_there_are_the_three_notebooks():
    assert [p.stem for p in NOTEBOOKS] == ["01_quickstart", "02_policy_lag", "03_extend"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_is_stripped_opens_in_colab_and_installs_itself_first(path):
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:  # outputs stripped in git
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, "".join(cell["source"])[:80]
    github = REPOSITORY.removeprefix("https://github.com/")
    badge = f"https://colab.research.google.com/github/{github}/blob/main/notebooks/{path.name}"
    assert badge in "".join(cells[0]["source"])
    first_code = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    assert 'importlib.util.find_spec("vaco_jax") is None' in first_code  # does nothing where installed
    assert f"git+{REPOSITORY}" in first_code


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.setenv("VACO_JAX_NOTEBOOK_BUDGET", "small")
    cache = os.environ.get("VACO_JAX_TEST_CACHE", str(ROOT / ".jax_cache"))  # the kernel shares the tests' cache
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", cache)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    before = sorted(p.name for p in (ROOT / "notebooks").iterdir())
    notebook = nbformat.read(path, as_version=4)
    checkout = tmp_path  # a checkout's shape: the kernel starts in its notebooks/ folder, as Jupyter does
    (checkout / "pyproject.toml").write_text("")
    (checkout / "vaco_jax").mkdir()
    (checkout / "notebooks").mkdir()
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(checkout / "notebooks")}}
    ).execute()
    assert list((checkout / "notebooks").iterdir()) == []  # written to the checkout's runs/, not notebooks/runs/
    written = sorted(p.name for p in (tmp_path / "runs" / "notebooks" / path.stem).iterdir())
    assert written and all(name.endswith((".png", ".gif")) for name in written), written  # figures, a policy
    assert sorted(p.name for p in (ROOT / "notebooks").iterdir()) == before  # nothing written next to the notebooks
    errors = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_docs_show_each_notebook_executed_and_current(path):
    """The docs site shows docs/notebooks/<name>.ipynb, written by notebooks/execute_for_docs.py: the notebook's
    own cells, every code cell run at the full budget, no error, a figure, and a record of what made it. A notebook
    edited without running the script again fails here."""
    import nbformat

    executed_path = ROOT / "docs" / "notebooks" / path.name
    rerun = f"run `python notebooks/execute_for_docs.py {path.stem}` and commit {executed_path.relative_to(ROOT)}"
    assert executed_path.is_file() and not executed_path.is_symlink(), f"no executed copy: {rerun}"
    notebook, executed = nbformat.read(path, as_version=4), nbformat.read(executed_path, as_version=4)
    cells = [(c.cell_type, c.source) for c in notebook.cells]
    assert [(c.cell_type, c.source) for c in executed.cells] == cells, f"the notebook changed since: {rerun}"
    code = [c for c in executed.cells if c.cell_type == "code"]
    assert all(c.execution_count for c in code), f"a cell was not run: {rerun}"
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"], f"a cell failed: {rerun}"
    assert any("image/png" in o.get("data", {}) for o in outputs), "no figure in the executed notebook"
    text = "\n".join(o.get("text", "") for o in outputs)
    assert "small budget" not in text and "full budget" in text, f"not run at the full budget: {rerun}"
    assert str(ROOT) not in nbformat.writes(executed), "a machine path in the docs' notebook"
    record = executed.metadata["vaco_jax_executed"]  # notebooks/execute_for_docs.py's RECORD_KEY
    assert {"commit", "machine", "seconds", "date", "command"} <= set(record)


def test_readme_docs_and_notebooks_stand_alone():
    """Users have only the repository: no link or path out of it, and every relative link resolves inside it."""
    import re

    documents = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *NOTEBOOKS]
    for document in documents:
        text = document.read_text()
        assert "../shared" not in text and "shared/spec" not in text and "spec section" not in text, document.name
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):  # markdown links
            if not target.startswith(("http://", "https://")):
                path = (document.parent / target).resolve()
                assert path.exists(), f"{document.name} links to a missing {target}"
                assert ROOT in path.parents, f"{document.name} links out of the repository: {target}"


def test_markdown_edits_sync_into_the_executed_copy_but_code_edits_need_a_run(tmp_path, monkeypatch):
    """notebooks/execute_for_docs.py --markdown-only: a text edit is copied into the executed copy (outputs kept,
    the sync recorded); an edited code cell is refused, naming the command that runs the notebook again."""
    import importlib.util
    import shutil

    import nbformat

    spec = importlib.util.spec_from_file_location("execute_for_docs", ROOT / "notebooks" / "execute_for_docs.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    (tmp_path / "nb").mkdir()
    (tmp_path / "docs").mkdir()
    shutil.copy(ROOT / "notebooks" / "03_extend.ipynb", tmp_path / "nb")
    shutil.copy(ROOT / "docs" / "notebooks" / "03_extend.ipynb", tmp_path / "docs")
    monkeypatch.setattr(script, "NOTEBOOKS", tmp_path / "nb")
    monkeypatch.setattr(script, "EXECUTED", tmp_path / "docs")
    notebook = nbformat.read(tmp_path / "nb" / "03_extend.ipynb", as_version=4)
    text = next(c for c in notebook.cells if c.cell_type == "markdown")
    text.source += "\n\nAn added sentence."
    nbformat.write(notebook, tmp_path / "nb" / "03_extend.ipynb")
    assert script.sync_markdown("03_extend") and not script.sync_markdown("03_extend")
    executed = nbformat.read(tmp_path / "docs" / "03_extend.ipynb", as_version=4)
    assert [c.source for c in executed.cells] == [c.source for c in notebook.cells]
    assert any(c.get("outputs") for c in executed.cells if c.cell_type == "code")  # outputs kept
    assert "markdown_synced" in executed.metadata["vaco_jax_executed"]
    code = next(c for c in notebook.cells if c.cell_type == "code")
    code.source += "\nprint('changed')"
    nbformat.write(notebook, tmp_path / "nb" / "03_extend.ipynb")
    with pytest.raises(SystemExit, match="run python notebooks/execute_for_docs.py 03_extend"):
        script.sync_markdown("03_extend")
