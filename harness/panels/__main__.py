"""``python -m harness.panels``: ``llmload panels`` (see :mod:`harness.panels.cli`)."""

from harness.panels.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
