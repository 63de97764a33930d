"""The inspection notebook runs against a real run directory and writes its plot."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

from contextevolve.api import evolve

ROOT = Path(__file__).resolve().parents[2]


def test_notebook_walks_state_history_and_plots(tmp_path, models, monkeypatch):
    """Two workers, extended once: the notebook walks both threads' histories, each child found once.

    On the extension each worker's thread passes initialize again, with its last child's ids; the
    notebook walks both threads' histories and finds every committed child once.
    """
    evolve("model_placement", iterations=2, run_dir=tmp_path / "run", max_retries=0, workers=2)
    evolve("model_placement", iterations=3, run_dir=tmp_path / "run", resume=True)
    monkeypatch.setenv("CONTEXTEVOLVE_RUN_DIR", str(tmp_path / "run"))
    nb = nbformat.read(ROOT / "notebooks" / "inspect_run.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    history_out = "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert "worker 0 (thread worker-0)" in history_out and "worker 1 (thread worker-1)" in history_out
    assert all(history_out.count(f"'iteration': {n},") == 1 for n in (1, 2, 3)), history_out
    assert "'committed': 3," in history_out and "'committed': 4," not in history_out
    assert (tmp_path / "run" / "curves.png").stat().st_size > 10_000
