// `kvgate serve` in front of two `kvgate engine` processes, driven by the real `openai`
// npm client: models, chat and completions (whole and streamed), usage with
// include_usage, cached tokens on a repeated prompt, API keys and OpenAI-style errors
// mapped to the client's exception classes; embeddings (base64 and floats), tokenize and
// detokenize; responses (whole, streamed, and continued with previous_response_id).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
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
  - {name: qwen-sim, aliases: [qwen], pool: main}
`, { tenant: 'e2e' }));
});

after(stop_started);

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

const cosine = (a, b) => {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  return ab / Math.sqrt(aa * bb);
};

test('embeddings through the gateway: base64 (the client default) and floats, usage', async () => {
  // The client asks for base64 unless told otherwise, and decodes it to numbers.
  const r = await client().embeddings.create({ model: 'qwen', input: ['alpha beta gamma', 'delta'] });
  assert.equal(r.object, 'list');
  assert.equal(r.model, 'qwen-sim');
  assert.deepEqual(r.data.map((d) => d.index), [0, 1]);
  assert.equal(r.data[0].embedding.length, 1024);
  const norm = Math.sqrt(r.data[0].embedding.reduce((s, v) => s + v * v, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  assert.equal(r.usage.prompt_tokens, 4);  // the word codec: one token per word
  assert.equal(r.usage.total_tokens, 4);
  const floats = await client().embeddings.create({
    model: 'qwen-sim', input: 'alpha beta gamma', encoding_format: 'float', dimensions: 64,
  });
  assert.equal(floats.data[0].embedding.length, 64);
  // The same input, the same direction (float32 through base64 against a printed float).
  const head = r.data[0].embedding.slice(0, 64);
  assert.ok(cosine(head, floats.data[0].embedding) > 0.99999);
  await assert.rejects(
    client().embeddings.create({ model: 'qwen', input: [] }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'input');
  const bad = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'kvg-wrong', maxRetries: 0 });
  await assert.rejects(bad.embeddings.create({ model: 'qwen', input: 'x' }),
    (e) => e instanceof OpenAI.AuthenticationError);
});

test('score and rerank through the gateway, routed by load, in vLLM\'s shapes', async () => {
  const post = (path, body) => fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const s = await post('/v1/score', { model: 'qwen', text_1: 'red apple pie', text_2: ['red apple tart', 'blue sky'] });
  assert.equal(s.status, 200);
  const score = await s.json();
  assert.equal(score.object, 'list');
  assert.deepEqual(score.data.map((d) => [d.index, d.object]), [[0, 'score'], [1, 'score']]);
  assert.ok(score.data[0].score > score.data[1].score, JSON.stringify(score.data));
  assert.equal(score.usage.prompt_tokens, 11);  // the word codec: 3 + 3, then 3 + 2
  const r = await post('/rerank', { model: 'qwen', query: 'red apple pie', documents: ['blue sky', 'red apple tart', 'green'], top_n: 2 });
  assert.equal(r.status, 200);
  const rerank = await r.json();
  assert.equal(rerank.results.length, 2);
  assert.equal(rerank.results[0].index, 1);
  assert.equal(rerank.results[0].document.text, 'red apple tart');
  assert.ok(rerank.results[0].relevance_score >= rerank.results[1].relevance_score);
  assert.ok(rerank.usage.total_tokens > 0);
  const bad = await post('/v2/rerank', { model: 'qwen', query: 'q' });
  assert.equal(bad.status, 400);
  assert.equal((await bad.json()).error.param, 'documents');
});

test('tokenize and detokenize are passed to an engine of the model\'s pool', async () => {
  const post = (path, body) => fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const t = await post('/tokenize', { model: 'qwen', prompt: 'one two three' });
  assert.equal(t.status, 200);
  assert.match(t.headers.get('x-kvgate-endpoint'), /^http:\/\/127\.0\.0\.1:\d+$/);
  const tokens = await t.json();
  assert.equal(tokens.count, 3);
  assert.equal(tokens.tokens.length, 3);
  const d = await post('/detokenize', { tokens: tokens.tokens });  // one model: the default
  assert.equal(d.status, 200);
  assert.equal(typeof (await d.json()).prompt, 'string');
  const missing = await post('/detokenize', { model: 'qwen' });
  assert.equal(missing.status, 400);
  assert.equal((await missing.json()).error.param, 'tokens');
  const unknown = await post('/tokenize', { model: 'nope', prompt: 'x' });
  assert.equal(unknown.status, 404);
  const nokey = await fetch(`${base}/tokenize`, { method: 'POST', body: '{"prompt":"x"}' });
  assert.equal(nokey.status, 401);
});

test('responses through the gateway: whole, streamed, and a conversation continued where it is stored', async () => {
  const r = await client().responses.create({
    model: 'qwen', instructions: 'Be brief.', input: 'say three words', max_output_tokens: 3,
  });
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, 'response');
  assert.equal(r.model, 'qwen-sim');
  assert.equal(r.output_text.trim().split(/\s+/).length, 3);
  assert.equal(r.usage.output_tokens, 3);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + 3);

  const stream = await client().responses.create({
    model: 'qwen', input: [{ role: 'user', content: [{ type: 'input_text', text: 'stream me' }] }],
    max_output_tokens: 2, stream: true,
  });
  const types = [];
  let text = '';
  let completed;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.completed') completed = e.response;
  }
  assert.deepEqual(types, ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added', 'response.output_text.delta', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.completed']);
  assert.equal(completed.output[0].content[0].text, text);
  assert.equal(completed.usage.output_tokens, 2);

  // Each turn goes back to the engine that stored the conversation, and finds its prefix.
  const first = await client().responses.create({
    model: 'qwen', input: words('conv', 60), max_output_tokens: 2,
  }).withResponse();
  const endpoint = first.response.headers.get('x-kvgate-endpoint');
  let previous = first.data.id;
  for (let turn = 0; turn < 4; turn++) {
    const next = await client().responses.create({
      model: 'qwen', input: words(`turn${turn}-`, 5), previous_response_id: previous, max_output_tokens: 2,
    }).withResponse();
    assert.equal(next.response.headers.get('x-kvgate-endpoint'), endpoint);
    assert.equal(next.data.previous_response_id, previous);
    assert.ok(next.data.usage.input_tokens_details.cached_tokens >= 48,
      `turn ${turn}: cached ${next.data.usage.input_tokens_details.cached_tokens}`);
    previous = next.data.id;
  }
  await assert.rejects(
    client().responses.create({ model: 'qwen', input: 'x', previous_response_id: 'resp_unknown' }),
    (e) => e instanceof OpenAI.NotFoundError);
});
