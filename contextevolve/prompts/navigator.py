"""Navigator prompt: directional guidance g from m trajectories (z_p, z_c, Δs) (paper Eq. 5)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

SYSTEM = ("You are the Navigator of an evolutionary search over programs. From past parent->child steps and "
          "how each changed the metrics, you infer which directions of change help and which hurt.")

DIRECTIONAL = ("Give the direction for the next change in 2-3 short sentences (at most 50 words): which kind of idea "
               "to pursue or avoid, and why, citing the evidence. Prefer a step the current program can take "
               "with one focused change (its ordering, its choice rule, a constant, an extra pass) over "
               "replacing its algorithm. Stay at the level of strategy: no code and no step-by-step "
               "implementation instructions.")
"""The paper's directional guidance. The "one focused change" sentence is ours: with the
embedded 1.5B model every TS guidance asked for "an evolutionary algorithm or a heuristic approach",
and the first version of all 8 children failed (fragments, undefined names, invented interfaces)."""
IMPLEMENTATION = ("Give a concrete implementation plan in at most 4 numbered steps (at most 70 words): which "
                  "functions to change and exactly how, with specific code-level instructions.")


def _clip(text: str, limit: int = 320) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def messages(task_description: str, metric_names: str, parent_abstract: str, parent_summary: str,
             steps: list[dict], variant: str) -> list:
    """Messages asking for guidance.

    ``steps``: dicts with ``category``, ``parent`` and ``child`` abstracts and ``delta`` text
    (signed so that + is better), in the order shown.
    """
    lines = []
    for n, step in enumerate(steps, 1):
        lines.append(f"Step {n} [{step['category']}] {step['delta']}\n  parent: {_clip(step['parent'])}\n"
                     f"  child: {_clip(step['child'])}")
    history = "\n".join(lines) if lines else "(no steps yet: this is the first iteration)"
    user = (f"Task:\n{task_description}\nMetrics ({metric_names}); deltas are signed so that + is better.\n\n"
            f"Current parent ({parent_summary}): {_clip(parent_abstract, 600)}\n\n"
            f"Past steps:\n{history}\n\n{IMPLEMENTATION if variant == 'implementation' else DIRECTIONAL}")
    return [SystemMessage(SYSTEM), HumanMessage(user)]
