#!/usr/bin/env bash
# Latency targets in the simulator (issue #43, docs/router.md "Latency targets"):
# examples/sim/latency-targets.yaml (a mixed workload on 8 engines where half the chat
# requests carry a TTFT and a TPOT target) with kv-cost alone and with latency_targets
# (best_effort, reject), over SEEDS seeds. Prints one markdown table: the share of
# targeted requests that met their TTFT target and all their targets, the p90 TTFT of the
# requests without targets, the output throughput, and the predictor's MAPE (TTFT, TPOT);
# the mean over seeds, min-max in brackets. Measured stages only (the warm-up stage is
# left out by the simulator).
# Usage: bench/sim_latency_targets.bench.sh [OUT]   SEEDS="1 2 3" picks the seeds;
# OUT (default: a temporary directory) keeps latency_targets.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/sim_seeds.sh
BIN=${KVGATE_BIN:-build/release/kvgate}
SEEDS=${SEEDS:-1 2 3}
SCENARIO=${SCENARIO:-examples/sim/latency-targets.yaml}
work=$(mktemp -d -t kvgate-targets.XXXXXX)
trap 'rm -rf "$work"' EXIT
OUT=${1:-$work}
mkdir -p "$OUT"
csv="$OUT/latency_targets.csv"
sim_seeds_csv "$csv" targeted ttft_target_met slo_met untargeted_ttft_p90_s output_tokens_per_s rejected predictor_ttft_mape predictor_tpot_mape
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
policies = list(dict.fromkeys(r["policy"] for r in rows))
def cell(p, key, fmt, scale=1.0):
    raw = [r[key] for r in rows if r["policy"] == p]
    if any(x == "" for x in raw):
        return "-"  # no predictor in this policy
    v = [float(x) * scale for x in raw]
    m = sum(v) / len(v)
    return f"{m:{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if len(v) > 1 else f"{m:{fmt}}"
seeds = len(dict.fromkeys(r["seed"] for r in rows))
print(f"{seeds} seed(s); mean (min-max)")
print()
print("| policy | targeted | TTFT target met (%) | all targets met (%) | "
      "p90 TTFT, no target (s) | out tok/s | rejected | TTFT MAPE (%) | TPOT MAPE (%) |")
print("|---|---|---|---|---|---|---|---|---|")
for p in policies:
    print(f"| {p} | {cell(p, 'targeted', '.0f')} | {cell(p, 'ttft_target_met', '.1f', 100)} | "
          f"{cell(p, 'slo_met', '.1f', 100)} | {cell(p, 'untargeted_ttft_p90_s', '.3f')} | "
          f"{cell(p, 'output_tokens_per_s', '.0f')} | {cell(p, 'rejected', '.0f')} | "
          f"{cell(p, 'predictor_ttft_mape', '.1f', 100)} | "
          f"{cell(p, 'predictor_tpot_mape', '.1f', 100)} |")
PY
if [ -n "${1:-}" ]; then
  echo
  echo "CSV: $csv"
fi
