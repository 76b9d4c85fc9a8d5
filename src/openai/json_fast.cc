#include "openai/json_fast.h"

#include <algorithm>
#include <cstdint>

#include "openai/json_scan.h"

namespace kvgate::openai::fast {

namespace {

using Next = JsonScanner::Next;
using Literal = JsonScanner::Literal;

// `"a":true|false|null` -> a == true.
bool read_bool(JsonScanner& s, bool& value) {
  Literal lit;
  if (!s.literal(lit)) return false;
  value = lit == Literal::kTrue;
  return true;
}

// Reads an object's members with `read(key)`, which must consume the value.
template <typename Read>
bool read_members(JsonScanner& s, Read read) {
  if (!s.begin_object()) return false;
  std::string_view key;
  for (bool first = true;; first = false) {
    Next n = s.next_member(first, key);
    if (n == Next::kEnd) return true;
    if (n == Next::kBad || !read(key)) return false;
  }
}

// stream_options: null, or an object whose include_usage is a boolean or null.
bool read_stream_options(JsonScanner& s, bool& wants_usage) {
  if (s.peek() == 'n') return read_bool(s, wants_usage);
  bool seen = false;
  return read_members(s, [&](std::string_view key) {
    if (key != "include_usage") return s.skip_value();
    if (seen || !read_bool(s, wants_usage)) return false;
    seen = true;
    return true;
  });
}

// max_tokens / max_completion_tokens: null (0 here) or an integer in [1, INT64_MAX].
bool read_max_tokens(JsonScanner& s, uint64_t& value) {
  if (s.peek() == 'n') {
    bool ignored;
    value = 0;
    return read_bool(s, ignored);
  }
  JsonScanner::Number n;
  if (!s.number(n) || !n.is_integer() || n.negative || n.magnitude < 1 ||
      n.magnitude > static_cast<uint64_t>(INT64_MAX)) {
    return false;
  }
  value = n.magnitude;
  return true;
}

// cache_salt: null (none) or a non-empty string; an empty one or any other value is a 400
// of the full parse's.
bool read_cache_salt(JsonScanner& s, std::string& salt) {
  const char c = s.peek();
  if (c == 'n') {
    Literal lit;
    return s.literal(lit) && lit == Literal::kNull;
  }
  return c == '"' && s.string_value(&salt) && !salt.empty();
}

// content: a string, null, or an array whose object parts' string `text`s count.
bool read_content(JsonScanner& s, std::string& prompt) {
  const char c = s.peek();
  if (c == '"') return s.string_value(&prompt);
  if (c == 'n') {
    bool ignored;
    return read_bool(s, ignored);
  }
  if (!s.begin_array()) return false;
  for (bool first = true;; first = false) {
    Next n = s.next_element(first);
    if (n == Next::kEnd) return true;
    if (n == Next::kBad) return false;
    if (s.peek() != '{') {
      if (!s.skip_value()) return false;
      continue;
    }
    bool seen = false;
    const bool ok = read_members(s, [&](std::string_view key) {
      if (key != "text") return s.skip_value();
      // A second one would win: leave that to the full parse.
      const bool read = !seen && (s.peek() == '"' ? s.string_value(&prompt) : s.skip_value());
      seen = true;
      return read;
    });
    if (!ok) return false;
  }
}

// One message: "role\ncontent\n" onto `prompt`, whatever order the two keys come in.
bool read_message(JsonScanner& s, std::string& prompt) {
  const size_t start = prompt.size();
  bool role = false;
  bool content = false;
  const bool ok = read_members(s, [&](std::string_view key) {
    if (key == "role") {
      if (role || s.peek() != '"') return false;
      role = true;
      if (!content) {
        if (!s.string_value(&prompt)) return false;
        prompt += '\n';
      } else {
        std::string text;
        if (!s.string_value(&text)) return false;
        text += '\n';
        prompt.insert(start, text);
      }
      return true;
    }
    if (key == "content") {
      if (content || !read_content(s, prompt)) return false;
      content = true;
      return true;
    }
    return s.skip_value();
  });
  if (!ok) return false;
  prompt += '\n';
  return role;
}

bool read_messages(JsonScanner& s, std::string& prompt) {
  if (!s.begin_array()) return false;
  for (bool first = true;; first = false) {
    Next n = s.next_element(first);
    if (n == Next::kEnd) return !first;
    if (n == Next::kBad || !read_message(s, prompt)) return false;
  }
}

// prompt: a string, or a non-empty array whose first element, if a string, is the text.
bool read_prompt(JsonScanner& s, std::string& prompt) {
  if (s.peek() == '"') return s.string_value(&prompt);
  if (!s.begin_array()) return false;
  for (bool first = true;; first = false) {
    Next n = s.next_element(first);
    if (n == Next::kEnd) return !first;
    if (n == Next::kBad) return false;
    if (first && s.peek() == '"') {
      if (!s.string_value(&prompt)) return false;
    } else if (!s.skip_value()) {
      return false;
    }
  }
}

// A token count as the full parse reads it: a positive integer that fits in a uint64,
// else (negative, fraction, exponent, too large, not a number) 0.
bool read_count(JsonScanner& s, uint64_t& count) {
  const char c = s.peek();
  if (c != '-' && (c < '0' || c > '9')) {
    count = 0;
    return s.skip_value();
  }
  JsonScanner::Number n;
  if (!s.number(n)) return false;
  count = n.integral && !n.negative && n.fits ? n.magnitude : 0;
  return true;
}

}  // namespace

bool inspect_request(std::string_view body, ApiKind kind, InspectedRequest& r) {
  enum : uint32_t {
    kModel = 1,
    kStream = 2,
    kStreamOptions = 4,
    kMaxTokens = 8,
    kMaxCompletionTokens = 16,
    kInput = 32,
    kCacheSalt = 64,
  };
  uint32_t seen = 0;
  // A key the answer depends on, seen twice: the last would win; leave it to the full parse.
  auto once = [&seen](uint32_t bit) {
    if (seen & bit) return false;
    seen |= bit;
    return true;
  };
  uint64_t max_tokens = 0;
  uint64_t max_completion_tokens = 0;
  const std::string_view input = kind == ApiKind::kChat ? "messages" : "prompt";

  JsonScanner s(body);
  const bool ok = read_members(s, [&](std::string_view key) {
    if (key == "model") return once(kModel) && s.string_value(&r.model);
    if (key == "stream") return once(kStream) && read_bool(s, r.stream);
    if (key == "stream_options") {
      r.has_stream_options = true;
      return once(kStreamOptions) && read_stream_options(s, r.client_wants_usage);
    }
    if (key == "max_tokens") return once(kMaxTokens) && read_max_tokens(s, max_tokens);
    if (key == "max_completion_tokens") {
      return once(kMaxCompletionTokens) && read_max_tokens(s, max_completion_tokens);
    }
    if (key == "cache_salt") return once(kCacheSalt) && read_cache_salt(s, r.cache_salt);
    if (key == input) {
      // The prompt's text is most of a body: one allocation instead of a doubling series.
      r.prompt_text.reserve(body.size());
      return once(kInput) && (kind == ApiKind::kChat ? read_messages(s, r.prompt_text)
                                                     : read_prompt(s, r.prompt_text));
    }
    return s.skip_value();
  });
  if (!ok || !s.at_end() || !(seen & kModel) || !(seen & kInput)) return false;
  // max_completion_tokens, read second, wins over max_tokens as in the full parse.
  for (uint64_t m : {max_tokens, max_completion_tokens}) {
    if (m != 0) r.max_tokens = static_cast<uint32_t>(std::min<uint64_t>(m, UINT32_MAX));
  }
  return true;
}

// Reads each top-level `usage` over the one before: the last wins, as in the full parse.
bool parse_usage(std::string_view text, Usage& u) {
  JsonScanner s(text);
  bool ok = read_members(s, [&](std::string_view key) {
    if (key != "usage") return s.skip_value();
    u = Usage{};
    if (s.peek() != '{') return s.skip_value();
    u.seen = true;
    return read_members(s, [&](std::string_view k) {
      if (k == "prompt_tokens") return read_count(s, u.prompt_tokens);
      if (k == "completion_tokens") return read_count(s, u.completion_tokens);
      if (k != "prompt_tokens_details") return s.skip_value();
      u.cached_tokens = 0;
      if (s.peek() != '{') return s.skip_value();
      return read_members(s, [&](std::string_view d) {
        return d == "cached_tokens" ? read_count(s, u.cached_tokens) : s.skip_value();
      });
    });
  });
  return ok && s.at_end();
}

}  // namespace kvgate::openai::fast
