"""What the command line shows while a run goes on and after it: the progress bar and one line per
child and iteration, and the tokens-by-role and seconds-by-phase tables (``run``, ``status``)."""

from __future__ import annotations

import time

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from contextevolve.roles import USAGE_ROLES, role_tokens, total_tokens
from contextevolve.timing import PHASE_ROLE, by_phase


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


PHASE_LABELS = {"initialize": "evaluating and abstracting the initial program", "select_parent": "selecting parent",
                "navigate": "navigator: guidance", "sample": "sampler: exemplars", "compose": "composing context",
                "generate": "generator: writing the child", "evaluate": "evaluating", "repair": "repairing",
                "summarize": "summarizer: abstract", "update_buffer": "committing"}
"""What the progress line says while each node runs."""


def child_line(lane: dict, started: float | None) -> str:
    """One printed line per finished child: status, score (or why it failed), repairs, tokens, seconds."""
    outcome = (f"score {lane['score']:.4f}" if lane["status"] == "ok"
               else f"[red]{escape(str(lane.get('reason') or lane['status'])[:200])}[/red]")
    repairs = f" | repaired {lane['repairs']}x" if lane.get("repairs") else ""
    seconds = f" | {time.perf_counter() - started:.0f} s" if started else ""
    return (f"child {lane['child_id']} (lane {lane['lane']}): {lane['status']} {outcome}{repairs} "
            f"| tokens {total_tokens(lane['usage'])}{seconds}")


def seconds_table(seconds: dict, llm: dict) -> Table:
    """Seconds by phase (whole phase, of it waiting for LLM replies, share of all phases) beside the
    phase's LLM calls and the tokens they read and generated; the evaluation's parts below it."""
    table = Table(title="Seconds by phase (summed over lanes)")
    for col in ("phase", "seconds", "of it LLM", "share", "LLM calls", "prompt tokens", "generated"):
        table.add_column(col, justify="right" if col != "phase" else "left", no_wrap=col == "phase")
    for phase, spent in by_phase(seconds).items():
        row = llm.get(PHASE_ROLE.get(phase, ""), {}) if phase != "initialize" else {}
        table.add_row(phase, f"{spent['seconds']:.1f}", f"{spent['llm']:.1f}", f"{spent['share']:.0%}",
                      str(row.get("calls", "")), str(row.get("prompt", "")), str(row.get("completion", "")))
    for part in ("precheck", "full", "import", "calls"):
        if f"evaluate.{part}" in seconds:
            table.add_row(f"· {part}", f"{seconds[f'evaluate.{part}']:.1f}", "", "", "", "", "")
    return table


class RunProgress:
    """The ``run`` command's progress bar and printed lines, fed by :func:`contextevolve.api.evolve`'s
    ``on_phase`` and ``on_update`` callbacks; use as a context manager around the run."""

    def __init__(self, console: Console, total: int):
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.console, self.total = console, total
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=console)
        self.tokens, self.started = 0, {}
        self.bar = None

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
        """A node starts (for ``child``, or for the run when None)."""
        if child and node == "select_parent":
            self.started[child] = time.perf_counter()
        label = PHASE_LABELS.get(node, node)
        self.progress.update(self.bar, description=f"{child}: {label}" if child else label)

    def on_update(self, node: str, update: dict) -> None:
        """A node finished with ``update``: print the initial program's score, each finished child and
        each committed iteration."""
        console = self.console
        if node == "initialize":
            self.tokens = total_tokens(update.get("total_usage"))
            self.progress.update(self.bar, completed=update.get("iteration", 0),
                                 info=f"initial {update.get('initial_score', 0):.4f}")
            done = update.get("iteration", 0)
            console.print(f"initial program: combined score {update.get('initial_score')}"
                          + (f" (resuming after iteration {done})" if done else ""))
            if update.get("initial_failure"):
                console.print(f"[yellow]warning:[/yellow] the initial program is not ok "
                              f"({escape(update['initial_failure'])}): children start from a failed parent; "
                              "check the program and evaluator with `contextevolve evaluate`", soft_wrap=True)
        elif node == "summarize":  # a lane finished: its child is scored and abstracted
            for lane in update.get("lane_results") or []:
                console.print(child_line(lane, self.started.pop(lane["child_id"], None)))
        elif node == "update_buffer" and "iteration" in update:  # (an empty update: waiting for other lanes)
            self.tokens = total_tokens(update.get("total_usage"))
            self.progress.update(self.bar, completed=update["iteration"],
                                 info=f"best {update.get('best_score') or 0:.4f} | tokens {self.tokens}")
            console.print(f"iteration {update['iteration']}: committed | best {update.get('best_score') or 0:.4f} "
                          f"| tokens so far {self.tokens}")
