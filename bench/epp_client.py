#!/usr/bin/python3
"""The client of bench/epp.bench.sh (read its header first): times the Endpoint Picker's
ext_proc exchange (request headers and body -> the pick) against `kvgate epp`, the same
routing through `kvgate serve`'s admin route view, and a gRPC health Check as the
client's own floor, at each concurrency; reads each server's CPU time from /proc around
each run. Prints a markdown table.

Usage (Debian's python3 with python3-grpcio; the messages generated from proto/ in
KVGATE_PROTO_PY):
  epp_client.py EPP_ADDR EPP_PID ADMIN_URL SERVE_PID REQUESTS CONCURRENCY[,...]
"""

import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.environ.get("KVGATE_PROTO_PY", "build/release/generated/proto"))

import grpc  # noqa: E402
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb  # noqa: E402

PROCESS = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
DEST = "x-gateway-destination-endpoint"
TICK = os.sysconf("SC_CLK_TCK")

epp_addr, epp_pid, admin_url, serve_pid = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
requests = int(sys.argv[5])
levels = [int(c) for c in sys.argv[6].split(",")]

rng = random.Random(7)
WORDS = ("the of and to in is that for it as with was on be by this are from at or an "
         "request model cache server token prompt router engine latency memory block prefix "
         "decode prefill queue batch load pool replica gateway policy score cost stream event").split()
SYSTEM = " ".join(rng.choice(WORDS) for _ in range(300))


def body(i):
    """A chat request: a shared system prompt (~300 words) and a user message of its own."""
    user = " ".join(rng.choice(WORDS) for _ in range(60))
    return json.dumps({"model": "sim", "max_tokens": 16, "messages": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{i} {user}"}]}).encode()


def headers_message(pairs, eos=False, response=False):
    r = pb.ProcessingRequest()
    h = r.response_headers if response else r.request_headers
    for k, v in pairs:
        x = h.headers.headers.add()
        x.key = k
        x.raw_value = v.encode()
    h.end_of_stream = eos
    return r


def exchange_messages(data):
    """Request headers, the whole body (end of stream), then the answer's headers with
    end of stream (a 200 without a body), so the pick is settled and the stream ends. The
    EPP reads them in order: the response headers wait in the stream until the pick."""
    h = headers_message([(":method", "POST"), (":path", "/v1/chat/completions"),
                         (":authority", "bench"), ("content-type", "application/json")])
    b = pb.ProcessingRequest()
    b.request_body.body = data
    b.request_body.end_of_stream = True
    r = headers_message([(":status", "200"), ("content-type", "application/json")],
                        eos=True, response=True)
    return [h, b, r]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def run(concurrency, n, one, settle=None):
    """`one(state, i)` n times over `concurrency` threads (`state`: the worker's own);
    returns the times in us. `settle(state)`, when given, follows each call, untimed."""
    times = [[] for _ in range(concurrency)]
    errors = []

    def worker(w):
        try:
            state = {}
            for i in range(w, n, concurrency):
                t0 = time.perf_counter()
                one(state, i)
                times[w].append((time.perf_counter() - t0) * 1e6)
                if settle is not None:
                    settle(state)
        except Exception as e:  # reported below: a failed run is no figure
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise SystemExit(f"epp bench: {errors[0]}")
    return [t for ts in times for t in ts]


channel = grpc.insecure_channel(epp_addr)
grpc.channel_ready_future(channel).result(timeout=30)
process = channel.stream_stream(PROCESS, request_serializer=lambda m: m.SerializeToString(),
                                response_deserializer=pb.ProcessingResponse.FromString)
health = channel.unary_unary("/grpc.health.v1.Health/Check",
                             request_serializer=lambda n: b"\x0a" + bytes([len(n)]) + n.encode(),
                             response_deserializer=lambda b: b)
bodies = [body(i) for i in range(requests + 200)]
picked = {}


def epp_one(state, i):
    responses = process(iter(exchange_messages(bodies[i])), timeout=30)
    first = next(responses)
    if not first.HasField("request_headers"):
        raise RuntimeError(f"no pick: {first}")
    next(responses)  # the body as it goes upstream: the request path is answered
    # (the time stops here in run(): the rest is the settling, outside the figure)
    for o in first.request_headers.response.header_mutation.set_headers:
        if o.header.key == DEST:
            picked[o.header.raw_value.decode()] = picked.get(o.header.raw_value.decode(), 0) + 1
    state["rest"] = responses


def epp_full(concurrency, n, offset):
    """Exchanges timed to the pick; each stream is then drained (settled) untimed."""
    def drain(state):
        for _ in state["rest"]:
            pass

    return run(concurrency, n, lambda state, i: epp_one(state, offset + i), drain)


def health_one(state, i):
    raw = health("readiness", timeout=10)
    if raw[:2] != b"\x08\x01":
        raise RuntimeError(f"readiness not SERVING: {raw!r}")


admin = urllib.parse.urlparse(admin_url)
view_bytes = [0]


def view_one(state, i):
    conn = state.get("conn")
    if conn is None:
        conn = state["conn"] = http.client.HTTPConnection(admin.hostname, admin.port, timeout=30)
    conn.request("POST", "/admin/pools/main/route", bodies[i], {"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200 or not json.loads(data)["decision"]["accepted"]:
        raise RuntimeError(f"route view: HTTP {r.status}: {data[:300]!r}")
    view_bytes[0] = len(data)


def idle_rate(pid, seconds=2.0):
    c0 = cpu_seconds(pid)
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / seconds


def measured(pid, fn):
    """fn()'s result, and the process's CPU seconds during it less its idle rate (scrapes)."""
    idle = idle_rate(pid)
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    out = fn()
    c1, t1 = cpu_seconds(pid), time.perf_counter()
    return out, max(0.0, (c1 - c0) - idle * (t1 - t0)), c1 - c0


# Warm-up: connections, the approximate index's first entries, both processes.
epp_full(1, 100, requests)
run(1, 100, view_one)
run(1, 50, health_one)

rows = []
for c in levels:
    ex, ex_cpu, ex_cpu_raw = measured(epp_pid, lambda: epp_full(c, requests, 0))
    fl = run(c, requests, health_one)
    vw, vw_cpu, vw_cpu_raw = measured(serve_pid, lambda: run(c, requests, view_one))
    rows.append((c, ex, fl, vw, ex_cpu / requests * 1e6, ex_cpu_raw / requests * 1e6,
                 vw_cpu / requests * 1e6))

print()
print(f"{requests} requests per row; times in microseconds as the Python client sees them; "
      f"CPU: the server process's user+system time per request, less its idle rate "
      f"(scrapes) over the run (raw in parentheses; /proc ticks of {1e6 / TICK:.0f} us)")
print()
print("| streams | EPP exchange p50 | p99 | gRPC floor p50 | p99 | serve route view p50 | p99 "
      "| EPP CPU us/request | serve CPU us/request (view) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for c, ex, fl, vw, cpu, cpu_raw, vcpu in rows:
    print(f"| {c} | {pct(ex, 0.5):.0f} | {pct(ex, 0.99):.0f} | {pct(fl, 0.5):.0f} | "
          f"{pct(fl, 0.99):.0f} | {pct(vw, 0.5):.0f} | {pct(vw, 0.99):.0f} | {cpu:.0f} ({cpu_raw:.0f}) "
          f"| {vcpu:.0f} |")
print()
print(f"request body {len(bodies[0])} bytes; EPP picks spread over {len(picked)} endpoint "
      f"lists; the route view answers {view_bytes[0]} bytes (every endpoint's scores)")
