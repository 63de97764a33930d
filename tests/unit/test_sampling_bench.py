"""benchmarks/sampling.py: configurations, each iteration's first Generator prompt, and judging a reply."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from contextevolve.tasks.registry import get_task
from tests.fakes import BETTER_PROGRAM, INITIAL, INVALID_PROGRAM, fenced

_spec = importlib.util.spec_from_file_location("sampling_bench",
                                               Path(__file__).parents[2] / "benchmarks" / "sampling.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_configurations_parse_and_refuse_unknown_keys():
    assert bench.parse_config("base=") == ("base", {})
    assert bench.parse_config("qwen=top_p=0.8,top_k=20") == ("qwen", {"top_p": 0.8, "top_k": 20})
    with pytest.raises(SystemExit, match="unknown key 'top_z'"):
        bench.parse_config("x=top_z=1")
    with pytest.raises(SystemExit, match="give it a name"):
        bench.parse_config("=top_p=0.8")


def test_first_prompts_take_the_first_generator_ask_after_each_navigator_request(tmp_path):
    def row(role, text, attempt=1):
        return json.dumps({"role": role, "attempt": attempt,
                           "messages": [{"type": "human", "content": text}]})

    rows = [row("summarizer", "s0"), row("navigator", "n1"), row("generator", "first 1"),
            row("generator", "reask 1"), row("navigator", "n2"), row("sampler", "x"),
            row("generator", "first 2", attempt=1), row("generator", "retry", attempt=2)]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": "it00000", "iteration": 0, "parent_id": None, "source": "P0", "combined_score": 1.0},
                {"id": "it00001", "iteration": 1, "parent_id": "it00000", "source": "P1",
                 "combined_score": 2.0},
                {"id": "it00002", "iteration": 2, "parent_id": "it00001", "source": "P2",
                 "combined_score": 3.0}]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    found = bench.first_prompts(tmp_path)
    assert [p["messages"][0]["content"] for p in found] == ["first 1", "first 2"]
    assert [(p["parent"], p["parent_score"]) for p in found] == [("P0", 1.0), ("P1", 2.0)]
    assert [p["stored"] for p in found] == [["P0"], ["P0", "P1"]]  # the programs stored before each


def test_the_first_iteration_needs_no_navigator_request(tmp_path):
    """A run's first Navigator has no step and is not asked: iteration 1 starts at the first Generator ask."""
    def row(role, text):
        return json.dumps({"role": role, "attempt": 1, "messages": [{"type": "human", "content": text}]})

    rows = [row("summarizer", "s0"), row("generator", "first 1"), row("generator", "reask 1"),
            row("summarizer", "s1"), row("navigator", "n2"), row("generator", "first 2")]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": f"it0000{n}", "iteration": n, "parent_id": None if n == 0 else "it00000",
                 "source": f"P{n}", "combined_score": 1.0} for n in range(3)]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    found = bench.first_prompts(tmp_path)
    assert [(p["iteration"], p["messages"][0]["content"]) for p in found] == [(1, "first 1"), (2, "first 2")]


def test_direction_0_takes_the_guidance_out_of_the_stored_request():
    from langchain_core.messages import HumanMessage

    stored = [HumanMessage("## Task\nT\n\n## Current program\nP\n\n## Direction\nGo left. Then right.\n\n"
                           "## Your job\nJ")]
    assert bench.without_direction(stored)[0].content == (
        "## Task\nT\n\n## Current program\nP\n\n## Your job\nJ")
    with pytest.raises(SystemExit, match="Direction"):
        bench.without_direction([HumanMessage("## Task\nT\n\n## Your job\nJ")])
    assert bench.parse_config("bare=direction=0") == ("bare", {"direction": 0})


def test_a_first_ask_in_the_short_form_names_a_mutation_or_the_stored_guidance():
    task = get_task("model_placement")
    prompt = {"iteration": 3, "parent": INITIAL, "guidance": "Place the largest models first.",
              "messages": [{"type": "human", "content": "stored"}]}
    fresh = bench.first_messages("fresh", prompt, task, 0, "full")
    assert [m.type for m in fresh] == ["system", "human"] and "stored" not in fresh[-1].content
    assert bench.mutation_for(0, 3) in fresh[-1].content and '"""Place each model' not in fresh[-1].content
    guided = bench.first_messages("guided", prompt, task, 0, "full")
    assert "computes its result: Place the largest models first. The change" in guided[-1].content
    assert bench.parse_config("g=first=guided") == ("g", {"first": "guided"})
    with pytest.raises(SystemExit, match="first must be one of"):
        bench.parse_config("x=first=loud")


def test_reask_prompts_take_the_second_ask_after_a_twin_with_the_first_conversation(tmp_path):
    def row(role, text, reply="", attempt=1):
        return json.dumps({"role": role, "attempt": attempt, "reply": reply,
                           "messages": [{"type": "system", "content": "sys"},
                                        {"type": "human", "content": text}]})

    rows = [row("navigator", "n1"), row("generator", "first 1", "copy 1"),
            row("generator", "Make one concrete change to how this program computes its result: x"),
            row("navigator", "n2"), row("generator", "first 2", "new code"), row("generator", "fixing a bug"),
            row("navigator", "n3"), row("generator", "first 3", "copy 3"),
            row("generator", "That program ... so it would teach the search nothing. Change ...")]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": f"it0000{i}", "iteration": i, "parent_id": f"it0000{i - 1}" if i else None,
                 "source": INITIAL, "combined_score": float(i)} for i in range(4)]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    found = bench.reask_prompts(tmp_path)
    assert [(p["iteration"], p["first_reply"], p["parent_score"]) for p in found] == [(1, "copy 1", 0.0),
                                                                                      (3, "copy 3", 2.0)]
    task = get_task("model_placement")
    mode, fresh = bench.reask("fresh", found[0], task, seed=0)
    assert mode == "full" and len(fresh) == 2 and "Make one concrete change" in fresh[-1].content
    assert '"""Place each model' not in fresh[-1].content  # the program without its docstrings
    mode, edits = bench.reask("edits", found[0], task, seed=0)
    assert mode == "diff" and [m.type for m in edits] == ["system", "human", "ai", "human"]
    assert edits[2].content == "copy 1" and "<<<<<<< SEARCH" in edits[-1].content
    mode, followup = bench.reask("followup", found[0], task, seed=0)
    assert mode == "full" and "complete changed program" in followup[-1].content
    with pytest.raises(SystemExit, match="reask must be one of"):
        bench.parse_config("x=reask=shout")


def test_iterations_start_at_their_first_ask_when_the_navigator_is_not_asked_every_iteration(tmp_path):
    """The Navigator's guidance is reused between refreshes: its requests no longer mark iterations."""
    def row(role, text, reply=""):
        return json.dumps({"role": role, "attempt": 1, "reply": reply,
                           "messages": [{"type": "system", "content": "sys"},
                                        {"type": "human", "content": text}]})

    first = "## Task\nT\n\n## Current program (score {}; x {})\nAbstract: a\n```python\nX = 1\n```"
    rows = [row("summarizer", "abstract this"), row("generator", first.format(0, 0), "copy 1"),
            row("generator", "Make one concrete change to how this program computes its result: x"),
            row("navigator", "n2", "guide"), row("generator", first.format(1, 1), "new"),
            row("generator", first.format(2, 2), "copy 3"),  # guidance reused: no Navigator request
            row("generator", "## Current program, with some lines removed\n... the line marked `# HOLE` "
                             "stands for lines")]  # the hole ask older runs could send
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": f"it0000{i}", "iteration": i, "parent_id": f"it0000{i - 1}" if i else None,
                 "source": INITIAL, "combined_score": float(i), "guidance": "g" if i > 1 else ""}
                for i in range(4)]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    firsts = bench.first_prompts(tmp_path)
    assert [(p["iteration"], p["guidance"], p["navigator_reply"]) for p in firsts] == [
        (1, "", ""), (2, "g", "guide"), (3, "g", "")]
    assert "(score 1; x 1)" in firsts[1]["messages"][-1]["content"]
    assert [(p["iteration"], p["first_reply"]) for p in bench.reask_prompts(tmp_path)] == [(1, "copy 1"),
                                                                                          (3, "copy 3")]


def test_replies_are_judged_as_a_run_judges_a_first_version():
    task = get_task("model_placement")
    prompt = {"parent": INITIAL, "parent_score": task.evaluate(INITIAL).combined_score}
    assert bench.judge(task, "full", prompt, fenced(INITIAL), False)["outcome"] == "twin"
    assert bench.judge(task, "full", prompt, "no code here", False)["outcome"] == "not built"
    broken = BETTER_PROGRAM.replace("    ordered = sorted(", "    pq.heapify([])\n    ordered = sorted(")
    assert bench.judge(task, "full", prompt, fenced(broken), False)["outcome"] == "pre-check"
    invalid = bench.judge(task, "full", prompt, fenced(INVALID_PROGRAM), False)
    assert invalid["outcome"] == "invalid" and "models not placed" in invalid["reason"]
    good = bench.judge(task, "full", prompt, fenced(BETTER_PROGRAM), False)
    assert good["outcome"] == "ok" and good["score"] == pytest.approx(
        task.evaluate(BETTER_PROGRAM).combined_score)
    assert good["score"] > prompt["parent_score"] and good["better"] is True
    worse = bench.judge(task, "full", {**prompt, "parent_score": good["score"] + 1}, fenced(BETTER_PROGRAM),
                        False)
    assert worse["better"] is False and worse["new"] is True
    same = bench.judge(task, "full", {**prompt, "parent_score": good["score"]}, fenced(BETTER_PROGRAM), False)
    assert same["outcome"] == "ok" and same["new"] is False  # valid, new code, the parent's score
    cost = {"completion": 100, "prompt": 900, "seconds": 1.0}
    rows = [{**good, **cost}, {**same, **cost},
            {"outcome": "twin", **cost}]
    figures = bench.summary(rows)
    assert (figures["valid"], figures["new"]) == (2, 1)
    assert figures["new/10k tokens"] == pytest.approx(1e4 / 3000) and figures["prompt/reply"] == 900


def test_requests_are_seeded_as_the_replay_promises():
    """Requests are seeded as the replay promises, first asks and second asks alike.

    First asks: seed 1000 x sample + prompt number, the Generator's temperature; second asks: as a
    run makes them (run seed + 1000 x sample + iteration, hotter by REASK_HOTTER).
    """
    task = get_task("model_placement")
    prompt = {"run": "r", "iteration": 3, "messages": [{"type": "system", "content": "S"},
                                                         {"type": "human", "content": "U"}],
              "parent": INITIAL, "parent_score": 1.0, "guidance": "",
              "first": [{"type": "human", "content": "U"}], "first_reply": fenced(INITIAL)}
    mode, seed, temperature, messages = bench.first_request({}, prompt, task, sample=2, n=5, mode="full")
    assert (mode, seed) == ("full", 2005) and [m.content for m in messages] == ["S", "U"]
    assert bench.first_request({"temperature": 0.5}, prompt, task, 0, 0, "diff")[:3] == ("diff", 0, 0.5)
    named = bench.first_request({"mutation": 1}, prompt, task, 0, 0, "full")[3]
    assert named[-1].content.startswith("U Make the direction concrete")
    mode, seed, hot, _ = bench.reask_request({"temperature": 0.5}, prompt, task, sample=1, run_seed=7)
    assert (mode, seed) == ("full", 7 + 1000 + 3) and hot == pytest.approx(0.5 + bench.REASK_HOTTER)
    # a stored ask that carries its request: its own seed and mutation, whatever the derivation would give
    stored = {**prompt, "request": {"kind": "second_ask", "seed": 99, "mutation": "swap two models"}}
    _, seed, _, messages = bench.reask_request({}, stored, task, sample=0, run_seed=7)
    assert seed == 99 and "swap two models" in messages[-1].content
    assert bench.reask_request({}, stored, task, sample=2, run_seed=7)[1] == 2099


def test_paragraph_1_gives_the_guidance_a_navigator_stopped_at_its_first_paragraph_break_would_give(tmp_path):
    from langchain_core.messages import HumanMessage

    def row(role, text, reply="", usage=None, attempt=1):
        return json.dumps({"role": role, "attempt": attempt, "messages": [{"type": "human", "content": text}],
                           "reply": reply, "usage": usage or {}})

    reply = "Place the largest model first.  It frees\nthe most room.\n\nEvidence: it00002 [1] shows it."
    rows = [row("generator", "first 1"), row("navigator", "n2", reply="garbled", attempt=1),
            row("navigator", "n2", reply=reply, usage={"navigator": {"prompt": 500, "completion": 40}},
                attempt=2),
            row("generator", "first 2")]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": f"it0000{n}", "iteration": n, "parent_id": None if n == 0 else "it00000",
                 "source": f"P{n}", "combined_score": 1.0, "guidance": "" if n < 2 else "Whole reply."}
                for n in range(3)]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    first, second = bench.first_prompts(tmp_path)
    assert (first["navigator_reply"], first["navigator_completion"]) == ("", 0)
    assert (second["navigator_reply"], second["navigator_completion"]) == (reply, 40)  # the retry's reply
    # the text before the break, whitespace collapsed as a run's guidance is; 40 tokens * the share after it
    assert bench.paragraph_guidance(second) == "Place the largest model first. It frees the most room."
    assert bench.paragraph_tokens_saved(second) == pytest.approx(40 * (1 - reply.index("\n\n") / len(reply)))
    assert bench.paragraph_guidance({"navigator_reply": "\n\nA reply that opens with a blank line."}) == ""
    # no break: the stop never fires, whatever the run clipped (here a reply cut off at its cap)
    unbroken = {"navigator_reply": "One paragraph. Cut off at the c", "navigator_completion": 9,
                "guidance": "One paragraph."}
    assert (bench.paragraph_guidance(unbroken) == "One paragraph."
            and bench.paragraph_tokens_saved(unbroken) == 0)

    stored = [HumanMessage("## Task\nT\n\n## Direction\nWhole reply.\n\n## Your job\nJ")]
    prompt = {"messages": [{"type": "human", "content": stored[0].content}], "guidance": "Whole reply.",
              "navigator_reply": reply, "iteration": 2}
    _, _, _, messages = bench.first_request({"paragraph": 1}, prompt, get_task("model_placement"), 0, 0,
                                            "full")
    assert messages[-1].content == ("## Task\nT\n\n## Direction\nPlace the largest model first. "
                                    "It frees the most room.\n\n## Your job\nJ")
    _, _, _, messages = bench.first_request({"paragraph": 1}, {**prompt, "navigator_reply": "\n\nx"},
                                            get_task("model_placement"), 0, 0, "full")
    assert messages[-1].content == "## Task\nT\n\n## Your job\nJ"  # nothing left: no Direction section
    assert bench.parse_config("cut=paragraph=1") == ("cut", {"paragraph": 1})


def test_no_effect_prompts_take_the_ask_after_a_behavioural_twin_with_its_version_and_score(tmp_path):
    """``--no-effect`` replays the stored ask after a behavioural twin, judged against the version shown."""
    from contextevolve.program.forms import edit_form
    from contextevolve.prompts.generator import no_effect_messages

    def row(text, reply=""):
        return json.dumps({"role": "generator", "attempt": 1, "reply": reply,
                           "messages": [{"type": "system", "content": "sys"},
                                        {"type": "human", "content": text}]})

    task = get_task("model_placement")
    first = "## Task\nT\n\n## Current program (score {}; x {})\nAbstract: a\n```python\nX = 1\n```"
    ask = no_effect_messages(task.description, BETTER_PROGRAM, "every result equals it00000's "
                             "(score 0)", "reverse the order", True, edit_form("full"))[-1].content
    stored = ask.replace("had no effect: ", "had no effect: no effect: ")  # as runs before the fix sent it
    rows = [row(first.format(0, 0), "renamed"), row(stored, "new code"), row(first.format(1, 1), "other")]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    programs = [{"id": f"it0000{i}", "iteration": i, "parent_id": f"it0000{i - 1}" if i else None,
                 "source": INITIAL, "combined_score": 10.0 + i} for i in range(3)]
    (tmp_path / "programs.jsonl").write_text("\n".join(map(json.dumps, programs)) + "\n")
    found = bench.no_effect_prompts(tmp_path)
    assert [(p["iteration"], p["parent_score"]) for p in found] == [(1, 10.0)]  # it00000's score
    assert "compute_model_placement" in found[0]["parent"] and '"""' not in found[0]["parent"]
    mode, seed, temperature, plain = bench.no_effect_request({}, found[0], sample=1, run_seed=5)
    assert mode == "full" and seed == 5 + 1000 + bench.KINDS["no_effect"].seed_offset + 0  # child 1
    assert plain[-1].content == ask and "Change:" not in ask  # the repeated prefix is taken out
    planned = bench.no_effect_request({"plan": 1}, found[0], sample=1, run_seed=5)[3]
    text = planned[-1].content
    assert text.count("`Change:`") == 1 and text.index("`Change:`") > text.index("## Your job")
    # a row that carries its request (as runs write them now) is replayed with its seed, whatever its words
    labelled = json.loads(rows[1]) | {"request": {"kind": "no_effect", "seed": 4242, "temperature": 1.1}}
    (tmp_path / "prompts.jsonl").write_text("\n".join([rows[0], json.dumps(labelled), rows[2]]) + "\n")
    found = bench.no_effect_prompts(tmp_path)
    assert bench.no_effect_request({}, found[0], sample=1, run_seed=5)[1] == 4242 + 1000


def test_renav_asks_the_navigator_again_only_where_it_gave_the_stored_guidance():
    assert bench.renav_wanted({"renav": 1}) and not bench.renav_wanted({})
    assert not bench.renav_replayable({"navigator_messages": None, "guidance": "g"})
    assert not bench.renav_replayable({"navigator_messages": [{}], "guidance": ""})
    with pytest.raises(SystemExit, match="unknown key 'changes'"):
        bench.parse_config("c=changes=6")


def test_refcopy_1_and_refcode_0_change_only_the_reference_programs_part():
    from langchain_core.messages import HumanMessage

    code = "def f():\n    return 1\n"
    stored = [HumanMessage(f"## Current program\n```python\n{code}```\n\n## Reference programs\n"
                           f"### Reference 1 (score 2)\nAbstract: A.\n```python\n{code}```\n\n"
                           "## Your job\nJ")]
    warned = bench.with_copy_warning(stored)[0].content
    assert f"## Reference programs\n{bench.COPY_WARNING}\n### Reference 1" in warned
    assert warned.replace(bench.COPY_WARNING + "\n", "") == stored[0].content
    bare = bench.without_reference_code(stored)[0].content
    assert bare.count("return 1") == 1 and bare.index("return 1") < bare.index("## Reference programs")
    assert "Abstract: A." in bare and bare.endswith("## Your job\nJ")
    alone = [HumanMessage(f"## Current program\n```python\n{code}```\n\n## Your job\nJ")]
    assert bench.with_copy_warning(alone) == alone and bench.without_reference_code(alone) == alone
    assert bench.refcode_changes({"messages": [{"type": "human", "content": stored[0].content}]})
    assert not bench.refcode_changes({"messages": [{"type": "human", "content": alone[0].content}]})
    assert bench.parse_config("w=refcopy=1,refcode=0") == ("w", {"refcopy": 1, "refcode": 0})


def test_refs_keeps_the_first_reference_programs_of_the_stored_request():
    from langchain_core.messages import HumanMessage

    from contextevolve.prompts.generator import Exemplar, exemplar_section, exemplars_part

    sections = [exemplar_section(n, Exemplar("ok", n, f"A{n}.", f"def f():\n    return {n}\n"))
                for n in (1, 2, 3)]

    def request(shown: list[str]) -> str:
        part = f"{exemplars_part(shown)}\n\n" if shown else ""
        return f"## Current program\n```python\ncode\n```\n\n{part}## Your job\nJ"

    stored = [HumanMessage(request(sections))]
    for count in (0, 1, 2):
        assert bench.first_references(stored, count)[0].content == request(sections[:count])
    assert bench.first_references(stored, 3) == stored
    prompt = {"messages": [{"type": "human", "content": stored[0].content}]}
    assert bench.refs_change(prompt, 2) and not bench.refs_change(prompt, 3)
    assert bench.parse_config("one=refs=1") == ("one", {"refs": 1})


def test_a_reply_that_copies_a_program_stored_before_is_a_twin():
    task = get_task("model_placement")
    prompt = {"parent": INITIAL, "parent_score": task.evaluate(INITIAL).combined_score,
              "stored": [INITIAL, BETTER_PROGRAM], "reply": fenced(BETTER_PROGRAM)}
    judged = bench.judge(task, "full", prompt, fenced(BETTER_PROGRAM), False)
    assert judged == {"outcome": "twin", "reason": "same code as a program stored before"}
    assert bench.copied_stored(prompt, task, "full")
    assert not bench.copied_stored({**prompt, "reply": fenced(INITIAL)}, task, "full")  # the parent: no
    assert not bench.copied_stored({**prompt, "stored": [INITIAL]}, task, "full")


def test_a_reply_scoring_what_a_stored_program_scored_has_no_new_score():
    task = get_task("model_placement")
    better = task.evaluate(BETTER_PROGRAM).combined_score
    prompt = {"parent": INITIAL, "parent_score": task.evaluate(INITIAL).combined_score}
    assert bench.judge(task, "full", prompt, fenced(BETTER_PROGRAM), False)["new"] is True
    echo = bench.judge(task, "full", {**prompt, "stored_scores": [better]}, fenced(BETTER_PROGRAM), False)
    assert echo["outcome"] == "ok" and echo["better"] is True and echo["new"] is False


def test_an_unparseable_reply_is_no_copy_of_an_unparseable_stored_program():
    task = get_task("model_placement")
    prompt = {"parent": INITIAL, "parent_score": 1.0, "stored": ["def broken(:\n"],
              "reply": fenced("def other(:\n")}
    assert not bench.copied_stored(prompt, task, "full")
    assert bench.judge(task, "full", prompt, fenced("def other(:\n"), False)["outcome"] != "twin"


def test_kept_asks_filters_and_says_how_many(capsys):
    kept = bench.kept_asks("r", [{"n": 1}, {"n": 2}, {"n": 3}], lambda p: p["n"] > 1, "{kept} of {of} odd")
    assert kept == [{"n": 2}, {"n": 3}] and capsys.readouterr().out == "r: 2 of 3 odd (replayed: those)\n"


def test_mutations_several_names_another_mutation_only_where_its_list_differs():
    prompt = {"iteration": 1, "parent": INITIAL, "parent_score": 1.0}
    run, several = {"reask": "plan"}, {"reask": "plan", "mutations": "several"}
    named = {seed: (bench.reask_mutation(run, prompt, seed), bench.reask_mutation(several, prompt, seed))
             for seed in range(len(bench.MUTATIONS))}
    differ = [seed for seed, (a, b) in named.items() if a != b]
    assert len(differ) == 1 and "another of the values" in named[differ[0]][0]
    task = get_task("model_placement")
    _, messages = bench.reask("plan", prompt, task, differ[0], named[differ[0]][1])
    assert "build several candidate solutions" in messages[-1].content
    _, default = bench.reask("plan", prompt, task, differ[0])  # a run's list by default
    assert "another of the values the program reads" in default[-1].content
    with pytest.raises(SystemExit, match="mutations must be one of"):
        bench.parse_config("x=mutations=wide")
