// `kvgate serve` with an HTTPS listener (a self-signed certificate made by the `openssl`
// CLI) in front of a `kvgate engine`, driven by the real `openai` npm client through an
// https.Agent that trusts only that certificate: whole and streamed chat over TLS, and a
// client that does not trust the certificate is refused.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import OpenAI from 'openai';
import { bin, start_engines, start_gateway, stop_started } from './support/kvgate.mjs';

let dir;
let base;
let ca;


// A fetch for the openai client that goes through node:https with `agent`, so the
// client trusts exactly the CA it is given (Node's global fetch reads extra CAs only at
// process start). The response body streams: SSE chunks arrive as they are sent.
function fetchThrough(agent) {
  return (url, init = {}) => new Promise((resolve, reject) => {
    const headers = Object.fromEntries(new Headers(init.headers ?? {}));
    const req = https.request(url, { method: init.method ?? 'GET', headers, agent, signal: init.signal }, (res) => {
      const h = new Headers();
      for (const [k, v] of Object.entries(res.headers)) {
        for (const one of [v].flat()) if (one !== undefined) h.append(k, one);
      }
      resolve(new Response(Readable.toWeb(res), { status: res.statusCode, headers: h }));
    });
    req.on('error', reject);
    req.end(init.body ?? undefined);
  });
}

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  dir = mkdtempSync(join(tmpdir(), 'kvgate-e2e-tls-'));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
    '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')], { stdio: 'ignore' });
  ca = readFileSync(join(dir, 'cert.pem'));
  const [engine] = await start_engines(1);
  ({ base } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0, tls: {cert: cert.pem, key: key.pem}}]
pools:
  main:
    router: {policy: round-robin}
    endpoints: [${engine}]
models:
  - {name: qwen-sim, pool: main}
`, { dir, pattern: /listening on (https:\/\/[^\s]+)/ }));
});

after(async () => {
  await stop_started();
  rmSync(dir, { recursive: true, force: true });
});

const client = (agent) => new OpenAI({
  baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, fetch: fetchThrough(agent),
});

test('the gateway prints an https URL', () => {
  assert.match(base, /^https:\/\/127\.0\.0\.1:\d+$/);
});

test('chat over HTTPS, whole and streamed, with the test CA trusted', async () => {
  const agent = new https.Agent({ ca, keepAlive: true });
  const whole = await client(agent).chat.completions.create({
    model: 'qwen-sim', messages: [{ role: 'user', content: 'Over TLS.' }], max_tokens: 4,
  });
  assert.equal(whole.usage.completion_tokens, 4);
  const stream = await client(agent).chat.completions.create({
    model: 'qwen-sim', messages: [{ role: 'user', content: 'Stream over TLS.' }], max_tokens: 6,
    stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let chunks = 0;
  let usage;
  for await (const c of stream) {
    chunks++;
    if (c.usage) usage = c.usage;
    text += c.choices[0]?.delta?.content ?? '';
  }
  assert.ok(chunks >= 6, `chunks ${chunks}`);
  assert.ok(text.length > 0);
  assert.equal(usage.completion_tokens, 6);
  agent.destroy();
});

test('a client that does not trust the certificate is refused', async () => {
  const agent = new https.Agent({ keepAlive: false });  // system CAs only
  await assert.rejects(
    client(agent).chat.completions.create({
      model: 'qwen-sim', messages: [{ role: 'user', content: 'x' }], max_tokens: 1,
    }),
    (e) => e instanceof OpenAI.APIConnectionError);
  agent.destroy();
});
