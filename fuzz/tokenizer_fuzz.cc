// The byte-level BPE tokenizer (core/tokenizer/tokenizer.h) on arbitrary bytes, with the
// Qwen3 and Llama 3 tokenizer.json fixtures. Invalid UTF-8 is an error naming its offset;
// valid text decodes back to itself (Qwen3: to its NFC form); the fast paths give what
// the general ones give: BPE with character pre-merging against plain BPE from bytes, the
// prompt cache against a fresh encode, and encoding up to an added-token boundary against
// the head of the whole encoding. The same two loaded without fast paths (PCRE2 for the
// split regex, no pre-merge tables) must give the fast path's ids for every valid text;
// and the general components of the other fixtures (Llama 2 and Gemma 3: Metaspace or
// Replace normalizers, byte fallback; DeepSeek V3: a Sequence of Split regexes) encode any
// valid text and decode what they encoded.
#include <string>
#include <vector>

#include "core/common/unicode.h"
#include "core/tokenizer/pre_tokenizer.h"
#include "core/tokenizer/prompt_cache.h"
#include "core/tokenizer/tokenizer.h"
#include "fuzz/fuzz_support.h"

namespace {

using namespace kvgate;
using namespace kvgate::tokenizer;
using kvgate::unicode::find_invalid_utf8;
using kvgate::unicode::nfc;

struct Subject {
  const char* name;
  Tokenizer tok;
  bool nfc;
};

Subject load(const char* name, bool nfc, bool fast_paths = true) {
  Result<Tokenizer> t =
      Tokenizer::load(fuzz::source_file(std::string(".deps/fixtures/") + name + "/tokenizer.json"),
                      {.fast_paths = fast_paths});
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
const Subject* g_qwen3_general = nullptr;
const Subject* g_llama3_general = nullptr;
std::vector<const Subject*>* g_others = nullptr;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_qwen3 = new Subject(load("qwen3", true));
  g_llama3 = new Subject(load("llama3", false));
  KVGATE_FUZZ_CHECK(g_qwen3->tok.path().fast && g_llama3->tok.path().fast,
                    "the fixtures no longer take the fast path");
  g_qwen3_general = new Subject(load("qwen3", true, /*fast_paths=*/false));
  g_llama3_general = new Subject(load("llama3", false, /*fast_paths=*/false));
  g_others = new std::vector<const Subject*>{new Subject(load("llama2", false)),
                                             new Subject(load("gemma3", false)),
                                             new Subject(load("deepseek_v3", false))};
  return 0;
}

namespace {

// The general path against the fast one: the same ids.
void check_paths(const Subject& fast, const Subject& general, std::string_view text) {
  Result<std::vector<uint32_t>> a = fast.tok.encode(text);
  Result<std::vector<uint32_t>> b = general.tok.encode(text);
  KVGATE_FUZZ_CHECK(a && b && *a == *b, std::string(fast.name) + ": fast path " +
                                            (a ? show(*a) : a.error()) + " general path " +
                                            (b ? show(*b) : b.error()));
}

// A tokenizer of general components only: valid text encodes, and what it gave decodes.
void check_general(const Subject& s, std::string_view text, bool valid) {
  Result<std::vector<uint32_t>> ids = s.tok.encode(text);
  KVGATE_FUZZ_CHECK(static_cast<bool>(ids) == valid,
                    std::string(s.name) + (valid ? ": valid UTF-8 refused: " + ids.error()
                                                 : std::string(": invalid UTF-8 accepted")));
  if (!ids) return;
  const Result<std::string> back = s.tok.decode(*ids, /*skip_special=*/false);
  KVGATE_FUZZ_CHECK(static_cast<bool>(back), std::string(s.name) + ": cannot decode " + show(*ids) +
                                                 ": " + (back ? "" : back.error()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Subject& qwen3 = *g_qwen3;
  const Subject& llama3 = *g_llama3;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  check(qwen3, text);
  check(llama3, text);
  const bool valid = find_invalid_utf8(text) == std::string_view::npos;
  if (valid) {
    check_paths(qwen3, *g_qwen3_general, text);
    check_paths(llama3, *g_llama3_general, text);
  }
  for (const Subject* s : *g_others) check_general(*s, text, valid);
  // Each piece the pre-tokenizer cuts (what BPE is given) through BPE: pre-merging
  // changes nothing.
  if (valid) {
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
