"""``contextevolve compare``: ContextEvolve and its peers on one task, same endpoint.

For every seed each system gets the same endpoint, sampling settings, task description, evaluator
(:mod:`contextevolve.compare.ledger`) and budget: candidates, tokens (``token_budget``) or wall-clock time
(``time_budget_s``). All LLM traffic passes one :class:`~contextevolve.compare.proxy.CountingProxy`, under
the label ``<system>-s<seed>``. The protocol: docs/compare.md.

Layout of ``out``::

    out/requests.jsonl              every counted LLM request (label, tokens, seconds)
    out/<system>-s<seed>/ledger.jsonl   every evaluation of the system's candidates (ours)
    out/<system>-s<seed>/programs/  the evaluated sources by SHA-256
    out/<system>-s<seed>/run/       the system's own output (run dir, OpenEvolve/GEPA folders)
    out/results.json, out/results.md, out/*.png   (contextevolve.compare.results)
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple

from contextevolve.compare import ledger
from contextevolve.compare.own_run import (
    ABLATIONS,
    check_contextevolve_settings,
    check_variant,
    run_contextevolve,
    run_name,
)
from contextevolve.compare.peer_spec import PeerSpec
from contextevolve.compare.proxy import CountingProxy
from contextevolve.compare.results import write_results
from contextevolve.compare.schema import CompareSettings, SystemResult, earlier_results
from contextevolve.graph.settings import Price
from contextevolve.llm.pricing import dollars, price_cost
from contextevolve.tasks.registry import get_task


class Peer(NamedTuple):
    """How a peer system is run."""

    runner: str
    """The :class:`PeerSpec` ``system`` its process runs (``openevolve``, ``gepa``, ``shinka``,
    ``adaevolve``, ``evox``)."""
    package: str
    """The package that provides it (checked before anything runs)."""
    options: dict = {}
    """Entries merged into the system's own configuration."""


PEERS: dict[str, Peer] = {
    "openevolve": Peer("openevolve", "openevolve"),
    "openevolve-full": Peer("openevolve", "openevolve", {"diff_based_evolution": False}),
    "gepa": Peer("gepa", "gepa"),
    "shinka": Peer("shinka", "shinka"),
    "adaevolve": Peer("adaevolve", "skydiscover"),
    "adaevolve-full": Peer("adaevolve", "skydiscover", {"diff_based_generation": False}),
    "evox": Peer("evox", "skydiscover"),
    "evox-full": Peer("evox", "skydiscover", {"diff_based_generation": False}),
}
"""Peer systems by name. OpenEvolve's and SkyDiscover's defaults evolve by SEARCH/REPLACE diffs; the
``-full`` variants ask them for whole programs (their own switch for it). ShinkaEvolve runs in an
environment of its own (``make peers-shinka``); AdaEvolve and EvoX are SkyDiscover's own search methods.
What each keeps of its defaults: docs/compare.md."""
SYSTEMS = ("contextevolve", *PEERS, *ABLATIONS)


def _embedded_endpoint() -> tuple[str, str]:
    from contextevolve.graph.settings import SearchSettings
    from contextevolve.llm.embedded import MODEL_ALIAS, shared_server

    # slots for one request of the default samples per prompt, decoded together as a GPU server would
    return shared_server(slots=SearchSettings().samples_per_prompt).start(), MODEL_ALIAS


def run_peer(settings: CompareSettings, system: str, seed: int, url: str, model: str, folder: Path,
             proxy: CountingProxy, label: str) -> str:
    """Run a peer system in a child process (:mod:`contextevolve.compare.peers`, or ShinkaEvolve's driver).

    The child is stopped at the token budget or a time limit; returns why it stopped early ('' when it
    finished).
    """
    task = get_task(settings.task)
    ledger.evaluate(task, task.initial_program, folder / "ledger.jsonl", initial=True)
    peer = PEERS[system]
    spec = PeerSpec(system=peer.runner, options=peer.options, task=settings.task,
                    out_dir=str(folder / "run"), ledger=str(folder / "ledger.jsonl"), base_url=url,
                    model=model,
                    candidates=settings.candidates, seed=seed, temperature=settings.temperature,
                    max_tokens=settings.max_tokens)
    spec_path = folder / "spec.json"
    spec_path.write_text(spec.model_dump_json(indent=2))
    log = (folder / "system.log").open("w")
    child = subprocess.Popen(_command(spec, spec_path), stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, cwd=folder)
    started, stopped = time.time(), ""
    price = Price(**settings.prices[model]) if settings.cost_budget is not None else None
    while child.poll() is None:
        time.sleep(0.5)
        totals = proxy.totals(label)
        if settings.token_budget and totals["total_tokens"] >= settings.token_budget:
            stopped = f"token budget {settings.token_budget} reached"
        elif price and price_cost(price, totals["prompt_tokens"],
                                  totals["completion_tokens"]) >= settings.cost_budget:
            stopped = f"cost budget {dollars(settings.cost_budget)} reached"
        elif settings.time_budget_s and time.time() - started >= settings.time_budget_s:
            stopped = f"time budget {settings.time_budget_s / 60:.1f} min reached"
        elif settings.timeout_s and time.time() - started > settings.timeout_s:
            stopped = f"time limit {settings.timeout_s:.0f} s reached"
        if stopped:
            _stop(child)
    log.close()
    if not stopped and child.returncode != 0:
        tail = (folder / "system.log").read_text(errors="replace")[-300:]
        stopped = f"error: exit status {child.returncode}: {tail}"
    return stopped


def _command(spec: PeerSpec, spec_path: Path) -> list[str]:
    """The command line of the peer's process.

    ShinkaEvolve's driver runs in its own environment, the others as ``python -m contextevolve.compare.peers
    SPEC`` in this one.
    """
    if spec.system == "shinka":
        from contextevolve.compare import shinka_peer

        return shinka_peer.prepare(spec, spec_path)
    return [sys.executable, "-m", "contextevolve.compare.peers", str(spec_path)]


def unavailable(systems: list[str]) -> list[str]:
    """Why each peer among ``systems`` cannot run here (not installed), a sentence each; empty: all can."""
    reasons = []
    for package in dict.fromkeys(PEERS[s].package for s in systems if s in PEERS):
        if package == "shinka":
            from contextevolve.compare import shinka_peer

            reason = shinka_peer.unavailable()
        elif importlib.util.find_spec(package) is None:
            reason = (f"{package} is not installed: pip install -e '.[peers]' "
                      "(OpenEvolve 0.4.1, GEPA 0.1.4, SkyDiscover 0.1.0)")
        else:
            reason = None
        if reason:
            reasons.append(reason)
    return reasons


def _stop(child: subprocess.Popen) -> None:
    """End ``child``'s process group: SIGTERM, then SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(child.pid, sig)
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
        except ProcessLookupError:
            return


def _endpoint_errors(records) -> str:
    """'' when every request was answered, else how many were not and with which HTTP statuses.

    599 means the endpoint could not be reached; the note keeps such a run from being read as a
    measurement.
    """
    failed = [r.status for r in records if r.status != 200]
    if not failed:
        return ""
    return (f"endpoint errors: {len(failed)} of {len(records)} requests failed "
            f"(HTTP {', '.join(str(s) for s in sorted(set(failed)))})")


def _tokens_by_candidate(entries: list[ledger.LedgerEntry], records) -> tuple[list[int], list[int]]:
    """``(totals, prompts)``: per entry, the tokens of the requests answered by its evaluation's end.

    ``prompts`` holds the prompt tokens among them, a number per entry like ``totals``.
    """
    done = [(r.started + r.seconds, r.total_tokens, r.prompt_tokens) for r in records]
    answered = [[(tokens, prompt) for end, tokens, prompt in done if end <= entry.finished]
                for entry in entries]
    return [sum(t for t, _ in a) for a in answered], [sum(p for _, p in a) for a in answered]


def _check_cost_budget(settings: CompareSettings) -> None:
    """Refuse a cost budget that is not positive or whose model has no price in ``settings.prices``.

    Raises:
        ValueError: the budget is not above 0, or the model every system calls has no price.
    """
    if settings.cost_budget <= 0:
        raise ValueError(f"--cost-budget must be above 0 US dollars, not {settings.cost_budget:g}")
    model = settings.priced_model
    if model not in settings.prices:
        raise ValueError(f"a cost budget needs the price of the model every system calls: none for {model!r} "
                         "(give --price MODEL=INPUT,OUTPUT, dollars per million tokens)")


def compare(settings: CompareSettings,
            on_result: Callable[[SystemResult], None] | None = None) -> list[SystemResult]:
    """Run every system of ``settings`` on every seed; returns (and writes) their results.

    The results come after those of earlier runs into the same ``out`` (other systems or seeds of the
    same task).

    Raises:
        ValueError: an unknown system or task, no seeds, a candidate budget below 1, a cost budget without
            a price for the model, ContextEvolve settings it cannot take
            (:func:`~contextevolve.compare.own_run.check_contextevolve_settings`), a variant name it cannot
            take (:func:`~contextevolve.compare.own_run.check_variant`), an ``out`` that already
            holds one of the runs asked for or a comparison on another task.
        contextevolve.llm.embedded.EmbeddedModelError: the embedded model cannot start.
    """
    unknown = [s for s in settings.systems if s not in SYSTEMS]
    if unknown:
        raise ValueError(f"unknown system {', '.join(map(repr, unknown))}: choose from {', '.join(SYSTEMS)}")
    if not settings.seeds or settings.candidates < 1:
        raise ValueError("compare needs at least one seed and a candidate budget of at least 1")
    missing = unavailable(settings.systems)
    if missing:
        raise ValueError("; ".join(missing))
    if settings.cost_budget is not None:
        _check_cost_budget(settings)
    check_contextevolve_settings(settings.contextevolve_settings)
    check_variant(settings.variant, settings.systems)
    task = get_task(settings.task)
    out = Path(settings.out).resolve()  # the peers run with their own folder as working directory
    taken = [label for label in (f"{run_name(s, settings.variant)}-s{seed}" for seed in settings.seeds
                                 for s in settings.systems) if (out / label).exists()]
    if taken:
        raise ValueError(f"{out} already holds results for {', '.join(taken)}: choose another --out")
    out.mkdir(parents=True, exist_ok=True)
    results = earlier_results(out, settings.task)
    if settings.base_url:
        upstream, model = settings.base_url, settings.model or "default"
        top_p, top_k = settings.top_p, settings.top_k
    else:
        from contextevolve.llm.embedded import TOP_K, TOP_P

        top_p, top_k = settings.top_p or TOP_P, settings.top_k or TOP_K
    overrides = {k: v for k, v in (("top_p", top_p), ("top_k", top_k)) if v is not None}
    for seed in settings.seeds:
        for system in settings.systems:
            name = run_name(system, settings.variant)
            label = f"{name}-s{seed}"
            if not settings.base_url:  # started on first use; a new one if the last system's run ended it
                upstream, model = _embedded_endpoint()
            folder = out / label
            folder.mkdir(parents=True)
            with CountingProxy(upstream, api_key=settings.api_key, base_seed=seed, overrides=overrides,
                               log_path=out / "requests.jsonl") as proxy:
                started = time.time()
                if system in PEERS:
                    stopped = run_peer(settings, system, seed, proxy.url(label), model, folder, proxy, label)
                    own, cumulative, cumulative_prompt = None, None, None
                else:
                    stopped, own, cumulative, cumulative_prompt = run_contextevolve(
                        settings, system, seed, proxy.url(label), model, folder)
                wall = time.time() - started
                records = proxy.records(label)
            stopped = "; ".join(filter(None, (stopped, _endpoint_errors(records))))
            entries = ledger.read_ledger(folder / "ledger.jsonl")
            figures = ledger.summary(entries, task)
            best = ledger.best_entry(entries, task)
            recomputed = None
            if best is not None:
                source = ledger.source_path(folder / "ledger.jsonl", best.source_sha256).read_text()
                recomputed = task.evaluate(source).combined_score
            candidates = [e for e in entries if e.candidate]
            if cumulative is None:
                cumulative, cumulative_prompt = _tokens_by_candidate(candidates, records)
            totals = {"prompt_tokens": sum(r.prompt_tokens for r in records),
                      "completion_tokens": sum(r.completion_tokens for r in records)}
            price = settings.prices.get(model)
            money = (price_cost(Price(**price), totals["prompt_tokens"], totals["completion_tokens"])
                     if price else None)
            result = SystemResult(
                system=name, seed=seed, label=label, budget=settings.candidates, initial=figures["initial"],
                best=figures["best"],
                best_recomputed=recomputed, candidates=figures["candidates"], valid=figures["valid"],
                valid_changed=figures["valid_changed"], valid_new_score=figures["valid_new_score"],
                **totals, tokens=sum(totals.values()),
                llm_calls=len(records), cost=money, own_tokens=own, wall_s=round(wall, 1),
                best_so_far=figures["best_so_far"],
                cumulative_tokens=cumulative, cumulative_prompt_tokens=cumulative_prompt, stopped=stopped,
                settings={} if system in PEERS else dict(settings.contextevolve_settings))
            (folder / "result.json").write_text(result.model_dump_json(indent=2))
            results = [r for r in results if r.label != label] + [result]
            if on_result:
                on_result(result)
            write_results(settings, results, task)
    return results
