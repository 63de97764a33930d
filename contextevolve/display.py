"""What the command line shows while a run goes on and after it (``run``, ``status``).

The progress bar and one line per child and iteration, and the tokens-by-role and seconds-by-phase
tables.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from contextevolve.llm.pricing import dollars
from contextevolve.memory.records import program_id
from contextevolve.roles import USAGE_ROLES, role_tokens, total_tokens
from contextevolve.timing import by_phase


def tokens_table(tokens: dict) -> Table:
    """Prompt, completion and total tokens of each role (``{role: {prompt, completion}}``)."""
    table = Table(title="Tokens by role")
    for col in ("role", "prompt", "completion", "total"):
        table.add_column(col, justify="right" if col != "role" else "left")
    for role in [*USAGE_ROLES, *sorted(set(tokens) - set(USAGE_ROLES))]:
        c = tokens.get(role, {})
        table.add_row(role, str(c.get("prompt", 0)), str(c.get("completion", 0)),
                      str(role_tokens(c)))
    return table


PHASE_LABELS = {"initialize": "evaluating and abstracting the initial program",
                "select_parent": "selecting parent", "navigate": "navigator: guidance",
                "sample": "sampler: exemplars", "compose": "composing context",
                "generate": "generator: writing the child", "evaluate": "evaluating",
                "repair": "repairing (or asking again after no effect)",
                "summarize": "summarizer: abstract", "update_buffer": "committing"}
"""What the progress line says while each node runs."""


def child_line(child: dict, workers: int = 1) -> str:
    """The printed line of a committed child (:func:`contextevolve.workers.commit_report`).

    It gives the status, the score (or why it failed), whether it is a behavioural twin, the prompt it was a
    later reply to, repairs, tokens, seconds, and the worker when there are several.
    """
    outcome = (f"score {child['score']:.4f}" if child["status"] == "ok"
               else f"[red]{escape(str(child.get('reason') or child['status'])[:200])}[/red]")
    if child.get("twin_of"):
        outcome += f" [yellow](no effect: the same results as {child['twin_of']})[/yellow]"
    repairs = f" | repaired {child['repairs']}x" if child.get("repairs") else ""
    if child.get("asked_again"):
        repairs += " | asked again after no effect"
    if child.get("sibling_of"):
        repairs += f" | another reply to {child['sibling_of']}'s prompt"
    seconds = f" | {child['seconds']:.0f} s" if child.get("seconds") else ""
    worker = f" (worker {child['worker']})" if workers > 1 else ""
    money = f" ({dollars(child['cost'])})" if child.get("cost") is not None else ""
    return (f"child {child['child_id']}{worker}: {child['status']} {outcome}{repairs} "
            f"| tokens {total_tokens(child['usage'])}{money}{seconds}")


def seconds_table(seconds: dict, llm: dict) -> Table:
    """The seconds-by-phase table, beside each phase's LLM calls and tokens.

    Per phase: its seconds, the part spent waiting for LLM replies, its share of all phases, its LLM
    calls and the tokens they read and generated (``llm``: :func:`contextevolve.timing.llm_by_phase`);
    the evaluation's parts below it.
    """
    table = Table(title="Seconds by phase (summed over workers)")
    for col in ("phase", "seconds", "of it LLM", "share", "LLM calls", "prompt tokens", "generated"):
        table.add_column(col, justify="right" if col != "phase" else "left", no_wrap=col == "phase")
    for phase, spent in by_phase(seconds).items():
        row = llm.get(phase, {})
        table.add_row(phase, f"{spent['seconds']:.1f}", f"{spent['llm']:.1f}", f"{spent['share']:.0%}",
                      str(row.get("calls", "")), str(row.get("prompt", "")), str(row.get("completion", "")))
    for part in ("precheck", "full", "import", "calls"):
        if f"evaluate.{part}" in seconds:
            table.add_row(f"· {part}", f"{seconds[f'evaluate.{part}']:.1f}", "", "", "", "", "")
    return table


class RunProgress:
    """The ``run`` command's progress bar and printed lines; a context manager around the run.

    It is fed by :func:`contextevolve.api.evolve`'s ``on_phase`` and ``on_commit`` callbacks.
    """

    def __init__(self, console: Console, total: int, workers: int = 1):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.total, self.workers = console, total, workers
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=console)
        self.bar = None
        self.phases: dict[str, str] = {}

    def __enter__(self) -> RunProgress:
        self.progress.__enter__()
        self.bar = self.progress.add_task("evolving", total=self.total,
                                          info="starting (the embedded LLM may take a minute)")
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.progress.update(self.bar, description="done")
        self.progress.__exit__(*exc)

    def on_phase(self, node: str, child: str | None) -> None:
        """A node starts (for ``child``, or for the run when None): the bar names what each child is at."""
        label = PHASE_LABELS.get(node, node)
        if not child:
            self.progress.update(self.bar, description=label)
            return
        self.phases[child] = label
        at = " | ".join(f"{c}: {p}" for c, p in sorted(self.phases.items()))
        self.progress.update(self.bar, description=at)

    def on_commit(self, report: dict) -> None:
        """Print a committed program (:func:`contextevolve.workers.commit_report`).

        For the initial program its score; for a child its line and the run's progress.
        """
        console = self.console
        done = report["iterations"]
        if report["child_id"] == program_id(0):
            self.progress.update(self.bar, completed=done, info=f"initial {report['score']:.4f}")
            console.print(f"initial program: combined score {report['score']}"
                          + (f" (resuming after {done} iterations)" if done else ""))
            if report["status"] != "ok":
                failure = f"{report['status']}: {report['reason']}"[:300]
                console.print(f"[yellow]warning:[/yellow] the initial program is not ok "
                              f"({escape(failure)}): children start from a failed parent; "
                              "check the program and evaluator with `contextevolve evaluate`", soft_wrap=True)
            return
        self.phases.pop(report["child_id"], None)
        console.print(child_line(report, self.workers))
        best = report.get("best_score") or 0
        money = f" ({dollars(report['run_cost'])})" if report.get("run_cost") is not None else ""
        self.progress.update(self.bar, completed=done,
                             info=f"best {best:.4f} | tokens {report['run_tokens']}{money}")
        console.print(f"iteration {done}: committed | best {best:.4f} | tokens so far "
                      f"{report['run_tokens']}{money}")
