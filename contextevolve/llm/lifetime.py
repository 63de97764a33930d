"""An embedded server dies with the process that started it, even when that process is SIGKILLed.

Linux's ``prctl(PR_SET_PDEATHSIG)`` sends its signal to a child when the *thread* that forked it exits,
not when the parent process does. A server forked from a short-lived thread (a LangGraph worker that
created an agent's chat model lazily inside a node) would be killed as soon as that thread finished;
forked without the signal, it would outlive a SIGKILLed run, holding its memory and a port. So every server
is forked from one daemon thread that ends only with the process (:func:`popen_tied`).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
from concurrent.futures import Future
from functools import partial


def die_with_parent(parent_pid: int) -> None:
    """In the forked child, before exec: ask Linux to SIGKILL it when the forking thread ends.

    Exits at once if ``parent_pid`` (the forking process) already died between the fork and this call.

    Not SIGTERM: uvicorn would then wait for the in-flight generation to finish first.
    """
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass
    if os.getppid() != parent_pid:  # orphaned before the signal was armed: it would never come
        os._exit(1)


_jobs: queue.SimpleQueue = queue.SimpleQueue()
_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def _reset_after_fork() -> None:
    """Start this module's state afresh in a child made by ``os.fork()``.

    The forking thread does not exist there, the lock may have been held by another thread at the fork,
    and jobs queued by the parent are the parent's.
    """
    global _jobs, _thread, _thread_lock
    _jobs, _thread, _thread_lock = queue.SimpleQueue(), None, threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)


def _fork_forever() -> None:
    while True:
        done, cmd, kwargs = _jobs.get()
        if not done.set_running_or_notify_cancel():
            continue
        try:
            done.set_result(subprocess.Popen(cmd, preexec_fn=partial(die_with_parent, os.getpid()), **kwargs))
        except BaseException as exc:  # handed to the caller, who raises it
            done.set_exception(exc)


def popen_tied(cmd: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(cmd, **kwargs)`` forked from this process's forking thread, with PDEATHSIG set.

    The child is SIGKILLed when this process ends, however it ends, and not before, whichever thread
    calls. ``kwargs`` must not include ``preexec_fn``.

    Raises:
        OSError (or whatever ``Popen`` raises): the child could not be started.
    """
    global _thread
    with _thread_lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_fork_forever, name="contextevolve-server-forker", daemon=True)
            _thread.start()
    done: Future = Future()
    _jobs.put((done, cmd, kwargs))
    try:
        return done.result()
    except BaseException:  # interrupted while waiting (Ctrl-C): a child started anyway must not live on
        if not done.cancel():
            done.add_done_callback(_kill_if_started)
        raise


def _kill_if_started(done: Future) -> None:
    if not done.cancelled() and done.exception() is None:
        done.result().kill()
