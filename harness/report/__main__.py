"""``python -m harness.report RUN_DIR``: see :mod:`harness.report.cli`."""

import sys

from harness.report.cli import main

if __name__ == "__main__":
    sys.exit(main())
