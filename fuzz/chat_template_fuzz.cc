// The chat template renderer (core/tokenizer/chat_template.h: the fixtures' templates,
// Qwen3, Llama 3, Gemma 3 and DeepSeek V3, compiled by kvgate's Jinja engine) on
// arbitrary request bodies: parse_chat_request either refuses the body or gives messages
// that every template renders (or refuses) without crashing, and a prompt rendered from
// valid UTF-8 is valid UTF-8. Arbitrary template sources are jinja_fuzz.cc's.
#include <string>
#include <vector>

#include "core/common/unicode.h"
#include "core/tokenizer/chat.h"
#include "core/tokenizer/chat_template.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;
using namespace kvgate::tokenizer;
using kvgate::unicode::find_invalid_utf8;

ChatTemplate load(const char* name) {
  Result<ChatTemplate> t = ChatTemplate::load(
      fuzz::source_file(std::string(".deps/fixtures/") + name + "/tokenizer_config.json"));
  KVGATE_FUZZ_CHECK(static_cast<bool>(t), t ? std::string() : t.error());
  return std::move(*t);
}

}  // namespace

std::vector<const ChatTemplate*>* g_templates = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_templates = new std::vector<const ChatTemplate*>;
  for (const char* name : {"qwen3", "llama3", "gemma3", "deepseek_v3"}) {
    g_templates->push_back(new ChatTemplate(load(name)));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const Result<ChatRequest> request = parse_chat_request(body);
  if (!request) {
    KVGATE_FUZZ_CHECK(!request.error().empty(), "an error without a message");
    return 0;
  }
  const bool valid = find_invalid_utf8(body) == std::string_view::npos;
  for (const ChatTemplate* t : *g_templates) {
    const Result<std::string> prompt = t->render(*request);
    if (!prompt) {
      KVGATE_FUZZ_CHECK(!prompt.error().empty(), "an error without a message");
      continue;
    }
    KVGATE_FUZZ_CHECK(!valid || find_invalid_utf8(*prompt) == std::string_view::npos,
                      std::string(t->family_name()) + " rendered invalid UTF-8: " + *prompt);
    if (request->messages.empty()) KVGATE_FUZZ_CHECK(false, "rendered no messages");
  }
  return 0;
}
