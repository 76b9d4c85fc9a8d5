#!/usr/bin/env bash
# kvgate serve vs nginx (Debian's nginx-light) as plain reverse proxies to the same
# upstream, on loopback, driven by wrk in the same run:
#   1. requests/s for small non-streaming chat requests (kvgate: round-robin policy);
#   2. p50 latency at one connection: direct to the upstream, via nginx, via kvgate;
#   3. gateway memory per held SSE stream (RSS growth / streams held).
# The upstream is an nginx answering a fixed small chat.completion JSON (so the proxies,
# not an engine, are what is measured); the SSE holder is a Python asyncio upstream.
# Usage: bench/gateway_vs_nginx.bench.sh [DURATION_S=10] [STREAMS=2000]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
DUR=${1:-10}
STREAMS=${2:-2000}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
ulimit -n 65536 2>/dev/null || true
W=$(mktemp -d -t kvgate-bench.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
UP=$(free_port); NG=$(free_port); GW=$(free_port); SSE=$(free_port)

BODY='{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}'
cat >"$W/nginx.conf" <<NGINX
worker_processes 1;
pid $W/nginx.pid;
error_log $W/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $W/body; proxy_temp_path $W/proxy;
  fastcgi_temp_path $W/fcgi; uwsgi_temp_path $W/uwsgi; scgi_temp_path $W/scgi;
  upstream engine { server 127.0.0.1:$UP; keepalive 256; }
  server {  # the upstream: a fixed small answer
    listen 127.0.0.1:$UP;
    location / { default_type application/json; return 200 '$BODY'; }
  }
  server {  # nginx as a plain reverse proxy
    listen 127.0.0.1:$NG;
    location / { proxy_pass http://engine; proxy_http_version 1.1;
                 proxy_set_header Connection ""; proxy_buffering off; }
  }
}
NGINX
nginx -c "$W/nginx.conf" -p "$W" -g 'daemon off;' &
pids+=($!)

cat >"$W/gateway.yaml" <<YAML
listeners: [{address: 127.0.0.1, port: $GW}]
threads: 1
pools:
  main:
    router: {policy: round-robin}
    endpoints: [http://127.0.0.1:$UP]
  sse:
    router: {policy: round-robin}
    endpoints: [http://127.0.0.1:$SSE]
models:
  - {name: m, pool: main}
  - {name: s, pool: sse}
YAML
"$BIN" serve "$W/gateway.yaml" >"$W/gateway.log" 2>&1 &
GWPID=$!
pids+=($GWPID)
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$GW/ready" && curl -fs -o /dev/null "http://127.0.0.1:$UP/" && break; sleep 0.1; done

cat >"$W/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
LUA

rps() { wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s "$W/post.lua" "$1" | awk '/Requests\/sec/ {print $2}'; }
p50() { wrk -t1 -c1 -d"${DUR}s" --latency -s "$W/post.lua" "$1" | awk '$1=="50%" {print $2}'; }

echo "== requests/s, small non-streaming chat requests, ${CONNS} connections, ${DUR}s each"
for round in 1 2 3; do
  n=$(rps "http://127.0.0.1:$NG/v1/chat/completions")
  k=$(rps "http://127.0.0.1:$GW/v1/chat/completions")
  echo "round $round: nginx $n req/s   kvgate $k req/s   ratio kvgate/nginx $(python3 -c "print(round($k/$n,3))")"
done

echo "== p50 latency at 1 connection (wrk --latency)"
for round in 1 2 3; do
  echo "round $round: direct $(p50 "http://127.0.0.1:$UP/v1/chat/completions")   nginx $(p50 "http://127.0.0.1:$NG/v1/chat/completions")   kvgate $(p50 "http://127.0.0.1:$GW/v1/chat/completions")"
done

echo "== memory per held SSE stream ($STREAMS streams)"
cat >"$W/sse.py" <<'PY'
import asyncio, os, sys, time
mode, port = sys.argv[1], int(sys.argv[2])
async def upstream(reader, writer):
    await reader.readuntil(b"\r\n\r\n")  # head; body is small and ignored
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    ev = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
    writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
    await writer.drain()
    await asyncio.sleep(3600)
async def serve():
    srv = await asyncio.start_server(upstream, "127.0.0.1", port, backlog=4096)
    async with srv: await srv.serve_forever()
async def clients(n, gw_pid):
    body = b'{"model":"s","messages":[{"role":"user","content":"hold"}],"stream":true}'
    req = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    def rss():
        for line in open(f"/proc/{gw_pid}/status"):
            if line.startswith("VmRSS:"): return int(line.split()[1]) * 1024
    before = rss()
    conns = []
    for i in range(n):
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(req)
        conns.append((r, w))
    got = 0
    for r, w in conns:
        data = await r.readuntil(b"\n\n")
        got += b"data:" in data
    await asyncio.sleep(1)
    after = rss()
    print(f"held {got}/{n} streams: gateway RSS {before/1e6:.1f} MB -> {after/1e6:.1f} MB, {(after-before)/n/1024:.1f} KiB per stream")
if mode == "up": asyncio.run(serve())
else: asyncio.run(clients(int(sys.argv[3]), int(sys.argv[4])))
PY
python3 "$W/sse.py" up "$SSE" &
pids+=($!)
sleep 0.5
python3 "$W/sse.py" client "$GW" "$STREAMS" "$GWPID"
