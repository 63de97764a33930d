"""The search's switches and their interactions, in one place (contextevolve.loop.policy)."""

from __future__ import annotations

import typing

import pytest

from contextevolve.graph.context import RunContext
from contextevolve.graph.settings import SearchSettings
from contextevolve.loop.policy import IMPORT_FIXES, IgnoredSettingWarning, SearchPolicy, ignored_settings
from contextevolve.memory.records import ProgramRecord, RepairAttempt
from contextevolve.program.forms import CODE_END, EDIT_FORMS, EditFormName, edit_form
from tests.fakes import INITIAL, default_models, reply, scripted

NAME_ERROR = "Traceback (most recent call last):\nNameError: name 'heapq' is not defined"


def failed(attempts: list[str] = (), source: str = "x = heapq.nlargest(1, [1])\n") -> ProgramRecord:
    """A child that failed on a missing import, after repairs of the given methods."""
    return ProgramRecord(id="it00001", iteration=1, parent_id="it00000", status="failed",
                         failure_kind="runtime", reason="NameError: name 'heapq' is not defined",
                         traceback=NAME_ERROR, source=source,
                         attempts=[RepairAttempt(attempt=n, method=m, status="failed", reason="boom")
                                   for n, m in enumerate(attempts, 1)])


def policy(**settings) -> SearchPolicy:
    return SearchPolicy.of(RunContext(**settings), iteration=3)


def test_the_edit_form_setting_offers_exactly_the_registered_forms():
    assert set(typing.get_args(EditFormName)) == set(EDIT_FORMS)
    hints = typing.get_type_hints(SearchSettings)
    assert set(typing.get_args(hints["edit_form"])) == set(EDIT_FORMS)
    with pytest.raises(ValueError, match="unknown edit form 'patch'.*full, diff, functions"):
        edit_form("patch")
    for form in EDIT_FORMS.values():
        assert form.second_ask in EDIT_FORMS and form.job("raises the score", INITIAL)


def test_which_view_of_a_program_each_form_shows():
    assert policy().shows_docstrings
    assert policy(edit_form="diff").shows_docstrings  # SEARCH parts must match
    assert not policy(edit_form="functions").shows_docstrings
    # the parent and the exemplars (references) alike
    documented = 'def f():\n    """Doc."""\n    return 1\n'
    assert '"""' in policy().shown(documented) and '"""' in policy(edit_form="diff").shown(documented)
    assert '"""' not in policy(edit_form="functions").shown(documented)


def test_where_requests_stop():
    assert policy().stop() == [CODE_END] and policy(stop_at_code_end=False).stop() is None
    diff = policy(edit_form="diff")
    assert diff.stop() is None and diff.second_form.name == "full"
    assert diff.stop(diff.second_form) == [CODE_END]  # a diff run's second ask wants a whole program
    assert policy(edit_form="functions").second_form.name == "functions"


def test_a_first_ask_without_guidance_is_hotter_only_with_the_navigator_on():
    from contextevolve.loop.requests import first

    def heat(p, guidance):
        return first(p, [], guidance, base="").temperature

    on, off = policy(), policy(navigator_enabled=False)
    assert heat(on, "") == pytest.approx(heat(on, "go") + on.unguided_hotter)
    assert heat(off, "") == heat(off, "go") == heat(on, "go")


def test_a_missing_import_is_a_failed_childs_only_repair():
    paper, imports = policy(import_fixes=False), policy()
    assert not paper.repair_due(failed())
    assert imports.repair_due(failed()) and imports.strategy_for(failed()) == ("import", "import heapq")
    assert imports.repair_due(failed(), True)  # free: made whatever the budget
    assert not imports.repair_due(failed(["import"] * IMPORT_FIXES))  # bounded
    assert not imports.repair_due(failed(source="import heapq\nx = heapq.nlargest(1, [1])\n"))
    unknown = failed().model_copy(update={"reason": "NameError: name 'pq' is not defined", "traceback": ""})
    assert not imports.repair_due(unknown)  # no import fixes it, and no model is asked


def test_a_changed_setting_the_others_make_ignored_is_named():
    assert ignored_settings(RunContext()) == []
    assert ignored_settings(RunContext(workers=4)) == []  # defaults left alone say nothing
    said = " | ".join(ignored_settings(RunContext(
        edit_form="diff", stop_at_code_end=False, navigator_enabled=False,
        unguided_hotter=0.5, embedded_server_per_role=True, workers=2)))
    for name in ("stop_at_code_end", "unguided_hotter", "embedded_server_per_role"):
        assert name in said
    never = ignored_settings(RunContext(num_exemplars=5))  # k 5 + 2 > the 6 candidates: never a choice
    assert len(never) == 1 and "Sampler agent is never asked" in never[0]
    assert ignored_settings(RunContext(num_exemplars=4)) == []
    assert ignored_settings(RunContext(num_exemplars=5, sampler_enabled=False)) == []


def test_one_server_per_role_only_with_one_worker():
    assert RunContext().llm.server_per_role(1) and not RunContext().llm.server_per_role(2)
    assert not RunContext(embedded_server_per_role=False).llm.server_per_role(1)


def test_a_run_warns_about_an_ignored_setting_when_it_starts(tmp_path):
    from contextevolve.api import evolve
    from contextevolve.llm.models import use_chat_models

    models = default_models()
    models["generator"] = scripted(reply("no code here"))
    with use_chat_models(**models), pytest.warns(IgnoredSettingWarning, match="stop_at_code_end"):
        evolve("model_placement", iterations=1, run_dir=tmp_path / "r", max_retries=0,
               edit_form="diff", stop_at_code_end=False)
    assert (tmp_path / "r" / "programs.jsonl").exists()


def test_the_agents_declared_once_are_what_every_list_of_agents_reads():
    import dataclasses

    from contextevolve.agents import AGENTS, CONTEXT_AGENTS
    from contextevolve.cli import build_parser
    from contextevolve.compare.own_run import ABLATIONS
    from contextevolve.graph.builder import ITERATION_PHASES
    from contextevolve.graph.settings import DEFAULT_MAX_TOKENS, Ablations
    from contextevolve.llm.models import OWN_SERVER_ROLES
    from contextevolve.roles import ROLES, Role

    run = next(a for a in build_parser()._actions if a.dest == 'command').choices['run']
    disable_choices = next(a.choices for a in run._actions if a.dest == 'disable')
    names = [a.name for a in AGENTS]
    assert list(ROLES) == names == list(typing.get_args(Role)) == list(DEFAULT_MAX_TOKENS)
    assert {a.phase for a in AGENTS} <= set(ITERATION_PHASES)
    enabled = {f.name[:-len("_enabled")] for f in dataclasses.fields(Ablations)
               if f.name.endswith("_enabled")}
    assert enabled == set(CONTEXT_AGENTS) == set(disable_choices)  # a context agent has its ablation setting
    assert set(ABLATIONS) == {f"contextevolve-no-{name}" for name in CONTEXT_AGENTS}
    assert set(OWN_SERVER_ROLES) == {a.name for a in AGENTS if a.own_server}


def test_the_first_and_the_second_ask_sample_with_the_runs_nucleus_and_top_k(tmp_path, monkeypatch):
    """A code twin's second ask is sent with no top_p or top_k of its own, as the first ask: the run's."""
    from contextevolve.loop import requests
    from tests.fakes import BETTER_PROGRAM, fenced
    from tests.unit.test_repair import run

    sent, real = [], requests.call_choices

    def spy(role, messages, ctx, n, **kwargs):
        sent.append((kwargs.get("top_p"), kwargs.get("top_k")))
        return real(role, messages, ctx, n, **kwargs)

    monkeypatch.setattr(requests, "call_choices", spy)
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(fenced(BETTER_PROGRAM), 700, 400),
                         cycle=False)
    _, records, _ = run(tmp_path, generator)
    assert sent == [(None, None), (None, None)]  # the first ask copied its parent; the second did not
    assert records[1]["status"] == "ok"


def test_only_an_ask_after_a_twin_wants_a_change_line_before_the_program(tmp_path):
    """A code twin's second ask asks for the `Change:` line; the first ask never does."""
    from contextevolve.prompts.generator import CHANGE_FIRST, with_change_line
    from tests.fakes import BETTER_PROGRAM, fenced
    from tests.unit.test_repair import run

    for name, form in EDIT_FORMS.items():  # the line goes just before the reply format, where the job has one
        job = form.job("raises the score", INITIAL)
        asked = with_change_line(job, form.reply_format(INITIAL))
        assert (CHANGE_FIRST in asked) == (name != "diff")
        assert asked.replace(CHANGE_FIRST, "").lower() == job.lower()
    named = "Change: the GPU's load counts the model placed on it.\n" + fenced(BETTER_PROGRAM)
    generator = scripted(reply(fenced(INITIAL), 900, 400), reply(named, 700, 400), cycle=False)
    _, records, _ = run(tmp_path, generator)
    first, second = (seen[-1].content for seen in generator.seen)
    assert "`Change:`" not in first and "`Change:`" in second
    assert records[1]["status"] == "ok" and records[1]["source"].strip() == BETTER_PROGRAM.strip()
