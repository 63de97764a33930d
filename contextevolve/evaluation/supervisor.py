"""The trusted side inside the sandbox: run the candidate's calls one at a time and time them.

Usage (by :func:`contextevolve.evaluation.isolation.run_candidate` only)::

    [namespace prefix] python -s -m contextevolve.evaluation.supervisor REPORT_FD < JOB

The first process of the evaluation's PID namespace where there is one, so its exit kills all left there.
It joins the evaluation's cgroups, makes itself non-dumpable, never imports candidate code, and times each
call until the last byte of its response; a call that overruns or kills the runner is recorded and the next
gets a new runner (at most ``max_restarts``; a restart's import is capped but not reported). It imports
nothing heavy (why: docs/decisions/trusted-supervisor.md).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from contextevolve.evaluation import protocol

_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4
_TRUSTED_CAP = 1 << 34


class _CallTimeout(Exception):
    """The call's (or the import's) time limit passed."""


def _on_alarm(signum, frame):  # noqa: ARG001
    raise _CallTimeout()


class Runner:
    """One runner process: start, import, call, kill (all waits bounded by the alarm timer)."""

    def __init__(self, config: dict, harness: str, entry: str):
        self.config = config
        read_end, write_end = os.pipe()
        self.proc = subprocess.Popen([sys.executable, "-s", "-m", protocol.RUNNER_MODULE, str(write_end)],
                                     stdin=subprocess.PIPE, pass_fds=(write_end,), start_new_session=True)
        os.close(write_end)
        self.responses = read_end
        self.status: dict | None = None
        self.requests = self.proc.stdin.fileno()
        protocol.write_frame(self.requests, {"type": "init", "config": config, "harness": harness,
                                             "entry": entry})

    def receive(self) -> tuple[dict, dict[str, bytes]]:
        """Next response (raises EOFError / ProtocolError when the runner died or misbehaved)."""
        return protocol.read_frame(self.responses, max_header=self.config["max_header_bytes"],
                                   max_blobs=self.config["max_blob_bytes"])

    def kill(self) -> dict:
        """Kill the runner's process group; its exit status and CPU time (once, cached)."""
        if self.status is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            self._reap(0)
        return self.status

    def died(self) -> dict:
        """Exit status of a runner whose stream ended: wait up to 1 s for it to exit on its own, then kill."""
        deadline = time.monotonic() + 1.0
        while self.status is None and time.monotonic() < deadline:
            if not self._reap(os.WNOHANG):
                time.sleep(0.01)
        return self.kill()

    def _reap(self, flags: int) -> bool:
        pid, status, usage = os.wait4(self.proc.pid, flags)
        if pid == 0:
            return False
        self.proc.returncode = -1  # reaped here: subprocess must not wait for it again
        self.status = {"exitcode": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
                       "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                       "cpu_s": usage.ru_utime + usage.ru_stime, "max_rss_kb": usage.ru_maxrss}
        os.close(self.responses)
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        return True


def _timed(seconds: float):
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.001))


def _untimed():
    signal.setitimer(signal.ITIMER_REAL, 0)


def _start(config: dict, job: dict, report: int, first: bool) -> Runner | None:
    """A runner that has imported the candidate, or None (reported to the host when ``first``)."""
    limit = config["import_timeout_s"]
    started = time.perf_counter()
    runner = None
    message: dict = {"type": "import", "error": None, "traceback": "", "death": None, "limit": None}
    try:
        _timed(limit)
        runner = Runner(config, job["harness"], job["entry"])
        header, _ = runner.receive()
        _untimed()
        if header.get("type") != "ready":
            default = f"the program's process sent a malformed message ({str(header.get('type'))[:40]!r}) " \
                      "instead of starting"
            message.update(kind="raised", error=str(header.get("error") or default)[:500],
                           traceback=str(header.get("traceback", ""))[-1500:], death=runner.died(),
                           limit=_limit(header))
            runner = None
    except _CallTimeout:
        message.update(kind="timeout", error=f"importing the program took more than {limit:g} s",
                       death=runner and runner.kill())
        runner = None
    except (EOFError, protocol.ProtocolError, OSError) as exc:
        _untimed()
        message.update(kind="died", error=f"the program died while being imported ({exc})",
                       death=runner and runner.died())
        runner = None
    message["seconds"] = time.perf_counter() - started
    if first:
        protocol.write_frame(report, message)
    return runner


def _limit(header: dict) -> str | None:
    """The runner's ``limit`` field if it names one of :data:`protocol.RAISED_LIMITS`, else None."""
    limit = header.get("limit")
    return limit if limit in protocol.RAISED_LIMITS else None


def _call(runner: Runner, index: int, call: dict,
          blobs: dict[str, bytes]) -> tuple[dict, dict[str, bytes], bool]:
    """Run one call; returns the report message, its output blobs and whether the runner survived."""
    message = {"type": "call", "index": index, "value": None, "error": "", "traceback": "", "death": None,
               "limit": None}
    if select.select([runner.responses], [], [], 0)[0]:  # a reply before the request: forged or stale
        message.update(status="error", seconds=0.0, death=runner.kill(),
                       error="the program's process replied before it was asked (a forged or stale reply)")
        return message, {}, False
    started = time.perf_counter()
    try:
        _timed(call["timeout_s"])
        protocol.write_frame(runner.requests, {"type": "call", "fn": call["fn"], "args": call["args"]}, blobs)
        header, out = runner.receive()
        _untimed()
    except _CallTimeout:
        message.update(status="timeout", seconds=time.perf_counter() - started,
                       error=f"the call exceeded its {call['timeout_s']:g} s limit", death=runner.kill())
        return message, {}, False
    except protocol.ProtocolError as exc:
        _untimed()
        message.update(status="error", seconds=time.perf_counter() - started, death=runner.kill(),
                       error=f"the program's process sent a malformed reply: {exc}")
        return message, {}, False
    except (EOFError, OSError) as exc:
        _untimed()
        message.update(status="crashed", seconds=time.perf_counter() - started, death=runner.died(),
                       error=f"the program's process died during the call ({exc})")
        return message, {}, False
    message["seconds"] = time.perf_counter() - started
    if header.get("type") == "result":
        message.update(status="ok", value=header.get("value"))
        return message, out, True
    default = f"the program's process sent a malformed message ({str(header.get('type'))[:40]!r})"
    message.update(status="error", error=str(header.get("error") or default)[:500],
                   traceback=str(header.get("traceback", ""))[-1500:], limit=_limit(header))
    return message, {}, True


def run_job(job: dict, blobs: dict[str, bytes], report: int) -> None:
    """Run every call of ``job`` and stream the report to file descriptor ``report``."""
    config = job["config"]
    signal.signal(signal.SIGALRM, _on_alarm)
    runner = _start(config, job, report, first=True)
    broken = runner is None  # the program cannot be imported: no call is run
    restarts, starts, cpu, rss, last = 0, 1, 0.0, 0, None
    for index, call in enumerate(job["calls"]):
        if runner is None and not broken and restarts < config["max_restarts"]:
            restarts, starts = restarts + 1, starts + 1
            runner = _start(config, job, report, first=False)
        if runner is None or broken:
            why = "the program could not be imported" if broken else \
                f"not run: the program's process was lost {restarts + 1} times"
            protocol.write_frame(report, {"type": "call", "index": index, "status": "skipped", "seconds": 0.0,
                                          "value": None, "error": why, "traceback": "", "death": None})
            continue
        message, out, alive = _call(runner, index, call, protocol.blobs_of_call(index, call["blobs"], blobs))
        try:
            frame = protocol.encode_frame(message, protocol.call_blobs(index, out))
        except (ValueError, TypeError, RecursionError) as exc:  # e.g. a value nested too deep to re-encode
            frame = protocol.encode_frame({**message, "status": "error", "value": None,
                                           "error": "the program's reply cannot be carried: "
                                                    f"{type(exc).__name__}"})
        protocol.write_all(report, frame)
        if not alive:
            last = runner.kill()
            cpu, rss = cpu + last["cpu_s"], max(rss, last["max_rss_kb"])
            runner = None
    if runner is not None:
        last = runner.kill()
        cpu, rss = cpu + last["cpu_s"], max(rss, last["max_rss_kb"])
    protocol.write_frame(report, {"type": "end", "runner": {"cpu_s": cpu, "max_rss_kb": rss, "starts": starts,
                                                            **({k: last[k] for k in ("exitcode", "signal")}
                                                               if last else {})}})


def main(report_fd: int) -> int:
    """Supervise one evaluation; the job arrives on stdin, the report leaves on ``report_fd``."""
    job, blobs = protocol.read_frame(0, max_header=_TRUSTED_CAP, max_blobs=_TRUSTED_CAP)
    import ctypes

    # not dumpable: a runner of the same uid can neither read this process's memory (later calls'
    # inputs) nor open its descriptors (the report pipe) through /proc
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    config = job["config"]
    for group in config["cgroups"]:
        Path(group, "cgroup.procs").write_text("0")
    if os.getpid() != 1:  # no PID namespace: adopt orphaned descendants so they stay in our tree
        ctypes.CDLL(None).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    os.chdir(config["workdir"])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # runners get their own stdin pipes; nothing else reads the job stream
    run_job(job, blobs, report_fd)
    os.close(report_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1])))
