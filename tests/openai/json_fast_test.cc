// The fast paths (openai_json_fast.h) against the full Boost.JSON parse
// (openai_json_dom.h), which defines the behaviour: pinned tricky inputs with the values
// expected, and a seeded corpus of mutated bodies on which both must always agree.
#include "openai/json_fast.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/common/rng.h"
#include "openai/json_dom.h"
#include "openai/json_scan.h"

namespace kvgate::openai {
namespace {

std::string show(const Usage& u) {
  return std::to_string(u.seen) + "/" + std::to_string(u.prompt_tokens) + "/" +
         std::to_string(u.completion_tokens) + "/" + std::to_string(u.cached_tokens);
}

std::string show(const Inspection& i) {
  if (i.error) {
    return "error " + std::to_string(http_status(i.error->code)) + " [" + i.error->message +
           "] param [" + i.error->field + "]";
  }
  const InspectedRequest& r = i.request;
  return "ok model [" + r.model + "] stream " + std::to_string(r.stream) + " usage " +
         std::to_string(r.client_wants_usage) + " has_so " + std::to_string(r.has_stream_options) +
         " max " + std::to_string(r.max_tokens) + " prio " +
         std::to_string(r.priority.value_or(-1)) + " salt [" + r.cache_salt + "] prompt [" +
         r.prompt_text + "]";
}

// parse_usage == dom::parse_usage, and the fast path, when it answers, answers the same.
// Returns whether the fast path answered.
bool expect_same_usage(std::string_view text) {
  const std::string want = show(dom::parse_usage(text));
  EXPECT_EQ(show(parse_usage(text)), want) << text;
  Usage fast_usage;
  if (!fast::parse_usage(text, fast_usage)) return false;
  EXPECT_EQ(show(fast_usage), want) << text;
  return true;
}

bool expect_same_inspection(std::string_view body, ApiKind kind) {
  const Inspection want = dom::inspect_request(body, kind);
  EXPECT_EQ(show(inspect_request(body, kind)), show(want)) << body;
  InspectedRequest r;
  if (!fast::inspect_request(body, kind, r)) return false;
  EXPECT_EQ(show(Inspection{std::nullopt, r}), show(want)) << body;
  return true;
}

struct UsageCase {
  std::string text;
  Usage want;
  bool fast;  // the fast path answers (no fallback)
};

TEST(OpenAiJsonFast, UsagePinnedCases) {
  constexpr uint64_t kMax = UINT64_MAX;
  const Usage none{};
  const std::vector<UsageCase> cases = {
      {R"({"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":4}}})",
       {7, 3, 4, true},
       true},
      // "usage" inside strings, as a nested key, or both before the real one.
      {R"({"note":"\"usage\":{\"prompt_tokens\":9}"})", none, true},
      {R"({"choices":[{"usage":{"prompt_tokens":9}}]})", none, true},
      {R"({"choices":[{"message":{"content":"\"usage\":{\"prompt_tokens\":9}}"},"usage":{"prompt_tokens":8}}],"usage":{"prompt_tokens":1,"completion_tokens":2}})",
       {1, 2, 0, true},
       true},
      {R"({"a":{"usage":{"prompt_tokens":9}},"usage":{"completion_tokens":2}})",
       {0, 2, 0, true},
       true},
      // Missing, null, not an object, empty.
      {R"({"choices":[]})", none, true},
      {R"({"usage":null})", none, true},
      {R"({"usage":[{"prompt_tokens":1}]})", none, true},
      {R"({"usage":"{\"prompt_tokens\":1}"})", none, true},
      {R"({"usage":{}})", {0, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens_details":null,"prompt_tokens":5}})", {5, 0, 0, true}, true},
      // Numbers: only positive integers that fit in a uint64 count.
      {R"({"usage":{"prompt_tokens":7.0,"completion_tokens":3e0}})", {0, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens":-7,"completion_tokens":-0}})", {0, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens":0,"completion_tokens":1E+2}})", {0, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens":18446744073709551615,"completion_tokens":18446744073709551616}})",
       {kMax, 0, 0, true},
       true},
      {R"({"usage":{"prompt_tokens":9223372036854775808,"completion_tokens":99999999999999999999999}})",
       {9223372036854775808u, 0, 0, true},
       true},
      {R"({"usage":{"prompt_tokens":"7","completion_tokens":true,"prompt_tokens_details":{"cached_tokens":[1]}}})",
       {0, 0, 0, true},
       true},
      {R"({"usage":{"prompt_tokens":1e400}})", {0, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens":1e99999}})", {0, 0, 0, true}, false},      // long exponent
      {R"({"usage":{"prompt_tokens":1e99999999999999999999}})", none, false},  // Boost: overflow
      // Whitespace everywhere JSON allows it.
      {" \r\n\t{ \"usage\" :\t{ \"prompt_tokens\" : 7 ,\n\"completion_tokens\":3 ,"
       "\"prompt_tokens_details\" : { \"cached_tokens\" : 2 } } }\n\r\t ",
       {7, 3, 2, true},
       true},
      // Malformed: empty Usage, from the fallback.
      {R"({"usage":{"prompt_tokens":7,"completion_tokens":3})", none, false},
      {R"({"usage":{"prompt_tokens":7,"completion_tokens":3}} x)", none, false},
      {R"({"usage":{"prompt_tokens":7,}})", none, false},
      {R"({"choices":[tru],"usage":{"prompt_tokens":7}})", none, false},
      {R"({"choices":[01],"usage":{"prompt_tokens":7}})", none, false},
      {"{\"c\":\"\xff\",\"usage\":{\"prompt_tokens\":7}}", none, false},
      {"{\"c\":\"a\nb\",\"usage\":{\"prompt_tokens\":7}}", none, false},
      {R"({"c":"\ud800","usage":{"prompt_tokens":7}})", none, false},
      {"", none, false},
      {"not json", none, false},
      {"[{\"usage\":{\"prompt_tokens\":1}}]", none, false},
      // Repeated keys: the last wins.
      {R"({"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}})", {2, 0, 0, true}, true},
      {R"({"usage":{"prompt_tokens":1},"usage":null})", none, true},
      {R"({"usage":{"prompt_tokens":1,"prompt_tokens":5,"prompt_tokens":"x","completion_tokens":4}})",
       {0, 4, 0, true},
       true},
      {R"({"usage":{"prompt_tokens_details":{"cached_tokens":4},"prompt_tokens_details":5}})",
       {0, 0, 0, true},
       true},
      {R"({"usage":{"prompt_tokens_details":{"cached_tokens":4,"cached_tokens":6}}})",
       {0, 0, 6, true},
       true},
      // Keys compare decoded, as Boost.JSON's do.
      {R"({"us\u0061ge":{"prompt_t\u006fkens":7}})", {7, 0, 0, true}, true},
      {R"({"usage ":{"prompt_tokens":7},"Usage":{"prompt_tokens":8}})", none, true},
  };
  for (const UsageCase& c : cases) {
    EXPECT_EQ(show(parse_usage(c.text)), show(c.want)) << c.text;
    EXPECT_EQ(expect_same_usage(c.text), c.fast) << c.text;
  }
}

TEST(OpenAiJsonFast, UsageNestingPastTheScannersDepthFallsBack) {
  for (int depth : {20, 30, 31, 32, 40}) {
    std::string text = R"({"a":)" + std::string(depth, '[') + std::string(depth, ']') +
                       R"(,"usage":{"prompt_tokens":3}})";
    EXPECT_EQ(expect_same_usage(text), depth + 1 <= JsonScanner::kMaxDepth) << depth;
  }
}

TEST(OpenAiJsonFast, RequestsAnsweredByTheFastPath) {
  const std::vector<std::pair<std::string, std::string>> chats = {
      {R"({"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1})",
       "user\nHello there, how are you?\n"},
      {R"({"messages":[{"content":"hi","role":"user"},{"role":"assistant","content":null},{"role":"tool"}],"model":"m"})",
       "user\nhi\nassistant\n\ntool\n\n"},
      {R"({"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},"s",7,{"text":5},{"text":"b"}]}]})",
       "user\nab\n"},
      {R"({"model":"m","messages":[{"role":"user","name":"x","content":"line\none \"q\" \u00e9 \ud83d\ude00"}]})",
       "user\nline\none \"q\" \xc3\xa9 \xf0\x9f\x98\x80\n"},
      {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xc3\xa9\"}]}",
       "user\ncaf\xc3\xa9\n"},
      {R"({"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","items":{"type":"number"}}}}}}],"messages":[{"role":"user","content":"x"}],"temperature":0.7,"seed":-1,"stop":["\n"],"logit_bias":{"50256":-100}})",
       "user\nx\n"},
  };
  for (const auto& [body, prompt] : chats) {
    EXPECT_TRUE(expect_same_inspection(body, ApiKind::kChat)) << body;
    EXPECT_EQ(inspect_request(body, ApiKind::kChat).request.prompt_text, prompt) << body;
  }
  for (
      std::string_view body : {
          R"({"model":"m","prompt":"x","stream":true,"stream_options":{"include_usage":true}})",
          R"({"model":"m","prompt":"x","stream":false,"stream_options":null})",
          R"({"model":"m","prompt":"x","stream":null,"stream_options":{"include_usage":null,"k":1}})",
          R"({"model":"m","prompt":["a","b"],"max_tokens":null,"max_completion_tokens":9})",
          R"({"model":"m","prompt":[[1,2],"b"],"max_tokens":4294967296})",
          R"({"model":"m","prompt":[1],"max_tokens":9223372036854775807})",
          R"({"model":"m","prompt":"x","max_tokens":3,"max_completion_tokens":5})",
          R"({"model":"m","prompt":"x","max_completion_tokens":5,"max_tokens":3})",
          R"( {"mod\u0065l" : "m\u00e9" , "prompt" : "x" } )",
          R"({"model":"m","prompt":"x","messages":5})",
          R"({"model":"m","prompt":"x","cache_salt":"tenant-\u0061"})",
          R"({"model":"m","prompt":"x","cache_salt":null})",
      }) {
    EXPECT_TRUE(expect_same_inspection(body, ApiKind::kCompletion)) << body;
  }
}

TEST(OpenAiJsonFast, RequestsLeftToTheFullParseGetItsAnswers) {
  std::vector<std::string> bodies = {
      "",
      "{",
      "{not json",
      "[1,2]",
      "null",
      R"({"model":"m","messages":[{"role":"user"}]}x)",
      R"({"messages":[{"role":"user","content":"x"}]})",
      R"({"model":null,"messages":[]})",
      R"({"model":5,"messages":[]})",
      R"({"model":"m","messages":[]})",
      R"({"model":"m","messages":"hi"})",
      R"({"model":"m","messages":null})",
      R"({"model":"m","messages":[1]})",
      R"({"model":"m","messages":[{"role":5}]})",
      R"({"model":"m","messages":[{"role":"user"},{"content":"x"}]})",
      R"({"model":"m","messages":[{"role":"user","content":5}]})",
      R"({"model":"m","messages":[{"role":"user","content":true}]})",
      R"({"model":"m","messages":[{"role":"user"}],"stream":"yes"})",
      R"({"model":"m","messages":[{"role":"user"}],"stream":1})",
      R"({"model":"m","messages":[{"role":"user"}],"stream_options":true})",
      R"({"model":"m","messages":[{"role":"user"}],"stream_options":{"include_usage":"y"}})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":-1})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":0})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":1.0})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":1e3})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":"5"})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":9223372036854775808})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":99999999999999999999})",
      R"({"model":"m","messages":[{"role":"user"}],"max_completion_tokens":0})",
      R"({"model":"m","messages":[{"role":"user"}],"cache_salt":""})",
      R"({"model":"m","messages":[{"role":"user"}],"cache_salt":5})",
      R"({"model":"m","messages":[{"role":"user"}],"cache_salt":["a"]})",
      R"({"model":"m","messages":[{"role":"user"}],"cache_salt":"a","cache_salt":"b"})",
      // Repeated keys the answer depends on: the last wins.
      R"({"model":"other","messages":[{"role":"user"}],"model":"m"})",
      R"({"model":"m","messages":[],"messages":[{"role":"user"}]})",
      R"({"model":"m","messages":[{"role":"user"}],"stream":true,"stream":false})",
      R"({"model":"m","messages":[{"role":"a","role":"b","content":"x"}]})",
      R"({"model":"m","messages":[{"role":"a","content":"x","content":"y"}]})",
      R"({"model":"m","messages":[{"role":"a","content":[{"text":"x","text":"y"}]}]})",
      R"({"model":"m","messages":[{"role":"a","content":[{"text":1,"text":"y"}]}]})",
      R"({"model":"m","messages":[{"role":"user"}],"max_tokens":2,"max_tokens":3})",
      R"({"model":"m","messages":[{"role":"user"}],"stream_options":{"include_usage":true,"include_usage":false}})",
      R"({"model":"m","messages":[{"role":"user"}],"stream_options":{},"stream_options":null})",
      "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xc3\"}]}",
      R"({"model":"m","messages":[{"role":"user","content":"\udc00"}]})",
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"n":1e99999})",
      std::string(200, '['),
      R"({"model":"m","messages":[{"role":"user"}],"x":)" + std::string(30, '[') +
          std::string(30, ']') + "}",
      R"({"model":"m","messages":[{"role":"user"}],"x":)" + std::string(70, '[') +
          std::string(70, ']') + "}",
  };
  for (const std::string& body : bodies) {
    EXPECT_FALSE(expect_same_inspection(body, ApiKind::kChat)) << body;
  }
  for (std::string_view body : {
           R"({"model":"m"})",
           R"({"model":"m","prompt":3})",
           R"({"model":"m","prompt":[]})",
           R"({"model":"m","prompt":null})",
           R"({"model":"m","prompt":{}})",
           R"({"model":"m","prompt":"a","prompt":"b"})",
       }) {
    EXPECT_FALSE(expect_same_inspection(body, ApiKind::kCompletion)) << body;
  }
}

// vLLM's cache_salt: read on both paths, refused when empty or not a string (400 naming it).
TEST(OpenAiJsonFast, CacheSalt) {
  const std::string body =
      R"({"model":"m","cache_salt":"tenant-a","messages":[{"role":"user","content":"x"}]})";
  EXPECT_TRUE(expect_same_inspection(body, ApiKind::kChat));
  EXPECT_EQ(inspect_request(body, ApiKind::kChat).request.cache_salt, "tenant-a");
  EXPECT_EQ(dom::inspect_request(body, ApiKind::kChat).request.cache_salt, "tenant-a");
  const std::string none = R"({"model":"m","messages":[{"role":"user","content":"x"}]})";
  EXPECT_TRUE(inspect_request(none, ApiKind::kChat).request.cache_salt.empty());
  for (std::string_view bad : {R"({"model":"m","cache_salt":"","prompt":"x"})",
                               R"({"model":"m","cache_salt":7,"prompt":"x"})"}) {
    const Inspection i = inspect_request(bad, ApiKind::kCompletion);
    ASSERT_TRUE(i.error) << bad;
    EXPECT_EQ(http_status(i.error->code), 400);
    EXPECT_EQ(i.error->field, "cache_salt");
  }
}

// Random edits of realistic bodies: whatever they turn into (mostly invalid JSON, some
// valid with other shapes), the public functions answer as the full parse does.
TEST(OpenAiJsonFast, MutatedBodiesAgreeWithTheFullParse) {
  const std::vector<std::string> corpus = {
      R"({"model":"m","messages":[{"role":"user","content":"Hello there, how are you?"}],"max_tokens":1})",
      R"({"model":"m","messages":[{"role":"system","content":"Be brief.\n"},{"role":"user","content":[{"type":"text","text":"caf\u00e9 \ud83d\ude00"}]}],"stream":true,"stream_options":{"include_usage":false},"max_completion_tokens":12,"temperature":0.5})",
      R"({"model":"m","prompt":["once upon",1],"stream":false,"max_tokens":16,"logprobs":null})",
      R"({"model":"m","cache_salt":"s1","messages":[{"role":"user","content":"hi"}]})",
      R"({"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"The \"usage\":{} text"},"finish_reason":"stop"}],"usage":{"prompt_tokens":25,"completion_tokens":7,"total_tokens":32,"prompt_tokens_details":{"cached_tokens":16}}})",
      R"({"id":"c","choices":[],"usage":{"prompt_tokens":40,"completion_tokens":2,"total_tokens":42,"prompt_tokens_details":null}})",
  };
  const std::string alphabet = "{}[]\",:\\ \n0123456789-+.eEtrufalsn\x01\x80\xc3\xa9ux";
  Rng rng(20261130);
  size_t fast_answers = 0;
  constexpr int kRounds = 6000;
  for (int round = 0; round < kRounds; ++round) {
    std::string body = corpus[rng.below(corpus.size())];
    const uint64_t edits = 1 + rng.below(3);
    for (uint64_t e = 0; e < edits && !body.empty(); ++e) {
      const size_t at = rng.below(body.size());
      const char c = alphabet[rng.below(alphabet.size())];
      switch (rng.below(5)) {
        case 0:
          body.erase(at, 1);
          break;
        case 1:
          body.insert(body.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        case 2:
          body[at] = c;
          break;
        case 3:
          body.resize(at);
          break;
        default: {  // repeat a piece (duplicate keys, nesting)
          const size_t len = 1 + rng.below(std::min<size_t>(40, body.size() - at));
          body.insert(at, body.substr(at, len));
        }
      }
    }
    fast_answers += expect_same_usage(body);
    fast_answers += expect_same_inspection(body, ApiKind::kChat);
    fast_answers += expect_same_inspection(body, ApiKind::kCompletion);
    if (HasFailure()) break;
  }
  // The mutations must exercise the fast paths too, not only the fallback.
  EXPECT_GT(fast_answers, static_cast<size_t>(kRounds / 4));
}

}  // namespace
}  // namespace kvgate::openai
