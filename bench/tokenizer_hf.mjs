// Single-thread encode throughput of the Hugging Face tokenizers library (the Rust library
// as the @anush008/tokenizers Node addon) on the corpora of tokenizer_corpora.mjs, one
// document per call. Prints JSON. Time is the process's CPU time (user + system, all
// threads: the addon encodes on libuv's pool), as Google Benchmark reports for kvgate,
// so that both sides are compared the same way on a loaded machine; wall time is kept too.
//   node bench/tokenizer_hf.mjs TOKENIZER_JSON CORPORA_DIR [PASSES]
import {readFileSync} from 'node:fs';
import path from 'node:path';
import {createRequire} from 'node:module';

const require = createRequire(path.resolve(import.meta.dirname, '../.deps/node/package.json'));
const {Tokenizer} = require('@anush008/tokenizers');
const [file, dir, passes = '5'] = process.argv.slice(2);
const tok = Tokenizer.fromFile(file);
const opts = {addSpecialTokens: false};
const median = (a) => a.sort((x, y) => x - y)[Math.floor(a.length / 2)];
const out = {};
for (const name of ['prose', 'code', 'cjk', 'mixed']) {
  const docs = readFileSync(path.join(dir, name + '.jsonl'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l));
  const bytes = docs.reduce((n, d) => n + Buffer.byteLength(d), 0);
  let tokens = 0;
  const cpu = [], wall = [];
  for (let p = 0; p < Number(passes); ++p) {
    tokens = 0;
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (const d of docs) tokens += (await tok.encode(d, null, opts)).getIds().length;
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1e6);
    wall.push(Number(process.hrtime.bigint() - t0) / 1e9);
  }
  const s = median(cpu);
  out[name] = {bytes, tokens, cpu_seconds: s, wall_seconds: median(wall), mb_per_s: bytes / s / 1e6,
    tokens_per_s: tokens / s};
}
console.log(JSON.stringify(out));
