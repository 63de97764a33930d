"""Sampler prompt: pick k exemplars from retrieved candidates given z_p and g (paper Eq. 6)."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

SYSTEM = ("You are the Sampler of an evolutionary search over programs. You choose which past programs the "
          "programmer should see as references. Answer with JSON only.")


def messages(parent_abstract: str, guidance: str, candidates: list[dict], k: int,
             higher_is_better: bool = True) -> list:
    """Messages asking for ``k`` of the numbered ``candidates`` (dicts: status, score, abstract).

    ``higher_is_better`` is the task's score orientation, stated in the prompt.
    """
    listing = "\n".join(
        f"[{n}] status={c['status']} score={c['score']:.4g}: {' '.join(c['abstract'].split())[:300]}"
        for n, c in enumerate(candidates, 1))
    user = (f"Parent: {' '.join(parent_abstract.split())[:500]}\n\nDirection: {guidance or '(none)'}\n\n"
            f"Candidates (score: {'higher' if higher_is_better else 'lower'} is better):\n{listing}\n\n"
            f"Choose the {k} candidates most useful as references for the next program under this direction. "
            "Favour relevance to the direction, diversity of ideas, and proven outcomes; a failed program "
            "with a promising idea can be worth including.\n"
            f'Reply as JSON: {{"exemplars": [{k} candidate numbers], "why": "one short sentence"}}')
    return [SystemMessage(SYSTEM), HumanMessage(user)]
