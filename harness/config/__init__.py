"""Profiles (the settings): the YAML that says what to load, how hard, for how long, and what to report.

:func:`load_profile` validates a file completely before any load is sent; every problem is reported as
``<file>: <key.path>: <what is wrong>``. See ``profiles/k26.yaml`` for a commented example.

The package is a leaf: it imports only vocabulary modules and the models of sections a feature owns
(``tests/test_imports.py`` holds the list); modules: :mod:`~harness.config.base` (strictness, the error),
:mod:`~harness.config.sections`, :mod:`~harness.config.slo`, :mod:`~harness.config.profile` (the whole profile) and
:mod:`~harness.config.load` (the file).
"""

from __future__ import annotations

from harness.config.base import ProfileError
from harness.config.load import PROFILES_DIR, default_profile_path, load_profile, resolve_profile_path
from harness.config.profile import Profile
from harness.config.sections import (
    DEFAULT_FOLLOW_UPS,
    DEFAULT_HOURS_TO_N,
    DEFAULT_SLICE_S,
    SHAPE_TICK_S,
    AxesSpec,
    ConversationSpec,
    CostSpec,
    OutputSpec,
    PromptSpec,
    RateSpec,
    ReportSpec,
    RequestDefaults,
    SearchSpec,
    SimulatorSpec,
    SingleStreamSpec,
    StepsSpec,
    TargetSpec,
    TimeoutsSpec,
    UsableSpec,
    WarmupSpec,
)
from harness.config.slo import DEFAULT_SLO_TARGET_SHARE, SloSpec, slo_deprecations

__all__ = [
    "DEFAULT_FOLLOW_UPS",
    "DEFAULT_HOURS_TO_N",
    "DEFAULT_SLICE_S",
    "DEFAULT_SLO_TARGET_SHARE",
    "PROFILES_DIR",
    "SHAPE_TICK_S",
    "AxesSpec",
    "ConversationSpec",
    "CostSpec",
    "OutputSpec",
    "Profile",
    "ProfileError",
    "PromptSpec",
    "RateSpec",
    "ReportSpec",
    "RequestDefaults",
    "SearchSpec",
    "SimulatorSpec",
    "SingleStreamSpec",
    "SloSpec",
    "StepsSpec",
    "TargetSpec",
    "TimeoutsSpec",
    "UsableSpec",
    "WarmupSpec",
    "default_profile_path",
    "load_profile",
    "resolve_profile_path",
    "slo_deprecations",
]
