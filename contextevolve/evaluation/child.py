"""Child-process entry point: import the candidate, run the task harness, write ``result.json``.

Usage (by :func:`contextevolve.evaluation.isolation.run_candidate` only)::

    python -m contextevolve.evaluation.child WORKDIR

Imports nothing heavy so that a candidate evaluation starts in tens of milliseconds.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import traceback
from pathlib import Path


def _write(work: Path, envelope: dict) -> None:
    tmp = work / "result.json.tmp"
    tmp.write_text(json.dumps(envelope), encoding="utf-8")
    tmp.replace(work / "result.json")


def _seed_rngs() -> None:
    """Seed every RNG the candidate may use so the same program gets the same metrics each run."""
    import random

    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)


def main(workdir: str) -> int:
    """Run the harness named in ``WORKDIR/payload.json`` on ``WORKDIR/candidate.py``."""
    work = Path(workdir)
    spec_doc = json.loads((work / "payload.json").read_text(encoding="utf-8"))
    module_name, _, fn_name = spec_doc["harness"].partition(":")
    harness = getattr(importlib.import_module(module_name), fn_name)
    try:
        spec = importlib.util.spec_from_file_location("candidate", work / "candidate.py")
        candidate = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = candidate
        spec.loader.exec_module(candidate)
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's fault
        _write(work, {"error": f"importing the program failed: {type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=3)})
        return 0
    _seed_rngs()
    try:
        result = harness(candidate, spec_doc["payload"])
    except BaseException as exc:  # noqa: BLE001
        _write(work, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=3)})
        return 0
    _write(work, {"result": result})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
