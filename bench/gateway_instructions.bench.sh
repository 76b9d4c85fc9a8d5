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
# Prints per round and the medians; with TOP=N also each proxy's N costliest functions.
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
  valgrind --tool=callgrind --callgrind-out-file="$W/$name.%p" "$@" >"$W/$name.log" 2>&1 &
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
  rm -f "$W/$name".*
  echo $((total / req))
}


echo "== user-space instructions per proxied request (callgrind), ${DUR}s of wrk -c16 per count"
ns=(); ks=()
for round in $(seq "$ROUNDS"); do
  NG=$(free_port); GW=$(free_port)
  write_nginx_conf proxy "master_process off;" "$(proxy_block "$NG" "$UP")"
  write_gateway_yaml "$GW" "$UP"
  n=$(count nginx "$NG" nginx -c "$W/proxy.conf" -p "$W" -g 'daemon off;')
  k=$(count kvgate "$GW" "$BIN" serve "$W/gateway.yaml")
  ns+=("$n"); ks+=("$k")
  echo "round $round: nginx $n   kvgate $k   ratio kvgate/nginx $(python3 -c "print(round($k/$n,2))")"
done
mn=$(median "${ns[@]}"); mk=$(median "${ks[@]}")
echo "median: nginx ${mn%.*}   kvgate ${mk%.*}   ratio $(python3 -c "print(round($mk/$mn,2))")"
