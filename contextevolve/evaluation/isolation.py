"""Run an untrusted candidate program in a sandboxed process tree, one timed call at a time (host side).

:func:`run_candidate` writes the source into a fresh working directory, stages only the task's harness
and the sandbox's modules into a private ``lib``, and starts the trusted supervisor with a scrubbed
environment in the namespaces this host allows (:meth:`HostSandbox.command`). It enforces the wall clock
and the output / disk caps by polling, then kills what is left (PID namespace, cgroup, process group,
token sweep). Messages: :mod:`contextevolve.evaluation.protocol`; layers:
:mod:`contextevolve.evaluation.sandbox`; why: docs/sandbox.md, *Trusted measurement*.
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
from pathlib import Path

from contextevolve.evaluation import cgroups, cleanup, disk, protocol, report
from contextevolve.evaluation.jobs import EvalJob
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.results import CandidateRun
from contextevolve.evaluation.sandbox import HostSandbox, host_sandbox

#: Environment variables passed through to the candidate; everything else (API keys,
#: tokens, endpoint settings) is dropped.
_KEPT_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
#: Seconds between the host's checks of output and disk use.
_POLL_S = 0.05
#: Seconds the runner may take to start and import the harness and the candidate (or the wall clock).
IMPORT_TIMEOUT_S = 30.0
#: Runners started anew after a call crashed or timed out (then later calls are skipped); the
#: wall clock bounds the total anyway, this only spares a hopeless evaluation its restarts.
MAX_RESTARTS = 50
def run_candidate(source: str, job: EvalJob, *, limits: SandboxLimits) -> CandidateRun:
    """Execute ``source`` for ``job`` in a sandboxed process tree, one timed call at a time.

    Args:
        source: candidate program text (untrusted).
        job: harness module, entry function, calls and their inputs (trusted copies; each
            call's inputs reach the candidate only with that call's request).
        limits: the sandbox's limits, with ``timeout_s`` set (see :meth:`SandboxLimits.resolved`).

    Returns:
        A :class:`CandidateRun`; never raises for anything the candidate does.

    Raises:
        ValueError: ``limits.timeout_s`` is not set.
    """
    if limits.timeout_s is None:
        raise ValueError("run_candidate needs limits.timeout_s; use SandboxLimits.resolved(task_timeout_s)")
    limits = limits.resolved(limits.timeout_s)
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
        except (OSError, RecursionError, ValueError) as exc:  # the host side failed: not the caller's problem
            run = CandidateRun("failed", f"evaluation error: {type(exc).__name__}: {str(exc)[:200]}", 0.0, "",
                               "", failure_kind="evaluator")
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
    """Write ``files`` (relative path -> bytes) under ``lib``.

    Raises:
        ValueError: a path leaves ``lib``.
    """
    for name, data in files.items():
        target = (lib / name).resolve()
        if not target.is_relative_to(lib.resolve()) or Path(name).is_absolute():
            raise ValueError(f"staged file {name!r} is outside the sandbox's lib")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _command(host: HostSandbox, limits: SandboxLimits, report_fd: int, *, work: Path, lib: Path,
             cgroup_dirs: Sequence[str]) -> list[str]:
    """The supervisor's command line, inside the namespaces this host allows.

    With bubblewrap, in a mount namespace showing only the interpreter, system libraries, ``lib`` (read-only),
    ``work`` and the evaluation's ``cgroup_dirs`` (read-write) — see :meth:`HostSandbox.command`.
    """
    return host.command([sys.executable, "-s", "-m", protocol.SUPERVISOR_MODULE, str(report_fd)], work=work,
                        lib=lib, writable=cgroup_dirs, allow_network=limits.allow_network)


def _config(work: Path, limits: SandboxLimits, group: cgroups.EvalCgroup | None, landlock_abi: int) -> dict:
    return {"workdir": str(work), "cgroups": [str(d) for d in group.dirs] if group else [],
            "rlimits": _rlimits(limits), "landlock": landlock_abi >= 1, "deny_tcp": not limits.allow_network,
            "import_timeout_s": min(IMPORT_TIMEOUT_S, limits.timeout_s), "max_restarts": MAX_RESTARTS,
            "max_header_bytes": report.MAX_HEADER_BYTES, "max_blob_bytes": limits.files_mb * 2**20}


def _job_frame(job: EvalJob, config: dict) -> bytes:
    blobs: dict[str, bytes] = {}
    calls = []
    for index, call in enumerate(job.calls):
        blobs.update(protocol.call_blobs(index, call.blobs))
        calls.append({"fn": call.fn, "args": call.args, "timeout_s": call.timeout_s,
                      "blobs": list(protocol.call_blobs(index, call.blobs))})
    return protocol.encode_frame({"type": "job", "config": config, "harness": job.harness, "entry": job.entry,
                                  "calls": calls}, blobs)


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
    disk_cap = limits.files_mb * 2**20 + disk.tree_size(work)  # what the candidate writes, beyond its inputs
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
        reader = report.ReportReader(report_r, limits.files_mb * 2**20)
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
    stdout_tail, stderr_tail = disk.tail(out_path), disk.tail(err_path)

    def failed(reason: str, kind: str = "failed") -> CandidateRun:
        return CandidateRun(kind, reason, seconds, stdout_tail, stderr_tail)

    if killed_for == "timeout":
        return failed(f"killed after the {limits.timeout_s:g} s wall-clock limit", "timeout")
    if killed_for:
        return failed(killed_for)
    if reader.error:
        return failed(f"malformed report from the sandbox: {reader.error}")
    return report.read_report(reader.frames, len(job.calls), limits, group, stdout_tail, stderr_tail, seconds,
                        proc.returncode)


def _watch(exited: threading.Event, start: float, limits: SandboxLimits, outputs: tuple[Path, Path],
           work: Path, disk_cap: int) -> str | None:
    """Wait for the candidate's tree to exit while enforcing the limits only the host can watch.

    Those are the wall clock, stdout/stderr size, bytes and entries written under ``work``. Returns why
    the tree must be killed (``"timeout"`` or a reason), or None once it exited by itself.
    """
    deadline, next_disk_check = start + limits.timeout_s, start
    while not exited.wait(_POLL_S):
        now = time.perf_counter()
        if now >= deadline:
            return "timeout"
        if max(disk.size(path) for path in outputs) > limits.output_kb * 1024:
            return f"output limit exceeded: more than {limits.output_kb} KiB on stdout or stderr"
        if now >= next_disk_check:
            next_disk_check = now + 0.25
            try:
                if disk.tree_size(work) > disk_cap:
                    return f"disk limit exceeded: more than {limits.files_mb} MiB written"
            except disk.TooManyEntries:
                return f"disk limit exceeded: more than {disk.MAX_ENTRIES} files and directories"
    return None


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


