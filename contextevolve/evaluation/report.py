"""Decoding the supervisor's report into a :class:`~contextevolve.evaluation.results.CandidateRun`.

Its frames follow :mod:`contextevolve.evaluation.protocol`; exit statuses and the report's structured
fields become reasons a person can read. Statuses are read from the report's fields, never from an
error's text.
"""

from __future__ import annotations

import os
import signal
import threading

from contextevolve.evaluation import cgroups, protocol
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.results import CallResult, CandidateRun

#: Cap on one JSON reply of the candidate's process, bytes (larger outputs travel as arrays).
MAX_HEADER_BYTES = 16 * 2**20
#: Cap on all JSON the sandbox reports for one evaluation, bytes (bounds the host's memory).
MAX_REPORT_HEADER_BYTES = 64 * 2**20


class ReportReader(threading.Thread):
    """Reads the supervisor's report frames as they arrive (bounded), so the pipe never fills."""

    def __init__(self, fd: int, max_blobs: int):
        super().__init__(daemon=True)
        self.fd, self.max_blobs = fd, max_blobs
        self.frames: list[tuple[dict, dict[str, bytes]]] = []
        self.error = ""

    def run(self) -> None:
        """Read frames until the stream ends; a malformed stream or a read error sets :attr:`error`."""
        budget, text_budget = self.max_blobs, MAX_REPORT_HEADER_BYTES
        try:
            while True:
                sizes: list[int] = []
                header, blobs = protocol.read_frame(self.fd,
                                                    max_header=min(text_budget, MAX_HEADER_BYTES + 4096),
                                                    max_blobs=budget, sizes=sizes)
                text_budget, budget = text_budget - sizes[0], budget - sizes[1]
                self.frames.append((header, blobs))
        except EOFError:
            pass
        except (protocol.ProtocolError, OSError) as exc:
            self.error = str(exc)
        finally:
            os.close(self.fd)


def read_report(frames: list, n_calls: int, limits: SandboxLimits, group: cgroups.EvalCgroup | None,
                 stdout_tail: str, stderr_tail: str, seconds: float, returncode: int | None) -> CandidateRun:
    """Turn the supervisor's frames into a :class:`CandidateRun` (structured statuses, no text search)."""
    by_type: dict[str, list] = {}
    for header, blobs in frames:
        by_type.setdefault(header.get("type"), []).append((header, blobs))
    imported = by_type.get("import", [({}, {})])[0][0]
    end = by_type.get("end", [({}, {})])[0][0]
    run = CandidateRun("ok", "", seconds, stdout_tail, stderr_tail,
                       import_seconds=float(imported.get("seconds") or 0.0),
                       cpu_s=float((end.get("runner") or {}).get("cpu_s") or 0.0))
    if not imported:  # the supervisor could not even start a runner
        last = stderr_tail.strip().splitlines()[-1:] or [f"the sandbox exited with code {returncode}"]
        run.status, run.reason = "failed", last[0][:300]
        return run
    if imported.get("error"):
        run.status, run.traceback = "failed", str(imported.get("traceback") or "")
        death, kind = imported.get("death") or {}, imported.get("kind")
        if kind == "raised":
            run.reason = resource_reason(str(imported["error"]), imported.get("limit"), limits)
        elif kind == "died" and death.get("exitcode") == protocol.EXIT_SETUP_FAILED:
            run.reason = (stderr_tail.strip().splitlines()[-1:] or ["sandbox setup failed"])[0]
            run.failure_kind = "evaluator"
        elif kind == "died":
            run.reason = _limit_reason(death, limits, group) or _death_reason(death, stderr_tail)
        else:  # the import outlived its time limit: a timeout, like the wall clock
            run.reason = _limit_reason(death, limits, group) or str(imported["error"])
            run.status = "timeout" if kind == "timeout" else "failed"
        return run
    calls = {}
    for header, blobs in by_type.get("call", []):
        index = header.get("index")
        if type(index) is int and 0 <= index < n_calls:
            if index in calls:  # only the supervisor writes here: a second frame is a forgery
                run.status, run.reason = "failed", f"the sandbox reported call {index} twice"
                return run
            calls[index] = _call_result(header, blobs, limits, group, stderr_tail)
    if len(by_type.get("import", [])) > 1 or len(by_type.get("end", [])) > 1:
        run.status, run.reason = "failed", "the sandbox's report is not well formed"
        return run
    if not end or len(calls) != n_calls:
        run.status, run.reason = "failed", f"the sandbox stopped after {len(calls)} of {n_calls} calls" + (
            f" (exit code {returncode})" if returncode else "")
        return run
    run.calls = [calls[i] for i in range(n_calls)]
    return run


def _call_result(header: dict, blobs: dict[str, bytes], limits: SandboxLimits,
                 group: cgroups.EvalCgroup | None, stderr_tail: str) -> CallResult:
    status = header.get("status") if header.get("status") in protocol.CALL_STATUSES else "crashed"
    index = header["index"]
    error = str(header.get("error") or "")
    death = header.get("death") or {}
    if status == "crashed":
        error = _limit_reason(death, limits, group) or _death_reason(death, stderr_tail)
    elif status == "timeout":
        error = _limit_reason(death, limits, group) if death.get("signal") == signal.SIGXCPU else error
    elif status == "error":
        error = resource_reason(error, header.get("limit"), limits)
    return CallResult(status=status, seconds=float(header.get("seconds") or 0.0), value=header.get("value"),
                      blobs=protocol.blobs_of_call(index, blobs.keys(), blobs), error=error,
                      traceback=str(header.get("traceback") or ""))


def resource_reason(error: str, limit: str | None, limits: SandboxLimits) -> str:
    """Name the limit behind an exception the candidate's process raised.

    It is read from the report's structured ``limit`` field (:data:`protocol.RAISED_LIMITS`), not from the
    error text.
    """
    if limit == "memory":
        return f"memory limit of {limits.memory_mb} MiB exceeded ({error})"
    if limit == "file_size":
        return f"file-size limit of {limits.files_mb} MiB exceeded ({error})"
    return error


def _limit_reason(death: dict, limits: SandboxLimits, group: cgroups.EvalCgroup | None) -> str:
    """The sandbox limit that killed a runner, from its exit status; empty when none did."""
    sig = death.get("signal")
    cpu_s = float(death.get("cpu_s") or 0.0)
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_s - 0.5):
        return f"CPU-time limit of {limits.cpu_s:g} s exceeded"
    if sig == signal.SIGXFSZ:
        return f"file-size limit of {limits.files_mb} MiB exceeded"
    if sig == signal.SIGKILL and group is not None and group.hit_memory_limit():
        return f"memory limit of {limits.memory_mb} MiB exceeded (killed by the kernel)"
    return ""


def _death_reason(death: dict, stderr_tail: str) -> str:
    """Why a runner ended without answering, from its exit status."""
    sig, code = death.get("signal"), death.get("exitcode")
    if sig is not None:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        reason = f"candidate process killed by signal {name}"
    else:
        reason = f"candidate process exited with code {code} without a result"
    last = stderr_tail.strip().splitlines()[-1:] or [""]
    return reason + (f": {last[0][:300]}" if last[0] else "")
