#include "engine/text_codec.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/tokenizer/chat.h"

namespace kvgate::engine_server {
namespace {

TEST(TextCodec, WordCodecIsStableAndPrefixPreserving) {
  auto codec = make_word_codec(151643);
  auto a = *codec->encode("the quick brown fox", true);
  auto b = *codec->encode("the quick  brown\nfox jumps", false);
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 5u);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin()));
  for (auto t : b) EXPECT_LT(t, 151643u);
  auto conv =
      *tokenizer::parse_chat_request(R"({"messages":[{"role":"user","content":"hello there"}]})");
  auto one = *codec->encode_chat(conv, false);
  conv = *tokenizer::parse_chat_request(R"({"messages":[{"role":"user","content":"hello there"},
      {"role":"assistant","content":"hi"},{"role":"user","content":"more"}]})");
  auto two = *codec->encode_chat(conv, false);
  // A conversation that grows keeps its earlier tokens (all but the generation prompt).
  EXPECT_TRUE(std::equal(one.begin(), one.end() - 3, two.begin()));
  // continue_final_message leaves the last message open: no end, no generation prompt.
  conv = *tokenizer::parse_chat_request(R"({"messages":[{"role":"user","content":"hello there"},
      {"role":"assistant","content":"hi"}],"continue_final_message":true,
      "add_generation_prompt":false})");
  auto open = *codec->encode_chat(conv, false);
  EXPECT_EQ(open.size(), 11u);  // the user turn (7) and "<start> assistant \n hi"
  EXPECT_TRUE(std::equal(open.begin(), open.end(), two.begin()));
  EXPECT_EQ(output_token_text(5).front(), ' ');
  // POST /tokenize's token_strs: one text per id.
  auto strs = *codec->token_strs(a);
  ASSERT_EQ(strs.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(strs[i], output_token_text(a[i]));
  // POST /detokenize: the output words of the ids together.
  EXPECT_EQ(*codec->decode(a), strs[0] + strs[1] + strs[2] + strs[3]);
}

}  // namespace
}  // namespace kvgate::engine_server
