"""Repair success on real failures, without whole runs: replay stored failed children through one repair.

A full effectiveness run (``benchmarks/effectiveness.py``) takes a long time on 2 cores, and
only a few of its children fail in a way a repair could fix, so it says little about a repair
setting. This script takes the failures the Generator actually produced in finished runs — the
first version of every child that went to repair, as stored in its ``attempts`` — scores each
again on our side (pre-checks, then the task's evaluation) to get its reason and traceback, and
asks the repair prompt (:mod:`contextevolve.prompts.repair`) for one fix per setting and sample.
A fix counts as a success when the repaired program passes the pre-checks and its evaluation
ends ``ok``.

Printed per generator temperature: cases, fixes that became valid, fixes that were not programs
(edits not applicable / no code), mean completion tokens, seconds per repair. A NameError the
mechanical import fix handles (:mod:`contextevolve.program.fixes`) is left out: the import is added first,
without the model.

Usage:
    python benchmarks/repair_replay.py runs/eff-* [--temperatures 0.2,0.8] [--samples 2]
        [--edit-form full|diff|functions] [--base-url URL --model NAME] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import MalformedReply, call_role
from contextevolve.loop.generation import whole_program
from contextevolve.nodes.evaluate import run_evaluation
from contextevolve.program.fixes import missing_import
from contextevolve.program.forms import EDIT_FORMS, edit_form
from contextevolve.program.replies import EditError
from contextevolve.prompts import repair as prompt
from contextevolve.tasks.base import Evaluation
from contextevolve.tasks.prechecks import precheck
from contextevolve.tasks.registry import get_task


@dataclass
class Case:
    """One failed first version of a child: the program a repair starts from."""

    run: str
    child: str
    task: str
    source: str


def cases(run_dirs: list[Path]) -> list[Case]:
    """The first failing version of every child of ``run_dirs`` that went to repair (source kept)."""
    found = []
    for run in run_dirs:
        if not (run / "programs.jsonl").exists() or not (run / "run.json").exists():
            continue
        task = json.loads((run / "run.json").read_text())["task"]
        records = {}
        for line in (run / "programs.jsonl").read_text().splitlines():
            record = json.loads(line)
            records[record["id"]] = record  # the last line of an id is its final state
        for record in records.values():
            attempts = record.get("attempts") or []
            if attempts and attempts[0].get("source"):
                found.append(Case(run.name, record["id"], task, attempts[0]["source"]))
    return found


def score(ctx: RunContext, source: str) -> Evaluation:
    """Our verdict on ``source``: the pre-checks, then the full evaluation when they pass."""
    return precheck(get_task(ctx.task), source, ctx.sandbox) or run_evaluation(ctx, source)


def repair_once(ctx: RunContext, case: Case, failure: Evaluation, form_name: str) -> tuple[str, int, float]:
    """One repair of ``case`` in edit form ``form_name``: (outcome, completion tokens, seconds).

    The outcome is ``ok``, a failed status, or ``no program``.
    """
    task, form = get_task(case.task), edit_form(form_name)
    messages = prompt.messages(task.description, case.source, failure.reason, failure.traceback, form)
    start = time.perf_counter()
    try:
        reply = call_role("generator", messages, ctx, check=whole_program(case.source, form))
    except MalformedReply as exc:
        tokens = sum(u.get("completion", 0) for u in exc.usage.values())
        return "no program", tokens, time.perf_counter() - start
    seconds = time.perf_counter() - start
    tokens = sum(u.get("completion", 0) for u in reply.usage.values())
    try:
        fixed = form.build(case.source, reply.text, truncated=reply.truncated)
    except EditError:
        return "no program", tokens, seconds
    return score(ctx, fixed).status, tokens, seconds


def main(argv: list[str] | None = None) -> int:
    """Replay every stored failure through one repair per temperature and sample; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run directories of finished runs")
    parser.add_argument("--temperatures", default="0.2,0.8", help="generator temperatures to compare")
    parser.add_argument("--samples", type=int, default=2, help="repairs per case and temperature (seeds 0..)")
    parser.add_argument("--edit-form", choices=tuple(EDIT_FORMS), default="full")
    parser.add_argument("--limit", type=int, default=None, help="at most this many cases")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    args = parser.parse_args(argv)
    temperatures = [float(t) for t in args.temperatures.split(",")]
    chosen = cases(args.runs)[:args.limit]
    from contextevolve.llm import embedded

    rows: dict[float, list[tuple[str, int, float]]] = {t: [] for t in temperatures}
    replayed = 0
    try:
        for case in chosen:
            base = RunContext(task=case.task, base_url=args.base_url, model=args.model)
            failure = score(base, case.source)
            line = f"{case.run}/{case.child}: {failure.status} {failure.reason[:90]!r}"
            if failure.status == "ok" or missing_import(f"{failure.reason}\n{failure.traceback}"):
                print(line, "-> skipped (valid now, or the import fix handles it)", flush=True)
                continue
            replayed += 1
            for temperature in temperatures:
                for sample in range(args.samples):
                    ctx = RunContext(task=case.task, base_url=args.base_url, model=args.model, seed=sample,
                                     temperatures={"generator": temperature})
                    outcome = repair_once(ctx, case, failure, args.edit_form)
                    rows[temperature].append(outcome)
                    print(line, f"-> T={temperature} seed={sample}: {outcome[0]} ({outcome[1]} tok, "
                          f"{outcome[2]:.0f} s)", flush=True)
    finally:
        embedded.stop_shared_server()
    print(f"\n{replayed} failures replayed ({len(chosen)} found), {args.samples} repairs each per "
          f"temperature, edit form {args.edit_form}\n")
    print("| temperature | repairs | valid | not a program | completion tokens (mean) | s/repair (median) |")
    print("|---|---|---|---|---|---|")
    for temperature, outcomes in rows.items():
        if not outcomes:
            continue
        valid = sum(o[0] == "ok" for o in outcomes)
        broken = sum(o[0] == "no program" for o in outcomes)
        print(f"| {temperature} | {len(outcomes)} | {valid} ({valid / len(outcomes):.0%}) | {broken} | "
              f"{statistics.mean(o[1] for o in outcomes):.0f} | "
              f"{statistics.median(o[2] for o in outcomes):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
