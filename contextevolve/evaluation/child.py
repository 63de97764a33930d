"""Child-process entry point: a trusted supervisor that confines and runs one candidate.

Usage (by :func:`contextevolve.evaluation.isolation.run_candidate` only)::

    [unshare --net --pid --fork --kill-child] python -m contextevolve.evaluation.child PRIVATE_DIR

``PRIVATE_DIR/sandbox.json`` says what to enforce. The supervisor (PID 1 of the new PID
namespace when there is one, so its exit kills every process left in it) joins the
evaluation's cgroups and forks the *runner*. The runner sets its rlimits, confines itself
with Landlock, drops every capability, and only then imports the task harness and the
candidate, runs the harness and writes ``WORKDIR/result.json``. The supervisor waits,
and writes the runner's exit status and CPU time to ``PRIVATE_DIR/status.json`` —
outside the working directory, where the confined candidate cannot write.

Imports nothing heavy so that a candidate evaluation starts in tens of milliseconds.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import resource
import sys
import traceback
from pathlib import Path

_PR_SET_CHILD_SUBREAPER = 36


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


def _confine(config: dict) -> None:
    """Apply rlimits, Landlock and capability dropping to this (runner) process. Raises on failure."""
    limits = config["rlimits"]
    for name, (soft, hard) in limits.items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if config["landlock"]:
        from contextevolve.evaluation import landlock

        landlock.restrict_self([config["workdir"]], ["/dev/null"], deny_tcp=config["deny_tcp"])
    from contextevolve.evaluation import privileges

    if privileges.effective_capabilities():
        privileges.drop_all()


def run(work: Path, harness_path: str, payload) -> None:
    """Import the harness and the candidate in ``work`` and write the harness's result (or the error)."""
    module_name, _, fn_name = harness_path.partition(":")
    harness = getattr(importlib.import_module(module_name), fn_name)
    try:
        spec = importlib.util.spec_from_file_location("candidate", work / "candidate.py")
        candidate = importlib.util.module_from_spec(spec)
        sys.modules["candidate"] = candidate
        spec.loader.exec_module(candidate)
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's fault
        _write(work, {"error": f"importing the program failed: {type(exc).__name__}: {exc}",
                      "traceback": traceback.format_exc(limit=3)})
        return
    _seed_rngs()
    try:
        result = harness(candidate, payload)
    except BaseException as exc:  # noqa: BLE001
        _write(work, {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=3)})
        return
    _write(work, {"result": result})


def _runner(config: dict) -> None:
    work = Path(config["workdir"])
    try:
        _confine(config)
    except Exception as exc:  # noqa: BLE001 - refuse to run the candidate unconfined
        print(f"sandbox setup failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(70)
    doc = json.loads((work / "payload.json").read_text(encoding="utf-8"))
    try:
        run(work, doc["harness"], doc["payload"])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)


def main(private_dir: str) -> int:
    """Supervise one evaluation described by ``PRIVATE_DIR/sandbox.json``."""
    private = Path(private_dir)
    config = json.loads((private / "sandbox.json").read_text(encoding="utf-8"))
    for group in config["cgroups"]:
        Path(group, "cgroup.procs").write_text("0")
    if os.getpid() != 1:  # no PID namespace: adopt orphaned descendants so they stay in our tree
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.chdir(config["workdir"])
    pid = os.fork()
    if pid == 0:
        _runner(config)
    _, status, usage = os.wait4(pid, 0)
    report = {"exitcode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
              "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
              "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss}
    (private / "status.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
