// LoRA adapters with real processes: `kvgate engine` serving adapters as vLLM does (loaded
// at start with --lora-modules or at run time through /v1/load_lora_adapter, listed in
// /v1/models with their parent, in vllm:lora_requests_info), and `kvgate serve` routing an
// adapter's requests to its base model's pool with block keys of its own, so that a
// prompt's cached prefix is never reused across the base model and an adapter.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { bin, start_engines, start_gateway, stop_started } from './support/kvgate.mjs';

let base;
let engines;


before(async () => {
  assert.ok(bin, 'KVGATE_BIN must point to the kvgate binary');
  engines = await start_engines(2,
    ['--max-loras', '2', '--lora-modules', 'sql=/adapters/sql', '--lora-load-ms', '200']);
  ({ base } = await start_gateway(`listeners: [{address: 127.0.0.1, port: 0}]
pools:
  main:
    router: {policy: kv-cost, overlap: approx}
    endpoints: [${engines.join(', ')}]
models:
  - {name: qwen-sim, pool: main}
adapters:
  - {name: sql, base: qwen-sim, source: /adapters/sql, max_replicas: 2}
`));
});

after(stop_started);

const post = (url, body) => fetch(url, {
  method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
});
const words = (tag, n) => Array.from({ length: n }, (_, i) => `${tag}${i}`).join(' ');

test('the engine loads, lists, meters and unloads adapters as vLLM does', async () => {
  const engine = engines[1];
  const load = await post(`${engine}/v1/load_lora_adapter`, { lora_name: 'chat', lora_path: '/adapters/chat' });
  assert.equal(load.status, 200);
  assert.equal(await load.text(), "Success: LoRA adapter 'chat' added successfully.");
  const again = await post(`${engine}/v1/load_lora_adapter`, { lora_name: 'chat', lora_path: '/adapters/chat' });
  assert.equal(again.status, 400);
  assert.match((await again.json()).error.message, /has already been loaded/);
  const missing = await post(`${engine}/v1/load_lora_adapter`, { lora_name: 'x' });
  assert.equal(missing.status, 400);
  const models = await (await fetch(`${engine}/v1/models`)).json();
  assert.deepEqual(models.data.map((m) => [m.id, m.parent, m.root]),
    [['qwen-sim', null, 'qwen-sim'], ['sql', 'qwen-sim', '/adapters/sql'], ['chat', 'qwen-sim', '/adapters/chat']]);
  const metrics = await (await fetch(`${engine}/metrics`)).text();
  assert.match(metrics, /^vllm:lora_requests_info\{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""\} \d+(\.\d+)?$/m);
  const unload = await post(`${engine}/v1/unload_lora_adapter`, { lora_name: 'chat' });
  assert.equal(unload.status, 200);
  assert.equal(await unload.text(), "Success: LoRA adapter 'chat' removed successfully.");
  const gone = await post(`${engine}/v1/unload_lora_adapter`, { lora_name: 'chat' });
  assert.equal(gone.status, 404);
});

test('an adapter is served through the gateway, and its prefixes are its own', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', maxRetries: 0 });
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => [m.id, m.parent ?? null]), [['qwen-sim', null], ['sql', 'qwen-sim']]);
  const prompt = words('p', 120);
  const onBase = await client.completions.create({ model: 'qwen-sim', prompt, max_tokens: 2 });
  assert.equal(onBase.model, 'qwen-sim');
  // The same prompt under the adapter: none of the base model's blocks are its.
  const first = await client.completions.create({ model: 'sql', prompt, max_tokens: 2 }).withResponse();
  assert.equal(first.data.model, 'sql');
  assert.equal(first.data.usage.prompt_tokens_details.cached_tokens, 0);
  // Again under the adapter: routed where its own blocks are, and served from them.
  const again = await client.completions.create({ model: 'sql', prompt, max_tokens: 2 }).withResponse();
  assert.equal(again.response.headers.get('x-kvgate-endpoint'), first.response.headers.get('x-kvgate-endpoint'));
  assert.ok(again.data.usage.prompt_tokens_details.cached_tokens >= 96,
    `cached ${again.data.usage.prompt_tokens_details.cached_tokens}`);
});
