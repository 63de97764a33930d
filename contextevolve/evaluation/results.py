"""What one sandboxed evaluation of a candidate returns.

The run of its process tree and each timed call, as the trusted supervisor and host saw them
(:func:`contextevolve.evaluation.isolation.run_candidate`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class CallResult:
    """One call of the candidate, as the trusted supervisor saw it.

    ``status`` is one of :data:`~contextevolve.evaluation.protocol.CALL_STATUSES`;
    ``seconds`` is the supervisor's wall time from sending the request to the last byte of
    the response (never a number the candidate reported); ``value`` and ``blobs`` are the
    harness's serialised output — untrusted data for the grader to check.
    """

    status: str
    seconds: float
    value: Any = None
    blobs: dict[str, bytes] = field(default_factory=dict)
    error: str = ""
    traceback: str = ""


@dataclass
class CandidateRun:
    """What came back from one candidate process tree.

    ``status`` is ``"ok"`` when the supervisor reported every call (each call then has its
    own status in ``calls``), ``"timeout"`` when the tree was killed at the wall-clock limit
    or the import outlived its limit, ``"failed"`` otherwise (the program could not be
    imported, the sandbox failed, a limit of the whole tree was hit), with ``reason`` saying
    why.
    """

    status: str
    reason: str
    seconds: float
    stdout_tail: str
    stderr_tail: str
    calls: list[CallResult] = field(default_factory=list)
    """One entry per call of the job, in order (empty unless ``status`` is ``"ok"``)."""
    import_seconds: float = 0.0
    """Wall time the first runner took to start and import the harness and the candidate."""
    traceback: str = ""
    """Traceback excerpt of an import failure (empty otherwise)."""
    cpu_s: float = 0.0
    """CPU seconds (user + system) of the candidate's processes, as measured by the supervisor."""
    notes: list[str] = field(default_factory=list)
    """Sandbox guarantees this host could not enforce (empty when all were)."""
    leftovers_killed: int = 0
    """Processes of the tree still alive after the candidate returned, killed by the host."""
    failure_kind: str = ""
    """``"evaluator"`` when our side failed (the host's staging or launch, the sandbox's setup), so the
    evaluation says so (:data:`~contextevolve.memory.records.FailureKind`); empty otherwise (the status
    then implies the kind)."""


def outputs_digest(calls: list[CallResult]) -> str:
    """SHA-256 (hex) of what a candidate returned: each call's status, value and blobs, in call order.

    Two runs with the same digest gave the harness the same outputs for every case, whatever their timings.
    ``""`` when a value cannot be serialised (a candidate's output is untrusted: nothing here raises).
    """
    digest = hashlib.sha256()
    try:
        for call in calls:
            digest.update(json.dumps([call.status, call.value], sort_keys=True, default=repr).encode())
            for name in sorted(call.blobs):
                digest.update(name.encode() + b"\0" + hashlib.sha256(call.blobs[name]).digest())
    except (TypeError, ValueError, RecursionError, MemoryError):
        return ""
    return digest.hexdigest()
