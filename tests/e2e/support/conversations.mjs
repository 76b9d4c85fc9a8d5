// Deterministic generator of OpenAI chat requests for chat-template conformance:
// system prompts (first and later), multi-turn, <think> blocks and reasoning_content,
// tools and tool calls (string and object arguments), tool results, content parts,
// whitespace at the edges (of every kind with `edges`), Unicode, enable_thinking and
// add_generation_prompt.
import {rng} from './tokenizer_strings.mjs';

const texts = ['Hello!', 'What is the capital of France?', 'Paris.', '写一首关于秋天的诗。',
  'def f(x):\n    return x + 1\n', '  padded with spaces  ', '\n\nleading newlines',
  'trailing newlines\n\n', 'emoji 🎉👍🏽', 'tabs\tand\u00a0nbsp', 'quotes "double" and \'single\'',
  'line1\nline2\r\nline3', '\u3000ideographic space\u3000', 'ünïcödé çåsé', '<b>html</b> & stuff',
  'JSON: {"a": [1, 2]}', '', ' ', 'x'.repeat(300), 'Ελληνικά русский العربية हिन्दी'];

// @huggingface/jinja ignores the argument of strip/lstrip/rstrip (it trims all
// whitespace; Python's s.lstrip('\n') strips only newlines). Qwen3 applies those to
// assistant content and reasoning, so those come from texts whose edges are not
// whitespace other than newlines; the C++ unit tests pin the Python behaviour there.
const tight_texts = texts.filter((s) => s.length > 0 && !/^[^\S\n]|[^\S\n]$/.test(s));

// Whitespace for the edges of content (`edges`): every kind on which Python's str.strip()
// (Python Jinja's `trim`) and JavaScript's trim() (@huggingface/jinja's) agree, alone or in
// runs. The C++ unit tests (tests/core/template/whitespace_test.cc) pin the others:
// U+001C..U+001F and U+0085, which only Python strips, and U+FEFF, which only JavaScript
// strips.
const edge_spaces = ['\t', '\n', '\v', '\f', '\r', ' ', '\r\n', '\n\n\n', '\u00a0', '\u1680',
  '\u2000', '\u2001', '\u2002', '\u2003', '\u2004', '\u2005', '\u2006', '\u2007', '\u2008',
  '\u2009', '\u200a', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000'];

// alternating: user and assistant strictly alternate after an optional system prompt (the
// templates of Gemma and Llama 2 raise otherwise); one conversation in 20 breaks the rule
// on purpose, to compare the error. edges: every text (content parts, reasoning and tool
// results too) gets 0 to 2 pieces of edge_spaces before and after it (for templates that
// do not strip with an argument: see tight_texts). system: false drops the system prompts
// (Gemma's template raises on any); single_call: an assistant turn calls one tool at most
// (Llama 3.1's template raises on more). Unset, they change nothing: the other templates'
// conversations stay the same.
export function conversations(count, seed,
                              {alternating = false, edges = false, system = true, single_call = false} = {}) {
  const r = rng(seed);
  const pick = (a) => a[Math.floor(r() * a.length)];
  const int = (n) => Math.floor(r() * n);
  const edge = () => {
    let s = '';
    for (let n = int(3); n > 0; --n) s += pick(edge_spaces);
    return s;
  };
  // Without `edges` no number is drawn: the other templates' conversations stay the same.
  const edged = (s) => (edges ? edge() + s + edge() : s);
  const text = () => {
    let s = pick(texts);
    if (int(4) === 0) s = s + ' ' + pick(texts);
    return edged(s);
  };
  const tight = () => {
    let s = pick(tight_texts);
    if (int(4) === 0) s = s + ' ' + pick(tight_texts);
    return edged(s);
  };
  const tool = () => ({
    type: 'function',
    function: {
      name: pick(['get_weather', 'search', 'run_code', 'lookup_ünïcode']),
      description: pick(['Get the weather.', 'Search the "web".', 'Run code\nsafely.', '天气']),
      parameters: {type: 'object', properties: {city: {type: 'string', enum: ['Paris', 'Zürich']},
        n: {type: 'integer', minimum: int(3)}, ratio: {type: 'number', default: pick([0.5, 3.25, -2.75])},
        flag: {type: 'boolean', default: r() < 0.5}, nothing: null}, required: ['city']},
    },
  });
  const call = () => ({id: 'call_' + int(1000), type: 'function', function: {
    name: pick(['get_weather', 'search']),
    arguments: int(2) ? JSON.stringify({city: pick(['Paris', 'Zürich']), n: int(9)}) :
      {city: pick(['Paris', '東京']), deep: {list: [1, 'two', true, null]}},
  }});
  const calls = () => {
    const n = 1 + int(2);
    return Array.from({length: single_call ? 1 : n}, call);
  };
  const out = [];
  for (let i = 0; i < count; ++i) {
    const messages = [];
    const with_system = (content) => {
      if (system) messages.push({role: 'system', content});
    };
    if (int(2)) with_system(text());
    const turns = 1 + int(8);
    const broken = alternating && int(20) === 0;
    for (let t = 0; t < turns; ++t) {
      const k = alternating ? (int(10) === 2 ? 2 : 3) : int(10);
      if (broken && t === turns - 1) messages.push({role: 'user', content: text()});
      if (k === 0 && messages.length) with_system(text());
      if (k === 1) messages.push({role: 'user', content: '<tool_response>\n' + text() + '\n</tool_response>'});
      else if (k === 2) messages.push({role: 'user', content: [{type: 'text', text: text()}, {type: 'text', text: text()}]});
      else messages.push({role: 'user', content: text()});
      if (t === turns - 1 && int(2)) break;  // end on a user turn
      const a = {role: 'assistant', content: tight()};
      const ak = int(6);
      if (ak === 0) a.content = '<think>\n' + tight() + '\n</think>\n\n' + tight();
      if (ak === 1) a.reasoning_content = tight();
      if (ak === 2) a.content = 'no open tag ' + tight() + '</think>' + tight();
      if (ak === 3 && alternating) {
        a.tool_calls = calls();
        if (int(2)) a.content = null;
      } else if (ak === 3) {
        a.tool_calls = calls();
        if (int(2)) a.content = null;
        messages.push(a);
        const n = 1 + int(2);
        for (let q = 0; q < n; ++q) messages.push({role: 'tool', tool_call_id: 'x', content: text()});
        continue;
      }
      messages.push(a);
    }
    const req = {messages};
    if (int(4) === 0) req.tools = Array.from({length: 1 + int(2)}, tool);
    const g = int(4);
    if (g === 0) req.add_generation_prompt = false;
    else if (g === 1) req.add_generation_prompt = true;
    const e = int(3);
    if (e === 1) req.chat_template_kwargs = {enable_thinking: false};
    if (e === 2) req.chat_template_kwargs = {enable_thinking: true};
    const last = messages[messages.length - 1];
    if (last.role === 'assistant' && last.content && int(6) === 0) {
      req.add_generation_prompt = false;
      req.continue_final_message = true;
    }
    if (int(8) === 0) messages[0].name = pick(['alice', 'bob']);
    out.push(req);
  }
  return out;
}

// What the template engine sees for a request (vLLM's normalization of content).
export function template_context(req, config) {
  const messages = req.messages.map((m) => {
    const c = {...m};
    if (Array.isArray(c.content)) c.content = c.content.filter((p) => p.type === 'text').map((p) => p.text).join('\n');
    if (c.content === null || c.content === undefined) c.content = '';
    return c;
  });
  const ctx = {messages, add_generation_prompt: req.add_generation_prompt ?? true,
    bos_token: config.bos_token ?? '', eos_token: config.eos_token ?? ''};
  if (req.tools) ctx.tools = req.tools;
  if (req.chat_template_kwargs) Object.assign(ctx, req.chat_template_kwargs);
  return ctx;
}
