// The chat template renderer that exists today (core/tokenizer/chat_template.h: Qwen3's
// and Llama 3's templates as C++) on arbitrary request bodies: parse_chat_request either
// refuses the body or gives messages that both templates render (or refuse) without
// crashing, and a prompt rendered from valid UTF-8 is valid UTF-8.
#include <string>

#include "core/tokenizer/chat.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/unicode.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;
using namespace kvgate::tokenizer;

ChatTemplate load(const char* name) {
  Result<ChatTemplate> t = ChatTemplate::load(
      fuzz::source_file(std::string(".deps/fixtures/") + name + "/tokenizer_config.json"));
  KVGATE_FUZZ_CHECK(static_cast<bool>(t), t ? std::string() : t.error());
  return std::move(*t);
}

}  // namespace

const ChatTemplate* g_qwen3 = nullptr;
const ChatTemplate* g_llama3 = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_qwen3 = new ChatTemplate(load("qwen3"));
  g_llama3 = new ChatTemplate(load("llama3"));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const ChatTemplate& qwen3 = *g_qwen3;
  const ChatTemplate& llama3 = *g_llama3;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const Result<ChatRequest> request = parse_chat_request(body);
  if (!request) {
    KVGATE_FUZZ_CHECK(!request.error().empty(), "an error without a message");
    return 0;
  }
  const bool valid = find_invalid_utf8(body) == std::string_view::npos;
  for (const ChatTemplate* t : {&qwen3, &llama3}) {
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
