"""The command line's problem flags and its scoring commands: ``evaluate``, ``baselines`` and ``tasks``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from contextevolve.flags import limit_settings

console = Console(stderr=True)
"""Where the command line prints progress, notes and errors (stderr; stdout keeps JSON output)."""


def add_problem_flags(parser: argparse.ArgumentParser) -> None:
    """Add the flags that name the user's own problem (instead of ``--task``), in a group of their own."""
    group = parser.add_argument_group("your own problem, in OpenEvolve's form (instead of --task)")
    group.add_argument("--problem", metavar="DIR",
                       help="folder holding initial_program.py, evaluator.py and optionally config.yaml")
    group.add_argument("--program", metavar="FILE", help="the initial program (overrides the folder's)")
    group.add_argument("--evaluator", metavar="FILE",
                       help="file whose evaluate(program_path) returns the metrics (overrides the folder's)")
    group.add_argument("--config", metavar="FILE",
                       help="OpenEvolve config.yaml, whose settings the flags override")
    group.add_argument("--description", metavar="TEXT|@FILE", help="the task description every agent sees")
    group.add_argument("--minimize", action="store_true", help="a lower score is better")


def problem_source(args: argparse.Namespace, timeout_s: float | None = None):
    """The user's problem the problem flags name, read and checked, its notes printed; None without them.

    Raises:
        ValueError: ``--task`` given too, or the problem is unusable (``ProblemError``, naming the file
            and why).
    """
    from contextevolve.tasks.problem.source import ProblemSource

    given = [args.problem, args.program, args.evaluator, args.config, args.description, args.minimize or None]
    if all(v is None for v in given):
        return None
    if getattr(args, "task", None):
        raise ValueError("give --task or your own problem (--problem, --program, --evaluator), not both")
    source = ProblemSource.read(args.problem, program=args.program, evaluator=args.evaluator,
                                config=args.config, description=args.description,
                                minimize=args.minimize or None, timeout_s=timeout_s)
    console.print(f"problem: {escape(source.spec.title)} (program {escape(str(source.program))}, evaluator "
                  f"{escape(str(source.evaluator))})", soft_wrap=True)
    for note in source.notes:
        console.print(f"note: {escape(note)}", soft_wrap=True)
    return source


def task_name(args: argparse.Namespace, staging: Path, timeout_s: float | None = None) -> str | None:
    """``args.task``, or the task name of the problem the flags name, staged into ``staging``."""
    source = problem_source(args, timeout_s)
    return source.stage(staging) if source is not None else args.task


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``contextevolve evaluate FILE``: score one program file and print its evaluation as JSON.

    Returns 0 when the program is ok, else 1.
    """
    import tempfile

    from contextevolve.tasks.registry import get_task

    with tempfile.TemporaryDirectory(prefix="ce-problem-") as staging:
        name = task_name(args, Path(staging) / "problem", args.timeout)
        if name is None:
            raise ValueError("evaluate needs --task NAME or your own problem (--problem DIR)")
        return _evaluate_file(args, get_task(name))


def _evaluate_file(args: argparse.Namespace, task) -> int:
    """Evaluate ``args.file`` on ``task`` under the sandbox flags and print the result as JSON."""
    path = Path(args.file)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read program file {path}: {exc}") from None
    from contextevolve.graph.context import RunContext

    limits = RunContext(eval_timeout_s=args.timeout, **limit_settings(args)).sandbox
    result = task.evaluate(source, limits=limits)
    print(json.dumps({"task": task.name, "file": str(path), **result.model_dump()}, indent=2))
    return 0 if result.status == "ok" else 1


def cmd_baselines(args: argparse.Namespace) -> int:
    """``contextevolve baselines``: score the Table 1 baselines of every task (or one) and print them."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ce-problem-") as staging:
        return _baselines(args, task_name(args, Path(staging) / "problem"))


def _baselines(args: argparse.Namespace, name: str | None) -> int:
    """Print the baselines of task ``name`` (None: every task) as tables, or as JSON with ``--json``."""
    from contextevolve.baselines import LABELS, baseline_table
    from contextevolve.tasks.registry import get_task

    rows = baseline_table([name] if name else None, include_one_shot=args.one_shot,
                          base_url=args.base_url, model=args.model, seed=args.seed)
    if args.json:
        print(json.dumps([{"task": r.task, "baseline": r.baseline, "tokens": r.tokens,
                           **r.evaluation.model_dump()} for r in rows], indent=2))
        return 0
    out = Console()
    for name in dict.fromkeys(r.task for r in rows):
        task = get_task(name)
        better = "higher" if task.higher_is_better else "lower"
        table = Table(title=f"{task.title} — combined score {better} is better")
        table.add_column("baseline")
        for m in task.metrics:
            table.add_column(f"{m.name} {'↑' if m.higher_is_better else '↓'}", justify="right")
        for col in ("score", "status", "eval s"):
            table.add_column(col, justify="right")
        for r in (r for r in rows if r.task == name):
            ev = r.evaluation
            status = ev.status if ev.status == "ok" else f"{ev.status}: {ev.reason[:60]}"
            table.add_row(LABELS.get(r.baseline, r.baseline), *(f"{ev.metrics.get(m.name, float('nan')):.4f}"
                                                                 for m in task.metrics),
                          f"{ev.combined_score:.4f}", status, f"{ev.seconds:.1f}")
        out.print(table)
    return 0


def cmd_tasks(args: argparse.Namespace) -> int:  # noqa: ARG001
    """``contextevolve tasks``: list the built-in tasks and how to bring your own problem."""
    from contextevolve.tasks.registry import get_task, task_names

    for name in task_names():
        task = get_task(name)
        metrics = ", ".join(f"{m.name} ({'higher' if m.higher_is_better else 'lower'} is better)"
                            for m in task.metrics)
        print(f"{name}\t{task.title}\t{metrics}")
    print("\nYour own problem (OpenEvolve's form: initial_program.py + evaluator.py [+ config.yaml]):\n"
          "  contextevolve run --problem DIR --iterations N    (see docs/own-problem.md; example: examples/)")
    return 0


def cmd_serve(args) -> int:
    """``contextevolve serve FOLDER``: the live view of a run or a comparison, until interrupted."""
    import threading

    from contextevolve.view.server import ViewServer

    server = ViewServer(args.folder, host=args.host, port=args.port)
    kind = server.watcher.kind
    console.print(f"serving the {'comparison' if kind == 'compare' else 'run'} in {server.folder} at "
                  f"{server.url} (Ctrl-C stops)", soft_wrap=True)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        console.print(f"[yellow]warning:[/yellow] listening on {args.host}: anyone who can reach this "
                      "machine can read the run", soft_wrap=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0
