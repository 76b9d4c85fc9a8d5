#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from inputs the
unit tests use. Run from the repository root; the files it writes are checked in."""
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fuzz", "corpus")


def write(target, seeds):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        os.remove(os.path.join(d, old))
    for i, s in enumerate(seeds):
        with open(os.path.join(d, "seed-%02d" % i), "wb") as f:
            f.write(s if isinstance(s, bytes) else s.encode())


# --- HTTP (tests/io/http_head_test.cc, tests/io/http_server_test.cc) ---
requests = [
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Length: 2\r\n"
    "Content-Type: application/json\r\n\r\n{}",
    "POST /v1/completions HTTP/1.1\r\nHost: localhost:8000\r\nUser-Agent: curl/7.88.1\r\n"
    "Accept: */*\r\nAuthorization: Bearer sk-abc\r\nContent-Type: application/json\r\n"
    "Content-Length: 4\r\n\r\nnull",
    "POST /v1/chat/completions HTTP/1.1\r\naccept: application/json\r\n"
    "authorization: Bearer kvg-0123456789abcdef\r\ncontent-type: application/json\r\n"
    "user-agent: OpenAI/JS 4.77.0\r\nx-stainless-lang: js\r\ncontent-length: 3\r\n"
    "Host: 127.0.0.1:41000\r\nConnection: keep-alive\r\n\r\n[1]",
    "GET /v1/models?limit=10&x=%20y HTTP/1.1\r\nHost: h\r\n\r\n",
    "GET /health HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET /ready HTTP/1.1\r\nConnection: close\r\nX-Empty:\r\nX-Spaces: \t a b \t\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
    "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\n",
    "POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\nabc",
    "GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HTTP/1.1\r\nHost: h\r\n\r\n",
    "BREW /pot HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx",
]
responses = [
    "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nContent-Type: application/json\r\n"
    "Content-Length: 2\r\nConnection: keep-alive\r\n\r\n{}",
    "HTTP/1.1 200 OK\r\ndate: Mon, 30 Nov 2026 10:00:00 GMT\r\nserver: uvicorn\r\n"
    "content-length: 4\r\ncontent-type: application/json\r\n\r\nnull",
    "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.0 200 OK\r\nContent-Length: 1\r\nConnection: keep-alive\r\n\r\nx",
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    "1c\r\ndata: {\"choices\":[{}]}\n\n\r\ne\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nuntil the end",
    "HTTP/1.1 204 No Content\r\n\r\n",
]
write("http_request", requests)
write("http_response", responses)

# --- OpenAI bodies (tests/openai/json_fast_test.cc, request_test.cc) ---
chat = [
    '{"model":"qwen3","messages":[{"role":"user","content":"Hello"}]}',
    '{"model":"qwen3","messages":[{"role":"system","content":"Be brief."},'
    '{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],'
    '"stream":true,"stream_options":{"include_usage":true},"max_tokens":16}',
    '{"model":"m","messages":[{"role":"user","content":"caf\\u00e9 \\ud83d\\ude00"}],"stream":false,'
    '"max_completion_tokens":3,"temperature":0.2}',
    '{"model":"m","messages":[],"max_tokens":-1}',
    '{"model":"m","model":"n","messages":[{"role":"user","content":null}]}',
]
completion = [
    '{"model":"qwen3","prompt":"Once upon a time","max_tokens":8}',
    '{"model":"qwen3","prompt":["a","b"],"stream":true}',
    '{"model":"qwen3","prompt":[1,2,3],"stream":true,"stream_options":null}',
    '{"prompt":"no model"}',
]
usage = [
    '{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,'
    '"total_tokens":10}}',
    '{"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,'
    '"prompt_tokens_details":{"cached_tokens":32}}}',
    '{"usage":null}',
    '{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}',
]
write("openai_json", ["\x00" + b for b in chat] + ["\x01" + b for b in completion] +
      ["\x02" + u for u in usage])

# --- SSE (tests/openai/sse_tap_test.cc) ---
c1 = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"Hel"}}],"usage":null}\n\n'
c2 = 'data: {"id":"c","choices":[{"index":0,"delta":{"content":"lo"}}],"usage":null}\n\n'
u = ('data: {"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,'
     '"total_tokens":42,"prompt_tokens_details":{"cached_tokens":32}}}\n\n')
done = "data: [DONE]\n\n"
write("sse_tap", ["\x00" + c1 + c2 + u + done, "\x01" + c1 + u + done,
                  "\x01" + c1.replace("\n\n", "\r\n\r\n") + 'data: {"error":{"message":"x"}}\n\n',
                  "\x00: comment\n\nevent: x\ndata: {\"choices\": [{}]}\n\n"])

# --- Prometheus (tests/core/metrics, the engine's /metrics) ---
write("prometheus_text", [
    "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="qwen3"} 3.0\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{model_name="qwen3"} 0\n'
    "# TYPE vllm:kv_cache_usage_perc gauge\n"
    'vllm:kv_cache_usage_perc{model_name="qwen3"} 0.25\n',
    "# TYPE vllm:time_to_first_token_seconds histogram\n"
    'vllm:time_to_first_token_seconds_bucket{le="0.001",model_name="m"} 0\n'
    'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 4\n'
    'vllm:time_to_first_token_seconds_sum{model_name="m"} 0.5\n'
    'vllm:time_to_first_token_seconds_count{model_name="m"} 4\n',
    'x{a="q\\"uo\\\\te\\nd"} -Inf 1700000000000\ny NaN\nz 1e-7\n',
])

# --- vLLM KV events: msgpack by hand (tests/core/kv/vllm_event_codec_test.cc shapes) ---
def mp(v):
    if v is None:
        return b"\xc0"
    if v is True:
        return b"\xc3"
    if v is False:
        return b"\xc2"
    if isinstance(v, float):
        return b"\xcb" + struct.pack(">d", v)
    if isinstance(v, int):
        if 0 <= v < 128:
            return bytes([v])
        if 0 <= v < 2**64:
            return b"\xcf" + struct.pack(">Q", v)
        return b"\xd3" + struct.pack(">q", v)
    if isinstance(v, str):
        e = v.encode()
        return bytes([0xA0 | len(e)]) + e if len(e) < 32 else b"\xd9" + bytes([len(e)]) + e
    if isinstance(v, bytes):
        return b"\xc4" + bytes([len(v)]) + v
    if isinstance(v, list):
        return bytes([0x90 | len(v)]) + b"".join(mp(x) for x in v)
    if isinstance(v, dict):
        return bytes([0x80 | len(v)]) + b"".join(mp(k) + mp(x) for k, x in v.items())
    raise TypeError(v)


stored = ["BlockStored", [11, 12], None, [1, 2, 3, 4, 5, 6, 7, 8], 4, None, "GPU", None]
child = ["BlockStored", [13], 12, [9, 10, 11, 12], 4, None, "GPU", None]
removed = ["BlockRemoved", [12], "GPU"]
array_batch = mp([1700000000.5, [stored, child, removed], 0])
map_batch = mp({"ts": 1700000000.5, "events": [
    {"type": "BlockStored", "block_hashes": [b"\x00" * 24 + b"\x01\x02\x03\x04\x05\x06\x07\x08"],
     "parent_block_hash": None, "token_ids": [1, 2, 3, 4], "block_size": 4, "medium": "CPU"},
    {"type": "AllBlocksCleared"}], "data_parallel_rank": 0})
old_batch = mp([1.0, [["AllBlocksCleared"], ["Unknown", 1]]])


def record(step, payload):
    return bytes([step]) + struct.pack("<H", len(payload)) + payload


write("kv_events", [
    record(0, array_batch),
    record(0, map_batch),
    record(0, array_batch) + record(0, map_batch) + record(210, old_batch) + record(240, array_batch)
    + record(255, map_batch),
])

# --- tokenizer and chat template (tests/core/tokenizer) ---
write("tokenizer", [
    "Hello world",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>",
    "caf\u00e9 cafe\u0301 \u00c5ngstr\u00f6m \U0001F600 \u4f60\u597d\uff0c\u4e16\u754c  \t\n\n 12345 don't",
    "    indented code\n\tif (x) { return y; }\n",
])
write("chat_template", [
    '{"messages":[{"role":"user","content":"Hello"}]}',
    '{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"2+2?"},'
    '{"role":"assistant","content":"4","reasoning_content":"easy"},{"role":"user","content":"ok"}],'
    '"chat_template_kwargs":{"enable_thinking":false}}',
    '{"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":null,'
    '"tool_calls":[{"type":"function","function":{"name":"get","arguments":"{\\"q\\":1}"}}]},'
    '{"role":"tool","content":"sunny"}],"tools":[{"type":"function","function":{"name":"get",'
    '"parameters":{"type":"object"}}}],"add_generation_prompt":true}',
    '{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}',
])

# --- config and keys (examples/, tests/gateway/common/config_test.cc, keys_test.cc) ---
configs = []
for name in ["local-fleet.yaml", "pd-fleet.yaml", "autoscale-load.yaml"]:
    with open(os.path.join(ROOT, "examples", name)) as f:
        configs.append("\x00" + f.read())
keys = ("\x01keys:\n  - sha256: " + "ab" * 32 + "\n    tenant: acme\n    models: [qwen3]\n"
        "    priority: 1\n    may_set_priority: true\n    limits:\n      tokens_per_minute: 100000\n"
        "      requests_per_minute: 600\n      prompt_weight: 0.5\n      models:\n"
        "        qwen3: {tokens_per_minute: 20000, requests_per_minute: 100}\n")
write("config", configs + [keys, "\x01keys: []\n", "\x00listen: [1, {a: b}]\n"])

# --- the Jinja engine (tests/core/template): the fixtures' chat templates and snippets,
# each with a context after "\n--context--\n" ---
import json

chat_context = json.dumps({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "Hello"},
                 {"role": "assistant", "content": "Hi", "reasoning_content": "think"},
                 {"role": "user", "content": [{"type": "text", "text": "and?"}]}],
    "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
})
templates = []
fixtures = os.path.join(ROOT, ".deps", "fixtures")
for name in sorted(os.listdir(fixtures)) if os.path.isdir(fixtures) else []:
    path = os.path.join(fixtures, name, "tokenizer_config.json")
    if os.path.exists(path):
        with open(path) as f:
            t = json.load(f).get("chat_template")
        if isinstance(t, str):
            templates.append(t)
snippets = [
    "{% for m in messages %}{{ m.role | upper }}: {{ m.content | trim }}\n{% endfor %}",
    "{% set ns = namespace(n=0) %}{% for x in range(5) if x % 2 %}{% set ns.n = ns.n + x %}"
    "{% if loop.last %}{{ ns.n }}{% endif %}{% endfor %}",
    "{% macro f(a, b=2) %}{{ a ~ b }}{% endmacro %}{{ f(1) }}{{ f(b=3, a=4) }}",
    "{{ messages | map(attribute='role') | join(',') }} {{ tools | tojson(indent=2) }}",
    "{%- if not messages -%}{{ raise_exception('no messages') }}{%- endif -%}"
    "{{ strftime_now('%Y-%m-%d') }} {{ 'a,b'.split(',') | list | length }}",
    "{% for m in messages %}{% if m.content is string %}{{ m.content[::-1] }}"
    "{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}"
    "{% generation %}{{ eos_token }}{% endgeneration %}{% endfor %}",
]
write("jinja", [t + "\n--context--\n" + chat_context for t in templates + snippets])

# --- admin API bodies (tests/gateway/control/admin_json_test.cc): the first byte picks the body ---
write("admin_api", [
    '\x00{"url":"http://10.0.0.7:8000","role":"decode","zone":"z1","rack":"r2",'
    '"labels":{"gpu":"h100"},"kv_capacity_blocks":4096,'
    '"kv_events":{"publisher":"tcp://10.0.0.7:5557","replay":"tcp://10.0.0.7:5558","topic":"kv"}}',
    '\x00{"url":"http://[::1]:8001"}',
    '\x01{"url":"http://h:1","kv_events":{"topic":"engine-3"}}',
    '\x02{"params":{"temperature":0.5},"saturation":{"kv_threshold":0.9}}',
    '\x02{"policy":"approx-prefix","saturation.queue_threshold":8}',
    '\x03{"policy":"kv-cost","params":{"alpha":1.5},"filters":["healthy","saturation"],'
    '"early_reject":{"enabled":true}}',
])


# --- What gateway replicas exchange (tests/core/cluster/*_test.cc) ---
def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def text(s):
    b = s.encode()
    return varint(len(b)) + b


def key(k):
    return struct.pack("<Q", k)


def routing_batch():
    routed = (bytes([1]) + varint(42) + text("http://10.0.0.7:8000") + text("") + varint(85)
              + varint(128) + varint(85) + varint(12000) + varint(3)
              + key(0x1111) + key(0x2222) + key(0x3333))
    done = bytes([2]) + varint(42) + varint(0)
    finished = bytes([3]) + varint(42) + varint(97)
    return (bytes([1]) + text("gw-1") + text("main") + varint(300) + varint(7000) + varint(3)
            + routed + done + finished)


def snapshot():
    body = (bytes([1]) + text("gw-a") + text("1700000000000-5") + varint(2)
            + text("http://e1:8000") + text("http://e2:8000") + varint(3))
    body += key(0x1111) + varint(0) + varint(2) + varint(0) + varint(20000) + varint(1) + varint(10000)
    body += key(0x2222) + varint(1) + varint(1) + varint(0) + varint(20000)
    body += key(0x3333) + varint(2) + varint(1) + varint(1) + varint(5)
    return body


def hot_list():
    tokens = varint(4) + b"".join(varint(t) for t in (1, 70000, 3, 4))
    return (bytes([1]) + text("gw-2") + varint(1700000000123) + varint(2)
            + key(7) + varint(2) + varint(3500) + tokens + varint(0)
            + key(11) + varint(1) + varint(2000) + varint(0) + text("You are a helpful assistant."))


write("cluster_wire", [bytes([0]) + routing_batch(), bytes([1]) + snapshot(),
                       bytes([2]) + hot_list()])


# --- The Endpoint Picker's ext_proc streams (tests/epp/exchange_test.cc,
# tests/integration/epp_conformance_test.py): two option bytes (epp_exchange_fuzz.cc),
# then each ProcessingRequest as a 2-byte little-endian length and its protobuf bytes,
# encoded by hand (field numbers of proto/envoy/service/ext_proc/v3 and
# proto/envoy/config/core/v3, google/protobuf/struct.proto).
def pb_len(field, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def pb_bool(field, value):
    return varint(field << 3) + varint(1) if value else b""


def pb_headers(pairs, eos=False):
    header_map = b"".join(pb_len(1, pb_len(1, k) + pb_len(3, v)) for k, v in pairs)
    return pb_len(1, header_map) + pb_bool(3, eos)


def pb_struct(fields):
    # Struct{map<string, Value> fields = 1}; a value is a string (string_value = 3) or a
    # list of strings (list_value = 6, ListValue{repeated Value values = 1}).
    out = b""
    for k, v in fields.items():
        if isinstance(v, list):
            value = pb_len(6, b"".join(pb_len(1, pb_len(3, e)) for e in v))
        else:
            value = pb_len(3, v)
        out += pb_len(1, pb_len(1, k) + pb_len(2, value))
    return out


def pb_metadata(namespaces):
    # Metadata{map<string, Struct> filter_metadata = 1}
    return pb_len(8, b"".join(pb_len(1, pb_len(1, ns) + pb_len(2, pb_struct(f)))
                              for ns, f in namespaces.items()))


def req_headers(pairs, eos=False, metadata=None):
    return pb_len(2, pb_headers(pairs, eos)) + (pb_metadata(metadata) if metadata else b"")


def resp_headers(pairs, eos=False, metadata=None):
    return pb_len(3, pb_headers(pairs, eos)) + (pb_metadata(metadata) if metadata else b"")


def req_body(body, eos):
    return pb_len(4, pb_len(1, body) + pb_bool(2, eos))


def resp_body(body, eos):
    return pb_len(5, pb_len(1, body) + pb_bool(2, eos))


def req_trailers():
    return pb_len(6, pb_len(1, b""))


def resp_trailers():
    return pb_len(7, pb_len(1, b""))


def ext_proc(options, dialect, messages):
    out = bytes([options, dialect])
    for m in messages:
        out += struct.pack("<H", len(m)) + m
    return out


chat_head = [(":method", "POST"), (":path", "/v1/chat/completions"), (":authority", "gw"),
             ("content-type", "application/json")]
chat_body = '{"model":"sim","messages":[{"role":"user","content":"Hello"}]}'
stream_body = '{"model":"sim","stream":true,"messages":[{"role":"user","content":"Hello"}]}'
answer = ('{"id":"c","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"}}],'
          '"usage":{"prompt_tokens":9,"completion_tokens":1,"total_tokens":10}}')
ok_json = [(":status", "200"), ("content-type", "application/json")]
ok_sse = [(":status", "200"), ("content-type", "text/event-stream")]
served = {"envoy.lb": {"x-gateway-destination-endpoint-served": "10.0.0.7:8000"}}
anthropic_sse = ('event: message_start\ndata: {"type":"message_start","message":{"usage":'
                 '{"input_tokens":9,"output_tokens":1}}}\n\n'
                 'event: content_block_delta\ndata: {"type":"content_block_delta","delta":'
                 '{"type":"text_delta","text":"Hi"}}\n\n'
                 'event: message_delta\ndata: {"type":"message_delta","usage":{"output_tokens":2}}\n\n'
                 'event: message_stop\ndata: {"type":"message_stop"}\n\n')
write("epp_exchange", [
    # A whole answer: headers, the body in two chunks, the response and its usage.
    ext_proc(0x00, 0, [req_headers(chat_head), req_body(chat_body[:20], False),
                       req_body(chat_body[20:], True), resp_headers(ok_json, metadata=served),
                       resp_body(answer, True)]),
    # A stream with two fallbacks, the objective and fairness headers, the usage chunk
    # stripped, the SSE body cut mid-event.
    ext_proc(0x80 | 0x40 | 0x20 | 0x02, 0,
             [req_headers(chat_head + [("x-gateway-inference-objective", "premium"),
                                       ("x-gateway-inference-fairness-id", "team-a")]),
              req_body(stream_body, True), resp_headers(ok_sse),
              resp_body(c1 + c2[:17], False), resp_body(c2[17:] + u, False),
              resp_body(done, True)]),
    # The subset hint, as a list and as one comma-separated string; the end on the headers.
    ext_proc(0x01, 0, [req_headers(chat_head, metadata={"envoy.lb.subset_hint": {
        "x-gateway-destination-endpoint-subset": ["10.0.0.7:8000", "10.0.0.8:8000"]}}),
        req_body(chat_body, True), resp_headers(ok_json + [("content-length", "0")], eos=True)]),
    ext_proc(0x00, 0, [req_headers(chat_head, metadata={"envoy.lb.subset_hint": {
        "x-gateway-destination-endpoint-subset": "10.0.0.7:8000, 10.0.0.9:8000"}}),
        req_body(chat_body, True)]),
    # Refused (429), no endpoint (503, a GET without a body), a body past the limit (413).
    ext_proc(0x04, 0, [req_headers(chat_head), req_body(chat_body, True),
                       resp_headers([(":status", "429")]), resp_body("{}", True)]),
    ext_proc(0x08, 0, [req_headers([(":method", "GET"), (":path", "/v1/models")], eos=True)]),
    ext_proc(0x10, 0, [req_headers(chat_head), req_body(chat_body + chat_body, False),
                       req_body(chat_body, True)]),
    # Trailers end both bodies.
    ext_proc(0x80, 0, [req_headers(chat_head), req_body(stream_body, False), req_trailers(),
                       resp_headers(ok_sse), resp_body(c1 + "data: {", False), resp_trailers()]),
    # An Anthropic stream, a Responses answer.
    ext_proc(0x80, 1, [req_headers([(":method", "POST"), (":path", "/v1/messages")]),
                       req_body('{"model":"sim","stream":true,"max_tokens":8,"messages":[]}', True),
                       resp_headers(ok_sse), resp_body(anthropic_sse, True)]),
    ext_proc(0x00, 2, [req_headers([(":method", "POST"), (":path", "/v1/responses")]),
                       req_body('{"model":"sim","input":"Hello"}', True), resp_headers(ok_json),
                       resp_body('{"id":"r","usage":{"input_tokens":3,"output_tokens":1}}', True)]),
    # Out of order, and bytes that are no message.
    ext_proc(0x00, 0, [req_body(chat_body, True)]),
    ext_proc(0x00, 0, [req_headers(chat_head), b"\xff\xff\xff"]),
])
