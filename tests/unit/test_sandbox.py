"""Hostile candidate programs, on the local executor and on a Ray cluster started by the test.

Each is contained, fails (or passes) with a reason, leaves no process behind, and the evaluator keeps
working.
"""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import contextevolve.tasks.model_placement.task as mp_task_module
from contextevolve.evaluation.executors import LocalExecutor, RayExecutor
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.evaluation.sandbox import host_sandbox
from contextevolve.tasks.registry import get_task
from tests.unit.hostile_runner import EXPECTED, HOSTILE

TASK = get_task("model_placement")
INITIAL_SCORE = 21.891622105209393
LIMITS = SandboxLimits(timeout_s=20, cpu_s=3, memory_mb=1024, output_kb=256, max_processes=32, files_mb=64)
SECRET = "sk-test-" + uuid.uuid4().hex
landlock = pytest.mark.skipif(host_sandbox().landlock_abi < 1, reason="this kernel has no Landlock")


def _ray_address(tmp: Path) -> tuple[str, dict]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY",)}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    # without it, a head started where ~/.ray/auth_token exists (written by any earlier local ray.init,
    # e.g. a run with --executor ray) requires the token, which this test's client does not send
    env["RAY_AUTH_MODE"] = "disabled"
    subprocess.run([str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={port}",
                    "--num-cpus=2", "--include-dashboard=false", f"--temp-dir={tmp}",
                    "--disable-usage-stats"],
                   check=True, capture_output=True, env=env, timeout=180)
    return f"127.0.0.1:{port}", env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", params=["local", "ray"])
def executor(request, tmp_path_factory):
    """The same tests run against both backends; the Ray one is a local cluster started here."""
    if request.param == "local":
        yield LocalExecutor(workers=2)
        return
    pytest.importorskip("ray")
    import ray

    address, env = _ray_address(Path("/tmp") / f"ray-{uuid.uuid4().hex[:6]}")
    try:
        yield RayExecutor(workers=2, address=address)
    finally:
        ray.shutdown()
        subprocess.run([str(Path(sys.executable).parent / "ray"), "stop", "--force"], capture_output=True,
                       env=env, timeout=120)


def sandbox_processes() -> list[str]:
    """Command lines of every sandbox supervisor or runner still alive on this machine."""
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "contextevolve.evaluation.supervisor" in cmd or "contextevolve.evaluation.runner" in cmd:
            found.append(f"{pid}: {cmd}")
    return found


def processes_with(marker: str) -> list[str]:
    """Processes whose command line contains ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode():
                out.append(pid)
        except OSError:
            pass
    return out


def contained(executor, source: str, limits: SandboxLimits = LIMITS):
    """Evaluate a hostile program; check nothing is left and the evaluator still scores a good program."""
    result = executor.evaluate(TASK.name, source, limits=limits)
    time.sleep(0.2)
    assert sandbox_processes() == []
    after = executor.evaluate(TASK.name, TASK.initial_program, limits=limits)
    assert after.status == "ok" and after.combined_score == pytest.approx(INITIAL_SCORE)
    if result.status != "ok":
        assert result.reason and result.combined_score == TASK.worst_score
    return result


def test_infinite_loop_hits_the_cpu_limit(executor):
    result = contained(executor, "while True:\n    pass\n")
    assert result.status == "failed" and "CPU-time limit of 3 s exceeded" in result.reason


def test_wall_clock_limit_kills_a_sleeping_program(executor):
    result = contained(executor, "import time\ntime.sleep(60)\n", LIMITS.model_copy(update={"timeout_s": 2}))
    assert result.status == "timeout" and "2 s wall-clock limit" in result.reason


def test_fork_bomb_is_capped_and_cleaned_up(executor):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result = contained(executor, bomb, LIMITS.model_copy(update={"timeout_s": 6}))
    assert result.status in ("failed", "timeout")
    assert "CPU-time limit" in result.reason or "wall-clock limit" in result.reason


def test_memory_hog_hits_the_memory_cap(executor):
    hog = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 * 2**20))\n"
    # memory decides
    result = contained(executor, hog, LIMITS.model_copy(update={"timeout_s": 60, "cpu_s": 30}))
    assert result.status == "failed" and "memory limit of 1024 MiB exceeded" in result.reason


def test_huge_output_hits_the_output_cap(executor):
    result = contained(executor, "while True:\n    print('x' * 10000)\n")
    assert result.status == "failed" and "output limit exceeded" in result.reason


def test_huge_file_hits_the_file_cap(executor):
    writer = "with open('big.bin', 'wb') as f:\n    while True:\n        f.write(b'0' * 2**20)\n"
    result = contained(executor, writer)
    assert result.status == "failed"
    assert "file-size limit of 64 MiB exceeded" in result.reason or "disk limit exceeded" in result.reason


@landlock
def test_writes_outside_its_directory_are_refused(executor, tmp_path):
    targets = [tmp_path / "escaped.txt", Path(mp_task_module.__file__).parent / "escaped.txt",
               Path("/tmp") / f"escaped-{uuid.uuid4().hex}.txt"]
    source = ("import os\nerrors = []\n"
              f"for path in {[str(t) for t in targets]!r} + [os.path.expanduser('~/../escaped.txt')]:\n"
              "    try:\n        open(path, 'w').write('owned')\n"
              "    except OSError as exc:\n        errors.append(type(exc).__name__)\n"
              "raise RuntimeError('blocked: ' + ','.join(errors))\n")
    result = contained(executor, source)
    # refused by Landlock, or not even there in the sandbox's mount namespace
    assert result.status == "failed" and "blocked: " in result.reason
    assert set(result.reason.split("blocked: ")[1].split(",")) <= {"PermissionError", "FileNotFoundError"}
    assert not any(t.exists() for t in targets)


def test_environment_secrets_do_not_reach_the_candidate(executor, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CONTEXTEVOLVE_API_KEY", SECRET)
    snoop = ("import os\nfound = [k + '=' + v for k, v in os.environ.items()]\n"
             "for pid in ['self', str(os.getppid()), '1'] + "
             "[p for p in os.listdir('/proc') if p.isdigit()]:\n"
             "    try:\n        found.append(open(f'/proc/{pid}/environ').read())\n"
             "    except OSError:\n        pass\n"
             "raise RuntimeError('leak: ' + ' '.join(found))\n")
    result = contained(executor, snoop)
    assert result.status == "failed" and "leak:" in result.reason
    assert SECRET not in result.model_dump_json()
    assert "OPENAI_API_KEY" not in result.reason and "PATH=" in result.reason


@pytest.mark.parametrize("how", ["getppid", "proc_stat", "test_process", "process_group"])
def test_killing_its_parent_fails(executor, how):
    target = {"getppid": "os.getppid()",
              "proc_stat": "int(open('/proc/self/stat').read().split(')')[1].split()[1])",
              "test_process": str(os.getpid()), "process_group": "-os.getpgid(0)"}[how]
    source = (f"import os, signal\ntarget = {target}\n"
              "if target < 0:\n    os.killpg(-target, signal.SIGKILL)\n"
              "elif target > 0:\n    os.kill(target, signal.SIGKILL)\n"
              "raise RuntimeError('parent survived')\n")
    result = contained(executor, source)
    assert result.status == "failed" and result.reason  # it died, or its kill was refused


def test_exiting_the_interpreter_is_a_failed_evaluation(executor):
    quits = contained(executor, "import sys\nsys.exit(0)\n")
    assert quits.status == "failed" and "SystemExit" in quits.reason
    hard = contained(executor, "import os\ndef compute_model_placement(gpu_num, models):\n    os._exit(0)\n")
    assert hard.status == "failed" and "exited with code 0 without a result" in hard.reason
    crash = contained(executor, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    assert crash.status == "failed" and "killed by signal SIGSEGV" in crash.reason


@landlock
def test_tampering_with_the_grader_changes_nothing(executor):
    grader = Path(mp_task_module.__file__)
    before = hashlib.sha256(grader.read_bytes()).hexdigest()
    source = ("import contextevolve.tasks.model_placement.harness as h\n"
              "try:\n    import contextevolve.tasks.model_placement.task as t\n"
              "    t.grade = lambda *a, **k: None\n"
              "except ImportError as exc:\n    hidden = str(exc)\n"
              f"try:\n    open({str(grader)!r}, 'a').write('\\ndef grade(*a, **k): return None\\n')\n"
              "except OSError:\n    pass\n"
              "def compute_model_placement(gpu_num, models):\n"
              "    raise RuntimeError('grader hidden: ' + hidden)\n")
    result = contained(executor, source)
    assert hashlib.sha256(grader.read_bytes()).hexdigest() == before
    # only the harness is importable in the sandbox: the grader module is not there to tamper with
    assert result.status == "failed" and "grader hidden: No module named" in result.reason
    assert result.combined_score == TASK.worst_score


def test_network_connections_are_refused(executor):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    source = ("import socket\nerrors = []\n"
              "for host in ['127.0.0.1', 'pypi.org']:\n"
              "    try:\n"
              f"        socket.create_connection((host, {port} if host[0] == '1' else 443), timeout=2)\n"
              "        errors.append('connected')\n"
              "    except OSError as exc:\n        errors.append(type(exc).__name__)\n"
              "raise RuntimeError('network: ' + ','.join(errors))\n")
    try:
        result = contained(executor, source)
        with pytest.raises(socket.timeout):
            listener.accept()
    finally:
        listener.close()
    assert result.status == "failed" and "network:" in result.reason and "connected" not in result.reason


def test_leftover_child_processes_are_killed(executor):
    marker = f"{time.time() % 1000:.6f}"
    source = ("import os, subprocess\n"
              f"subprocess.Popen(['sleep', '9{marker}'], start_new_session=True)\n"
              "if os.fork() == 0:\n"
              "    os.setsid()\n"
              "    if os.fork() == 0:\n"
              f"        os.execvp('sleep', ['sleep', '8{marker}'])\n"
              "    os._exit(0)\n"
              + TASK.initial_program)
    result = contained(executor, source)
    assert result.status == "ok" and result.combined_score == pytest.approx(INITIAL_SCORE)
    assert processes_with(f"9{marker}") == [] and processes_with(f"8{marker}") == []


def test_parallel_evaluations_are_independent(executor):
    """Two hostile programs and a good one at once: each gets its own verdict."""
    sources = ["while True:\n    pass\n", TASK.initial_program, "import os\nos._exit(3)\n"]
    results = executor.map(TASK.name, sources, limits=LIMITS)
    assert [r.status for r in results] == ["failed", "ok", "failed"]
    assert results[1].combined_score == pytest.approx(INITIAL_SCORE)
    assert sandbox_processes() == []


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_candidates_on_model_placement(executor, name):
    """Each hostile candidate on Model Placement ends failed/invalid or far below the initial score.

    The attacks: forged protocol frames, giving up on hard cases, shrunken copies, an oversized reply,
    reading the package's data generator, killing the parents.
    """
    result = contained(executor, HOSTILE[name])
    assert result.combined_score < INITIAL_SCORE
    assert EXPECTED[name](result.model_dump()), (result.status, result.reason)


def _task_attacks() -> dict:
    """Task-specific attacks, as (task, source, check of the Evaluation) — run on both executors."""
    from tests.unit.test_trust_lb_sak import lb_wrapped
    from tests.unit.test_trust_ts_sql import CLOCKS

    lazy_frame = ("import time\nclass Lazy:\n    def __init__(self, df):\n        self.df = df\n"
                  "    def to_numpy(self):\n        time.sleep(0.5)\n        return self.df.to_numpy()\n"
                  "def reorder(df):\n    return Lazy(df), [list(df.columns)] * len(df)\n")
    lazy_tensor = lb_wrapped("return tuple(t.as_subclass(Lazy) for t in _honest(weight, *args))", preamble=(
        "import time\nimport torch\nclass Lazy(torch.Tensor):\n    def numpy(self, *a, **k):\n"
        "        time.sleep(0.07)\n"
        "        return torch.Tensor.numpy(self.as_subclass(torch.Tensor), *a, **k)\n"))
    memo = lb_wrapped("key = hash(weight.numpy().tobytes())\nif key not in _SEEN:\n    time.sleep(0.1)\n"
                      "    _SEEN[key] = _honest(weight, *args)\nreturn _SEEN[key]",
                      preamble="import time\n_SEEN = {}\ntime.sleep(2)  # import-time work\n")
    return {
        "sql_rebound_clock": ("llm_sql", CLOCKS + "def reorder(df):\n    _sleep(0.5)\n"
                              "    return df, [list(df.columns)] * len(df)\n",
                              lambda r: r.status == "ok" and r.metrics["seconds"] >= 0.5),
        "sql_lazy_frame": ("llm_sql", lazy_frame, lambda r: r.status == "ok" and r.metrics["seconds"] >= 0.5),
        "lb_lazy_tensor": ("eplb", lazy_tensor,
                           lambda r: r.status == "ok" and r.metrics["speed"] <= 0.02 / 0.2),
        "lb_memoised_after_import_work": ("eplb", memo,
                                          lambda r: r.status == "ok" and r.metrics["speed"] <= 0.02 / 0.1),
        "ts_unhashable_order": ("txn_scheduling", "def get_best_schedule(workload, num_seqs):\n"
                                "    return 0, [[i] for i in range(workload.num_txns)]\n",
                                lambda r: r.status == "invalid"),
    }


@pytest.mark.parametrize("name", ["sql_rebound_clock", "sql_lazy_frame", "lb_lazy_tensor",
                                  "lb_memoised_after_import_work", "ts_unhashable_order"])
def test_hostile_timing_and_output_attacks(executor, name):
    """Rebound clocks, lazy results, memoising after import-time work, bad outputs: measured or refused."""
    task, source, check = _task_attacks()[name]
    result = executor.evaluate(task, source, limits=LIMITS.model_copy(update={"timeout_s": 90, "cpu_s": 60,
                                                                             "memory_mb": 4096}))
    assert check(result), (result.status, result.reason, result.metrics)
    assert sandbox_processes() == []


def _mount_namespace_or_noted(result) -> bool:
    """True where this host has the mount namespace; else its absence must be in the notes."""
    if host_sandbox().mount_namespace:
        return True
    assert any(n.startswith("files readable: no mount namespace") for n in result.notes), result.notes
    return False


def test_hostile_secret_files_and_host_sockets_are_out_of_reach(executor, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    path = f"/tmp/ce-{uuid.uuid4().hex[:8]}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    listener.settimeout(0.3)
    source = ("import socket\nseen = []\n"
              f"try:\n    seen.append(open({str(secret)!r}).read())\nexcept OSError as exc:\n"
              "    seen.append(type(exc).__name__)\n"
              f"s = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({path!r})\n"
              "    seen.append('CONNECTED')\n"
              "except OSError as exc:\n    seen.append(type(exc).__name__)\n"
              "raise RuntimeError('seen: ' + ','.join(seen))\n")
    try:
        result = contained(executor, source)
        try:
            accepted = listener.accept()[0]
        except socket.timeout:
            accepted = None
    finally:
        listener.close()
        os.unlink(path)
    assert result.status == "failed" and "seen: " in result.reason
    if _mount_namespace_or_noted(result):
        assert SECRET not in result.reason and "CONNECTED" not in result.reason, result.reason
        assert accepted is None


def test_hostile_sysv_ipc_does_not_outlive_an_evaluation(executor):
    key = 0x5EC0000 + os.getpid() % 0xFFFF
    common = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    create = common + f"libc.shmget({key}, 4096, 0o1000 | 0o600)\nraise RuntimeError('made')\n"
    look = common + f"raise RuntimeError('found %d' % libc.shmget({key}, 0, 0))\n"
    first = contained(executor, create)
    second = contained(executor, look)
    assert first.status == second.status == "failed" and "made" in first.reason
    if not any(n.startswith("SysV IPC shared with the host") for n in second.notes):
        assert "found -1" in second.reason, second.reason
        assert str(key) not in " ".join(Path("/proc/sysvipc/shm").read_text().split()[17::16])


@pytest.mark.skipif(not __import__("contextevolve.llm.embedded", fromlist=["installed"]).installed(),
                    reason="SAK data is captured from the embedded LLM")
def test_hostile_long_double_weights_cannot_make_a_nan_score(executor):
    """select_keys returns float128 weights of 1e4000 (inf once cast down): invalid, never a NaN score."""
    source = ("import numpy as np\n"
              "def select_keys(queries, keys, values, query_positions):\n"
              "    h, q, t = queries.shape[0], queries.shape[1], keys.shape[1]\n"
              "    mask = np.broadcast_to(np.arange(t)[None, :] <= query_positions[:, None], "
              "(h, q, t)).copy()\n"
              "    return mask, np.full(mask.shape, np.longdouble('1e4000'))\n")
    result = executor.evaluate("sparse_attention", source, limits=LIMITS.model_copy(update={
        "timeout_s": 90, "cpu_s": 60, "memory_mb": 4096, "files_mb": 512}))
    assert result.status == "invalid" and result.combined_score == 1.0, result.reason
    assert "long double" in result.reason


def test_notes_say_what_this_host_cannot_enforce(monkeypatch):
    from contextevolve.evaluation import sandbox

    sandbox.host_sandbox.cache_clear()
    monkeypatch.setenv("CONTEXTEVOLVE_NO_NAMESPACES", "1")
    try:
        result = TASK.evaluate(TASK.initial_program, limits=LIMITS)
        assert result.status == "ok"
        assert any(n.startswith("network namespace unavailable") for n in result.notes)
        allowed = TASK.evaluate(TASK.initial_program,
                                limits=LIMITS.model_copy(update={"allow_network": True}))
        assert not any(n.startswith("network") for n in allowed.notes)
    finally:
        monkeypatch.delenv("CONTEXTEVOLVE_NO_NAMESPACES")
        sandbox.host_sandbox.cache_clear()


def test_a_lost_ray_worker_is_a_failed_evaluation(executor, monkeypatch):
    if not isinstance(executor, RayExecutor):
        pytest.skip("Ray only: a local evaluation has no worker to lose")
    import ray

    def crash(*_args):
        os._exit(1)  # the Ray worker process dies mid-task (as when its node goes away)

    monkeypatch.setattr(executor, "_remote", ray.remote(num_cpus=1, max_retries=0)(crash))
    result = executor.evaluate(TASK.name, TASK.initial_program, limits=LIMITS)
    assert result.status == "failed" and "evaluation on the Ray cluster failed" in result.reason
    assert result.combined_score == TASK.worst_score


@pytest.mark.parametrize("attack, fragment", [
    # ~1,000 nested directories (recursive walks and removals on Python 3.11 hit the recursion limit)
    ("import os\nfor _ in range(1200):\n    os.mkdir('d')\n    os.chdir('d')\nimport time\ntime.sleep(30)\n",
     "timeout"),
    # more files than any task needs: stopped long before the inodes run out
    # (CPU and wall limits far above what the host needs to notice: on a loaded CI machine the
    # candidate may create files for seconds of CPU before the host's check gets its turn)
    ("import os\nfor i in range(200000):\n    open(f'f{i}', 'w').close()\n",
     "disk limit exceeded: more than"),
    # a reply nested too deep to re-encode, and a number that overflows to infinity
    ("import os, struct, sys\n"
     "body = b'{\"type\": \"result\", \"value\": ' + b'[' * 50000 + b']' * 50000 + b'}'\n"
     "def compute_model_placement(gpu_num, models):\n"
     "    os.write(int(sys.argv[-1]), struct.pack('>Q', len(body)) + body)\n    return {}\n",
     "every case failed"),
    ("import os, struct, sys\nbody = b'{\"type\": \"result\", \"value\": {\"placement\": 1e999}}'\n"
     "def compute_model_placement(gpu_num, models):\n"
     "    os.write(int(sys.argv[-1]), struct.pack('>Q', len(body)) + body)\n    return {}\n",
     "every case failed"),
])
def test_host_side_limits_hold_against_odd_trees_and_replies(executor, attack, fragment):
    """Deep or wide directory trees, unrepresentable replies: a verdict, never an exception or a stall."""
    before = set(os.listdir(tempfile.gettempdir()))
    roomy = fragment.startswith("disk")  # only the time limits may decide the other cases' verdicts
    result = contained(executor, attack, LIMITS.model_copy(
        update={"timeout_s": 60, "cpu_s": 60} if roomy else {"timeout_s": 8}))
    assert result.status in ("failed", "timeout") and result.combined_score == TASK.worst_score
    assert fragment in f"{result.status} {result.reason}", result.reason
    leftover = [d for d in set(os.listdir(tempfile.gettempdir())) - before if d.startswith("ce-eval-")]
    assert leftover == []


def test_a_refused_ray_connection_names_token_authentication_where_it_may_be_why(tmp_path, monkeypatch):
    """A refused Ray connection names token authentication where it may be why.

    After any local ``ray.init`` (Ray 2.5x writes ~/.ray/auth_token), a head started with ``ray start``
    refuses clients without ``RAY_AUTH_MODE=token``; the error says so (seen by benchmarks/soak.py).
    """
    pytest.importorskip("ray")
    from contextevolve.evaluation.executors import _auth_hint

    token = tmp_path / "auth_token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert _auth_hint("127.0.0.1:6379") == ""  # no token file: not the reason
    token.write_text("t")
    assert "RAY_AUTH_MODE=token" in _auth_hint("127.0.0.1:6379")
    assert _auth_hint(None) == ""  # a local instance we start ourselves
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert _auth_hint("127.0.0.1:6379") == ""  # already chosen
