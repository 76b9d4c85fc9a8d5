// Conformance of kvgate's tokenizer with the Hugging Face tokenizers library (the Rust
// library as a Node addon): the same ids for >= 20,000 generated strings, for Qwen3 and
// Llama 3. Needs the fixtures of scripts/bootstrap (.deps/fixtures) and KVGATE_BIN.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import path from 'node:path';
import tokenizers from '@anush008/tokenizers';
import {generate} from './support/tokenizer_strings.mjs';
import {run_kvgate} from './support/kvgate.mjs';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');


for (const [model, seed] of [['qwen3', 1], ['llama3', 2]]) {
  test(`${model}: kvgate ids equal Hugging Face tokenizers on 20,000 strings`, async () => {
    const file = path.join(root, '.deps/fixtures', model, 'tokenizer.json');
    const specials = JSON.parse(readFileSync(file, 'utf8')).added_tokens.map((t) => t.content);
    const strings = generate(20000, seed, specials.slice(0, 40));
    const ref = tokenizers.Tokenizer.fromFile(file);
    const expected = [];
    for (let i = 0; i < strings.length; i += 500) {
      const batch = await ref.encodeBatch(strings.slice(i, i + 500), {addSpecialTokens: false});
      for (const e of batch) expected.push(Array.from(e.getIds()));
    }
    const input = strings.map((s) => JSON.stringify(s)).join('\n') + '\n';
    const lines = (await run_kvgate(['tokenize', '--tokenizer', file], input)).trimEnd().split('\n');
    assert.equal(lines.length, strings.length);
    const bad = [];
    let tokens = 0;
    for (let i = 0; i < strings.length; ++i) {
      const got = JSON.parse(lines[i]);
      tokens += expected[i].length;
      if (JSON.stringify(got) !== JSON.stringify(expected[i])) bad.push(i);
    }
    for (const i of bad.slice(0, 5)) {
      console.log(`mismatch #${i}: ${JSON.stringify(strings[i]).slice(0, 300)}\n  want ${JSON.stringify(expected[i]).slice(0, 300)}\n  got  ${lines[i].slice(0, 300)}`);
    }
    assert.equal(bad.length, 0, `${bad.length} of ${strings.length} strings differ`);
    assert.ok(tokens > 200000, `only ${tokens} tokens compared`);
  });
}
