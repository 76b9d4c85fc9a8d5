// `kvgate engine` driven by the real `openai` npm client: chat and completions, whole
// and streamed, usage (with include_usage), cached tokens on a repeated prompt, errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { bin, start_engines, stop_started } from './support/kvgate.mjs';

let client;

before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  const [url] = await start_engines(1);
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
});

after(stop_started);

const words = (tag, n) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

test('models lists the served model', async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ['qwen-sim']);
});

test('chat completion, non-streaming, exact output length and usage', async () => {
  const r = await client.chat.completions.create({
    model: 'qwen-sim',
    messages: [{ role: 'user', content: 'Say something.' }],
    max_completion_tokens: 9,
  });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.choices[0].message.content.trim().split(/\s+/).length, 9);
  assert.equal(r.usage.completion_tokens, 9);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 9);
});

test('chat completion, streaming with include_usage', async () => {
  const stream = await client.chat.completions.create({
    model: 'qwen-sim',
    messages: [{ role: 'user', content: 'Stream please.' }],
    max_tokens: 6,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  let finish = null;
  let chunks = 0;
  for await (const chunk of stream) {
    chunks += 1;
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta?.content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(finish, 'length');
  assert.equal(text.trim().split(/\s+/).length, 6);
  assert.ok(usage, 'a usage chunk arrives last');
  assert.equal(usage.completion_tokens, 6);
  assert.equal(chunks, 1 + 6 + 1);
});

test('completion, streaming and non-streaming', async () => {
  const r = await client.completions.create({ model: 'qwen-sim', prompt: 'Once upon', max_tokens: 4 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.prompt_tokens, 2);
  assert.equal(r.usage.completion_tokens, 4);
  const stream = await client.completions.create({
    model: 'qwen-sim', prompt: 'Once upon a time', max_tokens: 5, stream: true,
  });
  let n = 0;
  for await (const chunk of stream) n += chunk.choices.length && chunk.choices[0].text ? 1 : 0;
  assert.equal(n, 5);
});

test('a repeated prompt is served from the prefix cache', async () => {
  const prompt = words('cache', 200);
  const first = await client.completions.create({ model: 'qwen-sim', prompt, max_tokens: 2 });
  assert.equal(first.usage.prompt_tokens, 200);
  assert.equal(first.usage.prompt_tokens_details.cached_tokens, 0);
  const second = await client.completions.create({ model: 'qwen-sim', prompt, max_tokens: 2 });
  assert.equal(second.usage.prompt_tokens_details.cached_tokens, 192);  // 12 full blocks of 16
  const chat = [{ role: 'user', content: words('turn', 100) }];
  await client.chat.completions.create({ model: 'qwen-sim', messages: chat, max_tokens: 1 });
  const again = await client.chat.completions.create({ model: 'qwen-sim', messages: chat, max_tokens: 1 });
  assert.ok(again.usage.prompt_tokens_details.cached_tokens >= 96);
});

test('errors map to the openai client exception classes', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404,
  );
  await assert.rejects(
    client.completions.create({ model: 'qwen-sim', prompt: 'x', n: 3 }),
    (e) => e instanceof OpenAI.BadRequestError && /n=1/.test(e.message),
  );
});
