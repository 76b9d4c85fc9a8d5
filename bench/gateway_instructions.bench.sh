#!/usr/bin/env bash
# User-space instructions per proxied request, kvgate serve vs nginx (Debian's nginx-light),
# counted by valgrind's callgrind in the same run: a figure that does not move with the
# load of a shared machine (wall-clock requests/s do; see gateway_vs_nginx.bench.sh for
# those). Same topology as that script: an upstream nginx answering a fixed small
# chat.completion, each proxy in front of it, wrk posting a small chat request.
# Each proxy runs under callgrind; the counters are zeroed after a warm-up and dumped
# after a measured wrk run, and divided by the requests wrk completed (the other threads
# of the process, idle here, are counted too). Kernel time is not in these figures.
# Usage: bench/gateway_instructions.bench.sh [DURATION_S=5] [ROUNDS=3]
# KVGATE_BIN_B=PATH counts a second kvgate binary too (say a PGO=0 build), same rounds;
# KVGATE_B_YAML=TEXT appends TEXT to its config ({UP}: the upstream's port), as in
# gateway_vs_nginx.bench.sh: one binary with and without a feature (tracing) in one run.
# Prints per round and the medians; with TOP=N also each proxy's N costliest functions;
# KEEP=DIR keeps each proxy's last profile there (callgrind_annotate --tree=caller DIR/kvgate.out).
# CACHESIM=1 also simulates caches and branch prediction (valgrind's model, slower) and
# prints, per request, first-level instruction-cache misses (I1mr), data-cache misses
# (D1mr+D1mw) and mispredicted branches (Bcm+Bim): what instruction counts do not show.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVGATE_BIN:-build/release/kvgate}
DUR=${1:-5}
ROUNDS=${2:-3}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)"; exit 1; }
. bench/gateway_peers.sh
UP=$(free_port)
write_nginx_conf upstream "" "$(upstream_block "$UP")"
nginx -c "$W/upstream.conf" -p "$W" -g 'daemon off;' &
pids+=($!)

# count NAME PORT CMD...: starts CMD under callgrind, prints instructions per request.
count() {
  local name=$1 port=$2 vp out req total
  shift 2
  local sim=()
  [[ -n ${CACHESIM:-} ]] && sim=(--cache-sim=yes --branch-sim=yes)
  # Names uncompressed: the part read (after zeroing) then names its functions itself.
  valgrind --tool=callgrind --compress-strings=no "${sim[@]}" --callgrind-out-file="$W/$name.%p" "$@" >"$W/$name.log" 2>&1 &
  vp=$!
  for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  wrk -t1 -c16 -d2s -s "$W/post.lua" "http://127.0.0.1:$port/v1/chat/completions" >/dev/null
  callgrind_control -z "$vp" >/dev/null 2>&1
  out=$(wrk -t1 -c16 -d"${DUR}s" -s "$W/post.lua" "http://127.0.0.1:$port/v1/chat/completions")
  callgrind_control -d "$vp" >/dev/null 2>&1
  sleep 0.5
  kill "$vp"; wait "$vp" 2>/dev/null || true
  req=$(awk '/requests in/ {print $1}' <<<"$out")
  # The dump after zeroing is part 1 of the profile.
  total=$(callgrind_annotate "$(ls "$W/$name".*.1 | head -1)" 2>/dev/null |
    awk '/PROGRAM TOTALS/ {gsub(",","",$1); print $1}')
  if [[ -n ${TOP:-} ]]; then
    callgrind_annotate --threshold=100 --inclusive=no "$(ls "$W/$name".*.1 | head -1)" 2>/dev/null |
      sed -n '/file:function/,$p' | sed -n "3,$((TOP + 2))p" |
      awk -v r="$req" '{n=$1; gsub(",","",n); $1=""; $2=""; printf "   %8.0f %s\n", n/r, substr($0,1,150)}' >&2
  fi
  if [[ -n ${CACHESIM:-} ]]; then
    callgrind_annotate "$(ls "$W/$name".*.1 | head -1)" 2>/dev/null | python3 -c "
import sys
lines = sys.stdin.read().splitlines()
i = [k for k, l in enumerate(lines) if 'PROGRAM TOTALS' in l][0]
ev = dict(zip(lines[i - 2].split(), [int(x.replace(',', '')) for x in lines[i].split() if x[0].isdigit()]))
r = $req
print('   %s per request: I1mr %.0f   D1mr+D1mw %.0f   Bcm+Bim %.0f' % ('$name', ev['I1mr'] / r,
      (ev['D1mr'] + ev['D1mw']) / r, (ev['Bcm'] + ev['Bim']) / r), file=sys.stderr)"
  fi
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$(ls "$W/$name".*.1 | head -1)" "$KEEP/$name.out"; fi
  rm -f "$W/$name".*
  echo $((total / req))
}


echo "== user-space instructions per proxied request (callgrind), ${DUR}s of wrk -c16 per count"
ns=(); ks=(); bs=()
for round in $(seq "$ROUNDS"); do
  NG=$(free_port); GW=$(free_port)
  write_nginx_conf proxy "master_process off;" "$(proxy_block "$NG" "$UP")"
  write_gateway_yaml "$GW" "$UP"
  n=$(count nginx "$NG" nginx -c "$W/proxy.conf" -p "$W" -g 'daemon off;')
  k=$(count kvgate "$GW" "$BIN" serve "$W/gateway.yaml")
  ns+=("$n"); ks+=("$k")
  line="round $round: nginx $n   kvgate $k   ratio kvgate/nginx $(python3 -c "print(round($k/$n,2))")"
  if [[ -n ${KVGATE_BIN_B:-} ]]; then
    cp "$W/gateway.yaml" "$W/gateway-b.yaml"
    if [[ -n ${KVGATE_B_YAML:-} ]]; then
      printf '%s\n' "${KVGATE_B_YAML//\{UP\}/$UP}" >>"$W/gateway-b.yaml"
    fi
    b=$(count kvgate-b "$GW" "$KVGATE_BIN_B" serve "$W/gateway-b.yaml")
    bs+=("$b")
    line+="   B $b   ratio B/nginx $(python3 -c "print(round($b/$n,2))")"
  fi
  echo "$line"
done
mn=$(median "${ns[@]}"); mk=$(median "${ks[@]}")
echo "median: nginx ${mn%.*}   kvgate ${mk%.*}   ratio $(python3 -c "print(round($mk/$mn,2))")"
if [[ -n ${KVGATE_BIN_B:-} ]]; then
  mb=$(median "${bs[@]}")
  echo "B ($KVGATE_BIN_B): median ${mb%.*}   ratio B/nginx $(python3 -c "print(round($mb/$mn,2))")"
fi
