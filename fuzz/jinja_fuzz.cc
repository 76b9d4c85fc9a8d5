// kvgate's Jinja engine (core/template/template.h) on arbitrary templates: a request may
// carry its own `chat_template`, so the template source is untrusted input. The input is
// a template, optionally followed by a line "\n--context--\n" and a JSON context (a chat
// request's messages, say). Compiling either succeeds or gives a "line:column: " error;
// a render either succeeds within its output limit or gives such an error, within a small
// step budget (so a loop bomb is an error, not a timeout). Never a crash or a hang.
#include <boost/json.hpp>
#include <string>

#include "core/template/json_value.h"
#include "core/template/template.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;

bool has_position(const std::string& message) {
  // "12:3: ..."
  size_t i = 0;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
  if (i == 0 || i >= message.size() || message[i] != ':') return false;
  const size_t col = ++i;
  while (i < message.size() && message[i] >= '0' && message[i] <= '9') ++i;
  return i > col && message.compare(i, 2, ": ") == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSplit = "\n--context--\n";
  const size_t split = input.find(kSplit);
  const std::string_view source = input.substr(0, split);
  jinja::Value context = jinja::Value::new_dict();
  boost::json::value json;  // the context's strings view it: it outlives the render
  if (split != std::string_view::npos) {
    boost::system::error_code ec;
    json = boost::json::parse(input.substr(split + kSplit.size()), ec);
    if (!ec && json.is_object()) {
      Result<jinja::Value> converted = jinja::from_json(json);
      if (!converted) return 0;  // nested too deep for a context: refused, as render does
      context = std::move(*converted);
    }
  }
  const Result<jinja::Template> t = jinja::Template::compile(source);
  if (!t) {
    KVGATE_FUZZ_CHECK(has_position(t.error()), "a compile error without a position: " + t.error());
    return 0;
  }
  const jinja::RenderOptions options{.now_unix_seconds = 1'764'000'000,
                                     .max_steps = 20'000,
                                     .max_output_bytes = 1 << 20,
                                     .max_call_depth = 40};
  const Result<std::string> out = t->render(context, options);
  if (!out) {
    KVGATE_FUZZ_CHECK(has_position(out.error()),
                      "a render error without a position: " + out.error());
    return 0;
  }
  KVGATE_FUZZ_CHECK(out->size() <= options.max_output_bytes,
                    "rendered " + std::to_string(out->size()) + " bytes past the limit");
  (void)t->iterates_content();
  return 0;
}
