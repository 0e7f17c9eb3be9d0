"""Reasoning-model simulator: an OpenAI-compatible server with a continuous-batching timing model.

Run it with ``python -m harness.sim serve --help`` or from Python::

    from harness.sim import launch
    with launch(preset="demo", time_scale=0.1) as sim:
        print(sim.url, sim.model)
"""

from harness.sim.launcher import SimProcess, SimStartError, build_command, launch
from harness.sim.presets import PRESETS, Preset, get_preset

__all__ = ["PRESETS", "Preset", "SimProcess", "SimStartError", "build_command", "get_preset", "launch"]
