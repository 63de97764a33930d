"""What a SIGKILLed evaluation leaves behind is removed by the next process that evaluates.

A run killed with SIGKILL mid-evaluation cannot clean up: its candidate processes (their own
session), its ``ce-eval-*`` directory and its control groups stay. These tests kill a real
evaluating process and check that :func:`contextevolve.evaluation.cleanup.remove_orphans`
removes all three, and nothing that belongs to a live process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from contextevolve.evaluation import cgroups, cleanup
from contextevolve.leftovers import orphaned, owner_alive, owner_tag

HANGS = ("import time\n"
         "def compute_model_placement(gpu_num, models):\n"
         "    time.sleep(120)\n")
EVALUATE = ("import sys\nfrom contextevolve.tasks.registry import get_task\n"
            "get_task('model_placement').evaluate(open(sys.argv[1]).read())\n")


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setattr(cleanup, "_swept", type(cleanup._swept)())  # as in a fresh process
    return tmp


def tagged_processes(owner: str) -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()
            and (cleanup._environ_token(p) or "").startswith(owner + "-")]


def test_owner_tags_tell_live_owners_from_dead_and_recycled_ones():
    assert owner_alive(owner_tag())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    tag = owner_tag(child.pid)
    child.wait()
    assert not owner_alive(tag)
    pid, start, namespace = owner_tag().split(".")
    assert not owner_alive(f"{pid}.{int(start) + 1}.{namespace}")  # same pid, another process: gone
    # another pid namespace: not ours to judge
    assert owner_alive(f"{tag.rsplit('.', 1)[0]}.{int(namespace) + 1}")
    assert owner_alive("not-a-tag") and owner_alive("12.34")  # names we did not write are never judged
    names = [Path(f"ce-eval-{tag}-a"), Path(f"ce-eval-{owner_tag()}-b"), Path("ce-eval-old"), Path("other")]
    assert orphaned(names, "ce-eval-") == [names[0]]


def test_a_killed_evaluation_leaves_nothing_after_the_next_one_starts(private_tmp, tmp_path):
    candidate = tmp_path / "candidate.py"
    candidate.write_text(HANGS)
    env = dict(os.environ, TMPDIR=str(private_tmp), PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    killed = subprocess.Popen([sys.executable, "-c", EVALUATE, str(candidate)], env=env,
                              start_new_session=True)
    owner = owner_tag(killed.pid)
    deadline = time.monotonic() + 120
    while (not (tagged_processes(owner) and list(private_tmp.glob("ce-eval-*")))
           and time.monotonic() < deadline):
        time.sleep(0.2)
    assert tagged_processes(owner), "the candidate never started"
    time.sleep(1)  # let the candidate reach its call
    killed.send_signal(signal.SIGKILL)  # the host only: its candidate lives on in its own session
    killed.wait()
    groups = [p for base in cgroups.available().values() for p in base.glob(f"ce-{owner}-*")]
    assert list(private_tmp.glob(f"ce-eval-{owner}-*"))
    survivors = tagged_processes(owner)

    mine = private_tmp / f"ce-eval-{owner_tag()}-live"  # a live owner's directory
    mine.mkdir()
    counts = cleanup.remove_orphans()

    assert not list(private_tmp.glob(f"ce-eval-{owner}-*"))
    assert mine.exists()
    assert counts["directories"] == 1 and counts["cgroups"] == len(groups)
    # (processes of the tree may exit on their own, their parent killed, or be swept first by another
    # process's sweep on this machine: fewer to kill, never more; none may be left, below)
    assert counts["processes"] <= len(survivors)
    deadline = time.monotonic() + 10
    while tagged_processes(owner) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not tagged_processes(owner)
    assert not any(p.exists() for p in groups)
    assert cleanup.remove_orphans() == {"processes": 0, "directories": 0, "cgroups": 0}  # once per process
