#!/usr/bin/env bash
# Latency targets in the simulator (issue #43, docs/router.md "Latency targets"), two
# studies over SEEDS seeds, each printed as one markdown table (the mean over seeds,
# min-max in brackets; measured stages only, the warm-up stage is left out by the
# simulator):
# 1. examples/sim/latency-targets.yaml (a mixed workload on 8 engines where half the chat
#    requests carry a TTFT and a TPOT target) with kv-cost alone and with latency_targets
#    (best_effort, reject): the share of targeted requests that met their TTFT target and
#    all their targets, the p90 TTFT of the requests without targets, the output
#    throughput, and the predictor's MAPE (TTFT, TPOT). That pool is lightly loaded.
# 2. examples/sim/latency-targets-loaded.yaml (chat with a 400 ms TTFT target on about
#    half of all requests, beside long uncached documents, near the pool's capacity) at
#    each load of LOADS (default "0.9 1.0 1.1": every `qps:` of the file multiplied by it),
#    with kv-cost, kv-cost with flow control, latency targets with each action
#    (best_effort, reject, queue), and the two flow-control policies with targets_first
#    (targets-queue-first, kv-cost+flow-first; every policy of the file is printed, in the
#    file's order): the share of targeted requests that met the target, the
#    p90 TTFT of the requests without targets and of all, the output throughput, the
#    requests refused and served, and the predictor's TTFT MAPE. LOADS= skips it.
# Usage: bench/sim_latency_targets.bench.sh [OUT]   SEEDS="1 2 3" picks the seeds;
# OUT (default: a temporary directory) keeps latency_targets.csv and
# latency_targets_loaded.csv (with a `load` column). SCENARIO and LOADED_SCENARIO name
# other scenario files.
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

# 2. Under load: the loaded scenario at each load factor, one CSV with a `load` column.
LOADED_SCENARIO=${LOADED_SCENARIO:-examples/sim/latency-targets-loaded.yaml}
LOADS=${LOADS-0.9 1.0 1.1}
loaded_csv="$OUT/latency_targets_loaded.csv"
if [ -n "$LOADS" ]; then
  rm -f "$loaded_csv"
  for load in $LOADS; do
    # The scenario with every arrival rate (`qps:`) multiplied by the load factor.
    SCENARIO="$work/loaded-x$load.yaml"
    python3 - "$LOADED_SCENARIO" "$load" "$SCENARIO" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
factor = float(sys.argv[2])
scaled, n = re.subn(r"(\bqps:\s*)([0-9.]+)",
                    lambda m: f"{m.group(1)}{float(m.group(2)) * factor:g}", text)
if n == 0:
    sys.exit(f"{sys.argv[1]}: no `qps:` to scale")
open(sys.argv[3], "w").write(scaled)
PY
    sim_seeds_csv "$work/loaded-x$load.csv" targeted ttft_target_met untargeted_ttft_p90_s ttft_p90_s output_tokens_per_s rejected completed predictor_ttft_mape
    python3 - "$work/loaded-x$load.csv" "$load" "$loaded_csv" <<'PY'
import csv, os, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
new = not os.path.exists(sys.argv[3])
with open(sys.argv[3], "a", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    if new:
        out.writerow(["load"] + rows[0])
    for row in rows[1:]:
        out.writerow([sys.argv[2]] + row)
PY
  done
  echo
  python3 - "$loaded_csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
loads = list(dict.fromkeys(r["load"] for r in rows))
policies = list(dict.fromkeys(r["policy"] for r in rows))
def cell(load, p, key, fmt, scale=1.0):
    raw = [r[key] for r in rows if r["load"] == load and r["policy"] == p]
    if not raw or any(x == "" for x in raw):
        return "-"  # no predictor in this policy
    v = [float(x) * scale for x in raw]
    m = sum(v) / len(v)
    return f"{m:{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if len(v) > 1 else f"{m:{fmt}}"
seeds = len(dict.fromkeys(r["seed"] for r in rows))
print(f"Under load: {seeds} seed(s) per load; mean (min-max)")
print()
print("| load | policy | targeted | TTFT target met (%) | p90 TTFT, no target (s) | "
      "p90 TTFT, all (s) | out tok/s | refused | served | TTFT MAPE (%) |")
print("|---|---|---|---|---|---|---|---|---|---|")
for load in loads:
    for p in policies:
        print(f"| {load}x | {p} | {cell(load, p, 'targeted', '.0f')} | "
              f"{cell(load, p, 'ttft_target_met', '.1f', 100)} | "
              f"{cell(load, p, 'untargeted_ttft_p90_s', '.3f')} | "
              f"{cell(load, p, 'ttft_p90_s', '.3f')} | "
              f"{cell(load, p, 'output_tokens_per_s', '.0f')} | "
              f"{cell(load, p, 'rejected', '.0f')} | {cell(load, p, 'completed', '.0f')} | "
              f"{cell(load, p, 'predictor_ttft_mape', '.1f', 100)} |")
PY
fi
if [ -n "${1:-}" ]; then
  echo
  echo "CSV: $csv"
  if [ -n "$LOADS" ]; then echo "CSV: $loaded_csv"; fi
fi
