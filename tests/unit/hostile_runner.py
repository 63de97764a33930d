"""Helper process for the hostile-run test: an evolution whose scripted Generator writes hostile programs.

Usage: python -m tests.unit.hostile_runner RUN_DIR ITERATIONS [--resume]
Prints each node's name as it finishes (the test kills this process mid-run).
"""

from __future__ import annotations

import sys

from contextevolve.api import evolve
from contextevolve.llm.models import use_chat_models
from tests.fakes import INITIAL, default_models, fenced, reply, scripted

# only what lies between the EVOLVE-BLOCK markers: a reply holding the markers is cut to what lies
# between them, which would leave only ``_honest`` (a fragment, never evaluated)
_HONEST = INITIAL.split("# EVOLVE-BLOCK-START\n")[1].split("# EVOLVE-BLOCK-END")[0].replace(
    "def compute_model_placement(", "def _honest(")

#: One program per class of attack that applies to Model Placement, in generation order.
HOSTILE = {
    # forges protocol frames on every descriptor and a result file, then exits mid-call
    "forged_envelope": (
        "import json, os, struct\n"
        "_h = json.dumps({'type': 'call', 'index': 0, 'status': 'ok', 'seconds': 0.0, 'value': {}, "
        "'blobs': []})\n"
        "for _fd in range(1, 12):\n"
        "    try:\n        os.write(_fd, struct.pack('>Q', len(_h)) + _h.encode())\n"
        "    except OSError:\n        pass\n"
        "open('result.json', 'w').write(json.dumps({'result': {'cases': []}}))\n"
        "def compute_model_placement(gpu_num, models):\n    os._exit(0)\n"),
    # honest on easy cases, gives up on the hardest ones (ADRS averaged over successes only)
    "gives_up_on_hard_cases": (
        "def compute_model_placement(gpu_num, models):\n"
        "    if gpu_num >= 8:\n        raise RuntimeError('too hard')\n"
        "    return _honest(gpu_num, models)\n" + _HONEST),
    # shrinks the models it was handed and returns copies
    "copies_with_smaller_models": (
        "import copy\n"
        "def compute_model_placement(gpu_num, models):\n"
        "    out = {g: [] for g in range(gpu_num)}\n"
        "    for i, m in enumerate(models):\n"
        "        c = copy.copy(m); c.model_size = 1\n        out[i % gpu_num].append(c)\n"
        "    return out\n"),
    # announces a terabyte-sized reply on the response channel, bypassing the harness
    "oversized_output": (
        "import os, struct, sys\n"
        "def compute_model_placement(gpu_num, models):\n"
        "    os.write(int(sys.argv[-1]), struct.pack('>Q', 2**40) + b'{' * 4096)\n"
        "    return {}\n"),
    # reads a secret outside its directory and the scored inputs' generator
    "reads_host_files": (
        "import os\nseen = []\n"
        "for p in ['/root/.bash_history', '/etc/shadow', os.path.expanduser('~/../.config')]:\n"
        "    try:\n        seen.append(open(p).read()[:50])\n    except OSError:\n        pass\n"
        "import contextevolve.tasks.model_placement.cases\n"
        "def compute_model_placement(gpu_num, models):\n    return {}\n"),
    # kills its supervisor and the host
    "kills_its_parents": (
        "import os, signal\n"
        "for pid in (os.getppid(), 1):\n"
        "    try:\n        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass\n"
        "def compute_model_placement(gpu_num, models):\n    raise SystemExit(0)\n"),
}

#: What each program of :data:`HOSTILE` must end with (a program record or an Evaluation dumped to a dict).
EXPECTED = {
    "forged_envelope": lambda r: r["status"] == "failed" and "malformed message" in r["reason"],
    # failed cases count as a full GPU: the score is about the success rate alone
    "gives_up_on_hard_cases": lambda r: r["metrics"]["success_rate"] < 1 and r["combined_score"] < 1,
    "copies_with_smaller_models": lambda r: r["status"] == "invalid",
    "oversized_output": lambda r: r["status"] == "failed" and "exceeds the" in r["reason"],
    "reads_host_files": lambda r: r["status"] == "failed" and "No module named" in r["reason"],
    "kills_its_parents": lambda r: r["status"] == "failed",
}


def main() -> None:
    run_dir, iterations = sys.argv[1], int(sys.argv[2])
    programs = list(HOSTILE.values())
    if "--resume" in sys.argv:  # go on with the programs not generated before the kill
        from contextevolve.api import run_status

        done = run_status(run_dir)["iterations"] + 1
        programs = programs[done:] + programs[:done]
    models = default_models()
    models["generator"] = scripted(*(reply(fenced(source), 900, 100) for source in programs))
    with use_chat_models(**models):
        evolve("model_placement", iterations=iterations, run_dir=run_dir, resume="--resume" in sys.argv,
               max_retries=0, eval_timeout_s=20, eval_cpu_s=5,
               prechecks=False,  # each attack meets the full evaluation (a smoke run stops some earlier)
               on_update=lambda node, _: print(node, flush=True))


if __name__ == "__main__":
    main()
