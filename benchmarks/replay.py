"""What the replay benchmarks share: the ``--config`` form and the request sent before each timed one.

The ``--config NAME=key=value,...`` form (``sampling.py``, ``summarizer_replay.py``) is a named configuration
and the settings it changes; the one-line request sent before each timed one serves ``sampler_stop.py`` and
``summarizer_replay.py``.
"""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from contextevolve.graph.context import RunContext
from contextevolve.llm.calls import MalformedReply, call_role

FLUSH = [HumanMessage("Say OK.")]
"""The request :func:`flush` sends: a server reuses the prefix a request shares with the request just before
it, so without it the second configuration of a pair would skip reading the prompt the first one read (in a
run, a role's previous request is another prompt)."""


def flush(role: str) -> None:
    """Send :data:`FLUSH` as ``role`` (one token, no retry) to the server of ``role``'s next timed request.

    A garbled reply is ignored (only the reading matters). Raises what :func:`call_role` raises for a down
    endpoint.
    """
    try:
        call_role(role, FLUSH, RunContext(max_tokens={role: 1}, max_retries=0))
    except MalformedReply:
        pass


def parse_config(text: str, keys: dict[str, type]) -> tuple[str, dict]:
    """A ``--config`` value as its name and its settings, each of the type ``keys`` gives it.

    ``"qwen=top_p=0.8,top_k=20"`` with ``keys={"top_p": float, "top_k": int}`` -> ``("qwen", {"top_p": 0.8,
    "top_k": 20})``; ``"base="`` -> ``("base", {})``.

    Raises:
        ValueError: no name, a key not in ``keys``, or a value its type does not take (the message names it).
    """
    name, _, rest = text.partition("=")
    if not name:
        raise ValueError(f"--config {text!r}: give it a name, e.g. base= or new=key=value")
    values: dict = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in keys:
            raise ValueError(f"--config {text!r}: unknown key {key!r} (known: {', '.join(keys)})")
        try:
            values[key] = keys[key](value)
        except ValueError:
            raise ValueError(f"--config {text!r}: {key} must be {keys[key].__name__}, "
                             f"not {value!r}") from None
    return name, values
