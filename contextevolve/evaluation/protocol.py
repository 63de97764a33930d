"""The evaluation protocol: who talks to whom, over what, in which shapes (stdlib only).

The host (:func:`contextevolve.evaluation.isolation.run_candidate`) writes the job to the trusted
supervisor's stdin and reads its report from the descriptor named on its command line; the supervisor
sends the untrusted runner ``init``, then one ``call`` at a time, on its stdin and reads its responses
likewise. A report is ``import``, a ``call`` per call, ``end``. Only the supervisor's measurements and
the runner's serialised outputs reach the grader (why three processes: docs/decisions/trusted-supervisor.md).

**Frames.** Every message is one frame: an 8-byte big-endian length ``H``, ``H`` bytes of a
UTF-8 JSON object (the *header*), then the raw bytes of the blobs the header announces in
``"blobs": [[name, size], ...]``, in that order. :func:`read_frame` enforces caps on the
header and blob sizes *before* allocating.

**Messages** (``"type"`` of the header):

=========  ====================  ==========================================================
type       direction             other keys
=========  ====================  ==========================================================
job        host → supervisor     ``config`` (:data:`CONFIG_KEYS`), ``harness`` (module),
                                 ``entry`` (function the candidate must define), ``calls``:
                                 ``[{"fn", "args", "timeout_s", "blobs": [names]}]``;
                                 blob names are ``"<call index>/<name>"``
init       supervisor → runner   ``config``, ``harness``, ``entry``
ready      runner → supervisor   (none): harness and candidate imported
call       supervisor → runner   ``fn``, ``args``; blobs: that call's inputs
result     runner → supervisor   ``value`` (JSON); blobs: output arrays (``.npy`` bytes)
error      runner → supervisor   ``error`` (one line), ``traceback`` (excerpt), ``limit``
                                 (:func:`raised_limit` of the exception)
import     supervisor → host     ``seconds``, ``error`` (None when the import succeeded),
                                 ``kind`` (``raised`` / ``timeout`` / ``died``), ``traceback``,
                                 ``limit`` (of a ``raised`` error, from :data:`RAISED_LIMITS`),
                                 ``death`` (as for ``call``); sent once, for the first runner
call       supervisor → host     ``index``, ``status`` (:data:`CALL_STATUSES`), ``seconds``
                                 (trusted wall time from sending the request to the last byte
                                 of the response), ``value``, ``error``, ``traceback``,
                                 ``limit`` (of an ``error``, from :data:`RAISED_LIMITS`),
                                 ``death`` (``{"exitcode", "signal", "cpu_s"}`` of a runner
                                 that died or was killed during the call, else None); blobs
end        supervisor → host     ``runner``: ``{"cpu_s", "max_rss_kb", "starts", "exitcode",
                                 "signal"}`` of the runner processes
=========  ====================  ==========================================================

**Exit codes** of the supervisor: 0 = report complete; :data:`EXIT_SETUP_FAILED` = the
sandbox could not be set up (refuses to run the candidate unconfined); anything else = the
supervisor itself was killed (the evaluation fails).
"""

from __future__ import annotations

import errno
import json
import os
import struct
from collections.abc import Iterable

SUPERVISOR_MODULE = "contextevolve.evaluation.supervisor"
"""Started by the host as ``python -s -m SUPERVISOR_MODULE REPORT_FD``."""
RUNNER_MODULE = "contextevolve.evaluation.runner"
"""Started by the supervisor as ``python -s -m RUNNER_MODULE RESPONSE_FD``."""
EXIT_SETUP_FAILED = 70
"""Exit code of a supervisor or runner that could not confine itself."""
CALL_STATUSES = ("ok", "error", "timeout", "crashed", "skipped")
"""``ok``: a result came back; ``error``: the candidate raised (or the harness refused its
output); ``timeout``: no response within the call's limit (the runner was killed);
``crashed``: the runner died during the call; ``skipped``: not run (the program could not
be imported, or crashed too often)."""
RAISED_LIMITS = ("memory", "file_size")
"""Sandbox limits a candidate meets as an exception rather than a signal: the address-space limit
raises ``MemoryError``; the file-size limit makes a write fail with ``EFBIG`` (Python ignores
``SIGXFSZ``). Reported as a structured ``limit`` field, so the host names the limit without
searching the error text."""


def raised_limit(exc: BaseException) -> str | None:
    """The :data:`RAISED_LIMITS` entry behind ``exc`` (``"memory"``, ``"file_size"``), else None."""
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file_size"
    return None


CONFIG_KEYS = ("workdir", "cgroups", "rlimits", "landlock", "deny_tcp", "import_timeout_s", "max_restarts",
               "max_header_bytes", "max_blob_bytes")
"""Keys of the sandbox ``config`` the host sends (see
:func:`contextevolve.evaluation.isolation.run_candidate`)."""

_LENGTH = struct.Struct(">Q")


class ProtocolError(Exception):
    """A frame is malformed, oversized or truncated (the peer is dead or hostile)."""


def encode_frame(header: dict, blobs: dict[str, bytes] | None = None) -> bytes:
    """One frame: ``header`` (JSON-able dict, ``"blobs"`` filled in here) followed by ``blobs``."""
    blobs = blobs or {}
    body = json.dumps({**header, "blobs": [[name, len(data)] for name, data in blobs.items()]},
                      allow_nan=False).encode()
    return b"".join([_LENGTH.pack(len(body)), body, *blobs.values()])


def write_frame(fd: int, header: dict, blobs: dict[str, bytes] | None = None) -> None:
    """Write one frame to file descriptor ``fd`` (blocking until all of it is written)."""
    write_all(fd, encode_frame(header, blobs))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (an encoded frame, see :func:`encode_frame`)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise ProtocolError(f"stream ended {left} bytes before the end of a frame")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, *, max_header: int, max_blobs: int, sizes: list[int] | None = None
               ) -> tuple[dict, dict[str, bytes]]:
    """Read one frame from ``fd``; returns ``(header, blobs)``.

    Appends the frame's header and blob byte counts to ``sizes`` when given (for budgets over many frames).

    Raises:
        EOFError: the stream ended cleanly before a frame started.
        ProtocolError: truncated frame, header over ``max_header`` bytes, not a JSON object or
            holding ``NaN`` / ``Infinity`` / a number that overflows, or nested too deep,
            malformed blob list, or blobs totalling more than ``max_blobs`` bytes.
    """
    first = os.read(fd, _LENGTH.size)
    if not first:
        raise EOFError("stream closed")
    raw = first + (_read_exact(fd, _LENGTH.size - len(first)) if len(first) < _LENGTH.size else b"")
    (length,) = _LENGTH.unpack(raw)
    if length > max_header:
        raise ProtocolError(f"message header of {length} bytes exceeds the {max_header}-byte cap")
    try:
        header = json.loads(_read_exact(fd, length), parse_constant=_refuse_constant, parse_float=_finite)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ProtocolError(f"message header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise ProtocolError("message header is not a JSON object")
    specs = header.get("blobs", [])
    if not (isinstance(specs, list) and all(_blob_spec_ok(s) for s in specs)):
        raise ProtocolError("malformed blob list")
    total = sum(size for _, size in specs)
    if total > max_blobs:
        raise ProtocolError(f"message carries {total} bytes of arrays, more than the {max_blobs}-byte cap")
    blobs = {name: _read_exact(fd, size) for name, size in specs}
    if sizes is not None:
        sizes += [length, total]
    return header, blobs


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} overflows to infinity (messages carry finite numbers only)")
    return value


def _refuse_constant(name: str) -> float:
    raise ValueError(f"non-finite number {name} (messages carry finite numbers only)")


def _blob_spec_ok(spec: object) -> bool:
    return (isinstance(spec, list) and len(spec) == 2 and isinstance(spec[0], str) and len(spec[0]) <= 200
            and type(spec[1]) is int and spec[1] >= 0)


def call_blobs(index: int, blobs: dict[str, bytes]) -> dict[str, bytes]:
    """Blob names of call ``index`` as carried in a job or report frame (``"<index>/<name>"``)."""
    return {f"{index}/{name}": data for name, data in blobs.items()}


def blobs_of_call(index: int, names: Iterable[str], blobs: dict[str, bytes]) -> dict[str, bytes]:
    """The blobs of call ``index`` among ``blobs``, with the ``"<index>/"`` prefix removed."""
    prefix = f"{index}/"
    return {name[len(prefix):]: blobs[name] for name in names if name.startswith(prefix) and name in blobs}
