#!/usr/bin/python3
"""Conformance of `kvgate epp` to the Endpoint Picker protocol (docs/epp.md).

Plays the data plane's (Envoy's) role over gRPC, with Debian's python3-grpcio and
python3-protobuf and the message modules the build generates from proto/ (protoc
--python_out, KVGATE_PROTO_PY), against `kvgate epp` routing two real `kvgate engine`s:
request headers, body chunks, end of stream; the request sent to the picked engine over
HTTP, as Envoy would; its response headers and body back through the EPP. No gRPC stubs:
the method is called by its path with the messages' own serializers.

Checks: the health service's names; a pick is one of the engines, in the header and the
dynamic metadata alike, and the body comes back as it goes upstream; the pick equals the
admin route view (the router's view of the same request, served by the same process's
admin API, as `kvgate serve` serves it); the subset hint; 503 with no endpoint to pick
(an empty subset, or none of the pool's); 404 for an unknown model; the response path
passes the answer through (a stream's usage chunk the gateway asked for is dropped);
malformed and out-of-order messages end the stream with INVALID_ARGUMENT and the server
lives on; a data plane that leaves mid-request does not hurt it; a disaggregated pool's
pick names its prefill engine (x-prefiller-host-port) and a data-parallel engine's pick its
rank (x-data-parallel-rank), which the engine serves the request on; relayed paths are picked
as serve relays them (/tokenize in turn; a stored response GET, and previous_response_id,
to the engine that answered the Responses request). Then epp.tls: health and a pick over
TLS with certificate files made by Debian's openssl, verified; the self-signed mode,
pinned; the plaintext health port (the health service alone: ext_proc there is
UNIMPLEMENTED); readiness NOT_SERVING until a discovery file's first list.

Run by ctest (entry `epp_conformance`, label integration) with KVGATE_BIN and
KVGATE_PROTO_PY set; by hand:
  KVGATE_BIN=build/kvgate KVGATE_PROTO_PY=build/generated/proto \
      /usr/bin/python3 tests/integration/epp_conformance_test.py
"""

import json
import os
import queue
import re
import socket
import ssl
import subprocess
import sys
import shutil
import tempfile
import threading
import time
import unittest
import urllib.request

sys.path.insert(0, os.environ.get("KVGATE_PROTO_PY", "build/generated/proto"))

import grpc  # noqa: E402
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb  # noqa: E402

KVGATE = os.environ.get("KVGATE_BIN", "build/kvgate")
PROCESS = "/envoy.service.ext_proc.v3.ExternalProcessor/Process"
DEST = "x-gateway-destination-endpoint"
SUBSET_NS = "envoy.lb.subset_hint"
SUBSET_KEY = "x-gateway-destination-endpoint-subset"


class Child:
    """A kvgate process whose stdout lines are collected by a thread."""

    def __init__(self, args):
        self.proc = subprocess.Popen([KVGATE] + args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        self.seen = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for(self, pattern, timeout=30):
        """The first match of `pattern` in the output, waiting up to `timeout` s."""
        deadline = time.time() + timeout
        rx = re.compile(pattern)
        for line in self.seen:
            m = rx.search(line)
            if m:
                return m
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.seen.append(line)
            m = rx.search(line)
            if m:
                return m
        raise AssertionError(f"no line matching {pattern!r}; output: {''.join(self.seen)}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def http(method, url, body=None, headers=None):
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def header_map(pairs):
    m = pb.HttpHeaders()
    for k, v in pairs:
        h = m.headers.headers.add()
        h.key = k
        h.raw_value = v.encode()
    return m


class Stream:
    """One ext_proc stream: messages go in as the test sends them, answers come out."""

    def __init__(self, channel, serializer=None):
        self.out = queue.Queue()
        call = channel.stream_stream(
            PROCESS,
            request_serializer=serializer or (lambda m: m.SerializeToString()),
            response_deserializer=pb.ProcessingResponse.FromString)
        self.responses = call(iter(self.out.get, None))

    def send(self, message):
        self.out.put(message)

    def recv(self):
        return next(self.responses)

    def close(self):
        self.out.put(None)

    def cancel(self):
        self.responses.cancel()


def request_headers(path="/v1/chat/completions", method="POST", eos=False, subset=None):
    r = pb.ProcessingRequest()
    r.request_headers.CopyFrom(header_map([(":method", method), (":path", path),
                                           (":authority", "gateway.example"),
                                           ("content-type", "application/json")]))
    r.request_headers.end_of_stream = eos
    if subset is not None:
        r.metadata_context.filter_metadata[SUBSET_NS].update({SUBSET_KEY: subset})
    return r


def request_body(chunk, eos):
    r = pb.ProcessingRequest()
    r.request_body.body = chunk
    r.request_body.end_of_stream = eos
    return r


def header_value(mutation, key):
    for o in mutation.set_headers:
        if o.header.key.lower() == key:
            return (o.header.raw_value or o.header.value.encode()).decode()
    return None


def self_made_certificate(directory):
    """A certificate and key for localhost and 127.0.0.1, made with Debian's openssl."""
    cert = os.path.join(directory, "tls.crt")
    key = os.path.join(directory, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def presented_certificate(port):
    """The certificate a TLS server on 127.0.0.1:`port` presents, unverified (to pin a
    self-signed one as the client's root)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            der = tls.getpeercert(binary_form=True)
    return ssl.DER_cert_to_PEM_cert(der).encode()


def tls_channel(port, root_pem):
    creds = grpc.ssl_channel_credentials(root_certificates=root_pem)
    return grpc.secure_channel(f"127.0.0.1:{port}", creds,
                               options=[("grpc.ssl_target_name_override", "localhost")])


def health_check(channel, name):
    """grpc.health.v1 Check of `name` on `channel`: 1 SERVING, 2 NOT_SERVING."""
    check = channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=lambda n: (b"\x0a" + bytes([len(n)]) + n.encode()) if n else b"",
        response_deserializer=lambda b: b)
    raw = check(name, timeout=10)
    return raw[1] if len(raw) >= 2 and raw[0] == 0x08 else 0


def wait_health(channel, name, want, timeout=20):
    deadline = time.time() + timeout
    got = None
    while time.time() < deadline:
        got = health_check(channel, name)
        if got == want:
            return
        time.sleep(0.05)
    raise AssertionError(f"health {name!r}: {got}, want {want}")


def start_engine():
    """A `kvgate engine` serving the model sim on an ephemeral port: the child and its URL."""
    e = Child(["engine", "--port", "0", "--time-scale", "0.01", "--model", "sim",
               "--block-size", "16"])
    return e, e.wait_for(r"listening on (http://\S+)").group(1)


def write_config(directory, epp, pool, name="epp.yaml", admin=False):
    """A kvgate config: the `epp:` flow mapping `epp`, the admin API on an ephemeral port
    when `admin`, one pool `main` of `pool` (YAML lines, indented four spaces) and the
    model sim."""
    config = os.path.join(directory, name)
    with open(config, "w") as f:
        f.write(f"epp: {epp}\n"
                + ("admin: {address: 127.0.0.1, port: 0}\n" if admin else "")
                + "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 1000}\n"
                "pools:\n  main:\n    block_size: 16\n" + pool +
                "models:\n  - name: sim\n    pool: main\n")
    return config


class EppCase(unittest.TestCase):
    """The data plane's helpers over `self.channel`; no tests of its own."""

    channel = None

    def route(self, body, chunks=2, subset=None, path="/v1/chat/completions"):
        """Sends a request's headers and body (in `chunks` pieces) on a new stream; returns
        the stream and the responses to the request path."""
        s = Stream(self.channel)
        s.send(request_headers(path=path, subset=subset))
        data = json.dumps(body).encode()
        step = max(1, len(data) // chunks)
        pieces = [data[i:i + step] for i in range(0, len(data), step)]
        for i, p in enumerate(pieces):
            s.send(request_body(p, eos=i == len(pieces) - 1))
        first = s.recv()
        if first.HasField("immediate_response"):
            return s, [first]
        return s, [first, s.recv()]

    def route_get(self, path):
        """A request without a body (its headers carry the end of stream): the stream and
        its one response to the request path."""
        s = Stream(self.channel)
        s.send(request_headers(path=path, method="GET", eos=True))
        return s, [s.recv()]

    def picked(self, responses):
        h = responses[0]
        self.assertTrue(h.HasField("request_headers"), h)
        common = h.request_headers.response
        dest = header_value(common.header_mutation, DEST)
        meta = h.dynamic_metadata.fields["envoy.lb"].struct_value.fields[DEST].string_value
        self.assertEqual(dest, meta, "header and dynamic metadata must carry the same value")
        self.assertTrue(common.clear_route_cache)
        self.last_endpoints = dest.split(",")
        if len(responses) < 2:  # routed on its headers alone (no body)
            return self.last_endpoints[0], b""
        b = responses[1]
        self.assertTrue(b.HasField("request_body"), b)
        streamed = b.request_body.response.body_mutation.streamed_response
        self.assertTrue(streamed.end_of_stream)
        self.assertEqual(header_value(common.header_mutation, "content-length"),
                         str(len(streamed.body)))
        # The pick first, then the fallbacks (epp.fallbacks).
        return self.last_endpoints[0], streamed.body

    def answer(self, s, dest, upstream_body, path="/v1/chat/completions", method="POST",
               set_headers=None):
        """As Envoy: the request to `dest` (with `set_headers`, those the EPP set), its
        answer through the EPP; returns the bytes the EPP passed back. The engine's answer
        headers are kept in self.engine_headers."""
        status, headers, body = http(method, f"http://{dest}{path}",
                                     upstream_body if method == "POST" else None,
                                     {"Content-Type": "application/json", **(set_headers or {})})
        self.engine_headers = {k.lower(): v for k, v in headers.items()}
        r = pb.ProcessingRequest()
        r.response_headers.CopyFrom(header_map(
            [(":status", str(status)),
             ("content-type", headers.get("Content-Type", "application/json"))]))
        r.metadata_context.filter_metadata["envoy.lb"].update(
            {"x-gateway-destination-endpoint-served": dest})
        s.send(r)
        h = s.recv()
        self.assertTrue(h.HasField("response_headers"), h)
        passed = b""
        pieces = [body[i:i + 97] for i in range(0, len(body), 97)] or [b""]
        for i, p in enumerate(pieces):
            m = pb.ProcessingRequest()
            m.response_body.body = p
            m.response_body.end_of_stream = i == len(pieces) - 1
            s.send(m)
            out = s.recv()
            self.assertTrue(out.HasField("response_body"), out)
            passed += out.response_body.response.body_mutation.streamed_response.body
        s.close()
        return status, body, passed

    def health(self, name):
        return health_check(self.channel, name)


class EppConformance(EppCase):
    @classmethod
    def setUpClass(cls):
        cls.engines, cls.urls = zip(*[start_engine() for _ in range(2)])
        cls.hostports = [u[len("http://"):] for u in cls.urls]
        cls.dir = tempfile.mkdtemp(prefix="kvgate-epp-")
        config = write_config(
            cls.dir, "{address: 127.0.0.1, port: 0, fallbacks: 1}",
            "    router:\n      policy: kv-cost\n      overlap: approx\n"
            "      filters: []\n    endpoints:\n"
            + "".join(f"      - {u}\n" for u in cls.urls), admin=True)
        cls.epp = Child(["epp", config])
        port = cls.epp.wait_for(r"ext_proc gRPC on 127\.0\.0\.1:(\d+)").group(1)
        cls.admin = cls.epp.wait_for(r"admin API on (http://\S+)").group(1)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(cls.channel).result(timeout=20)
        wait_health(cls.channel, "readiness", 1)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.epp.stop()
        for e in cls.engines:
            e.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    # --- helpers ---------------------------------------------------------------------

    def route_view(self, body):
        status, _, out = http("POST", f"{self.admin}/admin/pools/main/route",
                              json.dumps(body).encode(), {"Content-Type": "application/json"})
        self.assertEqual(status, 200, out)
        decision = json.loads(out)["decision"]
        self.assertTrue(decision["accepted"], decision)
        return decision["url"][len("http://"):]

    # --- tests -------------------------------------------------------------------------

    def test_health_names(self):
        for name in ["", "liveness", "readiness", "envoy.service.ext_proc.v3.ExternalProcessor"]:
            self.assertEqual(self.health(name), 1, f"{name!r} must be SERVING")

    def test_pick_whole_answer_and_usage(self):
        body = {"model": "sim", "max_tokens": 4,
                "messages": [{"role": "user", "content": "hello from the data plane"}]}
        s, rs = self.route(body, chunks=3)
        dest, upstream = self.picked(rs)
        self.assertIn(dest, self.hostports)
        self.assertEqual(json.loads(upstream)["model"], "sim")
        status, body_bytes, passed = self.answer(s, dest, upstream)
        self.assertEqual(status, 200, body_bytes)
        self.assertEqual(passed, body_bytes, "a whole answer passes unchanged")

    def test_stream_passes_through(self):
        body = {"model": "sim", "max_tokens": 5, "stream": True,
                "messages": [{"role": "user", "content": "stream me something"}]}
        s, rs = self.route(body)
        dest, upstream = self.picked(rs)
        self.assertIn(dest, self.hostports)
        # The gateway asks for usage on streams; the client did not: its chunk is dropped.
        self.assertTrue(json.loads(upstream)["stream_options"]["include_usage"])
        status, raw, passed = self.answer(s, dest, upstream)
        self.assertEqual(status, 200)
        self.assertIn(b"data: [DONE]", passed)
        self.assertNotIn(b'"choices":[]', passed.replace(b" ", b""))
        self.assertLessEqual(len(passed), len(raw))

    def test_pick_equals_admin_route_view(self):
        prefix = " ".join(f"shared-prefix-word-{i}" for i in range(120))
        first = {"model": "sim", "max_tokens": 2, "prompt": prefix + " first"}
        s, rs = self.route(first, path="/v1/completions")
        dest, upstream = self.picked(rs)
        self.answer(s, dest, upstream, path="/v1/completions")
        # The end of an answer reaches the router through the gateway's threads: the view
        # and the pick must see the same state.
        time.sleep(0.3)
        for tail in ["second", "third", "fourth"]:
            body = {"model": "sim", "max_tokens": 2, "prompt": prefix + " " + tail}
            view = self.route_view(body)
            s, rs = self.route(body, path="/v1/completions")
            got, upstream = self.picked(rs)
            self.assertEqual(got, view, "the EPP's pick must be the router's view of it")
            self.answer(s, got, upstream, path="/v1/completions")
            time.sleep(0.3)

    def test_subset_hint(self):
        body = {"model": "sim", "max_tokens": 2,
                "messages": [{"role": "user", "content": "only the second engine"}]}
        for target in self.hostports:
            for _ in range(3):
                s, rs = self.route(body, subset=[target])
                dest, upstream = self.picked(rs)
                self.assertEqual(dest, target)
                self.answer(s, dest, upstream)

    def test_fallbacks_follow_the_pick(self):
        body = {"model": "sim", "max_tokens": 2,
                "messages": [{"role": "user", "content": "a pick and a fallback"}]}
        s, rs = self.route(body)
        dest, upstream = self.picked(rs)
        # Two engines, one fallback asked: the other engine follows the pick.
        self.assertEqual(len(self.last_endpoints), 2, self.last_endpoints)
        self.assertEqual(sorted(self.last_endpoints), sorted(self.hostports))
        self.answer(s, dest, upstream)
        # The subset hint leaves one endpoint: no fallback.
        s, rs = self.route(body, subset=[self.hostports[1]])
        dest, upstream = self.picked(rs)
        self.assertEqual(self.last_endpoints, [self.hostports[1]])
        self.answer(s, dest, upstream)

    def test_503_when_no_endpoint(self):
        body = {"model": "sim", "max_tokens": 2,
                "messages": [{"role": "user", "content": "nowhere to go"}]}
        for subset in [[], ["10.255.255.1:1"]]:
            s, rs = self.route(body, subset=subset)
            self.assertEqual(len(rs), 1)
            self.assertTrue(rs[0].HasField("immediate_response"), rs[0])
            self.assertEqual(rs[0].immediate_response.status.code, 503)
            s.close()

    def test_unknown_model_is_refused_as_serve_refuses_it(self):
        s, rs = self.route({"model": "no-such-model", "prompt": "x"}, path="/v1/completions")
        self.assertTrue(rs[0].HasField("immediate_response"), rs[0])
        self.assertEqual(rs[0].immediate_response.status.code, 404)
        self.assertIn(b"no-such-model", rs[0].immediate_response.body)
        s.close()

    def test_malformed_messages_do_not_crash(self):
        # No request field set.
        s = Stream(self.channel)
        s.send(pb.ProcessingRequest())
        with self.assertRaises(grpc.RpcError) as e:
            s.recv()
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # A body before the headers.
        s = Stream(self.channel)
        s.send(request_body(b"{}", eos=True))
        with self.assertRaises(grpc.RpcError) as e:
            s.recv()
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # Bytes that are no protobuf message at all.
        s = Stream(self.channel, serializer=lambda b: b)
        s.send(b"\xff\xff\xff\xff\x0f")
        # gRPC's server cannot parse it and ends the read side: the stream is refused
        # (an error status, or its end with no answer at all), never answered.
        try:
            r = s.recv()
            self.fail(f"an answer to bytes that are no message: {r}")
        except (grpc.RpcError, StopIteration):
            pass
        # A body that is no JSON: refused as serve refuses it.
        s = Stream(self.channel)
        s.send(request_headers())
        s.send(request_body(b"{not json", eos=True))
        r = s.recv()
        self.assertTrue(r.HasField("immediate_response"), r)
        self.assertEqual(r.immediate_response.status.code, 400)
        s.close()
        self.assertEqual(self.health("liveness"), 1)
        self.assertIsNone(self.epp.proc.poll(), "kvgate epp must still run")

    def test_tokenize_is_picked_as_serve_relays_it(self):
        seen = set()
        for _ in range(4):
            s, rs = self.route({"model": "sim", "prompt": "count these words"}, path="/tokenize")
            dest, upstream = self.picked(rs)
            self.assertIn(dest, self.hostports)
            self.assertEqual(self.last_endpoints, [dest], "a relayed path has no fallbacks")
            seen.add(dest)
            status, raw, passed = self.answer(s, dest, upstream, path="/tokenize")
            self.assertEqual(status, 200, raw)
            self.assertEqual(passed, raw)
            self.assertIn(b"tokens", raw)
        # As serve's relay: the pool's healthy endpoints in turn.
        self.assertEqual(seen, set(self.hostports))

    def test_stored_response_goes_to_the_endpoint_that_answered_it(self):
        body = {"model": "sim", "input": "remember me", "max_output_tokens": 3}
        s, rs = self.route(body, path="/v1/responses")
        dest, upstream = self.picked(rs)
        status, raw, _ = self.answer(s, dest, upstream, path="/v1/responses")
        self.assertEqual(status, 200, raw)
        rid = json.loads(raw)["id"]
        # The end of the answer reaches the gateway through its threads.
        time.sleep(0.3)
        for _ in range(3):
            s, rs = self.route_get(f"/v1/responses/{rid}")
            got, _ = self.picked(rs)
            self.assertEqual(got, dest, "the stored response must go to the engine holding it")
            status, raw, passed = self.answer(s, got, None, path=f"/v1/responses/{rid}",
                                              method="GET")
            self.assertEqual(status, 200, raw)
            self.assertEqual(json.loads(passed)["id"], rid)
        # The conversation goes on where it is held.
        follow = {"model": "sim", "input": "and then?", "previous_response_id": rid,
                  "max_output_tokens": 2}
        s, rs = self.route(follow, path="/v1/responses")
        got, upstream = self.picked(rs)
        self.assertEqual(got, dest, "previous_response_id goes back to the engine holding it")
        status, raw, _ = self.answer(s, got, upstream, path="/v1/responses")
        self.assertEqual(status, 200, raw)
        # An id no endpoint answered: 404 from the picker itself, as serve answers it.
        s, rs = self.route_get("/v1/responses/resp_0123456789abcdef")
        self.assertTrue(rs[0].HasField("immediate_response"), rs[0])
        self.assertEqual(rs[0].immediate_response.status.code, 404)
        s.close()

    def test_data_plane_leaving_mid_request(self):
        for _ in range(5):
            s = Stream(self.channel)
            s.send(request_headers())
            s.send(request_body(b'{"model":"sim","messages":[{"role":"user",', eos=False))
            time.sleep(0.02)
            s.cancel()
        # A pick whose answer never comes: settled when the stream goes.
        body = {"model": "sim", "max_tokens": 2,
                "messages": [{"role": "user", "content": "picked, then gone"}]}
        s, rs = self.route(body)
        self.picked(rs)
        s.cancel()
        self.assertEqual(self.health("readiness"), 1)
        s, rs = self.route(body)
        dest, upstream = self.picked(rs)
        status, _, _ = self.answer(s, dest, upstream)
        self.assertEqual(status, 200)


PREFILLER = "x-prefiller-host-port"
RANK = "x-data-parallel-rank"


class EppPdAndRanks(EppCase):
    """The pool's own headers in the answer, with real engines: a disaggregated pool (one
    `kvgate engine --role prefill`, one `--role decode`) answers with the decode engine as
    the destination and the prefill engine in x-prefiller-host-port; a pool of one engine
    with two data-parallel ranks (`--data-parallel-size 2`, the endpoint's
    data_parallel_size) answers with the engine's address and the rank in
    x-data-parallel-rank, which the engine then serves the request on. Each header is
    removed where the pick has none (a client's own must not reach the engine)."""

    @classmethod
    def setUpClass(cls):
        def engine(model, *extra):
            e = Child(["engine", "--port", "0", "--time-scale", "0.01", "--model", model,
                       "--block-size", "16", *extra])
            return e, e.wait_for(r"listening on (http://\S+)").group(1)

        located = ["--rack", "r1", "--zone", "z1"]
        cls.prefill, prefill_url = engine("pdsim", "--role", "prefill", *located)
        cls.decode, decode_url = engine("pdsim", "--role", "decode", *located)
        cls.ranked, ranked_url = engine("dpsim", "--data-parallel-size", "2")
        cls.prefill_hostport = prefill_url[len("http://"):]
        cls.decode_hostport = decode_url[len("http://"):]
        cls.ranked_hostport = ranked_url[len("http://"):]
        cls.dir = tempfile.mkdtemp(prefix="kvgate-epp-pd-")
        router = "    router: {policy: round-robin, overlap: approx}\n"
        config = os.path.join(cls.dir, "epp.yaml")
        with open(config, "w") as f:
            f.write("epp: {address: 127.0.0.1, port: 0}\n"
                    "timeouts: {header_ms: 5000, drain_ms: 2000, connect_ms: 1000}\n"
                    "pools:\n"
                    "  pd:\n    block_size: 16\n    scrape_interval_ms: 50\n" + router +
                    "    endpoints:\n"
                    f"      - {{url: {prefill_url}, role: prefill, zone: z1, rack: r1}}\n"
                    f"      - {{url: {decode_url}, role: decode, zone: z1, rack: r1}}\n"
                    "  dp:\n    block_size: 16\n    scrape_interval_ms: 50\n" + router +
                    "    endpoints:\n"
                    f"      - {{url: {ranked_url}, data_parallel_size: 2}}\n"
                    "models:\n  - name: pdsim\n    pool: pd\n"
                    "  - name: dpsim\n    pool: dp\n")
        cls.epp = Child(["epp", config])
        port = cls.epp.wait_for(r"ext_proc gRPC on 127\.0\.0\.1:(\d+)").group(1)
        cls.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(cls.channel).result(timeout=20)
        wait_health(cls.channel, "readiness", 1)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.epp.stop()
        for e in (cls.prefill, cls.decode, cls.ranked):
            e.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def mutation(self, responses):
        return responses[0].request_headers.response.header_mutation

    def test_disaggregated_pick_names_the_prefill_engine(self):
        for i in range(2):
            body = {"model": "pdsim", "max_tokens": 2, "messages": [
                {"role": "user", "content": " ".join(f"pd-{i}-word-{j}" for j in range(80))}]}
            s, rs = self.route(body)
            dest, upstream = self.picked(rs)
            m = self.mutation(rs)
            self.assertEqual(dest, self.decode_hostport, "the decode engine is the destination")
            self.assertEqual(header_value(m, PREFILLER), self.prefill_hostport, m)
            self.assertIsNone(header_value(m, RANK), m)
            self.assertIn(RANK, list(m.remove_headers), "no rank: a client's must not pass")
            # As Envoy without llm-d's sidecar: the decode engine, which then prefills itself.
            status, raw, passed = self.answer(s, dest, upstream)
            self.assertEqual(status, 200, passed)
            self.assertEqual(passed, raw, "a whole answer passes unchanged")

    def test_rank_pick_names_the_rank_the_engine_serves_it_on(self):
        ranks = set()
        for i in range(4):
            body = {"model": "dpsim", "max_tokens": 1, "prompt": f"ranked request {i}"}
            s, rs = self.route(body, path="/v1/completions")
            dest, upstream = self.picked(rs)
            m = self.mutation(rs)
            self.assertEqual(dest, self.ranked_hostport, "a rank's destination is its engine's")
            rank = header_value(m, RANK)
            self.assertIn(rank, ("0", "1"), m)
            self.assertIsNone(header_value(m, PREFILLER), m)
            self.assertIn(PREFILLER, list(m.remove_headers), m)
            # As Envoy: the request with the headers the EPP set; the engine serves it on
            # that rank (its answer names the rank it ran on).
            status, _, passed = self.answer(s, dest, upstream, path="/v1/completions",
                                            set_headers={RANK: rank})
            self.assertEqual(status, 200, passed)
            self.assertEqual(self.engine_headers.get("x-kvgate-dp-rank"), rank)
            ranks.add(rank)
        self.assertEqual(ranks, {"0", "1"}, "round-robin over the engine's two ranks")


class EppTls(EppCase):
    """epp.tls with certificate files (made here with openssl): health and a pick over
    TLS, verified against the certificate; a plaintext client is refused."""

    @classmethod
    def setUpClass(cls):
        cls.engine, url = start_engine()
        cls.hostport = url[len("http://"):]
        cls.dir = tempfile.mkdtemp(prefix="kvgate-epp-tls-")
        cert, key = self_made_certificate(cls.dir)
        config = write_config(
            cls.dir, f"{{address: 127.0.0.1, port: 0, tls: {{cert: {cert}, key: {key}}}}}",
            f"    endpoints: [{url}]\n")
        cls.epp = Child(["epp", config])
        port = cls.epp.wait_for(r"ext_proc gRPC on 127\.0\.0\.1:(\d+) \(TLS\)").group(1)
        with open(cert, "rb") as f:
            cls.channel = tls_channel(port, f.read())
        grpc.channel_ready_future(cls.channel).result(timeout=20)
        cls.port = port

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.epp.stop()
        cls.engine.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_health_over_tls(self):
        wait_health(self.channel, "readiness", 1)
        for name in ["", "liveness", "envoy.service.ext_proc.v3.ExternalProcessor"]:
            self.assertEqual(self.health(name), 1, f"{name!r} must be SERVING")

    def test_pick_over_tls(self):
        wait_health(self.channel, "readiness", 1)
        body = {"model": "sim", "max_tokens": 3,
                "messages": [{"role": "user", "content": "over tls"}]}
        s, rs = self.route(body)
        dest, upstream = self.picked(rs)
        self.assertEqual(dest, self.hostport)
        status, raw, passed = self.answer(s, dest, upstream)
        self.assertEqual(status, 200, raw)
        self.assertEqual(passed, raw)

    def test_plaintext_client_is_refused(self):
        plain = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        try:
            with self.assertRaises(grpc.RpcError):
                health_check(plain, "liveness")
        finally:
            plain.close()


class EppSelfSignedAndReadiness(EppCase):
    """epp.tls: {self_signed: true} with a plaintext health port, on a pool whose only
    endpoints come from a discovery file that does not exist yet: readiness (and "")
    is NOT_SERVING until discovery's first list, liveness SERVING throughout; then
    SERVING, and a pick over TLS pinned to the certificate the picker made."""

    @classmethod
    def setUpClass(cls):
        cls.engine, cls.url = start_engine()
        cls.hostport = cls.url[len("http://"):]
        cls.dir = tempfile.mkdtemp(prefix="kvgate-epp-ready-")
        cls.endpoints_file = os.path.join(cls.dir, "endpoints.yaml")
        config = write_config(
            cls.dir, "{address: 127.0.0.1, port: 0, health_port: 0, tls: {self_signed: true}}",
            "    discovery:\n      sources:\n"
            f"        - {{kind: file, path: {cls.endpoints_file}, settle_ms: 20}}\n")
        cls.epp = Child(["epp", config])
        port = cls.epp.wait_for(
            r"ext_proc gRPC on 127\.0\.0\.1:(\d+) \(TLS, self-signed\)").group(1)
        health_port = cls.epp.wait_for(r"gRPC health on 127\.0\.0\.1:(\d+)").group(1)
        cls.health_channel = grpc.insecure_channel(f"127.0.0.1:{health_port}")
        grpc.channel_ready_future(cls.health_channel).result(timeout=20)
        cls.channel = tls_channel(port, presented_certificate(int(port)))
        grpc.channel_ready_future(cls.channel).result(timeout=20)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        cls.health_channel.close()
        cls.epp.stop()
        cls.engine.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_ready_after_discovery_first_list(self):
        # No file yet: the pool's one source has produced no list.
        time.sleep(0.5)
        for channel in (self.health_channel, self.channel):
            self.assertEqual(health_check(channel, "liveness"), 1)
            self.assertEqual(health_check(channel, "readiness"), 2)
            self.assertEqual(health_check(channel, ""), 2)
            self.assertEqual(
                health_check(channel, "envoy.service.ext_proc.v3.ExternalProcessor"), 2)
        # The file appears (renamed over, as docs/discovery.md recommends).
        tmp = self.endpoints_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"endpoints:\n  - {self.url}\n")
        os.rename(tmp, self.endpoints_file)
        wait_health(self.health_channel, "readiness", 1)
        for channel in (self.health_channel, self.channel):
            self.assertEqual(health_check(channel, ""), 1)
            self.assertEqual(health_check(channel, "readiness"), 1)
        # A pick over TLS, verified against the picker's own certificate. The endpoint
        # joins the pool right after the list is taken.
        body = {"model": "sim", "max_tokens": 3,
                "messages": [{"role": "user", "content": "self-signed"}]}
        deadline = time.time() + 10
        while True:
            s, rs = self.route(body)
            if not rs[0].HasField("immediate_response") or time.time() > deadline:
                break
            s.close()
            time.sleep(0.05)
        dest, upstream = self.picked(rs)
        self.assertEqual(dest, self.hostport)
        status, raw, _ = self.answer(s, dest, upstream)
        self.assertEqual(status, 200, raw)

    def test_health_port_serves_the_health_service_alone(self):
        # ext_proc is a method the health port's server does not know: gRPC itself
        # answers UNIMPLEMENTED, before any message is read.
        s = Stream(self.health_channel)
        s.send(request_headers(eos=True))
        s.close()
        with self.assertRaises(grpc.RpcError) as caught:
            s.recv()
        self.assertEqual(caught.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        # A name the server does not know: NOT_FOUND, as gRPC's own health service.
        with self.assertRaises(grpc.RpcError) as caught:
            health_check(self.health_channel, "no.such.Service")
        self.assertEqual(caught.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(health_check(self.health_channel, "liveness"), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
