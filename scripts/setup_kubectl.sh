#!/usr/bin/env bash
# Make sure a `kubectl` binary is available for tests/deploy/test_kubernetes.py, which renders the manifests in
# deploy/kubernetes/ offline with `kubectl kustomize` (no cluster is contacted).
#
# Usage: scripts/setup_kubectl.sh
#
# Installs Debian's `kubectl` package with apt-get when the binary is missing and this is a Debian-like machine
# where we are root; otherwise it only says what is missing (the tests then skip, unless LLMLOAD_REQUIRE_KUBECTL=1
# makes them fail). Skip with LLMLOAD_SKIP_KUBECTL=1.
set -euo pipefail

log() { echo "[setup_kubectl] $*"; }

if [[ "${LLMLOAD_SKIP_KUBECTL:-0}" == "1" ]]; then
    log "LLMLOAD_SKIP_KUBECTL=1: not installing"
    exit 0
fi

if command -v kubectl >/dev/null 2>&1; then
    log "found $(kubectl version --client 2>&1 | head -n1)"
    exit 0
fi

if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "kubectl not found and cannot apt-get install it here (need root on Debian); tests/deploy will skip"
    exit 0
fi

log "installing Debian's kubectl package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends kubectl >/dev/null
command -v kubectl >/dev/null 2>&1 || { log "kubectl missing after the install"; exit 1; }
log "installed $(kubectl version --client 2>&1 | head -n1)"
