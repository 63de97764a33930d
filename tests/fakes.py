"""Scripted LangChain fake chat models for unit tests (never used outside tests)."""

from __future__ import annotations

import itertools

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from contextevolve.tasks.registry import get_task

INITIAL = get_task("model_placement").initial_program

#: A valid, different MP program: balance by projected KVPR after placement.
BETTER_PROGRAM = INITIAL.replace(
    "kvpr = load[gpu_id] / free_mem[gpu_id]",
    "kvpr = (load[gpu_id] + model.req_rate / model.slo) / max(free_mem[gpu_id] - model.model_size, 1e-9)")
#: A program that places nothing: invalid.
INVALID_PROGRAM = INITIAL.replace("placement[best_gpu].append(model)", "pass")


def reply(
    text: str, prompt_tokens: int = 100, completion_tokens: int = 20, finish: str = "stop"
) -> AIMessage:
    """An AIMessage with usage metadata like an OpenAI-compatible endpoint returns."""
    return AIMessage(content=text, response_metadata={"finish_reason": finish}, usage_metadata={
        "input_tokens": prompt_tokens, "output_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens})


def fenced(code: str) -> str:
    return f"Here is the improved program.\n```python\n{code}```\n"


class ScriptedModel(GenericFakeChatModel):
    """GenericFakeChatModel that also records the prompts it received and each request's stop sequences."""

    seen: list = []
    stops: list = []

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(messages)
        self.stops.append(stop)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def scripted(*replies: AIMessage, cycle: bool = True) -> ScriptedModel:
    """A fake model answering ``replies`` in order (cycling forever when ``cycle``)."""
    stream = itertools.cycle(replies) if cycle else iter(replies)
    return ScriptedModel(messages=stream, seen=[], stops=[])


def default_models() -> dict[str, ScriptedModel]:
    """One scripted model per role producing a sensible iteration."""
    return {
        "summarizer": scripted(reply("Greedy placement sorting models by req_rate/slo; keeps the parent's "
                                     "min-KVPR GPU choice.", 300, 40)),
        "navigator": scripted(reply("Balance projected pressure rather than current pressure.", 400, 30)),
        "sampler": scripted(reply('{"exemplars": [1, 2], "why": "diverse"}', 250, 15)),
        "generator": scripted(reply(fenced(BETTER_PROGRAM), 900, 400),
                              reply(fenced(INVALID_PROGRAM), 900, 400),
                              reply("I cannot help with that.", 900, 10)),
    }
