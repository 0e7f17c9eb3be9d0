#!/usr/bin/env bash
# Make sure Debian's chromium (/usr/bin/chromium) is installed for the browser tests (tests/webui/test_browser.py,
# driven by Playwright for Python with that executable; Playwright's own browser download is never used).
#
# Usage: scripts/setup_chromium.sh
#
# Installs the `chromium` package with apt-get when /usr/bin/chromium is missing and this is a Debian-like machine
# where we are root; otherwise it only says what is missing (the browser tests then skip, unless
# LLMLOAD_REQUIRE_BROWSER=1 makes them fail). Idempotent and quiet. Skip with LLMLOAD_SKIP_BROWSER=1.
set -euo pipefail

log() { echo "[setup_chromium] $*"; }

if [[ "${LLMLOAD_SKIP_BROWSER:-0}" == "1" ]]; then
    log "LLMLOAD_SKIP_BROWSER=1: not installing"
    exit 0
fi
if [[ -x /usr/bin/chromium ]]; then
    exit 0
fi
if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
    log "/usr/bin/chromium not found and cannot apt-get install it here (need root on Debian); browser tests will skip"
    exit 0
fi
log "installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
[[ -x /usr/bin/chromium ]] || { log "/usr/bin/chromium missing after the install"; exit 1; }
log "installed $(/usr/bin/chromium --version 2>/dev/null | head -n1)"
