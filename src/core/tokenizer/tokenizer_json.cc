// Tokenizer::load: reads tokenizer.json (simdjson DOM) and checks that every component is
// one kvgate implements exactly; anything else is rejected with the field's path.
#include <simdjson.h>

#include <string>

#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"
#include "core/tokenizer/unicode.h"

namespace kvgate::tokenizer {

namespace dom = simdjson::dom;

struct Tokenizer::Loaded {
  // Field `key` of object `obj`, or nullopt when absent.
  static std::optional<dom::element> field(dom::element obj, const char* key) {
    dom::object o;
    if (obj.get(o)) return std::nullopt;
    dom::element e;
    if (o.at_key(key).get(e)) return std::nullopt;
    return e;
  }
  static bool is_null_or_absent(const std::optional<dom::element>& e) { return !e || e->is_null(); }
  static std::optional<std::string_view> string_of(const std::optional<dom::element>& e) {
    std::string_view s;
    if (!e || e->get(s)) return std::nullopt;
    return s;
  }
  static std::string type_of(dom::element obj) {
    auto t = string_of(field(obj, "type"));
    return t ? std::string(*t) : std::string();
  }
  // Value of boolean field `key` (default when absent); error when not a boolean.
  static Result<bool> flag(dom::element obj, const char* key, bool dflt, const std::string& path) {
    auto e = field(obj, key);
    if (!e || e->is_null()) return dflt;
    bool b;
    if (e->get(b)) return Error(path + "." + key + ": not a boolean");
    return b;
  }

  static Status normalizer(Tokenizer& t, dom::element root) {
    auto n = field(root, "normalizer");
    if (is_null_or_absent(n)) return {};
    const std::string type = type_of(*n);
    if (type == "NFC") {
      t.nfc_ = true;
      return {};
    }
    if (type == "Sequence") {
      dom::array a;
      if (auto ns = field(*n, "normalizers"); ns && !ns->get(a) && a.size() == 0) return {};
    }
    return Error("normalizer: unsupported type \"" + type + "\" (kvgate supports NFC or none)");
  }

  static Status byte_level(dom::element e, const std::string& path, bool need_no_regex) {
    auto aps = flag(e, "add_prefix_space", false, path);
    if (!aps) return Error(aps.error());
    if (*aps) return Error(path + ".add_prefix_space: true is not supported");
    if (need_no_regex) {
      auto ur = flag(e, "use_regex", true, path);
      if (!ur) return Error(ur.error());
      if (*ur) return Error(path + ".use_regex: true (GPT-2 regex) is not supported");
    }
    return {};
  }

  static Status pre_tokenizer(Tokenizer& t, dom::element root) {
    const std::string path = "pre_tokenizer";
    auto p = field(root, "pre_tokenizer");
    if (is_null_or_absent(p)) return Error(path + ": missing (kvgate needs a Split regex)");
    if (type_of(*p) != "Sequence")
      return Error(path + ".type: unsupported \"" + type_of(*p) + "\" (need Sequence)");
    dom::array a;
    auto list = field(*p, "pretokenizers");
    if (!list || list->get(a) || a.size() != 2)
      return Error(path + ".pretokenizers: need exactly [Split, ByteLevel]");
    dom::element split = a.at(0).value_unsafe();
    dom::element bl = a.at(1).value_unsafe();
    const std::string sp = path + ".pretokenizers[0]";
    if (type_of(split) != "Split") return Error(sp + ".type: need Split");
    auto regex = string_of(field(field(split, "pattern").value_or(dom::element()), "Regex"));
    if (!regex) return Error(sp + ".pattern.Regex: missing (only regex patterns are supported)");
    auto kind = recognize_split_regex(*regex);
    if (!kind)
      return Error(sp + ".pattern.Regex: unsupported regex " + std::string(*regex) +
                   " (kvgate knows the Qwen2/Qwen3 and Llama 3 patterns)");
    t.split_ = *kind;
    if (string_of(field(split, "behavior")).value_or("") != "Isolated")
      return Error(sp + ".behavior: need Isolated");
    auto inv = flag(split, "invert", false, sp);
    if (!inv) return Error(inv.error());
    if (*inv) return Error(sp + ".invert: true is not supported");
    if (type_of(bl) != "ByteLevel") return Error(path + ".pretokenizers[1].type: need ByteLevel");
    return byte_level(bl, path + ".pretokenizers[1]", true);
  }

  static Status decoder_and_post(dom::element root) {
    auto d = field(root, "decoder");
    if (!is_null_or_absent(d) && type_of(*d) != "ByteLevel")
      return Error("decoder.type: unsupported \"" + type_of(*d) + "\" (need ByteLevel)");
    auto pp = field(root, "post_processor");
    if (!is_null_or_absent(pp) && type_of(*pp) != "ByteLevel")
      return Error("post_processor.type: unsupported \"" + type_of(*pp) +
                   "\" (kvgate encodes without post-processor tokens; need ByteLevel or null)");
    return {};
  }

  static Status model(Tokenizer& t, dom::element root) {
    auto m = field(root, "model");
    if (!m) return Error("model: missing");
    if (type_of(*m) != "BPE") return Error("model.type: unsupported \"" + type_of(*m) + "\"");
    if (!is_null_or_absent(field(*m, "dropout"))) return Error("model.dropout: not supported");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      auto v = field(*m, k);
      if (!is_null_or_absent(v) && string_of(v).value_or("x") != "")
        return Error(std::string("model.") + k + ": not supported");
    }
    auto im = flag(*m, "ignore_merges", false, "model");
    if (!im) return Error(im.error());

    dom::object vocab;
    auto ve = field(*m, "vocab");
    if (!ve || ve->get(vocab)) return Error("model.vocab: missing or not an object");
    std::vector<BpeModel::VocabEntry> entries;
    entries.reserve(vocab.size());
    for (auto [key, value] : vocab) {
      int64_t id;
      if (value.get(id) || id < 0 || id > UINT32_MAX)
        return Error("model.vocab[\"" + std::string(key) + "\"]: id is not a number");
      if (find_invalid_utf8(key) != std::string_view::npos)
        return Error("model.vocab: token " + std::to_string(id) + " is not UTF-8");
      auto bytes = byte_level_decode(key);
      if (!bytes)
        return Error("model.vocab[\"" + std::string(key) + "\"]: not in the byte-level alphabet");
      entries.push_back({std::move(*bytes), static_cast<uint32_t>(id)});
    }
    dom::array merges;
    auto me = field(*m, "merges");
    if (!me || me->get(merges)) return Error("model.merges: missing or not an array");
    std::vector<BpeModel::Merge> pairs;
    pairs.reserve(merges.size());
    size_t r = 0;
    for (dom::element e : merges) {
      const std::string mp = "model.merges[" + std::to_string(r++) + "]";
      std::string_view l, rt, s;
      dom::array pa;
      if (!e.get(s)) {
        const size_t sp = s.find(' ');
        if (sp == std::string_view::npos || s.find(' ', sp + 1) != std::string_view::npos)
          return Error(mp + ": need \"left right\"");
        l = s.substr(0, sp);
        rt = s.substr(sp + 1);
      } else if (!e.get(pa) && pa.size() == 2 && !pa.at(0).get(l) && !pa.at(1).get(rt)) {
      } else {
        return Error(mp + ": need \"left right\" or [left, right]");
      }
      if (find_invalid_utf8(l) != std::string_view::npos ||
          find_invalid_utf8(rt) != std::string_view::npos)
        return Error(mp + ": not UTF-8");
      auto lb = byte_level_decode(l);
      auto rb = byte_level_decode(rt);
      if (!lb || !rb) return Error(mp + ": not in the byte-level alphabet");
      pairs.push_back({std::move(*lb), std::move(*rb)});
    }
    auto bpe = BpeModel::build(std::move(entries), pairs, *im);
    if (!bpe) return Error(bpe.error());
    t.bpe_ = std::move(*bpe);
    return {};
  }

  static Status added_tokens(Tokenizer& t, dom::element root) {
    auto at = field(root, "added_tokens");
    if (is_null_or_absent(at)) return {};
    dom::array a;
    if (at->get(a)) return Error("added_tokens: not an array");
    size_t i = 0;
    std::vector<AddedToken> raw, normalized;
    for (dom::element e : a) {
      const std::string p = "added_tokens[" + std::to_string(i++) + "]";
      AddedToken tok;
      int64_t id;
      auto content = string_of(field(e, "content"));
      auto ide = field(e, "id");
      if (!content || content->empty()) return Error(p + ".content: missing or empty");
      if (find_invalid_utf8(*content) != std::string_view::npos)
        return Error(p + ".content: not UTF-8");
      if (!ide || ide->get(id) || id < 0 || id > 16 * 1024 * 1024) return Error(p + ".id: bad");
      tok.content = std::string(*content);
      tok.id = static_cast<uint32_t>(id);
      for (auto [key, dst] : {std::pair{"special", &tok.special},
                              {"lstrip", &tok.lstrip},
                              {"rstrip", &tok.rstrip},
                              {"normalized", &tok.normalized},
                              {"single_word", &tok.single_word}}) {
        auto v = flag(e, key, false, p);
        if (!v) return Error(v.error());
        *dst = *v;
      }
      if (tok.single_word) return Error(p + ".single_word: true is not supported");
      if (tok.id >= t.added_by_id_.size()) t.added_by_id_.resize(tok.id + 1, -1);
      t.added_by_id_[tok.id] = static_cast<int32_t>(t.added_.size());
      t.added_.push_back(tok);
      (tok.normalized && t.nfc_ ? normalized : raw).push_back(tok);
    }
    t.raw_matcher_ = AddedTokenMatcher(raw);
    t.normalized_matcher_ = AddedTokenMatcher(normalized);
    return {};
  }
};

Result<Tokenizer> Tokenizer::load(std::string_view tokenizer_json) {
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string text(tokenizer_json);
  if (auto err = parser.parse(text).get(root))
    return Error(std::string("tokenizer.json: not valid JSON: ") + simdjson::error_message(err));
  Tokenizer t;
  for (auto step :
       {&Loaded::normalizer, &Loaded::pre_tokenizer, &Loaded::model, &Loaded::added_tokens}) {
    Status st = step(t, root);
    if (!st) return Error("tokenizer.json: " + st.error());
  }
  if (Status st = Loaded::decoder_and_post(root); !st)
    return Error("tokenizer.json: " + st.error());
  return t;
}

}  // namespace kvgate::tokenizer
