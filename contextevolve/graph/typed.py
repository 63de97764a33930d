"""Run settings read in their fields' types, with pydantic's checks and a sentence per wrong value.

:class:`~contextevolve.graph.context.RunContext` takes flat keywords of the Python API and dicts from a
run.json or a ``langgraph dev`` context; each value is validated against its field's annotation here, so a
setting of the wrong type is named when the run is configured, not met in the node that reads it.
Pydantic's lax mode converts what reads unambiguously (``"3"`` for an int, ``1`` for a float).
"""

from __future__ import annotations

import functools
import os
import typing
from collections.abc import Mapping
from typing import Any, Literal

import pydantic

from contextevolve.graph.settings import price_problem


def typed_group(kind: type, data: Mapping[str, Any]) -> Any:
    """An instance of the dataclass settings group ``kind`` from its fields' values ``data``.

    Raises:
        ValueError: ``invalid run settings: ...``, one sentence per value pydantic cannot read as its
            field's type, or per choice that is not one of its field's.
    """
    try:
        return _adapter(kind).validate_python(dict(data))
    except pydantic.ValidationError as exc:
        problems = dict.fromkeys(_problem(kind, error, data) for error in exc.errors())
        raise ValueError("invalid run settings: " + "; ".join(problems)) from None


def typed_value(name: str, hint: Any, value: Any) -> Any:
    """``value`` of the setting ``name`` in the type ``hint`` (a path for a ``str`` setting is its text).

    Raises:
        ValueError: a value pydantic cannot read as ``hint``.
    """
    if isinstance(value, os.PathLike) and hint in (str, str | None):
        value = os.fspath(value)
    try:
        return _adapter(hint).validate_python(value)
    except pydantic.ValidationError as exc:
        raise ValueError("invalid run settings: " + "; ".join(
            f"{name}: {_sentence(e['msg'])}, not {value!r}" for e in exc.errors())) from None


@functools.cache
def _adapter(kind: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(kind)


def _sentence(message: str) -> str:
    return message[:1].lower() + message[1:]


def _problem(kind: type, error: Mapping[str, Any], data: Mapping[str, Any]) -> str:
    """One sentence for one of pydantic's errors about a field of ``kind`` given ``data``, naming both.

    A price is named whole, whichever of its parts is wrong.
    """
    name, loc = ".".join(map(str, error["loc"])), error["loc"]
    if loc[0] == "prices" and len(loc) > 1:
        return price_problem(loc[1], data["prices"][loc[1]])
    hint = typing.get_type_hints(kind).get(str(loc[0]))
    if error["type"] == "literal_error" and typing.get_origin(hint) is Literal:
        return f"{name} must be one of {', '.join(map(str, typing.get_args(hint)))}, not {error['input']!r}"
    return f"{name}: {_sentence(error['msg'])}, not {error['input']!r}"
