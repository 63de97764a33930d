"""`contextevolve serve`: the live view of a run, seen in headless Chromium while the run goes on.

The page must show a child the run adds without being reloaded, show one child's context when clicked, and
refuse bad input (a missing or foreign folder, a port in use) with exit code 2, writing nothing.
"""

from __future__ import annotations

import json
import shutil
import socket
import urllib.error
import urllib.request

import pytest

from contextevolve.api import evolve
from contextevolve.cli import main
from contextevolve.view.server import ViewServer

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as reply:
        return json.loads(reply.read())


@pytest.fixture
def browser():
    """A headless Chromium page (Playwright driving the system's Chromium: no browser download)."""
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (`make test` installs the Debian package `chromium`)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = chromium.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.errors = errors
        yield page
        chromium.close()


def test_a_new_child_appears_on_the_open_page_and_a_click_shows_its_context(tmp_path, models, browser):
    run_dir = tmp_path / "run"
    evolve("model_placement", iterations=2, run_dir=run_dir, max_retries=0)
    files = sorted(p.name for p in run_dir.iterdir())
    with ViewServer(run_dir, port=0, poll_s=0.2) as server:
        assert _get(server.url + "api/search")["kind"] == "run"
        browser.goto(server.url)
        browser.wait_for_function("document.querySelectorAll('#lineage div').length === 3")
        browser.evaluate("window.__same_page = true")  # gone if the page were reloaded
        evolve("model_placement", iterations=3, run_dir=run_dir, resume=True, max_retries=0)
        browser.wait_for_function("document.querySelectorAll('#lineage div').length === 4", timeout=20_000)
        assert browser.evaluate("window.__same_page") is True
        # the plot has a point per program
        points = browser.evaluate("document.getElementById('scores').data.filter(t => t.mode === 'markers')"
                                  ".reduce((n, t) => n + t.x.length, 0)")
        assert points == 4
        child = _get(server.url + "api/search")["programs"][-1]
        browser.click(f"#lineage div[data-id='{child['id']}']")
        browser.wait_for_function(f"document.getElementById('child-id').textContent === '{child['id']}'")
        text = browser.inner_text("#child-body")
        detail = _get(server.url + f"api/child/{child['id']}")
        assert detail["guidance"] and detail["guidance"].split("\n")[0][:40] in text
        assert "Candidates retrieved" in text and "Diff against the parent" in text
        assert all(c["id"] in text for c in detail["candidates"])
        assert browser.errors == []
    assert sorted(p.name for p in run_dir.iterdir() if p.name in files) == files


def test_an_untrusted_reply_is_shown_as_text_never_run_as_html(tmp_path, models, browser):
    from contextevolve.memory.buffer import EvolveBuffer

    run_dir = tmp_path / "run"
    evolve("model_placement", iterations=1, run_dir=run_dir, max_retries=0)
    buffer = EvolveBuffer(run_dir / "buffer.sqlite")
    [child] = [p for p in buffer.committed() if p.iteration == 1]
    child.abstract = "<img src=x onerror=\"window.__owned = 1\">"
    child.guidance = "<script>window.__owned = 2</script>"
    buffer.put(child)
    buffer.close()
    with ViewServer(run_dir, port=0, poll_s=0.2) as server:
        browser.goto(server.url)
        browser.wait_for_function("document.querySelectorAll('#lineage div').length === 2")
        browser.click(f"#lineage div[data-id='{child.id}']")
        browser.wait_for_function(f"document.getElementById('child-id').textContent === '{child.id}'")
        assert "<script>window.__owned = 2</script>" in browser.inner_text("#child-body")
        assert browser.evaluate("window.__owned") is None


def test_serve_refuses_bad_input_with_exit_code_2_and_writes_nothing(tmp_path, capsys):
    assert main(["serve", str(tmp_path / "missing")]) == 2
    assert "is not a directory" in capsys.readouterr().err
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("not a run")
    assert main(["serve", str(foreign)]) == 2
    assert "neither a run" in capsys.readouterr().err
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]
    (foreign / "run.json").write_text("{}")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", str(foreign), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt", "run.json"]


def test_a_comparison_folder_shows_every_runs_curve(tmp_path, browser):
    from contextevolve.compare import ledger
    from contextevolve.tasks.registry import get_task

    task = get_task("model_placement")
    out = tmp_path / "cmp"
    better = task.initial_program.replace("kvpr = load[gpu_id] / free_mem[gpu_id]",
                                          "kvpr = (load[gpu_id] + model.req_rate / model.slo) / "
                                          "max(free_mem[gpu_id] - model.model_size, 1e-9)")
    for label, sources in (("gepa-s0", [better]), ("shinka-s0", [task.initial_program + "\n# same", better])):
        ledger.evaluate(task, task.initial_program, out / label / "ledger.jsonl", initial=True)
        for source in sources:
            ledger.evaluate(task, source, out / label / "ledger.jsonl")
        (out / label / "spec.json").write_text(json.dumps({"task": "model_placement"}))
    (out / "requests.jsonl").write_text("")
    with ViewServer(out, port=0) as server:
        data = _get(server.url + "api/search")
        assert data["kind"] == "compare" and [r["label"] for r in data["runs"]] == ["gepa-s0", "shinka-s0"]
        best = task.evaluate(better).combined_score
        initial = data["runs"][1]["initial"]
        assert data["runs"][1]["best_so_far"] == [pytest.approx(initial), pytest.approx(best)]
        browser.goto(server.url)
        browser.wait_for_function("document.querySelectorAll('#cmp-table tr').length === 3")
        assert browser.evaluate("document.getElementById('cmp-candidates').data.length") == 2
        assert browser.errors == []


def test_the_page_pauses_the_run_and_writes_the_next_childs_guidance(tmp_path, models, browser):
    import threading

    from contextevolve.loop.steering import steering_for
    from contextevolve.memory.buffer import EvolveBuffer

    run_dir = tmp_path / "run"
    results: list = []
    with ViewServer(run_dir, port=0, poll_s=0.2, steering=steering_for(run_dir)) as server:
        browser.goto(server.url)
        browser.wait_for_selector("#pause", state="visible")
        browser.click("#pause")  # before the run starts: it scores c_0, then waits to claim
        browser.wait_for_function("document.getElementById('pause').textContent === 'Resume'")
        run = threading.Thread(target=lambda: results.append(evolve(
            "model_placement", iterations=2, run_dir=run_dir, max_retries=0)))
        run.start()
        browser.wait_for_function("document.querySelectorAll('#lineage div').length === 1", timeout=30_000)
        browser.wait_for_timeout(1500)
        assert browser.evaluate("document.querySelectorAll('#lineage div').length") == 1  # still paused
        assert "paused" in browser.inner_text("#steer-note")
        browser.click("#edit")
        browser.click("#pause")  # resume: the first child stops in review for the person's guidance
        browser.wait_for_selector("#review", state="visible", timeout=30_000)
        # (the first child has no guidance: the Navigator needs a parent -> child step to read)
        assert steering_for(run_dir).state()["waiting"]["child_id"] == "it00001"
        browser.click("#review-keep")
        browser.click("#edit")  # the second child, which has the Navigator's guidance
        browser.wait_for_function("document.getElementById('review-child').textContent === 'it00002'",
                                  timeout=30_000)
        waiting = steering_for(run_dir).state()["waiting"]
        assert browser.input_value("#review-text") == waiting["guidance"] and waiting["guidance"]
        browser.fill("#review-text", "Place the largest models first, then balance the KV-cache pressure.")
        browser.click("#review-send")
        run.join(60)
        assert not run.is_alive() and results and results[0].iterations == 2
        browser.click("#lineage div[data-id='it00002']")
        browser.wait_for_function("document.getElementById('child-body').innerText"
                                  ".includes('written by a person')")
    buffer = EvolveBuffer(run_dir / "buffer.sqlite", read_only=True)
    kept, edited = buffer.require("it00001"), buffer.require("it00002")
    buffer.close()
    assert edited.guidance == "Place the largest models first, then balance the KV-cache pressure."
    assert edited.navigator_guidance == waiting["guidance"]
    assert kept.navigator_guidance is None  # kept as the Navigator left it (empty)
    assert browser.errors == []


def test_a_late_reply_to_a_click_does_not_bring_back_a_review_that_ended(tmp_path, browser, monkeypatch):
    import asyncio
    import threading

    from contextevolve.loop.steering import Steering

    original = ViewServer._steer

    async def late(self, request):  # a loaded machine: the reply comes after the next event
        response = await original(self, request)
        await asyncio.sleep(1.5)
        return response

    monkeypatch.setattr(ViewServer, "_steer", late)
    steering, answers = Steering(), []
    with ViewServer(tmp_path / "run", port=0, poll_s=0.1, steering=steering) as server:
        browser.goto(server.url)
        steering.request_edit()
        worker = threading.Thread(
            target=lambda: answers.append(steering.review(0, "it00001", "it00000", "Try X.")))
        worker.start()
        browser.wait_for_selector("#review", state="visible")
        browser.click("#review-keep")
        worker.join(10)
        assert not worker.is_alive() and answers == [None]  # kept: the Navigator's guidance
        browser.wait_for_timeout(3000)  # past the late reply, which still said the child waits
        assert browser.is_hidden("#review") and browser.is_enabled("#edit")
        assert steering.state()["waiting"] is None
    assert browser.errors == []


def test_a_view_that_only_watches_refuses_to_steer(tmp_path, models):
    run_dir = tmp_path / "run"
    evolve("model_placement", iterations=1, run_dir=run_dir, max_retries=0)
    with ViewServer(run_dir, port=0) as server:
        assert _get(server.url + "api/steer") == {"enabled": False}
        request = urllib.request.Request(server.url + "api/steer", data=b'{"action": "pause"}', method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 403 and b"contextevolve run --serve" in refused.value.read()


def test_run_serve_shows_the_run_live_and_the_page_resumes_it(tmp_path, models, browser, capsys):
    import threading

    from contextevolve.loop.steering import steering_for

    run_dir = tmp_path / "run"
    with socket.socket() as probe:  # a free port for the run's own view
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    steering_for(run_dir).pause()  # so that the page is open before the first child (the page resumes it)
    codes: list[int] = []
    run = threading.Thread(target=lambda: codes.append(main(
        ["run", "--iterations", "3", "--run-dir", str(run_dir),
         "--max-retries", "0", "--serve", "--serve-port", str(port), "--no-report"])))
    run.start()
    url = f"http://127.0.0.1:{port}/"
    for _ in range(100):
        try:
            _get(url + "api/steer")
            break
        except OSError:
            run.join(0.2)
    browser.goto(url)
    browser.wait_for_function("document.querySelectorAll('#lineage div').length === 1", timeout=30_000)
    browser.evaluate("window.__same_page = true")
    # hold the run open after its first child, so the view is still up when that child is shown (with
    # scripted models the three iterations take about two seconds, and the view closes with the run):
    # the first child's review waits for a person, who then asks to write the second child's guidance too
    steering = steering_for(run_dir)
    steering.request_edit()
    browser.click("#pause")  # Resume
    for _ in range(300):
        if steering.state()["waiting"]:
            break
        run.join(0.1)
    first = steering.state()["waiting"]["child_id"]
    steering.request_edit()
    assert steering.answer(None, first)  # keep the Navigator's guidance for the first child
    # the first child appears while the second waits at its review
    browser.wait_for_function("document.querySelectorAll('#lineage div').length >= 2", timeout=30_000)
    assert browser.evaluate("window.__same_page") is True
    for _ in range(300):
        if steering.state()["waiting"]:
            break
        run.join(0.1)
    second = steering.state()["waiting"]  # the run held at the second child's review all along
    assert second and second["child_id"] != first
    assert steering.answer(None, second["child_id"])  # it keeps the Navigator's guidance; the run goes on
    run.join(60)
    assert codes == [0] and f"live view: {url}" in capsys.readouterr().err


def test_other_sites_can_neither_read_nor_steer_and_damaged_files_keep_the_view_up(tmp_path, models):
    from contextevolve.loop.steering import steering_for

    run_dir = tmp_path / "run"
    evolve("model_placement", iterations=1, run_dir=run_dir, max_retries=0)
    before = sorted(p.name for p in run_dir.iterdir())
    with ViewServer(run_dir, port=0, steering=steering_for(run_dir)) as server:
        port = server.port

        def call(path: str, *, host: str | None = None, body: bytes | None = None,
                 kind: str = "application/json", origin: str | None = None) -> int:
            request = urllib.request.Request(server.url + path, data=body, method="POST" if body else "GET")
            for name, value in (("Host", host), ("Content-Type", kind if body else None), ("Origin", origin)):
                if value:
                    request.add_header(name, value)
            try:
                with urllib.request.urlopen(request, timeout=30) as reply:
                    return reply.status
            except urllib.error.HTTPError as refused:
                return refused.code

        assert call("api/search") == 200 and call("api/search", host=f"localhost:{port}") == 200
        assert call("api/search", host=f"evil.example:{port}") == 403  # a rebound name
        pause = b'{"action": "pause"}'
        assert call("api/steer", body=pause, kind="text/plain") == 403  # what a form or no-cors fetch sends
        assert call("api/steer", body=pause, origin="http://evil.example") == 403
        assert call("api/steer", body=b'{"action": [1]}') == 400
        assert call("api/steer", body=b'{"action": "answer", "child_id": "it00009", "text": "x"}') == 409
        assert not steering_for(run_dir).state()["paused"]
        assert call("api/steer", body=pause, origin=f"http://127.0.0.1:{port}") == 200
        assert steering_for(run_dir).state()["paused"]
        steering_for(run_dir).resume()
        (run_dir / "run.json").write_text("{not json")  # damaged (by hand): the view says so and stays up
        data = _get(server.url + "api/search")
        assert "cannot read" in data["waiting"] and call("api/search") == 200
    assert sorted(p.name for p in run_dir.iterdir()) == before  # no -wal / -shm left behind
