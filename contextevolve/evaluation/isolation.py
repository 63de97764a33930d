"""Run a candidate program in a separate process with a wall-clock limit that really kills it.

The host writes the candidate source and a JSON payload into a fresh temporary
directory and starts ``python -m contextevolve.evaluation.child`` there, in a new
session (process group), with a scrubbed environment and an address-space cap. The
child imports the candidate, hands it to a task *harness* (a function running next
to the candidate that converts inputs to the objects the contract promises and
serialises the outputs) and writes the harness's JSON result to ``result.json``.
Only that JSON crosses back; the trusted grader scores it with its own inputs.

On timeout the whole process group gets SIGKILL, so a candidate that forks or
ignores signals is still stopped. This is the core issue's isolation; the
hardened sandbox (CPU limit, output caps, network namespace) is a separate issue.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

#: Environment variables passed through to the candidate; everything else (API keys,
#: tokens, endpoint settings) is dropped.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
#: Characters of captured stdout/stderr kept for diagnostics.
_OUTPUT_TAIL = 2000
#: Largest file the host reads back from a candidate's working directory, bytes.
MAX_COLLECTED_BYTES = 512 * 2**20


@dataclass
class CandidateRun:
    """What came back from one candidate process.

    ``result`` is the harness's JSON (``None`` when the process produced none);
    ``status`` is ``"ok"`` when a result came back, ``"timeout"`` when killed at the
    limit, ``"failed"`` otherwise, with ``reason`` saying why.
    """

    status: str
    result: Any
    reason: str
    seconds: float
    stdout_tail: str
    stderr_tail: str
    files: dict[str, bytes] | None = None
    """Contents of the requested ``collect`` files the child wrote (absent ones omitted)."""


def _limit_memory(max_memory_bytes: int | None):
    def apply() -> None:
        if max_memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))

    return apply


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_candidate(
    source: str,
    harness: str,
    payload: Any,
    *,
    timeout_s: float,
    max_memory_bytes: int | None = 4 * 2**30,
    inputs: Mapping[str, bytes] | None = None,
    collect: Sequence[str] = (),
) -> CandidateRun:
    """Execute ``source`` under ``harness`` (``"module:function"``) in a killable child process.

    Args:
        source: candidate program text (untrusted).
        harness: import path of ``fn(candidate_module, payload) -> JSON-able``.
        payload: JSON-able inputs for the harness.
        timeout_s: wall-clock limit in seconds for the whole child process.
        max_memory_bytes: address-space cap (RLIMIT_AS) of the child, or ``None``.
        inputs: files (name -> bytes) written into the child's working directory, e.g.
            ``.npy`` arrays too large for JSON. They are private copies: whatever the
            candidate does to them never reaches the grader's own inputs.
        collect: names of files the harness writes (e.g. output arrays) to read back;
            each is capped at :data:`MAX_COLLECTED_BYTES`, and a larger or non-regular
            file (a symlink planted by the candidate) fails the run.

    Returns:
        A :class:`CandidateRun`; never raises for anything the candidate does.
    """
    with tempfile.TemporaryDirectory(prefix="ce-eval-") as tmp:
        work = Path(tmp)
        (work / "candidate.py").write_text(source, encoding="utf-8")
        (work / "payload.json").write_text(json.dumps({"harness": harness, "payload": payload}))
        for name, data in (inputs or {}).items():
            (work / name).write_bytes(data)
        env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
        env.update(HOME=tmp, PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
        # The child must import contextevolve even from a source checkout.
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        out_path, err_path = work / "stdout.txt", work / "stderr.txt"
        start = time.perf_counter()
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-s", "-m", "contextevolve.evaluation.child", tmp],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                preexec_fn=_limit_memory(max_memory_bytes),
            )
            try:
                returncode = proc.wait(timeout=timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                returncode = None
            finally:
                # Kill the whole group either way: nothing the candidate spawned survives it.
                _kill_group(proc)
                proc.wait()
        seconds = time.perf_counter() - start
        stdout_tail = _tail(out_path)
        stderr_tail = _tail(err_path)
        if timed_out:
            return CandidateRun("timeout", None, f"killed after the {timeout_s:g} s wall-clock limit",
                                seconds, stdout_tail, stderr_tail)
        result_path = work / "result.json"
        if not result_path.exists():
            last = stderr_tail.strip().splitlines()[-1:] or [""]
            reason = f"candidate process exited with code {returncode} without a result"
            if returncode is not None and returncode < 0:
                reason += f" (signal {signal.Signals(-returncode).name})"
            if last[0]:
                reason += f": {last[0]}"
            return CandidateRun("failed", None, reason, seconds, stdout_tail, stderr_tail)
        try:
            envelope = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return CandidateRun("failed", None, f"unreadable result: {exc}", seconds, stdout_tail, stderr_tail)
        if not isinstance(envelope, dict) or "error" in envelope or "result" not in envelope:
            error = envelope.get("error") if isinstance(envelope, dict) else "malformed result envelope"
            return CandidateRun("failed", None, str(error), seconds, stdout_tail, stderr_tail)
        try:
            files = _collect(work, collect)
        except ValueError as exc:
            return CandidateRun("failed", None, str(exc), seconds, stdout_tail, stderr_tail)
        return CandidateRun("ok", envelope["result"], "", seconds, stdout_tail, stderr_tail, files)


def _collect(work: Path, names: Sequence[str]) -> dict[str, bytes]:
    """Read the harness's output files back; refuse links, non-files and oversized files."""
    files = {}
    for name in names:
        path = work / name
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"output {name} is not a regular file")
        if path.stat().st_size > MAX_COLLECTED_BYTES:
            raise ValueError(f"output {name} is larger than {MAX_COLLECTED_BYTES} bytes")
        files[name] = path.read_bytes()
    return files


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _OUTPUT_TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
