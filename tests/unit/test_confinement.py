"""What a candidate can see of the host: files, processes, SysV IPC, UNIX sockets, this package's source.

Every test runs twice: with bubblewrap's mount namespace (skipped where it is not usable) and
with the ``unshare`` fallback (``CONTEXTEVOLVE_NO_BWRAP=1``). A layer the fallback cannot
enforce must be named in ``Evaluation.notes``; the test then checks that note and skips.
"""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

import contextevolve
from contextevolve.evaluation import sandbox
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.tasks.datacache import data_dir
from contextevolve.tasks.registry import get_task

TASK = get_task("model_placement")
INITIAL_SCORE = 21.891622105209393
LIMITS = SandboxLimits(timeout_s=30, cpu_s=10, memory_mb=2048, output_kb=256, max_processes=32, files_mb=64)
SECRET = "sk-confined-" + uuid.uuid4().hex
FILES_NOTE = "files readable: no mount namespace"


@pytest.fixture(params=["bwrap", "fallback"])
def host(request, monkeypatch):
    """The host sandbox of one mode: bubblewrap, or the ``unshare`` fallback."""
    sandbox.host_sandbox.cache_clear()
    if request.param == "fallback":
        monkeypatch.setenv("CONTEXTEVOLVE_NO_BWRAP", "1")
    probed = sandbox.host_sandbox()
    if request.param == "bwrap" and not probed.mount_namespace:
        sandbox.host_sandbox.cache_clear()
        pytest.skip(f"bubblewrap is not usable here: {probed.notes}")
    yield probed
    sandbox.host_sandbox.cache_clear()


def evaluate(source: str, **limits):
    return TASK.evaluate(source, limits=LIMITS.model_copy(update=limits))


def reported(result) -> str:
    """What a probing candidate raised at import (``found: ...``)."""
    assert result.status == "failed" and "found: " in result.reason, result.reason
    return result.reason.split("found: ", 1)[1]


def skip_unless_enforced(host, result, note: str) -> None:
    """On a host without the layer, its absence must be in the notes (then the test stops here)."""
    if not host.mount_namespace:
        assert any(n.startswith(note) for n in result.notes), result.notes
        pytest.skip(f"not enforced without bubblewrap, and noted: {note}")


def test_initial_program_scores_exactly_and_notes_are_honest(host):
    result = evaluate(TASK.initial_program)
    assert result.status == "ok" and result.combined_score == INITIAL_SCORE
    networked = evaluate(TASK.initial_program, allow_network=True)
    assert networked.status == "ok" and networked.combined_score == INITIAL_SCORE
    if host.mount_namespace:
        assert not [n for n in result.notes if n.startswith((FILES_NOTE, "host processes", "SysV IPC"))]
    else:
        assert any(n.startswith(f"{FILES_NOTE} (disabled by CONTEXTEVOLVE_NO_BWRAP)") for n in result.notes)


def test_secret_files_are_unreadable(host, tmp_path):
    home_like = tmp_path / "home" / ".config" / "secret.txt"
    home_like.parent.mkdir(parents=True)
    home_like.write_text(SECRET)
    in_home = Path.home() / ".config" / f"contextevolve-test-{uuid.uuid4().hex[:8]}.txt"
    in_home.parent.mkdir(parents=True, exist_ok=True)
    in_home.write_text(SECRET)
    data = data_dir()
    source = ("import os\nseen = []\n"
              f"for path in {[str(home_like), str(in_home)]!r}:\n"
              "    try:\n        seen.append('READ ' + open(path).read())\n"
              "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
              f"for folder in {[str(data), str(Path.home()), str(tmp_path)]!r}:\n"
              "    try:\n        seen.append('LISTED ' + ';'.join(sorted(os.listdir(folder))))\n"
              "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
              "raise RuntimeError('found: ' + ','.join(seen))\n")
    try:
        result = evaluate(source)
    finally:
        in_home.unlink()
    skip_unless_enforced(host, result, FILES_NOTE)
    secret_a, secret_b, data_seen, home_seen, tmp_seen = reported(result).split(",")
    assert "READ" not in secret_a + secret_b and SECRET not in result.reason, result.reason
    assert not data_seen.startswith("LISTED") and not tmp_seen.startswith("LISTED"), result.reason
    # the home directory is at most a path to the interpreter (pyenv): none of its files are there
    assert not {".config", ".cache", in_home.name} & set(home_seen.removeprefix("LISTED ").split(";")), (
        home_seen)


def test_host_process_command_lines_are_invisible(host):
    marker = f"ce-marker-{uuid.uuid4().hex}"
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        source = ("import os\nhits = []\n"
                  f"for pid in os.listdir('/proc') + [{str(helper.pid)!r}]:\n"
                  "    try:\n        line = open(f'/proc/{pid}/cmdline', 'rb').read()\n"
                  "    except OSError:\n        continue\n"
                  f"    if {marker.encode()!r} in line:\n"
                  "        hits.append(pid)\n"
                  "raise RuntimeError('found: %d host processes %s' % (len(hits), hits[:5]))\n")
        result = evaluate(source)
    finally:
        helper.kill()
        helper.wait()
    if any(n.startswith("host processes visible") for n in result.notes):
        pytest.skip("no private /proc on this host, and noted")
    assert reported(result).startswith("0 host processes"), result.reason


_IPC_CREAT, _IPC_RMID = 0o1000, 0


def _host_ipc_keys(kind: str) -> set[int]:
    """Keys of the host's SysV IPC objects (``kind``: shm, msg or sem)."""
    lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()[1:]
    return {int(line.split()[0]) for line in lines if line.strip()}


def _remove_host_ipc(key: int) -> None:
    """Remove the host's SysV objects with ``key`` (left there only if the IPC namespace failed)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if (ident := libc.shmget(key, 0, 0)) >= 0:
        libc.shmctl(ident, _IPC_RMID, None)
    if (ident := libc.msgget(key, 0)) >= 0:
        libc.msgctl(ident, _IPC_RMID, None)
    if (ident := libc.semget(key, 0, 0)) >= 0:
        libc.semctl(ident, 0, _IPC_RMID)


def test_sysv_ipc_does_not_outlive_an_evaluation_or_reach_the_host(host):
    key = random.randrange(0x10000000, 0x7FFFFFFF)
    common = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    create = common + (f"shm = libc.shmget({key}, 4096, {_IPC_CREAT} | 0o600)\n"
                       f"msg = libc.msgget({key}, {_IPC_CREAT} | 0o600)\n"
                       f"sem = libc.semget({key}, 1, {_IPC_CREAT} | 0o600)\n"
                       "raise RuntimeError(f'found: created {shm} {msg} {sem}')\n")
    look = common + (f"shm = libc.shmget({key}, 0, 0)\nmsg = libc.msgget({key}, 0)\n"
                     f"sem = libc.semget({key}, 0, 0)\n"
                     "raise RuntimeError(f'found: looked {shm} {msg} {sem}')\n")
    try:
        created = reported(evaluate(create)).split()
        # it could make them
        assert created[0] == "created" and all(int(i) >= 0 for i in created[1:]), created
        on_host = {kind: key in _host_ipc_keys(kind) for kind in ("shm", "msg", "sem")}
        second = evaluate(look)
    finally:
        _remove_host_ipc(key)
    if any(n.startswith("SysV IPC shared with the host") for n in second.notes):
        pytest.skip("no IPC namespace on this host, and noted")
    assert on_host == {"shm": False, "msg": False, "sem": False}
    assert reported(second).split() == ["looked", "-1", "-1", "-1"]


def test_host_unix_sockets_are_unreachable(host):
    folder = tempfile.mkdtemp(prefix="ce-sock-", dir="/tmp")
    path = os.path.join(folder, "host.sock")
    abstract = f"\0ce-test-{uuid.uuid4().hex}"
    listeners = []
    try:
        for address in (path, abstract):
            listener = socket.socket(socket.AF_UNIX)
            listener.bind(address)
            listener.listen()
            listener.settimeout(0.3)
            listeners.append(listener)
        source = ("import socket\nseen = []\n"
                  f"for address in {[path, abstract]!r}:\n"
                  "    s = socket.socket(socket.AF_UNIX)\n"
                  "    try:\n        s.connect(address)\n        seen.append('CONNECTED')\n"
                  "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
                  "raise RuntimeError('found: ' + ','.join(seen))\n")
        result = evaluate(source)
        accepted = []
        for listener in listeners:
            try:
                accepted.append(listener.accept()[0])
            except socket.timeout:
                accepted.append(None)
    finally:
        for listener in listeners:
            listener.close()
        shutil.rmtree(folder, ignore_errors=True)
    pathname, abstract_seen = reported(result).split(",")
    assert abstract_seen != "CONNECTED" and accepted[1] is None  # network namespace (+ Landlock scoping)
    skip_unless_enforced(host, result, FILES_NOTE)
    assert pathname != "CONNECTED" and accepted[0] is None, result.reason


def test_package_source_and_task_data_are_out_of_reach(host):
    package = Path(contextevolve.__file__).resolve().parent
    traces = package / "tasks" / "eplb" / "traces.py"
    assert traces.exists()
    source = ("import os\nseen = []\n"
              "try:\n    import contextevolve.tasks.eplb.traces\n    seen.append('IMPORTED')\n"
              "except ImportError as exc:\n    seen.append(type(exc).__name__)\n"
              f"try:\n    seen.append('READ %d' % len(open({str(traces)!r}).read()))\n"
              "except OSError as exc:\n    seen.append(type(exc).__name__)\n"
              f"for folder in {[str(package / 'tasks'), str(data_dir())]!r}:\n"
              "    try:\n        seen.append('LISTED %d' % len(os.listdir(folder)))\n"
              "    except OSError as exc:\n        seen.append(type(exc).__name__)\n"
              "raise RuntimeError('found: ' + ','.join(seen))\n")
    result = evaluate(source)
    seen = reported(result)
    assert "IMPORTED" not in seen, seen  # only the staged harness modules import, in either mode
    skip_unless_enforced(host, result, FILES_NOTE)
    assert "READ" not in seen and "LISTED" not in seen, seen
