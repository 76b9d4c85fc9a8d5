"""Shared by the benchmark scripts that run a live fleet from Python
(bench/predictor_live.bench.sh, bench/fair_share_live.bench.sh): `kvgate engine`s behind
`kvgate serve` on loopback. Imported, not run (the scripts put bench/ on PYTHONPATH).

    import live_fleet as lf
    lf.setup("my_bench")     # fail() messages start with "my_bench: "; at exit (normal,
                             # fail(), SIGTERM, SIGINT) every process spawned is stopped
    engines = lf.start_engines(BIN, 4, f"{W}/case-engine", ["--time-scale", "1"])
    gw = ...                 # a `kvgate serve` spawned with lf.spawn, its URL by lf.wait_line
    lf.join_feeds(gw, engines)   # pools with `overlap: precise`: every KV event feed joined

Process handling: spawn() starts a process with its output in a log file and keeps it in
`procs`; stop() sends SIGTERM to a group at once and waits (SIGKILL after 15 s);
run_to_end() runs one to its end within a time limit. The bash side (bench/bench_procs.sh)
stops the Python process itself on exit, which stops the rest through the handlers here.
"""

import atexit
import json
import re
import signal
import subprocess
import sys
import time
import urllib.request

NAME = "bench"
procs = []  # every process started and not yet stopped


def setup(name):
    """Names the script in fail()'s messages; stops every process at exit; no proxies."""
    global NAME
    NAME = name
    atexit.register(lambda: stop(list(procs)))
    # Loopback only: no proxy from the environment.
    urllib.request.install_opener(urllib.request.build_opener(urllib.request.ProxyHandler({})))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    signal.signal(signal.SIGINT, lambda *_: sys.exit(1))


def fail(msg):
    sys.exit(f"{NAME}: {msg}")


def spawn(args, log):
    p = subprocess.Popen(args, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def stop(group):
    """SIGTERM to every process of `group` at once, then wait for each."""
    for p in group:
        if p.poll() is None:
            p.terminate()
    for p in group:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        if p in procs:
            procs.remove(p)


def tail(path, n=2000):
    try:
        return open(path, errors="replace").read()[-n:]
    except OSError:
        return ""


def wait_all(group, seconds, what):
    """Waits for every process of `group` to end within `seconds` (together); their exit
    codes. fail() names `what` and shows the log of the first still running."""
    end = time.time() + seconds
    codes = []
    for p, log in group:
        try:
            codes.append(p.wait(timeout=max(0.1, end - time.time())))
        except subprocess.TimeoutExpired:
            fail(f"{what} still running after {seconds:.0f} s; log:\n{tail(log)}")
        procs.remove(p)
    return codes


def run_to_end(args, log, seconds):
    """Runs `args` to its end (its output in `log`); its exit code. fail() after `seconds`."""
    p = spawn(args, log)
    return wait_all([(p, log)], seconds, " ".join(args[:3]))[0]


def wait_line(log, pattern, proc, seconds=30):
    """The first group of `pattern` in `log` once it is there; fail() when `proc` exits or
    `seconds` pass first."""
    end = time.time() + seconds
    while time.time() < end:
        m = re.search(pattern, tail(log, 1 << 20))
        if m:
            return m.group(1)
        if proc.poll() is not None:
            fail(f"{log}: the process exited ({proc.returncode}):\n{tail(log)}")
        time.sleep(0.05)
    fail(f"{log}: no {pattern!r} after {seconds} s:\n{tail(log)}")


def get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def post_json(url, body, timeout=10):
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_ok(url, what, seconds=30):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if get(url, 2)[0] == 200:
                return
        except Exception:
            pass
        time.sleep(0.1)
    fail(f"{what} not ready at {url} (give OUT to keep the logs)")


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metrics(base):
    """(name, labels, value) of every sample on base/metrics."""
    out = []
    for line in get(base + "/metrics")[1].splitlines():
        if not line or line[0] == "#":
            continue
        m = SAMPLE.match(line)
        if not m:
            continue
        try:
            v = float(m.group(3))
        except ValueError:
            continue
        out.append((m.group(1), dict(LABEL.findall(m.group(2) or "")), v))
    return out


def pick(samples, name, **labels):
    """The sum of `name`'s samples whose labels include `labels`; None when there is none."""
    vals = [v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items())]
    return sum(vals) if vals else None


def cpu_ticks():
    """(busy, total) jiffies of the whole machine, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


# --- The tiny tokenizer (Hugging Face tokenizer.json): GPT-2's byte symbols and one merge,
# "Ġ" + "t", so " t5" is two tokens (" t", "5"), as Qwen3 cuts it. Engines and gateway
# load it in milliseconds. With a workload's `vocab_size: 10`, every word `kvgate bench`
# writes (t0..t9) is exactly TOKENS_PER_WORD tokens.
TOKENS_PER_WORD = 2


def tiny_tokenizer():
    printable = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or b >= 174]
    others = [b for b in range(256) if b not in printable]
    chars = [chr(b) for b in printable] + [chr(256 + i) for i in range(len(others))]
    vocab = {c: i for i, c in enumerate(chars)}
    vocab["\u0120t"] = len(chars)
    regex = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+"
             r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated",
             "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": [["\u0120", "t"]]},
    }


def write_tiny_tokenizer(path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tiny_tokenizer(), f, ensure_ascii=False)
    return path


def start_engines(bin_path, count, log_prefix, args):
    """`count` fresh `kvgate engine --model sim --port 0`s (seeds 1..count), each also
    publishing KV events and answering replays on ephemeral ports, plus `args`; logs
    log_prefix + "0.log", ... Each a dict: proc, log, url, publisher, replay; all healthy."""
    engines = []
    for i in range(count):
        log = f"{log_prefix}{i}.log"
        p = spawn([bin_path, "engine", "--port", "0", "--model", "sim", "--seed", str(i + 1),
                   "--kv-events-endpoint", "tcp://127.0.0.1:*",
                   "--replay-endpoint", "tcp://127.0.0.1:*"] + args, log)
        engines.append({"proc": p, "log": log})
    for e in engines:
        e["url"] = wait_line(e["log"], r"listening on (http://[0-9.:]+)", e["proc"])
        e["publisher"] = wait_line(e["log"], r"kv events on (tcp://[0-9.:]+)", e["proc"])
        e["replay"] = wait_line(e["log"], r"kv replay on (tcp://[0-9.:]+)", e["proc"])
    for e in engines:
        wait_ok(e["url"] + "/health", "kvgate engine")
    return engines


def endpoints_yaml(engines, kv_events, indent="      "):
    """The `endpoints:` list items of a pool: each engine's URL, and with `kv_events` its
    publisher and replay sockets."""
    y = ""
    for e in engines:
        y += f"{indent}- url: {e['url']}\n"
        if kv_events:
            y += (f"{indent}  kv_events: {{publisher: {e['publisher']}, "
                  f"replay: {e['replay']}}}\n")
    return y


def join_feeds(gw, engines):
    """Until the gateway has applied a KV event batch from every engine (batches sent
    before its SUB socket connected are lost), send each engine a short unrelated prompt
    directly."""
    for i, e in enumerate(engines):
        port = e["url"].rsplit(":", 1)[1]
        mine = re.compile(r":%s(/|$)" % port)
        for _ in range(100):
            try:
                post_json(e["url"] + "/v1/completions",
                          {"model": "sim", "max_tokens": 1,
                           "prompt": f"join{i} " + " ".join(["x"] * 40)})
            except Exception:
                pass
            for _ in range(10):
                batches = [v for n, l, v in metrics(gw) if n == "kvgate_kv_event_batches_total"
                           and mine.search(l.get("endpoint", ""))]
                if batches and max(batches) > 0:
                    break
                time.sleep(0.02)
            else:
                continue
            break
        else:
            fail(f"no KV events from {e['url']} reached the gateway")


def start_gateway(bin_path, config, log):
    """`kvgate serve CONFIG` (its listener on port 0); (process, URL) once /ready is 200."""
    p = spawn([bin_path, "serve", config], log)
    url = wait_line(log, r"listening on (http://[0-9.:]+)", p)
    wait_ok(url + "/ready", "kvgate serve")
    return p, url


def print_notes(notes, busy):
    """A study's closing lines: each run's notes, and a warning when a live run had the
    machine's CPUs over 90% busy (`busy`)."""
    if notes:
        print()
        print("notes: " + " | ".join(notes))
    if busy:
        print("\nnote: the machine's CPUs were over 90% busy during a live run: the live latencies "
              "include CPU contention (TIME_SCALE=2 halves the event rate, at twice the wall time).")
