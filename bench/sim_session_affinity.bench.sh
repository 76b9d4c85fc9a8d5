#!/usr/bin/env bash
# Session affinity in the simulator (issue #43, docs/router.md "Session affinity"):
# examples/sim/session-affinity.yaml (multi-turn chat on 8 engines) with kv-cost on an
# approximate index that ages out between turns, on no index at all (cold), and on the
# precise index, each with and without session_affinity, over SEEDS seeds. Prints one
# markdown table: TTFT p50/p90 and the prefix hit rate (the mean over seeds, min-max in
# brackets) and the session hit rate (turns kept on their session's endpoint / turns
# routed with a session; "-" for the policies without affinity), measured stages only (the warm-up stage is left out by the simulator).
# Usage: bench/sim_session_affinity.bench.sh [OUT]   SEEDS="1 2 3" picks the seeds;
# OUT (default: a temporary directory) keeps session_affinity.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/sim_seeds.sh
BIN=${KVGATE_BIN:-build/release/kvgate}
SEEDS=${SEEDS:-1 2 3}
SCENARIO=${SCENARIO:-examples/sim/session-affinity.yaml}
work=$(mktemp -d -t kvgate-session.XXXXXX)
trap 'rm -rf "$work"' EXIT
OUT=${1:-$work}
mkdir -p "$OUT"
csv="$OUT/session_affinity.csv"
sim_seeds_csv "$csv" ttft_p50_s ttft_p90_s prefix_hit_rate completed session_requests=0 session_hit_rate=0
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
policies = list(dict.fromkeys(r["policy"] for r in rows))
def values(p, key):
    return [float(r[key]) for r in rows if r["policy"] == p]
def cell(p, key, fmt, scale=1.0):
    v = [x * scale for x in values(p, key)]
    m = sum(v) / len(v)
    return f"{m:{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if len(v) > 1 else f"{m:{fmt}}"
seeds = len(dict.fromkeys(r["seed"] for r in rows))
print(f"{seeds} seed(s); mean (min-max)")
print()
print("| policy | TTFT p50 (s) | TTFT p90 (s) | prefix hit rate (%) | session hit rate (%) | completed |")
print("|---|---|---|---|---|---|")
for p in policies:
    sessions = sum(values(p, 'session_requests')) > 0
    session_cell = cell(p, 'session_hit_rate', '.1f', 100) if sessions else "-"
    print(f"| {p} | {cell(p, 'ttft_p50_s', '.3f')} | {cell(p, 'ttft_p90_s', '.3f')} | "
          f"{cell(p, 'prefix_hit_rate', '.1f', 100)} | {session_cell} | "
          f"{cell(p, 'completed', '.0f')} |")
PY
if [ -n "${1:-}" ]; then
  echo
  echo "CSV: $csv"
fi
