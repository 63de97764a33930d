"""ShinkaEvolve as a peer in ``contextevolve compare``: its files, its command line, its evaluator.

ShinkaEvolve 0.0.7 has a virtual environment of its own (``make peers-shinka``: its pins clash with ours)
and runs in its own process, :mod:`contextevolve.compare.shinka_driver` under that environment's python.
:func:`prepare` writes what the driver reads into the spec's ``out_dir`` and returns its command line.
ShinkaEvolve evaluates every program (its initial one included) by starting ``out_dir/evaluate.py`` with
this environment's python; that script calls :func:`evaluate_main`, which scores the program only through
:func:`contextevolve.compare.ledger.evaluate` and writes the ``metrics.json`` and ``correct.json``
ShinkaEvolve reads. Its evaluation of the initial program is the ledger's copy of entry 0, so no candidate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from contextevolve.compare.peer_spec import PeerSpec, feedback_text, oriented, score_file, system_message
from contextevolve.tasks.registry import get_task

REPO = Path(__file__).resolve().parents[2]
PYTHON_ENV = "CONTEXTEVOLVE_SHINKA_PYTHON"
"""Environment variable naming another python of an environment with ShinkaEvolve 0.0.7 installed."""
START, END = "# EVOLVE-BLOCK-START", "# EVOLVE-BLOCK-END"
"""ShinkaEvolve edits only between these markers; a program without them is given them around all of it."""


def shinka_python() -> Path:
    """The python of ShinkaEvolve's environment.

    ``$CONTEXTEVOLVE_SHINKA_PYTHON``, else the one ``make peers-shinka`` makes in the repository (not
    resolved: a venv's python is known by its link).
    """
    return Path(os.environ.get(PYTHON_ENV) or REPO / ".venv-shinka" / "bin" / "python")


def unavailable() -> str | None:
    """Why ShinkaEvolve cannot run here (its environment is missing), None when it can."""
    if shinka_python().exists():
        return None
    return (f"ShinkaEvolve's environment is missing ({shinka_python()}): run `make peers-shinka` "
            f"or set {PYTHON_ENV}")


def marked(program: str) -> str:
    """``program`` with the EVOLVE-BLOCK markers around all of it when it has none."""
    return program if START in program else f"{START}\n{program.rstrip()}\n{END}\n"


def unmarked(source: str, initial_program: str) -> str:
    """``source`` without the markers :func:`marked` added to ``initial_program``.

    This is what our evaluator scores, so that ShinkaEvolve's copy of the initial program is the ledger's
    entry 0 to the byte.
    """
    if START in initial_program:
        return source
    lines = source.rstrip().split("\n")
    if len(lines) >= 2 and lines[0].strip() == START and lines[-1].strip() == END:
        body = "\n".join(lines[1:-1])
        return body + "\n" if initial_program.endswith("\n") else body
    return source
DRIVER = Path(__file__).resolve().with_name("shinka_driver.py")
SETUP_FILE = "shinka_setup.json"
"""The file of ``out_dir`` the driver reads this environment's python and the evaluation time limit from
(the same name as its ``SETUP_FILE``)."""

_EVALUATE_SCRIPT = '''"""ShinkaEvolve's evaluation program: ContextEvolve's evaluator (see shinka_peer.py)."""
import sys

from contextevolve.compare.shinka_peer import evaluate_main

sys.exit(evaluate_main(["--spec", {spec!r}, *sys.argv[1:]]))
'''


def prepare(spec: PeerSpec, spec_path: Path) -> list[str]:
    """Write ShinkaEvolve's inputs into ``spec.out_dir``; returns the command that runs it.

    Writes the task's initial program, its description (ShinkaEvolve's task system message), the
    evaluation script and the driver's setup file (this python, the evaluation time limit: the one
    OpenEvolve gets).

    Raises:
        FileNotFoundError: ShinkaEvolve's environment was not made.
    """
    reason = unavailable()
    if reason:
        raise FileNotFoundError(reason)
    task, out = get_task(spec.task), Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    spec_path = Path(spec_path).resolve()
    (out / "initial_program.py").write_text(marked(task.initial_program))
    (out / "task_description.txt").write_text(system_message(task))
    (out / "evaluate.py").write_text(_EVALUATE_SCRIPT.format(spec=str(spec_path)))
    (out / SETUP_FILE).write_text(json.dumps({"evaluator_python": sys.executable,
                                              "eval_timeout_s": task.timeout_s * 2 + 30}))
    return [str(shinka_python()), str(DRIVER), str(spec_path)]


def evaluate_main(argv: list[str] | None = None) -> int:
    """``evaluate.py --spec SPEC --program_path FILE --results_dir DIR``: score one ShinkaEvolve program.

    Writes ``DIR/metrics.json`` (``combined_score`` oriented so that higher is better, the task's metrics
    as ``public``, our status and unoriented score as ``private``, the diagnostics as ``text_feedback``)
    and ``DIR/correct.json`` (correct = status ``ok``); prints the diagnostics (ShinkaEvolve shows an
    incorrect program's output when asking for a fix).
    """
    parser = argparse.ArgumentParser(prog="evaluate.py")
    for name in ("--spec", "--program_path", "--results_dir"):
        parser.add_argument(name, required=True)
    args, _ = parser.parse_known_args(argv)
    spec = PeerSpec.model_validate_json(Path(args.spec).read_text())
    task, evaluation = score_file(spec, args.program_path, clean=unmarked)
    text = feedback_text(evaluation)
    metrics = {"combined_score": oriented(task, evaluation),
               "public": {key: float(value) for key, value in evaluation.metrics.items()},
               "private": {"status": evaluation.status, "task_combined_score": evaluation.combined_score},
               "text_feedback": text}
    correct = {"correct": evaluation.status == "ok", "error": evaluation.reason or None}
    results = Path(args.results_dir)
    results.mkdir(parents=True, exist_ok=True)
    (results / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (results / "correct.json").write_text(json.dumps(correct, indent=2))
    print(text)
    return 0
