// Writes the tokenizer benchmark corpora to DIR (deterministic, from text shipped in the
// npm packages scripts/bootstrap installs): prose.jsonl (English API documentation prose
// from the openai package's doc comments), code.jsonl (its TypeScript source), cjk.jsonl
// (generated Chinese/Japanese text from common characters), mixed.jsonl (all of them
// interleaved with emoji and numbers). Each line is one JSON string, a ~4 KB document;
// each corpus ~1 MB.
//   node bench/tokenizer_corpora.mjs out/bench/corpora
import {readFileSync, readdirSync, statSync, writeFileSync, mkdirSync} from 'node:fs';
import path from 'node:path';

const dir = process.argv[2];
const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, '.deps/node/node_modules/openai/src');
const kSize = 1 << 20, kDoc = 4096;

function files(d) {
  const out = [];
  for (const f of readdirSync(d).sort()) {
    const p = path.join(d, f);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}
const ts = files(src).map((f) => readFileSync(f, 'utf8'));
const code = ts.join('\n');
const prose = ts.flatMap((t) => t.split('\n'))
  .map((l) => l.trim())
  .filter((l) => l.startsWith('* ') && /[a-z]{3} [a-z]{3}/.test(l) && !l.includes('@'))
  .map((l) => l.slice(2))
  .join(' ')
  .replace(/ {2,}/g, ' ');

let seed = 7;
const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 4294967296);
const common = '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从知现开本长把机理问水高实想点月明新动工电文化并气全部样西合情体制教员物进度题力走与期加道系统模型数据处理服务请求缓存路由器令牌';
const kana = 'あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエオカキクケコサシスセソタチツテト';
function cjk(n) {
  let s = '';
  while (s.length < n) {
    const len = 8 + Math.floor(rand() * 30);
    for (let i = 0; i < len; ++i) {
      s += rand() < 0.15 ? kana[Math.floor(rand() * kana.length)] : common[Math.floor(rand() * common.length)];
    }
    s += '，。、！？\n'[Math.floor(rand() * 6)];
  }
  return s;
}

// Drops a surrogate half left at either end by slicing.
const whole = (s) => s.replace(/^[\udc00-\udfff]|[\ud800-\udbff]$/g, '');

function docs(text) {
  const out = [];
  for (let at = 0, total = 0; total < kSize; at = (at + kDoc) % Math.max(1, text.length - kDoc)) {
    const d = whole(text.slice(at, at + kDoc));
    out.push(d);
    total += Buffer.byteLength(d);
  }
  return out;
}
const cjkText = cjk(kSize);
const extras = ['🎉👍🏽 ', '3.14159 ', '2026-11-30 ', '1,234,567 ', 'naïve café ', '\n\n'];
let mixed = '';
for (let i = 0; mixed.length < 3 * kSize; ++i) {
  const pick = i % 3;
  const from = Math.floor(rand() * 1e6);
  const t = pick === 0 ? prose : pick === 1 ? code : cjkText;
  const at = from % Math.max(1, t.length - 600);
  mixed += whole(t.slice(at, at + 200 + Math.floor(rand() * 400))) + extras[i % extras.length];
}
mkdirSync(dir, {recursive: true});
for (const [name, text] of [['prose', prose], ['code', code], ['cjk', cjkText], ['mixed', mixed]]) {
  writeFileSync(path.join(dir, name + '.jsonl'), docs(text).map((d) => JSON.stringify(d)).join('\n') + '\n');
}
