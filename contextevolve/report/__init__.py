"""Run reports: one self-contained HTML page (and its PNG figures) from a run directory.

``write_report(run_dir)`` reads the run (:mod:`contextevolve.report.data`), draws the figures
(:mod:`contextevolve.report.figures`, matplotlib) and renders ``report.html.j2`` (jinja2, HTML escaped)
with the PNGs embedded, so the page opens anywhere without the run directory. What it shows:
docs/usage.md, *The run report*.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

from contextevolve.llm.pricing import dollars
from contextevolve.report.data import ReportError, RunData, load_run
from contextevolve.report.figures import STATUS_COLOURS, pareto_figure, scores_figure, tokens_figure
from contextevolve.roles import total_tokens
from contextevolve.timing import llm_by_role

__all__ = ["ReportError", "RunData", "load_run", "write_report", "REPORT_FILE"]

REPORT_FILE = "report.html"
"""Name of the report in the run directory; its figures are ``report-*.png`` beside it."""


def lineage_rows(data: RunData) -> list[dict]:
    """Programs in depth-first order from the initial program, each with its depth in the tree.

    Iterative (a run of thousands of iterations may be one long chain). A program whose parent is
    not among the committed programs is shown as a root.
    """
    children: dict[str | None, list] = {}
    ids = {p.id for p in data.programs}
    for program in data.programs:
        children.setdefault(program.parent_id if program.parent_id in ids else None, []).append(program)
    rows, stack = [], [(p, 0) for p in reversed(children.get(None, []))]
    while stack:
        program, depth = stack.pop()
        rows.append({"program": program, "depth": depth})
        stack.extend((c, depth + 1) for c in reversed(children.get(program.id, [])))
    return rows


def _diff_lines(diff: str) -> list[dict]:
    kinds = {"+": "add", "-": "del", "@": "hunk"}
    return [{"kind": "" if line.startswith(("+++", "---")) else kinds.get(line[:1], ""), "text": line}
            for line in diff.splitlines()]


def write_report(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Write the report of the run in ``run_dir`` and return the HTML file's path.

    Args:
        run_dir: a run directory (``buffer.sqlite``, ``run.json``); a run still going is reported as
            far as it has committed programs.
        out: the HTML file to write (default ``RUN_DIR/report.html``); the PNGs go beside it as
            ``<stem>-scores.png``, ``<stem>-tokens.png``, ``<stem>-pareto.png``.

    Raises:
        ReportError: ``run_dir`` holds no run, or no committed program yet.
    """
    import jinja2

    data = load_run(run_dir)
    html_path = Path(out) if out else Path(run_dir) / REPORT_FILE
    html_path.parent.mkdir(parents=True, exist_ok=True)
    stem = html_path.with_suffix("")
    pngs = {"scores": scores_figure(data, Path(f"{stem}-scores.png")),
            "tokens": tokens_figure(data, Path(f"{stem}-tokens.png")),
            "pareto": pareto_figure(data, Path(f"{stem}-pareto.png"))}
    images = {k: base64.b64encode(p.read_bytes()).decode() if p else None for k, p in pngs.items()}
    env = jinja2.Environment(loader=jinja2.PackageLoader("contextevolve.report", "."),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    children = data.programs[1:]
    page = env.get_template("report.html.j2").render(
        run_name=Path(run_dir).resolve().name, run_dir=str(Path(run_dir).resolve()), task=data.task,
        written=dt.datetime.now().strftime("%Y-%m-%d %H:%M"),
        iterations=max(p.iteration for p in data.programs), programs=data.programs, children=len(children),
        valid_children=sum(p.status == "ok" for p in children),
        behavioural_twins=sum(bool(p.behavioural_twin_of) for p in children),
        prompts=sum(not p.sibling_of for p in children),
        initial=data.programs[0], best=data.best, improvements=data.improvements,
        total_tokens=data.total_tokens(), tokens_per_improvement=data.tokens_per_improvement(),
        cost=dollars(data.cost(data.tokens_by_role())),
        tokens=data.tokens_by_role(), images=images, colours=STATUS_COLOURS, lineage=lineage_rows(data),
        program_tokens={p.id: total_tokens(p.tokens) for p in data.programs},
        seconds=data.seconds_by_phase(), llm=llm_by_role(c for p in data.programs for c in p.llm_calls),
        diffs={p.id: _diff_lines(data.diff(p)) for p in data.programs})
    tmp = html_path.with_name(html_path.name + ".tmp")
    tmp.write_text(page)
    tmp.replace(html_path)
    return html_path
