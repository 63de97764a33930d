"""LLM layer: endpoint resolution, retries on transient errors, token accounting, embedded model assembly."""

from __future__ import annotations

import hashlib
import os
import sys
import types
from pathlib import Path

import httpx
import openai
import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage

from contextevolve.graph.context import RunContext
from contextevolve.graph.settings import DEFAULT_MAX_TOKENS
from contextevolve.llm import embedded
from contextevolve.llm.calls import EndpointUnavailable, call_role
from contextevolve.llm.models import LLMConfigError, create_chat_model, resolve_endpoint, use_chat_models
from contextevolve.roles import ROLES
from tests.fakes import reply, scripted


def test_endpoint_resolution_order(monkeypatch):
    monkeypatch.setenv("CONTEXTEVOLVE_BASE_URL", "http://env:1/v1")
    monkeypatch.setenv("CONTEXTEVOLVE_GENERATOR_MODEL", "coder-32b")
    monkeypatch.setenv("CONTEXTEVOLVE_MODEL", "small")
    ctx = RunContext(models={"sampler": "tiny"})
    assert resolve_endpoint("generator", ctx).model == "coder-32b"
    assert resolve_endpoint("sampler", ctx).model == "tiny"
    assert resolve_endpoint("navigator", ctx) == resolve_endpoint("summarizer", ctx)
    assert resolve_endpoint("navigator", ctx).model == "small"
    assert resolve_endpoint("navigator", RunContext(base_url="http://ctx:2/v1")).base_url == "http://ctx:2/v1"


def test_external_endpoint_needs_a_model():
    with pytest.raises(LLMConfigError, match="no model for role 'navigator'"):
        create_chat_model("navigator", RunContext(base_url="http://localhost:9/v1"))


def test_external_endpoint_builds_chat_openai():
    model = create_chat_model("generator", RunContext(base_url="http://localhost:9/v1", model="m",
                                                      api_key="k", temperatures={"generator": 0.3}))
    assert type(model).__name__ == "ChatOpenAI"
    assert model.model_name == "m" and model.temperature == 0.3 and model.max_tokens == 1400
    assert model.seed == 0
    assert create_chat_model("generator",
                             RunContext(base_url="http://localhost:9/v1", model="m", seed=7)).seed == 7


def test_sampling_settings_reach_the_request():
    plain = create_chat_model("generator", RunContext(base_url="http://localhost:9/v1", model="m"))
    assert plain.top_p is None and "top_k" not in plain.extra_body  # the endpoint's defaults
    tuned = create_chat_model("generator",
                              RunContext(base_url="http://localhost:9/v1", model="m", top_p=0.8, top_k=20))
    assert tuned.top_p == 0.8 and tuned._default_params["top_p"] == 0.8
    assert tuned.extra_body == {"max_tokens": 1400, "top_k": 20}
    official = create_chat_model("generator",
                                 RunContext(base_url="https://api.openai.com/v1", model="m", top_k=20))
    assert not official.extra_body  # OpenAI refuses top_k
    # one request's own cuts (a second ask after a code twin) replace the run's for that request only
    ctx = RunContext(base_url="http://localhost:9/v1", model="m", top_p=0.8, top_k=20)
    wide = create_chat_model("generator", ctx, top_p=0.95, top_k=0)
    assert wide.top_p == 0.95 and wide.extra_body["top_k"] == 0
    assert create_chat_model("generator", ctx).top_p == 0.8


def test_the_embedded_model_samples_with_its_recommended_settings(monkeypatch):
    from types import SimpleNamespace

    from contextevolve.llm import embedded

    monkeypatch.setattr(embedded, "shared_server", lambda key, slots=1: SimpleNamespace(base_url="http://127.0.0.1:9/v1"))
    model = create_chat_model("generator", RunContext())
    assert model.top_p == embedded.TOP_P == 0.8 and model.extra_body["top_k"] == embedded.TOP_K == 20
    chosen = create_chat_model("generator", RunContext(top_p=0.95, top_k=40))
    assert chosen.top_p == 0.95 and chosen.extra_body["top_k"] == 40


def test_each_agent_talks_to_its_own_embedded_server_with_one_worker(monkeypatch):
    from types import SimpleNamespace

    from contextevolve.llm import embedded
    from contextevolve.llm.models import embedded_server_keys

    ports = {"navigator": 2, "generator": 4, embedded.SHARED: 5}
    monkeypatch.setattr(embedded, "shared_server",
                        lambda key, slots=1: SimpleNamespace(base_url=f"http://127.0.0.1:{ports[key]}/v1"))
    per_role = RunContext()
    assert embedded_server_keys(per_role) == [embedded.SHARED, "navigator", "generator"]
    urls = {role: create_chat_model(role, per_role).openai_api_base for role in ROLES}
    assert urls == {"navigator": "http://127.0.0.1:2/v1", "generator": "http://127.0.0.1:4/v1",
                    "summarizer": "http://127.0.0.1:5/v1", "sampler": "http://127.0.0.1:5/v1"}
    # two workers would run two servers at once on the same cores; switched off, one server serves all
    for ctx in (RunContext(workers=2), RunContext(embedded_server_per_role=False)):
        assert embedded_server_keys(ctx) == [embedded.SHARED]
        assert create_chat_model("navigator", ctx).openai_api_base == "http://127.0.0.1:5/v1"
    # an agent switched off (an ablation) needs no server
    assert embedded_server_keys(RunContext(navigator_enabled=False)) == [embedded.SHARED, "generator"]
    # a role with its own endpoint needs no embedded server
    monkeypatch.setenv("CONTEXTEVOLVE_GENERATOR_BASE_URL", "http://example.invalid/v1")
    monkeypatch.setenv("CONTEXTEVOLVE_GENERATOR_MODEL", "m")
    assert embedded_server_keys(RunContext()) == [embedded.SHARED, "navigator"]
    monkeypatch.setenv("CONTEXTEVOLVE_BASE_URL", "http://example.invalid/v1")
    monkeypatch.setenv("CONTEXTEVOLVE_MODEL", "m")
    assert embedded_server_keys(RunContext()) == []


def test_unknown_role_rejected():
    with pytest.raises(LLMConfigError):
        with use_chat_models(critic=scripted(reply("x"))):
            pass


class Flaky(GenericFakeChatModel):
    """Fails with a connection error ``failures`` times, then answers."""

    failures: int = 1
    calls: int = 0

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.calls += 1
        if self.calls <= self.failures:
            raise openai.APIConnectionError(request=httpx.Request("POST", "http://x"))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def test_transient_errors_are_retried_and_usage_recorded():
    model = Flaky(messages=iter([reply("fine", 11, 3)]))
    with use_chat_models(navigator=model):
        out = call_role("navigator", [HumanMessage("hi")], RunContext(max_retries=2, retry_wait_s=0))
    assert model.calls == 2
    assert out.text == "fine" and out.usage == {"navigator": {"prompt": 11, "completion": 3}}


def test_retries_exhausted_raise():
    model = Flaky(messages=iter([reply("never")]), failures=5)
    with use_chat_models(navigator=model), pytest.raises(EndpointUnavailable) as caught:
        call_role("navigator", [HumanMessage("hi")], RunContext(max_retries=1, retry_wait_s=0))
    assert model.calls == 2
    assert isinstance(caught.value.__cause__, openai.APIConnectionError) and caught.value.attempts == 2


def test_truncation_flag_from_finish_reason():
    with use_chat_models(generator=scripted(reply("```python\nx = [", finish="length"))):
        assert call_role("generator", [HumanMessage("hi")], RunContext(max_retries=0)).truncated


def _fake_parts(monkeypatch, tmp_path, chunks):
    names = []
    for i, data in enumerate(chunks):
        path = tmp_path / f"part{i}.bin"
        path.write_bytes(data)
        module = types.ModuleType(f"fake_part_{i}")
        module.get_part_path = lambda p=path: str(p)
        monkeypatch.setitem(sys.modules, module.__name__, module)
        names.append(module.__name__)
    monkeypatch.setattr(embedded, "PART_MODULES", tuple(names))


def test_model_assembled_from_parts_and_verified(monkeypatch, tmp_path):
    chunks = [b"GGUF" * 1000, b"weights" * 500]
    _fake_parts(monkeypatch, tmp_path, chunks)
    whole = b"".join(chunks)
    monkeypatch.setattr(embedded, "MODEL_BYTES", len(whole))
    monkeypatch.setattr(embedded, "MODEL_SHA256", hashlib.sha256(whole).hexdigest())
    path = embedded.ensure_model(tmp_path / "models")
    assert path.read_bytes() == whole
    assert embedded.ensure_model(tmp_path / "models") == path  # verified sidecar: no re-assembly


def test_tampered_model_is_refused_and_removed(monkeypatch, tmp_path):
    _fake_parts(monkeypatch, tmp_path, [b"GGUF" * 1000, b"evil" * 500])
    monkeypatch.setattr(embedded, "MODEL_BYTES", 6000)
    monkeypatch.setattr(embedded, "MODEL_SHA256", "0" * 64)
    with pytest.raises(embedded.EmbeddedModelError, match="corrupt"):
        embedded.ensure_model(tmp_path / "models")
    assert not (tmp_path / "models" / embedded.MODEL_FILE).exists()
    assert not list((tmp_path / "models").glob(".assembling-*"))


def test_missing_part_package_names_the_fix(monkeypatch, tmp_path):
    monkeypatch.setattr(embedded, "PART_MODULES", ("no_such_chunk_package",))
    with pytest.raises(embedded.EmbeddedModelError, match=r"pip install"):
        embedded.ensure_model(tmp_path / "models")


def test_completion_cap_reaches_non_openai_servers():
    local = create_chat_model("navigator", RunContext(base_url="http://127.0.0.1:9/v1", model="m"))
    assert local.extra_body == {"max_tokens": DEFAULT_MAX_TOKENS["navigator"]} == {"max_tokens": 100}
    official = create_chat_model("navigator", RunContext(base_url="https://api.openai.com/v1", model="m"))
    assert official.extra_body is None and official.max_tokens == 100


def test_a_server_start_removes_the_logs_of_killed_servers_and_a_failed_start_keeps_none(
        monkeypatch, tmp_path):
    """A server start removes the logs of killed servers, and a failed start keeps none.

    A run killed with SIGKILL leaves its server's log in the temporary directory; the next start
    removes it (and only logs whose owner is gone). A server that exits at start leaves no log.
    """
    import subprocess
    import sys
    import tempfile

    from contextevolve.leftovers import owner_tag
    from contextevolve.llm.embedded import LOG_PREFIX, EmbeddedModelError, EmbeddedServer
    from tests.unit.conftest import REAL_LAUNCH

    monkeypatch.setattr(EmbeddedServer, "launch", REAL_LAUNCH)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_tag = owner_tag(dead.pid)
    dead.wait()
    killed = tmp_path / f"{LOG_PREFIX}{dead_tag}-x.log"
    live = tmp_path / f"{LOG_PREFIX}{owner_tag()}-y.log"
    killed.write_text("old")
    live.write_text("another run's")
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"not a model")
    with pytest.raises(EmbeddedModelError, match="exited with code"):
        EmbeddedServer(bogus, threads=1).start(timeout_s=120)
    assert not killed.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.glob(f"{LOG_PREFIX}*")) == [live.name]


def test_the_server_computes_only_the_last_tokens_logits_unless_told_otherwise(monkeypatch, tmp_path):
    """The embedded servers are started with ``--logits_all False`` unless told otherwise.

    llama-cpp-python's server computes and keeps every prompt token's logits unless told not to; no
    agent asks for logprobs, so the embedded servers are started with ``--logits_all False``.
    """
    import tempfile

    from contextevolve.llm.embedded import EmbeddedModelError, EmbeddedServer
    from tests.unit.conftest import REAL_LAUNCH

    commands = []

    class _Popen:
        def __init__(self, cmd, **_):
            commands.append(cmd)

        def poll(self):
            return None

    monkeypatch.setattr(EmbeddedServer, "launch", REAL_LAUNCH)
    monkeypatch.setattr(embedded.subprocess, "Popen", _Popen)
    real_find_spec = embedded.importlib.util.find_spec
    monkeypatch.setattr(embedded.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "llama_cpp" else real_find_spec(name, *a))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("CONTEXTEVOLVE_LOGITS_ALL", raising=False)
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")  # the server whose flag this is

    def logits_flag() -> str:
        server = EmbeddedServer(tmp_path / "model.gguf", threads=1)
        server.launch()
        server._log.close()
        cmd = commands[-1]
        return cmd[cmd.index("--logits_all") + 1]

    assert logits_flag() == "False"
    monkeypatch.setenv("CONTEXTEVOLVE_LOGITS_ALL", "1")
    assert logits_flag() == "True"
    monkeypatch.setenv("CONTEXTEVOLVE_LOGITS_ALL", "yes")
    with pytest.raises(EmbeddedModelError, match="CONTEXTEVOLVE_LOGITS_ALL must be 0 .* or 1 .*not 'yes'"):
        logits_flag()
    assert len(list(tmp_path.glob("*.log"))) == 2  # the refused start took no log file


def test_the_server_kind_picks_llama_cpps_own_server_with_a_slot_per_worker(monkeypatch, tmp_path):
    """llama.cpp's ``llama-server`` is the default where it is installed, with a slot per worker.

    It is the default where it is installed beside this Python (or named by
    ``CONTEXTEVOLVE_LLAMA_SERVER_BIN``): one slot per worker, the context of every slot, drafts from the
    prompt; without it (or with ``CONTEXTEVOLVE_LLAMA_SERVER=python``) it is llama-cpp-python's server,
    which queues.
    """
    from contextevolve.llm import server_flags
    from contextevolve.llm.embedded import EmbeddedModelError

    for name in ("CONTEXTEVOLVE_LLAMA_SERVER", "CONTEXTEVOLVE_LLAMA_SERVER_BIN",
                 "CONTEXTEVOLVE_PROMPT_CACHE_MB", "CONTEXTEVOLVE_SPECULATIVE"):
        monkeypatch.delenv(name, raising=False)
    venv = tmp_path / "venv"
    venv.mkdir()
    monkeypatch.setattr(sys, "executable", str(venv / "python"))  # no llama-server beside it yet
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert server_flags.server_kind() == "python"
    python = server_flags.server_command("m.gguf", "alias", 1234, threads=2, n_ctx=8192, slots=4)
    assert (python[1:3] == ["-m", "llama_cpp.server"] and "--parallel" not in python
            and "--spec-type" not in python)
    assert (python[python.index("--n_ctx") + 1] == "8192"
            and python[python.index("--interrupt_requests") + 1] == "False")

    beside = venv / "llama-server"
    beside.write_text("#!/bin/sh\n")
    beside.chmod(0o755)
    assert server_flags.server_kind() == "native"  # installed: the default
    native = server_flags.server_command("m.gguf", "alias", 1234, threads=2, n_ctx=8192, slots=4)
    assert native[0] == str(beside)
    flag = {native[i]: native[i + 1] for i in range(1, len(native) - 1) if native[i].startswith("--")}
    assert (flag["--parallel"], flag["--ctx-size"], flag["--threads"], flag["--port"]) == (
        "4", "32768", "2", "1234")
    # no RAM cache of older prompts by default
    assert flag["--cache-ram"] == "0" and flag["--alias"] == "alias"
    assert flag["--spec-type"] == "ngram-simple"
    monkeypatch.setenv("CONTEXTEVOLVE_SPECULATIVE", "none")
    assert "--spec-type" not in server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512,
                                                            slots=1)
    monkeypatch.setenv("CONTEXTEVOLVE_SPECULATIVE", "eagle")
    with pytest.raises(EmbeddedModelError,
                       match="CONTEXTEVOLVE_SPECULATIVE must be one of ngram-simple, none, not 'eagle'"):
        server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512, slots=1)
    monkeypatch.delenv("CONTEXTEVOLVE_SPECULATIVE")
    # asked for: even where llama-server is installed
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "python")
    assert server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512, slots=1)[1:3] == [
        "-m", "llama_cpp.server"]
    beside.unlink()

    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    monkeypatch.delenv("CONTEXTEVOLVE_LLAMA_SERVER")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER_BIN", str(binary))
    assert server_flags.server_kind() == "native"
    monkeypatch.setenv("CONTEXTEVOLVE_PROMPT_CACHE_MB", "150")
    native = server_flags.server_command("m.gguf", "alias", 1234, threads=2, n_ctx=8192, slots=1)
    assert native[0] == str(binary)
    assert native[native.index("--cache-ram") + 1] == "150" and native[native.index("--parallel") + 1] == "1"

    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER_BIN", str(tmp_path / "absent"))
    with pytest.raises(EmbeddedModelError,
                       match="CONTEXTEVOLVE_LLAMA_SERVER_BIN=.*absent.* is not an executable"):
        server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512, slots=1)
    monkeypatch.delenv("CONTEXTEVOLVE_LLAMA_SERVER_BIN")
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "native")
    with pytest.raises(EmbeddedModelError,
                       match="llama-server is not installed; build it with: make native-server"):
        server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512, slots=1)
    monkeypatch.setenv("CONTEXTEVOLVE_LLAMA_SERVER", "vllm")
    with pytest.raises(EmbeddedModelError,
                       match="CONTEXTEVOLVE_LLAMA_SERVER must be one of native, python, not 'vllm'"):
        server_flags.server_command("m.gguf", "alias", 1, threads=1, n_ctx=512, slots=1)


def test_a_runs_servers_get_a_slot_per_worker(monkeypatch, tmp_path):
    """The servers a run starts (and any an agent starts later) are given the run's workers as slots."""
    from contextevolve.llm import models

    started = []
    monkeypatch.setattr(embedded, "start_shared_servers",
                        lambda keys, slots=1: started.append((keys, slots)) or [
                            types.SimpleNamespace(base_url="http://127.0.0.1:1/v1") for _ in keys])
    for name in ("CONTEXTEVOLVE_BASE_URL", "OPENAI_BASE_URL", "CONTEXTEVOLVE_GENERATOR_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    models.create_chat_model("generator", RunContext(workers=3))
    models.create_chat_model("generator", RunContext())
    assert started == [(["shared"], 3), (["generator"], 1)]


def _gone(pid: int) -> bool:
    """True when ``pid`` has exited (absent, or a zombie waiting for its new parent to reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")
    except (OSError, IndexError):
        return True


def test_a_server_started_from_a_worker_thread_outlives_the_thread_and_dies_with_a_killed_process():
    """A server a worker thread starts outlives the thread and dies with a killed process.

    Linux ties PR_SET_PDEATHSIG to the forking *thread*: a server a LangGraph worker thread starts must
    neither die when that thread ends nor outlive a SIGKILLed run (``lifetime.popen_tied``).
    """
    import signal
    import subprocess
    import time

    server = None
    host = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading, time\n"
        "from contextevolve.llm.lifetime import popen_tied\n"
        "started = []\n"
        "worker = threading.Thread(target=lambda: started.append(popen_tied(\n"
        "    [sys.executable, '-c', 'import time; time.sleep(120)'], start_new_session=True)))\n"
        "worker.start(); worker.join()\n"
        "print(started[0].pid, flush=True)\n"
        "time.sleep(120)\n")], stdout=subprocess.PIPE, text=True)
    try:
        server = int(host.stdout.readline())
        time.sleep(1.0)
        assert not _gone(server), "the server died with the thread that asked for it"
        host.send_signal(signal.SIGKILL)
        host.wait()
        deadline = time.monotonic() + 10
        while not _gone(server) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(server), "the server outlived its SIGKILLed process"
    finally:
        host.kill()
        if server is not None and not _gone(server):
            os.kill(server, signal.SIGKILL)


def test_a_server_forked_after_its_parent_died_exits_before_it_runs():
    """A server forked after its parent died exits before it runs, instead of running on, orphaned.

    The death signal is armed in the child after the fork: a parent that died in between would never
    send it, so the child checks and exits (``lifetime.die_with_parent``).
    """
    import subprocess
    from functools import partial

    from contextevolve.llm.lifetime import die_with_parent

    orphan = subprocess.Popen(["sleep", "30"], preexec_fn=partial(die_with_parent, os.getpid() + 10**6))
    assert orphan.wait(timeout=10) == 1  # `sleep 30` never ran
    tied = subprocess.Popen(["true"], preexec_fn=partial(die_with_parent, os.getpid()))
    assert tied.wait(timeout=10) == 0


def test_an_interrupt_after_a_server_was_forked_kills_it(monkeypatch):
    """An interrupt that comes after the forking thread forked a server kills that server.

    Ctrl-C while ``popen_tied`` waits for the forking thread, which forked the server all the same:
    nobody would ever stop that server, so it is killed.
    """
    import subprocess
    from concurrent.futures import Future

    from contextevolve.llm import lifetime

    forked: list[subprocess.Popen] = []

    class Interrupted(Future):
        interrupted = False

        def result(self, timeout=None):
            value = super().result(10)  # the server is up when Ctrl-C comes
            if not self.interrupted:
                self.interrupted = True
                raise KeyboardInterrupt
            forked.append(value)
            return value

    monkeypatch.setattr(lifetime, "Future", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        lifetime.popen_tied(["sleep", "30"])
    assert len(forked) == 1 and forked[0].wait(timeout=10) == -9  # SIGKILLed


def test_an_interrupt_before_a_server_was_forked_cancels_it(monkeypatch):
    """Ctrl-C while the request still waits in the forking thread's queue cancels it.

    The thread skips the cancelled request when it comes to it.
    """
    import queue
    import subprocess
    from concurrent.futures import Future

    from contextevolve.llm import lifetime

    assert lifetime.popen_tied(["true"]).wait(timeout=10) == 0  # the forking thread waits on the queue
    real_jobs, held = lifetime._jobs, queue.SimpleQueue()

    class Interrupted(Future):
        def result(self, timeout=None):
            raise KeyboardInterrupt

    monkeypatch.setattr(lifetime, "Future", Interrupted)
    monkeypatch.setattr(lifetime, "_jobs", held)  # the thread does not see this one: the job stays queued
    with pytest.raises(KeyboardInterrupt):
        lifetime.popen_tied(["sleep", "30"])
    monkeypatch.undo()
    done, cmd, _ = job = held.get_nowait()
    assert cmd == ["sleep", "30"] and done.cancelled()
    forked: list[list[str]] = []
    real_popen = subprocess.Popen
    monkeypatch.setattr(lifetime.subprocess, "Popen",
                        lambda cmd, **kw: forked.append(cmd) or real_popen(cmd, **kw))
    real_jobs.put(job)  # the thread now comes to it, and then to a request made after it
    assert lifetime.popen_tied(["true"]).wait(timeout=10) == 0
    assert forked == [["true"]]


def test_a_forked_child_gets_its_own_forking_thread_and_queue(monkeypatch):
    """A forked child gets its own forking thread and queue, and can still start servers of its own.

    ``os.fork()`` (a multiprocessing worker, say) copies the module's forking thread as a dead object,
    its lock in whatever state another thread held it, and the parent's queued requests: the child
    starts from none of them (``lifetime._reset_after_fork``).
    """
    import os
    import queue
    import signal
    import time

    from contextevolve.llm import lifetime

    assert lifetime.popen_tied(["true"]).wait(timeout=10) == 0  # the parent's forking thread is running
    parents = queue.SimpleQueue()
    parents.put("a request of the parent's")
    monkeypatch.setattr(lifetime, "_jobs", parents)
    pid = os.fork()
    if pid == 0:  # the child: report by exit status only, never return into pytest
        ok = False
        try:
            fresh = lifetime._thread is None and lifetime._jobs is not parents and lifetime._jobs.empty()
            ok = fresh and lifetime.popen_tied(["true"]).wait(timeout=10) == 0
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0
    assert parents.get_nowait() == "a request of the parent's"  # the parent's queue is untouched
