#!/usr/bin/env bash
# Gateway memory per held SSE stream: N concurrent streaming chat requests through
# `kvgate serve` (threads: 1) to a slow `kvgate engine` (tokens seconds apart), held
# open and read by an asyncio client; the gateway's RSS is read from /proc at steps on
# the way to N, and reported as growth per stream over the idle gateway.
# Each stream costs the gateway two descriptors (client side, upstream side), so N is
# capped by the hard RLIMIT_NOFILE: (limit - 100) / 2.
# Usage: bench/gateway_sse_streams.bench.sh [STREAMS=10000] [HOLD_S=5]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
WANT=${1:-10000}
HOLD=${2:-5}
hard=$(ulimit -Hn)
[[ $hard == unlimited ]] && hard=1048576
ulimit -n "$hard"
cap=$(((hard - 100) / 2))
N=$WANT
if ((N > cap)); then
  echo "note: RLIMIT_NOFILE hard limit is $hard here (2 descriptors per stream): holding $cap streams, not $WANT"
  N=$cap
fi
W=$(mktemp -d -t kvgate-sse-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$W"; }
trap cleanup EXIT

# The engine: every stream runs at once (batch bound and KV blocks above N), a token
# every few wall seconds (--time-scale stretches the simulated step time).
"$BIN" engine --port 0 --model s --time-scale "${TIME_SCALE:-200}" --max-num-seqs $((N + 100)) \
  --num-gpu-blocks $((N * 4 + 1000)) --max-num-batched-tokens $((N * 16)) >"$W/engine.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do grep -q 'listening on http://' "$W/engine.log" && break; sleep 0.1; done
ENGINE=$(grep -o 'http://[0-9.:]*' "$W/engine.log" | head -1)

cat >"$W/gateway.yaml" <<YAML
listeners: [{address: 127.0.0.1, port: 0}]
threads: 1
timeouts: {stream_ms: 3600000, idle_ms: 3600000, header_ms: 60000}
pools:
  sse:
    router: {policy: round-robin}
    endpoints: [$ENGINE]
models:
  - {name: s, pool: sse}
YAML
"$BIN" serve "$W/gateway.yaml" >"$W/gateway.log" 2>&1 &
GWPID=$!
pids+=($GWPID)
for _ in $(seq 200); do grep -q 'listening on http://' "$W/gateway.log" && break; sleep 0.1; done
GW=$(grep -o 'http://[0-9.:]*' "$W/gateway.log" | head -1)
curl -fs -o /dev/null "$GW/ready"

cat >"$W/client.py" <<'PY'
import asyncio, sys, time
host, port = sys.argv[1].removeprefix("http://").rsplit(":", 1)
n, hold, gw_pid = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
body = b'{"model":"s","messages":[{"role":"user","content":"hold this stream open"}],"max_tokens":20000,"stream":true}'
req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
       b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

def rss():
    for line in open(f"/proc/{gw_pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024

started = 0
events = 0
failed = 0

async def stream(first):
    global started, events, failed
    try:
        r, w = await asyncio.open_connection(host, int(port))
        w.write(req)
        head = await r.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(head[:40])
        await r.readuntil(b"data: ")  # the first event: the stream flows end to end
        started += 1
        first.set_result(None)
        while True:  # keep reading, as a client would
            chunk = await r.read(65536)
            if not chunk:
                break
            events += chunk.count(b"data: ")
    except Exception as e:
        failed += 1
        if not first.done():
            first.set_exception(e)

async def main():
    loop = asyncio.get_running_loop()
    base = rss()
    print(f"idle gateway RSS {base / 2**20:.1f} MiB")
    tasks = []
    steps = sorted({s for s in (1000, 2500, 5000, 7500, n) if s <= n})
    opened = 0
    for step in steps:
        firsts = []
        while opened < step:
            batch = min(500, step - opened)
            fs = [loop.create_future() for _ in range(batch)]
            tasks += [asyncio.create_task(stream(f)) for f in fs]
            await asyncio.gather(*fs, return_exceptions=True)
            opened += batch
        await asyncio.sleep(hold)
        m = rss()
        print(f"{started:6d} streams held ({failed} failed): gateway RSS {m / 2**20:7.1f} MiB, "
              f"{(m - base) / max(started, 1) / 1024:5.1f} KiB per stream over idle")
    print(f"events read while holding: {events}")
    for t in tasks:
        t.cancel()

asyncio.run(main())
PY
echo "== memory per held SSE stream: $N streams via kvgate serve (threads: 1), engine at $ENGINE"
python3 "$W/client.py" "$GW" "$N" "$HOLD" "$GWPID"
