"""A comparison's results as JSON, a markdown table and the paper's Figure 3 panels.

* ``results.json``: the settings (no API key) and every :class:`SystemResult`.
* ``results.md``: a row per system and seed, then the medians over seeds per system (valid rate over the
  candidate budget; *tokens / changed* over valid candidates that copy no earlier code); with a token
  budget, every run's best within exactly that many tokens (:func:`best_within`); with a cost budget, within
  exactly that many dollars (:func:`best_within_cost`).
* ``best_so_far.png`` (Fig. 3a): best combined score after each candidate, a line per run.
* ``tokens.png`` (Fig. 3b): proxy tokens used by each candidate's end, a line per run.
* ``ablations.png`` (Fig. 3c, with ablations): each ablation's best relative to the full system's
  (:func:`ablation_rows`).

``python -m contextevolve.compare.results OUT`` rewrites the table and plots from ``OUT/results.json``.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from contextevolve.compare.schema import CompareSettings, SystemResult, problem_digest, task_in
from contextevolve.graph.settings import Price
from contextevolve.llm.pricing import dollars, price_cost
from contextevolve.tasks.base import Task

COLUMNS = ("system", "seed", "initial", "best", "rank", "best recomputed", "budget", "evaluated", "valid",
           "valid & changed", "valid & new score", "tokens", "prompt / completion", "generations",
           "tokens / valid", "tokens / changed", "minutes", "cost", "stopped")
"""The per-run table. *generations*: every LLM request the proxy counted (code-writing or not); *rank*:
the run's place by best score among the runs of its seed (ties share a place); *valid & new score*:
valid candidates whose score no earlier valid program of the run had
(:func:`~contextevolve.compare.ledger.summary`)."""


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.6g}"


def _per(tokens: float | None, count: float | None = 1) -> str:
    """``tokens / count`` with thousands separators, '–' when there is nothing to divide."""
    return "–" if tokens is None or not count else f"{tokens / count:,.0f}"


def _count(value: int | None) -> str:
    return "–" if value is None else str(value)


def _row(result: SystemResult, rank: int | None) -> list[str]:
    """One run's cells of the results table, in :data:`COLUMNS` order."""
    return [result.system, str(result.seed), _score(result.initial), _score(result.best),
            "–" if rank is None else str(rank),
            _score(result.best_recomputed), str(result.budget or "–"), str(result.candidates),
            str(result.valid), str(result.valid_changed), _count(result.valid_new_score),
            f"{result.tokens:,}", f"{result.prompt_tokens:,} / {result.completion_tokens:,}",
            str(result.llm_calls), _per(result.tokens, result.valid),
            _per(result.tokens, result.valid_changed), f"{result.wall_s / 60:.1f}",
            dollars(result.cost) or "–", result.stopped[:60]]


def ranks(results: list[SystemResult], task: Task, token_budget: int | None = None,
          cost_budget: tuple[float, Price] | None = None) -> dict[str, int]:
    """Each run's place (label -> 1, 2, ...) by best score among the runs of the same seed.

    With ``token_budget`` the score is the best within that many tokens (:func:`best_within`), with
    ``cost_budget`` (dollars, price) within that many dollars (:func:`best_within_cost`).
    Competition ranking: equal scores share the better place and the next place is skipped; a run
    without a score gets none.
    """
    def score(result: SystemResult) -> float | None:
        if cost_budget:
            return best_within_cost(result, *cost_budget)[0]
        return best_within(result, token_budget)[0] if token_budget else result.best

    places = {}
    for seed in {r.seed for r in results}:
        scored = {r.label: score(r) for r in results if r.seed == seed and score(r) is not None}
        for label, mine in scored.items():
            better = [o for o in scored.values() if (o > mine if task.higher_is_better else o < mine)]
            places[label] = len(better) + 1
    return places


def budget_line(settings: CompareSettings) -> str:
    """The budget every system got per seed, in each unit a peer counts.

    Candidates, tokens, minutes, and dollars when a cost budget was set.
    """
    parts = [f"{settings.candidates} candidates"]
    parts.append(f"{settings.token_budget:,} tokens" if settings.token_budget else "no token budget")
    parts.append(f"{settings.time_budget_s / 60:g} minutes" if settings.time_budget_s else "no time budget")
    if settings.cost_budget is not None:
        parts.append(f"{dollars(settings.cost_budget)} (at the given prices)")
    return ("Budget per system and seed, whichever is reached first: " + ", ".join(parts)
            + ". Spent per run: *evaluated* candidates, LLM *generations* (every request the proxy "
              "counted), *tokens*, wall *minutes*.")


def _median(values: list[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def best_within(result: SystemResult, token_budget: int) -> tuple[float | None, int | None]:
    """``(best score, candidates)`` of ``result`` among its candidates finished within ``token_budget``.

    ``best_so_far[i]`` and ``cumulative_tokens[i]`` describe candidate ``i + 1``; with none within the
    budget the best is the initial program's score, and ``(None, None)`` when the two lists do not line
    up. Systems overshoot a budget by different amounts (why this cut: docs/compare.md, *Same budget*).
    """
    if len(result.best_so_far) != len(result.cumulative_tokens):
        return None, None
    within = [i for i, used in enumerate(result.cumulative_tokens) if used <= token_budget]
    if not within:
        return result.initial, 0
    return result.best_so_far[within[-1]], within[-1] + 1


def best_within_cost(result: SystemResult, cost_budget: float,
                     price: Price) -> tuple[float | None, int | None]:
    """``(best score, candidates)`` of ``result`` among its candidates finished within ``cost_budget``.

    ``cost_budget`` is in US dollars, ``price`` per million tokens. Candidate ``i + 1`` had cost
    ``price_cost(price, prompt, total - prompt)`` by then, ``prompt`` and ``total`` being
    ``cumulative_prompt_tokens[i]`` and ``cumulative_tokens[i]``; otherwise as :func:`best_within`
    (``(None, None)`` also when the prompt tokens were not kept). The same cut in dollars: a system's
    requests overshoot a cost budget by different amounts, as they do a token budget.
    """
    tokens, prompts = result.cumulative_tokens, result.cumulative_prompt_tokens
    if not len(result.best_so_far) == len(tokens) == len(prompts):
        return None, None
    within = [i for i, (used, prompt) in enumerate(zip(tokens, prompts))
              if price_cost(price, prompt, used - prompt) <= cost_budget]
    if not within:
        return result.initial, 0
    return result.best_so_far[within[-1]], within[-1] + 1


def _within_table(results: list[SystemResult], title: str, places: dict[str, int],
                  bests: dict[str, tuple[float | None, int | None]],
                  spent: tuple[str, dict[str, str]]) -> list[str]:
    """The lines of a "best within the same budget" table.

    ``places`` and ``bests`` ((best, candidates)) are by run label; ``spent`` is the last column's heading
    and its cell per label: what each run spent in all (tokens, or its cost).
    """
    heading, cells = spent
    lines = ["", title, "", "| system | seed | best within budget | rank within budget | candidates within "
             f"budget | {heading} |", "|---|---|---|---|---|---|"]
    for result in results:
        best, count = bests[result.label]
        lines.append(f"| {result.system} | {result.seed} | {_score(best)} | {places.get(result.label, '–')} "
                     f"| {'–' if count is None else count} | {cells[result.label]} |")
    return lines


def settings_lines(results: list[SystemResult]) -> list[str]:
    """A paragraph naming the ContextEvolve runs whose settings were not the defaults, and those settings.

    Empty when every run had the defaults: a table that mixes runs of two settings says which is which.
    """
    changed: dict[str, list[str]] = {}
    for result in results:
        if result.settings:
            text = ", ".join(f"{name}={json.dumps(value)}" for name, value in sorted(result.settings.items()))
            changed.setdefault(text, []).append(result.label)
    if not changed:
        return []
    parts = [f"{', '.join(labels)}: {text}" for text, labels in changed.items()]
    return ["ContextEvolve settings changed from the defaults (`compare --contextevolve-args`): "
            + "; ".join(parts) + ".", ""]


def markdown(results: list[SystemResult], task: Task, settings: CompareSettings | None = None) -> str:
    """The results table in markdown: the budget, per run, then medians per system over seeds.

    With a token budget in ``settings``, also every run's best among the candidates it finished within
    that many tokens (:func:`best_within`); with a cost budget and the model's price, within that many
    dollars (:func:`best_within_cost`).
    """
    token_budget = settings.token_budget if settings else None
    places = ranks(results, task)
    lines = [budget_line(settings), ""] if settings else []
    lines += settings_lines(results)
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_row(r, places.get(r.label))) + " |" for r in results]
    systems = list(dict.fromkeys(r.system for r in results))
    lines += ["", f"Medians over seeds ({'higher' if task.higher_is_better else 'lower'} is better):", "",
              "| system | runs | best | rank | valid / budget | valid & changed | new scores / 10k tokens "
              "| tokens | generations | minutes | tokens / valid | tokens / changed |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for system in systems:
        runs = [r for r in results if r.system == system]
        rate = _median([r.valid / (r.budget or r.candidates) if (r.budget or r.candidates) else 0.0
                        for r in runs])
        tokens = _median([r.tokens for r in runs])
        per_valid = _median([r.tokens / r.valid for r in runs if r.valid])
        per_changed = _median([r.tokens / r.valid_changed for r in runs if r.valid_changed])
        rank = _median([places[r.label] for r in runs if r.label in places])
        novel = _median([1e4 * r.valid_new_score / r.tokens for r in runs
                         if r.valid_new_score is not None and r.tokens])
        lines.append(f"| {system} | {len(runs)} | {_score(_median([r.best for r in runs]))} | "
                     f"{'–' if rank is None else f'{rank:g}'} | "
                     f"{rate:.0%} | {_median([r.valid_changed for r in runs]):g} | "
                     f"{'–' if novel is None else f'{novel:.2f}'} | {tokens:,.0f} | "
                     f"{_median([r.llm_calls for r in runs]):g} | "
                     f"{_median([r.wall_s / 60 for r in runs]):.1f} | "
                     f"{_per(per_valid)} | {_per(per_changed)} |")
    if token_budget:
        lines += _within_table(results, f"Best within the same {token_budget:,} tokens (candidates finished "
                               "by then):", ranks(results, task, token_budget),
                               {r.label: best_within(r, token_budget) for r in results},
                               ("tokens used in all", {r.label: f"{r.tokens:,}" for r in results}))
    price = settings.prices.get(settings.priced_model) if settings and settings.cost_budget else None
    if price:
        budget = (settings.cost_budget, Price(**price))
        lines += _within_table(results, f"Best within the same {dollars(settings.cost_budget)} (candidates "
                               "finished by then, at the given prices):",
                               ranks(results, task, cost_budget=budget),
                               {r.label: best_within_cost(r, *budget) for r in results},
                               ("cost in all", {r.label: dollars(r.cost) or "–" for r in results}))
    ablations = ablation_rows(results, task)
    if ablations:
        lines += ["", "Ablations against the full system on the same seeds (relative > 1: the ablation did "
                  "better):", "",
                  "| ablation | seeds | best | full system's best | relative |", "|---|---|---|---|---|"]
        lines += [f"| {r['system']} | {','.join(map(str, r['seeds']))} | {_score(r['best'])} | "
                  f"{_score(r['full_best'])} | {r['relative']:.4f} |" for r in ablations]
    return "\n".join(lines) + "\n"


def ablation_rows(results: list[SystemResult], task: Task) -> list[dict]:
    """Each ablation against the full system on the seeds both ran (paper Fig. 3c).

    Returns one dict per ablation: ``system``, ``seeds``, ``best`` and ``full_best`` (medians of
    the best scores over those seeds) and ``relative``: ``best / full_best`` when higher is
    better, ``full_best / best`` when lower is (above 1.0: the ablation did better). An ablation of a
    variant (``contextevolve-no-navigator+tournament``) is set against the full system of the same variant.
    Ablations without a shared seed or a score are left out.
    """
    rows = []
    for system in sorted({r.system for r in results if r.system.startswith("contextevolve-")}):
        _, plus, variant = system.partition("+")
        full = {r.seed: r.best for r in results
                if r.system == f"contextevolve{plus}{variant}" and r.best is not None}
        mine = {r.seed: r.best for r in results if r.system == system and r.best is not None}
        seeds = sorted(set(mine) & set(full))
        if not seeds:
            continue
        best, full_best = _median([mine[s] for s in seeds]), _median([full[s] for s in seeds])
        if not best or not full_best:
            continue
        relative = best / full_best if task.higher_is_better else full_best / best
        rows.append({"system": system, "seeds": seeds, "best": best, "full_best": full_best,
                     "relative": relative})
    return rows


def plots(results: list[SystemResult], task: Task, out: Path) -> list[Path]:
    """Write the Figure 3 panels into ``out``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for name, field, ylabel in (("best_so_far.png", "best_so_far", "best combined score"),
                                ("tokens.png", "cumulative_tokens", "tokens used (proxy)")):
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for r in results:
            values = getattr(r, field)
            label = f"{r.label} ({r.candidates} evaluated, {r.tokens:,} tokens)"
            if values:
                ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=label)
            else:  # a run without one candidate still shows in the legend
                ax.plot([], [], marker="x", linestyle="none", label=label)
        ax.set_xlabel("candidate")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{task.title}: {ylabel}")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        written.append(out / name)
    rows = ablation_rows(results, task)
    if rows:
        fig, ax = plt.subplots(figsize=(6.4, 4))
        ax.bar(["full", *[r["system"].removeprefix("contextevolve-") for r in rows]],
               [1.0, *[r["relative"] for r in rows]])
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_ylabel("best score relative to the full system")
        ax.set_title(f"{task.title}: ablations (same seeds)")
        fig.tight_layout()
        fig.savefig(out / "ablations.png", dpi=110)
        plt.close(fig)
        written.append(out / "ablations.png")
    return written


def write_results(settings: CompareSettings, results: list[SystemResult], task: Task) -> None:
    """Write results.json, results.md and the plots into ``settings.out``."""
    out = Path(settings.out)
    data = {"settings": settings.model_dump(exclude={"api_key"}),
            "results": [r.model_dump() for r in results]}
    data["settings"]["systems"] = list(dict.fromkeys(r.system for r in results))
    data["settings"]["seeds"] = sorted({r.seed for r in results})
    data["settings"]["problem_digest"] = settings.problem_digest or problem_digest(settings.task)
    (out / "results.json").write_text(json.dumps(data, indent=2))
    (out / "results.md").write_text(markdown(results, task, settings))
    plots(results, task, out)


def main(argv: list[str] | None = None) -> int:
    """``python -m contextevolve.compare.results OUT``: rewrite results.md and the plots of OUT."""
    import sys

    from contextevolve.compare.ledger import read_ledger, summary
    from contextevolve.tasks.registry import get_task

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not (Path(argv[0]) / "results.json").exists():
        print("usage: python -m contextevolve.compare.results OUT  (a folder holding results.json)",
              file=sys.stderr)
        return 2
    data = json.loads((Path(argv[0]) / "results.json").read_text())
    settings = CompareSettings.model_validate({**data["settings"], "out": argv[0]})
    settings.task = task_in(Path(argv[0]), settings.task, settings.problem_digest)
    results = [SystemResult.model_validate(r) for r in data["results"]]
    task = get_task(settings.task)
    for result in results:
        result.budget = result.budget or settings.candidates
        kept = Path(argv[0]) / result.label / "ledger.jsonl"
        if result.valid_new_score is None and kept.exists():  # written before it was counted
            result.valid_new_score = summary(read_ledger(kept), task)["valid_new_score"]
    write_results(settings, results, task)
    print((Path(argv[0]) / "results.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
