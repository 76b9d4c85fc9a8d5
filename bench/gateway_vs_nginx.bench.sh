#!/usr/bin/env bash
# kvgate serve vs nginx (Debian's nginx-light) as plain reverse proxies to the same
# upstream, on loopback, driven by wrk in the same run:
#   1. requests/s for small non-streaming chat requests (kvgate: round-robin policy);
#   (and the CPU time each proxy process spends per request, from its threads' schedstat);
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
# (the upstream nginx answers the OTLP POSTs with 200, so the exporter's work is real;
# {COLLECTOR} instead of {UP}: a collector nginx of its own, as a deployment has).
# KVGATE_A_YAML=TEXT appends TEXT to the first gateway's config (the user-like ones
# aside) the same way: two builds of one feature compared with the feature on in both.
# P50=0 skips the latency rounds at the end (a CPU comparison needs only the first part).
# TOGETHER=1 (with KVGATE_BIN_B) loads the two gateways at once, a wrk each, rather than
# one after the other: both rounds see the same moments of the host's load (their req/s
# are then each's share of the machine, not comparable with nginx's; their CPU per request
# is what compares; the tick figures in brackets are not taken, shown as 0). With PIN=1:
# unpinned, or each gateway on a CPU of its own, the two do not see the same host.
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
  local extra=""
  if [[ $3 == gateway-b ]]; then extra=${KVGATE_B_YAML:-}; else extra=${KVGATE_A_YAML:-}; fi
  if [[ -n $extra ]]; then
    extra=${extra//\{UP\}/$UP}
    printf '%s\n' "${extra//\{COLLECTOR\}/${COLLECTOR:-}}" >>"$W/$3.yaml"
  fi
  "${PINNED[@]}" "$1" serve "$W/$3.yaml" >"$W/$3.log" 2>&1 &
  GATEWAY_PID=$!
  pids+=($GATEWAY_PID)
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$2/ready" && break; sleep 0.1; done
}
# {COLLECTOR} in KVGATE_B_YAML: the port of an nginx of its own answering every POST with
# 200 (an OTLP collector that accepts everything), so that the exports do not queue behind
# the proxied requests in the upstream's one worker, as they do with {UP}.
if [[ ${KVGATE_B_YAML:-}${KVGATE_A_YAML:-} == *"{COLLECTOR}"* ]]; then
  COLLECTOR=$(free_port)
  write_nginx_conf collector "" "server { listen 127.0.0.1:$COLLECTOR;
    location / { client_body_buffer_size 1m; default_type application/json; return 200 '{}'; } }"
  start_nginx collector
fi
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
# spent per request meanwhile, as "rps user sys exporter cpu": user and system
# microseconds per request from /proc/PID/stat (the kernel's tick samples: 100 a second,
# so a 5-second round's figures move by several percent on sampling alone), then from the
# threads' /proc/PID/task/*/schedstat (run time in nanoseconds, measured at every switch:
# no sampling noise; user and system together) the span exporter thread's CPU
# microseconds per request (0 without one) and the whole process's.
rps() {
  local t0 t1 x0 x1 c0 c1 out
  t0=$(awk '{print $14, $15}' "/proc/$2/stat")
  x0=$(tracer_cpu "$2")
  c0=$(run_ns "$2")
  out=$("${PINNED[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s "$W/${3:-post}.lua" "$1")
  c1=$(run_ns "$2")
  t1=$(awk '{print $14, $15}' "/proc/$2/stat")
  x1=$(tracer_cpu "$2")
  per_request "$out" "$x0" "$x1" "$c0" "$c1" $t0 $t1
}
# per_request WRK_OUTPUT X0 X1 C0 C1 [U0 S0 U1 S1]: rps's line from wrk's output and the
# counters taken around it (exporter thread and process run time in ns; user and system
# ticks, 0 when not taken).
per_request() {
  python3 -c "
import sys
rps = float(sys.argv[1]); n = int(sys.argv[2]); hz = $(getconf CLK_TCK)
x0, x1, c0, c1, u0, s0, u1, s1 = map(int, sys.argv[3:11])
f = lambda ticks: round(ticks / hz * 1e6 / n, 1)
print(rps, f(u1 - u0), f(s1 - s0), round((x1 - x0) / 1e3 / n, 2), round((c1 - c0) / 1e3 / n, 2))" \
    "$(awk '/Requests\/sec/ {print $2}' <<<"$1")" "$(awk '/requests in/ {print $1}' <<<"$1")" \
    "$2" "$3" "$4" "$5" "${6:-0}" "${7:-0}" "${8:-0}" "${9:-0}"
}
# rps_pair URL PID URL_B PID_B: rps for the two gateways loaded at once (TOGETHER=1), two
# wrk processes side by side for the same seconds, as two lines: what the host's load does
# to one round it does to both, so their ratio is not moved by it (a round of each in turn
# is, by up to 10% on a busy shared machine).
rps_pair() {
  local x0 c0 xb0 cb0 x1 c1 xb1 cb1 wa wb
  x0=$(tracer_cpu "$2"); c0=$(run_ns "$2"); xb0=$(tracer_cpu "$4"); cb0=$(run_ns "$4")
  "${PINNED[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s "$W/post.lua" "$1" >"$W/wrk-a.txt" &
  wa=$!
  "${PINNED[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${DUR}s" -s "$W/post.lua" "$3" >"$W/wrk-b.txt" &
  wb=$!
  wait "$wa" "$wb"
  c1=$(run_ns "$2"); x1=$(tracer_cpu "$2"); cb1=$(run_ns "$4"); xb1=$(tracer_cpu "$4")
  per_request "$(cat "$W/wrk-a.txt")" "$x0" "$x1" "$c0" "$c1"
  per_request "$(cat "$W/wrk-b.txt")" "$xb0" "$xb1" "$cb0" "$cb1"
}
# The run time in nanoseconds of process $1's span exporter thread (named kvgate-trace;
# 0 without tracing): part of the process's CPU, shown on its own.
tracer_cpu() {
  local f
  for f in /proc/"$1"/task/*/schedstat; do
    [[ $(cat "${f%schedstat}comm" 2>/dev/null) == kvgate-trace ]] && { awk '{print $1}' "$f"; return; }
  done
  echo 0
}
# The run time of process $1's threads so far, in nanoseconds (schedstat's first field).
run_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }
p50() { "${PINNED[@]}" wrk -t1 -c1 -d"${DUR}s" --latency -s "$W/post.lua" "$1" | awk '$1=="50%" {print $2}'; }

# wrk's latency ("19.00us", "1.20ms") in microseconds.
us() { python3 -c "import sys; v=sys.argv[1]; print({'us':1,'ms':1e3,'s':1e6}[v.lstrip('0123456789.')]*float(v.rstrip('ums')))" "$1"; }

NGPID=$(pgrep -P "$NGMASTER" | head -1)  # nginx's proxy worker
echo "== requests/s, small non-streaming chat requests, ${CONNS} connections, ${DUR}s each"
echo "   (cpu: the proxy process's CPU microseconds per request, from schedstat; in brackets"
echo "   user+system from the tick samples of /proc/PID/stat)"
ns=(); ks=(); ncs=(); kcs=(); bs=(); bcs=(); krs=(); brs=(); ms=(); rs=(); mcs=(); rcs=(); mrs=(); rrs=(); ys=(); ycs=(); yrs=()
bks=(); bxs=()  # per round: B's CPU per request over kvgate's; its exporter thread's
for round in $(seq "$ROUNDS"); do
  read -r n nu nsys _ nc < <(rps "http://127.0.0.1:$NG/v1/chat/completions" "$NGPID")
  # With a B binary the two kvgates swap places every round (B first in even rounds), so
  # that neither always runs right after nginx: the order alone moves a gateway's figures
  # by about a microsecond on a busy machine.
  if [[ -n ${KVGATE_BIN_B:-} && ${TOGETHER:-0} != 0 ]]; then
    { read -r k ku ksys _ kc; read -r b bu bsys bx bc; } < <(rps_pair \
      "http://127.0.0.1:$GW/v1/chat/completions" "$GWPID" "http://127.0.0.1:$GWB/v1/chat/completions" "$GWBPID")
  elif [[ -n ${KVGATE_BIN_B:-} && $((round % 2)) == 0 ]]; then
    read -r b bu bsys bx bc < <(rps "http://127.0.0.1:$GWB/v1/chat/completions" "$GWBPID")
    read -r k ku ksys _ kc < <(rps "http://127.0.0.1:$GW/v1/chat/completions" "$GWPID")
  else
    read -r k ku ksys _ kc < <(rps "http://127.0.0.1:$GW/v1/chat/completions" "$GWPID")
    [[ -z ${KVGATE_BIN_B:-} ]] || read -r b bu bsys bx bc < <(rps "http://127.0.0.1:$GWB/v1/chat/completions" "$GWBPID")
  fi
  ns+=("$n"); ks+=("$k"); ncs+=("$nc"); kcs+=("$kc")
  krs+=("$(python3 -c "print(round($k/$n,3))")")
  line="round $round: nginx $n req/s (cpu $nc us [${nu}+${nsys}])   kvgate $k req/s (cpu $kc us [${ku}+${ksys}])   ratio kvgate/nginx ${krs[-1]}"
  if [[ -n ${KVGATE_BIN_B:-} ]]; then
    bs+=("$b"); bcs+=("$bc"); brs+=("$(python3 -c "print(round($b/$n,3))")")
    bks+=("$(python3 -c "print(round($bc/$kc,3))")")
    bxs+=("$bx")
    line+="   B $b req/s (cpu $bc us [${bu}+${bsys}], exporter thread ${bx} us)   ratio B/nginx ${brs[-1]}   cpu B/kvgate ${bks[-1]}"
  fi
  echo "$line"
  if [[ ${USER_CONFIG:-1} != 0 ]]; then
    read -r m mu msys _ mc < <(rps "http://127.0.0.1:$GWM/v1/chat/completions" "$GWMPID" post-key)
    read -r r ru rsys _ rc < <(rps "http://127.0.0.1:$GWR/v1/chat/completions" "$GWRPID" post-key)
    read -r y yu ysys _ yc < <(rps "http://127.0.0.1:$GWS/v1/chat/completions" "$GWSPID" post-key)
    ms+=("$m"); rs+=("$r"); mcs+=("$mc"); rcs+=("$rc")
    mrs+=("$(python3 -c "print(round($m/$n,3))")"); rrs+=("$(python3 -c "print(round($r/$m,3))")")
    ys+=("$y"); ycs+=("$yc"); yrs+=("$(python3 -c "print(round($y/$r,3))")")
    echo "         user-like: budget in memory $m req/s (cpu $mc us [${mu}+${msys}], ${mrs[-1]}x nginx)   budget in Redis $r req/s (cpu $rc us [${ru}+${rsys}])   ratio Redis/memory ${rrs[-1]}   + sync on $y req/s (cpu $yc us [${yu}+${ysys}], ${yrs[-1]}x without)"
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
  echo "B's exporter thread (kvgate-trace; part of B's cpu): median $(median "${bxs[@]}") us per request"
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
