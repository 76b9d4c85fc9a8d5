// The variables vLLM (through transformers' apply_chat_template) passes to a chat
// template for an OpenAI chat request, written independently of kvgate's C++ (see
// src/core/tokenizer/chat.h for the rules): the conformance tests render the model's
// template with @huggingface/jinja over this context and compare with kvgate.
import {Template} from '@huggingface/jinja';

// vLLM's "openai" content format (_detect_content_format in vllm/entrypoints/chat_utils.py),
// read off the template's syntax tree as vLLM reads it off Python Jinja's: some for loop
// iterates `m.content` / `m['content']` (also through filters, tests and slices), where
// `m` is the target of a for loop over `messages` or over a variable set from it
// (transitively). A loop over a macro parameter's `.content` is not one. Where vLLM's
// analysis fails (a tuple or namespace target for such a variable, a tuple loop target
// over messages or over the first matching content) the format is "string".
const formats = new Map();
export function content_as_parts(template) {
  if (!formats.has(template)) formats.set(template, loops_over_message_content(template));
  return formats.get(template);
}

function loops_over_message_content(template) {
  let program;
  try {
    program = new Template(template).parsed;
  } catch {
    return false;  // vLLM's default when the template does not parse
  }
  const sets = [], loops = [];  // in source order, as Python Jinja's find_all gives them
  const walk = (body) => {
    for (const s of body) {
      if (s.type === 'Set' && s.value) sets.push(s);  // a block set is not an Assign node
      if (s.type === 'For') loops.push(s);
      for (const k of ['body', 'alternate', 'defaultBlock']) if (Array.isArray(s[k])) walk(s[k]);
    }
  };
  walk(program.body);
  // Jinja's For.iter is the iterable without the loop's `if` filter.
  const iter = (loop) => (loop.iterable.type === 'SelectExpression' ? loop.iterable.lhs : loop.iterable);
  const lists = ['messages'];
  for (let i = 0; i < lists.length; ++i) {
    for (const s of sets) {
      if (!reads(s.value, lists[i])) continue;
      if (s.assignee.type !== 'Identifier') return false;
      if (!lists.includes(s.assignee.value)) lists.push(s.assignee.value);
    }
  }
  const messages = [];
  for (const loop of loops) {
    if (!lists.some((l) => reads(iter(loop), l))) continue;
    if (loop.loopvar.type !== 'Identifier') return false;
    messages.push(loop.loopvar.value);
  }
  for (const loop of loops) {
    if (messages.some((m) => reads(iter(loop), m, 'content'))) return loop.loopvar.type === 'Identifier';
  }
  return false;
}

// vLLM's _is_var_or_elems_access: `e` reads variable `name`, or its `key` attribute or item,
// through any filters, tests and slices.
function reads(e, name, key) {
  for (;;) {
    if (e.type === 'FilterExpression' || e.type === 'TestExpression') e = e.operand;
    else if (e.type === 'MemberExpression' && e.computed && e.property.type === 'SliceExpression') e = e.object;
    else break;
  }
  if (key === undefined) return e.type === 'Identifier' && e.value === name;
  if (e.type !== 'MemberExpression' || e.object.type !== 'Identifier' || e.object.value !== name) return false;
  return e.computed ? e.property.type === 'StringLiteral' && e.property.value === key :
    e.property.type === 'Identifier' && e.property.value === key;
}

function token_text(v) {
  if (typeof v === 'string') return v;
  if (v && typeof v === 'object' && typeof v.content === 'string') return v.content;
  return undefined;
}

function content_of(m, parts) {
  const c = m.content;
  const texts = c === null || c === undefined ? [] : typeof c === 'string' ? [c] :
    c.map((p) => (typeof p === 'string' ? p : p.text));
  if (parts) return texts.map((t) => ({type: 'text', text: t}));
  if (c === null || c === undefined) return '';
  return typeof c === 'string' ? c : texts.join('\n');
}

function parse_arguments(a) {
  if (a && typeof a === 'object' && !Array.isArray(a)) return a;
  if (typeof a === 'string' && a.length) {
    try {
      const v = JSON.parse(a);
      if (v && typeof v === 'object' && !Array.isArray(v)) return v;
    } catch {
      // not JSON: vLLM passes {}
    }
  }
  return {};
}

function normalize_tool(t) {
  const {name, description = null, parameters = null, ...fextra} = t.function;
  const {type = 'function', function: _f, ...extra} = t;
  return {type, function: {name, description, parameters, ...fextra}, ...extra};
}

export function vllm_context(req, config, template) {
  const parts = content_as_parts(template);
  const ctx = {};
  for (const k of ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token']) {
    const t = token_text(config[k]);
    if (t !== undefined) ctx[k] = t;
  }
  if (Array.isArray(config.additional_special_tokens) && config.additional_special_tokens.length)
    ctx.additional_special_tokens = config.additional_special_tokens.map(token_text);
  ctx.messages = req.messages.map((m) => {
    const out = {role: m.role, content: content_of(m, parts)};
    if (m.role === 'assistant') {
      if (Array.isArray(m.tool_calls) && m.tool_calls.length) {
        out.tool_calls = m.tool_calls.map((c) => ({...c, function: {...c.function, arguments: parse_arguments(c.function.arguments)}}));
      }
      const r = m.reasoning || m.reasoning_content;
      const reasoning = r === undefined || r === null ? (m.reasoning_content ?? null) : r;
      if (reasoning !== null && reasoning !== undefined) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    }
    if (m.role === 'tool' && typeof m.tool_call_id === 'string') out.tool_call_id = m.tool_call_id;
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
  ctx.tools = req.tools ? req.tools.map(normalize_tool) : null;
  ctx.documents = req.documents ?? null;
  ctx.add_generation_prompt = req.add_generation_prompt ?? true;
  Object.assign(ctx, req.chat_template_kwargs ?? {});
  return ctx;
}

// transformers' render with continue_final_message: a tag after the final message's text,
// the prompt cut at the tag.
const kTag = 'CONTINUE_FINAL_MESSAGE_TAG ';
export function render_like_transformers(template, ctx, req) {
  if (!req.continue_final_message) return template.render(ctx);
  const messages = ctx.messages.map((m) => ({...m}));
  const last = messages[messages.length - 1];
  let final_text;
  if (Array.isArray(last.content)) {
    const parts = last.content.map((p) => ({...p}));
    const i = parts.findLastIndex((p) => 'text' in p);
    if (i < 0) throw new Error('continue_final_message: no text to continue');
    final_text = parts[i].text;
    parts[i].text += kTag;
    last.content = parts;
  } else {
    final_text = last.content;
    last.content += kTag;
  }
  const out = template.render({...ctx, messages});
  const loc = out.lastIndexOf(kTag.trim());
  if (loc < 0 || !out.includes(py_strip(final_text))) throw new Error('continue_final_message is set but the final message does not appear in the chat after applying the chat template');
  if (out.slice(loc, loc + kTag.length) === kTag) return out.slice(0, loc);
  return py_rstrip(out.slice(0, loc));
}

// Python's str.strip()/rstrip() whitespace (JS trim differs on U+FEFF and U+001C..U+001F).
const py_space = /[\t\n\v\f\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]/;
function py_rstrip(s) {
  let e = s.length;
  while (e > 0 && py_space.test(s[e - 1])) --e;
  return s.slice(0, e);
}
function py_strip(s) {
  let b = 0;
  while (b < s.length && py_space.test(s[b])) ++b;
  return py_rstrip(s.slice(b));
}
