#!/usr/bin/env bash
# Replica sync's CPU budget (issue #39, docs/replicas.md "Sync's CPU budget"): the CPU a
# `kvgate serve` replica spends per proxied request with sync on, against one replica
# without sync, with real processes on loopback at a fixed request rate per replica.
#
# What runs (fresh processes every round, a fresh stream prefix per round):
#   - a redis-server, ENGINES `kvgate engine`s (--model sim, --time-scale TIME_SCALE);
#   - REPLICAS `kvgate serve` replicas (threads: THREADS, kv-cost on the approximate
#     prefix index, block size 16, pseudo-token routing keys), first without a `cluster`
#     section, then with `cluster: {sync: on}` on the Redis (flush_ms FLUSH_MS,
#     flush_max_ms FLUSH_MAX_MS, flush_batch FLUSH_BATCH, poll_ms POLL_MS);
#   - one `kvgate bench` per loaded replica, open loop at exactly RATE requests/s (a
#     generated Mooncake trace with constant spacing), DURATION_S seconds, after a
#     WARMUP_S warm-up. Prompts: a shared prefix of SHARED_BLOCKS x 256 tokens (one of
#     GROUPS, the same content on every replica, drawn independently per replica) plus
#     256 tokens of their own, OUTPUT_TOKENS tokens out (streamed, as kvgate bench does).
# Cases, per round:
#   A  one replica loaded, no sync (the other replicas of the no-sync fleet idle);
#   B  REPLICAS replicas loaded, no sync (same machine load as D, no sync: a control);
#   C  sync on, one replica loaded, the others only apply its events (after an idle
#      window of IDLE_S seconds that measures sync's fixed cost: heartbeats, polls);
#   D  sync on, REPLICAS replicas loaded: the issue's case.
# CPU: each process's CPU time over the window (the sum of /proc/PID/task/*/schedstat,
# nanoseconds; /proc/PID/stat utime+stime, 10 ms ticks, as a cross-check), divided by the
# requests it proxied in the window (kvgate_requests_total from its /metrics). Latency:
# TTFT and end-to-end p50/p99 from kvgate bench's requests.csv, all loaded replicas' pooled.
# Medians over the rounds. The model's terms (docs/replicas.md):
#   base    = A's CPU per request;
#   publish = C's loaded replica minus A (Outbox, encode, XADD, reading back and skipping
#             its own entries of the shared stream, the fixed cost spread over RATE);
#   apply   = C's idle peers' CPU over the window, less their idle rate, per request of the
#             loaded replica (XREAD reply parsing, decode, PeerSync::apply);
#   cpu(N)  = base + publish + (N - 1) x apply, checked against D at N = REPLICAS.
#
# Usage: bench/replica_sync_cpu.bench.sh [DURATION_S=20] [ROUNDS=3]
# Env: KVGATE_BIN (build/release/kvgate), RATE (100, per replica), REPLICAS (4), ENGINES (4),
#   TIME_SCALE (0.1), OUTPUT_TOKENS (4), GROUPS (32), SHARED_BLOCKS (6), WARMUP_S (3),
#   IDLE_S (5), THREADS (1), FLUSH_MS (5), FLUSH_MAX_MS (25; set to FLUSH_MS, every check
#   publishes: the flush before the flush rule), FLUSH_BATCH (8), POLL_MS (5), SYNC_MODE
#   (cycle, kvgate's default: one pipelined publish-and-read per flush_max_ms tick; blocking),
#   CYCLE_IDLE_MAX_MS (cycle mode's longest idle wait; default: kvgate's), CYCLE_REPLIES
#   (cycle mode's `cycle_replies`: deferred or prompt; default: kvgate's), GATEWAY_NICE
#   (0; -10 as root keeps the load generators and engines from preempting the gateways),
#   OUT (a directory to keep every run's requests.csv, configs and logs; default: a
#   scratch directory removed at exit).
# Needs redis-server, python3, and a release kvgate (build it first; nothing is built here).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
[[ -x $BIN ]] || { echo "replica_sync_cpu: $BIN missing (build the release kvgate)" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "replica_sync_cpu: redis-server missing (apt-get install redis-server)" >&2; exit 2; }
ulimit -n 65536 2>/dev/null || true
exec python3 - "$BIN" "${1:-20}" "${2:-3}" <<'PY'
import atexit, json, os, random, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.request

BIN, DUR, ROUNDS = os.path.abspath(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
env = os.environ.get
RATE = float(env("RATE", "100"))
REPLICAS = int(env("REPLICAS", "4"))
ENGINES = int(env("ENGINES", "4"))
TIME_SCALE = env("TIME_SCALE", "0.1")
OUTPUT_TOKENS = int(env("OUTPUT_TOKENS", "4"))
GROUPS = int(env("GROUPS", "32"))
SHARED_BLOCKS = int(env("SHARED_BLOCKS", "6"))
WARMUP_S = float(env("WARMUP_S", "3"))
IDLE_S = float(env("IDLE_S", "5"))
THREADS = int(env("THREADS", "1"))
FLUSH_MS, POLL_MS = int(env("FLUSH_MS", "5")), int(env("POLL_MS", "5"))
FLUSH_MAX_MS = int(env("FLUSH_MAX_MS", str(max(25, FLUSH_MS))))
FLUSH_BATCH = int(env("FLUSH_BATCH", "8"))
SYNC_MODE = env("SYNC_MODE", "cycle")
CYCLE_IDLE_MAX_MS = env("CYCLE_IDLE_MAX_MS", "")
CYCLE_REPLIES = env("CYCLE_REPLIES", "")
NICE = int(env("GATEWAY_NICE", "0"))
KEEP = env("OUT", "")
W = os.path.abspath(KEEP) if KEEP else tempfile.mkdtemp(prefix="kvgate-syncpu.")
os.makedirs(W, exist_ok=True)
BLOCK_TOKENS = 256
procs = []  # every process started here, stopped at exit


def cleanup():
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
    if not KEEP:
        shutil.rmtree(W, ignore_errors=True)


atexit.register(cleanup)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
signal.signal(signal.SIGINT, lambda *_: sys.exit(1))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def spawn(args, log, nice=0):
    pre = ["nice", "-n", str(nice)] if nice else []
    p = subprocess.Popen(pre + args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def stop_fleet(fleet):
    """SIGTERM to every replica at once, then wait (a replica drains before it exits)."""
    for g in fleet:
        if g["proc"].poll() is None:
            g["proc"].terminate()
    for g in fleet:
        try:
            g["proc"].wait(timeout=15)
        except subprocess.TimeoutExpired:
            g["proc"].kill()
            g["proc"].wait()
        procs.remove(g["proc"])


def get(url, timeout=2):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_ok(url, what, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if get(url)[0] == 200:
                return
        except Exception:
            pass
        time.sleep(0.1)
    sys.exit(f"replica_sync_cpu: {what} not ready at {url} (logs in {W}; OUT=DIR keeps them)")


HZ = os.sysconf("SC_CLK_TCK")


def cpu(pid):
    """(schedstat ns summed over the threads, stat utime+stime in ns) of process pid."""
    sched = 0
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                sched += int(f.read().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        sched = -1
    with open(f"/proc/{pid}/stat") as f:
        s = f.read()
    rest = s[s.rfind(")") + 2:].split()
    ticks = int(rest[11]) + int(rest[12])  # fields 14 and 15: utime, stime
    return sched, ticks * 1_000_000_000 // HZ


def metrics(port):
    """Sum of each metric family over its labels, from the replica's /metrics."""
    out = {}
    for line in get(f"http://127.0.0.1:{port}/metrics", timeout=5)[1].splitlines():
        if not line or line[0] == "#":
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        try:
            out[name] = out.get(name, 0.0) + float(line.rsplit(" ", 1)[1])
        except ValueError:
            pass
    return out


# --- Fixed processes: Redis and the engines (the same for every round).
RP = free_port()
redis = spawn(["redis-server", "--port", str(RP), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no"], f"{W}/redis.log")
for _ in range(100):
    try:
        with socket.create_connection(("127.0.0.1", RP), timeout=1) as s:
            s.sendall(b"PING\r\n")
            if s.recv(16).startswith(b"+PONG"):
                break
    except OSError:
        pass
    time.sleep(0.1)
else:
    sys.exit(f"replica_sync_cpu: redis-server did not answer (log in {W}/redis.log)")
engines = []
for i in range(ENGINES):
    port = free_port()
    spawn([BIN, "engine", "--port", str(port), "--model", "sim", "--time-scale", TIME_SCALE,
           "--seed", str(i + 1)], f"{W}/engine{i}.log")
    engines.append(f"http://127.0.0.1:{port}")
for e in engines:
    wait_ok(f"{e}/health", "engine")


def gateway_yaml(port, replica, sync, prefix):
    y = (f"listeners: [{{address: 127.0.0.1, port: {port}}}]\nthreads: {THREADS}\n"
         "pools:\n  main:\n    block_size: 16\n    router: {policy: kv-cost, overlap: approx}\n"
         "    endpoints:\n" + "".join(f"      - {e}\n" for e in engines) +
         "models:\n  - {name: sim, pool: main}\n")
    if sync:
        y += (f"cluster:\n  redis: {{host: 127.0.0.1, port: {RP}}}\n  replica_id: gw-{replica}\n"
              f"  sync: on\n  stream_prefix: {prefix}\n  flush_ms: {FLUSH_MS}\n"
              f"  flush_max_ms: {FLUSH_MAX_MS}\n  flush_batch: {FLUSH_BATCH}\n  poll_ms: {POLL_MS}\n"
              f"  sync_mode: {SYNC_MODE}\n")
        if CYCLE_IDLE_MAX_MS:
            y += f"  cycle_idle_max_ms: {CYCLE_IDLE_MAX_MS}\n"
        if CYCLE_REPLIES:
            y += f"  cycle_replies: {CYCLE_REPLIES}\n"
    return y


def start_fleet(tag, sync, prefix):
    fleet = []
    for i in range(REPLICAS):
        port = free_port()
        path = f"{W}/{tag}-gw{i}.yaml"
        with open(path, "w") as f:
            f.write(gateway_yaml(port, i, sync, prefix))
        p = spawn([BIN, "serve", path], f"{W}/{tag}-gw{i}.log", NICE)
        fleet.append({"port": port, "proc": p, "i": i})
    for g in fleet:
        wait_ok(f"http://127.0.0.1:{g['port']}/ready", f"kvgate serve ({tag})")
    return fleet


trace_ids = [10**9]  # the prompts' own pieces: never shared


def scenario(path_stem, seconds, seed):
    """A trace at exactly RATE requests/s for `seconds`, groups drawn with `seed`."""
    rng = random.Random(seed)
    n = max(1, int(round(seconds * RATE)))
    with open(path_stem + ".jsonl", "w") as f:
        for k in range(n):
            g = rng.randrange(GROUPS)
            trace_ids[0] += 1
            ids = [g * 1000 + j for j in range(SHARED_BLOCKS)] + [trace_ids[0]]
            f.write(json.dumps({"timestamp": int(round(k * 1000 / RATE)),
                                "input_length": len(ids) * BLOCK_TOKENS,
                                "output_length": OUTPUT_TOKENS, "hash_ids": ids}) + "\n")
    # The content seed is the same everywhere: a group's prefix is the same text on
    # every replica; the order differs through `seed` above.
    with open(path_stem + ".yaml", "w") as f:
        f.write("name: replica sync cpu\nseed: 1\n"
                "cluster: {engines: 1, profile: h100-qwen2.5-7b}\ngateway: {model: sim}\n"
                "policies: [{name: random, policy: random, overlap: none}]\n"
                f"workload:\n  kind: trace\n  trace: {{path: {path_stem}.jsonl, "
                f"block_tokens: {BLOCK_TOKENS}, stage_s: {max(seconds, 1)}}}\n")
    return path_stem + ".yaml"


def load(gateways, seconds, tag, seed):
    """Runs one kvgate bench per gateway at once; returns their output directories."""
    runs = []
    for g in gateways:
        stem = f"{W}/{tag}-gw{g['i']}"
        scen = scenario(stem, seconds, seed * 100 + g["i"])
        out = stem + "-out"
        p = spawn([BIN, "bench", scen, "--url", f"http://127.0.0.1:{g['port']}", "--model", "sim",
                   "--no-progress", "--label", f"gw{g['i']}", "--out", out], stem + "-bench.log")
        runs.append((p, out, stem + "-bench.log"))
    for p, _, log in runs:
        rc = p.wait()
        procs.remove(p)
        if rc != 0:
            sys.exit(f"replica_sync_cpu: kvgate bench failed ({rc}): {open(log).read()[-2000:]}")
    return [out for _, out, _ in runs]


def measure(fleet, loaded, seconds, tag, seed):
    """Loads `loaded` (a subset of fleet) for `seconds`; per fleet replica: cpu ns (sched,
    stat) and metric deltas; plus Redis's cpu and the request latencies."""
    m0 = {g["i"]: metrics(g["port"]) for g in fleet}
    c0 = {g["i"]: cpu(g["proc"].pid) for g in fleet}
    r0 = cpu(redis.pid)
    t0 = time.monotonic()
    if loaded:
        outs = load(loaded, seconds, tag, seed)
    else:
        time.sleep(seconds)
        outs = []
    wall = time.monotonic() - t0
    c1 = {g["i"]: cpu(g["proc"].pid) for g in fleet}
    r1 = cpu(redis.pid)
    m1 = {g["i"]: metrics(g["port"]) for g in fleet}
    per = {}
    for g in fleet:
        i = g["i"]
        d = {k: m1[i].get(k, 0.0) - m0[i].get(k, 0.0) for k in m1[i]}
        sched = c1[i][0] - c0[i][0] if min(c0[i][0], c1[i][0]) >= 0 else -1
        per[i] = {"sched": sched, "stat": c1[i][1] - c0[i][1], "m": d,
                  "requests": d.get("kvgate_requests_total", 0.0), "gauges": m1[i]}
    ttft, e2e, failed = [], [], 0
    for out in outs:
        with open(f"{out}/requests.csv") as f:
            next(f)
            for row in f:
                c = row.rstrip("\n").split(",")
                if c[10] == "1" or float(c[5]) < 0 or float(c[6]) < 0:
                    failed += 1
                    continue
                ttft.append(float(c[5]))
                e2e.append(float(c[6]))
    return {"per": per, "redis": r1[0] - r0[0], "wall": wall, "ttft": ttft, "e2e": e2e,
            "failed": failed}


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3 if xs else float("nan")


def ns(per, i, key="sched"):
    """CPU ns of replica i over the window: schedstat's (stat's when asked, or when the
    kernel has no schedstat)."""
    v = per[i]["sched"]
    return v if key == "sched" and v >= 0 else per[i]["stat"]


def cpu_per_request(res, ids, key="sched"):
    cpu_ns = sum(ns(res["per"], i, key) for i in ids)
    reqs = sum(res["per"][i]["requests"] for i in ids)
    return cpu_ns / 1e3 / reqs if reqs else float("nan")


def check(res, tag, ids, sync):
    for i in ids:
        d, g = res["per"][i]["m"], res["per"][i]["gauges"]
        reqs = res["per"][i]["requests"]
        if reqs < 0.95 * RATE * DUR:
            print(f"   note: {tag} gw{i} proxied {reqs:.0f} requests, below 95% of "
                  f"{RATE * DUR:.0f} (the machine could not hold the rate: figures are suspect)")
        if sync:
            bad = {k: d.get(k, 0) for k in ("kvgate_cluster_decode_errors_total",
                                            "kvgate_cluster_gaps_total",
                                            "kvgate_cluster_unknown_endpoint_total",
                                            "kvgate_cluster_publish_failures_total",
                                            "kvgate_cluster_read_failures_total")}
            if any(bad.values()) or g.get("kvgate_cluster_redis_up", 0) != 1:
                print(f"   note: {tag} gw{i}: redis_up {g.get('kvgate_cluster_redis_up')}, {bad}")
    if res["failed"]:
        print(f"   note: {tag}: {res['failed']} request(s) failed or were rejected")


rows = {k: [] for k in ("A", "B", "C", "D", "publish", "apply", "idle", "redis_D",
                        "events_per_batch", "A_stat", "D_stat")}
lat = {k: {"ttft50": [], "ttft99": [], "e2e50": [], "e2e99": []} for k in "ABCD"}
ALL = list(range(REPLICAS))
PEERS = ALL[1:]


def note_latency(case, res):
    lat[case]["ttft50"].append(q(res["ttft"], 0.50))
    lat[case]["ttft99"].append(q(res["ttft"], 0.99))
    lat[case]["e2e50"].append(q(res["e2e"], 0.50))
    lat[case]["e2e99"].append(q(res["e2e"], 0.99))


print(f"== replica sync CPU: {REPLICAS} replicas, {RATE:g} requests/s each, {DUR:g} s windows, "
      f"{ROUNDS} round(s); {ENGINES} engines (sim, time scale {TIME_SCALE}); prompts "
      f"{(SHARED_BLOCKS + 1) * BLOCK_TOKENS} tokens ({SHARED_BLOCKS * BLOCK_TOKENS} shared, "
      f"{GROUPS} groups), {OUTPUT_TOKENS} out; threads {THREADS}, flush {FLUSH_MS} ms "
      f"(at most {FLUSH_MAX_MS} ms or {FLUSH_BATCH} requests), poll {POLL_MS} ms, "
      f"sync_mode {SYNC_MODE}" + (f" (idle wait up to {CYCLE_IDLE_MAX_MS} ms)" if CYCLE_IDLE_MAX_MS else "")
      + (f", cycle_replies {CYCLE_REPLIES}" if CYCLE_REPLIES else ""))
for rnd in range(1, ROUNDS + 1):
    # No sync: A (one replica loaded), B (all loaded).
    fleet = start_fleet(f"r{rnd}-off", False, "")
    load([fleet[0]], WARMUP_S, f"r{rnd}-off-warm1", rnd)
    a = measure(fleet, [fleet[0]], DUR, f"r{rnd}-A", rnd)
    load(fleet, WARMUP_S, f"r{rnd}-off-warm", rnd + 50)
    b = measure(fleet, fleet, DUR, f"r{rnd}-B", rnd + 10)
    stop_fleet(fleet)
    # Sync on: the idle window, C (one replica loaded), D (all loaded).
    fleet = start_fleet(f"r{rnd}-on", True, f"kvgate-syncpu-{os.getpid()}-r{rnd}")
    load(fleet, WARMUP_S, f"r{rnd}-on-warm", rnd + 50)
    time.sleep(1)  # the warm-up's last events applied
    idle = measure(fleet, [], IDLE_S, f"r{rnd}-idle", 0)
    c = measure(fleet, [fleet[0]], DUR, f"r{rnd}-C", rnd)
    d = measure(fleet, fleet, DUR, f"r{rnd}-D", rnd + 10)
    stop_fleet(fleet)
    check(a, "A", [0], False)
    check(b, "B", ALL, False)
    check(c, "C", [0], True)
    check(d, "D", ALL, True)

    # Each peer's own idle rate (ns of CPU per second) is taken off its CPU in C.
    idle_ns = {i: ns(idle["per"], i) / idle["wall"] for i in ALL}
    idle_rate = statistics.median(idle_ns.values())
    r1 = c["per"][0]["requests"]
    apply_us = (statistics.median((ns(c["per"], i) - idle_ns[i] * c["wall"]) / 1e3 / r1
                                  for i in PEERS) if PEERS and r1 else float("nan"))
    va, vb, vc, vd = (cpu_per_request(a, [0]), cpu_per_request(b, ALL), cpu_per_request(c, [0]),
                      cpu_per_request(d, ALL))
    rows["A"].append(va)
    rows["B"].append(vb)
    rows["C"].append(vc)
    rows["D"].append(vd)
    rows["A_stat"].append(cpu_per_request(a, [0], "stat"))
    rows["D_stat"].append(cpu_per_request(d, ALL, "stat"))
    rows["publish"].append(vc - va)
    rows["apply"].append(apply_us)
    rows["idle"].append(idle_rate / 1e6)  # ms of CPU per second
    d_reqs = sum(d["per"][i]["requests"] for i in ALL)
    rows["redis_D"].append(d["redis"] / 1e3 / d_reqs if d_reqs else float("nan"))
    ev = sum(d["per"][i]["m"].get("kvgate_cluster_events_applied_total", 0) for i in ALL)
    bt = sum(d["per"][i]["m"].get("kvgate_cluster_batches_applied_total", 0) for i in ALL)
    rows["events_per_batch"].append(ev / bt if bt else float("nan"))
    for case, res in (("A", a), ("B", b), ("C", c), ("D", d)):
        note_latency(case, res)
    print(f"round {rnd}: cpu us/request  A {va:.1f}  B {vb:.1f}  C {vc:.1f}  D {vd:.1f}  "
          f"(D/A {vd / va:.3f})   publish {vc - va:.1f}  apply {apply_us:.2f} per peer request  "
          f"idle sync {idle_rate / 1e6:.2f} ms/s   TTFT p50/p99 ms  A {lat['A']['ttft50'][-1]:.2f}/"
          f"{lat['A']['ttft99'][-1]:.2f}  D {lat['D']['ttft50'][-1]:.2f}/{lat['D']['ttft99'][-1]:.2f}",
          flush=True)

med = {k: statistics.median(v) for k, v in rows.items()}
ml = {c: {k: statistics.median(v) for k, v in lat[c].items()} for c in lat}
base, pub, app = med["A"], med["publish"], med["apply"]
print()
print(f"Medians of {ROUNDS} round(s); CPU from /proc/PID/task/*/schedstat "
      f"(stat's utime+stime cross-check: A {med['A_stat']:.1f}, D {med['D_stat']:.1f} us/request).")
print()
print("| case | CPU us per proxied request | vs A | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms |")
print("|---|---|---|---|---|---|---|")
names = {"A": "A: 1 replica, no sync", "B": f"B: {REPLICAS} replicas, no sync",
         "C": f"C: sync on, 1 of {REPLICAS} loaded (the loaded one)",
         "D": f"D: {REPLICAS} replicas, sync on"}
for case in "ABCD":
    print(f"| {names[case]} | {med[case]:.1f} | {med[case] / base:.3f}x | {ml[case]['ttft50']:.2f} | "
          f"{ml[case]['ttft99']:.2f} | {ml[case]['e2e50']:.2f} | {ml[case]['e2e99']:.2f} |")
print()
print(f"Budget (issue #39): D / A <= 1.25 at 4 replicas: measured {med['D'] / base:.3f} "
      f"({'met' if med['D'] / base <= 1.25 else 'NOT met'}); sync's share against the no-sync "
      f"control at the same machine load: D / B = {med['D'] / med['B']:.3f}.")
print(f"Latency sync adds (D - B): TTFT p50 {ml['D']['ttft50'] - ml['B']['ttft50']:+.2f} ms, "
      f"p99 {ml['D']['ttft99'] - ml['B']['ttft99']:+.2f} ms; e2e p50 "
      f"{ml['D']['e2e50'] - ml['B']['e2e50']:+.2f} ms, p99 {ml['D']['e2e99'] - ml['B']['e2e99']:+.2f} ms "
      f"(D - A: TTFT p50 {ml['D']['ttft50'] - ml['A']['ttft50']:+.2f}, p99 "
      f"{ml['D']['ttft99'] - ml['A']['ttft99']:+.2f} ms).")
print(f"Redis: {med['redis_D']:.1f} us of CPU per request of the fleet in D; "
      f"peers' events per applied batch in D: {med['events_per_batch']:.1f}; "
      f"sync's idle cost {med['idle']:.2f} ms of CPU per second per replica.")
print()
print("| model term | us per request |")
print("|---|---|")
print(f"| base (A) | {base:.1f} |")
print(f"| publish (C - A) | {pub:.1f} |")
print(f"| apply, per peer request (C's peers) | {app:.2f} |")
print(f"| predicted at {REPLICAS}: base + publish + {REPLICAS - 1} x apply | "
      f"{base + pub + (REPLICAS - 1) * app:.1f} (measured D {med['D']:.1f}) |")
print()
print("| replicas N | modelled CPU us per request | vs base | sync's share |")
print("|---|---|---|---|")
for n in (1, 2, 4, 8, 16, 32, 64):
    v = base + (pub + (n - 1) * app if n > 1 else 0)
    print(f"| {n} | {v:.1f} | {v / base:.2f}x | {(v - base) / v:.0%} |")
if KEEP:
    print(f"\nrequests.csv, configs and logs kept in {W}")
PY
