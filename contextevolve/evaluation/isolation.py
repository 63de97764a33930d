"""Run an untrusted candidate program in a sandboxed process tree, one timed call at a time.

The host writes the candidate source into a fresh working directory, stages the few
modules the sandbox needs (the task's harness, the supervisor and runner) into a private
``lib`` — nothing else of this package is importable there — and starts the trusted
*supervisor* (in new PID, network, IPC and — with bubblewrap — mount namespaces where
permitted; :meth:`HostSandbox.command`) with a scrubbed environment. The job (calls and
their inputs) goes to the supervisor's stdin; the supervisor starts an untrusted *runner* that confines itself (rlimits, cgroups, Landlock,
no capabilities — :mod:`contextevolve.evaluation.sandbox` lists the layers) and imports the
candidate, then sends it one call at a time and times each until its serialised result has
arrived. The report comes back on a pipe (:mod:`contextevolve.evaluation.protocol` has the
message shapes); the trusted grader scores the outputs with its own inputs.

The host enforces the wall clock and the output / disk caps by polling, and afterwards
kills whatever is left of the tree: the PID namespace, the cgroup, the process group and
any process still carrying the evaluation's environment token.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextevolve.evaluation import cgroups, cleanup, protocol
from contextevolve.evaluation.jobs import EvalJob
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.sandbox import HostSandbox, host_sandbox

#: Environment variables passed through to the candidate; everything else (API keys,
#: tokens, endpoint settings) is dropped.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
#: Characters of captured stdout/stderr kept for diagnostics.
_OUTPUT_TAIL = 2000
#: Seconds between the host's checks of output and disk use.
_POLL_S = 0.05
#: Seconds the runner may take to start and import the harness and the candidate (or the wall clock).
IMPORT_TIMEOUT_S = 30.0
#: Runners started anew after a call crashed or timed out (then later calls are skipped); the
#: wall clock bounds the total anyway, this only spares a hopeless evaluation its restarts.
MAX_RESTARTS = 50
#: Cap on one JSON reply of the candidate's process, bytes (larger outputs travel as arrays).
MAX_HEADER_BYTES = 16 * 2**20
#: Cap on all JSON the sandbox reports for one evaluation, bytes (bounds the host's memory).
MAX_REPORT_HEADER_BYTES = 64 * 2**20
#: Files and directories the candidate may create in its working directory.
MAX_ENTRIES = 10_000


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
    own status in ``calls``), ``"timeout"`` when the tree was killed at the wall-clock limit or the import outlived its limit,
    ``"failed"`` otherwise (the program could not be imported, the sandbox failed, a limit
    of the whole tree was hit), with ``reason`` saying why.
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


def run_candidate(source: str, job: EvalJob, *, limits: SandboxLimits) -> CandidateRun:
    """Execute ``source`` for ``job`` in a sandboxed process tree, one timed call at a time.

    Args:
        source: candidate program text (untrusted).
        job: harness module, entry function, calls and their inputs (trusted copies; each
            call's inputs reach the candidate only with that call's request).
        limits: the sandbox's limits, with ``wall_s`` set (see :meth:`SandboxLimits.resolved`).

    Returns:
        A :class:`CandidateRun`; never raises for anything the candidate does.

    Raises:
        ValueError: ``limits.wall_s`` is not set.
    """
    if limits.wall_s is None:
        raise ValueError("run_candidate needs limits.wall_s; use SandboxLimits.resolved(task_timeout_s)")
    limits = limits.resolved(limits.wall_s)
    host = host_sandbox()
    cleanup.remove_orphans()
    token = cleanup.new_token()
    tmp = tempfile.mkdtemp(prefix=f"{cleanup.DIR_PREFIX}{token}-")
    try:
        private, work = Path(tmp), Path(tmp) / "work"
        work.mkdir()
        (work / "candidate.py").write_text(source, encoding="utf-8")
        lib = _stage_modules(private / "lib", [job.harness, *job.modules])
        _stage_files(lib, job.files)
        group = _make_cgroup(token, limits)
        try:
            run = _supervise(private, work, lib, token, limits, host, group, job)
        except (OSError, RecursionError, ValueError) as exc:  # the host side failed: never the caller's problem
            run = CandidateRun("failed", f"evaluation error: {type(exc).__name__}: {str(exc)[:200]}", 0.0, "", "")
        finally:
            killed = group.destroy() if group else 0
            killed += cleanup.kill_tagged(token)
        run.leftovers_killed += killed
        run.notes = host.notes_for(limits.allow_network)
        return run
    finally:
        cleanup.remove_tree(tmp)


def _make_cgroup(token: str, limits: SandboxLimits) -> cgroups.EvalCgroup | None:
    try:
        return cgroups.create(f"{cleanup.CGROUP_PREFIX}{token}", max_processes=limits.max_processes,
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


def _environment(work: Path, lib: Path, token: str) -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update(HOME=str(work), TMPDIR=str(work), PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0", PYTHONPATH=str(lib), **{cleanup.TOKEN_ENV: token})
    return env


#: Modules of this package the supervisor and runner need besides the task's harness.
_SANDBOX_MODULES = ("contextevolve.evaluation.protocol", "contextevolve.evaluation.supervisor",
                    "contextevolve.evaluation.runner", "contextevolve.evaluation.landlock",
                    "contextevolve.evaluation.privileges")


def _stage_modules(lib: Path, modules: Sequence[str]) -> Path:
    """Copy the named modules (and their packages' ``__init__``) into ``lib``; returns ``lib``.

    The sandbox imports ``contextevolve`` from this copy only, so a candidate sees the harness
    code it runs under and nothing else of the package (no data generators, no graders).
    """
    root = Path(__file__).resolve().parents[2]
    for name in (*_SANDBOX_MODULES, *modules):
        parts = name.split(".")
        for depth in range(1, len(parts)):
            package = Path(*parts[:depth]) / "__init__.py"
            if not (lib / package).exists():
                (lib / package).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / package, lib / package)
        target = Path(*parts).with_suffix(".py")
        (lib / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / target, lib / target)
    return lib


def _stage_files(lib: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` (relative path -> bytes) under ``lib``; a path that leaves ``lib`` is refused (ValueError)."""
    for name, data in files.items():
        target = (lib / name).resolve()
        if not target.is_relative_to(lib.resolve()) or Path(name).is_absolute():
            raise ValueError(f"staged file {name!r} is outside the sandbox's lib")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _command(host: HostSandbox, limits: SandboxLimits, report_fd: int, *, work: Path, lib: Path,
             cgroup_dirs: Sequence[str]) -> list[str]:
    """The supervisor's command line, inside the namespaces this host allows; with bubblewrap in a
    mount namespace showing only the interpreter, system libraries, ``lib`` (read-only), ``work`` and
    the evaluation's ``cgroup_dirs`` (read-write) — see :meth:`HostSandbox.command`."""
    return host.command([sys.executable, "-s", "-m", protocol.SUPERVISOR_MODULE, str(report_fd)], work=work,
                        lib=lib, writable=cgroup_dirs, allow_network=limits.allow_network)


def _config(work: Path, limits: SandboxLimits, group: cgroups.EvalCgroup | None, landlock_abi: int) -> dict:
    return {"workdir": str(work), "cgroups": [str(d) for d in group.dirs] if group else [],
            "rlimits": _rlimits(limits), "landlock": landlock_abi >= 1, "deny_tcp": not limits.allow_network,
            "import_timeout_s": min(IMPORT_TIMEOUT_S, limits.wall_s), "max_restarts": MAX_RESTARTS,
            "max_header_bytes": MAX_HEADER_BYTES, "max_blob_bytes": limits.files_mb * 2**20}


def _job_frame(job: EvalJob, config: dict) -> bytes:
    blobs: dict[str, bytes] = {}
    calls = []
    for index, call in enumerate(job.calls):
        blobs.update(protocol.call_blobs(index, call.blobs))
        calls.append({"fn": call.fn, "args": call.args, "timeout_s": call.timeout_s,
                      "blobs": list(protocol.call_blobs(index, call.blobs))})
    return protocol.encode_frame({"type": "job", "config": config, "harness": job.harness, "entry": job.entry,
                                  "calls": calls}, blobs)


class _ReportReader(threading.Thread):
    """Reads the supervisor's report frames as they arrive (bounded), so the pipe never fills."""

    def __init__(self, fd: int, max_blobs: int):
        super().__init__(daemon=True)
        self.fd, self.max_blobs = fd, max_blobs
        self.frames: list[tuple[dict, dict[str, bytes]]] = []
        self.error = ""

    def run(self) -> None:
        budget, text_budget = self.max_blobs, MAX_REPORT_HEADER_BYTES
        try:
            while True:
                sizes: list[int] = []
                header, blobs = protocol.read_frame(self.fd, max_header=min(text_budget, MAX_HEADER_BYTES + 4096),
                                                    max_blobs=budget, sizes=sizes)
                text_budget, budget = text_budget - sizes[0], budget - sizes[1]
                self.frames.append((header, blobs))
        except EOFError:
            pass
        except (protocol.ProtocolError, OSError) as exc:
            self.error = str(exc)
        finally:
            os.close(self.fd)


def _feed(fd: int, data: bytes) -> None:
    try:
        protocol.write_all(fd, data)
    except OSError:  # the supervisor died before reading the whole job
        pass
    finally:
        os.close(fd)


def _supervise(private: Path, work: Path, lib: Path, token: str, limits: SandboxLimits, host: HostSandbox,
               group: cgroups.EvalCgroup | None, job: EvalJob) -> CandidateRun:
    config = _config(work, limits, group, host.landlock_abi)
    job_bytes = _job_frame(job, config)
    out_path, err_path = private / "stdout.txt", private / "stderr.txt"
    disk_cap = limits.files_mb * 2**20 + _tree_size(work)  # what the candidate writes, beyond its inputs
    report_r, report_w = os.pipe()
    job_r, job_w = os.pipe()
    start = time.perf_counter()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            command = _command(host, limits, report_w, work=work, lib=lib, cgroup_dirs=config["cgroups"])
            proc = subprocess.Popen(command, cwd=work, env=_environment(work, lib, token),
                                    stdin=job_r, stdout=out, stderr=err, pass_fds=(report_w,),
                                    start_new_session=True)
        except BaseException:
            os.close(report_r)
            os.close(job_w)
            raise
        finally:
            os.close(report_w)
            os.close(job_r)
        reader = _ReportReader(report_r, limits.files_mb * 2**20)
        reader.start()
        feeder = threading.Thread(target=_feed, args=(job_w, job_bytes), daemon=True)
        feeder.start()
        exited = threading.Event()  # set by a waiter thread the moment the tree's root exits
        waiter = threading.Thread(target=lambda: (proc.wait(), exited.set()), daemon=True)
        waiter.start()
        try:
            killed_for = _watch(exited, start, limits, (out_path, err_path), work, disk_cap)
        finally:
            _kill_group(proc)  # nothing the candidate spawned in its group survives
            waiter.join()
            reader.join(timeout=5)
            feeder.join(timeout=5)
    seconds = time.perf_counter() - start
    stdout_tail, stderr_tail = _tail(out_path), _tail(err_path)

    def failed(reason: str, kind: str = "failed") -> CandidateRun:
        return CandidateRun(kind, reason, seconds, stdout_tail, stderr_tail)

    if killed_for == "timeout":
        return failed(f"killed after the {limits.wall_s:g} s wall-clock limit", "timeout")
    if killed_for:
        return failed(killed_for)
    if reader.error:
        return failed(f"malformed report from the sandbox: {reader.error}")
    return _read_report(reader.frames, len(job.calls), limits, group, stdout_tail, stderr_tail, seconds,
                        proc.returncode)


def _watch(exited: threading.Event, start: float, limits: SandboxLimits, outputs: tuple[Path, Path], work: Path,
           disk_cap: int) -> str | None:
    """Wait for the candidate's tree to exit while enforcing the limits only the host can watch:
    wall clock, stdout/stderr size, bytes and entries written under ``work``. Returns why the tree
    must be killed (``"timeout"`` or a reason), or None once it exited by itself."""
    deadline, next_disk_check = start + limits.wall_s, start
    while not exited.wait(_POLL_S):
        now = time.perf_counter()
        if now >= deadline:
            return "timeout"
        if max(_size(path) for path in outputs) > limits.output_kb * 1024:
            return f"output limit exceeded: more than {limits.output_kb} KiB on stdout or stderr"
        if now >= next_disk_check:
            next_disk_check = now + 0.25
            try:
                if _tree_size(work) > disk_cap:
                    return f"disk limit exceeded: more than {limits.files_mb} MiB written"
            except _TooManyEntries:
                return f"disk limit exceeded: more than {MAX_ENTRIES} files and directories"
    return None


def _read_report(frames: list, n_calls: int, limits: SandboxLimits, group: cgroups.EvalCgroup | None,
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
            run.reason = _resource_reason(str(imported["error"]), imported.get("limit"), limits)
        elif kind == "died" and death.get("exitcode") == protocol.EXIT_SETUP_FAILED:
            run.reason = (stderr_tail.strip().splitlines()[-1:] or ["sandbox setup failed"])[0]
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
        error = _resource_reason(error, header.get("limit"), limits)
    return CallResult(status=status, seconds=float(header.get("seconds") or 0.0), value=header.get("value"),
                      blobs=protocol.blobs_of_call(index, blobs.keys(), blobs), error=error,
                      traceback=str(header.get("traceback") or ""))


def _resource_reason(error: str, limit: str | None, limits: SandboxLimits) -> str:
    """Name the limit behind an exception the candidate's process raised, from the report's structured
    ``limit`` field (:data:`protocol.RAISED_LIMITS`), not from the error text."""
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


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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
    """Bytes of regular files under ``root`` (iterative: any depth).

    Raises:
        _TooManyEntries: more than :data:`MAX_ENTRIES` files and directories.
    """
    total, entries, stack = 0, 0, [str(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as listing:
                for entry in listing:
                    entries += 1
                    if entries > MAX_ENTRIES:
                        raise _TooManyEntries()
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        pass
        except OSError:
            pass
    return total


class _TooManyEntries(Exception):
    """The candidate created more files and directories than :data:`MAX_ENTRIES`."""


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - _OUTPUT_TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
