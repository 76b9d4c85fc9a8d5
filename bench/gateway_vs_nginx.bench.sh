#!/usr/bin/env bash
# kvgate serve vs nginx (Debian's nginx-light) as plain reverse proxies to the same
# upstream, on loopback, driven by wrk in the same run:
#   1. requests/s for small non-streaming chat requests (kvgate: round-robin policy);
#   (and the CPU time each proxy process spends per request, from /proc);
#   2. the user-like configuration side by side in the same rounds (USER_CONFIG=0 skips it):
#      API keys, a token budget charged per request, kv-cost routing on the approximate
#      prefix index, the budget in memory and in Redis (a redis-server of its own), and
#      the latter again with `cluster: {sync: on}` (every decision published to a Redis
#      stream, the cost of replica sync);
#   3. p50 latency at one connection: direct to the upstream, via nginx, via kvgate;
# (memory per held SSE stream: bench/gateway_sse_streams.bench.sh).
# The upstream is an nginx answering a fixed small chat.completion JSON (so the proxies,
# not an engine, are what is measured).
# Usage: bench/gateway_vs_nginx.bench.sh [DURATION_S=10] [ROUNDS=3]
# KVGATE_BIN_B=PATH adds a second kvgate binary (say a PGO=0 build) to the requests/s
# rounds, interleaved with the other two, so that two builds compare in the same run.
# KVGATE_B_YAML=TEXT appends TEXT to that second gateway's config ({UP} is replaced by
# the upstream's port): the same binary with and without a feature in one run, e.g.
#   KVGATE_BIN_B=build/release/kvgate KVGATE_B_YAML='tracing: {ratio: 1.0, collector:
#   "http://127.0.0.1:{UP}/v1/traces"}' bench/gateway_vs_nginx.bench.sh
# (the upstream nginx answers the OTLP POSTs with 200, so the exporter's work is real).
# P50=0 skips the latency rounds at the end (a CPU comparison needs only the first part).
# PIN=N runs every process of the chain (wrk, proxies, upstream) on CPU N only: on a busy
# machine this takes cross-core wake-ups out and compares the proxies' cost per request.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
DUR=${1:-10}
ROUNDS=${2:-3}
CONNS=${CONNS:-64}
WRK_THREADS=${WRK_THREADS:-2}
PINNED=()
if [[ -n ${PIN:-} ]]; then PINNED=(taskset -c "$PIN"); WRK_THREADS=1; fi
ulimit -n 65536 2>/dev/null || true
. bench/gateway_peers.sh
UP=$(free_port); NG=$(free_port); GW=$(free_port)
# Two nginx processes: the upstream, and nginx the proxy, so that nginx and kvgate are
# measured in the same topology (proxy process -> upstream process over loopback).
start_nginx() {  # name
  "${PINNED[@]}" nginx -c "$W/$1.conf" -p "$W" -g 'daemon off;' &
  pids+=($!)
}
write_nginx_conf upstream "" "$(upstream_block "$UP")"
start_nginx upstream
write_nginx_conf proxy "" "$(proxy_block "$NG" "$UP")"
start_nginx proxy
NGMASTER=${pids[-1]}

# start_gateway BIN PORT NAME: kvgate serve on PORT in front of the upstream; its pid in
# GATEWAY_PID (not a subshell: pids must keep it for the cleanup).
start_gateway() {
  write_gateway_yaml "$2" "$UP"
  [[ $3 == gateway ]] || mv "$W/gateway.yaml" "$W/$3.yaml"
  if [[ $3 == gateway-b && -n ${KVGATE_B_YAML:-} ]]; then
    printf '%s\n' "${KVGATE_B_YAML//\{UP\}/$UP}" >>"$W/$3.yaml"
  fi
  "${PINNED[@]}" "$1" serve "$W/$3.yaml" >"$W/$3.log" 2>&1 &
  GATEWAY_PID=$!
  pids+=($GATEWAY_PID)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$2/ready" && break; sleep 0.1; done
}
start_gateway "$BIN" "$GW" gateway
GWPID=$GATEWAY_PID
if [[ -n ${KVGATE_BIN_B:-} ]]; then
  GWB=$(free_port)
  start_gateway "$KVGATE_BIN_B" "$GWB" gateway-b
  GWBPID=$GATEWAY_PID
fi
if [[ ${USER_CONFIG:-1} != 0 ]]; then
  RP=$(free_port)
  "${PINNED[@]}" redis-server --port "$RP" --bind 127.0.0.1 --save "" --appendonly no >"$W/redis.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$RP" ping >/dev/null 2>&1 && break; sleep 0.1; done
  start_user_gateway() {  # STORE [sync] -> its port in USER_PORT, pid in GATEWAY_PID
    USER_PORT=$(free_port)
    write_user_gateway_yaml "$USER_PORT" "$UP" "$1" "$RP" "user-$1${2:-}" "${2:-}"
    "${PINNED[@]}" "$BIN" serve "$W/user-$1${2:-}.yaml" >"$W/user-$1${2:-}.log" 2>&1 &
    GATEWAY_PID=$!
    pids+=($GATEWAY_PID)
    for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$USER_PORT/ready" && break; sleep 0.1; done
  }
  start_user_gateway memory; GWM=$USER_PORT; GWMPID=$GATEWAY_PID
  start_user_gateway redis; GWR=$USER_PORT; GWRPID=$GATEWAY_PID
  start_user_gateway redis sync; GWS=$USER_PORT; GWSPID=$GATEWAY_PID
fi
for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$GW/ready" && curl -fs -o /dev/null "http://127.0.0.1:$UP/" && break; sleep 0.1; done

# rps URL PID [SCRIPT]: requests/s through URL, and the CPU time process PID (the proxy)
# spent per request meanwhile (user and system microseconds, from /proc/PID/stat), as
# "rps user sys".
rps() {
  local t0 t1 out
  t0=$(awk '{print $14, $15}' "/proc/$2/stat")
  out=$("${PINNED[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s "$W/${3:-post}.lua" "$1")
  t1=$(awk '{print $14, $15}' "/proc/$2/stat")
  python3 -c "
import sys
rps = float(sys.argv[1]); n = int(sys.argv[2]); hz = $(getconf CLK_TCK)
u0, s0, u1, s1 = map(int, sys.argv[3:7])
print(rps, round((u1 - u0) / hz * 1e6 / n, 1), round((s1 - s0) / hz * 1e6 / n, 1))" \
    "$(awk '/Requests\/sec/ {print $2}' <<<"$out")" "$(awk '/requests in/ {print $1}' <<<"$out")" $t0 $t1
}
p50() { "${PINNED[@]}" wrk -t1 -c1 -d"${DUR}s" --latency -s "$W/post.lua" "$1" | awk '$1=="50%" {print $2}'; }

# wrk's latency ("19.00us", "1.20ms") in microseconds.
us() { python3 -c "import sys; v=sys.argv[1]; print({'us':1,'ms':1e3,'s':1e6}[v.lstrip('0123456789.')]*float(v.rstrip('ums')))" "$1"; }

NGPID=$(pgrep -P "$NGMASTER" | head -1)  # nginx's proxy worker
echo "== requests/s, small non-streaming chat requests, ${CONNS} connections, ${DUR}s each"
echo "   (cpu: the proxy process's user+system CPU microseconds per request)"
ns=(); ks=(); ncs=(); kcs=(); bs=(); bcs=(); krs=(); brs=(); ms=(); rs=(); mcs=(); rcs=(); mrs=(); rrs=(); ys=(); ycs=(); yrs=()
bks=()  # per round: B's CPU per request over kvgate's
for round in $(seq "$ROUNDS"); do
  read -r n nu nsys < <(rps "http://127.0.0.1:$NG/v1/chat/completions" "$NGPID")
  # With a B binary the two kvgates swap places every round (B first in even rounds), so
  # that neither always runs right after nginx: the order alone moves a gateway's figures
  # by about a microsecond on a busy machine.
  if [[ -n ${KVGATE_BIN_B:-} && $((round % 2)) == 0 ]]; then
    read -r b bu bsys < <(rps "http://127.0.0.1:$GWB/v1/chat/completions" "$GWBPID")
    read -r k ku ksys < <(rps "http://127.0.0.1:$GW/v1/chat/completions" "$GWPID")
  else
    read -r k ku ksys < <(rps "http://127.0.0.1:$GW/v1/chat/completions" "$GWPID")
    [[ -z ${KVGATE_BIN_B:-} ]] || read -r b bu bsys < <(rps "http://127.0.0.1:$GWB/v1/chat/completions" "$GWBPID")
  fi
  ns+=("$n"); ks+=("$k"); ncs+=("$(python3 -c "print($nu+$nsys)")"); kcs+=("$(python3 -c "print($ku+$ksys)")")
  krs+=("$(python3 -c "print(round($k/$n,3))")")
  line="round $round: nginx $n req/s (cpu ${nu}+${nsys} us)   kvgate $k req/s (cpu ${ku}+${ksys} us)   ratio kvgate/nginx ${krs[-1]}"
  if [[ -n ${KVGATE_BIN_B:-} ]]; then
    bs+=("$b"); bcs+=("$(python3 -c "print($bu+$bsys)")"); brs+=("$(python3 -c "print(round($b/$n,3))")")
    bks+=("$(python3 -c "print(round(($bu+$bsys)/($ku+$ksys),3))")")
    line+="   B $b req/s (cpu ${bu}+${bsys} us)   ratio B/nginx ${brs[-1]}   cpu B/kvgate ${bks[-1]}"
  fi
  echo "$line"
  if [[ ${USER_CONFIG:-1} != 0 ]]; then
    read -r m mu msys < <(rps "http://127.0.0.1:$GWM/v1/chat/completions" "$GWMPID" post-key)
    read -r r ru rsys < <(rps "http://127.0.0.1:$GWR/v1/chat/completions" "$GWRPID" post-key)
    read -r y yu ysys < <(rps "http://127.0.0.1:$GWS/v1/chat/completions" "$GWSPID" post-key)
    ms+=("$m"); rs+=("$r"); mcs+=("$(python3 -c "print($mu+$msys)")"); rcs+=("$(python3 -c "print($ru+$rsys)")")
    mrs+=("$(python3 -c "print(round($m/$n,3))")"); rrs+=("$(python3 -c "print(round($r/$m,3))")")
    ys+=("$y"); ycs+=("$(python3 -c "print($yu+$ysys)")"); yrs+=("$(python3 -c "print(round($y/$r,3))")")
    echo "         user-like: budget in memory $m req/s (cpu ${mu}+${msys} us, ${mrs[-1]}x nginx)   budget in Redis $r req/s (cpu ${ru}+${rsys} us)   ratio Redis/memory ${rrs[-1]}   + sync on $y req/s (cpu ${yu}+${ysys} us, ${yrs[-1]}x without)"
  fi
done
mn=$(median "${ns[@]}"); mk=$(median "${ks[@]}")
echo "median: nginx $mn req/s   kvgate $mk req/s   ratio $(python3 -c "print(round($mk/$mn,3))")   (median of the per-round ratios $(median "${krs[@]}"))"
echo "median cpu per request: nginx $(median "${ncs[@]}") us   kvgate $(median "${kcs[@]}") us"
if [[ -n ${KVGATE_BIN_B:-} ]]; then
  mb=$(median "${bs[@]}")
  echo "B ($KVGATE_BIN_B): median $mb req/s   ratio B/nginx $(python3 -c "print(round($mb/$mn,3))")   (median of the per-round ratios $(median "${brs[@]}"))   median cpu per request $(median "${bcs[@]}") us"
  # CPU per request of B over kvgate: the medians' ratio, the per-round ratios' median, and
  # the ratio of the rounds' means (what a bound on "CPU per request" reads).
  echo "cpu B/kvgate: medians $(python3 -c "print(round($(median "${bcs[@]}")/$(median "${kcs[@]}"),3))")   per-round median $(median "${bks[@]}")   means $(python3 -c "import sys; b=list(map(float,sys.argv[1].split())); k=list(map(float,sys.argv[2].split())); print(round(sum(b)/sum(k),3))" "${bcs[*]}" "${kcs[*]}")"
fi

if [[ ${USER_CONFIG:-1} != 0 ]]; then
  mm=$(median "${ms[@]}"); mr=$(median "${rs[@]}")
  echo "user-like median: budget in memory $mm req/s ($(python3 -c "print(round($mm/$mn,3))")x nginx)   budget in Redis $mr req/s   ratio Redis/memory $(python3 -c "print(round($mr/$mm,3))")   (median of the per-round ratios $(median "${rrs[@]}"))"
  my=$(median "${ys[@]}")
  echo "user-like median cpu per request: memory $(median "${mcs[@]}") us   Redis $(median "${rcs[@]}") us   Redis + sync on $(median "${ycs[@]}") us"
  echo "sync on: median $my req/s   ratio to the same without sync $(python3 -c "print(round($my/$mr,3))")   (median of the per-round ratios $(median "${yrs[@]}"))   events published: $(curl -fs "http://127.0.0.1:$GWS/metrics" | awk '/^kvgate_cluster_events_published_total/ {s+=$2} END {print s+0}')"
  echo "user-like store failures: Redis gateway $(curl -fs "http://127.0.0.1:$GWR/metrics" | awk '/^kvgate_rate_limit_store_failures_total/ {print $2}')   429s: $(curl -fs "http://127.0.0.1:$GWR/metrics" | awk '/^kvgate_requests_total/ && /status="429"/ {s+=$2} END {print s+0}')"
fi

[[ ${P50:-1} != 0 ]] || exit 0  # P50=0: the requests/s rounds only
echo "== p50 latency at 1 connection (wrk --latency)"
ds=(); gs=(); cs=()
for round in $(seq "$ROUNDS"); do
  d=$(us "$(p50 "http://127.0.0.1:$UP/v1/chat/completions")")
  g=$(us "$(p50 "http://127.0.0.1:$NG/v1/chat/completions")")
  c=$(us "$(p50 "http://127.0.0.1:$GW/v1/chat/completions")")
  ds+=("$d"); gs+=("$g"); cs+=("$c")
  echo "round $round: direct ${d} us   nginx ${g} us   kvgate ${c} us"
done
md=$(median "${ds[@]}"); mg=$(median "${gs[@]}"); mc=$(median "${cs[@]}")
echo "median p50: direct $md us   nginx $mg us (+$(python3 -c "print(round($mg-$md,1))"))   kvgate $mc us (+$(python3 -c "print(round($mc-$md,1))"))"
