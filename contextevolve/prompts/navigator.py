"""Navigator prompt: directional guidance g from m trajectories (z_p, z_c, Δs) (paper Eq. 5)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

SYSTEM = ("You are the Navigator of an evolutionary search over programs. From past parent->child steps and "
          "how each changed the metrics, you infer which directions of change help and which hurt.")

DIRECTIONAL = ("Give the direction for the next change in 2-3 short sentences (at most 50 words): which kind "
               "of idea to pursue or avoid, and why, citing the evidence. Prefer a step the current program "
               "can take with one focused change (its ordering, its choice rule, a constant, an extra pass) "
               "over replacing its algorithm. Stay at the level of strategy: no code and no step-by-step "
               "implementation instructions.")
"""The paper's directional guidance. The "one focused change" sentence is ours: without it the
embedded 1.5B model's TS guidance asked for "an evolutionary algorithm or a heuristic approach", and
the children written from it failed as first written (docs/decisions/directional-guidance.md)."""
IMPLEMENTATION = ("Give a concrete implementation plan in at most 4 numbered steps (at most 70 words): which "
                  "functions to change and exactly how, with specific code-level instructions.")


def _clip(text: str, limit: int = 320) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def messages(task_description: str, metric_names: str, parent: dict, steps: list[dict],
             programs: dict[str, dict], variant: str) -> list:
    """Messages asking for guidance g (paper Eq. 5: m steps (z_p, z_c, Δs)).

    ``parent``: the current parent, a dict with ``id``, ``summary`` (its score or status) and
    ``abstract``. ``steps``: dicts with ``category``, ``parent`` and ``child`` (program ids) and ``delta``
    (the change, signed so that + is better), in the order shown. ``programs``: id -> dict with
    ``summary`` and ``abstract`` for every other program a step names. Each abstract is shown once and the
    steps name programs by id (why: docs/architecture.md, *2. navigate*); the pairs the paper's Navigator
    sees are unchanged.
    """
    listed = "\n".join(f"{pid} ({info['summary']}): {_clip(info['abstract'])}"
                       for pid, info in programs.items())
    lines = [f"Step {n} [{step['category']}] {step['parent']} -> {step['child']}: {step['delta']}"
             for n, step in enumerate(steps, 1)]
    history = ("Other programs in the steps:\n" + listed + "\n\n" if listed else "") + (
        "Past steps (parent -> child):\n" + "\n".join(lines) if lines
        else "Past steps: none yet (this is the first iteration)")
    user = (f"Task:\n{task_description}\nMetrics ({metric_names}); deltas are signed so that + is better.\n\n"
            f"Current parent {parent['id']} ({parent['summary']}): {_clip(parent['abstract'], 600)}\n\n"
            f"{history}\n\n{IMPLEMENTATION if variant == 'implementation' else DIRECTIONAL}")
    return [SystemMessage(SYSTEM), HumanMessage(user)]
