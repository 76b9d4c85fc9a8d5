#!/usr/bin/env bash
# The fairness target of issue #39 (docs/flow-control.md, "A tenant within its fair
# share"): quiet tenant B's TTFT p90 when the noisy tenant A sends exactly its max-min fair
# share (the reference: examples/sim/flow/fair-share-reference.yaml, and
# fair-share-reference-kv-cost.yaml behind the cache-aware router), then with A at three
# times that share (fair-share-3x.yaml, fair-share-3x-kv-cost.yaml). Targets, for every
# "3x, flow on..." run: B's p90 at most 1.5x its p90 in the reference run of the same
# gateway ("reference" plus the same suffix: ", 4 replicas", ", late_binding cache"), and
# the pool's output at least 0.95x the same gateway's without flow control ("3x, flow off"
# plus the suffix when there is such a run, else "3x, flow off").
#
# Prints one markdown table (per routing, run and tenant: served, refused, TTFT
# p50/p90/p99, B's p90 against its reference, the pool's output tokens/s and against flow
# off, and whether each target is met) and writes fair-share.csv to OUT. The simulation is
# deterministic: one run is the result.
# Usage: bench/sim_fair_share.bench.sh [OUT=sim-out/fair-share]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
OUT=${1:-sim-out/fair-share}
mkdir -p "$OUT"
for s in fair-share-reference fair-share-3x fair-share-reference-kv-cost fair-share-3x-kv-cost; do
  nice -n 10 "$BIN" sim "examples/sim/flow/$s.yaml" --no-progress --requests-csv --out "$OUT/$s" \
    >"$OUT/$s.log" 2>&1 || { echo "sim $s failed:" >&2; tail -20 "$OUT/$s.log" >&2; exit 1; }
done
python3 - "$OUT" <<'PY'
import csv, sys
out = sys.argv[1]
groups = {"load": ["fair-share-reference", "fair-share-3x"],
          "kv-cost": ["fair-share-reference-kv-cost", "fair-share-3x-kv-cost"]}
rows = []
for routing, names in groups.items():
    for name in names:
        for r in csv.DictReader(open(f"{out}/{name}/flow.csv", newline="")):
            r["routing"] = routing
            rows.append(r)

# How long the gateway dispatched nothing (docs/flow-control.md, "Why B's tail was a second
# long"): per run, the gaps over 0.2 s between consecutive dispatches (arrival + wait in the
# gateway's queue) of the requests served, within the arrival window, summed.
stalls = {}
for routing, names in groups.items():
    for name in names:
        times, last_arrival = {}, {}
        for q in csv.DictReader(open(f"{out}/{name}/requests.csv", newline="")):
            arrival = float(q["arrival_s"])
            run = q["policy"]
            last_arrival[run] = max(last_arrival.get(run, 0.0), arrival)
            if q["rejected"] != "0":
                continue
            times.setdefault(run, []).append(arrival + max(0.0, float(q["queue_wait_s"])))
        for run, ts in times.items():
            ts = sorted(t for t in ts if t <= last_arrival[run])
            gaps = [b - a for a, b in zip(ts, ts[1:]) if b - a > 0.2]
            stalls[(routing, run)] = (sum(gaps), len(gaps))

def find(routing, run, tenant=None):
    for r in rows:
        if r["routing"] == routing and r["run"] == run and (tenant is None or r["tenant"] == tenant):
            return r
    return None

def suffix(run, prefix):
    return run[len(prefix):] if run.startswith(prefix) else None

results = []
for r in rows:
    res = dict(r, b_p90_ref="", b_p90_vs_ref="", pool_vs_off="", b_target="", pool_target="")
    stall_s, stall_n = stalls.get((r["routing"], r["run"]), (0.0, 0))
    res.update(dispatch_gaps_s=f"{stall_s:.2f}", dispatch_gaps=stall_n)
    on = suffix(r["run"], "3x, flow on")
    if on is not None:
        ref = find(r["routing"], "reference" + on, r["tenant"])
        if r["tenant"] == "B" and ref and float(ref["ttft_p90_s"]) > 0:
            x = float(r["ttft_p90_s"]) / float(ref["ttft_p90_s"])
            res.update(b_p90_ref=ref["ttft_p90_s"], b_p90_vs_ref=f"{x:.3f}",
                       b_target="met" if x <= 1.5 else "not met")
        off = find(r["routing"], "3x, flow off" + on) or find(r["routing"], "3x, flow off")
        if off and float(off["pool_output_tokens_per_s"]) > 0:
            y = float(r["pool_output_tokens_per_s"]) / float(off["pool_output_tokens_per_s"])
            res.update(pool_vs_off=f"{y:.3f}", pool_target="met" if y >= 0.95 else "not met")
    results.append(res)

fields = ["routing", "run", "tenant", "sent", "served", "refused", "ttft_p50_s", "ttft_p90_s",
          "ttft_p99_s", "queue_wait_p90_s", "served_tokens_per_s", "pool_output_tokens_per_s",
          "b_p90_ref", "b_p90_vs_ref", "b_target", "pool_vs_off", "pool_target",
          "dispatch_gaps_s", "dispatch_gaps"]
with open(f"{out}/fair-share.csv", "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
    w.writeheader()
    w.writerows(results)

print("| routing | run | tenant | served | refused | TTFT p50 | TTFT p90 | TTFT p99 | "
      "B p90 vs reference | pool output tokens/s | vs flow off | B p90 <= 1.5x | output >= 0.95x | "
      "no dispatch (gaps > 0.2 s) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
seen = set()
for r in results:
    key = (r["routing"], r["run"])
    first = key not in seen
    seen.add(key)
    vs_ref = f"{float(r['b_p90_vs_ref']):.2f}x" if r["b_p90_vs_ref"] else ""
    pool = f"{float(r['pool_output_tokens_per_s']):,.0f}" if first else ""
    vs_off = f"{float(r['pool_vs_off']):.3f}x" if first and r["pool_vs_off"] else ""
    pool_target = r["pool_target"] if first else ""
    gaps = f"{float(r['dispatch_gaps_s']):.1f} s in {r['dispatch_gaps']}" if first else ""
    print(f"| {r['routing']} | {r['run']} | {r['tenant']} | {r['served']} / {r['sent']} | "
          f"{r['refused']} | {float(r['ttft_p50_s']):.3f} s | {float(r['ttft_p90_s']):.3f} s | "
          f"{float(r['ttft_p99_s']):.3f} s | {vs_ref} | {pool} | {vs_off} | "
          f"{r['b_target']} | {pool_target} | {gaps} |")
PY
echo "wrote $OUT/fair-share.csv"
