#include "engine/text_codec.h"

#include <xxhash.h>

#include <optional>

#include "core/tokenizer/chat.h"
#include "core/tokenizer/chat_template.h"
#include "core/tokenizer/tokenizer.h"

namespace kvgate::engine_server {
namespace {

// A few special ids at the bottom of the vocabulary (never produced by word hashing).
constexpr kv::TokenId kImStart = 1;
constexpr kv::TokenId kImEnd = 2;
constexpr kv::TokenId kNewline = 3;
constexpr kv::TokenId kFirstWordId = 8;

class WordCodec final : public TextCodec {
 public:
  explicit WordCodec(uint32_t vocab) : vocab_(vocab) {}

  Result<std::vector<kv::TokenId>> encode(std::string_view text) const override {
    std::vector<kv::TokenId> out;
    append_words(text, out);
    return out;
  }

  Result<std::vector<kv::TokenId>> encode_chat(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt) const override {
    std::vector<kv::TokenId> out;
    for (const ChatMessage& m : messages) {
      out.push_back(kImStart);
      append_words(m.role, out);
      out.push_back(kNewline);
      append_words(m.content, out);
      out.push_back(kImEnd);
      out.push_back(kNewline);
    }
    if (add_generation_prompt) {
      out.push_back(kImStart);
      append_words("assistant", out);
      out.push_back(kNewline);
    }
    return out;
  }

 private:
  void append_words(std::string_view text, std::vector<kv::TokenId>& out) const {
    size_t i = 0;
    while (i < text.size()) {
      while (i < text.size() && is_space(text[i])) ++i;
      const size_t b = i;
      while (i < text.size() && !is_space(text[i])) ++i;
      if (i > b) {
        const uint64_t h = XXH3_64bits(text.data() + b, i - b);
        out.push_back(kFirstWordId + static_cast<kv::TokenId>(h % (vocab_ - kFirstWordId)));
      }
    }
  }
  static bool is_space(char c) {
    return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
  }

  uint32_t vocab_;
};

constexpr std::string_view kWords[] = {
    " the",     " of",     " and",    " a",      " to",    " in",     " is",     " that",
    " it",      " for",    " as",     " with",   " was",   " on",     " be",     " by",
    " cache",   " token",  " block",  " prefix", " model", " engine", " route",  " queue",
    " batch",   " memory", " GPU",    " fast",   " small", " large",  " warm",   " cold",
    " river",   " stone",  " light",  " green",  " north", " quiet",  " swift",  " bright",
    " paper",   " signal", " field",  " window", " glass", " orbit",  " pixel",  " vector",
    " garden",  " copper", " amber",  " delta",  " echo",  " harbor", " island", " jungle",
    " lantern", " meadow", " nectar", " opal",   " prism", " quartz", " rocket", " summit"};

class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(tokenizer::Tokenizer tok, std::optional<tokenizer::ChatTemplate> chat)
      : tok_(std::move(tok)), chat_(std::move(chat)) {}

  Result<std::vector<kv::TokenId>> encode(std::string_view text) const override {
    return tok_.encode(text);
  }

  Result<std::vector<kv::TokenId>> encode_chat(const std::vector<ChatMessage>& messages,
                                               bool add_generation_prompt) const override {
    std::string text;
    if (chat_) {
      tokenizer::ChatRequest req;
      for (const ChatMessage& m : messages) {
        tokenizer::ChatMessage cm;
        cm.role = m.role;
        cm.content = m.content;
        req.messages.push_back(std::move(cm));
      }
      req.add_generation_prompt = add_generation_prompt;
      auto rendered = chat_->render(req);
      if (!rendered) return Error("chat template: " + rendered.error());
      text = std::move(*rendered);
    } else {
      for (const ChatMessage& m : messages) {
        text += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      }
      if (add_generation_prompt) text += "<|im_start|>assistant\n";
    }
    return tok_.encode(text);
  }

 private:
  tokenizer::Tokenizer tok_;
  std::optional<tokenizer::ChatTemplate> chat_;
};

}  // namespace

Result<std::unique_ptr<TextCodec>> make_tokenizer_codec(std::string_view tokenizer_json,
                                                        std::string_view tokenizer_config_json) {
  auto tok = tokenizer::Tokenizer::load(tokenizer_json);
  if (!tok) return Error("tokenizer.json: " + tok.error());
  std::optional<tokenizer::ChatTemplate> chat;
  if (!tokenizer_config_json.empty()) {
    auto t = tokenizer::ChatTemplate::load(tokenizer_config_json);
    if (!t) return Error("tokenizer_config.json: " + t.error());
    chat = std::move(*t);
  }
  return std::unique_ptr<TextCodec>(
      std::make_unique<TokenizerCodec>(std::move(*tok), std::move(chat)));
}

std::unique_ptr<TextCodec> make_word_codec(uint32_t vocab_size) {
  return std::make_unique<WordCodec>(vocab_size);
}

std::string_view output_token_text(kv::TokenId token) {
  return kWords[token % (sizeof(kWords) / sizeof(kWords[0]))];
}

}  // namespace kvgate::engine_server
