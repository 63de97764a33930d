"""Soak: a long run, SIGKILLed at random moments over and over, with faults throughout; then an audit.

``contextevolve run`` runs as a child process (its own session) against the scripted, faulty
endpoint of :mod:`benchmarks.soak_endpoint`. At seeded random moments (every ``--kill-min`` to
``--kill-max`` seconds) the soak SIGKILLs the child's whole process group and resumes the run
(``run --resume``), as an operator would, until the run exits 0. A run that stops by itself
(exit 3: the endpoint failed every retry) is resumed too. The soak is the child's subreaper, so a
process that escaped the process group is re-parented to it and found.

Then it audits and prints one table: iterations committed vs asked; programs in the Evolve
Buffer (each id once, one per iteration); the buffer's claims (each iteration claimed once, by the
worker that committed its child); the ids in the checkpointed state (the children each worker's
thread committed, over its whole checkpoint history: every child in exactly one worker's history,
the one its record names, each worker's count of its commits) vs the buffer vs the Chroma collection
(the same sets); tokens in the buffer vs in the workers' checkpoints (each child's tokens as its
worker checkpointed them when committing it) vs tokens the endpoint served (the difference must lie
within what was served while some worker's iteration was uncommitted at a kill, which is counted);
the best score recomputed by a fresh evaluation; processes, temporary files and SysV IPC objects left;
run-directory size and peak RSS per 100 iterations; kills survived; wall time. With several workers
children are committed in whatever order the workers finish them, and nothing here assumes otherwise.

Usage: python benchmarks/soak.py [--iterations 200] [--workers 1] [--executor local|ray] [--seed 0]
                                 [--samples-per-prompt N]
                                 [--kill-min 5] [--kill-max 40] [--out DIR] [--json FILE]

Exit status 0 when every check holds, 1 otherwise. Not part of the test suite (it runs for minutes).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.soak_endpoint import ScriptedEndpoint  # noqa: E402

PR_SET_CHILD_SUBREAPER = 36
REQUEST_TIMEOUT_S = 4.0
TASK = "model_placement"


# --------------------------------------------------------------------------- processes

def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def descendants(root: int) -> list[int]:
    """Living (non-zombie) processes below ``root``."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _stat(int(entry))) and info[0] != "Z":
            parents.setdefault(info[1], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rss_bytes(pids: list[int]) -> int:
    """Resident bytes of the processes ``pids`` together (one that is gone counts 0)."""
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


def reap_orphans(keep: int | None) -> None:
    """Collect exited processes re-parented to us (we are a subreaper), except the run itself."""
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != keep and (info := _stat(int(entry))) and \
                info == ("Z", os.getpid()):
            try:
                os.waitpid(int(entry), os.WNOHANG)
            except ChildProcessError:
                pass


def cmdline(pid: int) -> str:
    """The command line of process ``pid`` (its first 160 characters; ``?`` when it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return "?"


def sysv_ipc() -> int:
    """SysV shared-memory segments, semaphore sets and message queues on the machine."""
    return sum(max(0, len(Path(f"/proc/sysvipc/{kind}").read_text().splitlines()) - 1)
               for kind in ("shm", "sem", "msg") if Path(f"/proc/sysvipc/{kind}").exists())


def cgroup_entries() -> set[str]:
    """The evaluation control groups (``ce-*``) on the machine."""
    from contextevolve.evaluation import cgroups

    return {str(p) for base in cgroups.available().values() for p in base.glob("ce-*")}


def shm_entries() -> set[str]:
    """The names in ``/dev/shm``."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


# --------------------------------------------------------------------------- the run

class Monitor(threading.Thread):
    """Polls the run: committed programs per worker (read-only SQLite) and the RSS of everything below us."""

    def __init__(self, buffer_path: Path, iterations: int, workers: int):
        super().__init__(daemon=True)
        self.buffer_path = buffer_path
        self.last_iteration = iterations
        self.workers = workers
        self.committed: dict[int, int] = {}
        """Committed programs by the worker their record names (the initial program counts as worker 0's)."""
        self.commit_seen_before: dict[int, float] = {}
        """Per worker, the monotonic time of the last poll *before* the latest change of its count was
        seen: that worker's latest commit happened after it."""
        self.peak_rss: dict[int, int] = {}
        self.stop = threading.Event()

    def _counts(self) -> dict[int, int] | None:
        if not self.buffer_path.exists():
            return None
        try:
            db = sqlite3.connect(f"file:{self.buffer_path}?mode=ro", uri=True, timeout=1)
            try:
                return dict(db.execute("SELECT worker, count(*) FROM programs WHERE committed = 1 "
                                       "GROUP BY worker").fetchall())
            finally:
                db.close()
        except sqlite3.Error:  # (also before the run's buffer has its worker column)
            return None

    def uncommitted_since(self, launched: float) -> float:
        """The earliest moment the work of some worker that was uncommitted at a kill can have started.

        Every worker's node in flight started after that worker's latest commit and after the launch, so
        after the earliest of those (a worker that committed nothing since the launch counts from the
        launch; one that has stopped only widens the window).
        """
        return min(max(launched, self.commit_seen_before.get(worker, 0.0)) for worker in range(self.workers))

    def run(self) -> None:
        """Poll every half second until :attr:`stop` is set."""
        previous_poll = time.monotonic()
        while not self.stop.wait(0.5):
            counts = self._counts()
            if counts is not None:
                for worker, count in counts.items():
                    if count != self.committed.get(worker, 0):
                        self.committed[worker], self.commit_seen_before[worker] = count, previous_poll
            # the iterations under way are about the committed count (the initial program is one of them)
            done = sum(self.committed.values())
            bucket = min(max(0, done - 1), self.last_iteration - 1) // 100
            self.peak_rss[bucket] = max(self.peak_rss.get(bucket, 0), rss_bytes(descendants(os.getpid())))
            previous_poll = time.monotonic()


def run_command(args: argparse.Namespace, run_dir: Path, url: str) -> list[str]:
    """The command that starts the run against the endpoint at ``url``, or resumes it once it has started."""
    if (run_dir / "run.json").exists():
        return [sys.executable, "-m", "contextevolve.cli", "run", "--resume", "--run-dir", str(run_dir)]
    return [sys.executable, "-m", "contextevolve.cli", "run", "--task", TASK,
            "--iterations", str(args.iterations), "--run-dir", str(run_dir), "--base-url", url,
            "--model", "ctx", "--role-model", "generator=gen",
            "--max-retries", "2", "--retry-wait", "0.05", "--request-timeout", str(REQUEST_TIMEOUT_S),
            "--seed", str(args.seed), "--workers", str(args.workers), "--executor", args.executor,
            "--eval-timeout", "10", "--no-report",
            *(["--samples-per-prompt", str(args.samples_per_prompt)] if args.samples_per_prompt else [])]


def soak(args: argparse.Namespace) -> dict:
    """Run the killed-and-resumed run to completion; return what the audit needs."""
    out = Path(args.out)
    run_dir = out / "run"
    out.mkdir(parents=True, exist_ok=True)
    # the run's own TMPDIR, short: Ray puts its sockets there, and a Unix socket path has 107 bytes at most
    tmp = Path(tempfile.mkdtemp(prefix="ce-soak-", dir="/tmp"))
    rng = random.Random(args.seed)
    endpoint = ScriptedEndpoint(args.seed, hang_s=REQUEST_TIMEOUT_S + 1)
    env = dict(os.environ, TMPDIR=str(tmp), OPENAI_API_KEY="soak", PYTHONPATH=str(ROOT))
    monitor = Monitor(run_dir / "buffer.sqlite", args.iterations, args.workers)
    monitor.start()
    kills, stops, launches, at_risk, in_flight_at_kills, exits = 0, 0, 0, 0, 0, []
    started = time.monotonic()
    log = (out / "run.log").open("ab")
    while True:
        launched = time.monotonic()
        launches += 1
        child = subprocess.Popen(run_command(args, run_dir, endpoint.url), cwd=ROOT, env=env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
        deadline = launched + rng.uniform(args.kill_min, args.kill_max)
        polls = 0
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            polls += 1
            if polls % 10 == 0:  # scanning /proc costs CPU the run needs
                reap_orphans(child.pid)
        if child.poll() is None:
            in_flight_at_kills += endpoint.in_flight
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            kills += 1
        else:
            exits.append(child.returncode)
            if child.returncode == 0:
                break
            if child.returncode != 3:  # 3: the endpoint failed every retry; anything else is a defect
                raise SystemExit(f"the run exited {child.returncode} (see {out / 'run.log'})")
            stops += 1
        settle = time.monotonic() + 10  # replies still being written to the dead client land in this window
        while endpoint.in_flight and time.monotonic() < settle:
            time.sleep(0.1)
        # what was served since the later of this launch and the last commit of the worker that committed
        # least recently may be unaccounted (with one worker: since its last commit)
        at_risk += endpoint.served_between(monitor.uncommitted_since(launched), time.monotonic())
        if launches > 20 * (args.iterations + 10):
            raise SystemExit("the run makes no progress")
    wall = time.monotonic() - started
    time.sleep(1.0)
    monitor.stop.set()
    monitor.join()
    reap_orphans(None)
    endpoint.close()
    return dict(run_dir=run_dir, tmp=tmp, endpoint=endpoint, kills=kills, stops=stops, launches=launches,
                at_risk=at_risk, in_flight_at_kills=in_flight_at_kills, wall_s=wall,
                peak_rss=monitor.peak_rss)


# --------------------------------------------------------------------------- the audit

def audit(args: argparse.Namespace, ran: dict, before: dict) -> list[tuple[str, str, bool]]:
    """Rows (what, measured, ok) of the soak's table."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from contextevolve.graph.builder import build_graph
    from contextevolve.memory.buffer import EvolveBuffer
    from contextevolve.memory.records import program_id
    from contextevolve.memory.vectors import AbstractIndex
    from contextevolve.roles import add_usage, total_tokens
    from contextevolve.tasks.registry import get_task

    run_dir: Path = ran["run_dir"]
    buffer = EvolveBuffer(run_dir / "buffer.sqlite")
    committed = buffer.committed()
    ids = [r.id for r in committed]
    kids = [r for r in committed if r.iteration > 0]
    children = sorted(r.iteration for r in kids)
    rows = [("iterations committed / asked", f"{len(children)} / {args.iterations}",
             children == list(range(1, args.iterations + 1)))]
    with sqlite3.connect(f"file:{run_dir / 'buffer.sqlite'}?mode=ro", uri=True) as db:
        uncommitted = db.execute("SELECT count(*) FROM programs WHERE committed = 0").fetchone()[0]
    rows.append(("programs in the Evolve Buffer (committed; uncommitted)",
                 f"{len(ids)} ({len(set(ids))} distinct); {uncommitted}",
                 len(ids) == len(set(ids)) == args.iterations + 1))
    claims = buffer.claims()
    made_by = {r.iteration: r.worker for r in kids}
    rows.append(("iterations claimed (each once) / by the worker that committed the child",
                 f"{len(claims)} / {sum(claims.get(i) == w for i, w in made_by.items())}",
                 sorted(claims) == list(range(1, args.iterations + 1)) and claims == made_by
                 and set(claims.values()) <= set(range(args.workers))))

    # every worker's thread, over its whole checkpoint history: the children it committed are those of its
    # checkpoints whose last committed child is the child in progress (written by update_buffer; they stay
    # equal until the worker's next claim, and after a stop, so a child is seen in several: counted once)
    threads = buffer.worker_threads()
    conn = sqlite3.connect(f"file:{run_dir / 'checkpoints.sqlite'}?mode=ro", uri=True,
                           check_same_thread=False)
    graph = build_graph(SqliteSaver(conn))
    in_history: dict[int, set[str]] = {}  # worker -> children committed in its thread
    state_usage: dict[str, list] = {}  # child -> its iteration's tokens in each commit checkpoint of it
    checkpoints, finals, initial_ids = 0, {}, set()
    for worker, thread in sorted(threads.items()):
        config = {"configurable": {"thread_id": thread}}
        in_history[worker] = set()
        for snapshot in graph.get_state_history(config):
            values = snapshot.values
            checkpoints += 1
            if values.get("initial_id"):
                initial_ids.add(values["initial_id"])
            child = values.get("last_child_id")
            if child and child == values.get("child_id"):
                in_history[worker].add(child)
                state_usage.setdefault(child, []).append(values.get("iteration_usage") or {})
        latest = graph.get_state(config)
        finals[worker] = (tuple(latest.next), latest.values.get("stop_reason"),
                          latest.values.get("committed", 0))
    conn.close()
    rows.append(("worker threads (bound in the buffer) / workers asked", f"{len(threads)} / {args.workers}",
                 sorted(threads) == list(range(args.workers))))
    everywhere = [c for cs in in_history.values() for c in cs]
    in_state = set(everywhere) | initial_ids
    rows.append(("programs in the checkpointed state (children each worker committed, initial)",
                 f"{len(in_state)} in {checkpoints} checkpoints; in two workers' histories: "
                 f"{len(everywhere) - len(set(everywhere))}",
                 in_state == set(ids) and len(everywhere) == len(set(everywhere))
                 and initial_ids == {program_id(0)}))
    astray = sorted(r.id for r in kids if r.id not in in_history.get(r.worker, ()))
    miscounted = sorted(w for w, (_, _, n) in finals.items() if n != len(in_history[w]) or
                        n != sum(r.worker == w for r in kids))
    ended = sorted(w for w, (pending, reason, _) in finals.items() if not pending and reason)
    rows.append(("children not in the history of the worker their record names / workers whose commit count "
                 "differs / workers ended",
                 f"{len(astray)} {astray[:3]} / {miscounted} / {len(ended)} of {len(finals)}",
                 not astray and not miscounted and len(ended) == len(finals)))

    chroma = AbstractIndex(run_dir / "chroma").ids()
    rows.append(("programs in the Chroma collection", str(len(chroma)), chroma == set(ids)))

    in_buffer = sum(total_tokens(r.tokens) for r in committed)
    served = sum(s.tokens for s in ran["endpoint"].served)
    # each child's tokens as its worker checkpointed them when committing it, plus the initial program's
    # (spent by initialize, which keeps no tokens in the state)
    # With the Summarizer behind its worker (the default with several workers) the Summarizer's call comes
    # after the worker's commit checkpoint: the record adds exactly the summarizer calls it lists
    first = next((r for r in committed if r.iteration == 0), None)
    by_id = {r.id: r for r in kids}

    def expected(child: str, usage: dict) -> dict:
        record = by_id.get(child)
        if record is None or "summarizer" in usage:
            return usage
        calls = [c for c in record.llm_calls if c.role == "summarizer" and c.phase == "summarize"]
        if not calls:
            return usage
        return add_usage(usage, {"summarizer": {"prompt": sum(c.prompt for c in calls),
                                                "completion": sum(c.completion for c in calls)}})

    state_tokens = total_tokens(first.tokens if first else None) + sum(
        total_tokens(expected(child, usages[0])) for child, usages in state_usage.items())
    disagree = sorted(r.id for r in kids if any(expected(r.id, u) != r.tokens
                                                  for u in state_usage.get(r.id, [None]) if u is not None)
                      or r.id not in state_usage)
    lost = served - in_buffer
    rows.append(("tokens in the buffer / in the workers' commit checkpoints (+ initial) / served by the "
                 "endpoint",
                 f"{in_buffer:,} / {state_tokens:,} / {served:,}"
                 + (f"; differ for {disagree[:3]}" if disagree else ""),
                 in_buffer == state_tokens and not disagree))
    rows.append(("served but not in the buffer / served while some worker's iteration was uncommitted at a "
                 "kill",
                 f"{lost:,} / {ran['at_risk']:,}", 0 <= lost <= ran["at_risk"]))
    rows.append(("requests in flight at the kills", str(ran["in_flight_at_kills"]), True))

    left = [pid for pid in descendants(os.getpid())]
    rows.append(("processes left (below the soak, its subreaper)",
                 "0" if not left else f"{len(left)}: " + "; ".join(cmdline(p) for p in left[:3]), not left))
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # kept in TMPDIR by libraries on purpose, also after a clean exit: torch's compile cache
    # (torchinductor_<user>, one, reused) and Ray's session folders (ray/session_*, its logs)
    kept = {n for n in os.listdir(ran["tmp"]) if n.startswith("torchinductor_") or n == "ray"}
    tmp_left = sorted(set(os.listdir(ran["tmp"])) - kept)
    rows.append(("temporary files left (the run's TMPDIR)",
                 f"{len(tmp_left)} {tmp_left[:3]}" if tmp_left else "0", not tmp_left))
    if (ran["tmp"] / "ray").is_dir():
        sessions = len(list((ran["tmp"] / "ray").glob("session_2*")))
        ray_bytes = sum(p.stat().st_size for p in (ran["tmp"] / "ray").rglob("*")
                        if p.is_file() and not p.is_symlink())
        rows.append(("Ray's own session folders (its logs, kept by Ray)",
                     f"{sessions} sessions, {ray_bytes / 2**20:.1f} MiB", True))
    from contextevolve.leftovers import orphaned

    # another soak or run may be evaluating now: only groups whose owner is gone are left over
    groups = orphaned([Path(p) for p in cgroup_entries() - before["cgroups"]], "ce-")
    rows.append(("control groups left", str(len(groups)), not groups))
    shm_new = shm_entries() - before["shm"]
    ipc = sysv_ipc() - before["ipc"]
    rows.append(("SysV IPC objects / /dev/shm entries left", f"{ipc} / {len(shm_new)}",
                 ipc <= 0 and not shm_new))
    # only now: an evaluation in this process first removes what killed evaluations left (the
    # checks above would not see it)
    task = get_task(TASK)
    best = buffer.best(task.higher_is_better)
    fresh = task.evaluate(best.source)
    rows.append(("best score stored / recomputed by a fresh evaluation",
                 f"{best.combined_score:.6f} / {fresh.combined_score:.6f}",
                 fresh.status == "ok"
                 and abs(fresh.combined_score - best.combined_score) <= task.score_tolerance))
    buffer.close()
    size = sum(p.stat().st_size for p in run_dir.rglob("*") if p.is_file())
    rows.append(("run directory size", f"{size / 2**20:.1f} MiB", True))
    rss = ", ".join(f"{100 * b + 1}-{100 * b + 100}: {v / 2**20:.0f} MiB"
                    for b, v in sorted(ran["peak_rss"].items()))
    rows.append(("peak RSS per 100 iterations (run + sandbox)", rss, True))
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(ran["endpoint"].kinds.items()))
    rows.append(("endpoint replies", kinds, True))
    rows.append(("kills survived / endpoint stops resumed / launches",
                 f"{ran['kills']} / {ran['stops']} / {ran['launches']}", True))
    rows.append(("wall time", f"{ran['wall_s'] / 60:.1f} min", True))
    return rows


def main() -> int:
    """Run the soak, audit what it left and print the table; 1 when a check fails."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="workers of the run (run --workers; default 1)")
    parser.add_argument("--executor", choices=["local", "ray"], default="local")
    parser.add_argument("--samples-per-prompt", type=int, default=0, metavar="N",
                        help="children per composed prompt (default: the run's default)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kill-min", type=float, default=5.0, help="seconds (default 5)")
    parser.add_argument("--kill-max", type=float, default=40.0, help="seconds (default 40)")
    parser.add_argument("--out", help="folder for the run and its log (default: a new temporary folder)")
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    args.out = args.out or tempfile.mkdtemp(prefix="ce-soak-")
    if Path(args.out, "run").exists():
        parser.error(f"{args.out}/run exists: give a new --out")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        parser.error("cannot become a child subreaper (prctl)")
    before = {"shm": shm_entries(), "ipc": sysv_ipc(), "cgroups": cgroup_entries()}
    print(f"soak: {args.iterations} iterations, {args.workers} workers, {args.executor} executor, "
          f"seed {args.seed}, kills every {args.kill_min:g}-{args.kill_max:g} s, in {args.out}", flush=True)
    ran = soak(args)
    rows = audit(args, ran, before)
    width = max(len(r[0]) for r in rows)
    print(f"\n| {'check'.ljust(width)} | measured | ok |\n|{'-' * (width + 2)}|---|---|")
    for what, value, ok in rows:
        print(f"| {what.ljust(width)} | {value} | {'yes' if ok else 'NO'} |")
    if args.json:
        table = [{"check": w, "measured": v, "ok": ok} for w, v, ok in rows]
        Path(args.json).write_text(json.dumps(table, indent=1))
    if all(ok for *_, ok in rows):
        shutil.rmtree(ran["tmp"], ignore_errors=True)
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
