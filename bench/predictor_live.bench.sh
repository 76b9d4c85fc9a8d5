#!/usr/bin/env bash
# The latency predictor's accuracy live against `kvgate engine`s and in the simulator, side
# by side (issue #43, "Predictor accuracy"; docs/router.md "Latency targets", "Predictor
# accuracy, live"): the mean absolute percentage error (MAPE) of the TTFT and TPOT the
# router predicted for each request, on the llm-d workload and on a mixed workload, each
# at a load near the fleet's capacity and one below it.
#
# Each case is one scenario, written twice (prompt lengths in tokens for the simulator, in
# words for the live fleet: "Tokens" below): `kvgate sim` runs one, `kvgate bench` sends the
# other's workload to the live fleet; same seed, same arrivals, same engine model.
#   - llm-d: examples/sim/llmd-shared-prefix-250.yaml (llm-d's shared-prefix benchmark
#     with the 250 output tokens its table implies; docs/sim.md) scaled to ENGINES engines:
#     150 x ENGINES/8 groups (each engine holds as many groups' prefixes as one of 8
#     does), engines as the file's (2xh100-qwen3-32b, block size 64, 4,802 blocks,
#     max_num_seqs 256, max_num_batched_tokens 8,192). A warm-up stage sends one cycle of
#     the prompts (30 x ENGINES/8 requests/s for LLMD_WARMUP_S = 25 s: the caches fill,
#     as the file's 50 s at 15 requests/s do), then, for each load of LLMD_LOADS,
#     load x LLMD_CAPACITY requests/s per engine for DURATION_S. No request carries
#     targets (as published): the predictor predicts and learns from every request.
#     LLMD_CAPACITY (10 requests/s per engine) is an estimate from the engine model's
#     step times (src/core/engine/profile.cc): prompts repeat in a cycle, so a request
#     prefills ~one block and decodes 250 tokens at ~7,300 tokens of context; a decode
#     step costs 1.96 ms + max(10.9 ms weight reads, 57 us x batch) + 0.32 ms x batch of
#     KV reads, so the engine tops out at ~2,600 tokens/s (batch 256), ~10.4 requests/s.
#     The simulator measured no saturation up to 7.5 requests/s per engine (docs/sim.md).
#   - mixed: chat (65% with a 400 ms TTFT target) and long uncached documents as in
#     examples/sim/latency-targets-loaded.yaml (1.0x = its rates, 128 + 40 requests/s per
#     8 engines: about the pool's capacity, by the file's estimate and the simulator's
#     attainment at 0.9-1.1x in docs/router.md), plus the batch class of
#     examples/sim/latency-targets.yaml (1,000-token answers, 2 requests/s per 8 engines,
#     ~1.5% of capacity), on h100-qwen2.5-7b engines; every rate x ENGINES/8 x the load of
#     MIXED_LOADS; a warm-up stage of MIXED_WARMUP_S at the same rates, then DURATION_S.
# Router (both worlds): kv-cost (llm-d: overlap_weight 8, docs/sim.md's tuned weight) on
# the precise index fed by the engines' KV events, latency_targets {enabled, headroom 0.1,
# best_effort}, predictor defaults. Simulated gateway: 1 ms hops, 100 ms scrapes, 10 ms
# KV event delay (the example files'); live: the pool scrapes every 100 x TIME_SCALE ms.
#
# Tokens: precise routing needs the gateway to cut prompts into the engines' tokens, so
# both load the tiny tokenizer of bench/live_fleet.py (byte-level BPE with Qwen3's
# pre-tokenizer and one merge, as tests/integration/live_vs_sim_test.cc does); the
# workloads use vocab_size 10, so every word `kvgate bench` writes (t0..t9) is exactly two
# tokens and the live scenario declares half the simulated prompt lengths. The process
# helpers (engines, gateway, KV event feeds, metrics) are bench/live_fleet.py's too.
#
# Live, per case: fresh engines (`--model sim --port 0`, ports and KV event sockets read
# from their logs) and a fresh `kvgate serve` (port 0), so that the predictor, like the
# simulator's, starts from its priors; the gateway's KV event feeds are joined first
# (ZeroMQ's slow joiner); then `kvgate bench --time-scale TIME_SCALE` sends the
# workload (warm-up included). The figures are the gateway's at the end:
# kvgate_predictor_ttft_mape / _tpot_mape / _samples_total{pool="main"} (cumulative over
# every sample since the start, warm-up included, as the simulator's MAPE is).
# The table: per case, the simulator's and the live MAPE, the samples they are over, the
# requests of the measured stage, the prefix-cache hit rate and p90 TTFT of both worlds
# (a check that the worlds match), and how busy the machine's CPUs were during the live
# run (near 100%: CPU contention adds latency the engine model does not have).
#
# Usage: bench/predictor_live.bench.sh [OUT]   (OUT keeps scenarios, configs, logs, the
#   runs' report files and predictor_live.csv; default: a scratch directory removed at exit)
# Env: KVGATE_BIN (build/release/kvgate), ENGINES (4), TIME_SCALE (1: wall seconds per
#   model second, engines and bench alike), DURATION_S (30, model seconds of the measured
#   stage), LLMD_WARMUP_S (25), MIXED_WARMUP_S (15), LLMD_LOADS ("0.5 0.9"), LLMD_CAPACITY
#   (10), MIXED_LOADS ("0.5 1.0"), WORKLOADS ("llm-d mixed"), SEED (1).
# About 5 minutes with the defaults (4 live cases of ~60-80 s, the simulations take
# seconds). Needs python3 and a release kvgate (build it first; nothing is built here).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
[[ -x $BIN ]] || { echo "predictor_live: $BIN missing (build the release kvgate)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "predictor_live: python3 missing" >&2; exit 2; }
# Every stream in flight holds a descriptor in the client and two in the gateway.
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=1048576
ulimit -n "$hard" 2>/dev/null || ulimit -n 65536 2>/dev/null || true
BENCH_NAME=predictor-live
source bench/bench_procs.sh
if [[ -n ${1:-} ]]; then
  mkdir -p "$1"
  OUTDIR=$(cd "$1" && pwd)
else
  OUTDIR=$W
fi

PYTHONPATH=bench${PYTHONPATH:+:$PYTHONPATH} python3 - "$BIN" "$OUTDIR" <<'PY' &
import csv, os, sys, time

import live_fleet as lf
from live_fleet import cpu_ticks, fail, metrics, pick, run_to_end, stop, tail

BIN, W = os.path.abspath(sys.argv[1]), sys.argv[2]
env = os.environ.get
ENGINES = int(env("ENGINES", "4"))
TIME_SCALE = float(env("TIME_SCALE", "1"))
DURATION_S = float(env("DURATION_S", "30"))
LLMD_WARMUP_S = float(env("LLMD_WARMUP_S", "25"))
MIXED_WARMUP_S = float(env("MIXED_WARMUP_S", "15"))
LLMD_LOADS = [float(x) for x in env("LLMD_LOADS", "0.5 0.9").split()]
LLMD_CAPACITY = float(env("LLMD_CAPACITY", "10"))
MIXED_LOADS = [float(x) for x in env("MIXED_LOADS", "0.5 1.0").split()]
WORKLOADS = env("WORKLOADS", "llm-d mixed").split()
SEED = int(env("SEED", "1"))
TOKENS_PER_WORD = lf.TOKENS_PER_WORD  # the tiny tokenizer: every word t0..t9 is " t" + a digit
SHARE = ENGINES / 8  # the example files size their rates for 8 engines
lf.setup("predictor_live")

TOKENIZER = lf.write_tiny_tokenizer(f"{W}/tokenizer.json")

# --- The cases: each a scenario for the simulator (k = 1) and one for the live fleet
# (k = TOKENS_PER_WORD: prompt lengths in words).
TARGETS_POLICY = "latency_targets: {enabled: true, headroom: 0.1, action: best_effort}"
SIM_GATEWAY = "gateway: {model: sim, hop_delay_ms: 1, scrape_interval_ms: 100, kv_event_delay_ms: 10}"


def llmd_yaml(load, k):
    groups = max(1, round(150 * SHARE))
    return f"""name: predictor accuracy, llm-d shared prefix (250 tokens out) at {load:g}x ({ENGINES} engines)
seed: {SEED}
cluster: {{engines: {ENGINES}, profile: 2xh100-qwen3-32b, block_size: 64, num_gpu_blocks: 4802,
          max_num_seqs: 256, max_num_batched_tokens: 8192}}
{SIM_GATEWAY}
policies:
  - {{name: targets, policy: kv-cost, params: {{overlap_weight: 8}}, overlap: precise,
     {TARGETS_POLICY}}}
workload:
  kind: shared_prefix
  vocab_size: 10
  shared_prefix: {{groups: {groups}, prompts_per_group: 5, system_prompt_tokens: {6000 // k},
                  question_tokens: {1200 // k}, output_tokens: 250, order: cycle}}
  arrivals:
    kind: poisson
    stages:
      - {{qps: {30 * SHARE:g}, duration_s: {LLMD_WARMUP_S:g}, warmup: true}}
      - {{qps: {LLMD_CAPACITY * ENGINES * load:g}, duration_s: {DURATION_S:g}}}
"""


def mixed_yaml(load, k):
    def tenant(name, shared_prefix, targets, qps_per_8):
        qps = qps_per_8 * SHARE * load
        t = (f"    - name: {name}\n      workload:\n        kind: shared_prefix\n"
             f"        shared_prefix: {{{shared_prefix}}}\n")
        if targets:
            t += f"        targets: {{{targets}}}\n"
        return t + ("        arrivals:\n          kind: poisson\n          stages:\n"
                    f"            - {{qps: {qps:g}, duration_s: {MIXED_WARMUP_S:g}, warmup: true}}\n"
                    f"            - {{qps: {qps:g}, duration_s: {DURATION_S:g}}}\n")
    return (f"name: predictor accuracy, mixed (chat, documents, batch) at {load:g}x ({ENGINES} engines)\n"
            f"seed: {SEED}\ncluster: {{engines: {ENGINES}, profile: h100-qwen2.5-7b}}\n{SIM_GATEWAY}\n"
            f"policies:\n  - {{name: targets, policy: kv-cost, overlap: precise, {TARGETS_POLICY}}}\n"
            "workload:\n  kind: tenants\n  vocab_size: 10\n  tenants:\n" +
            tenant("chat", f"groups: 32, prompts_per_group: 16, system_prompt_tokens: {1000 // k}, "
                   f"question_tokens: {200 // k}, output_tokens: 200, output_tokens_min: 50, "
                   "order: random", "fraction: 0.65, ttft_ms: 400", 128) +
            tenant("documents", f"groups: 4, prompts_per_group: 850, system_prompt_tokens: "
                   f"{100 // k}, question_tokens: {6000 // k}, output_tokens: 300, "
                   "output_tokens_min: 100", "", 40) +
            tenant("batch", f"groups: 8, prompts_per_group: 32, system_prompt_tokens: {500 // k}, "
                   f"question_tokens: {500 // k}, output_tokens: 1000, order: random", "", 2))


cases = []
for workload in WORKLOADS:
    if workload == "llm-d":
        for load in LLMD_LOADS:
            cases.append({"workload": "llm-d", "load": load, "yaml": llmd_yaml,
                          "block_size": 64, "warmup_s": LLMD_WARMUP_S,
                          "params": "      params: {overlap_weight: 8}\n",
                          "engine_args": ["--profile", "2xh100-qwen3-32b", "--block-size", "64",
                                          "--num-gpu-blocks", "4802", "--max-num-seqs", "256",
                                          "--max-num-batched-tokens", "8192"]})
    elif workload == "mixed":
        for load in MIXED_LOADS:
            cases.append({"workload": "mixed", "load": load, "yaml": mixed_yaml,
                          "block_size": 16, "warmup_s": MIXED_WARMUP_S, "params": "",
                          "engine_args": ["--profile", "h100-qwen2.5-7b"]})
    else:
        fail(f"WORKLOADS: unknown workload {workload!r} (llm-d, mixed)")
for c in cases:
    c["tag"] = f"{c['workload']}-x{c['load']:g}"
    for world, k in (("sim", 1), ("live", TOKENS_PER_WORD)):
        path = f"{W}/{c['tag']}-{world}.yaml"
        with open(path, "w") as f:
            f.write(c["yaml"](c["load"], k))
        c[world + "_yaml"] = path


def summary_row(path):
    with open(path, newline="") as f:
        return next(csv.DictReader(f))


def num(row, key):
    try:
        return float(row.get(key, ""))
    except (TypeError, ValueError):
        return None


# --- The simulator first (seconds each): the same scenarios, and a check of the files.
print(f"== latency predictor accuracy: {ENGINES} engines, time scale {TIME_SCALE:g}, "
      f"measured stage {DURATION_S:g} model s, seed {SEED}", flush=True)
for c in cases:
    out = f"{W}/{c['tag']}-sim"
    rc = run_to_end([BIN, "sim", c["sim_yaml"], "--no-progress", "--out", out], out + ".log", 600)
    if rc != 0:
        fail(f"kvgate sim {c['sim_yaml']} failed ({rc}):\n{tail(out + '.log')}")
    row = summary_row(f"{out}/summary.csv")
    c["sim"] = {"ttft_mape": num(row, "predictor_ttft_mape"),
                "tpot_mape": num(row, "predictor_tpot_mape"),
                "ttft_samples": num(row, "predictor_ttft_samples"),
                "tpot_samples": num(row, "predictor_tpot_samples"),
                "requests": num(row, "requests"), "completed": num(row, "completed"),
                "hit_rate": num(row, "prefix_hit_rate"), "ttft_p90": num(row, "ttft_p90_s")}
    print(f"sim  {c['tag']}: TTFT MAPE {c['sim']['ttft_mape']}, TPOT MAPE "
          f"{c['sim']['tpot_mape']}", flush=True)


# --- Live.
def start_engines(c):
    return lf.start_engines(BIN, ENGINES, f"{W}/{c['tag']}-engine",
                            ["--tokenizer", TOKENIZER, "--time-scale", f"{TIME_SCALE:g}"] +
                            c["engine_args"])


def start_gateway(c, engines):
    scrape_ms = min(1000, max(50, round(100 * TIME_SCALE)))
    y = ("listeners: [{address: 127.0.0.1, port: 0}]\n"
         "timeouts: {header_ms: 10000, connect_ms: 2000}\n"
         f"pools:\n  main:\n    block_size: {c['block_size']}\n"
         f"    scrape_interval_ms: {scrape_ms}\n    tokenizer: {TOKENIZER}\n"
         "    router:\n      policy: kv-cost\n" + c["params"] +
         f"      overlap: precise\n      {TARGETS_POLICY}\n    endpoints:\n" +
         lf.endpoints_yaml(engines, kv_events=True) +
         "models:\n  - {name: sim, pool: main}\n")
    path = f"{W}/{c['tag']}-gateway.yaml"
    with open(path, "w") as f:
        f.write(y)
    return lf.start_gateway(BIN, path, f"{W}/{c['tag']}-gateway.log")


for c in cases:
    print(f"live {c['tag']}: starting {ENGINES} engines and the gateway", flush=True)
    engines = start_engines(c)
    gw_proc, gw = start_gateway(c, engines)
    lf.join_feeds(gw, engines)
    busy0, total0 = cpu_ticks()
    out = f"{W}/{c['tag']}-live"
    t0 = time.monotonic()
    rc = run_to_end([BIN, "bench", c["live_yaml"], "--url", gw, "--model", "sim",
                     "--time-scale", f"{TIME_SCALE:g}", "--timeout", "300", "--no-progress",
                     "--label", "live", "--out", out], out + ".log",
                    (c["warmup_s"] + DURATION_S) * TIME_SCALE * 2 + 300)
    wall = time.monotonic() - t0
    busy1, total1 = cpu_ticks()
    if rc != 0:
        fail(f"kvgate bench failed ({rc}) on {c['tag']}:\n{tail(out + '.log')}")
    time.sleep(0.5)  # the last answers' ends reach the predictor on the gateway's strand
    m = metrics(gw)
    stop([gw_proc])
    stop([e["proc"] for e in engines])
    row = summary_row(f"{out}/summary.csv")
    c["live"] = {"ttft_mape": pick(m, "kvgate_predictor_ttft_mape", pool="main"),
                 "tpot_mape": pick(m, "kvgate_predictor_tpot_mape", pool="main"),
                 "ttft_samples": pick(m, "kvgate_predictor_samples_total", pool="main", kind="ttft"),
                 "tpot_samples": pick(m, "kvgate_predictor_samples_total", pool="main", kind="tpot"),
                 "requests": num(row, "requests"), "completed": num(row, "completed"),
                 "hit_rate": num(row, "prefix_hit_rate"), "ttft_p90": num(row, "ttft_p90_s"),
                 "cpu_busy": (busy1 - busy0) / max(1, total1 - total0), "wall": wall}
    notes = []
    for name in ("kvgate_kv_event_missed_total", "kvgate_kv_event_anomalies_total",
                 "kvgate_scrape_errors_total", "kvgate_upstream_retries_total"):
        v = pick(m, name)
        if v:
            notes.append(f"{name} {v:.0f}")
    L = c["live"]
    if L["requests"] and L["completed"] is not None and L["completed"] < L["requests"]:
        notes.append(f"{L['requests'] - L['completed']:.0f} of {L['requests']:.0f} requests "
                     "not completed")
    c["notes"] = notes
    print(f"live {c['tag']}: {wall:.0f} s, TTFT MAPE {L['ttft_mape']}, TPOT MAPE "
          f"{L['tpot_mape']}, CPU busy {L['cpu_busy']:.0%}" +
          ("; " + "; ".join(notes) if notes else ""), flush=True)


# --- The table.
def pct(v):
    return "-" if v is None else f"{v * 100:.1f}%"


def n(v):
    return "-" if v is None else f"{v:,.0f}"


def sec(v):
    return "-" if v is None else f"{v:.3f} s"


print()
print(f"Predictor MAPE, simulated and live ({ENGINES} engines, seed {SEED}, time scale "
      f"{TIME_SCALE:g}; MAPE over every request of the run, warm-up included; requests: the "
      "measured stage's)")
print()
print("| workload | load | requests (sim / live) | TTFT MAPE sim | TTFT MAPE live | "
      "TPOT MAPE sim | TPOT MAPE live | samples TTFT (sim / live) | hit rate (sim / live) | "
      "p90 TTFT (sim / live) | CPU busy (live) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for c in cases:
    s, L = c["sim"], c["live"]
    print(f"| {c['workload']} | {c['load']:g}x | {n(s['requests'])} / {n(L['requests'])} | "
          f"{pct(s['ttft_mape'])} | {pct(L['ttft_mape'])} | {pct(s['tpot_mape'])} | "
          f"{pct(L['tpot_mape'])} | {n(s['ttft_samples'])} / {n(L['ttft_samples'])} | "
          f"{pct(s['hit_rate'])} / {pct(L['hit_rate'])} | {sec(s['ttft_p90'])} / "
          f"{sec(L['ttft_p90'])} | {L['cpu_busy']:.0%} |")
lf.print_notes([f"{c['tag']}: " + "; ".join(c["notes"]) for c in cases if c["notes"]],
               any(c["live"]["cpu_busy"] > 0.9 for c in cases))

with open(f"{W}/predictor_live.csv", "w", newline="") as f:
    out = csv.writer(f, lineterminator="\n")
    keys = ["ttft_mape", "tpot_mape", "ttft_samples", "tpot_samples", "requests", "completed",
            "hit_rate", "ttft_p90"]
    out.writerow(["workload", "load", "engines", "time_scale"] + [f"sim_{k}" for k in keys] +
                 [f"live_{k}" for k in keys] + ["live_cpu_busy", "live_wall_s"])
    for c in cases:
        out.writerow([c["workload"], f"{c['load']:g}", ENGINES, f"{TIME_SCALE:g}"] +
                     ["" if c["sim"][k] is None else c["sim"][k] for k in keys] +
                     ["" if c["live"][k] is None else c["live"][k] for k in keys] +
                     [f"{c['live']['cpu_busy']:.3f}", f"{c['live']['wall']:.1f}"])
PY
pids+=($!)
wait "$!"
if [[ -n ${1:-} ]]; then
  echo
  echo "kept in $OUTDIR: scenarios (*-sim.yaml, *-live.yaml), gateway configs, logs, reports, predictor_live.csv"
fi
