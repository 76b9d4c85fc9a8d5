// `kvgate serve` in front of two `kvgate engine` processes, driven by the real
// `@anthropic-ai/sdk` client: Anthropic Messages (POST /v1/messages) whole and streamed,
// the key in x-api-key, usage with cached input tokens on a repeated prompt (routed on the
// prompt the chat template renders), and errors in Anthropic's shape mapped to the
// client's exception classes.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { bin, start_engines, start_gateway, stop_started } from './support/kvgate.mjs';

let base;
let key;


before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  const engines = await start_engines(2);
  ({ base, key } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0}]
keys_file: keys.yaml
pools:
  main:
    router: {policy: kv-cost, overlap: approx}
    endpoints: [${engines.join(', ')}]
models:
  - {name: qwen-sim, aliases: [claude-sim], pool: main}
`, { tenant: 'e2e' }));
});

after(stop_started);

// The SDK appends /v1/messages to its base URL: the gateway's root.
const client = (apiKey = key) => new Anthropic({ baseURL: base, apiKey, maxRetries: 0 });
const words = (tag, n) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

test('a whole message through the gateway, with usage', async () => {
  const { data: m, response } = await client().messages.create({
    model: 'claude-sim',
    max_tokens: 5,
    system: 'You are terse.',
    messages: [{ role: 'user', content: 'hello there' }],
  }).withResponse();
  assert.match(response.headers.get('x-kvgate-endpoint'), /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.match(m.id, /^msg_/);
  assert.equal(m.type, 'message');
  assert.equal(m.role, 'assistant');
  assert.equal(m.model, 'qwen-sim');
  assert.equal(m.content.length, 1);
  assert.equal(m.content[0].type, 'text');
  assert.equal(m.content[0].text.trim().split(/\s+/).length, 5);
  assert.equal(m.stop_reason, 'max_tokens');
  assert.equal(m.usage.output_tokens, 5);
  assert.ok(m.usage.input_tokens > 4, `input_tokens ${m.usage.input_tokens}`);
});

test('a streamed message: the events the SDK expects, in order, and the final message', async () => {
  const stream = client().messages.stream({
    model: 'qwen-sim',
    max_tokens: 4,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'stream this please' }] }],
  });
  const types = [];
  let text = '';
  stream.on('streamEvent', (e) => types.push(e.type));
  stream.on('text', (t) => { text += t; });
  const m = await stream.finalMessage();
  assert.deepEqual(types, ['message_start', 'content_block_start', 'content_block_delta',
    'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop',
    'message_delta', 'message_stop']);
  assert.equal(m.content[0].text, text);
  assert.equal(m.usage.output_tokens, 4);
  assert.equal(m.stop_reason, 'max_tokens');
});

test('a repeated long prompt lands where its prefix is cached', async () => {
  const body = {
    model: 'qwen-sim',
    max_tokens: 2,
    system: words('s', 80),
    messages: [{ role: 'user', content: words('u', 40) }],
  };
  const first = await client().messages.create(body).withResponse();
  const again = await client().messages.create(body).withResponse();
  assert.equal(again.response.headers.get('x-kvgate-endpoint'),
    first.response.headers.get('x-kvgate-endpoint'));
  assert.ok(again.data.usage.cache_read_input_tokens >= 96,
    `cached ${again.data.usage.cache_read_input_tokens}`);
});

test('errors come in Anthropic\'s shape and map to the SDK\'s exception classes', async () => {
  await assert.rejects(
    client().messages.create({ model: 'nope', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.NotFoundError && e.error?.type === 'error' &&
      e.error?.error?.type === 'not_found_error');
  await assert.rejects(
    client().messages.create({ model: 'qwen-sim', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.BadRequestError && e.error?.error?.type === 'invalid_request_error' &&
      /max_tokens/.test(e.error?.error?.message));
  await assert.rejects(
    client('kvg-wrong').messages.create({ model: 'qwen-sim', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.error?.error?.type === 'authentication_error');
});
