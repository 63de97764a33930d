"""The report's figures (matplotlib, written as PNG files and embedded in the HTML).

* ``scores.png``: every valid child's combined score by iteration and the best so far; children
  that failed (failed / invalid / timeout) are marked on a strip of their own, never plotted as a
  score of 0.
* ``tokens.png``: cumulative prompt + completion tokens by role over the iterations.
* ``pareto.png``: the task's first two metrics of the valid programs, the Pareto front (each
  metric in its own direction, :class:`~contextevolve.tasks.base.MetricSpec`) joined.
"""

from __future__ import annotations

from pathlib import Path

from contextevolve.report.data import RunData
from contextevolve.roles import role_tokens, total_tokens

STATUS_COLOURS = {"ok": "#2e7d32", "invalid": "#ef6c00", "failed": "#c62828", "timeout": "#6a1b9a",
                  "pending": "#757575"}
"""Colour of each program status, shared by the figures and the lineage tree."""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt

    return plt


def _whole_numbers():
    """A tick locator for an axis of iterations (whole numbers only)."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


NOT_VALID = ("failed", "invalid", "timeout")


def score_points(data: RunData) -> tuple[list[tuple[int, float]], dict[str, list[int]]]:
    """What the scores figure plots: the valid programs' (iteration, combined score) pairs.

    Also the iterations of the programs that are not valid, by status (they have no score to plot).
    """
    valid = [(p.iteration, p.combined_score) for p in data.programs if p.status == "ok"]
    marked = {status: [p.iteration for p in data.programs if p.status == status] for status in NOT_VALID}
    return valid, {k: v for k, v in marked.items() if v}


def scores_figure(data: RunData, path: Path) -> Path:
    """Per-child scores and the best so far; failed children on a separate strip. Returns ``path``."""
    plt = _pyplot()
    fig, (top, strip) = plt.subplots(2, 1, figsize=(8, 4.6), sharex=True,
                                     gridspec_kw={"height_ratios": [5, 1], "hspace": 0.08})
    valid, not_valid = score_points(data)
    top.scatter([v[0] for v in valid], [v[1] for v in valid], s=22,
                color=STATUS_COLOURS["ok"], label="valid child", zorder=3)
    steps = [(p.iteration, data.by_id[b].combined_score)
             for p, b in zip(data.programs, data.best_so_far) if b]
    if steps:
        top.step([s[0] for s in steps], [s[1] for s in steps], where="post", color="#1565c0",
                 label="best so far")
    top.set_ylabel("combined score" + ("" if data.task.higher_is_better else " (lower is better)"))
    top.legend(loc="best", fontsize=8)
    top.grid(alpha=0.3)
    for status, marked in not_valid.items():  # on their own strip: a failed child has no score
        strip.scatter(marked, [0] * len(marked), marker="x", s=40, color=STATUS_COLOURS[status], label=status)
    strip.set_yticks([])
    strip.set_ylabel("not valid", rotation=0, ha="right", va="center", fontsize=8)
    strip.set_xlabel("iteration")
    strip.xaxis.set_major_locator(_whole_numbers())  # iterations are whole numbers
    if not_valid:
        strip.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
    fig.suptitle(f"{data.task.title}: scores by iteration", fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def tokens_figure(data: RunData, path: Path) -> Path:
    """Cumulative tokens (prompt + completion) by role over the iterations. Returns ``path``."""
    plt = _pyplot()
    roles = [r for r, v in data.tokens_by_role().items() if role_tokens(v)]
    iterations = [p.iteration for p in data.programs]
    series = []
    for role in roles:
        total, line = 0, []
        for program in data.programs:
            total += total_tokens({role: program.tokens.get(role, {})})
            line.append(total)
        series.append(line)
    fig, ax = plt.subplots(figsize=(8, 3.4))
    if series:
        ax.stackplot(iterations, series, labels=roles, alpha=0.85)
        ax.legend(loc="upper left", fontsize=8)
    ax.set_xlabel("iteration")
    ax.xaxis.set_major_locator(_whole_numbers())
    ax.set_ylabel("cumulative tokens")
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def pareto_front(points: list[tuple[str, float, float]], higher: tuple[bool, bool]) -> list[str]:
    """Ids of the non-dominated points of ``(id, x, y)`` (each axis in its own direction), sorted by x.

    A point dominates another when it is at least as good on both metrics and better on one.
    """
    def at_least(a: float, b: float, up: bool) -> bool:
        return a >= b if up else a <= b

    front = []
    for pid, x, y in points:
        dominated = any(at_least(x2, x, higher[0]) and at_least(y2, y, higher[1]) and (x2, y2) != (x, y)
                        for _, x2, y2 in points)
        if not dominated:
            front.append((x, pid))
    return [pid for _, pid in sorted(front)]


def pareto_figure(data: RunData, path: Path) -> Path | None:
    """The first two metrics of the valid programs with their Pareto front; returns ``path``.

    ``None`` (nothing written) when the task has fewer than two metrics or no valid program.
    """
    specs = data.task.metrics[:2]
    valid = [p for p in data.programs if p.status == "ok" and all(m.name in p.metrics for m in specs)]
    if len(specs) < 2 or not valid:
        return None
    plt = _pyplot()
    x_spec, y_spec = specs
    points = [(p.id, p.metrics[x_spec.name], p.metrics[y_spec.name]) for p in valid]
    front = set(pareto_front(points, (x_spec.higher_is_better, y_spec.higher_is_better)))
    fig, ax = plt.subplots(figsize=(5.6, 4.2))
    ax.scatter([x for _, x, _ in points], [y for _, _, y in points], s=22, color="#90a4ae",
               label="valid program")
    at: dict[tuple[float, float], list[str]] = {}  # programs with equal metrics share one point
    for pid, x, y in points:
        if pid in front:
            at.setdefault((x, y), []).append(pid)
    ordered = sorted(at)
    ax.plot([o[0] for o in ordered], [o[1] for o in ordered], "o-", color="#d81b60", label="Pareto front")
    for (x, y), ids in at.items():
        label = ", ".join(ids) if len(ids) <= 2 else f"{ids[0]} and {len(ids) - 1} more"
        ax.annotate(label, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel(x_spec.name + (" (higher is better)" if x_spec.higher_is_better else " (lower is better)"))
    ax.set_ylabel(y_spec.name + (" (higher is better)" if y_spec.higher_is_better else " (lower is better)"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path
