#!/usr/bin/env bash
# The noisy-neighbour study behind several gateway replicas (docs/flow-control.md, "Fleet
# fairness"): examples/sim/flow/noisy-neighbour-replicas.yaml, flow control on in every
# run, behind one gateway replica and behind four with sync off, with sync on and each
# queue on its own counters, and with sync on and the fleet's counters (each replica
# taking the whole room it sees: room_share none), then with sync on, the fleet's counters
# and the pool's room shared between the replicas (room_share split, and demand); B alone
# on an idle pool (noisy-neighbour.yaml's "B alone") is the reference for B's TTFT. Prints one
# markdown table (per run and tenant: served, TTFT p50/p90/p99, queue wait p90, served
# tokens/s, p90 against one replica; per run: pool output tokens/s and Jain's index) and
# writes flow-replicas.csv to OUT. The simulation is deterministic: one run is the result.
# Usage: bench/sim_flow_replicas.bench.sh [OUT=sim-out/flow-replicas]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
OUT=${1:-sim-out/flow-replicas}
mkdir -p "$OUT"
nice -n 10 "$BIN" sim examples/sim/flow/noisy-neighbour.yaml --policies "B alone" --no-progress \
  --out "$OUT/b-alone" >"$OUT/b-alone.log" 2>&1
nice -n 10 "$BIN" sim examples/sim/flow/noisy-neighbour-replicas.yaml --no-progress \
  --out "$OUT/replicas" >"$OUT/replicas.log" 2>&1
python3 - "$OUT" "$OUT/b-alone/flow.csv" "$OUT/replicas/flow.csv" <<'PY'
import csv, sys
out = sys.argv[1]
rows = [r for path in sys.argv[2:] for r in csv.DictReader(open(path, newline=""))]
fields = ["run", "tenant", "sent", "served", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s",
          "queue_wait_p90_s", "served_tokens_per_s", "pool_output_tokens_per_s", "jain_index"]
with open(f"{out}/flow-replicas.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
one = {r["tenant"]: float(r["ttft_p90_s"]) for r in rows if r["run"] == "1 replica"}
print("| run | tenant | served | TTFT p50 | TTFT p90 | TTFT p99 | queue wait p90 | "
      "served tokens/s | p90 vs 1 replica | pool output tokens/s | Jain's index |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
seen = set()
for r in rows:
    first = r["run"] not in seen
    seen.add(r["run"])
    base = one.get(r["tenant"], 0)
    vs = f"{float(r['ttft_p90_s']) / base:.2f}x" if base > 0 else "—"
    pool = (f"{float(r['pool_output_tokens_per_s']):,.0f} | {float(r['jain_index']):.3f}"
            if first else " | ")
    print(f"| {r['run']} | {r['tenant']} | {r['served']} / {r['sent']} | "
          f"{float(r['ttft_p50_s']):.3f} s | {float(r['ttft_p90_s']):.3f} s | "
          f"{float(r['ttft_p99_s']):.3f} s | {float(r['queue_wait_p90_s']):.3f} s | "
          f"{float(r['served_tokens_per_s']):,.0f} | {vs} | {pool} |")
PY
echo "wrote $OUT/flow-replicas.csv"
