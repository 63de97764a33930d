"""Command line: ``contextevolve run | status | report | evaluate | baselines | compare | serve | tasks``.

Exit codes: 0 ok; 1 ``evaluate``: the program is not ok; 2 bad input (unknown option, task or setting,
unusable run directory, conflicting ``--task`` on ``--resume``), nothing written; 3 an LLM endpoint is
unavailable (down, 5xx / 429 after the retries, or refusing requests): one line names it and the
``contextevolve run --run-dir DIR --resume`` command that continues the run; 130 interrupted. ``run --resume``
takes the task and every setting from ``run.json``; flags given override them (``--task`` may only repeat the
run's task).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import sys
from pathlib import Path

from rich.markup import escape

from contextevolve.commands import (
    add_problem_flags,
    cmd_baselines,
    cmd_evaluate,
    cmd_serve,
    cmd_tasks,
    console,
    problem_source,
)
from contextevolve.display import RunProgress, seconds_table, tokens_table
from contextevolve.evaluation.executors import ExecutorError
from contextevolve.flags import (
    add_limit_flags,
    add_run_flags,
    parse_prices,
    run_settings,
    settings_from_flags,
)
from contextevolve.graph.context import DEFAULT_TASK
from contextevolve.llm import serving
from contextevolve.llm.faults import EndpointUnavailable
from contextevolve.llm.pricing import dollars

EXIT_BAD_INPUT = 2
"""Exit code for bad input (nothing was written)."""
EXIT_ENDPOINT_UNAVAILABLE = 3
"""Exit code when an LLM endpoint is unavailable; the run is checkpointed and ``--resume`` continues it."""



def cmd_run(args: argparse.Namespace) -> int:
    """``contextevolve run``: run or resume an evolution with a progress bar, then write its report."""
    from contextevolve.api import evolve, saved_settings
    from contextevolve.graph.context import RunContext

    settings = run_settings(args)
    source = problem_source(args, args.eval_timeout_s)
    total = args.iterations
    if total is None and source is not None:
        total = source.settings.get("max_iterations")
    if total is None:  # the run's own budget on --resume, else the default
        total = (saved_settings(args.run_dir) if args.resume and args.run_dir else {}).get(
            "max_iterations", RunContext.max_iterations)
    saved = saved_settings(args.run_dir) if args.resume and args.run_dir else {}
    workers = settings.get("workers") or (saved.get("parallelism") or {}).get("workers") or 1
    view = None
    if args.serve:  # the run's own view: it can pause the run and write guidance
        from contextevolve.api import default_run_dir
        from contextevolve.loop.steering import steering_for
        from contextevolve.view.server import ViewServer

        args.run_dir = args.run_dir or str(default_run_dir(args.task, source))
        view = ViewServer(args.run_dir, port=args.serve_port, steering=steering_for(args.run_dir))
        console.print(f"live view: {view.url} (pause, resume, write guidance)")
    try:
        with RunProgress(console, total, workers) as progress:
            result = evolve(args.task, iterations=args.iterations, run_dir=args.run_dir, resume=args.resume,
                            on_commit=progress.on_commit, on_phase=progress.on_phase, problem=source,
                            **settings)
    finally:
        if view is not None:
            view.close()
            console.print(f"the live view closed with the run: `contextevolve serve {args.run_dir}` shows "
                          "it again")
    console.print(f"\n[bold]Run finished[/bold] ({result.stop_reason}) in {result.seconds:.0f} s: "
                  f"{result.iterations} iterations, {result.programs} programs")
    console.print(f"initial combined score: {result.initial_score}")
    console.print(f"best combined score:    {result.best_score}  ({result.best_id})")
    console.print(tokens_table(result.tokens))
    if result.cost is not None:
        console.print(f"cost: {dollars(result.cost)} (at the run's prices)")
    console.print(f"best program: {result.best_path}")
    served = serving.recorded(result.run_dir)
    if served:
        console.print(f"served by: {escape(serving.text(served[-1]))}", soft_wrap=True)
    if not args.no_report:
        from contextevolve.report import write_report

        try:
            console.print(f"report: {write_report(result.run_dir)}")
        except Exception as exc:  # noqa: BLE001 - the run is saved; `contextevolve report` can retry
            why = escape(f"{type(exc).__name__}: {exc}")
            console.print(f"[yellow]warning:[/yellow] no report written ({why}); "
                          f"try `contextevolve report {result.run_dir}`", soft_wrap=True)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``contextevolve report RUN_DIR``: write the run's HTML report and print its path."""
    from contextevolve.report import write_report

    print(write_report(args.run_dir, args.out))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """``contextevolve status RUN_DIR``: print a run directory's summary (``--json``: as JSON)."""
    from contextevolve.api import run_status

    status = run_status(args.run_dir)
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    console.print(f"[bold]{status['run_dir']}[/bold] ({status['task']})")
    per_prompt = (f" from {status['prompts']} prompts ({status['children_per_prompt']} children per prompt)"
                  if status.get("prompts") else "")
    console.print(f"iterations: {status['iterations']}  programs: {status['programs']}{per_prompt}  "
                  f"statuses: {status['statuses']}  repairs: {status['repairs']['attempted']} attempted, "
                  f"{status['repairs']['succeeded']} children fixed  "
                  f"behavioural twins: {status['behavioural_twins']}")
    if status["failure_kinds"]:
        kinds = sorted(status["failure_kinds"].items())
        console.print("failures by kind: " + ", ".join(f"{k} {n}" for k, n in kinds))
    console.print(f"initial score: {status['initial_score']}  best score: {status['best_score']} "
                  f"({status['best_id']})")
    if status["served_by"]:
        starts = len(status["served_by"])
        console.print(f"served by{f' (the latest of {starts} starts)' if starts > 1 else ''}: "
                      f"{escape(serving.text(status['served_by'][-1]))}", soft_wrap=True)
    for worker, at in sorted(status["workers"].items()):
        doing = (f"at {at['next'][0]} of {at['child_id']}" if at["next"] and at["child_id"]
                 else f"at {at['next'][0]}" if at["next"] else f"stopped ({at['stop_reason']})")
        console.print(f"worker {worker}: {doing}; {at['committed']} children committed", soft_wrap=True)
    console.print(tokens_table(status["tokens"]))
    if status["cost"] is not None:
        console.print(f"cost: {dollars(status['cost'])} (at the run's prices)")
    if status["seconds"]:
        console.print(seconds_table(status["seconds"], status["llm_by_phase"]))
        console.print(f"median seconds per iteration: {status['seconds_per_iteration']}")
    return 0


def _csv(kind):
    """An argparse type that reads a comma-separated list of ``kind``."""

    def parse(text: str) -> list:
        try:
            return [kind(part.strip()) for part in text.split(",") if part.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a comma-separated list of {kind.__name__}: {text!r}") from None
    return parse


def cmd_compare(args) -> int:
    """``contextevolve compare``: run the systems side by side on one task, a line per finished run."""
    from contextevolve.compare.own_run import check_contextevolve_settings, check_variant
    from contextevolve.compare.runner import compare
    from contextevolve.compare.schema import CompareSettings
    from contextevolve.tasks.registry import get_task

    source = problem_source(args)
    if source is None and not args.task:
        raise ValueError("compare needs --task NAME or your own problem (--problem DIR)")
    own = settings_from_flags(args.contextevolve_args or "", "--contextevolve-args")
    check_contextevolve_settings(own)  # before the problem is staged into --out
    check_variant(args.variant or "", args.systems)
    task = source.stage(Path(args.out) / "problem") if source is not None else args.task
    settings = CompareSettings(
        task=task, systems=args.systems, candidates=args.iterations, seeds=args.seeds, out=args.out,
        base_url=args.base_url,
        api_key=os.environ.get("CONTEXTEVOLVE_API_KEY") or os.environ.get("OPENAI_API_KEY"),
        model=args.model, temperature=args.temperature, top_p=args.top_p, top_k=args.top_k,
        token_budget=args.token_budget, cost_budget=args.cost_budget, timeout_s=args.system_timeout,
        time_budget_s=args.time_budget * 60 if args.time_budget is not None else None,
        log_prompts=args.log_prompts, prices=parse_prices(args.price),
        contextevolve_settings=own, variant=args.variant or "")
    get_task(settings.task)  # an unknown task fails before anything starts

    def show(result) -> None:
        """Print one finished run's line."""
        per_valid = f"{result.tokens // result.valid:,}" if result.valid else "–"
        best, initial = (("–" if v is None else f"{v:.6g}") for v in (result.best, result.initial))
        console.print(f"{result.label}: best {best} (initial {initial}), "
                      f"{result.valid}/{result.budget} valid ({result.candidates} evaluated), "
                      f"{result.valid_changed} changed, "
                      f"{result.tokens:,} tokens ({per_valid} per valid), {result.wall_s:.0f} s"
                      + (f" [{escape(result.stopped)}]" if result.stopped else ""), soft_wrap=True)

    compare(settings, on_result=show)
    console.print(f"results: {settings.out}/results.md, results.json, best_so_far.png, tokens.png")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The ``contextevolve`` argument parser; each subcommand sets ``fn`` (its handler) and ``parser``."""
    parser = argparse.ArgumentParser(prog="contextevolve", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run or resume an evolution",
                         usage="%(prog)s [--task TASK | --problem DIR] [--iterations N] [--run-dir DIR] "
                               "[--resume] [OPTION]...")
    run.add_argument("--task",
                     help=f"built-in task to evolve (default {DEFAULT_TASK}; on --resume: the run's own)")
    run.add_argument("--iterations", type=int, metavar="N",
                     help="iteration budget of the whole run (default 10; on --resume: the run's own)")
    run.add_argument("--run-dir", metavar="DIR", help="run directory (default runs/TASK-TIMESTAMP)")
    run.add_argument("--resume", action="store_true",
                     help="continue the run in --run-dir from its checkpoint, under its run.json's settings")
    add_run_flags(run)
    run.add_argument("--no-report", action="store_true",
                     help="do not write RUN_DIR/report.html and its PNGs at the end")
    run.add_argument("--serve", action="store_true",
                     help="serve the run's live view while it runs, with pause, resume and guidance writing")
    run.add_argument("--serve-port", type=int, default=8765, metavar="PORT",
                     help="port of --serve's view on 127.0.0.1 (default 8765; 0: any free one)")
    add_problem_flags(run)
    run.set_defaults(fn=cmd_run, parser=run)

    report = sub.add_parser("report", help="write a self-contained HTML report (and PNGs) of a run directory")
    report.add_argument("run_dir")
    report.add_argument("--out", help="HTML file to write (default RUN_DIR/report.html; PNGs beside it)")
    report.set_defaults(fn=cmd_report, parser=report)

    status = sub.add_parser("status", help="summarise a run directory")
    status.add_argument("run_dir")
    status.add_argument("--json", action="store_true", help="print the summary as JSON")
    status.set_defaults(fn=cmd_status, parser=status)

    evaluate = sub.add_parser("evaluate", help="score one program file and print its metrics as JSON")
    evaluate.add_argument("--task", help="built-in task (or give your own problem)")
    evaluate.add_argument("file")
    evaluate.add_argument("--timeout", type=float, metavar="S", help="wall-clock limit, seconds")
    add_problem_flags(evaluate)
    add_limit_flags(evaluate)
    evaluate.set_defaults(fn=cmd_evaluate, parser=evaluate)

    base = sub.add_parser("baselines", help="score the Table 1 baselines of every task (or one)")
    base.add_argument("--task", help="only this task")
    base.add_argument("--one-shot", action="store_true",
                      help="add LLM one-shot (one Generator call per task)")
    base.add_argument("--base-url", metavar="URL",
                      help="OpenAI-compatible endpoint for --one-shot (default: env, else embedded)")
    base.add_argument("--model", help="model name for --one-shot")
    base.add_argument("--seed", type=int, metavar="N", help="seed sent to the endpoint for --one-shot")
    base.add_argument("--json", action="store_true", help="print JSON instead of tables")
    add_problem_flags(base)
    base.set_defaults(fn=cmd_baselines, parser=base)

    comp = sub.add_parser("compare", help="ContextEvolve and its peers side by side on one task "
                                          "(needs the [peers] extra)",
                          usage="%(prog)s (--task TASK | --problem DIR) --out DIR [OPTION]...")
    comp.add_argument("--task", help="built-in task (or give your own problem)")
    comp.add_argument("--systems", type=_csv(str), default=["contextevolve", "openevolve", "gepa"],
                      metavar="LIST",
                      help="comma-separated systems among contextevolve, openevolve, openevolve-full "
                           "(whole programs), gepa, shinka, adaevolve, evox, adaevolve-full, evox-full and "
                           "contextevolve-no-{summarizer,navigator,sampler} "
                           "(default contextevolve,openevolve,gepa)")
    comp.add_argument("--iterations", type=int, default=8, metavar="N",
                      help="candidate budget per system and seed (default 8)")
    comp.add_argument("--seeds", type=_csv(int), default=[0], metavar="LIST",
                      help="comma-separated seeds (default 0)")
    comp.add_argument("--out", required=True, metavar="DIR",
                      help="output folder (must not hold results yet)")
    comp.add_argument("--base-url", metavar="URL",
                      help="OpenAI-compatible endpoint for every system (default: the embedded LLM)")
    comp.add_argument("--model", help="model name (default: the embedded model's)")
    comp.add_argument("--temperature", type=float, default=0.8, metavar="X",
                      help="temperature of code-writing requests (default 0.8)")
    comp.add_argument("--top-p", type=float, metavar="X",
                      help="set on every request (default 0.8 on the embedded model)")
    comp.add_argument("--top-k", type=int, metavar="N",
                      help="set on every request (default 20 on the embedded model)")
    comp.add_argument("--token-budget", type=int, metavar="N",
                      help="same-token-budget mode: tokens per system and seed")
    comp.add_argument("--time-budget", type=float, metavar="MINUTES",
                      help="same-time-budget mode: minutes per system and seed")
    comp.add_argument("--cost-budget", type=float, metavar="USD",
                      help="same-cost-budget mode: dollars per system and seed (needs the model's --price)")
    comp.add_argument("--system-timeout", type=float, metavar="S",
                      help="wall-clock limit of one system run, seconds")
    comp.add_argument("--price", action="append", default=[], metavar="MODEL=INPUT,OUTPUT",
                      help="dollars per million prompt and completion tokens of the model (each run's cost)")
    comp.add_argument("--contextevolve-args", metavar="FLAGS",
                      help="run flags for every ContextEvolve system, as `contextevolve run` takes them, in "
                           "one quoted argument (e.g. --contextevolve-args='--parent-selection tournament'); "
                           "the comparison's own options (seed, model, sampling, budgets) are refused there")
    comp.add_argument("--variant", metavar="NAME",
                      help="name for these ContextEvolve settings: its systems run and are shown as "
                           "<system>+NAME (e.g. contextevolve+tournament-s0), beside the rows of other "
                           "settings in the same --out")
    comp.add_argument("--log-prompts", action="store_true",
                      help="keep ContextEvolve's prompts and replies in "
                           "OUT/<system>-s<seed>/run/prompts.jsonl")
    add_problem_flags(comp)
    comp.set_defaults(fn=cmd_compare, parser=comp)

    serve = sub.add_parser("serve", help="a live web view of a run or a comparison folder (offline, local)")
    serve.add_argument("folder", metavar="FOLDER", help="a run directory or a `compare --out` folder")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this "
                                                          "machine only)")
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free one)")
    serve.set_defaults(fn=cmd_serve, parser=serve)

    tasks = sub.add_parser("tasks", help="list the tasks")
    tasks.set_defaults(fn=cmd_tasks, parser=tasks)
    return parser


def _unknown_arguments(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """The message for arguments ``parser`` does not know, naming the nearest option of each."""
    options = sorted(o for action in parser._actions for o in action.option_strings if o.startswith("--"))
    flags = [arg.partition("=")[0] for arg in extra if arg.startswith("-")]
    if not flags:
        return f"unexpected argument{'s' if len(extra) > 1 else ''}: {' '.join(extra)}"
    parts = []
    for flag in flags:
        near = difflib.get_close_matches(flag, options, n=1)
        parts.append(flag + (f" (did you mean {near[0]}?)" if near else ""))
    return f"unknown option{'s' if len(flags) > 1 else ''} {', '.join(parts)}; see `{parser.prog} --help`"


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``contextevolve`` command; returns the exit code (see the module docstring)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        message = _unknown_arguments(args.parser, extra)
        console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
        return EXIT_BAD_INPUT
    try:
        return args.fn(args)
    except (ValueError, KeyError, FileNotFoundError, ExecutorError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        console.print(f"[red]error:[/red] {escape(str(message))}", soft_wrap=True)
        return EXIT_BAD_INPUT
    except EndpointUnavailable as exc:
        resume = exc.resume_command()
        hint = f"; the run is saved: continue it with `{resume}`" if resume else ""
        console.print(f"[red]error:[/red] {escape(str(exc) + hint)}", soft_wrap=True)
        return EXIT_ENDPOINT_UNAVAILABLE
    except KeyboardInterrupt:
        console.print("interrupted; continue with --resume")
        return 130


if __name__ == "__main__":
    sys.exit(main())
