// The byte-level BPE tokenizer (core/tokenizer/tokenizer.h) on arbitrary bytes, with the
// Qwen3 and Llama 3 tokenizer.json fixtures. Invalid UTF-8 is an error naming its offset;
// valid text decodes back to itself (Qwen3: to its NFC form); the fast paths give what
// the general ones give: BPE with character pre-merging against plain BPE from bytes, the
// prompt cache against a fresh encode, and encoding up to an added-token boundary against
// the head of the whole encoding.
#include <string>
#include <vector>

#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/prompt_cache.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;
using namespace kvgate::tokenizer;

struct Subject {
  const char* name;
  Tokenizer tok;
  bool nfc;
};

Subject load(const char* name, bool nfc) {
  Result<Tokenizer> t =
      Tokenizer::load(fuzz::source_file(std::string(".deps/fixtures/") + name + "/tokenizer.json"));
  KVGATE_FUZZ_CHECK(static_cast<bool>(t), t ? std::string() : t.error());
  return Subject{name, std::move(*t), nfc};
}

std::string show(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += std::to_string(id) + " ";
  return s;
}

void check(const Subject& s, std::string_view text) {
  const Tokenizer& tok = s.tok;
  std::vector<uint32_t> ids;
  std::vector<Boundary> boundaries;
  const Status st = tok.encode_into(text, ids, &boundaries);
  const size_t bad = find_invalid_utf8(text);
  if (!st) {
    KVGATE_FUZZ_CHECK(bad < text.size(),
                      std::string(s.name) + ": valid UTF-8 refused: " + st.error());
    return;
  }
  KVGATE_FUZZ_CHECK(bad >= text.size(), std::string(s.name) + ": invalid UTF-8 accepted");
  std::string want(text);
  if (s.nfc) {
    want.clear();
    nfc(text, want);
  }
  const Result<std::string> back = tok.decode(ids, /*skip_special=*/false);
  KVGATE_FUZZ_CHECK(back && *back == want, std::string(s.name) + ": decodes to another text: [" +
                                               (back ? *back : back.error()) + "] ids " +
                                               show(ids));
  // Up to a boundary, the head of the whole encoding.
  for (size_t i = 0; i < boundaries.size() && i < 4; ++i) {
    const Boundary& b = boundaries[i];
    Result<std::vector<uint32_t>> head = tok.encode(text.substr(0, b.text_end));
    KVGATE_FUZZ_CHECK(
        head && head->size() == b.ids && std::equal(head->begin(), head->end(), ids.begin()),
        std::string(s.name) + ": boundary at byte " + std::to_string(b.text_end));
  }
  // The prompt cache: a conversation's earlier turn first, then the whole.
  PromptCache cache(1 << 20);
  std::vector<uint32_t> cached;
  if (!boundaries.empty()) {
    (void)cache.encode(tok, text.substr(0, boundaries[boundaries.size() / 2].text_end), cached);
  }
  const Status cst = cache.encode(tok, text, cached);
  KVGATE_FUZZ_CHECK(cst && cached == ids, std::string(s.name) + ": prompt cache gives " +
                                              show(cached) + " for " + show(ids));
}

}  // namespace

// Loaded before the first input (loading is not what a run's timeout is for).
const Subject* g_qwen3 = nullptr;
const Subject* g_llama3 = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_qwen3 = new Subject(load("qwen3", true));
  g_llama3 = new Subject(load("llama3", false));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Subject& qwen3 = *g_qwen3;
  const Subject& llama3 = *g_llama3;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(qwen3, text);
  check(llama3, text);
  // Each piece the pre-tokenizer cuts (what BPE is given) through BPE: pre-merging
  // changes nothing.
  if (find_invalid_utf8(text) == std::string_view::npos) {
    for (const Subject* s : {&qwen3, &llama3}) {
      const SplitPattern pattern = s == &qwen3 ? SplitPattern::kQwen2 : SplitPattern::kLlama3;
      for (size_t i = 0; i < text.size();) {
        const size_t e = next_piece(pattern, text, i);
        const std::string_view word = text.substr(i, e - i);
        i = e;
        std::vector<uint32_t> fast, plain;
        s->tok.bpe().encode_word(word, fast);
        s->tok.bpe().encode_word_from_bytes(word, plain);
        KVGATE_FUZZ_CHECK(fast == plain, std::string(s->name) + ": pre-merged " + show(fast) +
                                             " plain " + show(plain));
      }
    }
  }
  return 0;
}
