// Writes one ~7,200-token chat prompt per tokenizer family to DIR/chat_<model>.json (a JSON
// string): a system message and user/assistant turns of prose from DIR/prose.jsonl,
// rendered with the family's own chat template by @huggingface/jinja (Llama 2's fixture
// has none: its [INST] format is written out here), with as many turns as bring the
// prompt to 7,200 tokens by the Hugging Face tokenizer. The tokenizer benchmark encodes
// these for the families kvgate has no C++ template for.
//   node bench/tokenizer_chat_prompts.mjs out/bench/corpora
import {readFileSync, writeFileSync} from 'node:fs';
import path from 'node:path';
import {createRequire} from 'node:module';

const require = createRequire(path.resolve(import.meta.dirname, '../.deps/node/package.json'));
const {Tokenizer} = require('@anush008/tokenizers');
const {Template} = require('@huggingface/jinja');
const dir = process.argv[2];
const root = path.resolve(import.meta.dirname, '..');
const prose = readFileSync(path.join(dir, 'prose.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
const content = (t) => (typeof t === 'object' && t ? t.content : t) ?? '';

function messages(turns) {
  const m = [{role: 'system', content: 'You are a helpful assistant.'}];
  for (let i = 0; i < 2 * turns - 1; ++i) {
    m.push({role: i % 2 ? 'assistant' : 'user', content: prose[i % prose.length].slice(0, 1200)});
  }
  return m;
}

function llama2(m) {
  let s = '';
  const sys = `<<SYS>>\n${m[0].content}\n<</SYS>>\n\n`;
  for (let i = 1; i < m.length; i += 2) {
    const user = (i === 1 ? sys : '') + m[i].content;
    s += `<s>[INST] ${user.trim()} [/INST]`;
    if (i + 1 < m.length) s += ` ${m[i + 1].content.trim()} </s>`;
  }
  return s;
}

for (const model of ['qwen3', 'llama3', 'deepseek_v3', 'gemma3', 'llama2']) {
  const fx = path.join(root, '.deps/fixtures', model);
  const config = JSON.parse(readFileSync(path.join(fx, 'tokenizer_config.json'), 'utf8'));
  const tok = Tokenizer.fromFile(path.join(fx, 'tokenizer.json'));
  const render = (m) => config.chat_template
    ? new Template(config.chat_template).render({messages: m, add_generation_prompt: true,
      bos_token: content(config.bos_token), eos_token: content(config.eos_token)})
    : llama2(m);
  let prompt = '', tokens = 0;
  for (let turns = 1; tokens < 7200; ++turns) {
    prompt = render(messages(turns));
    tokens = (await tok.encode(prompt, null, {addSpecialTokens: false})).getIds().length;
  }
  writeFileSync(path.join(dir, `chat_${model}.json`), JSON.stringify(prompt));
  console.error(`${model}: ${tokens} tokens, ${prompt.length} characters`);
}
