"""How well the search uses its attempts: valid children, repairs, improvements, tokens, seconds.

Runs ContextEvolve on one task for N iterations (the embedded model unless ``--base-url`` or
the ``CONTEXTEVOLVE_*`` environment names an endpoint) and prints, from what the run stored:

* valid-child rate: children with status ``ok`` / children;
* behaviourally new valid children (valid, and results unlike every earlier program's: every metric to
  the bit, and the outputs, :func:`contextevolve.loop.behaviour.same_results`, judged the same way whether
  the run marked behavioural twins or not) and how many per 10,000 tokens;
* repairs attempted (imports added without a model; older runs' model repairs) / children they turned
  ``ok``, pre-check stops, duplicates;
* improvements of the best (children that beat the best-so-far), initial vs best score;
* tokens per iteration by role, tokens per evaluated child (a child that ran: what ``compare`` counts as a
  peer's candidate), completion tokens of the Generator (and an older run's repairs) per iteration
  ("code tokens", what an edit form costs), tokens per valid child;
* seconds per iteration, from the end of ``initialize`` (LLM server up, c_0 scored) to the
  end of the run, and the median over children of their own seconds;
* seconds per iteration by phase (``generate``, ``evaluate``, ``repair``, ...) with the part of each
  spent waiting for the LLM, and LLM seconds and generated tokens by role, from the children's
  records (:mod:`contextevolve.timing`).

``--paper-agents`` switches off what asks the context agents less and treats twins of behaviour: the
Navigator and the Sampler asked whatever share of the tokens they spent, the Summarizer for invalid children
too, no behavioural twins (the "before" of a before/after pair; how often the Navigator and the Sampler are
asked when they have nothing new to say is no setting since 2026-12-07).
``--no-import-fixes`` adds no missing import without a model (with ``--paper-agents``: nearer the paper).
``--no-stop``, ``--no-prompt-cache`` and ``--one-server`` switch off the stop at the end of the code
block, the embedded server's prompt cache (off by default since it ran out of memory; the flag forces it
off when ``CONTEXTEVOLVE_PROMPT_CACHE_MB`` is set) and the Navigator's and Generator's servers of their
own; ``--logits-all`` has the servers keep every prompt token's logits, as llama-cpp-python's server does
unless told otherwise. A run with ``--edit-form full --no-stop --no-prompt-cache --one-server --logits-all
--max-tokens navigator=160`` measures the system as it was before them (but for its model repairs, deleted
since: docs/decisions/repair-restart.md), beside one with the defaults;
``PYTHONPATH=DIR`` with an AVX2 build of llama-cpp-python installed in DIR (``pip install --no-deps
--target DIR``) adds the build it ran on then. The JSON records which build, prompt cache and servers
served the run (``llama_cpp_build``, ``prompt_cache``, ``embedded_servers``, ``logits_all``).

``--server python`` serves the embedded model with llama-cpp-python's server, as every run did before
llama.cpp's own server (``native``, the default where ``make setup`` built it) became the default;
``--no-speculative`` keeps the native server from drafting tokens (``CONTEXTEVOLVE_SPECULATIVE=none``).
``--workers W`` runs W workers side by side (each its own loop over the one Evolve Buffer, no barrier between
them), against a server with W slots on ``native``, which decodes the workers' requests in one batch; seconds
per iteration are then the run's seconds over its iterations, so they compare with a one-worker run's as tries
per hour. The JSON records ``server_kind``, ``speculative`` and ``workers``.

The figures are also written to ``RUN_DIR/effectiveness.json``; ``--table DIR ...`` prints one
markdown table over several such runs (no LLM needed).

Usage:
    python benchmarks/effectiveness.py --task model_placement [--iterations 8] [--seed 0]
        [--no-import-fixes] [--edit-form full|diff|functions] [--one-server] [--logits-all]
        [--workers W] [--server native|python] [--no-speculative]
        [--base-url URL --model NAME] [--run-dir DIR]
    python benchmarks/effectiveness.py --table runs/eff-*
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import time
import typing
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextevolve.graph.settings import SearchSettings
from contextevolve.llm import serving
from contextevolve.loop.behaviour import same_results
from contextevolve.memory.records import ProgramRecord
from contextevolve.nodes.navigate import evaluated_steps
from contextevolve.program.forms import EDIT_FORMS
from contextevolve.roles import USAGE_ROLES, role_tokens, total_tokens
from contextevolve.tasks.registry import get_task
from contextevolve.timing import LLMCall, add_seconds, llm_by_role, wall

RESULT_FILE = "effectiveness.json"
SEARCH_TYPES = typing.get_type_hints(SearchSettings)


def choices(setting: str) -> tuple[str, ...]:
    """The values a ``Literal`` search setting takes (the flag's choices come from its declaration)."""
    return typing.get_args(SEARCH_TYPES[setting])


PAPER_AGENTS = {"behavioural_twins": False, "summarize_invalid": True, "navigator_sampler_share": 1.0}
"""The settings of ``--paper-agents``: the context agents asked as in the paper where a setting says so
(no token share cap, the Summarizer for invalid children), no behavioural twins."""
COLUMNS = ("task", "R", "mode", "iters", "valid", "valid rate", "new valid", "new valid/10k tok",
           "repairs ok/tried", "pre-check stops", "duplicates", "improvements", "initial", "best",
           "tokens/iter", "tokens/evaluated", "code tokens/iter", "median code tokens", "tokens/valid child",
           "s/iter", "median s/iter")


def figures(run_dir: Path, seconds_per_iteration: float | None, settings: dict) -> dict:
    """The effectiveness figures of the run stored in ``run_dir`` (its ``programs.jsonl``)."""
    records = [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]
    task = get_task(settings["task"])
    initial, children = records[0], [r for r in records if r["iteration"] > 0]
    best, improvements = initial["combined_score"], 0
    for child in children:
        if child["status"] == "ok" and task.better(child["combined_score"], best):
            best, improvements = child["combined_score"], improvements + 1
    valid = sum(c["status"] == "ok" for c in children)
    evaluated = evaluated_steps([ProgramRecord.model_validate(c) for c in children])  # a peer's "candidates"
    new_valid = behaviourally_new(task, records)
    by_role: dict[str, int] = {}
    for child in children:
        for role, counts in child.get("tokens", {}).items():
            by_role[role] = by_role.get(role, 0) + role_tokens(counts)
    tokens = sum(total_tokens(c.get("tokens")) for c in children)
    n = max(len(children), 1)
    return {
        "task": settings["task"], "mode": settings.get("edit_form") or settings.get("generation_mode"),
        "seed": settings.get("seed"),
        "iterations": len(children),
        "valid": valid, "valid_rate": valid / n, "new_valid": new_valid,
        "new_valid_per_10k_tokens": 10_000 * new_valid / tokens if tokens else None,
        "behavioural_twins": sum(bool(c.get("behavioural_twin_of")) for c in children),
        "asked_after_no_effect": sum(a.get("method") == "no_effect" for c in children
                                     for a in c.get("attempts", [])),
        "repairs_attempted": sum(a.get("method") != "no_effect"
                                 for c in children for a in c.get("attempts", [])),
        "repairs_succeeded": sum(1 for c in children if c["status"] == "ok" and any(
            a.get("method") != "no_effect" for a in c.get("attempts", []))),
        "precheck_stops": sum(c.get("prechecks_failed", 0) for c in children),
        "duplicates": sum(ProgramRecord.model_validate(c).failure_kind == "twin" for c in children),
        "improvements": improvements, "initial": initial["combined_score"], "best": best,
        "higher_is_better": task.higher_is_better,
        "tokens_per_iteration": {role: by_role.get(role, 0) / n for role in USAGE_ROLES},
        "tokens_per_iteration_total": tokens / n,
        "generator_completion_per_iteration": sum(
            c.get("tokens", {}).get(role, {}).get("completion", 0) for c in children
            for role in ("generator", "repair")) / n,
        "tokens_per_valid_child": tokens / valid if valid else None,
        "evaluated": evaluated,
        "tokens_per_evaluated_child": tokens / evaluated if evaluated else None,
        "seconds_per_iteration": seconds_per_iteration,
        "median_seconds_per_iteration": _median([wall(c["seconds"]) for c in children if c.get("seconds")]),
        "median_generated_tokens_per_iteration": _median([sum(
            c.get("tokens", {}).get(role, {}).get("completion", 0) for role in ("generator", "repair"))
            for c in children]),
        "seconds_by_phase_per_iteration": {k: v / n for k, v in sorted(functools.reduce(
            add_seconds, (c.get("seconds", {}) for c in children), {}).items())},
        "llm_by_role_per_iteration": {role: {k: v / n for k, v in row.items()}
                                      for role, row in _llm(children).items()},
        "statuses": [c["status"] for c in children],
        "reasons": [c["reason"][:160] for c in children if c["status"] != "ok"],
    }


def behaviourally_new(task, records: list[dict]) -> int:
    """Valid children whose results differ from every earlier program's (the initial one included)."""
    seen: list[ProgramRecord] = []
    new = 0
    for record in (ProgramRecord.model_validate(r) for r in records):
        if record.status != "ok":
            continue
        if record.iteration > 0 and not any(same_results(task, record, other) for other in seen):
            new += 1
        seen.append(record)
    return new


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _llm(records: list[dict]) -> dict[str, dict[str, float]]:
    """LLM calls, seconds and tokens by usage role (:func:`contextevolve.timing.llm_by_role`)."""
    return llm_by_role(LLMCall.model_validate(c) for r in records for c in r.get("llm_calls", []))


def row(f: dict) -> list[str]:
    """The table cells of one run's figures ``f``, in the order of :data:`COLUMNS`."""
    per_valid = f"{f['tokens_per_valid_child']:,.0f}" if f["tokens_per_valid_child"] else "-"
    secs = f"{f['seconds_per_iteration']:.0f}" if f["seconds_per_iteration"] else "-"
    code = f.get("generator_completion_per_iteration")
    # R: an older run's model repairs per child (runs before their restart only fixed)
    repairs = str(f.get("repair_attempts") or 0) + (" fix-only" if (f.get("repair_attempts") or 0) >= 2
                                                    and not f.get("repair_restart") else "")
    per_10k = f.get("new_valid_per_10k_tokens")
    return [f["task"], repairs, str(f["mode"]), str(f["iterations"]), str(f["valid"]),
            f"{100 * f['valid_rate']:.0f} %", str(f.get("new_valid", "-")),
            "-" if per_10k is None else f"{per_10k:.2f}",
            f"{f['repairs_succeeded']}/{f['repairs_attempted']}",
            str(f["precheck_stops"]), str(f["duplicates"]), str(f["improvements"]), f"{f['initial']:.6g}",
            f"{f['best']:.6g}", f"{f['tokens_per_iteration_total']:,.0f}",
            _num(f.get("tokens_per_evaluated_child")),
            "-" if code is None else f"{code:,.0f}",
            _num(f.get("median_generated_tokens_per_iteration")), per_valid, secs,
            _num(f.get("median_seconds_per_iteration"))]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def table(results: list[dict]) -> str:
    """A markdown table of the runs' figures, with the valid-child rate over them when there are several."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row(f)) + " |" for f in results]
    children = sum(f["iterations"] for f in results)
    valid = sum(f["valid"] for f in results)
    if len(results) > 1 and children:
        # with the task's tolerance
        better = sum(get_task(f["task"]).better(f["best"], f["initial"]) for f in results)
        lines.append(f"\nover these runs: valid-child rate {100 * valid / children:.0f} % "
                     f"({valid}/{children}); best > initial in {better}/{len(results)} runs")
    return "\n".join(lines)


def report(f: dict) -> str:
    """The printed report of one run: its table, what served it, and its figures by role and phase."""
    roles = ", ".join(f"{role} {v:,.0f}" for role, v in f["tokens_per_iteration"].items())
    phases = ", ".join(f"{k} {v:.1f}" for k, v in f["seconds_by_phase_per_iteration"].items())
    llm = ", ".join(f"{role} {r['calls']:.2f} calls {r['seconds']:.1f} s {r['completion']:.0f} generated"
                    for role, r in f["llm_by_role_per_iteration"].items())
    return (f"{table([f])}\n\nserved by: {serving.text(f)}\ntokens per iteration by role: {roles}\n"
            f"seconds per iteration by phase: {phases}\nLLM per iteration by role: {llm}\n"
            f"statuses: {' '.join(f['statuses'])}\n" + "".join(f"  failed: {r}\n" for r in f["reasons"]))


def main() -> int:
    """Run the search with the options given and print its figures, or ``--table`` over finished runs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="model_placement")
    parser.add_argument("--iterations", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-import-fixes", action="store_true",
                        help="add no missing import without a model (SearchSettings.import_fixes = False)")
    parser.add_argument("--edit-form", choices=tuple(EDIT_FORMS), default=None, help="default: RunContext's")
    parser.add_argument("--no-stop", action="store_true",
                        help="let the Generator write past the end of its code block "
                             "(SearchSettings.stop_at_code_end)")
    parser.add_argument("--stale-after", type=int, default=None,
                        help="leave out of parent selection a parent whose last N children were twins; "
                             "0: never (SearchSettings.stale_after; default: RunContext's)")
    parser.add_argument("--stale-rest", type=int, default=None,
                        help="iterations a stale parent is left out for (SearchSettings.stale_rest; default: "
                             "RunContext's; a rest longer than the run: for good, as before the rest)")
    parser.add_argument("--parent-selection", choices=choices("parent_selection"),
                        default=None, help="how the parent is picked (SearchSettings.parent_selection; "
                                           "default: RunContext's)")
    parser.add_argument("--unguided-hotter", type=float, default=None,
                        help="temperature added to a first ask without guidance; 0: none "
                             "(SearchSettings.unguided_hotter; default: RunContext's)")
    parser.add_argument("--mutation", action="append", default=[], metavar="TEXT",
                        help="a change an ask after a twin may name; repeated, the list that replaces the "
                             "built-in one (SearchSettings.mutations)")
    parser.add_argument("--paper-agents", action="store_true",
                        help="Navigator and Sampler without a token share cap, Summarizer for invalid "
                             "children, no behavioural twins")
    parser.add_argument("--no-prompt-cache", action="store_true",
                        help="start the embedded server without its prompt cache "
                             "(CONTEXTEVOLVE_PROMPT_CACHE_MB=0)")
    parser.add_argument("--one-server", action="store_true",
                        help="one embedded server for every agent "
                             "(ModelSettings.embedded_server_per_role = False)")
    parser.add_argument("--logits-all", action="store_true",
                        help="the embedded servers keep every prompt token's logits, llama-cpp-python's "
                             "default (CONTEXTEVOLVE_LOGITS_ALL=1)")
    parser.add_argument("--workers", type=int, default=1, metavar="W",
                        help="workers producing children side by side (Parallelism.workers); seconds per "
                             "iteration are then the run's seconds over its iterations")
    parser.add_argument("--server", choices=["native", "python"],
                        help="the embedded server: llama.cpp's own (one slot per worker, drafts from the "
                             "prompt) or llama-cpp-python's (CONTEXTEVOLVE_LLAMA_SERVER); default: native "
                             "where installed")
    parser.add_argument("--no-speculative", action="store_true",
                        help="the native server drafts no tokens (CONTEXTEVOLVE_SPECULATIVE=none)")
    parser.add_argument("--max-tokens", action="append", default=[], metavar="ROLE=N",
                        help="completion-token cap of one role (e.g. navigator=160, the cap before it was "
                             "lowered)")
    parser.add_argument("--log-prompts", action="store_true",
                        help="keep every prompt and reply in RUN_DIR/prompts.jsonl")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--run-dir", help="default runs/eff-TASK-MODE-seedS")
    parser.add_argument("--table", nargs="+", metavar="RUN_DIR", help="print one table over finished runs")
    args = parser.parse_args()
    if args.table:
        found = [Path(d) / RESULT_FILE for d in args.table if (Path(d) / RESULT_FILE).exists()]
        print(table([json.loads(p.read_text()) for p in found]))
        return 0

    from contextevolve.api import evolve
    from contextevolve.graph.context import flat_settings, upgraded
    from contextevolve.graph.settings import DEFAULT_MAX_TOKENS

    caps = {role: int(n) for role, _, n in (pair.partition("=") for pair in args.max_tokens)}
    if args.no_prompt_cache:
        os.environ["CONTEXTEVOLVE_PROMPT_CACHE_MB"] = "0"
    if args.logits_all:
        os.environ["CONTEXTEVOLVE_LOGITS_ALL"] = "1"
    if args.server:
        os.environ["CONTEXTEVOLVE_LLAMA_SERVER"] = args.server
    if args.no_speculative:
        os.environ["CONTEXTEVOLVE_SPECULATIVE"] = "none"
    mode = args.edit_form or SearchSettings.edit_form
    old = "".join(["-noimports" if args.no_import_fixes else "",
        "-nostop" if args.no_stop else "", "-nocache" if args.no_prompt_cache else "",
        "-oneserver" if args.one_server else "", "-logitsall" if args.logits_all else "",
        f"-workers{args.workers}" if args.workers != 1 else "",
        f"-{args.server}" if args.server else "", "-nospec" if args.no_speculative else "",
        f"-stale{args.stale_after}" if args.stale_after is not None else "",
        f"-rest{args.stale_rest}" if args.stale_rest is not None else "",
        f"-{args.parent_selection}" if args.parent_selection else "",
        f"-hotter{args.unguided_hotter:g}" if args.unguided_hotter is not None else "",
        f"-mutations{len(args.mutation)}" if args.mutation else "",
        "-paperagents" if args.paper_agents else ""])
    run_dir = Path(args.run_dir or f"runs/eff-{args.task}-{mode}{old}-seed{args.seed}")
    marks: dict[str, float] = {}
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip() or None

    def on_update(node: str, _update: dict) -> None:
        if node == "initialize":  # every worker starts with it; the first to finish finds c_0 committed
            marks.setdefault("start", time.perf_counter())

    search = {k: v for k, v in (("stale_after", args.stale_after), ("stale_rest", args.stale_rest),
                                ("parent_selection", args.parent_selection),
                                ("unguided_hotter", args.unguided_hotter),
                                ("mutations", tuple(args.mutation) or None)) if v is not None}
    if args.paper_agents:
        search.update(PAPER_AGENTS)
    evolve(args.task, iterations=args.iterations, run_dir=run_dir, seed=args.seed,
           import_fixes=not args.no_import_fixes, edit_form=mode,
           base_url=args.base_url, model=args.model, log_prompts=args.log_prompts or None,
           on_update=on_update, stop_at_code_end=not args.no_stop, max_tokens={**DEFAULT_MAX_TOKENS, **caps},
           embedded_server_per_role=False if args.one_server else None,
           workers=args.workers, **search)
    settings = flat_settings(upgraded(json.loads((run_dir / "run.json").read_text())))
    per_iteration = (time.perf_counter() - marks["start"]) / args.iterations if "start" in marks else None
    result = {**figures(run_dir, per_iteration, settings), "commit": commit,
              "stop_at_code_end": not args.no_stop,
              "import_fixes": settings.get("import_fixes"),
              "stale_after": settings.get("stale_after"), "unguided_hotter": settings.get("unguided_hotter"),
              "stale_rest": settings.get("stale_rest"), "parent_selection": settings.get("parent_selection"),
              **{k: settings.get(k) for k in PAPER_AGENTS},
              **{k: v for k, v in serving.recorded(run_dir)[-1].items() if k not in ("at", "resumed")}}
    (run_dir / RESULT_FILE).write_text(json.dumps(result, indent=2))
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
