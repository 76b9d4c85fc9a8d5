#!/usr/bin/env bash
# Tiered KV in the simulator (issue #43, docs/router.md "kv-cost", docs/engine-model.md
# "Host-memory tier"): examples/sim/tiered-kv.yaml (long-context multi-turn chat on 4
# engines whose working set exceeds GPU KV but fits host memory) with kv-cost crediting
# host-memory hits at the engine model's reload credit (0.95) against GPU-only credit
# (cpu_block_credit 0), kv-cost on the approximate index with and without its host tier
# (approx.host_ttl_s), and load-only, over SEEDS seeds (the scenario's policies, in its
# order). Prints one markdown table: TTFT
# p50/p90, prefill tokens computed (prompt tokens neither in GPU memory nor loaded from
# host memory, summed over the completed measured requests) and the share of prompt
# tokens served from either tier; means over seeds, min-max in brackets. Warm-up stages
# are left out (the simulator's summary does the same).
# The disk tier (docs/engine-model.md "Disk tier"): SCENARIO=examples/sim/tiered-kv-disk.yaml
# runs the same workload on engines whose host memory is too small for it but whose disk
# holds it, kv-cost with the default host and disk credits against crediting disk hits as
# host hits, GPU-only credit and load-only; "cached or loaded" then counts disk loads too.
# Usage: bench/sim_tiered_kv.bench.sh [OUT]   SEEDS="1 2 3" picks the seeds;
# OUT (default: a temporary directory) keeps tiered_kv.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
SEEDS=${SEEDS:-1 2 3}
SCENARIO=${SCENARIO:-examples/sim/tiered-kv.yaml}
work=$(mktemp -d -t kvgate-tiered.XXXXXX)
trap 'rm -rf "$work"' EXIT
OUT=${1:-$work}
mkdir -p "$OUT"
csv="$OUT/tiered_kv.csv"
echo "seed,policy,ttft_p50_s,ttft_p90_s,prefill_tokens,prompt_tokens,cached_share,completed" >"$csv"
for seed in $SEEDS; do
  dir="$work/seed-$seed"
  nice -n 10 "$BIN" sim "$SCENARIO" --seed "$seed" --no-progress --requests-csv --out "$dir" \
    >"$dir.log" 2>&1 || {
    tail -20 "$dir.log" >&2
    exit 1
  }
  python3 - "$dir" "$seed" >>"$csv" <<'PY'
import csv, json, sys, collections
d, seed = sys.argv[1], sys.argv[2]
report = json.load(open(f"{d}/report.json"))
prefill = collections.Counter()
prompt = collections.Counter()
warm = {}
for p in report["policies"]:
    warm[p["policy"]] = {i for i, st in enumerate(p["stages"]) if st["warmup"]}
for row in csv.DictReader(open(f"{d}/requests.csv")):
    policy = row["policy"]
    if int(row["stage"]) in warm.get(policy, set()) or row["rejected"] == "1":
        continue
    if float(row["ttft_s"]) < 0:
        continue  # never got its first token
    prompt[policy] += int(row["prompt_tokens"])
    prefill[policy] += int(row["prompt_tokens"]) - int(row["cached_tokens"])
for p in report["policies"]:
    name = p["policy"]
    share = 1 - prefill[name] / prompt[name] if prompt[name] else 0
    print(",".join([seed, name, str(p["ttft_p50_s"]), str(p["ttft_p90_s"]), str(prefill[name]),
                    str(prompt[name]), f"{share:.6f}", str(p["completed"])]))
PY
done
python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
policies = list(dict.fromkeys(r["policy"] for r in rows))
def cell(p, key, fmt, scale=1.0):
    v = [float(r[key]) * scale for r in rows if r["policy"] == p]
    m = sum(v) / len(v)
    return f"{m:{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if len(v) > 1 else f"{m:{fmt}}"
seeds = len(dict.fromkeys(r["seed"] for r in rows))
print(f"{seeds} seed(s); mean (min-max)")
print()
print("| policy | TTFT p50 (s) | TTFT p90 (s) | prefill tokens computed (M) | prompt tokens cached or loaded (%) | completed |")
print("|---|---|---|---|---|---|")
for p in policies:
    print(f"| {p} | {cell(p, 'ttft_p50_s', '.3f')} | {cell(p, 'ttft_p90_s', '.3f')} | "
          f"{cell(p, 'prefill_tokens', '.2f', 1e-6)} | {cell(p, 'cached_share', '.1f', 100)} | "
          f"{cell(p, 'completed', '.0f')} |")
PY
if [ -n "${1:-}" ]; then
  echo
  echo "CSV: $csv"
fi
