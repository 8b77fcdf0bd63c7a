"""Every notebook in examples/ runs top to bottom against a real hang bundle, without error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted((ROOT / "examples").glob("*.ipynb"))

pytestmark = pytest.mark.integration


def _execute(path: Path, kernel: str, env: dict[str, str], workdir: Path) -> "nbformat.NotebookNode":
    nb = nbformat.read(path, as_version=4)
    saved = dict(os.environ)
    os.environ.update(env)  # the kernel inherits this environment
    try:
        client = nbclient.NotebookClient(nb, timeout=180, kernel_name=kernel, resources={"metadata": {"path": str(workdir)}})
        client.execute()  # raises CellExecutionError on the first failing cell
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return nb


def _outputs(nb) -> list[dict]:
    return [out for cell in nb.cells if cell.cell_type == "code" for out in cell.get("outputs", [])]


def test_examples_exist():
    assert any(p.name == "postmortem.ipynb" for p in NOTEBOOKS), "examples/postmortem.ipynb is missing"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_on_a_real_bundle(notebook: Path, demo_bundle: Path, kernel_name: str, tmp_path: Path, artifacts_dir: Path):
    env = {"FORENSICS_BUNDLE": str(demo_bundle), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    nb = _execute(notebook, kernel_name, env, tmp_path)
    nbformat.write(nb, artifacts_dir / f"{notebook.stem}.executed.ipynb")
    outputs = _outputs(nb)
    assert not [o for o in outputs if o.get("output_type") == "error"]
    if notebook.stem == "postmortem":
        svgs = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
        assert len(svgs) >= 4, "the pictures did not render inline"
        html = "".join(o.get("data", {}).get("text/html", "") for o in outputs)
        assert "VERDICT" in html and "rank 2" in html


def test_postmortem_notebook_makes_its_own_bundle(kernel_name: str, tmp_path: Path):
    """Without FORENSICS_BUNDLE the notebook runs the demo itself: the path a new user takes."""
    pytest.importorskip("torch")
    env = {"FORENSICS_BUNDLE": "", "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    nb = _execute(ROOT / "examples" / "postmortem.ipynb", kernel_name, env, tmp_path)
    text = "".join(str(o.get("text", "")) for o in _outputs(nb))
    assert "demo: injected a 'sleep' on rank 2" in text
