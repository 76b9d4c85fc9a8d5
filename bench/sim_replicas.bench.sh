#!/usr/bin/env bash
# The loss of several gateway replicas, measured in the simulator: the llm-d shared-prefix
# workload and multi-turn chat, policy "approximate" (llm-d's estimated scheduling: the
# prefix comes from each replica's own routing history), behind 1, 2, 4 and 8 replicas
# with sync off, on (applied at once) and on with a lag. Clients spread over the
# replicas at random. Prints one markdown table and writes CSV and two SVG plots per
# workload (p90 TTFT and prefix-hit rate against replicas) to OUT.
# Usage: bench/sim_replicas.bench.sh [OUT=sim-out/replicas]
# POLICY=name picks another policy of both scenarios; LAGS="10 100" the lags (ms).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
OUT=${1:-sim-out/replicas}
POLICY=${POLICY:-approximate}
LAGS=${LAGS:-10 100}
mkdir -p "$OUT"
csv="$OUT/replicas.csv"
echo "workload,replicas,sync,lag_ms,ttft_p90_s,output_tokens_per_s,prefix_hit_rate,completed" >"$csv"
run() {  # workload-name scenario replicas sync lag
  local dir="$OUT/run-$1-$3-$4-$5"
  nice -n 10 "$BIN" sim "$2" --policies "$POLICY" --no-progress --out "$dir" \
    --replicas "$3" --sync "$4" --sync-lag-ms "$5" >"$dir.log" 2>&1
  python3 - "$dir/summary.csv" "$1" "$3" "$4" "$5" >>"$csv" <<'PY'
import csv, sys
row = next(csv.DictReader(open(sys.argv[1])))
print(",".join(sys.argv[2:6] + [row["ttft_p90_s"], row["output_tokens_per_s"], row["prefix_hit_rate"], row["completed"]]))
PY
}
for w in shared-prefix:examples/sim/llmd-shared-prefix.yaml chat:examples/sim/chat-multiturn.yaml; do
  name=${w%%:*}; scenario=${w#*:}
  run "$name" "$scenario" 1 on 0
  for n in 2 4 8; do
    run "$name" "$scenario" "$n" off 0
    run "$name" "$scenario" "$n" on 0
    for lag in $LAGS; do run "$name" "$scenario" "$n" on "$lag"; done
  done
done
python3 - "$csv" "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
def mode(r):
    return "sync off" if r["sync"] == "off" else ("sync on" if r["lag_ms"] in ("0", "0.0") else f"sync on, {r['lag_ms']} ms lag")
print("| workload | replicas | sync | p90 TTFT (s) | vs 1 replica | output tok/s | prefix-hit rate | vs 1 replica |")
print("|---|---|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    base = next(r for r in rows if r["workload"] == w and r["replicas"] == "1")
    for r in (x for x in rows if x["workload"] == w):
        t, h = float(r["ttft_p90_s"]), float(r["prefix_hit_rate"])
        print(f"| {w} | {r['replicas']} | {'-' if r['replicas'] == '1' else mode(r)} | {t:.3f} | "
              f"{t / float(base['ttft_p90_s']):.3f}x | {float(r['output_tokens_per_s']):.0f} | "
              f"{h:.3f} | {h / max(float(base['prefix_hit_rate']), 1e-9):.3f}x |")
# One SVG per workload and measure: a line per mode over 1, 2, 4, 8 replicas.
colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
for w in dict.fromkeys(r["workload"] for r in rows):
    base = next(r for r in rows if r["workload"] == w and r["replicas"] == "1")
    modes = list(dict.fromkeys(mode(r) for r in rows if r["workload"] == w and r["replicas"] != "1"))
    for key, label in (("ttft_p90_s", "p90 TTFT (s)"), ("prefix_hit_rate", "prefix-hit rate")):
        series = {m: [(1, float(base[key]))] + [(int(r["replicas"]), float(r[key])) for r in rows
                  if r["workload"] == w and r["replicas"] != "1" and mode(r) == m] for m in modes}
        ys = [y for s in series.values() for _, y in s]
        lo, hi = 0.0, max(ys) * 1.1 or 1.0
        W, H, L, B = 560, 320, 70, 40
        def px(n): return L + (W - L - 20) * ([1, 2, 4, 8].index(n)) / 3
        def py(y): return H - B - (H - B - 20) * (y - lo) / (hi - lo)
        svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
               f'<text x="{W/2}" y="14" text-anchor="middle">{w}: {label} against gateway replicas</text>',
               f'<line x1="{L}" y1="{H-B}" x2="{W-20}" y2="{H-B}" stroke="black"/>',
               f'<line x1="{L}" y1="20" x2="{L}" y2="{H-B}" stroke="black"/>']
        for n in (1, 2, 4, 8):
            svg.append(f'<text x="{px(n)}" y="{H-B+16}" text-anchor="middle">{n}</text>')
        for i in range(5):
            y = lo + (hi - lo) * i / 4
            svg.append(f'<text x="{L-6}" y="{py(y)+4}" text-anchor="end">{y:.3g}</text>')
            svg.append(f'<line x1="{L}" y1="{py(y)}" x2="{W-20}" y2="{py(y)}" stroke="#ddd"/>')
        svg.append(f'<text x="{W/2}" y="{H-6}" text-anchor="middle">replicas</text>')
        for i, (m, pts) in enumerate(series.items()):
            c = colors[i % len(colors)]
            svg.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="' +
                       " ".join(f"{px(n)},{py(y)}" for n, y in pts) + '"/>')
            svg.append(f'<text x="{L+10}" y="{34+14*i}" fill="{c}">{m}</text>')
        svg.append("</svg>")
        open(f"{out}/replicas-{w}-{key}.svg", "w").write("\n".join(svg) + "\n")
PY
echo "wrote $csv and $OUT/replicas-*.svg"
