"""Hostile candidates against the EPLB (LB) and sparse-attention (SAK) evaluators.

Each candidate below tries to earn a better score than its honest work deserves — by
reading the window it is scored on, remembering answers, faking or dodging the clock,
deferring work past the timed call, giving up on the hardest input, or handing the grader
malformed arrays — and must end with the honest score, the worst score, or ``invalid`` /
``failed``. Speed assertions are upper bounds only (robust on a loaded machine).
"""

from __future__ import annotations

import ast
import io
import math
from pathlib import Path
from statistics import fmean

import numpy as np
import pytest

from contextevolve.evaluation.arrays import ArraySpec, npy_bytes, parse_npy
from contextevolve.evaluation.results import CallResult, CandidateRun
from contextevolve.llm import embedded
from contextevolve.tasks.datacache import data_dir
from contextevolve.tasks.registry import get_task

LB, SAK = get_task("eplb"), get_task("sparse_attention")
LB_SOTA = LB.baselines()["human_sota"]  # fast (vectorised) honest algorithm: speed 1 on its own
needs_capture = pytest.mark.skipif(not embedded.installed(),
                                   reason="SAK data is captured from the embedded LLM")
TIMEOUT = 90


def lb_wrapped(body: str, preamble: str = "") -> str:
    """The vectorised EPLB policy renamed ``_honest``, called by a hostile ``rebalance_experts``.

    The hostile function's body is ``body`` (indented by 4; ``args`` holds the other arguments).
    """
    honest = LB_SOTA.replace("def rebalance_experts(", "def _honest(")
    return (honest + "\n" + preamble + "\n\ndef rebalance_experts(weight, *args):\n"
            + "".join("    " + line + "\n" for line in body.strip("\n").splitlines()))


@pytest.fixture(scope="module")
def lb_honest():
    result = LB.evaluate(LB_SOTA, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    return result


def ok_run(calls: list[CallResult]) -> CandidateRun:
    return CandidateRun("ok", "", 1.0, "", "", calls=calls)


# --------------------------------------------------------------------------- the jobs hold nothing scored

def test_lb_job_sends_each_window_alone_after_a_synthetic_warmup():
    from contextevolve.tasks.eplb.traces import load_windows

    windows = load_windows()
    job = LB.job()
    assert job.entry == "rebalance_experts" and job.modules == []
    assert len(job.calls) == 1 + len(windows) - 1
    loads = [np.load(io.BytesIO(call.blobs["weight.npy"])) for call in job.calls]
    assert all(set(call.blobs) == {"weight.npy"} for call in job.calls)
    assert not any(np.array_equal(loads[0], w) for w in windows)  # the warm-up is none of the windows
    for i, load in enumerate(loads[1:]):
        assert np.array_equal(load, windows[i])  # call of window i holds window i only ...
    assert not any(np.array_equal(load, windows[-1]) for load in loads)  # ... never the last, scored-only one


@needs_capture
def test_sak_job_sends_each_layer_alone_without_the_dense_output():
    from contextevolve.tasks.sparse_attention.capture import attention_inputs

    data = attention_inputs()
    job = SAK.job()
    assert job.entry == "select_keys" and job.modules == []
    assert len(job.calls) == data["queries"].shape[0]
    for layer, call in enumerate(job.calls):
        assert set(call.blobs) == {"queries.npy", "keys.npy", "values.npy", "query_positions.npy"}
        for name in ("queries", "keys", "values"):
            assert np.array_equal(np.load(io.BytesIO(call.blobs[f"{name}.npy"])), data[name][layer])


@pytest.mark.parametrize("task", ["eplb", "sparse_attention"])
def test_harness_imports_nothing_of_the_package(task):
    """The sandbox stages only the harness (and ``EvalJob.modules``): it imports no grader or data module."""
    source = Path(__file__).resolve().parents[2] / "contextevolve" / "tasks" / task / "harness.py"
    tree = ast.parse(source.read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "io", "numpy", "torch"}, imported
    assert "perf_counter" not in source.read_text() and "time_limit" not in source.read_text()


# --------------------------------------------------------------------------- LB: the scored future

def _hunt_roots() -> list[str]:
    """Where a hunting candidate looks for files.

    Its directories and, where the sandbox hides it (a mount namespace), the data cache holding every
    window (without one it is readable: see the README).
    """
    from contextevolve.evaluation.sandbox import host_sandbox

    return [".", "/tmp"] + ([str(data_dir())] if host_sandbox().mount_namespace else [])


HUNT = f'''
import gc, io, os, select, sys
import numpy as _np
import torch as _torch
_SEEN = []


def _arrays_in(obj, depth=0):
    try:
        if isinstance(obj, (bytes, bytearray)) and obj[:6] == b"\\x93NUMPY":
            obj = _np.load(io.BytesIO(bytes(obj)), allow_pickle=False)
        if isinstance(obj, _torch.Tensor):
            obj = obj.detach().numpy()
        if isinstance(obj, _np.ndarray):
            if obj.ndim == 3 and obj.shape[1:] == (58, 256):
                return list(obj)
            return [obj] if obj.shape == (58, 256) else []
        if isinstance(obj, (dict, list, tuple)) and depth < 2:
            items = list(obj.values()) if isinstance(obj, dict) else list(obj)
            return [a for v in items for a in _arrays_in(v, depth + 1)]
    except Exception:
        pass
    return []


def _hunt():
    if select.select([0], [], [], 0)[0]:
        raise RuntimeError("a later request is waiting on stdin")
    found = []
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):
            found += _arrays_in(value)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, (dict, list, tuple)):
            found += _arrays_in(obj, 1)
    for root in {_hunt_roots()!r}:
        for dirpath, _, files in os.walk(root):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    if name.endswith(".npz"):
                        with _np.load(path, allow_pickle=False) as data:
                            found += [a for k in data.files for a in _arrays_in(data[k])]
                    elif name.endswith(".npy"):
                        found += _arrays_in(_np.load(path, allow_pickle=False))
                except Exception:
                    pass
    return found
'''


def test_lb_candidate_cannot_find_the_window_it_is_scored_on(lb_honest, monkeypatch):
    from contextevolve.tasks.eplb.task import balancedness
    from contextevolve.tasks.eplb.traces import load_windows

    # Rebalancing on the scored window instead would pay (checked here with the trusted data):
    namespace: dict = {}
    exec(LB_SOTA, namespace)  # noqa: S102 - our own baseline
    import torch

    windows = load_windows()
    maps = [namespace["rebalance_experts"](torch.from_numpy(windows[i + 1].copy()), 288, 8, 4, 32)
            for i in range(len(windows) - 1)]
    peeking = fmean(balancedness(windows[i + 1], m[0].numpy(), m[2].numpy()) for i, m in enumerate(maps))
    assert peeking > lb_honest.metrics["balancedness"] + 0.02
    # A candidate that hunts memory, files and stdin for a load it has not been given (an array of window
    # shape and a window's total, unlike e.g. a logcnt it returned) finds none.
    source = lb_wrapped('''
current = weight.numpy()
fresh = [a for a in _hunt() if abs(float(a.sum()) / float(current.sum()) - 1) < 0.2
         and not _np.array_equal(a, current) and not any(_np.array_equal(a, s) for s in _SEEN)]
_SEEN.append(current.copy())
if fresh:
    import torch
    weight = torch.from_numpy(_np.array(fresh[-1]))
return _honest(weight, *args)
''', preamble=HUNT)
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["balancedness"] == pytest.approx(lb_honest.metrics["balancedness"], rel=1e-12)
    # The hunt works: had a call carried the next window too (as the old protocol's inputs did), it pays.
    leaky = LB.job().model_copy(deep=True)
    for i, call in enumerate(leaky.calls[2:]):
        leaky.calls[i + 1].blobs["hint.npy"] = call.blobs["weight.npy"]
    monkeypatch.setattr(LB, "job", lambda: leaky)
    cheated = LB.evaluate(source, timeout_s=TIMEOUT)
    assert cheated.status == "ok", cheated.reason
    assert cheated.metrics["balancedness"] > lb_honest.metrics["balancedness"] + 0.01


# --------------------------------------------------------------------------- LB: the clock

def test_lb_memoising_earlier_calls_and_evaluations_buys_no_speed():
    # Remembers answers by input hash — in memory, in its directory and in /tmp (the next evaluation's
    # too): every call is a miss (0.1 s), because no two calls, warm-up included, share a load, and
    # nothing survives one evaluation.
    source = lb_wrapped('''
import hashlib, os, pickle, time
key = hashlib.sha256(weight.numpy().tobytes()).hexdigest()
if key in _CACHE:
    return _CACHE[key]
time.sleep(0.1)
_CACHE[key] = _honest(weight, *args)
for folder in (".", "/tmp"):
    try:
        with open(os.path.join(folder, "lb-cache.pkl"), "wb") as fh:
            pickle.dump(_CACHE, fh)
    except OSError:
        pass
return _CACHE[key]
''', preamble='''
import os, pickle
_CACHE = {}
for _folder in (".", "/tmp"):
    try:
        with open(os.path.join(_folder, "lb-cache.pkl"), "rb") as _fh:
            _CACHE.update(pickle.load(_fh))
    except OSError:
        pass
''')
    for _ in range(2):
        result = LB.evaluate(source, timeout_s=TIMEOUT)
        assert result.status == "ok", result.reason
        assert result.metrics["speed"] <= 0.02 / 0.1


def test_lb_rebound_clock_and_sleeping_are_measured():
    source = lb_wrapped('''
import time
time.perf_counter = time.monotonic = time.time = time.process_time = lambda: 0.0
_sleep(0.2)
return _honest(weight, *args)
''', preamble="from time import sleep as _sleep")
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["speed"] <= 0.02 / 0.2


@pytest.mark.parametrize("method", ["numpy", "detach"])
def test_lb_lazy_tensor_work_is_counted(method):
    """The returned tensors do their (slow) work only when the harness converts them, inside the call."""
    source = lb_wrapped('''
import torch
return tuple(t.as_subclass(Lazy) for t in _honest(weight, *args))
''', preamble=f'''
import time
import torch


class Lazy(torch.Tensor):
    def {method}(self, *a, **k):
        time.sleep(0.07)
        return getattr(torch.Tensor, "{method}")(self.as_subclass(torch.Tensor), *a, **k)
''')
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["speed"] <= 0.02 / 0.2  # three tensors, 0.07 s each


def test_lb_import_time_work_does_not_pay():
    # Heavy work at import (the old protocol left every window in the working directory then):
    # it precomputes maps for every load it can find, then answers instantly on a hit.
    source = lb_wrapped('''
import hashlib, time
key = hashlib.sha256(weight.numpy().tobytes()).hexdigest()
if key not in _READY:
    time.sleep(0.1)
    _READY[key] = _honest(weight, *args)
return _READY[key]
''', preamble=HUNT + '''
import hashlib, time
import torch
_READY = {}
for _load in _hunt():
    _READY[hashlib.sha256(_np.ascontiguousarray(_load).tobytes()).hexdigest()] = _honest(
        torch.from_numpy(_np.array(_load)), 288, 8, 4, 32)
time.sleep(1.0)
''')
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["speed"] <= 0.02 / 0.1


# --------------------------------------------------------------------------- LB: partial failure

def test_lb_giving_up_on_a_window_scores_worse_than_the_initial_program():
    initial = LB.evaluate(LB.initial_program, timeout_s=TIMEOUT)
    source = LB.initial_program.replace(
        "    weight = weight.float()\n",
        "    global _CALLS\n    _CALLS = globals().get('_CALLS', 0) + 1\n"
        "    if _CALLS == 4:\n        raise RuntimeError('this window is too hard')\n"
        "    weight = weight.float()\n", 1)
    assert source != LB.initial_program
    partial = LB.evaluate(source, timeout_s=TIMEOUT)
    assert initial.status == partial.status == "ok"
    assert partial.combined_score < initial.combined_score
    assert partial.metrics["balancedness"] < initial.metrics["balancedness"]
    assert "too hard" in partial.diagnostics


def test_lb_a_timed_out_window_counts_zero_and_its_limit(monkeypatch, lb_honest):
    from contextevolve.tasks.eplb import task as lb_task

    monkeypatch.setattr(lb_task, "CASE_TIMEOUT_S", 1.0)
    source = lb_wrapped('''
import os
calls = int(open("calls").read()) + 1 if os.path.exists("calls") else 1  # survives the runner's restart
open("calls", "w").write(str(calls))
if calls == 2:  # the first scored window
    while True:
        pass
return _honest(weight, *args)
''')
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["balancedness"] < lb_honest.metrics["balancedness"] * 0.85
    assert "timeout" in result.diagnostics


def test_lb_every_call_failing_is_failed_with_the_first_error():
    result = LB.evaluate("def rebalance_experts(*args):\n    raise ValueError('nope')\n", timeout_s=TIMEOUT)
    assert result.status == "failed" and "nope" in result.reason
    assert result.combined_score == LB.worst_score


def sota_call(window: int, seconds: float) -> CallResult:
    """What the honest vectorised policy returns for ``window``: a successful call that took ``seconds``."""
    import torch

    from contextevolve.tasks.eplb.traces import load_windows

    namespace: dict = {}
    exec(LB_SOTA, namespace)  # noqa: S102 - our own baseline
    maps = namespace["rebalance_experts"](torch.from_numpy(load_windows()[window].copy()), 288, 8, 4, 32)
    return CallResult("ok", seconds, value={},
                      blobs={f"{name}.npy": npy_bytes(t.numpy())
                             for name, t in zip(("phy2log", "log2phy", "logcnt"), maps)})


def test_lb_warmup_is_neither_graded_nor_timed(lb_honest):
    # The first call (the warm-up) takes a second and returns junk: nothing of it counts.
    source = lb_wrapped('''
global _CALLS
_CALLS = globals().get("_CALLS", 0) + 1
if _CALLS == 1:
    import time
    time.sleep(1.0)
    return None
return _honest(weight, *args)
''')
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics["balancedness"] == pytest.approx(lb_honest.metrics["balancedness"], rel=1e-12)
    scored = [sota_call(i, 0.004) for i in range(5)]
    graded = [LB.grade_run(ok_run([warmup] + scored)).metrics for warmup in (
        CallResult("timeout", 20.0, error="slow"), CallResult("ok", 19.0, value="junk"), sota_call(0, 0.001))]
    assert graded[0] == graded[1] == graded[2] and graded[0]["speed"] == 1.0


# --------------------------------------------------------------------------- LB: malformed outputs

def _lb_blobs(**override) -> dict[str, bytes]:
    base = {"phy2log.npy": npy_bytes(np.zeros((58, 288), np.int64)),
            "log2phy.npy": npy_bytes(np.zeros((58, 256, 2), np.int64)),
            "logcnt.npy": npy_bytes(np.ones((58, 256), np.int64))}
    base.update(override)
    return {k: v for k, v in base.items() if v is not None}


def _huge_header(shape: tuple, dtype: str = "<i8") -> bytes:
    header = {"descr": dtype, "fortran_order": False, "shape": shape}
    buf = io.BytesIO()
    from numpy.lib import format as npy_format

    npy_format.write_array_header_1_0(buf, header)
    return buf.getvalue() + b"\0" * 64


def _fortran(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asfortranarray(arr), allow_pickle=False)
    return buf.getvalue()


def _pickled() -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.array([object()] * 3, dtype=object), allow_pickle=True)
    return buf.getvalue()


@pytest.mark.parametrize("value, blobs, fragment", [
    ({}, _lb_blobs(**{"phy2log.npy": b"\x93NUMPY junk that is not an array"}), "not a valid .npy"),
    ({}, _lb_blobs(**{"phy2log.npy": b"PK\x03\x04 a zip file"}), "not a valid .npy"),
    ({}, _lb_blobs(**{"phy2log.npy": npy_bytes(np.zeros((58, 288), np.float32))}), "integer array"),
    ({}, _lb_blobs(**{"logcnt.npy": npy_bytes(np.ones((58, 256), np.longdouble))}), "integer array"),
    ({}, _lb_blobs(**{"logcnt.npy": npy_bytes(np.ones((58, 256), np.complex64))}), "integer array"),
    ({}, _lb_blobs(**{"phy2log.npy": _pickled()}), "plain integer"),
    ({}, _lb_blobs(**{"phy2log.npy": _huge_header((2**40, 2**40))}), "has shape"),
    ({}, _lb_blobs(**{"log2phy.npy": _huge_header((58, 256, 10**12))}), "has shape"),
    ({}, _lb_blobs(**{"phy2log.npy": _huge_header((58, 288))}), "declares 133632 bytes"),
    ({}, _lb_blobs(**{"phy2log.npy": _fortran(np.zeros((58, 288), np.int64))}), "C order"),
    ({}, _lb_blobs(**{"logcnt.npy": None}), "expected output arrays"),
    ({}, _lb_blobs(**{"extra.npy": npy_bytes(np.zeros(3))}), "expected output arrays"),
    ({"bad": "returned NoneType"}, {}, "returned NoneType"),
    ({"seconds": [0.0]}, _lb_blobs(), "malformed harness output"),
    ({"bad": "x", "speed": 1}, {}, "malformed harness output"),
    ([1, 2], _lb_blobs(), "malformed harness output"),
    ("ok", _lb_blobs(), "malformed harness output"),
    (None, _lb_blobs(), "malformed harness output"),
    ({}, _lb_blobs(**{"phy2log.npy": npy_bytes(np.full((58, 288), 2**62, np.int64))}), "not logical experts"),
    ({}, _lb_blobs(**{"phy2log.npy": npy_bytes(np.full((58, 288), 2**64 - 1, np.uint64))}),
     "not logical experts"),
])
def test_lb_grader_rejects_malformed_outputs(value, blobs, fragment):
    warmup = CallResult("ok", 0.5, value=[], blobs={"junk": b"whatever"})  # the warm-up is never parsed
    calls = [warmup] + [CallResult("ok", 0.01, value=value, blobs=blobs)] * 5
    result = LB.grade_run(ok_run(calls))
    assert result.status == "invalid", (result.status, result.reason)
    assert fragment in result.reason
    assert result.combined_score == LB.worst_score
    assert result.metrics == {m.name: m.worst for m in LB.metrics}


def test_lb_grader_counts_failed_windows_at_their_worst():
    from contextevolve.tasks.eplb.task import CASE_TIMEOUT_S

    def failed(status):
        return CallResult(status, 0.0, error="boom")

    result = LB.grade_run(ok_run([failed("error")] + [failed(s) for s in ("error", "timeout", "crashed",
                                                                           "skipped", "error")]))
    assert result.status == "failed" and "boom" in result.reason and result.combined_score == 0.0
    assert result.metrics == {"balancedness": 0.0, "speed": 0.0}
    # One window answered (instantly) and four failed: balancedness counts 0 for each failed pair, and the
    # mean time is dominated by the call limit.
    scored = [sota_call(i, 0.001) for i in range(5)]
    alone = LB.grade_run(ok_run([failed("error")] + scored))
    result = LB.grade_run(ok_run([failed("error"), scored[0]] + [failed("timeout")] * 4))
    assert result.status == "ok" and alone.status == "ok"
    assert result.metrics["speed"] == pytest.approx(0.02 / ((0.001 + 4 * CASE_TIMEOUT_S) / 5))
    first_pair = float(alone.diagnostics.split(": ")[1].split(",")[0])
    assert result.metrics["balancedness"] == pytest.approx(first_pair / 5, abs=1e-3)


def test_lb_replaced_harness_returning_junk_is_invalid():
    """The candidate can replace the harness function itself: whatever it sends is still parsed strictly."""
    source = '''
import io
import numpy as np
import contextevolve.tasks.eplb.harness as harness


def rebalance_experts(*args):
    raise AssertionError("never called")


def _evil(candidate, args, blobs):
    buf = io.BytesIO()
    np.save(buf, np.full((58, 256), np.nan, dtype=np.longdouble))
    junk = buf.getvalue()
    return {"unexpected": True}, {"phy2log.npy": junk, "log2phy.npy": junk, "logcnt.npy": junk}


harness.rebalance = _evil
'''
    result = LB.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "invalid" and "malformed harness output" in result.reason
    assert result.combined_score == LB.worst_score


# --------------------------------------------------------------------------- the .npy parser

def test_parse_npy_refuses_a_terabyte_header_without_allocating():
    import tracemalloc

    data = _huge_header((10**6, 10**6))  # 8 TB declared, 64 bytes present
    spec = ArraySpec("x", "i", ((0, 10**7), (0, 10**7)))
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="declares 8000000000000 bytes"):
            parse_npy(data, spec)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20  # numpy reports its buffers to tracemalloc: nothing big was allocated


@pytest.mark.parametrize("data, fragment", [
    (b"", "not a valid .npy"),
    (b"\x93NUMPY\x03\x00" + b"\0" * 20, "not a valid .npy"),
    (b"\x93NUMPY\x01\x00\xff\xff" + b"{" * 100, "not a valid .npy"),
    ("a string", "not .npy bytes"),
    (None, "not .npy bytes"),
    (npy_bytes(np.zeros((2, 3), np.float16)), "shape"),
    (npy_bytes(np.zeros((2, 2), np.longdouble)), "no long double"),
    (npy_bytes(np.zeros((2, 2), np.float64))[:-3], "declares 32 bytes"),
    (npy_bytes(np.zeros((2, 2), np.float64)) + b"xx", "declares 32 bytes"),
])
def test_parse_npy_refuses_junk(data, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_npy(data, ArraySpec("w", "f", (2, 2)))


def test_parse_npy_returns_native_writable_copies():
    big_endian = np.arange(4, dtype=">f4").reshape(2, 2)
    out = parse_npy(npy_bytes(big_endian), ArraySpec("w", "f", (2, (1, 2))))
    assert out.dtype == np.float32 and out.dtype.isnative and out.flags.writeable and out.flags.c_contiguous
    assert np.array_equal(out, big_endian)
    raw = bytearray(npy_bytes(np.zeros((2, 2), bool)))
    raw[-1] = 7  # a "bool" byte that is neither 0 nor 1
    assert parse_npy(bytes(raw), ArraySpec("m", "b", (2, 2))).view(np.uint8).tolist() == [[0, 0], [0, 1]]


# --------------------------------------------------------------------------- SAK: synthetic grader

def _sak_data(layers: int = 2) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    return {"queries": rng.normal(size=(layers, 2, 3, 4)).astype(np.float32),
            "keys": rng.normal(size=(layers, 1, 6, 4)).astype(np.float32),
            "values": rng.normal(size=(layers, 1, 6, 4)).astype(np.float32),
            "query_positions": np.array([3, 4, 5])}


CAUSAL = np.broadcast_to(np.arange(6)[None, :] <= np.array([3, 4, 5])[:, None], (2, 3, 6)).copy()


def _sak_call(mask=CAUSAL, weights=None, value=None, **extra) -> CallResult:
    blobs = {"mask.npy": mask if isinstance(mask, bytes) else npy_bytes(mask)}
    if weights is not None:
        blobs["weights.npy"] = weights if isinstance(weights, bytes) else npy_bytes(weights)
    blobs.update(extra)
    return CallResult("ok", 0.1, value={} if value is None else value, blobs=blobs)


def test_sak_grader_counts_a_failed_layer_at_its_worst():
    data = _sak_data()
    dense = SAK.grade([_sak_call(), _sak_call()], data)
    assert dense.status == "ok" and dense.metrics["density"] == 1.0 and dense.metrics["error"] < 1e-9
    sparse = CAUSAL.copy()
    sparse[:, :, 1:3] = False
    honest = SAK.grade([_sak_call(sparse), _sak_call(sparse)], data)
    gave_up = SAK.grade([_sak_call(sparse), CallResult("timeout", 20.0, error="too slow")], data)
    assert gave_up.status == "ok"
    assert gave_up.metrics["density"] == pytest.approx((honest.metrics["density"] + 1) / 2)
    assert gave_up.metrics["error"] > honest.metrics["error"]
    assert SAK.better(honest.combined_score, gave_up.combined_score)
    failed = SAK.grade([CallResult("error", 0.1, error="first"), CallResult("crashed", 0.1, error="second")],
                       data)
    assert failed.status == "failed" and "first" in failed.reason and failed.combined_score == SAK.worst_score


def test_sak_huge_finite_weights_give_a_finite_score():
    data = _sak_data()
    weights = np.full((2, 3, 6), np.finfo(np.float64).max)
    result = SAK.grade([_sak_call(CAUSAL, weights), _sak_call(CAUSAL, np.full((2, 3, 6), 3e38, np.float32))],
                       data)
    assert result.status == "ok" and math.isfinite(result.combined_score)
    assert result.metrics["error"] < 1e-9  # uniform weights do not change the attention output


@pytest.mark.parametrize("call, fragment", [
    (_sak_call(weights=np.full((2, 3, 6), np.nan)), "finite"),
    (_sak_call(weights=np.full((2, 3, 6), np.inf, np.float32)), "finite"),
    (_sak_call(weights=-np.ones((2, 3, 6))), "non-negative"),
    (_sak_call(weights=np.ones((2, 3, 6), np.longdouble)), "no long double"),
    (_sak_call(weights=np.ones((2, 3, 6), np.int64)), "float array"),
    (_sak_call(weights=np.ones((2, 3, 6), np.complex128)), "float array"),
    (_sak_call(mask=CAUSAL.astype(np.uint8)), "bool array"),
    (_sak_call(mask=np.ones((2, 3, 6), bool)), "future keys"),
    (_sak_call(mask=CAUSAL[:, :, :3].copy()), "has shape"),
    (_sak_call(mask=_huge_header((2, 3, 2**50), "|b1")), "has shape"),
    (_sak_call(mask=_huge_header((2, 3, 6), "|b1")), "declares 36 bytes"),
    (_sak_call(mask=b"\x93NUMPY\x01\x00garbage"), "not a valid .npy"),
    (_sak_call(mask=_pickled()), "plain bool"),
    (_sak_call(value={"weights": [True]}), "malformed harness output"),
    (_sak_call(value=[]), "malformed harness output"),
    (_sak_call(value={"bad": "mask is list, expected a numpy array"}), "expected a numpy array"),
    (_sak_call(**{"dense.npy": npy_bytes(np.zeros(2))}), "expected output arrays"),
    (CallResult("ok", 0.1, value={}, blobs={"weights.npy": npy_bytes(np.ones((2, 3, 6)))}),
     "expected output arrays"),
])
def test_sak_grader_rejects_malformed_outputs(call, fragment):
    result = SAK.grade([_sak_call(), call], _sak_data())
    assert result.status == "invalid", (result.status, result.reason)
    assert fragment in result.reason and result.reason.startswith("layer 1")
    assert result.combined_score == SAK.worst_score == 1.0
    assert result.metrics == {"density": 1.0, "error": 1.0}


# --------------------------------------------------------------------------- SAK: end to end

@pytest.fixture(scope="module")
def sak_initial():
    result = SAK.evaluate(SAK.initial_program, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    return result


@needs_capture
def test_sak_giving_up_on_a_layer_scores_worse_than_the_initial_program(sak_initial):
    source = SAK.initial_program.replace(
        "    sink, window, top_fraction",
        "    global _CALLS\n    _CALLS = globals().get('_CALLS', 0) + 1\n"
        "    if _CALLS == 2:\n        raise RuntimeError('this layer is too hard')\n"
        "    sink, window, top_fraction", 1)
    assert source != SAK.initial_program
    partial = SAK.evaluate(source, timeout_s=TIMEOUT)
    assert partial.status == "ok", partial.reason
    assert SAK.better(sak_initial.combined_score, partial.combined_score)
    assert partial.metrics["density"] > sak_initial.metrics["density"]
    assert "too hard" in partial.diagnostics


@needs_capture
def test_sak_candidate_sees_one_layer_per_call(sak_initial):
    # Raises (failing its layer) if it finds, anywhere in its process, queries other than the ones it was
    # given.
    source = SAK.initial_program.replace("def select_keys(queries, keys, values, query_positions):\n", '''
def _queries_in(obj, shape, depth=0):
    import io
    try:
        if isinstance(obj, (bytes, bytearray)) and obj[:6] == b"\\x93NUMPY":
            obj = np.load(io.BytesIO(bytes(obj)), allow_pickle=False)
        if isinstance(obj, np.ndarray):
            return [obj] if obj.shape == shape or obj.shape[1:] == shape else []
        if isinstance(obj, (dict, list, tuple)) and depth < 2:
            items = list(obj.values()) if isinstance(obj, dict) else list(obj)
            return [a for v in items for a in _queries_in(v, shape, depth + 1)]
    except Exception:
        pass
    return []


def select_keys(queries, keys, values, query_positions):
    import gc, sys
    found = []
    frame = sys._getframe().f_back
    while frame is not None:
        found += _queries_in(list(frame.f_locals.values()), queries.shape)
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, (dict, list, tuple)):
            found += _queries_in(obj, queries.shape, 1)
    for arr in found:
        if arr.shape == queries.shape and not np.array_equal(arr, queries) or arr.shape != queries.shape:
            raise RuntimeError(f"found queries of another layer: {arr.shape}")
    return _select(queries, keys, values, query_positions)


def _select(queries, keys, values, query_positions):
''', 1)
    result = SAK.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "ok", result.reason
    assert result.metrics == sak_initial.metrics, result.diagnostics


@needs_capture
def test_sak_replaced_harness_with_nan_and_float128_weights_is_invalid():
    source = '''
import io
import numpy as np
import contextevolve.tasks.sparse_attention.harness as harness


def select_keys(*args):
    raise AssertionError("never called")


def _evil(candidate, args, blobs):
    q = np.load(io.BytesIO(blobs["queries.npy"]))
    t = np.load(io.BytesIO(blobs["keys.npy"])).shape[1]
    pos = np.load(io.BytesIO(blobs["query_positions.npy"]))
    mask = np.broadcast_to(np.arange(t)[None, :] <= pos[:, None], (q.shape[0], q.shape[1], t)).copy()
    out = {}
    for name, arr in (("mask", mask), ("weights", np.full(mask.shape, np.longdouble("1e4000")))):
        buf = io.BytesIO()
        np.save(buf, arr)
        out[name + ".npy"] = buf.getvalue()
    return {}, out


harness.select = _evil
'''
    result = SAK.evaluate(source, timeout_s=TIMEOUT)
    assert result.status == "invalid" and "no long double" in result.reason
    assert result.combined_score == 1.0
