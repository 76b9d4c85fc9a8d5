// The post-processor of tokenizer.json: the special token ids added around one sequence
// or a pair when special tokens are requested (vLLM adds them to completions prompts;
// chat prompts carry them in the template's text).
//
// TemplateProcessing (single and pair templates), RobertaProcessing / BertProcessing
// (<cls> A <sep> and <cls> A <sep> [<sep>] B <sep>), ByteLevel (offsets only: no ids) and
// a Sequence of those in which at most one adds ids. Immutable after construction.
//
//   PostProcessor pp = ...;            // from Tokenizer::load
//   std::vector<uint32_t> out;
//   pp.apply(a_ids, nullptr, out);      // <bos> A, for Llama 3
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvgate::tokenizer {

class PostProcessor {
 public:
  // One item of a template: a sequence (0 = A, 1 = B) or literal special token ids.
  struct Item {
    int sequence = -1;  // -1: `ids` are special tokens
    std::vector<uint32_t> ids;
  };

  void set(std::vector<Item> single, std::vector<Item> pair, std::string kind) {
    single_ = std::move(single);
    pair_ = std::move(pair);
    kind_ = std::move(kind);
  }
  bool adds_ids() const { return !single_.empty() || !pair_.empty(); }

  // Appends the post-processed ids of a (and b when non-null) to out.
  void apply(std::span<const uint32_t> a, const std::span<const uint32_t>* b,
             std::vector<uint32_t>& out) const;

  // Special ids before / after the sequence of a single template.
  std::vector<uint32_t> single_prefix() const;
  std::vector<uint32_t> single_suffix() const;
  const std::string& kind() const { return kind_; }

 private:
  std::vector<Item> single_, pair_;  // empty: nothing added (only the sequences)
  std::string kind_ = "none";
};

}  // namespace kvgate::tokenizer
