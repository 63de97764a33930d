"""Run an untrusted candidate program in a sandboxed process tree and read back its JSON result.

The host writes the candidate source and a JSON payload into a fresh working directory
and starts ``python -m contextevolve.evaluation.child`` (in new network and PID
namespaces where permitted) with a scrubbed environment. The child confines itself
(rlimits, cgroups, Landlock, no capabilities — :mod:`contextevolve.evaluation.sandbox`
lists the layers), imports the candidate, hands it to a task *harness* (a function next to
the candidate that converts inputs to the promised objects and serialises the outputs)
and writes the harness's JSON to ``result.json``. Only that JSON (and named output files)
crosses back; the trusted grader scores it with its own inputs.

The host enforces the wall clock and the output / disk caps by polling, and afterwards
kills whatever is left of the tree: the PID namespace, the cgroup, the process group and
any process still carrying the evaluation's environment token.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextevolve.evaluation import cgroups
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.sandbox import host_sandbox

#: Environment variables passed through to the candidate; everything else (API keys,
#: tokens, endpoint settings) is dropped.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
#: Variable carrying the evaluation's token: how leftover processes are recognised.
TOKEN_ENV = "CONTEXTEVOLVE_SANDBOX"
#: Characters of captured stdout/stderr kept for diagnostics.
_OUTPUT_TAIL = 2000
#: Seconds between the host's checks of output and disk use.
_POLL_S = 0.05
#: Exit code of the runner when it could not confine itself (see child.py).
_SETUP_FAILED = 70


@dataclass
class CandidateRun:
    """What came back from one candidate process tree.

    ``result`` is the harness's JSON (``None`` when the process produced none);
    ``status`` is ``"ok"`` when a result came back, ``"timeout"`` when killed at the
    wall-clock limit, ``"failed"`` otherwise, with ``reason`` saying why.
    """

    status: str
    result: Any
    reason: str
    seconds: float
    stdout_tail: str
    stderr_tail: str
    files: dict[str, bytes] | None = None
    """Contents of the requested ``collect`` files the child wrote (absent ones omitted)."""
    cpu_s: float = 0.0
    """CPU seconds (user + system) of the candidate process, as measured by the supervisor."""
    notes: list[str] = field(default_factory=list)
    """Sandbox guarantees this host could not enforce (empty when all were)."""
    leftovers_killed: int = 0
    """Processes of the tree still alive after the candidate returned, killed by the host."""


def run_candidate(
    source: str,
    harness: str,
    payload: Any,
    *,
    limits: SandboxLimits,
    inputs: Mapping[str, bytes] | None = None,
    collect: Sequence[str] = (),
) -> CandidateRun:
    """Execute ``source`` under ``harness`` (``"module:function"``) in a sandboxed process tree.

    Args:
        source: candidate program text (untrusted).
        harness: import path of ``fn(candidate_module, payload) -> JSON-able``.
        payload: JSON-able inputs for the harness.
        limits: the sandbox's limits, with ``wall_s`` set (see :meth:`SandboxLimits.resolved`).
        inputs: files (name -> bytes) written into the child's working directory, e.g.
            ``.npy`` arrays too large for JSON. They are private copies: whatever the
            candidate does to them never reaches the grader's own inputs.
        collect: names of files the harness writes (e.g. output arrays) to read back; a
            non-regular file (a symlink planted by the candidate) fails the run.

    Returns:
        A :class:`CandidateRun`; never raises for anything the candidate does.

    Raises:
        ValueError: ``limits.wall_s`` is not set.
    """
    if limits.wall_s is None:
        raise ValueError("run_candidate needs limits.wall_s; use SandboxLimits.resolved(task_timeout_s)")
    limits = limits.resolved(limits.wall_s)
    host = host_sandbox()
    token = secrets.token_hex(8)
    with tempfile.TemporaryDirectory(prefix="ce-eval-") as tmp:
        private, work = Path(tmp), Path(tmp) / "work"
        work.mkdir()
        (work / "candidate.py").write_text(source, encoding="utf-8")
        (work / "payload.json").write_text(json.dumps({"harness": harness, "payload": payload}))
        for name, data in (inputs or {}).items():
            (work / name).write_bytes(data)
        group = _make_cgroup(token, limits)
        try:
            run = _supervise(private, work, token, limits, host.namespace_prefix, group, host.landlock_abi)
            if run.status == "ok":
                try:
                    run.files = _collect(work, collect, limits.files_mb * 2**20)
                except ValueError as exc:
                    run.status, run.result, run.reason = "failed", None, str(exc)
        finally:
            killed = group.destroy() if group else 0
            killed += _sweep(token)
        run.leftovers_killed += killed
        run.notes = host.notes_for(limits.allow_network)
        return run


def _make_cgroup(token: str, limits: SandboxLimits) -> cgroups.EvalCgroup | None:
    try:
        return cgroups.create(f"ce-{token}", max_processes=limits.max_processes,
                              memory_bytes=limits.memory_mb * 2**20)
    except OSError:
        return None


def _rlimits(limits: SandboxLimits) -> dict[str, tuple[int, int]]:
    cpu = max(1, int(limits.cpu_s + 0.999))
    memory = limits.memory_mb * 2**20
    files = limits.files_mb * 2**20
    out = {"RLIMIT_CPU": (cpu, cpu + 2), "RLIMIT_AS": (memory, memory), "RLIMIT_FSIZE": (files, files),
           "RLIMIT_CORE": (0, 0)}
    if os.geteuid() != 0:  # counts every process of the user, so allow for those already running
        nproc = limits.max_processes + _user_processes()
        out["RLIMIT_NPROC"] = (nproc, nproc)
    return out


def _environment(work: Path, token: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update(HOME=str(work), TMPDIR=str(work), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0", **{TOKEN_ENV: token})
    # The child must import contextevolve even from a source checkout.
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


def _supervise(private: Path, work: Path, token: str, limits: SandboxLimits, prefix: tuple[str, ...],
               group: cgroups.EvalCgroup | None, landlock_abi: int) -> CandidateRun:
    config = {"workdir": str(work), "cgroups": [str(d) for d in group.dirs] if group else [],
              "rlimits": _rlimits(limits), "landlock": landlock_abi >= 1,
              "deny_tcp": not limits.allow_network}
    (private / "sandbox.json").write_text(json.dumps(config))
    if limits.allow_network:
        prefix = tuple(a for a in prefix if a != "--net")
    out_path, err_path = private / "stdout.txt", private / "stderr.txt"
    output_cap = limits.output_kb * 1024
    disk_cap = limits.files_mb * 2**20 + _tree_size(work)  # what the candidate writes, beyond its inputs
    start = time.perf_counter()
    killed_for = None
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen([*prefix, sys.executable, "-s", "-m", "contextevolve.evaluation.child", str(private)],
                                cwd=work, env=_environment(work, token), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        exited = threading.Event()  # set by a waiter thread the moment the tree's root exits
        waiter = threading.Thread(target=lambda: (proc.wait(), exited.set()), daemon=True)
        waiter.start()
        try:
            deadline = start + limits.wall_s
            next_disk_check = start
            while not exited.wait(_POLL_S):
                now = time.perf_counter()
                if now >= deadline:
                    killed_for = "timeout"
                    break
                if max(_size(out_path), _size(err_path)) > output_cap:
                    killed_for = f"output limit exceeded: more than {limits.output_kb} KiB on stdout or stderr"
                    break
                if now >= next_disk_check:
                    next_disk_check = now + 0.25
                    if _tree_size(work) > disk_cap:
                        killed_for = f"disk limit exceeded: more than {limits.files_mb} MiB written"
                        break
        finally:
            _kill_group(proc)  # nothing the candidate spawned in its group survives
            waiter.join()
    seconds = time.perf_counter() - start
    stdout_tail, stderr_tail = _tail(out_path), _tail(err_path)
    status = _read_json(private / "status.json") or {}
    cpu_s = float(status.get("cpu_s") or 0.0)

    def failed(reason: str, kind: str = "failed") -> CandidateRun:
        return CandidateRun(kind, None, reason, seconds, stdout_tail, stderr_tail, cpu_s=cpu_s)

    if killed_for == "timeout":
        return failed(f"killed after the {limits.wall_s:g} s wall-clock limit", "timeout")
    if killed_for:
        return failed(killed_for)
    if status.get("exitcode") == _SETUP_FAILED:
        return failed(stderr_tail.strip().splitlines()[-1] if stderr_tail.strip() else "sandbox setup failed")
    result_path = work / "result.json"
    if not result_path.is_file() or result_path.is_symlink():
        return failed(_death_reason(status, proc.returncode, limits, group, stderr_tail))
    try:
        envelope = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return failed(f"unreadable result: {exc}")
    if not isinstance(envelope, dict) or "error" in envelope or "result" not in envelope:
        error = envelope.get("error") if isinstance(envelope, dict) else "malformed result envelope"
        if "MemoryError" in str(error):
            error = f"memory limit of {limits.memory_mb} MiB exceeded ({error})"
        elif "[Errno 27]" in str(error):  # EFBIG: Python ignores SIGXFSZ, so the write fails instead
            error = f"file-size limit of {limits.files_mb} MiB exceeded ({error})"
        return failed(str(error))
    return CandidateRun("ok", envelope["result"], "", seconds, stdout_tail, stderr_tail, cpu_s=cpu_s)


def _death_reason(status: dict, returncode: int | None, limits: SandboxLimits,
                  group: cgroups.EvalCgroup | None, stderr_tail: str) -> str:
    """Why a candidate ended without a result, from the supervisor's report (or the exit code)."""
    sig = status.get("signal")
    code = status.get("exitcode")
    if not status:  # the supervisor itself died (killed from outside the sandbox)
        code, sig = (returncode, None) if returncode is None or returncode >= 0 else (None, -returncode)
    cpu_s = float(status.get("cpu_s") or 0.0)
    if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_s >= limits.cpu_s - 0.5):
        reason = f"CPU-time limit of {limits.cpu_s:g} s exceeded"
    elif sig == signal.SIGXFSZ:
        reason = f"file-size limit of {limits.files_mb} MiB exceeded"
    elif sig == signal.SIGKILL and group is not None and group.hit_memory_limit():
        reason = f"memory limit of {limits.memory_mb} MiB exceeded (killed by the kernel)"
    elif sig is not None:
        reason = f"candidate process killed by signal {signal.Signals(sig).name}"
    else:
        reason = f"candidate process exited with code {code} without a result"
    last = stderr_tail.strip().splitlines()[-1:] or [""]
    return reason + (f": {last[0]}" if last[0] else "")


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _proc_environ_has(pid: str, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read().split(b"\0")
    except OSError:
        return False


def _sweep(token: str) -> int:
    """SIGKILL every process whose environment carries ``token`` (leftovers of one evaluation)."""
    needle = f"{TOKEN_ENV}={token}".encode()
    killed = 0
    for _ in range(50):
        found = [pid for pid in os.listdir("/proc") if pid.isdigit() and _proc_environ_has(pid, needle)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(int(pid), signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)
    return killed


def _user_processes() -> int:
    uid = os.getuid()
    count = 0
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and os.stat(f"/proc/{pid}").st_uid == uid:
                count += len(os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return count


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _tree_size(root: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _collect(work: Path, names: Sequence[str], max_bytes: int) -> dict[str, bytes]:
    """Read the harness's output files back; refuse links, non-files and oversized files."""
    files = {}
    for name in names:
        path = work / name
        if not path.exists() and not path.is_symlink():
            continue
        if path.is_symlink() or not path.is_file():
            raise ValueError(f"output {name} is not a regular file")
        if path.stat().st_size > max_bytes:
            raise ValueError(f"output {name} is larger than {max_bytes} bytes")
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
