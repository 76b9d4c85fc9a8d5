#!/usr/bin/env bash
# What a configuration feature costs the gateway in CPU per request, with the start-order
# bias cancelled: bench/gateway_vs_nginx.bench.sh runs RUNS times (ROUNDS rounds each) with
# one binary twice, the feature on (FEATURE_YAML appended to its config) in the gateway
# started second (B) in odd runs and in the one started first in even runs (the gateway
# started second measures 1-4% cheaper whatever its code: docs/performance/gateway.md).
# Prints, from every round's schedstat CPU per request, the feature's ratio (with/without)
# in each role and their geometric mean: the figure with the bias cancelled.
# Usage: [FEATURE_YAML=TEXT] bench/feature_cpu.bench.sh [RUNS=2] [ROUNDS=5]
# FEATURE_YAML's default is tracing at ratio 1.0 ({UP}: the upstream nginx, which answers
# the OTLP POSTs with 200), issue #41's bound (docs/tracing.md):
#   TOGETHER=1 PIN=1 bench/feature_cpu.bench.sh 4 9
# TOGETHER=1 loads the two gateways at once on the one CPU (PIN=1), a wrk each: the host's
# load moves both alike, and the rounds' ratios agree within about 1.5% where rounds taken
# one after the other (without TOGETHER) spread over 10% on this shared machine.
# KVGATE_BIN (default build/release/kvgate); PIN, TOGETHER, CONNS and the rest pass through
# to gateway_vs_nginx.bench.sh (its user-like configurations and latency rounds are skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
FEATURE_YAML=${FEATURE_YAML:-'tracing: {ratio: 1.0, collector: "http://127.0.0.1:{UP}/v1/traces"}'}
BIN=${KVGATE_BIN:-build/release/kvgate}
RUNS=${1:-2}
ROUNDS=${2:-5}
OUT=$(mktemp -d /tmp/kvgate-feature.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
for i in $(seq "$RUNS"); do
  # Odd runs: the feature in B (started second); even runs: in the first gateway.
  role=$( ((i % 2)) && echo B || echo A)
  env P50=0 USER_CONFIG=0 KVGATE_BIN="$BIN" KVGATE_BIN_B="$BIN" "KVGATE_${role}_YAML=$FEATURE_YAML" \
    bench/gateway_vs_nginx.bench.sh 5 "$ROUNDS" >"$OUT/run$i.$role.txt" 2>&1
  echo "run $i of $RUNS (feature on in the gateway started $([[ $role == B ]] && echo second || echo first)):"
  grep '^round' "$OUT/run$i.$role.txt" | sed -E 's/.*kvgate [0-9.]+ req\/s \(cpu ([0-9.]+) us.* B [0-9.]+ req\/s \(cpu ([0-9.]+) us.*/  kvgate \1 us, B \2 us/'
done
python3 - "$OUT" <<'PY'
import glob, math, re, statistics, sys
second, first = [], []  # with/without, per round, the feature's gateway started second/first
for f in sorted(glob.glob(sys.argv[1] + "/run*.txt")):
    on_b = f.endswith(".B.txt")
    for line in open(f):
        m = re.search(r"kvgate [0-9.]+ req/s \(cpu ([0-9.]+) us.* B [0-9.]+ req/s \(cpu ([0-9.]+) us", line)
        if line.startswith("round") and m:
            a, b = float(m.group(1)), float(m.group(2))
            (second if on_b else first).append(b / a if on_b else a / b)
if not second or not first:
    sys.exit("no rounds in one of the roles: run at least 2 runs")
gm = lambda x: math.exp(statistics.mean(math.log(v) for v in x))
print(f"feature on, started second: {len(second)} rounds, median {statistics.median(second):.3f}, geometric mean {gm(second):.3f}")
print(f"feature on, started first:  {len(first)} rounds, median {statistics.median(first):.3f}, geometric mean {gm(first):.3f}")
print(f"CPU per request with/without, the order's bias cancelled: "
      f"{math.sqrt(statistics.median(second) * statistics.median(first)):.3f} (medians), "
      f"{math.sqrt(gm(second) * gm(first)):.3f} (geometric means)")
PY
