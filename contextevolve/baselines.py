"""Table 1 baselines: score each task's initial, heuristic and human-SOTA programs, and LLM one-shot.

Every program is scored by the task's own evaluator, exactly as evolved programs are.
LLM one-shot (paper §5.1) is a single Generator call from the task description and the
initial program, with the configured model (the embedded LLM by default), no guidance
and no exemplars; its output is evaluated as is (a malformed or failing reply is a
failed row, as it would be for a one-shot user).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from contextevolve.graph.context import RunContext
from contextevolve.tasks.base import Evaluation, Task
from contextevolve.tasks.registry import get_task, task_names

LABELS = {"initial": "Initial program", "heuristic": "Heuristic", "human_sota": "Human-SOTA",
          "one_shot": "LLM one-shot"}
"""Row labels in display order."""
PAPER_ORDER = ("txn_scheduling", "llm_sql", "eplb", "sparse_attention", "model_placement")
"""Column order of the paper's Table 1; other registered tasks follow."""


@dataclass
class BaselineRow:
    """One scored baseline: task, baseline label, the evaluation and (one-shot only) tokens used."""

    task: str
    baseline: str
    evaluation: Evaluation
    tokens: int = 0
    source: str = field(default="", repr=False)


def one_shot(task: Task, ctx: RunContext, initial: Evaluation | None = None) -> tuple[str, int, str]:
    """One Generator call on ``task``'s initial program: ``(program source or "", tokens, failure reason)``.

    ``initial`` is the initial program's evaluation when the caller already has it (shown in the prompt).

    Raises:
        contextevolve.llm.embedded.EmbeddedModelError: the embedded LLM cannot start.
        contextevolve.llm.faults.EndpointUnavailable: the endpoint is down after its retries.
    """
    from contextevolve.llm.calls import MalformedReply, call_role
    from contextevolve.loop.generation import whole_program
    from contextevolve.program.forms import edit_form
    from contextevolve.program.replies import EditError
    from contextevolve.prompts import generator as prompt
    from contextevolve.roles import total_tokens

    initial = initial or task.evaluate(task.initial_program)
    parent = prompt.parent_section(task.initial_program, "the task's initial program", initial.combined_score,
                                   initial.metrics, initial.diagnostics)
    full = edit_form("full")
    messages = prompt.generator_prompt(task.description, parent, "", [], full, task.higher_is_better,
                                       task.initial_program).messages()
    try:
        reply = call_role("generator", messages, ctx, check=whole_program(task.initial_program, full))
    except MalformedReply as exc:
        return "", total_tokens(exc.usage), f"endpoint fault: {exc}"
    tokens = total_tokens(reply.usage)
    try:
        return full.build(task.initial_program, reply.text, truncated=reply.truncated), tokens, ""
    except EditError as exc:
        return "", tokens, f"malformed generator output: {exc}"


def baseline_table(tasks: list[str] | None = None, *, include_one_shot: bool = False,
                   **settings: Any) -> list[BaselineRow]:
    """Score the baselines of ``tasks`` (default: every registered task).

    Args:
        tasks: task names; unknown names raise KeyError before anything runs.
        include_one_shot: also ask the configured LLM for one program per task.
        **settings: RunContext fields for the one-shot call (base_url, model, seed, ...).
    """
    from contextevolve.llm import embedded, models

    names = tasks or sorted(task_names(), key=lambda n: (PAPER_ORDER + (n,)).index(n))
    chosen = [get_task(name) for name in names]
    rows: list[BaselineRow] = []
    settings = {k: v for k, v in settings.items() if v is not None}
    ctx = RunContext(task=chosen[0].name, **settings) if include_one_shot else None
    try:
        if ctx is not None and models.uses_embedded("generator", ctx):  # only the Generator is asked
            embedded.shared_server(models.embedded_server_key("generator", ctx))
        for task in chosen:
            ours = [BaselineRow(task.name, label, task.evaluate(source), source=source)
                    for label, source in task.baselines().items()]
            rows += ours
            if ctx is not None:
                source, tokens, reason = one_shot(task, ctx, ours[0].evaluation)  # ours[0] is "initial"
                evaluation = task.evaluate(source) if source else task.rejected("failed", reason)
                rows.append(BaselineRow(task.name, "one_shot", evaluation, tokens, source))
    finally:
        if ctx is not None and models.uses_embedded("generator", ctx):
            embedded.stop_shared_server()
    return rows
