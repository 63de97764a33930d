"""The ``--config NAME=key=value,...`` form shared by the replay benchmarks (``sampling.py``,
``summarizer_replay.py``): a named configuration and the settings it changes."""

from __future__ import annotations


def parse_config(text: str, keys: dict[str, type]) -> tuple[str, dict]:
    """``"qwen=top_p=0.8,top_k=20"`` with ``keys={"top_p": float, "top_k": int}`` -> ``("qwen", {"top_p": 0.8,
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
            raise ValueError(f"--config {text!r}: {key} must be {keys[key].__name__}, not {value!r}") from None
    return name, values
