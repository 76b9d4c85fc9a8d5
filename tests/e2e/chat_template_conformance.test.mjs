// Conformance of kvgate's chat templates with @huggingface/jinja running the model's own
// template from tokenizer_config.json, on 600 generated conversations per model; and of
// the token ids of rendered prompts with the Hugging Face tokenizers library.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import path from 'node:path';
import {Template} from '@huggingface/jinja';
import tokenizers from '@anush008/tokenizers';
import {conversations, template_context} from './support/conversations.mjs';
import {run_kvgate} from './support/kvgate.mjs';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');

for (const [model, seed] of [['qwen3', 11], ['llama3', 12]]) {
  test(`${model}: chat rendering equals @huggingface/jinja on 600 conversations`, async () => {
    const dir = path.join(root, '.deps/fixtures', model);
    const config = JSON.parse(readFileSync(path.join(dir, 'tokenizer_config.json'), 'utf8'));
    const template = new Template(config.chat_template);
    const reqs = conversations(600, seed);
    const expected = reqs.map((r) => template.render(template_context(r, config)));
    const args = ['tokenize', '--tokenizer', path.join(dir, 'tokenizer.json'),
      '--chat-template', path.join(dir, 'tokenizer_config.json')];
    const input = reqs.map((r) => JSON.stringify(r)).join('\n') + '\n';
    const rendered = (await run_kvgate([...args, '--render'], input)).trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.equal(rendered.length, reqs.length);
    const bad = [];
    for (let i = 0; i < reqs.length; ++i) if (rendered[i] !== expected[i]) bad.push(i);
    for (const i of bad.slice(0, 3)) {
      let at = 0;
      while (at < expected[i].length && expected[i][at] === rendered[i][at]) ++at;
      const from = Math.max(0, at - 150);
      console.log(`mismatch #${i} at char ${at}: ${JSON.stringify(reqs[i]).slice(0, 2000)}\n  want ...${JSON.stringify(expected[i].slice(from, at + 100))}\n  got  ...${JSON.stringify(rendered[i].slice(from, at + 100))}`);
    }
    assert.equal(bad.length, 0, `${bad.length} of ${reqs.length} conversations differ`);

    // The ids of the rendered prompts (special tokens inside) equal the reference's.
    const ref = tokenizers.Tokenizer.fromFile(path.join(dir, 'tokenizer.json'));
    const want = [];
    for (let i = 0; i < expected.length; i += 200) {
      for (const e of await ref.encodeBatch(expected.slice(i, i + 200), {addSpecialTokens: false})) want.push(JSON.stringify(Array.from(e.getIds())));
    }
    const ids = (await run_kvgate(args, input)).trimEnd().split('\n');
    let diff = 0;
    for (let i = 0; i < ids.length; ++i) if (ids[i] !== want[i]) ++diff;
    assert.equal(diff, 0, `${diff} prompts encode differently`);
  });
}
