#!/usr/bin/env bash
# Soak: `kvgate serve` under mixed streaming traffic with endpoint churn for a given time,
# reporting every minute the gateway's RSS, open descriptors and latency percentiles.
# Flat RSS and descriptors over the run is the target (docs/reliability.md, "Soak").
#
# What runs (all real processes on loopback):
#   - ENGINES `kvgate engine`s (--time-scale TIME_SCALE, 0.2: a token every ~5-10 ms);
#   - one `kvgate serve` (threads: 2) with a loopback admin API, pool `main` over them,
#     stream migration on when the binary supports it (MIGRATION=0 turns it off);
#   - an open-loop client at RATE requests/s: 70% streamed chats (16-256 tokens, a
#     twentieth of them left by their client half-way), 30% whole completions, prompts
#     sharing a few long prefixes (so the router's prefix index fills and churns);
#   - churn every CHURN_S seconds, alternating: an engine drained through the admin API
#     (DELETE, then SIGTERM) and a replacement added (POST); an engine SIGKILLed with
#     streams in flight, then removed and replaced.
# Every minute one line: minute, RSS (MiB), open fds, requests ok / failed / cancelled
# in that minute, the gateway's own routing time p50/p99 (kvgate_routing_decision_seconds,
# microseconds), TTFT p50/p99 from the gateway's histogram, and the clients' TTFT and
# end-to-end p50/p99 (measured per request). At the end: OUT/soak.csv, OUT/soak.svg.
#
# Usage: bench/soak.sh [MINUTES=30] [OUT=bench-out/soak]
#   KVGATE_BIN (default build/release/kvgate, else build/asan/kvgate), RATE=10,
#   ENGINES=3, CHURN_S=30, MIGRATION=1, TIME_SCALE=0.2. Under ASan, ASAN_OPTIONS keeps the quarantine
#   small so RSS means the program's memory, not the sanitizer's.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${1:-30}
OUT=${2:-bench-out/soak}
BIN=${KVGATE_BIN:-}
if [[ -z $BIN ]]; then
  BIN=build/release/kvgate
  [[ -x $BIN ]] || BIN=build/asan/kvgate
fi
[[ -x $BIN ]] || { echo "soak: no kvgate binary (make release or make asan)" >&2; exit 1; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=16:detect_leaks=1:malloc_context_size=5}
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec python3 - "$BIN" "$MINUTES" "$OUT" "${RATE:-10}" "${ENGINES:-3}" "${CHURN_S:-30}" \
  "${MIGRATION:-1}" "${TIME_SCALE:-0.2}" <<'PY'
import asyncio, json, os, random, re, signal, subprocess, sys, tempfile, time

BIN, MINUTES, OUT = sys.argv[1], float(sys.argv[2]), sys.argv[3]
RATE, ENGINES, CHURN_S, MIGRATION = float(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7] == "1"
TIME_SCALE = sys.argv[8]
WORK = tempfile.mkdtemp(prefix="kvgate-soak.")
rng = random.Random(7)
procs = []

def spawn(args, log):
    p = subprocess.Popen([BIN] + args, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                         start_new_session=True)
    procs.append(p)
    return p

def wait_line(log, pattern, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        m = re.search(pattern, open(log).read())
        if m:
            return m.group(1)
        time.sleep(0.05)
    raise RuntimeError(f"{log}: no {pattern!r}")

engine_seq = 0
def start_engine():
    global engine_seq
    engine_seq += 1
    log = f"{WORK}/engine{engine_seq}.log"
    p = spawn(["engine", "--port", "0", "--model", "sim", "--time-scale", TIME_SCALE,
               "--seed", str(engine_seq)], log)
    url = wait_line(log, r"listening on (http://[0-9.:]+)")
    return {"proc": p, "url": url}

engines = [start_engine() for _ in range(ENGINES)]
yaml = f"""listeners: [{{address: 127.0.0.1, port: 0}}]
admin: {{address: 127.0.0.1, port: 0}}
threads: 2
timeouts: {{header_ms: 10000, connect_ms: 1000, upstream_header_ms: 10000, stream_ms: 600000, drain_ms: 5000}}
pools:
  main:
    block_size: 16
    scrape_interval_ms: 500
    router: {{policy: kv-cost, overlap: approx}}
{"    migration: {max_migrations: 2}" if MIGRATION else ""}
    endpoints: [{", ".join(e["url"] for e in engines)}]
models:
  - {{name: sim, pool: main}}
"""
open(f"{WORK}/gateway.yaml", "w").write(yaml)
if MIGRATION and subprocess.run([BIN, "serve", "--check", f"{WORK}/gateway.yaml"],
                                capture_output=True).returncode != 0:
    MIGRATION = False  # a build without stream migration
    open(f"{WORK}/gateway.yaml", "w").write(yaml.replace("    migration: {max_migrations: 2}\n", ""))
gw = spawn(["serve", f"{WORK}/gateway.yaml"], f"{WORK}/gateway.log")
GW = wait_line(f"{WORK}/gateway.log", r"listening on (http://[0-9.:]+)")
ADMIN = wait_line(f"{WORK}/gateway.log", r"admin API on (http://[0-9.:]+)")
GH, GP = GW.removeprefix("http://").rsplit(":", 1)

async def http(method, base, path, body=b"", read_all=True):
    host, port = base.removeprefix("http://").rsplit(":", 1)
    r, w = await asyncio.open_connection(host, int(port))
    w.write(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    await w.drain()
    data = await r.read()
    w.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]) if head else 0, rest

# --- traffic -------------------------------------------------------------------------
prefixes = [" ".join(f"sys{k}w{i}" for i in range(rng.randint(200, 600))) for k in range(6)]
stats = {"ok": 0, "failed": 0, "cancelled": 0, "ttft": [], "e2e": []}

async def one_request(i):
    stream = rng.random() < 0.7
    max_tokens = rng.randint(16, 256)
    prompt = rng.choice(prefixes) + f" question {i} " + " ".join(f"q{i}x{j}" for j in range(rng.randint(5, 60)))
    if stream:
        body = {"model": "sim", "messages": [{"role": "user", "content": prompt}],
                "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}}
        path = "/v1/chat/completions"
    else:
        body = {"model": "sim", "prompt": prompt, "max_tokens": max_tokens}
        path = "/v1/completions"
    leave_after = rng.randint(2, max_tokens) if stream and rng.random() < 0.05 else None
    raw = json.dumps(body).encode()
    t0 = time.monotonic()
    try:
        r, w = await asyncio.open_connection(GH, int(GP))
        w.write(f"POST {path} HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(raw)}\r\nConnection: close\r\n\r\n".encode() + raw)
        await w.drain()
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 60)
        status = int(head.split()[1])
        if not stream:
            data = await asyncio.wait_for(r.read(), 120)
            w.close()
            ok = status == 200 and b'"usage"' in data
            stats["ttft"].append(time.monotonic() - t0)
        else:
            tokens, first, ok, buf = 0, None, False, b""
            while True:
                chunk = await asyncio.wait_for(r.read(65536), 60)
                if not chunk:
                    break
                buf += chunk
                n = buf.count(b'"content":"') + buf.count(b'"text":"')
                if n and first is None:
                    first = time.monotonic() - t0
                tokens = n
                if leave_after and tokens >= leave_after:
                    w.transport.abort()
                    stats["cancelled"] += 1
                    return
                if b"data: [DONE]" in buf:
                    ok = status == 200 and b'"error"' not in buf
                    break
                if len(buf) > 1 << 16:
                    keep = buf.rfind(b"\n\n")
                    buf = buf[keep:] if keep > 0 else buf
            w.close()
            if first is not None:
                stats["ttft"].append(first)
        stats["ok" if ok else "failed"] += 1
        if ok:
            stats["e2e"].append(time.monotonic() - t0)
    except Exception:
        stats["failed"] += 1

async def traffic(end):
    i, tasks = 0, set()
    next_at = time.monotonic()
    while time.monotonic() < end:
        next_at += rng.expovariate(RATE)
        await asyncio.sleep(max(0, next_at - time.monotonic()))
        t = asyncio.create_task(one_request(i))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
        i += 1
    await asyncio.gather(*tasks, return_exceptions=True)

# --- churn ---------------------------------------------------------------------------
churn_log = []
async def churn(end):
    k = 0
    while time.monotonic() + CHURN_S < end:
        await asyncio.sleep(CHURN_S)
        victim = engines.pop(rng.randrange(len(engines)))
        _, listing = await http("GET", ADMIN, "/admin/pools/main/endpoints")
        ids = [e["id"] for e in json.loads(listing)["endpoints"] if e["url"] == victim["url"]]
        if k % 2 == 0:  # graceful: drain through the admin API, then stop
            for id_ in ids:
                await http("DELETE", ADMIN, f"/admin/pools/main/endpoints/{id_}?timeout_ms=20000")
            victim["proc"].terminate()
            kind = "drain"
        else:  # crash with streams in flight, then take it out
            victim["proc"].kill()
            for id_ in ids:
                await http("DELETE", ADMIN, f"/admin/pools/main/endpoints/{id_}?timeout_ms=1000")
            kind = "sigkill"
        victim["proc"].wait()
        fresh = await asyncio.get_running_loop().run_in_executor(None, start_engine)
        status, _ = await http("POST", ADMIN, "/admin/pools/main/endpoints",
                               json.dumps({"url": fresh["url"]}).encode())
        engines.append(fresh)
        churn_log.append((time.monotonic(), kind, status))
        k += 1

# --- sampling ------------------------------------------------------------------------
def parse_hist(text, name):
    buckets = {}
    for m in re.finditer(rf'^{name}_bucket\{{[^}}]*le="([^"]+)"[^}}]*\}} (\S+)$', text, re.M):
        le = float("inf") if m.group(1) == "+Inf" else float(m.group(1))
        buckets[le] = buckets.get(le, 0) + float(m.group(2))
    return sorted(buckets.items())

def quantile(prev, cur, q):
    pairs = [(le, c - dict(prev).get(le, 0)) for le, c in cur]
    total = pairs[-1][1] if pairs else 0
    if total <= 0:
        return float("nan")
    lo_le, lo_c = 0.0, 0.0
    for le, c in pairs:
        if c >= q * total:
            if le == float("inf"):
                return lo_le
            return lo_le + (le - lo_le) * ((q * total - lo_c) / max(c - lo_c, 1e-9))
        lo_le, lo_c = le, c
    return lo_le

def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]

def rss_fds(pid):
    rss = 0
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))

rows = []
async def sampler(end):
    _, m = await http("GET", GW, "/metrics")
    prev = {n: parse_hist(m.decode(), n) for n in ("kvgate_routing_decision_seconds", "kvgate_time_to_first_token_seconds")}
    minute = 0
    header = "minute rss_mib fds ok failed cancelled route_p50_us route_p99_us ttft_p50_ms ttft_p99_ms client_ttft_p50_ms client_ttft_p99_ms client_e2e_p50_s client_e2e_p99_s"
    print(header, flush=True)
    while time.monotonic() < end - 1:
        await asyncio.sleep(min(60, max(0, end - time.monotonic())))
        minute += 1
        _, m = await http("GET", GW, "/metrics")
        cur = {n: parse_hist(m.decode(), n) for n in prev}
        rss, fds = rss_fds(gw.pid)
        r = prev["kvgate_routing_decision_seconds"], cur["kvgate_routing_decision_seconds"]
        t = prev["kvgate_time_to_first_token_seconds"], cur["kvgate_time_to_first_token_seconds"]
        row = [minute, round(rss, 1), fds, stats["ok"], stats["failed"], stats["cancelled"],
               round(quantile(*r, 0.5) * 1e6, 1), round(quantile(*r, 0.99) * 1e6, 1),
               round(quantile(*t, 0.5) * 1e3, 1), round(quantile(*t, 0.99) * 1e3, 1),
               round(pct(stats["ttft"], 0.5) * 1e3, 1), round(pct(stats["ttft"], 0.99) * 1e3, 1),
               round(pct(stats["e2e"], 0.5), 3), round(pct(stats["e2e"], 0.99), 3)]
        rows.append(row)
        print(" ".join(str(x) for x in row), flush=True)
        prev = cur
        for k in ("ok", "failed", "cancelled"):
            stats[k] = 0
        stats["ttft"], stats["e2e"] = [], []
    with open(f"{OUT}/soak.csv", "w") as f:
        f.write(header.replace(" ", ",") + "\n")
        for row in rows:
            f.write(",".join(str(x) for x in row) + "\n")

def svg(rows, path):
    W, H, P = 760, 220, 50
    def chart(y0, series, unit, title):
        xs = [r[0] for r in rows]
        vals = [v for _, col, _ in series for v in (r[col] for r in rows) if v == v]
        top = max(vals + [1]) * 1.15
        out = [f'<text x="{P}" y="{y0 - 8}" font-size="13">{title}</text>',
               f'<rect x="{P}" y="{y0}" width="{W - 2 * P}" height="{H - 60}" fill="none" stroke="#999"/>']
        for frac in (0, 0.5, 1):
            y = y0 + (H - 60) * (1 - frac)
            out.append(f'<text x="{P - 6}" y="{y + 4}" font-size="10" text-anchor="end">{top * frac:.0f}</text>')
        for name, col, color in series:
            pts = " ".join(f"{P + (W - 2 * P) * (x - 1) / max(1, xs[-1] - 1):.1f},"
                           f"{y0 + (H - 60) * (1 - (r[col] if r[col] == r[col] else 0) / top):.1f}"
                           for x, r in zip(xs, rows))
            out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
        legend = "  ".join(f'<tspan fill="{c}">{n}</tspan>' for n, _, c in series)
        out.append(f'<text x="{W - P}" y="{y0 - 8}" font-size="11" text-anchor="end">{legend} ({unit})</text>')
        out.append(f'<text x="{W // 2}" y="{y0 + H - 42}" font-size="10" text-anchor="middle">minute</text>')
        return out
    parts = chart(30, [("RSS", 1, "#c33"), ("open fds", 2, "#36c")], "MiB / count", "kvgate serve: memory and descriptors")
    parts += chart(30 + H, [("TTFT p50", 8, "#393"), ("TTFT p99", 9, "#c63"), ("routing p99 us", 7, "#639")], "ms / us", "latency (gateway histograms)")
    open(path, "w").write(f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{2 * H + 40}" font-family="sans-serif">' + "".join(parts) + "</svg>\n")

async def main():
    end = time.monotonic() + MINUTES * 60
    print(f"soak: {BIN}, {MINUTES:g} min, {RATE:g} req/s, {ENGINES} engines, churn every {CHURN_S:g} s, "
          f"migration {'on' if MIGRATION else 'off'}; gateway pid {gw.pid}", flush=True)
    await asyncio.gather(traffic(end), churn(end), sampler(end))

try:
    asyncio.run(main())
    if rows:
        svg(rows, f"{OUT}/soak.svg")
        first, last = rows[0], rows[-1]
        print(f"soak: RSS {first[1]} -> {last[1]} MiB (max {max(r[1] for r in rows)}), fds {first[2]} -> {last[2]} "
              f"(max {max(r[2] for r in rows)}); churn events {len(churn_log)}; {OUT}/soak.csv, {OUT}/soak.svg", flush=True)
finally:
    gw.send_signal(signal.SIGTERM)
    try:
        gw.wait(30)
    except subprocess.TimeoutExpired:
        gw.kill()
    print(f"soak: gateway exit status {gw.returncode}", flush=True)
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    lsan = [l for l in open(f"{WORK}/gateway.log") if "LeakSanitizer" in l or "ERROR: AddressSanitizer" in l]
    print("soak: sanitizer reports: " + (lsan[0].strip() if lsan else "none"), flush=True)
    os.system(f"cp {WORK}/gateway.log {OUT}/gateway.log; rm -rf {WORK}")
PY
