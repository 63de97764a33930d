"""OpenEvolve's ``config.yaml``: what maps onto ContextEvolve's run settings, is ignored, is refused.

The keys with an equivalent here (``max_iterations``, ``random_seed``, ``diff_based_evolution`` and
the sections' keys in ``_MAPPED``) map onto run settings; every other key of OpenEvolve 0.4's
``Config`` is named in one line of notes; a top-level key OpenEvolve does not know either is
refused with the nearest name, as is a ``language`` other than Python. The mapping:
docs/own-problem.md, *config.yaml*.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextevolve.graph.settings import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURES

#: Top-level keys of OpenEvolve 0.4's ``Config`` (its dataclass fields).
KNOWN_TOP = ("max_iterations", "checkpoint_interval", "checkpoint_on_improvement", "log_level", "log_dir",
             "logger_prefix", "random_seed", "language", "file_suffix", "llm", "prompt", "database",
             "evaluator", "evolution_trace", "diff_based_evolution", "full_rewrite_probability",
             "max_code_length", "enforce_evolve_blocks", "diff_pattern", "early_stopping_patience",
             "convergence_threshold", "early_stopping_metric", "max_tasks_per_child",
             "allow_full_rewrites")  # older OpenEvolve releases' key, still in many published configs
#: Sections whose keys are checked one by one (the others are ignored whole).
_MAPPED = {"llm": ("api_base", "primary_model", "models", "temperature", "max_tokens", "top_p", "timeout",
                   "retries", "retry_delay", "prices"),
           "evaluator": ("timeout", "cascade_evaluation", "cascade_thresholds"),
           "prompt": ("system_message",)}


class ConfigError(ValueError):
    """The config file cannot be used; the message names the file and the key."""


@dataclass
class ProblemConfig:
    """What a ``config.yaml`` sets: run settings (flat names), the problem's own fields, the notes."""

    settings: dict[str, Any] = field(default_factory=dict)
    """Flat :class:`~contextevolve.graph.context.RunContext` setting names → values (``max_iterations``
    included)."""
    description: str | None = None
    """``prompt.system_message``, when set."""
    timeout_s: float | None = None
    """``evaluator.timeout``, seconds."""
    cascade: bool | None = None
    """``evaluator.cascade_evaluation``."""
    thresholds: list[float] | None = None
    """``evaluator.cascade_thresholds``."""
    ignored: list[str] = field(default_factory=list)
    """Keys present in the file with no equivalent here (dotted names)."""


def _number(path: Path, key: str, value: Any, kind: type) -> Any:
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (kind is int and value != int(value))):
        raise ConfigError(f"{path}: {key} must be {'an integer' if kind is int else 'a number'}, "
                          f"got {value!r}")
    return kind(value)


def _section(path: Path, data: dict, name: str) -> dict:
    section = data.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: {name} must be a mapping, got {type(section).__name__}")
    return section


def _prices(path: Path, value: Any) -> dict[str, dict[str, float]]:
    """``llm.prices`` (ContextEvolve's own key): ``{model: {input: X, output: Y}}``, dollars per million."""
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: llm.prices must map model names to {{input: X, output: Y}} (dollars per "
                          f"million tokens), got {type(value).__name__}")
    out = {}
    for model, price in value.items():
        if not isinstance(price, dict) or set(price) != {"input", "output"}:
            raise ConfigError(f"{path}: llm.prices.{model} must be {{input: X, output: Y}} (dollars per "
                              f"million tokens), got {price!r}")
        out[str(model)] = {k: _number(path, f"llm.prices.{model}.{k}", price[k], float) for k in price}
        if min(out[str(model)].values()) < 0:
            raise ConfigError(f"{path}: llm.prices.{model} must not be negative")
    return out


def read_config(path: str | Path) -> ProblemConfig:
    """Read an OpenEvolve ``config.yaml``.

    Raises:
        ConfigError: unreadable or not YAML, not a mapping, an unknown top-level key (the message
            names the nearest known one), a value of the wrong type, a language other than Python.
    """
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of settings, got {type(data).__name__}")
    for key in data:
        if key not in KNOWN_TOP:
            near = difflib.get_close_matches(str(key), KNOWN_TOP, n=1)
            raise ConfigError(f"{path}: unknown section {key!r}"
                              + (f" (did you mean {near[0]!r}?)" if near else "")
                              + "; OpenEvolve's config keys are: " + ", ".join(KNOWN_TOP))
    if str(data.get("language") or "python").lower() != "python" or data.get("file_suffix", ".py") != ".py":
        raise ConfigError(f"{path}: only Python programs can be evolved (language {data.get('language')!r}, "
                          f"file_suffix {data.get('file_suffix')!r})")
    out = ProblemConfig()
    s = out.settings
    if "max_iterations" in data:
        s["max_iterations"] = _number(path, "max_iterations", data["max_iterations"], int)
    if "random_seed" in data and data["random_seed"] is not None:
        s["seed"] = _number(path, "random_seed", data["random_seed"], int)
    if "diff_based_evolution" in data:
        s["edit_form"] = "diff" if data["diff_based_evolution"] else "full"
    llm, evaluator, prompt = (_section(path, data, n) for n in ("llm", "evaluator", "prompt"))
    if llm.get("api_base"):
        s["base_url"] = str(llm["api_base"])
    models = llm.get("models") or []
    first = models[0] if isinstance(models, list) and models and isinstance(models[0], dict) else {}
    if llm.get("primary_model") or first.get("name"):
        s["model"] = str(llm.get("primary_model") or first["name"])
    if llm.get("temperature") is not None:
        s["temperatures"] = {**DEFAULT_TEMPERATURES,
                             "generator": _number(path, "llm.temperature", llm["temperature"], float)}
    if llm.get("max_tokens") is not None:
        s["max_tokens"] = {**DEFAULT_MAX_TOKENS,
                           "generator": _number(path, "llm.max_tokens", llm["max_tokens"], int)}
    for key, name, kind in (("top_p", "top_p", float), ("timeout", "request_timeout_s", float),
                            ("retries", "max_retries", int), ("retry_delay", "retry_wait_s", float)):
        if llm.get(key) is not None:
            s[name] = _number(path, f"llm.{key}", llm[key], kind)
    if llm.get("prices") is not None:
        s["prices"] = _prices(path, llm["prices"])
    if evaluator.get("timeout") is not None:
        out.timeout_s = _number(path, "evaluator.timeout", evaluator["timeout"], float)
    if "cascade_evaluation" in evaluator:
        out.cascade = bool(evaluator["cascade_evaluation"])
    if evaluator.get("cascade_thresholds") is not None:
        thresholds = evaluator["cascade_thresholds"]
        if not isinstance(thresholds, list):
            raise ConfigError(f"{path}: evaluator.cascade_thresholds must be a list of numbers")
        out.thresholds = [_number(path, "evaluator.cascade_thresholds", t, float) for t in thresholds]
    if prompt.get("system_message"):
        out.description = str(prompt["system_message"])
    for key, value in data.items():
        if key in _MAPPED:
            out.ignored += [f"{key}.{k}" for k in (value or {}) if k not in _MAPPED[key]]
        elif key not in ("max_iterations", "random_seed", "diff_based_evolution", "language", "file_suffix"):
            out.ignored.append(key)
    return out
