#!/usr/bin/env bash
# Make sure a `prometheus` binary (and `promtool`) is available for the Prometheus integration tests.
#
# Usage: scripts/setup_prometheus.sh
#
# Installs Debian's `prometheus` package (2.42 in bookworm) with apt-get when the binary is missing and this
# is a Debian-like machine where we are root; otherwise it only says what is missing (the tests then skip,
# unless LLMLOAD_REQUIRE_PROMETHEUS=1 makes them fail). The package's service is never started: the tests
# start their own Prometheus on 127.0.0.1 with a temporary storage directory. Skip with
# LLMLOAD_SKIP_PROMETHEUS=1.
set -euo pipefail

log() { echo "[setup_prometheus] $*"; }

if [[ "${LLMLOAD_SKIP_PROMETHEUS:-0}" == "1" ]]; then
    log "LLMLOAD_SKIP_PROMETHEUS=1: not installing"
    exit 0
fi

if command -v prometheus >/dev/null 2>&1; then
    log "found $(prometheus --version 2>&1 | head -n1)"
    exit 0
fi

if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "prometheus not found and cannot apt-get install it here (need root on Debian); tests will skip"
    exit 0
fi

# Keep the package's maintainer scripts from starting a system-wide Prometheus (it would listen on every
# interface): a policy-rc.d that forbids service starts, only for the duration of the install.
POLICY=/usr/sbin/policy-rc.d
TEMP_POLICY=0
if [[ ! -e "$POLICY" ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod +x "$POLICY"
    TEMP_POLICY=1
fi
cleanup() { if [[ "$TEMP_POLICY" == "1" ]]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT

log "installing Debian's prometheus package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
log "installed $(prometheus --version 2>&1 | head -n1)"
command -v promtool >/dev/null 2>&1 || { log "promtool missing after the install"; exit 1; }
