"""Reasoning-model simulator: an OpenAI-compatible server with a continuous-batching timing model, server
flavours (vLLM, SGLang, OpenAI hidden reasoning, llama.cpp), speculative decoding, fault injection and a
ground-truth log (see ``harness/sim/README.md``).

Run it with ``python -m harness.sim serve --help`` or from Python::

    from harness.sim import launch
    with launch(preset="demo", time_scale=0.1, extra_args=["--truth-log", "/tmp/truth.jsonl"]) as sim:
        print(sim.url, sim.model)
"""

from harness.sim.faults import FAULT_TYPES
from harness.sim.launcher import SimProcess, SimStartError, build_command, launch
from harness.sim.presets import PRESETS, Preset, get_preset
from harness.sim.protocol import FLAVOURS
from harness.sim.truth import read_truth

__all__ = [
    "FAULT_TYPES",
    "FLAVOURS",
    "PRESETS",
    "Preset",
    "SimProcess",
    "SimStartError",
    "build_command",
    "get_preset",
    "launch",
    "read_truth",
]
