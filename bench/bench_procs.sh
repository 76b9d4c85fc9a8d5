# Shared by the benchmark scripts that start processes (sourced, not run): a scratch
# directory $W removed on exit with every process whose pid is in `pids`, and free_port.
# Set BENCH_NAME before sourcing to name the scratch directory.
W=$(mktemp -d -t "kvgate-${BENCH_NAME:-bench}.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
