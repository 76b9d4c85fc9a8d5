// Refusals that arrive: `kvgate serve` refuses a request on its head (413 for a body over
// limits.max_body_bytes, 401 for a missing or wrong API key) while the client is still
// sending the body, and the official `openai` client and Python's urllib both read the
// status and the OpenAI-style error instead of a reset connection (the server closes
// lingering, RFC 9112 section 9.6).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import OpenAI from 'openai';
import { bin, start_gateway, stop_started } from './support/kvgate.mjs';

const source = process.env.KVGATE_SOURCE_DIR;
let base;
let key;

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  // No request here reaches an endpoint: every one is refused on its head.
  ({ base, key } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0}]
keys_file: keys.yaml
pools:
  main:
    endpoints: [http://127.0.0.1:9]
models:
  - {name: qwen, pool: main}
`, { tenant: 't' }));
});

after(stop_started);

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
