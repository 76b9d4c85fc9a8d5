#!/usr/bin/env bash
# LoRA in the simulator (issue #40, docs/lora.md): examples/sim/lora.yaml (50 Zipf
# adapters on 8 engines with 4 slots each) under load-only routing, adapter-aware
# routing, and adapter-aware routing with placement, over SEEDS seeds. Prints one
# markdown table (p90 TTFT, output tokens/s, adapter loads per minute, evictions,
# placement actions; the mean over seeds, min-max in brackets) and writes the CSV and
# one SVG plot (three panels: p90 TTFT, adapter loads per minute, output tokens/s per
# policy) to OUT.
# Usage: bench/sim_lora.bench.sh [OUT=docs/img]     SEEDS="1 2 3" picks the seeds.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/sim_seeds.sh
BIN=${KVGATE_BIN:-build/release/kvgate}
OUT=${1:-docs/img}
SEEDS=${SEEDS:-1 2 3}
SCENARIO=${SCENARIO:-examples/sim/lora.yaml}
work=$(mktemp -d -t kvgate-lora.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
csv="$OUT/lora.csv"
sim_seeds_csv "$csv" ttft_p90_s output_tokens_per_s adapter_loads adapter_loads_per_min adapter_evictions placement_actions completed
python3 - "$csv" "$OUT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
out = sys.argv[2]
policies = list(dict.fromkeys(r["policy"] for r in rows))
def values(p, key):
    return [float(r[key]) for r in rows if r["policy"] == p]
def cell(p, key, fmt):
    v = values(p, key)
    m = sum(v) / len(v)
    return f"{m:{fmt}} ({min(v):{fmt}}-{max(v):{fmt}})" if len(v) > 1 else f"{m:{fmt}}"
seeds = len(dict.fromkeys(r["seed"] for r in rows))
print(f"{seeds} seed(s); mean (min-max)")
print()
print("| policy | p90 TTFT (s) | output tok/s | adapter loads/min | evictions | placement actions |")
print("|---|---|---|---|---|---|")
for p in policies:
    print(f"| {p} | {cell(p, 'ttft_p90_s', '.3f')} | {cell(p, 'output_tokens_per_s', '.0f')} | "
          f"{cell(p, 'adapter_loads_per_min', '.1f')} | {cell(p, 'adapter_evictions', '.0f')} | "
          f"{cell(p, 'placement_actions', '.0f')} |")
# One SVG: three panels of bars (mean over seeds, a whisker from min to max).
colors = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
panels = [("ttft_p90_s", "p90 TTFT (s)"), ("adapter_loads_per_min", "adapter loads / min"),
          ("output_tokens_per_s", "output tokens / s")]
PW, H, T, B, L = 240, 300, 40, 60, 50
W = PW * len(panels) + 20
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="{W/2}" y="16" text-anchor="middle">LoRA: 50 Zipf adapters, 8 engines x 4 slots (examples/sim/lora.yaml)</text>']
for k, (key, label) in enumerate(panels):
    x0 = 10 + k * PW
    hi = max(max(values(p, key)) for p in policies) * 1.15 or 1.0
    def py(y): return H - B - (H - B - T) * y / hi
    svg.append(f'<text x="{x0 + PW/2}" y="{T - 8}" text-anchor="middle">{label}</text>')
    svg.append(f'<line x1="{x0 + L}" y1="{H-B}" x2="{x0 + PW - 10}" y2="{H-B}" stroke="black"/>')
    svg.append(f'<line x1="{x0 + L}" y1="{T}" x2="{x0 + L}" y2="{H-B}" stroke="black"/>')
    for i in range(5):
        y = hi * i / 4
        svg.append(f'<text x="{x0 + L - 4}" y="{py(y) + 4}" text-anchor="end">{y:.3g}</text>')
        svg.append(f'<line x1="{x0 + L}" y1="{py(y)}" x2="{x0 + PW - 10}" y2="{py(y)}" stroke="#eee"/>')
    bw = (PW - L - 20) / len(policies)
    for j, p in enumerate(policies):
        v = values(p, key)
        m = sum(v) / len(v)
        x = x0 + L + 5 + j * bw
        c = colors[j % len(colors)]
        svg.append(f'<rect x="{x}" y="{py(m)}" width="{bw - 8}" height="{H - B - py(m)}" fill="{c}"/>')
        if len(v) > 1:
            cx = x + (bw - 8) / 2
            svg.append(f'<line x1="{cx}" y1="{py(min(v))}" x2="{cx}" y2="{py(max(v))}" stroke="black"/>')
        svg.append(f'<text x="{x + (bw - 8) / 2}" y="{H - B + 14 + 12 * (j % 2)}" text-anchor="middle" font-size="10">{p}</text>')
svg.append("</svg>")
open(f"{out}/lora.svg", "w").write("\n".join(svg) + "\n")
PY
echo "wrote $csv and $OUT/lora.svg"
