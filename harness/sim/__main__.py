"""``python -m harness.sim`` entry point (see :mod:`harness.sim.cli`)."""

from harness.sim.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
