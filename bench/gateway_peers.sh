# Shared by the gateway-vs-nginx benchmarks (sourced, not run): a scratch directory
# cleaned up on exit, free ports, and the pieces of the common topology, an upstream nginx
# answering a fixed small chat.completion, nginx as a plain reverse proxy, kvgate serve
# (round-robin, threads: 1) and wrk's request.
BENCH_NAME=bench
source "$(dirname "${BASH_SOURCE[0]}")/bench_procs.sh"

BODY='{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}'

# write_nginx_conf NAME MAIN_DIRECTIVES HTTP_BLOCK: $W/NAME.conf, one worker, no logs.
write_nginx_conf() {
  cat >"$W/$1.conf" <<NGINX
worker_processes 1;
$2
pid $W/$1.pid;
error_log $W/$1-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $W/body; proxy_temp_path $W/proxy;
  fastcgi_temp_path $W/fcgi; uwsgi_temp_path $W/uwsgi; scgi_temp_path $W/scgi;
  keepalive_requests 1000000;
  $3
}
NGINX
}
# The upstream's server block on port $1, and nginx the proxy's (port $1) in front of
# upstream port $2.
upstream_block() {
  echo "server { listen 127.0.0.1:$1;
    location / { default_type application/json; return 200 '$BODY'; } }"
}
proxy_block() {
  echo "upstream engine { server 127.0.0.1:$2; keepalive 256; keepalive_requests 1000000; }
  server { listen 127.0.0.1:$1;
    location / { proxy_pass http://engine; proxy_http_version 1.1;
                 proxy_set_header Connection \"\"; proxy_buffering off; } }"
}
# write_gateway_yaml PORT UPSTREAM_PORT: $W/gateway.yaml.
write_gateway_yaml() {
  cat >"$W/gateway.yaml" <<YAML
listeners: [{address: 127.0.0.1, port: $1}]
threads: 1
pools:
  main:
    router: {policy: round-robin}
    endpoints: [http://127.0.0.1:$2]
models:
  - {name: m, pool: main}
YAML
}
# write_user_gateway_yaml PORT UPSTREAM_PORT STORE REDIS_PORT NAME [CLUSTER]: $W/NAME.yaml,
# the user-like configuration: API keys with a token budget (tenant "bench", key
# "sk-bench") in STORE (memory | redis), kv-cost routing on the approximate prefix index;
# CLUSTER=sync adds `cluster: {sync: on}` on the same Redis (routing events published).
write_user_gateway_yaml() {
  local cluster=""
  if [[ ${6:-} == sync ]]; then cluster="cluster: {redis: {host: 127.0.0.1, port: $4}, replica_id: bench, sync: on}"; fi
  python3 -c "import hashlib; print('keys:\n  - sha256: ' + hashlib.sha256(b'sk-bench').hexdigest() + '\n    tenant: bench\n    limits: {tokens_per_minute: 1000000000000}')" >"$W/keys.yaml"
  cat >"$W/$5.yaml" <<YAML
listeners: [{address: 127.0.0.1, port: $1}]
threads: 1
keys_file: $W/keys.yaml
rate_limits:
  store: $3
  redis: {host: 127.0.0.1, port: $4}
$cluster
pools:
  main:
    router: {policy: kv-cost, overlap: approx}
    endpoints: [http://127.0.0.1:$2]
models:
  - {name: m, pool: main}
YAML
}
cat >"$W/post-key.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"
LUA
cat >"$W/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
LUA
median() { python3 -c "import statistics,sys; print(round(statistics.median(float(x) for x in sys.argv[1:]), 3))" "$@"; }
