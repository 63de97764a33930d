"""The command line's setting flags, generated from the run settings: one declaration per setting.

Every run setting (a flat name of :func:`contextevolve.graph.context.flat_setting_names`) is declared once, as
a field with its type, default and docstring (:mod:`contextevolve.graph.settings`,
:class:`~contextevolve.graph.context.RunContext`, :class:`~contextevolve.evaluation.limits.SandboxLimits`);
its flag is derived from that field here (:func:`flag_name`, :func:`add_setting_flags`). Five flags are
declared by hand: ``--role-model ROLE=MODEL`` (``models``), ``--price MODEL=INPUT,OUTPUT`` (``prices``),
``--disable AGENT`` (the three ``*_enabled`` ablations), ``--time-budget MINUTES`` (``time_budget_s``) and
``--mutation TEXT`` (``mutations``, repeated once per entry).
A flag's value lands in ``args.<flat name>``; None means "not given" (run.json's value or the default).
"""

from __future__ import annotations

import argparse
import functools
import re
import shlex
from typing import Any

from contextevolve.agents import CONTEXT_AGENTS

RENAMED = {"num_exemplars": "exemplars", "num_trajectories": "trajectories",
           "context_token_budget": "context-budget", "stop_at_code_end": "code-stop",
           "embedded_server_per_role": "server-per-role"}
"""Settings whose flag is not their field's name (shorter, or the name users already type)."""
API_ONLY_SETTINGS = frozenset({
    "task", "run_dir", "max_iterations",  # --task, --run-dir, --iterations: evolve() arguments of their own
    "api_key",  # CONTEXTEVOLVE_API_KEY / OPENAI_API_KEY only: never on a command line
    "temperatures", "max_tokens", "category_weights", "review_guidance",
})
"""Run settings without a ``run`` flag (set them from Python, or in ``langgraph dev``'s context)."""
BY_HAND = frozenset({"models", "prices", "time_budget_s", "mutations",
                     *(f"{agent}_enabled" for agent in CONTEXT_AGENTS)})
"""Settings whose flag is declared by hand (see the module docstring)."""
LIMIT_SETTINGS = ("eval_cpu_s", "eval_memory_mb", "eval_max_processes", "eval_output_kb", "eval_files_mb",
                  "eval_allow_network")
"""The sandbox limits every command that evaluates shares (``run``, ``evaluate``): the ``--eval-*`` group."""
HELP_CHARS = 80
"""Length (characters) past which :func:`help_text` keeps only the sentence's first clause."""
_TYPES = {"integer": int, "number": float, "string": str}
_METAVARS = {"integer": "N", "number": "X"}
_PROPER = frozenset({"Ray", "Chroma", "Python", "LangGraph", "Landlock"})


@functools.cache
def _fields() -> dict[str, dict[str, Any]]:
    """Flat setting name -> its JSON-schema property (type, default, description, enum)."""
    import pydantic

    from contextevolve.graph.context import GROUPS, SETTINGS, RunContext

    schema = pydantic.TypeAdapter(RunContext).json_schema()
    groups = {name: schema["$defs"][kind.__name__]["properties"] for name, kind in GROUPS.items()}
    out = {name: prop for name, prop in schema["properties"].items() if name not in GROUPS}
    out.update({flat: groups[group][field] for flat, (group, field) in SETTINGS.items()})
    return out


def flag_settings() -> list[str]:
    """The flat settings that get a generated flag, in declaration order."""
    return [name for name in _fields() if name not in API_ONLY_SETTINGS | BY_HAND]


def help_text(docstring: str) -> str:
    """A field docstring's first sentence as one help line for argparse.

    The sentence loses its parentheticals, reST roles and literals and its final full stop, and starts
    in lower case (unless it starts with a name); past :data:`HELP_CHARS` characters it is cut before
    its first ``;``, then before its first ``:`` if that comes 25 characters or more in. ``%`` is
    escaped for argparse.
    """
    text = " ".join((docstring or "").split())
    found = re.search(r"(?<=[A-Za-z0-9)`'])\.(\s|$)", text)
    text = text[:found.start()] if found else text
    while True:  # innermost first: "(a (b) c)"
        shorter = re.sub(r"\s+\([^()]*\)", "", text)
        if shorter == text:
            break
        text = shorter
    text = re.sub(r":\w+:`~?([^`]*)`", lambda m: m.group(1).rsplit(".", 1)[-1], text).replace("``", "")
    if len(text) > HELP_CHARS and "; " in text:
        text = text.split("; ", 1)[0]
    head, colon, _ = text.partition(": ")
    if len(text) > HELP_CHARS and colon and len(head) >= 25:
        text = head
    first = text.split(" ", 1)[0]  # "The", "Top-k", "A" are lowered; "OpenAI", "R:", "Ray" are not
    if (first == "A" or re.match(r"[A-Z][a-z]", first) and first[1:] == first[1:].lower()) \
            and first.strip(",;:") not in _PROPER:
        text = text[0].lower() + text[1:]
    return text.replace("%", "%%")


def _kind(prop: dict[str, Any]) -> dict[str, Any]:
    """The non-null branch of an ``anyOf`` (an optional setting), else ``prop``."""
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    return branches[0] if branches else prop


def flag_name(setting: str) -> str:
    """``--flag`` of ``setting`` (without the ``no-`` of a switch that is on by default).

    ``--`` + the setting's name with dashes, a trailing ``_s`` (seconds) dropped (``retry_wait_s`` →
    ``--retry-wait S``), except the few in :data:`RENAMED`.
    """
    name = RENAMED.get(setting) or re.sub(r"_s$", "", setting).replace("_", "-")
    return f"--{name}"


def _metavar(setting: str, kind: dict[str, Any]) -> str:
    """``S`` for seconds, ``N`` for an integer, ``X`` for a number, else the flag name's last word."""
    if setting.endswith("_s"):
        return "S"
    return _METAVARS.get(kind.get("type", "string")) or flag_name(setting).rsplit("-", 1)[-1].upper()


def add_setting_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, settings: list[str]) -> None:
    """Add the generated flag of each of ``settings`` to ``parser`` (``dest`` = the setting's flat name).

    A bool that is on by default gets ``--no-NAME``, one that is off ``--NAME``, one left to the run
    (None) both; a ``Literal`` gets its choices; ``int`` / ``float`` / ``str`` their type and a short
    metavar (:func:`_metavar`). The help is the docstring's first sentence (:func:`help_text`) and the
    default.
    """
    for setting in settings:
        prop = _fields()[setting]
        kind, default = _kind(prop), prop.get("default")
        text = help_text(prop.get("description", ""))
        if kind.get("type") == "boolean":
            text = re.sub(r"^true ", "", text)  # "True skips ..." of a switch: "on: skips ..."
        if kind.get("type") == "boolean" and default is None:  # unset: the run decides (both flags)
            name = flag_name(setting)
            both = {True: f"on: {text}", False: f"off: see {name} (neither: the run decides)"}
            for flag, value in ((name, True), (name.replace("--", "--no-", 1), False)):
                parser.add_argument(flag, dest=setting, action="store_const", const=value, default=None,
                                    help=both[value] if text else None)
            continue
        if kind.get("type") == "boolean":
            on = bool(default)
            parser.add_argument(flag_name(setting).replace("--", "--no-" if on else "--", 1), dest=setting,
                                action="store_const", const=not on, default=None,
                                help=f"{'off' if on else 'on'}: {text}" if text else None)
            continue
        shown = f" (default {default})" if default is not None else ""
        options: dict[str, Any] = {"dest": setting, "default": None, "help": f"{text}{shown}" or None}
        if "enum" in kind:
            options["choices"] = kind["enum"]
        else:
            options["type"] = _TYPES.get(kind.get("type", "string"), str)
            options["metavar"] = _metavar(setting, kind)
        parser.add_argument(flag_name(setting), **options)


def add_run_flags(parser: argparse.ArgumentParser) -> None:
    """Every run setting's flag (generated, the three by hand, the sandbox limits in their own group)."""
    add_setting_flags(parser, [s for s in flag_settings() if s not in LIMIT_SETTINGS])
    parser.add_argument("--role-model", action="append", default=[], metavar="ROLE=MODEL",
                        help="model for one role: summarizer, navigator, sampler or generator (repeatable)")
    parser.add_argument("--price", action="append", default=[], metavar="MODEL=INPUT,OUTPUT",
                        help="dollars per million prompt and completion tokens of a model (repeatable)")
    parser.add_argument("--time-budget", type=float, metavar="MINUTES",
                        help="stop claiming iterations after this many minutes of the run")
    parser.add_argument("--disable", action="append", choices=list(CONTEXT_AGENTS),
                        help="ablate an agent (repeatable)")
    parser.add_argument("--mutation", action="append", default=[], metavar="TEXT",
                        help="a concrete change an ask after a twin may name, completing \"Make one concrete "
                             "change to how this program computes its result: TEXT\"; repeated, the list "
                             "that replaces the built-in one")
    add_limit_flags(parser)


def add_limit_flags(parser: argparse.ArgumentParser) -> None:
    """The shared ``--eval-*`` sandbox-limit flags, in a group of their own."""
    add_setting_flags(parser.add_argument_group("sandbox limits"), list(LIMIT_SETTINGS))


def _role_models(pairs: list[str]) -> dict[str, str]:
    """``ROLE=MODEL`` pairs as a dict.

    Raises:
        ValueError: a pair that is not ``ROLE=MODEL``.
    """
    out = {}
    for pair in pairs:
        role, sep, name = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--role-model takes ROLE=MODEL, got {pair!r}")
        out[role] = name
    return out


def parse_prices(pairs: list[str]) -> dict[str, dict[str, float]]:
    """``MODEL=INPUT,OUTPUT`` pairs (dollars per million tokens) as ``{model: {"input", "output"}}``.

    Raises:
        ValueError: a pair that is not that, or a negative price.
    """
    out = {}
    for pair in pairs:
        model, sep, numbers = pair.rpartition("=")
        parts = numbers.split(",")
        try:
            values = [float(p) for p in parts]
        except ValueError:
            values = []
        if not sep or not model or len(values) != 2 or min(values) < 0:
            raise ValueError(f"--price takes MODEL=INPUT,OUTPUT (dollars per million prompt and completion "
                             f"tokens, e.g. gpt-5-mini=0.25,2), got {pair!r}")
        out[model] = {"input": values[0], "output": values[1]}
    return out


def limit_settings(args: argparse.Namespace) -> dict:
    """The sandbox settings the ``--eval-*`` flags set (unset flags omitted)."""
    return {name: getattr(args, name) for name in LIMIT_SETTINGS if getattr(args, name, None) is not None}


def run_settings(args: argparse.Namespace) -> dict:
    """The run settings (flat names) a ``run`` command line sets (None: not given; run.json's or the default).

    Every key is a setting's flat name, and every setting is either here or in :data:`API_ONLY_SETTINGS`.

    Raises:
        ValueError: a ``--role-model`` that is not ``ROLE=MODEL``, a malformed ``--price``.
    """
    settings = {name: getattr(args, name) for name in flag_settings() if name not in LIMIT_SETTINGS}
    settings.update(limit_settings(args), models=_role_models(args.role_model) or None,
                    prices=parse_prices(args.price) or None,
                    time_budget_s=args.time_budget * 60 if args.time_budget is not None else None,
                    mutations=tuple(args.mutation) or None)
    for agent in CONTEXT_AGENTS:
        settings[f"{agent}_enabled"] = False if agent in (args.disable or []) else None
    return settings


class _FlagsParser(argparse.ArgumentParser):
    """An argument parser whose errors raise ``ValueError`` instead of printing usage and exiting."""

    def error(self, message: str):  # argparse's hook for a bad command line
        raise ValueError(message)


def settings_from_flags(text: str, where: str) -> dict:
    """The run settings (flat names) that ``text``, flags as ``contextevolve run`` takes them, sets.

    ``"--parent-selection tournament --no-behavioural-twins"`` -> ``{"parent_selection": "tournament",
    "behavioural_twins": False}``; settings the flags leave unset are absent. ``text`` is split as a shell
    would (quotes group words).

    Raises:
        ValueError: a flag ``run`` does not have, a bad value, or a stray word, named after ``where``
            (the option that carried the flags).
    """
    parser = _FlagsParser(prog=where, add_help=False)
    add_run_flags(parser)
    try:
        args = parser.parse_args(shlex.split(text))
        settings = run_settings(args)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    return {name: value for name, value in settings.items() if value is not None}
