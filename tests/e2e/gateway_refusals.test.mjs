// Refusals that arrive: `kvgate serve` refuses a request on its head (413 for a body over
// limits.max_body_bytes, 401 for a missing or wrong API key) while the client is still
// sending the body, and the official `openai` client and Python's urllib both read the
// status and the OpenAI-style error instead of a reset connection (the server closes
// lingering, RFC 9112 section 9.6).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync, execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';

const bin = process.env.KVGATE_BIN;
const source = process.env.KVGATE_SOURCE_DIR;
let gateway;
let base;
let key;

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  const dir = mkdtempSync(join(tmpdir(), 'kvgate-refusals-'));
  key = execFileSync(bin, ['keys', 'add', '--tenant', 't', '--file', join(dir, 'keys.yaml')],
    { stdio: ['ignore', 'pipe', 'ignore'] }).toString().trim();
  const config = join(dir, 'gateway.yaml');
  // No request here reaches an endpoint: every one is refused on its head.
  writeFileSync(config, `listeners: [{address: 127.0.0.1, port: 0}]
keys_file: keys.yaml
pools:
  main:
    endpoints: [http://127.0.0.1:9]
models:
  - {name: qwen, pool: main}
`);
  gateway = spawn(bin, ['serve', config], { stdio: ['ignore', 'pipe', 'pipe'] });
  base = await new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`gateway did not start: ${out} ${err}`)), 20000);
    gateway.stderr.on('data', (d) => { err += d; });
    gateway.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    gateway.on('exit', (code) => { clearTimeout(timer); reject(new Error(`exited ${code}: ${err}`)); });
  });
});

after(async () => {
  const exited = new Promise((r) => gateway.once('exit', r));
  gateway.kill('SIGTERM');
  await exited;
});

const mib = (n) => 'x'.repeat(n * 1024 * 1024);

async function openaiStatus(apiKey, sizeMib) {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
  try {
    await client.chat.completions.create({ model: 'qwen', messages: [{ role: 'user', content: mib(sizeMib) }] });
    return { status: 200 };
  } catch (e) {
    return { status: e.status, error: e.error, name: e.constructor.name, message: e.message };
  }
}

async function urllibStatus(apiKey, sizeMib) {
  const { stdout } = await promisify(execFile)('python3',
    [join(source, 'tests/e2e/support/urllib_post.py'), `${base}/v1/chat/completions`, apiKey, String(sizeMib)],
    { maxBuffer: 1 << 20 });
  return JSON.parse(stdout);
}

for (const size of [9, 64]) {
  test(`openai client reads the 413 for a ${size} MiB body`, async () => {
    for (let i = 0; i < 3; i++) {
      const r = await openaiStatus(key, size);
      assert.equal(r.status, 413, `try ${i}: ${r.name} ${r.message}`);
      assert.equal(r.error.message, 'request body exceeds 8388608 bytes');
      assert.equal(r.error.type, 'BadRequestError');
    }
  });

  test(`urllib reads the 413 for a ${size} MiB body`, async () => {
    for (let i = 0; i < 3; i++) {
      const r = await urllibStatus(key, size);
      assert.equal(r.status, 413, `try ${i}: ${JSON.stringify(r)}`);
      assert.equal(JSON.parse(r.body).error.message, 'request body exceeds 8388608 bytes');
    }
  });
}

test('a wrong or missing key is refused with 401 before a 6 MiB body is read', async () => {
  for (const apiKey of ['kvg-wrong', '']) {
    const viaOpenai = await openaiStatus(apiKey || 'placeholder', 6);
    assert.equal(viaOpenai.status, 401, `${viaOpenai.name} ${viaOpenai.message}`);
    assert.equal(viaOpenai.error.code, 'invalid_api_key');
    const viaUrllib = await urllibStatus(apiKey, 6);
    assert.equal(viaUrllib.status, 401, JSON.stringify(viaUrllib));
    assert.equal(JSON.parse(viaUrllib.body).error.code, 'invalid_api_key');
  }
});
