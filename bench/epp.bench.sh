#!/usr/bin/env bash
# What the Endpoint Picker adds per request (docs/epp.md): the whole ext_proc exchange of
# `kvgate epp` (request headers, then the body with end of stream, until the pick's
# headers and body responses are back), p50 and p99 at 1 and 8 concurrent streams, over
# a pool of 100 endpoints; beside it the same routing through `kvgate serve`'s admin
# route view (POST /admin/pools/main/route, same config, same bodies, same run), and a
# gRPC health Check to the EPP as the client's own floor (a round trip the server does
# next to nothing for). The EPP's CPU time per request comes from /proc/PID/stat around
# each run, less the process's idle rate (its scrapes) measured just before.
#
# The endpoints: ENGINES real `kvgate engine`s (sim model, 127.0.0.1) and 100 - ENGINES
# addresses on 127.0.0.1 where nothing listens. The EPP never connects to an endpoint to
# pick it; it scrapes each one's /metrics (scrape_interval_ms 1000 here), and a refused
# scrape only leaves that endpoint's metrics stale. Stale endpoints count as saturated
# after router.saturation.metrics_max_age, so that is 0 here (never stale): all 100 stay
# candidates, and the policy (kv-cost, approximate overlap, the default filters) scores
# every one of them, as it would 100 live pods. No answer goes upstream: each stream
# ends with response headers (200, end of stream), which settle the pick untimed.
#
# Read the figures with their limits: the client is Python (Debian's python3-grpcio),
# whose per-call overhead is in every time, hence the floor column; the route view
# writes every endpoint's scores into its JSON answer and goes over HTTP/1.1, so it
# bounds serve's in-process decision from above rather than equals it. The CPU column is
# the server's alone.
#
# Usage: bench/epp.bench.sh [REQUESTS=2000] [CONCURRENCY=1,8]
# Env: ENDPOINTS (100), ENGINES (4), KVGATE_BIN (build/release/kvgate), KVGATE_PROTO_PY
# (the Python messages the build generates: build/release/generated/proto).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
PROTO_PY=${KVGATE_PROTO_PY:-$(dirname "$BIN")/generated/proto}
REQUESTS=${1:-2000}
CONCURRENCY=${2:-1,8}
ENDPOINTS=${ENDPOINTS:-100}
ENGINES=${ENGINES:-4}
PY=/usr/bin/python3
[[ -x $BIN ]] || { echo "epp bench: $BIN missing (build the release kvgate)" >&2; exit 2; }
[[ -f $PROTO_PY/envoy/service/ext_proc/v3/external_processor_pb2.py ]] ||
  { echo "epp bench: no generated messages in $PROTO_PY (set KVGATE_PROTO_PY)" >&2; exit 2; }
$PY -c 'import grpc' 2>/dev/null || { echo "epp bench: $PY lacks grpc (scripts/bootstrap)" >&2; exit 2; }
(( ENGINES >= 1 && ENGINES <= ENDPOINTS )) || { echo "epp bench: 1 <= ENGINES <= ENDPOINTS" >&2; exit 2; }
BENCH_NAME=epp
source bench/bench_procs.sh

endpoints=""
engine_urls=()
for i in $(seq "$ENGINES"); do
  port=$(free_port)
  "$BIN" engine --port "$port" --model sim --block-size 16 --time-scale 0.01 --seed "$i" \
    >"$W/engine$i.log" 2>&1 &
  pids+=($!)
  engine_urls+=("http://127.0.0.1:$port")
  endpoints+="      - http://127.0.0.1:$port"$'\n'
done
# Ports where nothing listens (bound once by free_port, then closed), all distinct: the
# kernel may hand a closed port out again, and a pool refuses an endpoint listed twice.
declare -A seen=()
for u in "${engine_urls[@]}"; do seen[$u]=1; done
while (( ${#seen[@]} < ENDPOINTS )); do
  u="http://127.0.0.1:$(free_port)"
  [[ -n ${seen[$u]:-} ]] && continue
  seen[$u]=1
  endpoints+="      - $u"$'\n'
done
pool="pools:
  main:
    block_size: 16
    scrape_interval_ms: 1000
    router:
      policy: kv-cost
      overlap: approx
      saturation: {metrics_max_age: 0}
    endpoints:
$endpoints
models:
  - {name: sim, pool: main}
"
EPP_PORT=$(free_port)
GW=$(free_port)
ADMIN=$(free_port)
printf 'epp: {address: 127.0.0.1, port: %s}\n%s' "$EPP_PORT" "$pool" >"$W/epp.yaml"
printf 'listeners: [{address: 127.0.0.1, port: %s}]\nadmin: {address: 127.0.0.1, port: %s}\n%s' \
  "$GW" "$ADMIN" "$pool" >"$W/serve.yaml"

"$BIN" epp "$W/epp.yaml" >"$W/epp.log" 2>&1 &
epp_pid=$!
pids+=($epp_pid)
"$BIN" serve "$W/serve.yaml" >"$W/serve.log" 2>&1 &
serve_pid=$!
pids+=($serve_pid)
for u in "${engine_urls[@]}"; do
  for _ in $(seq 200); do curl -fs -o /dev/null "$u/health" && break; sleep 0.1; done
done
for _ in $(seq 200); do curl -fs -o /dev/null "http://127.0.0.1:$GW/ready" && break; sleep 0.1; done
for _ in $(seq 200); do grep -q "ext_proc gRPC on" "$W/epp.log" && break; sleep 0.1; done
grep -q "ext_proc gRPC on" "$W/epp.log" || { cat "$W/epp.log" >&2; exit 1; }
sleep 2  # a scrape round, so that the real engines' metrics are in

echo "epp bench: $ENDPOINTS endpoints ($ENGINES kvgate engines, $((ENDPOINTS - ENGINES)) addresses" \
  "with nothing listening), kv-cost/approx, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "$BIN"
KVGATE_PROTO_PY=$PROTO_PY $PY bench/epp_client.py "127.0.0.1:$EPP_PORT" "$epp_pid" \
  "http://127.0.0.1:$ADMIN" "$serve_pid" "$REQUESTS" "$CONCURRENCY"
