"""Loading a profile for a run: :func:`harness.config.load_profile` (the YAML read and validated, a leaf of the
package) followed by each feature's own check of what the profile names outside itself, so that the settings
never import the features and a bad data file still fails before any load is sent."""

from __future__ import annotations

import os

from harness.config import Profile, load_profile
from harness.prompts.source import check_profile_sources

__all__ = ["load_checked_profile"]


def load_checked_profile(path: str | os.PathLike[str]) -> Profile:
    """The profile at ``path``, validated (:func:`harness.config.load_profile`) and its files checked: the prompt
    source's data set, length histograms and tokenizer opened and read
    (:func:`harness.prompts.source.check_profile_sources`).

    Raises:
        ProfileError: as :func:`harness.config.load_profile`; a bad data file:
            ``<profile>: dataset.path: <data file>:<line>: <problem>`` (one line per file).
    """
    profile = load_profile(path)
    check_profile_sources(profile, path)
    return profile
