"""`contextevolve report`: the HTML report agrees with the run's buffer and renders cleanly in Chromium."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from contextevolve.api import evolve
from contextevolve.cli import main
from contextevolve.memory.buffer import EvolveBuffer
from contextevolve.report import ReportError, load_run, write_report
from contextevolve.report.figures import pareto_front, score_points
from contextevolve.tasks.registry import get_task

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


class _Page(HTMLParser):
    """Collects the report's program sections, lineage rows, summary cells and images."""

    def __init__(self):
        super().__init__()
        self.programs, self.lineage, self.cells, self.images = {}, {}, {}, []
        self._cell: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "details" and "program" in (a.get("class") or ""):
            self.programs[a["id"]] = (a["data-status"], a["data-parent"] or None)
        elif tag == "li" and "data-id" in a:
            self.lineage[a["data-id"]] = a["data-parent"] or None
        elif tag == "td" and a.get("id"):
            self._cell = a["id"]
            self.cells[self._cell] = ""
        elif tag == "img":
            self.images.append(a["src"])

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell:
            self.cells[self._cell] += data


@pytest.fixture
def finished_run(tmp_path, models):
    """A 4-iteration run with scripted models: valid, invalid and failed children and one improvement."""
    run_dir = tmp_path / "run"
    evolve("model_placement", iterations=3, run_dir=run_dir, max_retries=0)
    return run_dir


def _records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]


def test_report_content_matches_the_buffer(finished_run):
    html = write_report(finished_run)
    assert html == finished_run / "report.html"
    for name in ("scores", "tokens", "pareto"):
        png = finished_run / f"report-{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = _Page()
    page.feed(html.read_text())
    records = _records(finished_run)
    buffer = EvolveBuffer(finished_run / "buffer.sqlite")
    best = buffer.best()
    buffer.close()
    # one section and one lineage row per program, with its status and parent (the lineage edges)
    assert page.programs == {r["id"]: (r["status"], r["parent_id"]) for r in records}
    assert page.lineage == {r["id"]: r["parent_id"] for r in records}
    assert page.cells["programs"].strip() == str(len(records))
    children = records[1:]
    assert page.cells["valid"].strip() == f"{sum(r['status'] == 'ok' for r in children)} of {len(children)}"
    assert (page.cells["best-score"].startswith(f"{best.combined_score:.6g}")
            and best.id in page.cells["best-score"])
    assert page.cells["initial-score"].strip() == f"{records[0]['combined_score']:.6g}"
    assert page.cells["improvements"].startswith("1")  # the scripted better program
    total = sum(u["prompt"] + u["completion"] for r in records for u in r["tokens"].values())
    assert page.cells["total-tokens"].strip() == f"{total:,}"
    assert page.cells["tokens-per-improvement"].strip() == f"{total:,.0f}"
    # seconds by phase and LLM calls by role, from the records
    generate = sum(r["seconds"].get("generate", 0.0) for r in records)
    assert page.cells["seconds-generate"].strip() == f"{generate:,.1f}" and "seconds-evaluate" in page.cells
    assert page.cells["llm-calls-generator"].strip() == str(sum(
        c["role"] == "generator" for r in records for c in r["llm_calls"]))
    assert len(page.images) == 3 and all(src.startswith("data:image/png;base64,") for src in page.images)
    # the failed and invalid children are marked apart, never plotted as a score
    valid, not_valid = score_points(load_run(finished_run))
    assert sorted(i for i, _ in valid) == [r["iteration"] for r in records if r["status"] == "ok"]
    assert set(not_valid) == {r["status"] for r in records if r["status"] != "ok"}
    assert {"failed", "invalid"} <= set(not_valid)


def test_the_report_renders_in_headless_chromium_without_console_errors(finished_run, tmp_path):
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (`make test` installs the Debian package `chromium`)")
    html = write_report(finished_run)
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr",
                           "--v=0", f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", html.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    assert 'id="summary-table"' in done.stdout and 'class="lineage"' in done.stdout
    assert all(f'id="{r["id"]}"' in done.stdout for r in _records(finished_run))


def test_report_errors_name_the_problem(tmp_path):
    with pytest.raises(ReportError, match="not a run directory"):
        write_report(tmp_path)
    EvolveBuffer(tmp_path / "buffer.sqlite").close()
    with pytest.raises(ReportError, match="no committed program"):
        write_report(tmp_path)
    assert not (tmp_path / "report.html").exists()


def test_cli_report_and_run_write_the_report(tmp_path, models, capsys):
    run_dir = tmp_path / "r"
    assert main(["run", "--iterations", "1", "--run-dir", str(run_dir)]) == 0
    assert (run_dir / "report.html").is_file() and "report:" in capsys.readouterr().err
    out = tmp_path / "elsewhere" / "page.html"
    assert main(["report", str(run_dir), "--out", str(out)]) == 0
    assert out.is_file() and (tmp_path / "elsewhere" / "page-scores.png").is_file()
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_pareto_front_respects_each_metric_direction():
    points = [("a", 1.0, 1.0), ("b", 2.0, 0.5), ("c", 0.5, 0.5), ("d", 2.0, 1.0)]
    assert pareto_front(points, (True, True)) == ["d"]
    assert pareto_front(points, (False, False)) == ["c"]
    assert pareto_front(points, (True, False)) == ["b"]
    assert pareto_front([("a", 1.0, 2.0), ("b", 2.0, 1.0)], (True, True)) == ["a", "b"]
    # SAK: density and error, both lower is better
    assert [m.higher_is_better for m in get_task("sparse_attention").metrics[:2]] == [False, False]


def test_untrusted_text_is_escaped(finished_run):
    """Abstracts, reasons and code come from the LLM and the candidate: shown as text, never as markup."""
    buffer = EvolveBuffer(finished_run / "buffer.sqlite")
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    child = buffer.committed()[1]
    buffer.update(child.id, abstract=hostile, reason=hostile, guidance=hostile,
                  source=child.source + f"# {hostile}\n")
    buffer.close()
    page = write_report(finished_run).read_text()
    assert "<script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
