#!/usr/bin/env bash
# What the engine fallback (`tokenize: engine`, docs/tokenizer.md) adds to a request's
# routing time on loopback: the POST /tokenize hop to an engine and back.
#
# Setup (all local, release build): ENGINES `kvgate engine` processes with the Qwen3
# tokenizer and chat template, and one `kvgate serve` with three pools over the same
# engines: `local` (the gateway's own tokenizer and template), `engine` (tokenize:
# engine) and `none` (no tokenizer: pseudo-tokens). A Python client sends new chat
# conversations of about TOKENS tokens (a system prompt and a user message of their own,
# so every one misses the fallback's cache), one at a time, cycling through the three
# pools; then, on the engine pool, follow-ups of conversations it has seen (a cached
# prefix: no hop) and repeats (a cached whole: no hop). RUNS times.
#
# First the hop alone: REQUESTS POST /tokenize calls (chat form, a new conversation each)
# straight to one engine on a kept-alive connection, p50/p99 as the client times them.
# Then the figure is the gateway's own `x-kvgate-route-us` (from the parsed request to the
# router's pick: for the engine pool the /tokenize call, the answer's parsing and the
# block hashes; for the local pool the chat template and tokenization). Per run: the median
# of each pool; printed at the end: the median over the runs, and the engine pool's
# difference to the other two. The engine's own /tokenize work (template and tokenizer
# in C++, like the gateway's) is inside the hop; vLLM's Python tokenizer would add its
# own time there.
#
# Usage: bench/tokenize_hop.bench.sh [REQUESTS=200] [RUNS=5]
# Env: ENGINES (2), TOKENS (2000), KVGATE_BIN (build/release/kvgate; an ASan build works
# but its figures are the sanitizer's, not kvgate's).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
REQUESTS=${1:-200}
RUNS=${2:-5}
ENGINES=${ENGINES:-2}
TOKENS=${TOKENS:-2000}
FIX=$PWD/.deps/fixtures/qwen3
[[ -x $BIN ]] || { echo "tokenize_hop: $BIN missing (build the release kvgate)" >&2; exit 2; }
[[ -f $FIX/tokenizer.json ]] || { echo "tokenize_hop: run scripts/bootstrap first" >&2; exit 2; }
BENCH_NAME=tokhop
source bench/bench_procs.sh

endpoints=""
for i in $(seq "$ENGINES"); do
  http=$(free_port)
  "$BIN" engine --port "$http" --model qwen3 --tokenizer "$FIX" --block-size 16 \
    --time-scale 0.01 --seed "$i" >"$W/engine$i.log" 2>&1 &
  pids+=($!)
  endpoints+="${endpoints:+, }http://127.0.0.1:$http"
done
GW=$(free_port)
cat >"$W/gateway.yaml" <<YAML
listeners: [{address: 127.0.0.1, port: $GW}]
pools:
  local:
    tokenizer: $FIX/tokenizer.json
    chat_template: $FIX/tokenizer_config.json
    router: {policy: kv-cost, overlap: approx}
    endpoints: [$endpoints]
  engine:
    tokenize: {mode: engine, timeout_ms: 1000}
    router: {policy: kv-cost, overlap: approx}
    endpoints: [$endpoints]
  none:
    router: {policy: kv-cost, overlap: approx}
    endpoints: [$endpoints]
models:
  - {name: local, pool: local, served_name: qwen3}
  - {name: engine, pool: engine, served_name: qwen3}
  - {name: none, pool: none, served_name: qwen3}
YAML
"$BIN" serve "$W/gateway.yaml" >"$W/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
  curl -fs -o /dev/null "http://127.0.0.1:$GW/ready" && break
  sleep 0.1
done
for e in $(grep -o 'http://127.0.0.1:[0-9]*' "$W/gateway.yaml" | sort -u); do
  for _ in $(seq 200); do curl -fs -o /dev/null "$e/health" && break; sleep 0.1; done
done

first_engine=$(grep -o 'http://127.0.0.1:[0-9]*' "$W/gateway.yaml" | head -1)
python3 - "http://127.0.0.1:$GW" "$REQUESTS" "$RUNS" "$TOKENS" "$first_engine" <<'PY'
import http.client, json, random, statistics, sys, time, urllib.parse

url, requests, runs, tokens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
u = urllib.parse.urlparse(url)
rng = random.Random(11)
words = ("the of and to in is that for it as with was on be by this are from at or an "
         "request model cache server token prompt router engine latency memory block prefix "
         "decode prefill queue batch load pool replica gateway policy score cost stream event "
         "user system assistant answer question document section table figure result value "
         "function return error config deploy cluster node zone rack metric scrape window").split()
text = lambda n: " ".join(rng.choice(words) for _ in range(n))
conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)

def post(model, messages):
    conn.request("POST", "/v1/chat/completions",
                 json.dumps({"model": model, "max_tokens": 1, "messages": messages}),
                 {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise SystemExit(f"HTTP {r.status}: {data[:300]!r}")
    return int(r.getheader("x-kvgate-route-us")), json.loads(data)["usage"]["prompt_tokens"]

def conversation():
    return [{"role": "system", "content": text(int(tokens * 0.8))},
            {"role": "user", "content": text(int(tokens * 0.2))}]

# The hop alone: POST /tokenize (chat form, a new conversation each time) straight to one
# engine over one kept-alive loopback connection, timed by the client (send to last byte).
e = urllib.parse.urlparse(sys.argv[5])
econn = http.client.HTTPConnection(e.hostname, e.port, timeout=60)
rtt = []
for i in range(requests):
    body = json.dumps({"model": "qwen3", "messages": conversation()})
    t0 = time.perf_counter()
    econn.request("POST", "/tokenize", body, {"Content-Type": "application/json"})
    r = econn.getresponse()
    data = r.read()
    rtt.append((time.perf_counter() - t0) * 1e6)
    if r.status != 200:
        raise SystemExit(f"/tokenize HTTP {r.status}: {data[:300]!r}")
    count = json.loads(data)["count"]
rtt.sort()
print(f"POST /tokenize round trip to one engine ({count} tokens, {len(rtt)} calls): "
      f"p50 {rtt[len(rtt) // 2]:.0f} us, p99 {rtt[int(len(rtt) * 0.99)]:.0f} us")

pools = ["local", "engine", "none"]
medians = {p: [] for p in pools + ["engine follow-up", "engine repeat"]}
for run in range(runs):
    times = {p: [] for p in medians}
    prompt = []
    seen = []
    for i in range(requests):
        for p in pools:
            c = conversation()
            us, n = post(p, c)
            times[p].append(us)
            prompt.append(n)
            if p == "engine": seen.append(c)
    for c in seen:  # a follow-up of each conversation the engine pool saw: a cached prefix
        follow = c + [{"role": "assistant", "content": text(40)}, {"role": "user", "content": text(60)}]
        times["engine follow-up"].append(post("engine", follow)[0])
    for c in seen:  # the same conversations again: cached whole
        times["engine repeat"].append(post("engine", c)[0])
    line = []
    for p, t in times.items():
        m = statistics.median(t)
        medians[p].append(m)
        line.append(f"{p} {m:.0f}")
    print(f"run {run + 1}: median route us: " + ", ".join(line) +
          f" (prompt tokens mean {statistics.mean(prompt):.0f})")
final = {p: statistics.median(m) for p, m in medians.items()}
print("median of the runs' medians (us): " + ", ".join(f"{p} {v:.0f}" for p, v in final.items()))
print(f"the /tokenize hop adds {final['engine'] - final['local']:.0f} us to a new conversation's "
      f"routing over the local tokenizer, {final['engine'] - final['none']:.0f} us over none; "
      f"a follow-up (cached prefix) costs {final['engine follow-up'] - final['none']:+.0f} us and a "
      f"repeat {final['engine repeat'] - final['none']:+.0f} us over none")
conn.request("GET", "/metrics")
for line in conn.getresponse().read().decode().splitlines():
    if line.startswith("kvgate_engine_tokenize") and not line.endswith(" 0"):
        print(line)
PY
