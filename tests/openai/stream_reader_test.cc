#include "openai/stream_reader.h"

#include <gtest/gtest.h>

#include <string>

namespace kvgate::openai {
// Named after the file, not anonymous: the tests compile in unity batches, where two
// files' helpers of one name would collide (docs/development.md).
namespace stream_reader_test {

const std::string kRole =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
const std::string kChat =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" a\"}}],\"usage\":null}\n\n";
const std::string kCompletion = "data: {\"choices\":[{\"index\":0,\"text\":\" b\"}]}\n\n";
const std::string kUsage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"completion_tokens\":2,"
    "\"prompt_tokens_details\":{\"cached_tokens\":32}}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

TEST(StreamReader, CountsContentNotTheRoleChunkAndReadsUsage) {
  StreamReader r;
  EXPECT_EQ(r.feed(kRole), 0u);
  EXPECT_EQ(r.feed(kChat + kCompletion), 2u);
  EXPECT_FALSE(r.usage().seen);
  EXPECT_EQ(r.feed(kUsage), 0u);
  EXPECT_FALSE(r.done());
  r.feed(kDone);
  EXPECT_TRUE(r.done());
  EXPECT_EQ(r.content_chunks(), 2u);
  EXPECT_TRUE(r.usage().seen);
  EXPECT_EQ(r.usage().prompt_tokens, 40u);
  EXPECT_EQ(r.usage().completion_tokens, 2u);
  EXPECT_EQ(r.usage().cached_tokens, 32u);
}

TEST(StreamReader, WaitsForAnEventsEndAndReadsCrlf) {
  StreamReader r;
  std::string crlf = kChat;
  crlf.replace(crlf.size() - 2, 2, "\r\n\r\n");
  EXPECT_EQ(r.feed(crlf.substr(0, 10)), 0u);
  EXPECT_EQ(r.feed(crlf.substr(10)), 1u);
  EXPECT_EQ(r.feed("data: not json\n\n: comment\n\ndata: [DO"), 0u);
  EXPECT_FALSE(r.done());
  r.feed("NE]\n\n");
  EXPECT_TRUE(r.done());
}

}  // namespace stream_reader_test
}  // namespace kvgate::openai
