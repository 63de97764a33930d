"""Endpoint faults, end to end against a fake OpenAI-compatible server on 127.0.0.1.

Real runs (``contextevolve.cli.main`` / ``evolve``) of model_placement talk to a stdlib HTTP
server in a thread serving ``POST /v1/chat/completions``. Roles are told apart by model name:
``--model ctx --role-model generator=gen``. Retries are few and fast (``--retry-wait 0.01``).

* down (nothing listening, or always 500) → the run stops: exit 3, one line naming the base
  URL and the ``--resume`` command, no traceback; ``--resume`` continues it once it is back;
* intermittent 500 → retried, the run completes;
* malformed bodies / empty or truncated completions → retried, then a failed generation
  (or the context agents' fallback) and the run goes on to its iteration budget.

The last test drives the context agents' fallbacks with scripted fake chat models instead.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from contextevolve.api import evolve, run_status
from contextevolve.cli import EXIT_ENDPOINT_UNAVAILABLE, main
from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import EndpointUnavailable, MalformedReply, call_role
from contextevolve.memory.records import ProgramRecord, program_id
from contextevolve.nodes.navigate import navigate
from contextevolve.nodes.sample import sample
from contextevolve.nodes.summarize import abstract_for
from contextevolve.tasks.registry import get_task
from tests.conftest import run_node
from tests.fakes import BETTER_PROGRAM, INITIAL, reply

RETRIES = 2
ATTEMPTS = RETRIES + 1
TRUNCATED = "```python\ndef compute_model_placement(gpu_num, models):\n    placement = {"
API_KEY = "sk-test-DO-NOT-LEAK-4711"

Response = tuple[int, str, bytes]
"""(HTTP status, content type, body)."""


def completion(content: str | None, finish: str = "stop") -> Response:
    """A well-formed chat completion carrying ``content``."""
    body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}
    return 200, "application/json", json.dumps(body).encode()


def healthy(request: dict) -> Response:
    """Sensible replies per role: the generator writes ``BETTER_PROGRAM`` (evaluated for real)."""
    if request["model"] == "gen":
        return completion(f"```python\n{BETTER_PROGRAM}```")
    if request.get("response_format"):  # the sampler asks for JSON
        return completion('{"exemplars": [1]}')
    return completion("Greedy placement by KVPR; try balancing projected pressure.")


def no_code(request: dict) -> Response:
    """Like :func:`healthy`, but the generator writes no program (a failed child that needs no evaluation)."""
    return completion("I cannot help with that.") if request["model"] == "gen" else healthy(request)


SERVER_ERROR: Response = (500, "application/json", b'{"error": {"message": "upstream exploded"}}')


class FakeEndpoint:
    """OpenAI-compatible chat endpoint answering each request with ``behave(request_json)``.

    ``log`` records ``(model, status)`` per request, ``seeds`` ``(model, seed)``; ``auth`` the
    Authorization headers seen.
    """

    def __init__(self, behave: Callable[[dict], Response]) -> None:
        self.behave = behave
        self.log: list[tuple[str, int]] = []
        self.auth: set[str] = set()
        self.seeds: list[tuple[str, int | None]] = []
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.path != "/v1/chat/completions":
                    status, ctype, body = 404, "application/json", b'{"error": {"message": "no such route"}}'
                else:
                    status, ctype, body = endpoint.behave(request)
                endpoint.log.append((request.get("model", ""), status))
                endpoint.auth.add(self.headers.get("Authorization", ""))
                endpoint.seeds.append((request.get("model", ""), request.get("seed")))
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def requests(self, model: str | None = None, status: int | None = None) -> int:
        return sum(1 for m, s in self.log
                   if (model is None or m == model) and (status is None or s == status))

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def no_refusals(monkeypatch):
    """Refused parameters are remembered per endpoint URL for the process: start each test afresh.

    A port the OS hands out again must not inherit another test's.
    """
    from contextevolve.llm import models

    monkeypatch.setattr(models, "_refused", {})


@pytest.fixture
def endpoint():
    server = FakeEndpoint(healthy)
    yield server
    server.close()


def run_args(run_dir: Path, url: str, iterations: int = 2) -> list[str]:
    return ["run", "--task", "model_placement", "--iterations", str(iterations), "--run-dir", str(run_dir),
            "--base-url", url, "--model", "ctx", "--role-model", "generator=gen",
            "--max-retries", str(RETRIES), "--retry-wait", "0.01"]


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_one_clean_error_line(output: str, url: str, run_dir: Path) -> None:
    assert "Traceback" not in output
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output
    assert url in errors[0] and f"contextevolve run --run-dir {run_dir} --resume" in errors[0]


def test_always_500_stops_the_run_with_one_line_and_resume_continues(endpoint, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONTEXTEVOLVE_API_KEY", API_KEY)
    run_dir = tmp_path / "r"
    endpoint.behave = lambda request: SERVER_ERROR
    assert main(run_args(run_dir, endpoint.url)) == EXIT_ENDPOINT_UNAVAILABLE == 3
    out = capsys.readouterr()
    assert_one_clean_error_line(out.out + out.err, endpoint.url, run_dir)
    assert "HTTP 500" in out.err and f"{ATTEMPTS} attempts" in out.err
    assert endpoint.requests(status=500) == ATTEMPTS  # the first call (summarizer of c_0), retried
    assert f"Bearer {API_KEY}" in endpoint.auth
    # nothing written carries the key, the checkpointed error included
    assert (run_dir / "run.json").exists() and (run_dir / "checkpoints.sqlite").exists()
    assert not [p for p in run_dir.rglob("*") if p.is_file() and API_KEY.encode() in p.read_bytes()]

    endpoint.behave = no_code  # back up: resume with the task and settings from run.json
    assert main(["run", "--run-dir", str(run_dir), "--resume"]) == 0
    status = run_status(run_dir)
    assert status["task"] == "model_placement" and status["iterations"] == 2 and status["programs"] == 3
    assert [r["status"] for r in records(run_dir)[1:]] == ["failed", "failed"]  # "I cannot help with that."


def test_endpoint_down_at_start_stops_cleanly(tmp_path, capsys):
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    with pytest.raises(EndpointUnavailable) as caught:
        evolve("model_placement", iterations=1, run_dir=tmp_path / "api", base_url=url, model="ctx",
               max_retries=RETRIES, retry_wait_s=0.01)
    exc = caught.value
    assert exc.base_url == url and exc.attempts == ATTEMPTS and exc.run_dir == tmp_path / "api"
    assert exc.resume_command() == f"contextevolve run --run-dir {tmp_path / 'api'} --resume"
    assert exc.reason.startswith("connection failed") and "refused" in exc.reason.lower()

    run_dir = tmp_path / "cli"
    code = main(run_args(run_dir, url, iterations=1))
    out = capsys.readouterr()
    assert code == EXIT_ENDPOINT_UNAVAILABLE
    assert_one_clean_error_line(out.out + out.err, url, run_dir)


def test_intermittent_500_is_retried_and_the_run_completes(endpoint, tmp_path, capsys):
    seen = {"n": 0}

    def flaky(request: dict) -> Response:
        seen["n"] += 1
        return SERVER_ERROR if seen["n"] % 2 else healthy(request)  # every first attempt fails

    endpoint.behave = flaky
    run_dir = tmp_path / "r"
    assert main(run_args(run_dir, endpoint.url)) == 0
    status = run_status(run_dir)
    assert status["iterations"] == 2 and status["programs"] == 3
    assert (endpoint.requests(status=500) >= 3
            and endpoint.requests(status=500) == endpoint.requests(status=200))
    # the children were generated (whatever the evaluator made of them), not lost to the 500s
    assert not any("endpoint fault" in r["reason"] for r in records(run_dir))
    assert "Traceback" not in capsys.readouterr().err


def test_malformed_json_bodies_fail_the_generation_and_the_run_goes_on(endpoint, tmp_path):
    endpoint.behave = lambda request: (200, "application/json", b'{"choices": [ not json')  # every role
    run_dir = tmp_path / "r"
    assert main(run_args(run_dir, endpoint.url)) == 0
    status = run_status(run_dir)
    assert status["iterations"] == 2 and status["programs"] == 3
    assert endpoint.requests("gen") == 2 * ATTEMPTS
    children = records(run_dir)[1:]
    for child in children:
        assert child["status"] == "failed" and child["source"] == ""
        assert child["reason"].startswith(f"endpoint fault: generator reply from {endpoint.url} unusable "
                                          f"after {ATTEMPTS} attempts: unreadable response (JSONDecodeError")
        assert child["abstract"].startswith("FAILED (failed): endpoint fault")
        assert child["guidance"] == ""  # the navigator's replies were garbled too: no guidance
    assert records(run_dir)[0]["abstract"] == "(the summarizer returned nothing)"


def test_truncated_program_is_retried_then_a_failed_child(endpoint, tmp_path):
    endpoint.behave = lambda request: (completion(TRUNCATED, finish="length") if request["model"] == "gen"
                                       else healthy(request))
    run_dir = tmp_path / "r"
    assert main(run_args(run_dir, endpoint.url)) == 0
    status = run_status(run_dir)
    assert status["iterations"] == 2 and status["programs"] == 3
    assert endpoint.requests("gen") == 2 * ATTEMPTS
    # a retry changes the seed (an endpoint honouring it would repeat the same cut-off reply)
    # (the first ask's seed is the run's + 300 + the iteration)
    assert [seed for model, seed in endpoint.seeds if model == "gen"] == [300, 301, 302, 301, 302, 303]
    for child in records(run_dir)[1:]:
        assert child["status"] == "failed"
        assert child["reason"].startswith("endpoint fault: generator reply from")
        assert "cut off at the token cap (finish_reason=length)" in child["reason"]
        assert child["diagnostics"].startswith("```python")
        # every attempt's tokens are counted
        assert child["tokens"]["generator"] == {"prompt": 50 * ATTEMPTS, "completion": 10 * ATTEMPTS}


@pytest.mark.parametrize("response, problem", [
    ((200, "text/html", b"<html>502 Bad Gateway</html>"), "unreadable response"),
    ((200, "application/json", b'{"id": "x", "object": "chat.completion"}'), "null value for 'choices'"),
    ((200, "application/json", b'{"id": "x", "choices": []}'), "unreadable response (IndexError"),
    ((200, "application/json", b'{"error": {"message": "model overloaded"}}'), "model overloaded"),
    (completion(None), "empty completion"),
    (completion("   \n"), "empty completion"),
], ids=["html", "no-choices", "empty-choices", "error-object", "null-content", "blank-content"])
def test_each_kind_of_malformed_reply_is_retried_then_reported(endpoint, response, problem):
    endpoint.behave = lambda request: response
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    with pytest.raises(MalformedReply) as caught:
        call_role("navigator", [HumanMessage("hi")], ctx)
    assert problem in str(caught.value) and caught.value.attempts == ATTEMPTS
    assert endpoint.requests() == ATTEMPTS


def test_a_malformed_reply_then_a_good_one_is_used(endpoint):
    replies = iter([(200, "application/json", b"garbage"), completion("balance projected pressure")])
    endpoint.behave = lambda request: next(replies)
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    reply = call_role("navigator", [HumanMessage("hi")], ctx)
    assert (reply.text == "balance projected pressure"
            and reply.usage == {"navigator": {"prompt": 50, "completion": 10}})


def test_a_refused_request_stops_without_retrying(endpoint):
    endpoint.behave = lambda request: (401, "application/json", b'{"error": {"message": "invalid api key"}}')
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    with pytest.raises(EndpointUnavailable, match="HTTP 401: .*invalid api key"):
        call_role("generator", [HumanMessage("hi")], ctx)
    assert endpoint.requests() == 1


def test_context_agents_fall_back_on_replies_that_stay_empty(seeded, ctx, models):
    state, memory = seeded
    for n in range(1, 5):
        memory.commit(ProgramRecord(id=program_id(n), iteration=n, parent_id="it00000", status="ok",
                                    combined_score=21.0 + n,
                                    metrics={"max_kvpr": 20.0 + n, "success_rate": 1.0},
                                    abstract=f"program {n} idea", source=INITIAL))
    ctx = replace(ctx, max_retries=1, retry_wait_s=0, num_exemplars=2)
    state = replace(state, parent_id="it00000")
    for role in ("navigator", "sampler", "summarizer"):
        models[role].messages = iter([reply("", 100, 0), reply(" \n", 100, 0)])
    guided = run_node(navigate, state, ctx)
    assert guided["guidance"] == "" and guided["iteration_usage"] == {
        "navigator": {"prompt": 200, "completion": 0}}
    picked = run_node(sample, state, ctx)
    assert picked["exemplar_ids"] == picked["candidate_ids"][:2]
    assert picked["iteration_usage"] == {"sampler": {"prompt": 200, "completion": 0}}
    abstract, usage = abstract_for(ctx, get_task("model_placement"), INITIAL, None)
    assert abstract == "(the summarizer returned nothing)" and usage == {
        "summarizer": {"prompt": 200, "completion": 0}}


def test_a_json_mode_reply_cut_off_at_the_cap_is_a_truncated_reply(endpoint):
    """A cut-off ``response_format`` reply is a truncated reply, parsed as far as it goes.

    The OpenAI client raises LengthFinishReasonError for such a reply; a run once stopped on it in the
    Sampler.
    """
    endpoint.behave = lambda request: completion('{"exemplars": [2, 1], "why": "the first one is',
                                                 finish="length")
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    reply = call_role("sampler", [HumanMessage("pick")], ctx, json_mode=True)
    assert reply.truncated and reply.text.startswith('{"exemplars": [2, 1]')
    assert reply.usage == {"sampler": {"prompt": 50, "completion": 10}} and endpoint.requests() == 1
    from contextevolve.nodes.sample import parse_choice
    assert parse_choice(reply.text, 3, 2) == [1, 0]


def test_a_content_filter_stop_is_a_malformed_reply(endpoint):
    endpoint.behave = lambda request: completion("", finish="content_filter")
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    with pytest.raises(MalformedReply):
        call_role("sampler", [HumanMessage("pick")], ctx, json_mode=True)
    assert endpoint.requests() == ATTEMPTS


def refusing(parameter: str, body: dict, record: list[dict] | None = None) -> Callable[[dict], Response]:
    """:func:`healthy`, except that a request carrying ``parameter`` gets HTTP 400 with ``body``.

    Every request's body is appended to ``record`` when one is given.
    """
    def behave(request: dict) -> Response:
        if record is not None:
            record.append(request)
        if parameter in request:
            return 400, "application/json", json.dumps({"error": body}).encode()
        return healthy(request)
    return behave


OPENAI_NO_STOP = {"message": "Unsupported parameter: 'stop' is not supported with this model.",
                  "type": "invalid_request_error", "param": "stop", "code": "unsupported_parameter"}
"""The refusal OpenAI's reasoning models answer a request with ``stop`` with."""


def test_a_run_against_an_endpoint_that_refuses_stop_goes_on_without_it(endpoint, tmp_path, caplog):
    bodies: list[dict] = []
    endpoint.behave = refusing("stop", OPENAI_NO_STOP, record=bodies)
    run_dir = tmp_path / "r"
    assert main(run_args(run_dir, endpoint.url, iterations=1)) == 0
    child = records(run_dir)[1]
    # the Generator's reply, asked without its stop sequence, became the program it holds
    assert child["status"] == "ok" and child["source"] == BETTER_PROGRAM
    assert child["combined_score"] == pytest.approx(
        get_task("model_placement").evaluate(BETTER_PROGRAM).combined_score)
    # refused once per model asked with a stop (the generator "gen"; the sampler is not asked with one
    # exemplar slot free), then never sent again to it
    refused = [(b["model"], "stop" in b) for b in bodies]
    assert endpoint.requests(status=400) == 1 and refused.count(("gen", True)) == 1
    assert refused.index(("gen", True)) + 1 == refused.index(("gen", False))
    assert sum(1 for line in caplog.messages if "refuses the 'stop' parameter" in line) == 1


def test_a_refused_temperature_named_only_in_the_message_is_left_out(endpoint):
    message = ("Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) "
               "value is supported.")
    bodies: list[dict] = []
    endpoint.behave = refusing("temperature", {"message": message, "type": "invalid_request_error"},
                               record=bodies)
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    for _ in range(2):
        assert call_role("navigator", [HumanMessage("hi")], ctx, temperature=0.7).text.startswith("Greedy")
    assert ["temperature" in b for b in bodies] == [True, False, False]  # refused once, then never sent
    assert all("seed" in b for b in bodies)  # what was not refused is still sent


@pytest.mark.parametrize("body", [
    {"message": "This model's maximum context length is 8192 tokens.", "type": "invalid_request_error",
     "param": "messages", "code": "context_length_exceeded"},
    # not one we can drop
    {"message": "Unsupported parameter: 'logit_bias'.", "type": "invalid_request_error"},
    # a value out of range is the user's setting to fix, not a parameter to drop
    {"message": "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, "
                "but got 2.5 instead.",
     "type": "invalid_request_error", "param": "temperature", "code": "decimal_above_max_value"},
])
def test_a_400_about_anything_else_still_stops_at_once(endpoint, body):
    endpoint.behave = lambda request: (400, "application/json", json.dumps({"error": body}).encode())
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    with pytest.raises(EndpointUnavailable, match="HTTP 400"):
        call_role("generator", [HumanMessage("hi")], ctx, stop=["\n```\n"])
    assert endpoint.requests() == 1


def test_a_refusal_met_by_another_request_is_left_out_of_a_retry(endpoint):
    """A retry leaves out a parameter another worker learnt was refused while the request waited.

    A request waiting to retry (here after a 500) while another worker learnt of a refusal sends its
    retry without the refused parameter.
    """
    from contextevolve.llm import models

    bodies: list[dict] = []

    def behave(request: dict) -> Response:
        bodies.append(request)
        if len(bodies) == 1:  # meanwhile another worker's request was refused for its temperature
            models.refuse_parameter(endpoint.url, "ctx", "temperature")
            return SERVER_ERROR
        return refusing("temperature", OPENAI_NO_STOP | {"param": "temperature"})(request)

    endpoint.behave = behave
    ctx = RunContext(base_url=endpoint.url, model="ctx", max_retries=RETRIES, retry_wait_s=0.01)
    assert call_role("navigator", [HumanMessage("hi")], ctx, temperature=0.7).text.startswith("Greedy")
    assert ["temperature" in b for b in bodies] == [True, False] and endpoint.requests(status=400) == 0
