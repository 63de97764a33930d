"""Helper process for the SIGKILL test: runs an evolution with slow scripted models, printing each node.

Usage: python -m tests.unit.crash_runner RUN_DIR ITERATIONS [--resume] [--workers N] [--samples-per-prompt N]

(One child per prompt unless ``--samples-per-prompt`` says otherwise, as in every unit test: the scripted
models answer one reply per request.)
"""

from __future__ import annotations

import sys
import time

from contextevolve.api import evolve
from contextevolve.llm.models import use_chat_models
from tests.fakes import ScriptedModel, default_models


class Slow(ScriptedModel):
    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        time.sleep(0.3)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def main() -> None:
    run_dir, iterations = sys.argv[1], int(sys.argv[2])
    workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 1
    per_prompt = (int(sys.argv[sys.argv.index("--samples-per-prompt") + 1])
                  if "--samples-per-prompt" in sys.argv else 1)
    slow = {role: Slow(messages=m.messages, seen=[]) for role, m in default_models().items()}
    with use_chat_models(**slow):
        evolve("model_placement", iterations=iterations, run_dir=run_dir, resume="--resume" in sys.argv,
               max_retries=0, workers=workers, samples_per_prompt=per_prompt,
               on_update=lambda node, _: print(node, flush=True))


if __name__ == "__main__":
    main()
