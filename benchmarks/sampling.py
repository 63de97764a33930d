"""Which sampling settings make the Generator's first versions work: a paired replay of stored prompts.

Takes the first Generator prompt of every iteration of runs recorded with ``--log-prompts``
(``RUN_DIR/prompts.jsonl``; each iteration's parent from ``programs.jsonl``), asks the model
again under each sampling configuration with the same seeds, and judges every reply as a run
would: turned into a child (``program.forms.build_child``), compared with its parent (normalised code),
pre-checked, and evaluated in full. No repair, no context agents: only the Generator's first
version, which is where the embedded model's children fail. Configurations alternate
prompt by prompt, so a noisy machine slows them alike.

Prints per configuration: replies, children built, twins (of the parent; for a first ask also of any program
stored before the iteration, as a run's twin check sees them), pre-check failures,
valid children (``ok`` and not a twin), those with a score other than their parent's and, for a first ask,
every stored valid program's (*new score*: a behaviourally new child, as a score can tell) and better than
the parent, prompt and completion tokens and
seconds per reply, new scores per 10,000 tokens (the Navigator's included where it is asked again); writes
every reply's outcome, edit form and text to ``--out`` (JSON).

``--reask`` replays the *second* ask instead: the one a run makes after the first version was a
twin of its parent (stored re-asks only), with the run's seed and temperature for it, under one of
four prompts (key ``reask``): ``fresh`` (what a run sent before the change line,
:func:`prompts.generator.reask_messages`: a new conversation with the program without docstrings and one
named mutation), ``plan`` (the same asking for a ``Change:`` line before the program: what a run sends),
``edits`` (the
follow-up conversation asking for SEARCH/REPLACE edits that runs sent before) and ``followup`` (the
same follow-up asking for the whole program).

Usage:
    python benchmarks/sampling.py RUN_DIR [RUN_DIR ...] [--samples 1] [--limit N] [--reask]
        [--copies only|none]
        --config base= --config qwen=top_p=0.8,top_k=20 [--config cool=temperature=0.5]
        [--base-url URL --model NAME] [--out FILE]

``first=fresh`` (with a first ask) sends, instead of the stored request, the second ask's short form as the
first ask: a new conversation with the task, the parent without docstrings and one named mutation
(:func:`prompts.generator.reask_messages` with ``mutation_for(sample, iteration)``); ``first=guided`` the same
form naming the iteration's stored Navigator guidance instead of a mutation. Both drop the
exemplars, abstracts and scores the stored request holds: they measure what that context buys per token.

``--no-effect`` replays the ask after a *behavioural* twin (a valid version whose every result equals a stored
program's; stored asks only, :func:`prompts.generator.no_effect_messages`), with the run's seed offset and
temperature for it; the reply is judged against that version and its score, and ``plan=1`` asks it for the
``Change:`` line too. Stored asks that repeated the effect's ``no effect:`` prefix are replayed without it.

A configuration is ``NAME=`` (the defaults: for the embedded model its recommended top_p 0.8 and
top_k 20; ``top_p=0.95,top_k=40`` are llama-cpp-python's server defaults) or ``NAME=key=value,...`` with keys
``temperature`` (the Generator's), ``top_p``, ``top_k`` and ``mutation`` (1: the request also names
one mutation, :func:`named_step` of ``program.mutations.mutation_for(sample, iteration)``) and ``direction``
(0: the stored request without its ``## Direction`` section, the Navigator's guidance: what the Generator is
sent when the Navigator gives none, as in a run's first iteration, ``--limit 1``) and ``nodoc`` (1: every
```python block of the request shown without its docstrings, :func:`program.docstrings.without_docstrings`)
and ``paragraph`` (1: the ``## Direction`` section holding what the Navigator would have said had it been
asked with a stop at its first paragraph break, :func:`paragraph_guidance`; the replay then keeps only the
iterations whose guidance that changes, and prints the Navigator tokens the stop would have saved there)
and ``plan`` (1: the stored whole-program request asks for one ``Change:`` line naming the edit before the
program, :data:`prompts.generator.CHANGE_FIRST`; ``reask=plan`` is the second ask worded so)
and ``renav`` (1: the Navigator is asked again with its stored request, with the replay's seed, and the
``## Direction`` section holds what it says; the replay then keeps only the iterations whose Navigator was
asked and gave guidance, and prints the Navigator's tokens with the Generator's). ``refcopy`` (1: the
reference programs' part of the stored request says they were evaluated already and a copy of one is worth
nothing, :data:`COPY_WARNING`) and ``refcode`` (0: the reference programs shown by their abstracts only,
without code; the replay then keeps only the requests it changes) are two tries against the first version
copying a reference; ``--copies only`` keeps only the first asks whose stored version was the code of a
program stored before the iteration (not the parent's), ``--copies none`` only the others. ``refs`` (N: only
the first N reference programs of the stored request, as a run with ``--exemplars N`` would show, its
Sampler's first N picks; the replay then keeps only the requests that showed more) measures what the others
buy. With ``--reask``, ``mutations`` (``run`` or ``several``,
:data:`MUTATION_LISTS`) picks the list the second ask's mutation comes from.

The same request with the same seed does not always get the same reply from llama.cpp's server, so a
difference of a few pairs may be noise: run a replay twice (or ``--samples 2``) and compare the spread
(docs/results.md, *Showing the Navigator each step's changed lines*).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_core.messages import AIMessage, HumanMessage, convert_to_messages

from benchmarks import replay
from contextevolve.evaluation.limits import SandboxLimits
from contextevolve.graph.context import RunContext, flat_settings, upgraded
from contextevolve.llm import transcript
from contextevolve.llm.parsing import clip_to_sentence
from contextevolve.loop.requests import KINDS, REASK_HOTTER
from contextevolve.nodes.navigate import GUIDANCE_CHARS
from contextevolve.program.docstrings import without_docstrings
from contextevolve.program.forms import edit_form, edit_format
from contextevolve.program.mutations import MUTATIONS, mutation_for
from contextevolve.program.replies import EditError
from contextevolve.program.twins import normalized_code
from contextevolve.prompts.generator import reask_messages, with_change_line
from contextevolve.tasks.prechecks import precheck
from contextevolve.tasks.registry import get_task

KEYS = {"temperature": float, "top_p": float, "top_k": int, "mutation": int, "reask": str, "first": str,
        "direction": int, "nodoc": int, "paragraph": int, "plan": int, "renav": int,
        "refcopy": int, "refcode": int, "refs": int, "mutations": str}
REASKS = ("fresh", "edits", "followup", "plan")
MUTATION_LISTS = {"run": MUTATIONS, "several": (*MUTATIONS[:3], (
    "build several candidate solutions (for example from different orders) and keep the best one"),
    *MUTATIONS[4:])}
"""The second ask's mutation lists ``mutations=`` picks: ``run`` the one a run names, ``several`` the one
runs named before 2026-12-06, whose fourth entry built several solutions and kept the best instead of
changing what the program decides by (docs/decisions/second-ask-mutations.md). The replay then keeps only
the asks whose mutation the lists' choice changes."""
FIRSTS = ("stored", "fresh", "guided")
COPY_WARNING = ("These programs were evaluated already: writing one of them again is worth nothing. "
                "Take ideas from them, not their whole code.")
"""What ``refcopy=1`` puts under the references' heading: a wording tried against the first version copying a
reference program it was shown, and not adopted (docs/decisions/copy-warning.md)."""
WHOLE = "Return the whole program. "
"""Where the whole-program form's reply format starts (``program.forms``): ``plan=1`` asks for the
``Change:`` line before it."""
REFERENCES = "## Reference programs\n"
"""The heading of the exemplars' part of a first Generator request (``prompts.generator.exemplars_part``)."""
FIRST_ASK = re.compile(r"^## Current program \(score ", re.MULTILINE)
"""The heading of the parent in an iteration's first Generator request (``prompts.generator.parent_section``):
second asks, repairs and the other agents show programs under other headings."""
REASK_MARKERS = ("would teach the search nothing", "Make one concrete change to how this program computes",
                 "the line marked `# HOLE` stands for lines")
"""Text only a second ask after a twin holds: the follow-up prompts runs sent before, :data:`REASKS`
``fresh``, and the hole ask that runs with a since deleted setting sent (docs/decisions/hole-ask.md)."""

NO_EFFECT_MARKER = "## What your last change did\nIt ran correctly but had no effect"
"""Text only the ask after a behavioural twin holds (:func:`prompts.generator.no_effect_messages`)."""


def named_step(mutation: str) -> str:
    """The sentence ``mutation=1`` appends to the request (tried for the first ask; not adopted)."""
    return (f"Make the direction concrete with one change of this kind: {mutation}. Keep the rest of the "
            "program as it is.")


def parse_config(text: str) -> tuple[str, dict]:
    """``"qwen=top_p=0.8,top_k=20"`` -> ``("qwen", {"top_p": 0.8, "top_k": 20})``.

    Raises:
        SystemExit: no name, a key that is not one of :data:`KEYS`, or a value of the wrong type.
    """
    try:
        name, values = replay.parse_config(text, KEYS)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if values.get("reask", "fresh") not in REASKS:
        raise SystemExit(f"--config {text!r}: reask must be one of {', '.join(REASKS)}")
    if values.get("first", "stored") not in FIRSTS:
        raise SystemExit(f"--config {text!r}: first must be one of {', '.join(FIRSTS)}")
    if values.get("first", "stored") != "stored" and values.get("mutation"):
        raise SystemExit(f"--config {text!r}: first= already names the change; drop mutation=1")
    if values.get("mutations", "run") not in MUTATION_LISTS:
        raise SystemExit(f"--config {text!r}: mutations must be one of {', '.join(MUTATION_LISTS)}")
    return name, values


def _generator_asks(run_dir: Path) -> list[tuple[int, int, dict, dict, dict | None]]:
    """Every first-attempt Generator request of a one-worker run: ``(iteration, n, row, parent, navigator)``.

    ``n`` counts the iteration's Generator requests from 0, ``row`` is the transcript row, ``parent`` the
    child's parent record, ``navigator`` the iteration's last Navigator row (the reply its guidance came from;
    None where the Navigator was not asked). An iteration starts at its first ask, the one request that
    shows the parent with its score (:data:`FIRST_ASK`), since the Navigator is not asked every iteration
    (its guidance is reused); a Navigator request belongs to the iteration whose first ask follows it.
    Transcripts without such a request (runs before that heading) start an iteration at each Navigator
    request and at the run's first Generator request. The transcript's rows come in request order. A request
    of several choices (rows that carry the same request and messages) is one ask, its first reply's row;
    the iteration is then the prompt's first child's (runs of several children per prompt: the replays
    judge one reply per prompt).

    Raises:
        SystemExit: the run has no transcript (it was not recorded with ``--log-prompts``).
    """
    try:
        rows = transcript.read(run_dir)
    except FileNotFoundError as exc:
        raise SystemExit(str(exc)) from None
    lines = (run_dir / "programs.jsonl").read_text().splitlines()
    records = {r["iteration"]: r for r in map(json.loads, lines)}
    by_id = {r["id"]: r for r in records.values()}
    first_asks = [row["role"] == "generator" and row["attempt"] == 1 and bool(row["messages"])
                  and stored_kind(row) == "first" for row in rows]
    asks, iteration, n, navigator, asked, last = [], 0, 0, None, None, None
    for row, first_ask in zip(rows, first_asks):
        if "request" in row:  # the rows of one request's choices: the first stands for the request
            same, last = (row["request"], row["messages"]) == last, (row["request"], row["messages"])
            if same:
                continue
        if any(first_asks):
            starts = first_ask
        else:
            starts = row["role"] == "navigator" or (row["role"] == "generator" and iteration == 0)
        if row["attempt"] == 1 and starts:
            iteration, n, navigator = iteration + 1, 0, asked if any(first_asks) else None
            asked = None
        if row["role"] == "navigator":
            asked = navigator = row  # a retry's reply replaces the first attempt's
        if row["role"] == "generator" and row["attempt"] == 1 and iteration in records and iteration > 0:
            asks.append((iteration, n, row, by_id[records[iteration]["parent_id"]], navigator))
            n += 1
    return asks


def stored_kind(row: dict) -> str:
    """The kind of Generator request a transcript row is (``first``, ``second_ask``, ``no_effect``; ``""``).

    A row written since requests are data carries its kind (``row["request"]``,
    ``contextevolve.loop.requests.GeneratorRequest.label``); an older row's is read from its wording.
    """
    if "request" in row:
        return row["request"]["kind"]
    content = row["messages"][-1]["content"] if row["messages"] else ""
    if NO_EFFECT_MARKER in content:
        return "no_effect"
    if any(m in content for m in REASK_MARKERS):
        return "second_ask"
    return "first" if FIRST_ASK.search(content) is not None else ""


def first_prompts(run_dir: Path) -> list[dict]:
    """Per iteration of a one-worker run: its first Generator messages, parent source and score, and guidance.

    The guidance is the Navigator's of that iteration, with the Navigator reply it came from and that
    reply's completion tokens (``""`` and 0 where the Navigator was not asked); ``reply`` is the stored first
    version, ``stored`` the code of every program stored before the iteration (a copy of one is a twin) and
    ``stored_scores`` the scores of the valid ones among them (a reply scoring one of them is no new score).
    """
    records = [json.loads(line) for line in (run_dir / "programs.jsonl").read_text().splitlines()]
    guidance = {r["iteration"]: r.get("guidance", "") for r in records}
    return [{"run": run_dir.name, "iteration": iteration, "messages": row["messages"],
             "parent": parent["source"], "parent_score": parent["combined_score"],
             "reply": row.get("reply", ""), "stored": [r["source"] for r in records
                                                      if r["iteration"] < iteration and r["source"]],
             "stored_scores": [r["combined_score"] for r in records
                               if r["iteration"] < iteration and r.get("status") == "ok"],
             "guidance": guidance.get(iteration, ""),
             "navigator_reply": navigator.get("reply", "") if navigator else "",
             "navigator_messages": navigator.get("messages") if navigator else None, "run_dir": str(run_dir),
             "navigator_completion": (navigator.get("usage") or {}).get("navigator", {}).get("completion", 0)
             if navigator else 0}
            for iteration, n, row, parent, navigator in _generator_asks(run_dir) if n == 0]


def _messages(stored: list[dict]) -> list:
    """Stored messages (as the transcript keeps them) as LangChain messages."""
    return convert_to_messages(stored)


def reask_prompts(run_dir: Path) -> list[dict]:
    """Per iteration of a one-worker run whose first version was a twin: its first ask, reply and parent.

    Each holds the first ask and its reply, the parent's source and score, and the iteration (the row after
    the first ask whose request holds one of :data:`REASK_MARKERS`).
    """
    prompts, firsts = [], {}
    for iteration, n, row, parent, _ in _generator_asks(run_dir):
        if n == 0:
            firsts[iteration] = row
        elif iteration in firsts and stored_kind(row) == "second_ask":
            first = firsts.pop(iteration)  # one re-ask per iteration
            prompts.append({"run": run_dir.name, "iteration": iteration, "first": first["messages"],
                            "first_reply": first["reply"], "parent": parent["source"],
                            "parent_score": parent["combined_score"], "request": row.get("request")})
    return prompts


def no_effect_prompts(run_dir: Path) -> list[dict]:
    """Every stored ask after a behavioural twin of a one-worker run: its messages, version and score.

    ``parent`` is the version that had no effect (as the ask shows it, without docstrings) and
    ``parent_score`` the score of the stored program whose results it repeated (named in the ask).
    """
    by_id = {r["id"]: r for r in map(json.loads, (run_dir / "programs.jsonl").read_text().splitlines())}
    prompts = []
    for iteration, _, row, _, _ in _generator_asks(run_dir):
        content = row["messages"][-1]["content"]
        if stored_kind(row) != "no_effect":
            continue
        version = re.search(r"## Current program\n```python\n(.*?)```", content, re.S)
        twin = re.search(r"every result equals (\w+)'s", content)
        if version is None or twin is None or twin.group(1) not in by_id:
            continue
        messages = [*row["messages"][:-1], {**row["messages"][-1], "content": content.replace(
            "had no effect: no effect: ", "had no effect: ")}]
        prompts.append({"run": run_dir.name, "iteration": iteration, "messages": messages,
                        "parent": version.group(1), "parent_score": by_id[twin.group(1)]["combined_score"],
                        "request": row.get("request")})
    return prompts


def no_effect_request(values: dict, prompt: dict, sample: int, run_seed: int) -> tuple[str, int, float, list]:
    """``(mode, seed, temperature, messages)`` of an ask after a behavioural twin as a run makes it.

    Sample 0 has the stored request's seed (``prompt["request"]``, a row written since requests are data;
    for an older row the run's seed plus the kind's offset and the iteration,
    ``contextevolve.loop.requests.KINDS``), sample ``k`` that plus ``1000 k``; the temperature is
    :data:`REASK_HOTTER` above the configuration's. ``plan=1`` asks for the change line.
    """
    messages = _messages(prompt["messages"])
    if values.get("plan"):
        messages = with_change_first(messages)
    stored = prompt.get("request")
    # (a run's iteration counts the iterations before the child: the child's number - 1)
    seed = (stored["seed"] if stored else run_seed + KINDS["no_effect"].seed_offset + prompt["iteration"] - 1)
    return "full", seed + 1000 * sample, _temperature(values) + REASK_HOTTER, messages


def reask_seed(run_seed: int, sample: int) -> int:
    """The seed of sample ``sample`` of a run's second asks, before the iteration is added."""
    return run_seed + 1000 * sample


def reask_mutation(values: dict, prompt: dict, seed: int) -> str:
    """The mutation a second ask under ``values`` names for ``prompt`` (``seed``: its sample's)."""
    return mutation_for(seed, prompt["iteration"] - 1, MUTATION_LISTS[values.get("mutations", "run")])


def reask(kind: str, prompt: dict, task, seed: int, mutation: str | None = None) -> tuple[str, list]:
    """Edit form name and messages of a second ask of ``kind`` for a stored twin.

    ``kind`` is one of :data:`REASKS`; each names ``mutation`` (by default the one a run names:
    :func:`reask_mutation` of the run's list).
    """
    mutation = mutation or reask_mutation({}, prompt, seed)
    if kind in ("fresh", "plan"):
        return "full", reask_messages(task.description, prompt["parent"], mutation, task.higher_is_better,
                                      edit_form("full"), change_line=kind == "plan")
    told = ("That program is the same as its parent apart from comments, docstrings, unused imports and "
            "uncalled helpers, so it would teach the search nothing. Change how the program computes its "
            f"result: {mutation}. ")
    conversation = [*_messages(prompt["first"]), AIMessage(prompt["first_reply"])]
    if kind == "edits":
        return "diff", [*conversation, HumanMessage(told + "Reply with one or more SEARCH/REPLACE edits. "
                                                    + edit_format(prompt["parent"]))]
    return "full", [*conversation, HumanMessage(told + "Reply with the complete changed program in a single "
                                                "```python code block.")]


def first_messages(kind: str, prompt: dict, task, sample: int, mode: str) -> list:
    """A first ask of ``kind`` (``fresh`` or ``guided``, see the module doc) in place of the stored request.

    It is written as a second ask of the run's edit form ``mode`` is (:attr:`EditForm.second_ask`).

    Raises:
        SystemExit: ``guided`` for an iteration that stored no guidance (a run without the Navigator).
    """
    guidance = prompt.get("guidance", "").strip().rstrip(".")
    if kind == "guided" and not guidance:
        raise SystemExit(f"first=guided: {prompt.get('run')} iteration {prompt['iteration']} has no "
                         "Navigator guidance")
    change = guidance if kind == "guided" else mutation_for(sample, prompt["iteration"])
    return reask_messages(task.description, prompt["parent"], change, task.higher_is_better,
                          edit_form(edit_form(mode).second_ask))


DIRECTION = re.compile(r"(## Direction\n)[^\n]*(\n\n(?=## ))")
"""The one-line ``## Direction`` section of a stored Generator request (heading, closing break in groups)."""


def without_direction(messages: list) -> list:
    """``messages`` with the ``## Direction`` section taken out of the last one.

    The guidance is one line (whitespace collapsed by ``llm.parsing.clip_to_sentence``); without it the
    request is what ``prompts.generator.GeneratorPrompt.text`` renders with no guidance.

    Raises:
        SystemExit: the request has no such section.
    """
    content, count = DIRECTION.subn("", messages[-1].content)
    if not count:
        raise SystemExit("direction=0: a stored request without a '## Direction' section")
    return [*messages[:-1], HumanMessage(content)]


PARAGRAPH_STOP = "\n\n"
"""The stop sequence ``paragraph=1`` emulates on the Navigator: its reply would end at its first paragraph
break."""


def _before_break(reply: str) -> str | None:
    """``reply``'s text before its first :data:`PARAGRAPH_STOP`; None without one (the stop never fires)."""
    return reply.split(PARAGRAPH_STOP, 1)[0] if PARAGRAPH_STOP in reply else None


def paragraph_guidance(prompt: dict) -> str:
    """The guidance a Navigator stopped at :data:`PARAGRAPH_STOP` would have given ``prompt``'s iteration.

    It comes from the stored reply: the same seed decodes the same tokens up to the stop, so the reply stopped
    there is the stored reply's text before its first paragraph break, clipped as ``nodes/navigate.py`` clips
    guidance (the stop ends a reply before the token cap, so it is not cut off). Empty when the reply starts
    with the break; the stored guidance when the reply has no break (the stop never fires).
    """
    kept = _before_break(prompt.get("navigator_reply", ""))
    return prompt.get("guidance", "") if kept is None else clip_to_sentence(kept, GUIDANCE_CHARS)


def paragraph_changes(prompt: dict) -> bool:
    """Whether ``paragraph=1`` gives ``prompt``'s iteration other guidance than the stored one.

    An iteration without guidance keeps none.
    """
    return bool(prompt.get("guidance")) and paragraph_guidance(prompt) != prompt["guidance"]


def paragraph_tokens_saved(prompt: dict) -> float:
    """Navigator completion tokens the stop would not have decoded for ``prompt``'s iteration.

    Estimated as the share of the stored reply's characters after the break times its completion tokens.
    """
    reply = prompt.get("navigator_reply", "")
    kept = _before_break(reply)
    return 0.0 if kept is None else prompt.get("navigator_completion", 0) * (1 - len(kept) / len(reply))


def with_direction(messages: list, guidance: str) -> list:
    """``messages`` with the one-line ``## Direction`` section of the last one holding ``guidance`` instead.

    The section is taken out (:func:`without_direction`) when ``guidance`` is empty: a run sends none then.

    Raises:
        SystemExit: the request has no such section.
    """
    if not guidance:
        return without_direction(messages)
    content, count = DIRECTION.subn(lambda m: m.group(1) + guidance + m.group(2), messages[-1].content)
    if not count:
        raise SystemExit("paragraph=1: a stored request without a '## Direction' section")
    return [*messages[:-1], HumanMessage(content)]


def renav_wanted(values: dict) -> bool:
    """Whether configuration ``values`` asks the Navigator again (``renav=1``)."""
    return bool(values.get("renav"))


def renav_replayable(prompt: dict) -> bool:
    """Whether ``prompt``'s iteration asked the Navigator, which gave the guidance its request holds."""
    return bool(prompt.get("navigator_messages") and prompt.get("guidance"))


def asked_guidance(values: dict, prompt: dict, seed: int, base_url: str | None, model: str | None) -> dict:
    """The Navigator asked again for ``prompt``'s iteration under ``values``: its guidance and tokens.

    Clipped as ``nodes/navigate.py`` clips it; empty when the reply is empty.
    """
    from contextevolve.llm.models import create_chat_model

    messages = _messages(prompt["navigator_messages"])
    ctx = RunContext(base_url=base_url, model=model, seed=seed)
    reply = create_chat_model("navigator", ctx).invoke(messages)
    usage = reply.usage_metadata or {}
    truncated = reply.response_metadata.get("finish_reason") == "length"
    return {"guidance": clip_to_sentence(str(reply.content), GUIDANCE_CHARS, truncated=truncated),
            "navigator_prompt": usage.get("input_tokens", 0),
            "navigator_completion": usage.get("output_tokens", 0)}


def _block_without_docstrings(match: re.Match) -> str:
    """A matched fenced ``python`` block (its code the first group) written again without docstrings."""
    return f"```python\n{without_docstrings(match.group(1))}```"


def without_docstring_blocks(messages: list) -> list:
    """``messages`` with every fenced ``python`` block of the last one shown without its docstrings."""
    content = re.sub(r"```python\n(.*?)```", _block_without_docstrings, messages[-1].content, flags=re.S)
    return [*messages[:-1], HumanMessage(content)]


def _references(content: str) -> tuple[int, int]:
    """Where the ``## Reference programs`` part of a request's text starts and ends (``(-1, -1)``: none)."""
    start = content.find(REFERENCES)
    if start < 0:
        return -1, -1
    end = content.find("\n## ", start + len(REFERENCES))
    return start, len(content) if end < 0 else end


def _sub_references(messages: list, pattern: str, repl) -> list:
    """``messages`` with ``re.sub(pattern, repl)`` applied to the last one's references part only.

    A request without that part is returned as it is.
    """
    content = messages[-1].content
    start, end = _references(content)
    if start < 0:
        return messages
    part = re.sub(pattern, repl, content[start:end], flags=re.S)
    return [*messages[:-1], HumanMessage(content[:start] + part + content[end:])]


def with_copy_warning(messages: list) -> list:
    """``messages`` whose references part says a copy of one is worth nothing (``refcopy=1``).

    :data:`COPY_WARNING` under the heading; a request without references is returned as it is.
    """
    content = messages[-1].content
    start, _ = _references(content)
    if start < 0:
        return messages
    at = start + len(REFERENCES)
    content = content[:at] + COPY_WARNING + "\n" + content[at:]
    return [*messages[:-1], HumanMessage(content)]


def without_reference_code(messages: list) -> list:
    """``messages`` whose reference programs are shown by their abstracts only (``refcode=0``): no code."""
    return _sub_references(messages, r"```python\n.*?```\n?", "")


def first_references(messages: list, count: int) -> list:
    """``messages`` whose ``## Reference programs`` part keeps only its first ``count`` programs (``refs=N``).

    A request with no more than ``count`` is returned as it is; with ``count`` 0 the part goes, heading
    and all.
    """
    content = messages[-1].content
    start, end = _references(content)
    if start < 0:
        return messages
    part = content[start + len(REFERENCES):end]
    sections = re.split(r"\n(?=### Reference \d+ )", part)
    if len(sections) <= count:
        return messages
    if not count:  # the part and the blank line after it
        return [*messages[:-1], HumanMessage(content[:start] + content[end:].lstrip("\n"))]
    kept = "\n".join(sections[:count]).rstrip("\n") + part[len(part.rstrip("\n")):]  # the part's own ending
    return [*messages[:-1], HumanMessage(content[:start] + REFERENCES + kept + content[end:])]


def _changes(prompt: dict, view) -> bool:
    """Whether ``view`` (messages -> messages) changes the last message of ``prompt``'s stored request."""
    messages = _messages(prompt["messages"])
    return view(messages)[-1].content != messages[-1].content


def refs_change(prompt: dict, count: int) -> bool:
    """Whether ``refs=count`` changes ``prompt``'s stored request (it showed more reference programs)."""
    return _changes(prompt, lambda messages: first_references(messages, count))


def copied_stored(prompt: dict, task, mode: str) -> bool:
    """Whether ``prompt``'s stored first version was the code of a program stored before (not the parent)."""
    entry = task.job().entry
    try:
        child = edit_form(mode).build(prompt["parent"], prompt["reply"], truncated=False)
    except EditError:
        return False
    code = normalized_code(child, entry)
    return code is not None and code != normalized_code(prompt["parent"], entry) and any(
        code == normalized_code(source, entry) for source in prompt["stored"])


def refcode_changes(prompt: dict) -> bool:
    """Whether ``refcode=0`` changes ``prompt``'s stored request (a reference was shown with its code)."""
    return _changes(prompt, without_reference_code)


def with_change_first(messages: list) -> list:
    """``messages`` whose last one asks for the ``Change:`` line before the program (``plan=1``).

    :func:`prompts.generator.with_change_line` puts it before the whole-program format, as a run's asks do.

    Raises:
        SystemExit: the request does not ask for the whole program (another edit form).
    """
    content = messages[-1].content
    if WHOLE not in content:
        raise SystemExit("plan=1: a stored request that does not ask for the whole program")
    return [*messages[:-1], HumanMessage(with_change_line(content, WHOLE))]


def _temperature(values: dict) -> float:
    """The Generator's temperature under configuration ``values`` (the run's default unless it sets one)."""
    return values.get("temperature", RunContext().llm.temperature_for("generator"))


def first_request(values: dict, prompt: dict, task, sample: int, n: int,
                  mode: str) -> tuple[str, int, float, list]:
    """``(mode, seed, temperature, messages)`` of a first ask under configuration ``values``.

    The messages are the stored request (or ``first=``'s form in its place, optionally naming a mutation),
    seeded by prompt and sample; ``mode`` is the run's edit form.
    """
    messages = _messages(prompt["messages"])
    if values.get("first", "stored") != "stored":
        messages = first_messages(values["first"], prompt, task, sample, mode)
    if values.get("direction", 1) == 0:
        messages = without_direction(messages)
    elif "asked_guidance" in prompt:
        messages = with_direction(messages, prompt["asked_guidance"])
    elif values.get("paragraph") and paragraph_changes(prompt):
        messages = with_direction(messages, paragraph_guidance(prompt))
    if values.get("nodoc"):
        messages = without_docstring_blocks(messages)
    if values.get("plan"):
        messages = with_change_first(messages)
    if values.get("refcopy"):
        messages = with_copy_warning(messages)
    if values.get("refcode", 1) == 0:
        messages = without_reference_code(messages)
    if "refs" in values:
        messages = first_references(messages, values["refs"])
    if values.get("mutation"):
        step = named_step(mutation_for(sample, prompt["iteration"]))
        messages = [*messages[:-1], HumanMessage(f"{messages[-1].content} {step}")]
    return mode, 1000 * sample + n, _temperature(values), messages


def reask_request(values: dict, prompt: dict, task, sample: int,
                  run_seed: int) -> tuple[str, int, float, list]:
    """``(mode, seed, temperature, messages)`` of a second ask as a run makes it.

    Sample 0 of a stored ask that carries its request (``prompt["request"]``, rows written since requests are
    data) has that request's seed and names its mutation, unless ``mutations`` names another list; sample
    ``k`` adds ``1000 k`` to the seed and names the mutation of its own seed. An older row's ask is derived as
    ``contextevolve.loop.requests.KINDS`` samples it: the run's seed plus the iteration. The temperature is
    :data:`REASK_HOTTER` above the configuration's.
    """
    seed, stored = reask_seed(run_seed, sample), prompt.get("request")
    mutation = reask_mutation(values, prompt, seed)
    if stored and sample == 0 and values.get("mutations", "run") == "run":
        mutation = stored["mutation"]
    mode, messages = reask(values.get("reask", "fresh"), prompt, task, seed, mutation)
    sent = stored["seed"] + 1000 * sample if stored else seed + prompt["iteration"]
    return mode, sent, _temperature(values) + REASK_HOTTER, messages


def judge(task, mode: str, prompt: dict, text: str, truncated: bool) -> dict:
    """The outcome of one reply as the run would see its first version (``mode``: its edit form's name)."""
    entry = task.job().entry
    try:
        child = edit_form(mode).build(prompt["parent"], text, truncated=truncated)
    except EditError as exc:
        return {"outcome": "twin" if exc.unchanged else "not built", "reason": str(exc)[:160]}
    code = normalized_code(child, entry)
    if code == normalized_code(prompt["parent"], entry):
        return {"outcome": "twin", "reason": "same code as the parent"}
    stored = prompt.get("stored", ())
    if code is not None and any(code == normalized_code(source, entry) for source in stored):
        return {"outcome": "twin", "reason": "same code as a program stored before"}
    failed = precheck(task, child, SandboxLimits())
    if failed is not None:
        return {"outcome": "pre-check", "reason": failed.reason[:160]}
    result = task.evaluate(child)
    if result.status != "ok":
        return {"outcome": result.status, "reason": result.reason[:160]}
    score = result.combined_score
    return {"outcome": "ok", "score": score, "better": task.better(score, prompt["parent_score"]),
            "new": (task.better(score, prompt["parent_score"]) or task.better(prompt["parent_score"], score))
            and score not in prompt.get("stored_scores", ())}


def kept_asks(run: str, asks: list[dict], keep, says: str) -> list[dict]:
    """The ``asks`` for which ``keep(ask)`` holds; prints ``says`` (``{kept}``, ``{of}``: the two counts)."""
    kept = [p for p in asks if keep(p)]
    print(f"{run}: {says.format(kept=len(kept), of=len(asks))} (replayed: those)", flush=True)
    return kept


def summary(rows: list[dict]) -> dict:
    """One configuration's figures over its replies ``rows``: outcomes counted, tokens, seconds per reply."""
    n = max(len(rows), 1)
    count = lambda outcome: sum(r["outcome"] == outcome for r in rows)  # noqa: E731
    navigator = sum(r.get("navigator_prompt", 0) + r.get("navigator_completion", 0) for r in rows)
    tokens = sum(r["completion"] + r.get("prompt", 0) for r in rows) + navigator
    new = sum(bool(r.get("new")) for r in rows)
    return {"replies": len(rows), "built": len(rows) - count("not built"), "twins": count("twin"),
            "pre-check": count("pre-check"), "valid": count("ok"), "new": new,
            "better": sum(bool(r.get("better")) for r in rows),
            "new/10k tokens": 1e4 * new / tokens if tokens else 0.0,
            "prompt/reply": sum(r.get("prompt", 0) for r in rows) / n,
            "completion/reply": sum(r["completion"] for r in rows) / n, "navigator/reply": navigator / n,
            "s/reply": sum(r["seconds"] for r in rows) / n}


def main() -> int:
    """Replay the stored asks under every configuration and print the table and the paired comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--config", action="append", required=True,
                        help="NAME=key=value,... (see module doc)")
    parser.add_argument("--samples", type=int, default=1, help="replies per prompt and configuration")
    parser.add_argument("--limit", type=int, help="first N iterations of each run")
    parser.add_argument("--reask", action="store_true",
                        help="replay the second ask after a twin, not the first ask")
    parser.add_argument("--no-effect", action="store_true",
                        help="replay the ask after a behavioural twin, not the first ask")
    parser.add_argument("--copies", choices=("only", "none"),
                        help="replay only the first asks whose stored version copied a program stored before "
                             "(a reference shown, mostly; not the parent), or only the others")
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--out", type=Path, default=Path("runs/sampling.json"))
    args = parser.parse_args()
    configs = dict(parse_config(c) for c in args.config)
    if args.reask and args.no_effect:
        parser.error("--reask and --no-effect replay different asks: give one")
    if args.no_effect and any(set(v) - {"temperature", "top_p", "top_k", "plan"} for v in configs.values()):
        parser.error("--no-effect replays the stored ask: its configurations set only temperature, top_p, "
                     "top_k and plan")
    if args.reask and any(v.get("first", "stored") != "stored" for v in configs.values()):
        parser.error("first= replaces the first ask; --reask replays the second")
    if args.copies and (args.reask or args.no_effect):
        parser.error("--copies picks first asks; --reask and --no-effect replay other asks")
    if args.reask and any(v.get("paragraph") for v in configs.values()):
        parser.error("paragraph= changes the first ask's guidance; --reask replays the second ask, "
                     "which has none")
    from contextevolve.llm.models import create_chat_model

    results: dict[str, list[dict]] = {name: [] for name in configs}
    lists_compared = args.reask and any("mutations" in v for v in configs.values())
    for run_dir in args.runs:
        # older runs' names in today's (``lanes`` before workers, ``generation_mode`` before ``edit_form``)
        settings = flat_settings(upgraded(json.loads((run_dir / "run.json").read_text())))
        workers = settings.get("workers") or 1
        if workers > 1:
            parser.error(f"{run_dir}: its {workers} workers' requests interleave in its transcript, which is "
                         "read iteration after iteration: replay runs of one worker")
        task = get_task(settings["task"])
        run_seed = settings.get("seed", 0)
        first_mode = settings.get("edit_form") or settings.get("generation_mode") or "full"
        asks = (reask_prompts(run_dir) if args.reask else no_effect_prompts(run_dir) if args.no_effect
                else first_prompts(run_dir))[:args.limit]
        if any(v.get("paragraph") for v in configs.values()):
            kept = [p for p in asks if paragraph_changes(p)]
            saved = sum(map(paragraph_tokens_saved, asks))
            print(f"{run_dir.name}: paragraph=1 changes the guidance of {len(kept)} of {len(asks)} "
                  f"iterations (replayed: those), saving ~{saved:.0f} Navigator completion tokens of "
                  f"{sum(p['navigator_completion'] for p in asks)}", flush=True)
            asks = kept
        if args.copies:
            copies = args.copies == "only"
            asks = kept_asks(run_dir.name, asks, lambda p: copied_stored(p, task, first_mode) == copies,
                             "{kept} of {of} first versions "
                             + ("copied a stored program" if copies else "copied no stored program"))
        if any(v.get("refcode", 1) == 0 for v in configs.values()):
            asks = kept_asks(run_dir.name, asks, refcode_changes, "refcode=0 changes {kept} of {of} requests")
        for count in sorted({v["refs"] for v in configs.values() if "refs" in v}):
            asks = kept_asks(run_dir.name, asks, lambda p, n=count: refs_change(p, n),
                             f"refs={count} changes {{kept}} of {{of}} requests")
        if any(renav_wanted(v) for v in configs.values()):
            asks = kept_asks(run_dir.name, asks, renav_replayable,
                             "the Navigator gave the guidance of {kept} of {of} iterations")
        for n, prompt in enumerate(asks):
            for sample in range(args.samples):
                if lists_compared and len({reask_mutation(v, prompt, reask_seed(run_seed, sample))
                                           for v in configs.values()}) == 1:
                    continue  # every list names the same mutation here: the same request in every arm
                for name, values in configs.items():
                    navigator: dict = {}  # the Navigator's guidance and tokens, where asked again
                    if args.reask:
                        mode, seed, temperature, messages = reask_request(values, prompt, task, sample,
                                                                          settings.get("seed", 0))
                    elif args.no_effect:
                        mode, seed, temperature, messages = no_effect_request(values, prompt, sample,
                                                                              settings.get("seed", 0))
                    else:
                        asked = prompt
                        if renav_wanted(values):
                            navigator = asked_guidance(values, prompt, 1000 * sample + n, args.base_url,
                                                       args.model)
                            asked = {**prompt, "asked_guidance": navigator["guidance"]}
                        mode, seed, temperature, messages = first_request(values, asked, task, sample, n,
                                                                          first_mode)
                    ctx = RunContext(base_url=args.base_url, model=args.model, seed=seed,
                                     top_p=values.get("top_p"), top_k=values.get("top_k"),
                                     temperatures={**RunContext().llm.temperatures, "generator": temperature})
                    start = time.perf_counter()
                    reply = create_chat_model("generator", ctx).invoke(messages)
                    seconds = time.perf_counter() - start
                    truncated = reply.response_metadata.get("finish_reason") == "length"
                    row = {"run": prompt["run"], "iteration": prompt["iteration"], "sample": sample,
                           "completion": (reply.usage_metadata or {}).get("output_tokens", 0),
                           "prompt": (reply.usage_metadata or {}).get("input_tokens", 0),
                           "seconds": seconds,
                           "mode": mode, "reply": str(reply.content), **navigator,
                           **judge(task, mode, prompt, str(reply.content), truncated)}
                    results[name].append(row)
                    print(f"{name:>8} {row['run']} it{row['iteration']} s{sample}: {row['outcome']}"
                          f" {row.get('score', row.get('reason', ''))} ({seconds:.0f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"configs": configs, "results": results}, indent=2))
    print("\n| config | settings | replies | built | twins | pre-check | valid | new score | better "
          "| prompt/reply | completion/reply | Navigator/reply | new / 10k tokens | s/reply |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        s = summary(rows)
        print(f"| {name} | {configs[name] or 'defaults'} | {s['replies']} | {s['built']} | {s['twins']} | "
              f"{s['pre-check']} | {s['valid']} | {s['new']} | {s['better']} | {s['prompt/reply']:.0f} | "
              f"{s['completion/reply']:.0f} | {s['navigator/reply']:.0f} | {s['new/10k tokens']:.2f} | "
              f"{s['s/reply']:.0f} |")
    names = list(results)
    for name in names[1:]:  # paired by prompt and sample against the first configuration
        pairs = list(zip(results[names[0]], results[name]))
        gained = sum(b["outcome"] == "ok" and a["outcome"] != "ok" for a, b in pairs)
        lost = sum(a["outcome"] == "ok" and b["outcome"] != "ok" for a, b in pairs)
        new_gained = sum(bool(b.get("new")) and not a.get("new") for a, b in pairs)
        new_lost = sum(bool(a.get("new")) and not b.get("new") for a, b in pairs)
        print(f"paired, {name} against {names[0]}: {gained} replies valid only in {name}, "
              f"{lost} only in {names[0]}; {new_gained} with a new score only in {name}, {new_lost} only in "
              f"{names[0]} ({len(pairs)} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
