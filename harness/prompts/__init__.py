"""Prompt sources beyond the profile's fixed mix: local data sets and synthetic prompts of given token lengths.

- :mod:`harness.prompts.spec`: the profile sections ``dataset:``, ``synthetic:`` and ``tokenizer:`` (pydantic).
- :mod:`harness.prompts.files`: data-file readers; each file is validated and indexed (line offsets, weights)
  once per process, and a row is read only when it is sampled.
- :mod:`harness.prompts.lengths`: token-length distributions (fixed, uniform, normal, lognormal, histogram file).
- :mod:`harness.prompts.tokens`: token counting (a local ``tokenizer.json``, else the flagged chars/4 estimate).
- :mod:`harness.prompts.source`: :class:`~harness.prompts.source.PromptSource`, what a user draws a request from.
"""
