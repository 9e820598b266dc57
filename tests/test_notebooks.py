"""The quickstart notebook's code cells run top to bottom (without Jupyter: plain exec)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
def test_quickstart_notebook_runs(tmp_path):
    cells = json.loads((NOTEBOOKS / "quickstart.ipynb").read_text())["cells"]
    code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        namespace: dict = {}
        exec(compile(code, "quickstart.ipynb", "exec"), namespace)
    finally:
        os.chdir(cwd)
    assert (tmp_path / "final_vs_lag.png").stat().st_size > 0
    assert namespace["results"]["vaco"].metrics["filter/kept"].shape == (3, 4, 20)
