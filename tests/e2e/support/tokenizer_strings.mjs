// Deterministic generator of hard strings for tokenizer conformance: every Unicode
// general category, code, numbers, whitespace runs, CJK, emoji, combining marks,
// contractions, embedded added tokens and very long words. Same seed, same strings.

export function rng(seed) {
  // mulberry32
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ranges = [
  [0x20, 0x7e], [0x09, 0x0d], [0x00, 0x1f], [0x7f, 0x9f], [0xa0, 0xff], [0x100, 0x24f],
  [0x250, 0x2ff], [0x300, 0x36f], [0x370, 0x3ff], [0x400, 0x4ff], [0x530, 0x58f],
  [0x590, 0x5ff], [0x600, 0x6ff], [0x900, 0x97f], [0xe00, 0xe7f], [0x10a0, 0x10ff],
  [0x1100, 0x11ff], [0x1680, 0x1680], [0x1e00, 0x1eff], [0x2000, 0x206f], [0x2070, 0x209f],
  [0x20a0, 0x20cf], [0x20d0, 0x20ff], [0x2100, 0x214f], [0x2150, 0x218f], [0x2190, 0x22ff],
  [0x2460, 0x24ff], [0x2500, 0x257f], [0x2600, 0x27bf], [0x3000, 0x303f], [0x3040, 0x30ff],
  [0x3100, 0x312f], [0x3130, 0x318f], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0xe000, 0xe0ff],
  [0xf900, 0xfaff], [0xfb00, 0xfb4f], [0xfe00, 0xfe0f], [0xfe30, 0xfe4f], [0xff00, 0xffef],
  [0xfff9, 0xfffd], [0x10000, 0x1007f], [0x10300, 0x1034f], [0x1d400, 0x1d7ff],
  [0x1f300, 0x1f5ff], [0x1f600, 0x1f64f], [0x1f680, 0x1f6ff], [0x1f900, 0x1f9ff],
  [0x20000, 0x2a6df], [0xe0000, 0xe007f],
];
const spaces = [' ', ' ', ' ', '\t', '\n', '\r', '\r\n', '\v', '\f', '\u00a0', '\u1680', '\u2000',
  '\u2003', '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000', '\u0085', '\ufeff', '\u200b'];
const words = ['the', 'The', 'THE', 'hello', 'world', 'don\'t', 'I\'m', 'we\'ll', 'they\'re', 'it\'s',
  'IT\'S', 'You\'VE', 'she\'d', 'O\'Neil', 'rock\'n\'roll', 'naïve', 'café', 'Straße', 'Ελληνικά',
  'русский', 'עברית', 'العربية', 'हिन्दी', 'ไทย', '中文', '日本語', 'ひらがな', 'カタカナ', '한국어',
  'über', 'ſ', '\'ſ', '\'S', '\'Ll', '\'rE', '\'Ve', '\'M', '\'D', '\'x', '\'', '\'\'s'];
const code = [
  'def f(x):\n    return x ** 2\n', 'for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}\n',
  'const x = {a: 1, "b": [2, 3]};', '#include <vector>\n', 'if (a && b || !c) { return -1; }',
  'SELECT * FROM t WHERE id = 42;', '<div class="x">&nbsp;</div>', '$ ls -la | grep "foo"\n',
  '    \n    \n', 'x=1;y=2;z=x+y', '// comment\n/* block */', 'fn main() -> Result<(), E> {}',
  '{"key": "value", "n": 3.14e-10}', '\\n\\t\\"', 'a_b_c = __init__', '```python\nprint(1)\n```',
];
const emoji = ['😀', '👍🏽', '👨‍👩‍👧‍👦', '🇩🇪', '🏳️‍🌈', '❤️', '✨', '🤖', '1️⃣', '🧑🏿‍💻'];
const combining = ['e\u0301', 'a\u0308', 'n\u0303', 'o\u0302\u0323', '\u1100\u1161\u11a8', 'A\u030a',
  '\u0065\u0301\u0302', 'ﬁ', 'Å', 'Ω', '\u0344', '\u0958', '\u2126'];

export function generate(count, seed, specials) {
  const r = rng(seed);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (n) => Math.floor(r() * n);
  const cp = () => {
    const [lo, hi] = pick(ranges);
    let c = lo + int(hi - lo + 1);
    if (c >= 0xd800 && c <= 0xdfff) c = 0x41;
    return String.fromCodePoint(c);
  };
  const number = () => {
    const k = int(6);
    if (k === 0) return String(int(1e9));
    if (k === 1) return (r() * 1e6).toFixed(int(8));
    if (k === 2) return Array.from({length: 1 + int(40)}, () => int(10)).join('');
    if (k === 3) return int(1e7).toLocaleString('en-US');
    if (k === 4) return pick(['٣٤٥', '१२३', '１２３', 'ⅫⅣ', '²³', '½', '①②', '𝟙𝟚']);
    return '-' + int(1000) + '.' + int(1000) + 'e' + int(30);
  };
  const piece = () => {
    switch (int(13)) {
      case 0: return pick(words);
      case 1: return cp();
      case 2: return pick(spaces).repeat(1 + int(int(2) ? 3 : 40));
      case 3: return pick(code);
      case 4: return number();
      case 5: return pick(emoji);
      case 6: return pick(combining);
      case 7: return specials.length ? pick(specials) : '<|x|>';
      case 8: { // a partial or decorated added token
        const s = specials.length ? pick(specials) : '<|x|>';
        return pick([s.slice(0, 1 + int(s.length - 1)), ' ' + s + ' ', s + s, '<' + s, s.slice(1)]);
      }
      case 9: return Array.from({length: 1 + int(8)}, cp).join('');
      case 10: return pick(['.', ',', '!', '?', '...', '—', '–', '"', '“', '”', '«', '»', '(', ')', '[', ']', '{', '}', '@', '#', '%', '&', '*', '+', '=', '~', '`', '^', '|', '\\', '/', ':', ';', '<', '>']);
      case 11: return pick(['\n', '\n\n', ' \n', '\r\n', '\n  ', '  \n\n  ', '\t\n']);
      default: return pick(words) + pick([' ', ' ', '', '\n', '  ']);
    }
  };
  const out = [];
  for (let i = 0; i < count; ++i) {
    const kind = i % 50;
    let s;
    if (kind === 0) { // very long words and runs
      const unit = pick(['a', 'ab', 'xyz', '中', '9', '!', ' ', '\n', 'é', '😀', 'aB3_']);
      s = unit.repeat(200 + int(3000));
    } else if (kind === 1) { // single code points, one per string: every category
      s = cp();
    } else {
      const n = 1 + int(kind < 10 ? 4 : 25);
      s = '';
      for (let k = 0; k < n; ++k) s += piece();
    }
    out.push(s);
  }
  return out;
}
