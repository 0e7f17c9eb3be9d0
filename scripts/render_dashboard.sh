#!/usr/bin/env bash
# Render the docs' dashboard images (docs/dashboard/*.png) from a real run: the standard demo sweep against the
# built-in simulator, scraped by a real Prometheus, then every panel of grafana/dashboards/llmload.json drawn
# from its own PromQL by harness/panels/ (`llmload panels`). Not Grafana screenshots: the captions say so.
#
#   bash scripts/render_dashboard.sh            # ~3 minutes; needs ports 8000 and 9646 free
#
# What runs, all on 127.0.0.1 and each bounded in time (killed on exit, Ctrl-C or error):
#   1. the simulator, `llmload sim serve --port 8000 --preset demo` (the shipped Prometheus config's llm-server
#      target), extra flags from SIM_ARGS (e.g. SIM_ARGS="--spec-tokens 3" for the speculative-decoding panel);
#   2. Prometheus (Debian's package; scripts/setup_prometheus.sh installs it) with a copy of
#      prometheus/prometheus.yml whose scrape interval is 1 s instead of 5 s (SCRAPE_INTERVAL), on a free port,
#      storage in a temporary directory;
#   3. the demo sweep, `locust -f locustfiles/k26.py --headless --host http://127.0.0.1:8000
#      --profile profiles/demo.yaml` (with --host the default profile would be profiles/k26.yaml, 1 h 40 min),
#      exporter on 127.0.0.1:9646 (the config's llmload target), run directory in the temporary directory;
#   4. `llmload panels` over the run's time range with $window=1m (WINDOW; the dashboard's default 5m is longer
#      than the demo's 30 s steps; the latency percentiles come from the exporter's gauges, which exist for the
#      dashboard's window options only: 1m 2m 5m 10m 30m), replacing docs/dashboard/*.png (OUT).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=.venv/bin/python
OUT="${OUT:-docs/dashboard}"
WINDOW="${WINDOW:-1m}"
SCRAPE_INTERVAL="${SCRAPE_INTERVAL:-1s}"
SIM_ARGS="${SIM_ARGS:-}"
SIM_PORT=8000
METRICS_PORT=9646

log() { echo "[render_dashboard] $*"; }
die() { log "error: $*"; exit 1; }

[[ -x "$PY" ]] || die "no .venv: python3 -m venv .venv && .venv/bin/pip install -e '.[dev]'"
"$PY" -c "import matplotlib" 2>/dev/null || die "matplotlib missing: .venv/bin/pip install matplotlib"
command -v prometheus >/dev/null 2>&1 || bash scripts/setup_prometheus.sh
command -v prometheus >/dev/null 2>&1 || die "prometheus not installed (bash scripts/setup_prometheus.sh)"

port_free() {  # as the servers bind: SO_REUSEADDR, so connections in TIME_WAIT do not count
    "$PY" -c "import socket as S,sys; s=S.socket(); s.setsockopt(S.SOL_SOCKET, S.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1])))" "$1" 2>/dev/null
}
for p in "$SIM_PORT" "$METRICS_PORT"; do
    port_free "$p" || die "port $p on 127.0.0.1 is in use (the shipped Prometheus config scrapes 8000 and 9646)"
done
PROM_PORT="$("$PY" -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")"

TMP="$(mktemp -d -t llmload-render.XXXXXX)"
SIM_PID=""
PROM_PID=""
cleanup() {
    local rc=$?
    for pid in $PROM_PID $SIM_PID; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
        wait "$pid" 2>/dev/null || true
    done
    if [[ $rc -ne 0 ]]; then
        for f in sim.log prometheus.log locust.log; do
            [[ -f "$TMP/$f" ]] && { log "--- $f (last lines)"; tail -n 20 "$TMP/$f"; }
        done
    fi
    rm -rf "$TMP"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_http() {  # URL SECONDS PID: until URL answers, PID still alive
    local deadline=$((SECONDS + $2))
    until "$PY" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" "$1" 2>/dev/null; do
        kill -0 "$3" 2>/dev/null || die "process for $1 exited"
        ((SECONDS < deadline)) || die "$1 not up after $2 s"
        sleep 0.3
    done
}

T0=$SECONDS
# shellcheck disable=SC2086  # SIM_ARGS is a list of flags
timeout 900 "$PY" -m harness.sim serve --host 127.0.0.1 --port "$SIM_PORT" --preset demo $SIM_ARGS \
    >"$TMP/sim.log" 2>&1 &
SIM_PID=$!
wait_http "http://127.0.0.1:$SIM_PORT/health" 30 "$SIM_PID"
log "simulator on 127.0.0.1:$SIM_PORT (demo preset${SIM_ARGS:+, $SIM_ARGS})"

"$PY" - "$TMP/prometheus.yml" "$SCRAPE_INTERVAL" <<'EOF'
import os, sys, yaml
cfg = yaml.safe_load(open("prometheus/prometheus.yml"))
cfg["global"].update(scrape_interval=sys.argv[2], evaluation_interval=sys.argv[2], scrape_timeout=sys.argv[2])
# rule files are relative to the config's folder: keep them pointing at prometheus/ (alerts.yml)
cfg["rule_files"] = [os.path.abspath(os.path.join("prometheus", f)) for f in cfg.get("rule_files", [])]
open(sys.argv[1], "w").write(yaml.safe_dump(cfg))
EOF
timeout 900 prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$PROM_PORT" >"$TMP/prometheus.log" 2>&1 &
PROM_PID=$!
wait_http "http://127.0.0.1:$PROM_PORT/-/ready" 30 "$PROM_PID"
log "Prometheus on 127.0.0.1:$PROM_PORT (prometheus/prometheus.yml, scrape interval $SCRAPE_INTERVAL)"

log "demo sweep (about 2.5 minutes)"
START="$(date +%s)"
timeout 600 .venv/bin/locust -f locustfiles/k26.py --headless --host "http://127.0.0.1:$SIM_PORT" \
    --profile profiles/demo.yaml --output-dir "$TMP/runs" --metrics-port "$METRICS_PORT" \
    >"$TMP/locust.out" 2>"$TMP/locust.log" || die "locust failed (exit $?)"
END="$(date +%s)"
awk '/^## Per step/ {f = 1} /^## Hours/ {f = 0} f && /^\| (single|C=)/' "$TMP/locust.out" | cut -c1-110
sleep 2  # Prometheus has scraped the final state (the exporter lingered for it) and seen the run end

mkdir -p "$OUT"
rm -f "$OUT"/*.png
WHEN="$(date -u -d "@$START" '+%Y-%m-%d')"
CAPTION="Run: the demo sweep (locust -f locustfiles/k26.py --headless --host http://127.0.0.1:$SIM_PORT \
--profile profiles/demo.yaml: warm-up, 15 s single stream, C=8/16/32/64 for 30 s each) against the built-in \
simulator (demo preset${SIM_ARGS:+ $SIM_ARGS}) on $WHEN; Prometheus with prometheus/prometheus.yml at a \
$SCRAPE_INTERVAL scrape interval (shipped: 5s). Reproduce: bash scripts/render_dashboard.sh"
timeout 300 .venv/bin/llmload panels --prometheus "http://127.0.0.1:$PROM_PORT" \
    --start "$((START - 5))" --end "$((END + 5))" --window "$WINDOW" --out "$OUT" --caption "$CAPTION"
log "done in $((SECONDS - T0)) s"
