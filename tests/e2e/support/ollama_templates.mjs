// Real chat templates of models whose npm tokenizer packages ship none (or an older one):
// @huggingface/ollama-utils carries the chat_template of each GGUF model it maps to an
// Ollama template (src/chat-template-automap.ts, a literal array the package does not
// export), keyed by the Ollama model name.
//
//   chat_template_of('library/llama3.1:8b')  // Llama 3.1 Instruct's template
import {readFileSync} from 'node:fs';
import {createRequire} from 'node:module';
import path from 'node:path';
import vm from 'node:vm';

let mapping;

function load() {
  const main = createRequire(import.meta.url).resolve('@huggingface/ollama-utils');
  const file = path.join(path.dirname(main), '..', 'src', 'chat-template-automap.ts');
  const src = readFileSync(file, 'utf8');
  const decl = src.indexOf('export const OLLAMA_CHAT_TEMPLATE_MAPPING');
  if (decl < 0) throw new Error(`${file}: no OLLAMA_CHAT_TEMPLATE_MAPPING`);
  // The array after `: OllamaChatTemplateMapEntry[] =` is plain JavaScript data.
  const body = src.slice(src.indexOf('[', src.indexOf('=', decl))).trim().replace(/;$/, '');
  return vm.runInNewContext(`(${body})`);
}

export function chat_template_of(model) {
  mapping ??= load();
  const entry = mapping.find((e) => e.model === model);
  if (!entry) throw new Error(`@huggingface/ollama-utils has no template for ${model}`);
  return entry.gguf;
}
