"""The standard sweep: warm-up, single stream, then C = 8/16/32/64 (all from the profile).

    locust -f locustfiles/k26.py --headless                      # demo profile on the built-in simulator
    locust -f locustfiles/k26.py --headless --host http://gpu:30000 --profile profiles/k26.yaml

See docs/ (docs/index.md; `mkdocs serve`) for every option, the metric definitions and where records and
reports go; `locust -f locustfiles/k26.py --help` lists llmload's options in their own group.
"""

import harness.locust  # noqa: F401  (registers the options, set-up, records and report)
from harness.shapes import ReasoningSweepShape
from harness.users import ReasoningChatUser

__all__ = ["ReasoningChatUser", "ReasoningSweepShape"]
