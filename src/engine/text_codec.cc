#include "engine/text_codec.h"

#include <xxhash.h>

#include <ctime>
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

  Result<std::vector<kv::TokenId>> encode(std::string_view text, bool) const override {
    std::vector<kv::TokenId> out;
    append_words(text, out);
    return out;
  }

  Result<std::vector<kv::TokenId>> encode_chat(const tokenizer::ChatRequest& chat,
                                               bool) const override {
    std::vector<kv::TokenId> out;
    for (size_t i = 0; i < chat.messages.size(); ++i) {
      const tokenizer::ChatMessage& m = chat.messages[i];
      out.push_back(kImStart);
      append_words(m.role, out);
      out.push_back(kNewline);
      append_words(m.content, out);
      for (const tokenizer::ToolCall& call : m.tool_calls) {
        append_words(call.name, out);
        append_words(call.arguments, out);
      }
      if (chat.continue_final_message && i + 1 == chat.messages.size()) break;
      out.push_back(kImEnd);
      out.push_back(kNewline);
    }
    if (chat.add_generation_prompt && !chat.continue_final_message) {
      out.push_back(kImStart);
      append_words("assistant", out);
      out.push_back(kNewline);
    }
    return out;
  }

  Result<std::vector<std::string>> token_strs(std::span<const kv::TokenId> ids) const override {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (kv::TokenId id : ids) out.emplace_back(output_token_text(id));
    return out;
  }

  Result<std::string> decode(std::span<const kv::TokenId> ids) const override {
    std::string out;
    for (kv::TokenId id : ids) out += output_token_text(id);
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

  Result<std::vector<kv::TokenId>> encode(std::string_view text,
                                          bool add_special_tokens) const override {
    auto ids = tok_.encode(text);
    if (ids && add_special_tokens) return with_special_tokens(*ids);
    return ids;
  }

  Result<std::vector<kv::TokenId>> encode_chat(const tokenizer::ChatRequest& chat,
                                               bool add_special_tokens) const override {
    std::string text;
    if (chat_) {
      tokenizer::ChatRenderOptions options;
      options.now_unix_seconds = static_cast<int64_t>(std::time(nullptr));
      Result<std::string> rendered = Error("");
      if (chat.unsupported.empty()) {
        rendered = chat_->render(chat, options);
      } else {
        tokenizer::ChatRequest text_only = chat;  // the text parts (a simulator: no images)
        text_only.unsupported.clear();
        rendered = chat_->render(text_only, options);
      }
      if (!rendered) return Error("chat template: " + rendered.error());
      text = std::move(*rendered);
    } else {
      for (size_t i = 0; i < chat.messages.size(); ++i) {
        const tokenizer::ChatMessage& m = chat.messages[i];
        text += "<|im_start|>" + m.role + "\n" + m.content;
        if (chat.continue_final_message && i + 1 == chat.messages.size()) break;
        text += "<|im_end|>\n";
      }
      if (chat.add_generation_prompt && !chat.continue_final_message)
        text += "<|im_start|>assistant\n";
    }
    return encode(text, add_special_tokens);
  }

  Result<std::vector<std::string>> token_strs(std::span<const kv::TokenId> ids) const override {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (kv::TokenId id : ids) {
      auto text = tok_.decode(std::span<const uint32_t>(&id, 1), /*skip_special=*/false);
      if (!text) return Error(text.error());
      out.push_back(std::move(*text));
    }
    return out;
  }

  Result<std::string> decode(std::span<const kv::TokenId> ids) const override {
    return tok_.decode(ids, /*skip_special=*/false);
  }

 private:
  std::vector<kv::TokenId> with_special_tokens(const std::vector<kv::TokenId>& ids) const {
    std::vector<kv::TokenId> out;
    tok_.post_process(ids, nullptr, out);
    return out;
  }

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
