// `kvgate serve` in front of two `kvgate engine` processes, driven by the real `openai`
// npm client: models, chat and completions (whole and streamed), usage with
// include_usage, cached tokens on a repeated prompt, API keys and OpenAI-style errors
// mapped to the client's exception classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';

const bin = process.env.KVGATE_BIN;
const children = [];
let base;
let key;

function start(args, ready) {
  return new Promise((resolve, reject) => {
    const p = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(p);
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`${args[0]} did not start: ${out} ${err}`)), 20000);
    p.stderr.on('data', (d) => { err += d; });
    p.stdout.on('data', (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/[^\s]+)/);
      if (m && (!ready || out.includes(ready))) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    p.on('exit', (code) => { clearTimeout(timer); reject(new Error(`${args[0]} exited ${code}: ${err}`)); });
  });
}

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  const engines = [];
  for (let i = 0; i < 2; i++) {
    engines.push(await start(['engine', '--port', '0', '--time-scale', '0.01', '--model', 'qwen-sim'],
      'kvgate engine ready'));
  }
  const dir = mkdtempSync(join(tmpdir(), 'kvgate-e2e-'));
  const keys = join(dir, 'keys.yaml');
  key = execFileSync(bin, ['keys', 'add', '--tenant', 'e2e', '--file', keys], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString().trim();
  const config = join(dir, 'gateway.yaml');
  writeFileSync(config, `listeners: [{address: 127.0.0.1, port: 0}]
keys_file: keys.yaml
pools:
  main:
    router: {policy: kv-cost, overlap: approx}
    endpoints: [${engines.join(', ')}]
models:
  - {name: qwen-sim, aliases: [qwen], pool: main}
`);
  base = await start(['serve', config]);
});

after(async () => {
  for (const p of children.reverse()) {
    const exited = new Promise((r) => p.once('exit', r));
    p.kill('SIGTERM');
    await exited;
  }
});

const client = () => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0 });
const words = (tag, n) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

test('models lists the configured models and aliases', async () => {
  const models = await client().models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['qwen-sim', 'qwen']);
});

test('chat completion through the gateway, with usage', async () => {
  const r = await client().chat.completions.create({
    model: 'qwen',
    messages: [{ role: 'user', content: 'Say something.' }],
    max_completion_tokens: 7,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, 'qwen-sim');
  assert.equal(r.usage.completion_tokens, 7);
});

test('streamed chat: chunks, no usage unless asked, usage when asked', async () => {
  const plain = await client().chat.completions.create({
    model: 'qwen-sim', messages: [{ role: 'user', content: 'Stream.' }], max_tokens: 5, stream: true,
  });
  let text = '';
  let chunks = 0;
  for await (const c of plain) {
    chunks++;
    assert.ok(c.choices.length > 0, 'no usage-only chunk when the client did not ask');
    text += c.choices[0].delta.content ?? '';
  }
  assert.ok(chunks >= 5);
  assert.ok(text.length > 0);
  const withUsage = await client().chat.completions.create({
    model: 'qwen-sim', messages: [{ role: 'user', content: 'Stream.' }], max_tokens: 5, stream: true,
    stream_options: { include_usage: true },
  });
  let usage;
  for await (const c of withUsage) if (c.usage) usage = c.usage;
  assert.equal(usage.completion_tokens, 5);
});

test('a repeated prompt comes back with cached tokens', async () => {
  const prompt = words('e', 100);
  await client().completions.create({ model: 'qwen-sim', prompt, max_tokens: 2 });
  const again = await client().completions.create({ model: 'qwen-sim', prompt, max_tokens: 2 });
  assert.equal(again.usage.prompt_tokens_details.cached_tokens, 96);
});

test('errors map to the openai client exception classes', async () => {
  await assert.rejects(
    client().chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === 'model_not_found');
  await assert.rejects(
    client().chat.completions.create({ model: 'qwen', messages: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'messages');
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'kvg-wrong', maxRetries: 0 });
  await assert.rejects(
    bad.chat.completions.create({ model: 'qwen', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.AuthenticationError);
});
