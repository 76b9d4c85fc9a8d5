#include "openai/sse_tap.h"

#include <gtest/gtest.h>

namespace kvgate::openai {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace sse_tap_test {

const std::string kChunk1 =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}],"
    "\"usage\":null}\n\n";
const std::string kChunk2 =
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"}}],"
    "\"usage\":null}\n\n";
const std::string kUsage =
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,"
    "\"total_tokens\":42,\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

TEST(SseTap, PassesEventsAndReadsUsage) {
  SseTap tap(/*strip_usage_chunk=*/false);
  std::string out;
  auto s = tap.feed(kChunk1 + kChunk2 + kUsage + kDone, out);
  EXPECT_EQ(out, kChunk1 + kChunk2 + kUsage + kDone);
  EXPECT_EQ(s.token_events, 2u);
  EXPECT_TRUE(s.done);
  ASSERT_TRUE(tap.usage().seen);
  EXPECT_EQ(tap.usage().prompt_tokens, 40u);
  EXPECT_EQ(tap.usage().completion_tokens, 2u);
  EXPECT_EQ(tap.usage().cached_tokens, 32u);
}

TEST(SseTap, StripsTheUsageChunkTheClientDidNotAskFor) {
  SseTap tap(/*strip_usage_chunk=*/true);
  std::string out;
  tap.feed(kChunk1 + kUsage + kDone, out);
  EXPECT_EQ(out, kChunk1 + kDone);
  EXPECT_EQ(tap.usage().completion_tokens, 2u);
}

TEST(SseTap, EventsSplitAcrossReadsComeOutWhole) {
  std::string all = kChunk1 + kChunk2 + kUsage + kDone;
  for (size_t cut = 1; cut < all.size(); cut += 7) {
    SseTap tap(true);
    std::string out;
    size_t tokens = tap.feed(std::string_view(all).substr(0, cut), out).token_events;
    tokens += tap.feed(std::string_view(all).substr(cut), out).token_events;
    EXPECT_EQ(out, kChunk1 + kChunk2 + kDone) << cut;
    EXPECT_EQ(tokens, 2u);
    EXPECT_EQ(tap.pending(), 0u);
  }
}

TEST(SseTap, ParsesUsageOfAWholeResponse) {
  Usage u = parse_usage(
      R"({"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}})");
  EXPECT_TRUE(u.seen);
  EXPECT_EQ(u.prompt_tokens, 7u);
  EXPECT_EQ(u.cached_tokens, 0u);
  EXPECT_FALSE(parse_usage("not json").seen);
}

}  // namespace sse_tap_test
}  // namespace kvgate::openai
