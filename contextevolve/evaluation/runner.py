"""The untrusted side of an evaluation: confine this process, import the candidate, answer calls.

Started by the supervisor as ``python -s -m contextevolve.evaluation.runner RESPONSE_FD``: requests on
stdin, responses on ``RESPONSE_FD`` (:mod:`contextevolve.evaluation.protocol`). On ``init`` it applies its
rlimits and Landlock rules and drops every capability, then imports the harness and the candidate and
seeds ``random``, NumPy and torch once (calls run in order in one process: metrics are reproducible). Each
``call`` runs ``harness.<fn>(candidate, args, blobs) -> (value, out_blobs)``. A candidate can replace any
of this code, so nothing it reports is trusted (docs/decisions/trusted-supervisor.md).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import resource
import sys
import traceback

from contextevolve.evaluation import protocol

_MAX_REQUEST = 1 << 34  # requests come from the trusted supervisor


def _forget_source_tree() -> None:
    """Drop the import hook of an editable install, which maps ``contextevolve.*`` to the source tree.

    Then only the staged harness modules import (``PYTHONPATH`` puts the staged copy first).
    The mount namespace, where the host has one, is what makes the tree unreadable; this keeps a
    plain ``import`` of a grader or data generator failing on a host without one.
    """
    sys.meta_path[:] = [f for f in sys.meta_path
                        if not str(getattr(f, "__module__", "")).startswith("__editable__")]


def _confine(config: dict) -> None:
    """Apply rlimits, Landlock and capability dropping to this process. Raises on failure."""
    _forget_source_tree()
    for name, (soft, hard) in config["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if config["landlock"]:
        from contextevolve.evaluation import landlock

        landlock.restrict_self([config["workdir"]], ["/dev/null"], deny_tcp=config["deny_tcp"])
    from contextevolve.evaluation import privileges

    if privileges.effective_capabilities():
        privileges.drop_all()


def _seed_rngs() -> None:
    """Seed every RNG the candidate may use so the same program gets the same metrics each run."""
    import random

    random.seed(0)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(0)


def _error(exc: BaseException, prefix: str = "") -> dict:
    return {"type": "error", "error": f"{prefix}{type(exc).__name__}: {str(exc)[:300]}",
            "traceback": "".join(traceback.format_exception(exc, limit=-4))[-1500:],
            "limit": protocol.raised_limit(exc)}


def _load(config: dict, harness_name: str, entry: str):
    """Import the harness, then the candidate (``candidate.py`` in the working directory)."""
    harness = importlib.import_module(harness_name)
    spec = importlib.util.spec_from_file_location("candidate",
                                                  os.path.join(config["workdir"], "candidate.py"))
    candidate = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = candidate
    spec.loader.exec_module(candidate)
    if entry and not callable(getattr(candidate, entry, None)):
        raise AttributeError(f"the program defines no function {entry}")
    return harness, candidate


def main(out: int) -> int:
    """Serve requests from stdin until it closes; responses go to file descriptor ``out``."""
    header, _ = protocol.read_frame(0, max_header=_MAX_REQUEST, max_blobs=_MAX_REQUEST)
    config = header["config"]
    try:
        _confine(config)
    except Exception as exc:  # noqa: BLE001 - refuse to run the candidate unconfined
        print(f"sandbox setup failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(protocol.EXIT_SETUP_FAILED)
    try:
        harness, candidate = _load(config, header["harness"], header["entry"])
    except BaseException as exc:  # noqa: BLE001 - any failure to import is the candidate's fault
        protocol.write_frame(out, _error(exc, "importing the program failed: "))
        return 0
    _seed_rngs()  # once per runner, as a program run on all its inputs in one process would be
    protocol.write_frame(out, {"type": "ready"})
    while True:
        try:
            request, blobs = protocol.read_frame(0, max_header=_MAX_REQUEST, max_blobs=_MAX_REQUEST)
        except EOFError:
            return 0
        try:
            value, out_blobs = getattr(harness, request["fn"])(candidate, request["args"], blobs)
            frame = protocol.encode_frame({"type": "result", "value": value}, out_blobs)
        except BaseException as exc:  # noqa: BLE001 - the candidate's failure, reported per call
            frame = protocol.encode_frame(_error(exc))
        sys.stdout.flush()
        protocol.write_all(out, frame)


if __name__ == "__main__":
    try:
        code = main(int(sys.argv[1]))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
