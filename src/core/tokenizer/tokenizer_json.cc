// Tokenizer::load: reads tokenizer.json (simdjson DOM) into the components; anything kvgate
// does not implement exactly is refused with the field's path and the reason.
#include <simdjson.h>

#include <string>

#include "core/common/unicode.h"
#include "core/tokenizer/byte_level.h"
#include "core/tokenizer/tokenizer.h"

namespace kvgate::tokenizer {

using unicode::decode_utf8;
using unicode::find_invalid_utf8;

namespace dom = simdjson::dom;

namespace {

// Field `key` of object `obj`, or nullopt when absent.
std::optional<dom::element> field(dom::element obj, const char* key) {
  dom::object o;
  if (obj.get(o)) return std::nullopt;
  dom::element e;
  if (o.at_key(key).get(e)) return std::nullopt;
  return e;
}
bool is_null_or_absent(const std::optional<dom::element>& e) { return !e || e->is_null(); }
std::optional<std::string_view> string_of(const std::optional<dom::element>& e) {
  std::string_view s;
  if (!e || e->get(s)) return std::nullopt;
  return s;
}
std::string type_of(dom::element obj) {
  auto t = string_of(field(obj, "type"));
  return t ? std::string(*t) : std::string();
}
// Value of boolean field `key` (default when absent); error when not a boolean.
Result<bool> flag(dom::element obj, const char* key, bool dflt, const std::string& path) {
  auto e = field(obj, key);
  if (!e || e->is_null()) return dflt;
  bool b;
  if (e->get(b)) return Error(path + "." + key + ": not a boolean");
  return b;
}
Result<std::string> text(dom::element obj, const char* key, const std::string& path) {
  auto s = string_of(field(obj, key));
  if (!s) return Error(path + "." + key + ": missing or not a string");
  return std::string(*s);
}
// A field holding exactly one character (Metaspace's replacement, Strip's content).
Result<std::string> one_char(dom::element obj, const char* key, const std::string& path) {
  auto s = text(obj, key, path);
  if (!s) return s;
  if (s->empty() || find_invalid_utf8(*s) != std::string::npos ||
      decode_utf8(*s, 0).len != s->size())
    return Error(path + "." + key + ": need exactly one character");
  return s;
}
Result<size_t> count(dom::element obj, const char* key, const std::string& path) {
  auto e = field(obj, key);
  int64_t v = 0;
  if (!e || e->get(v) || v < 0) return Error(path + "." + key + ": need a non-negative integer");
  return static_cast<size_t>(v);
}
std::string at(const std::string& path, const char* key, size_t i) {
  return path + "." + key + "[" + std::to_string(i) + "]";
}

// {"String": s} or {"Regex": r}.
Result<Regex> pattern(dom::element obj, const std::string& path) {
  auto p = field(obj, "pattern");
  if (!p) return Error(path + ".pattern: missing");
  if (auto s = string_of(field(*p, "String"))) return Regex::literal(*s);
  if (auto r = string_of(field(*p, "Regex"))) {
    auto re = Regex::compile(*r);
    if (!re) return Error(path + ".pattern.Regex: " + re.error());
    return re;
  }
  return Error(path + ".pattern: need {\"String\": ...} or {\"Regex\": ...}");
}

Result<SplitBehavior> behavior(dom::element obj, const std::string& path, SplitBehavior dflt) {
  auto b = string_of(field(obj, "behavior"));
  if (!b) return dflt;
  if (*b == "Removed") return SplitBehavior::kRemoved;
  if (*b == "Isolated") return SplitBehavior::kIsolated;
  if (*b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (*b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (*b == "Contiguous") return SplitBehavior::kContiguous;
  return Error(path + ".behavior: unknown \"" + std::string(*b) + "\"");
}

// Metaspace's prepend_scheme, or the older add_prefix_space (true: always).
Result<PreTokenizer::Prepend> prepend_scheme(dom::element obj, const std::string& path) {
  if (auto s = string_of(field(obj, "prepend_scheme"))) {
    if (*s == "always") return PreTokenizer::Prepend::kAlways;
    if (*s == "first") return PreTokenizer::Prepend::kFirst;
    if (*s == "never") return PreTokenizer::Prepend::kNever;
    return Error(path + ".prepend_scheme: unknown \"" + std::string(*s) + "\"");
  }
  auto aps = flag(obj, "add_prefix_space", true, path);
  if (!aps) return Error(aps.error());
  return *aps ? PreTokenizer::Prepend::kAlways : PreTokenizer::Prepend::kNever;
}

}  // namespace

struct Tokenizer::Loaded {
  static Status normalizer(Normalizer& n, dom::element e, const std::string& path) {
    const std::string type = type_of(e);
    static const std::pair<const char*, Normalizer::Kind> kSimple[] = {
        {"NFC", Normalizer::kNfc},
        {"NFD", Normalizer::kNfd},
        {"NFKC", Normalizer::kNfkc},
        {"NFKD", Normalizer::kNfkd},
        {"Lowercase", Normalizer::kLowercase}};
    for (const auto& [name, kind] : kSimple) {
      if (type == name) {
        n.add({.kind = kind});
        return {};
      }
    }
    if (type == "Sequence") {
      dom::array a;
      auto list = field(e, "normalizers");
      if (!list || list->get(a)) return Error(path + ".normalizers: missing");
      size_t i = 0;
      for (dom::element x : a) {
        if (Status st = normalizer(n, x, at(path, "normalizers", i++)); !st) return st;
      }
      return {};
    }
    if (type == "Strip") {
      auto l = flag(e, "strip_left", true, path);
      auto r = flag(e, "strip_right", true, path);
      if (!l) return Error(l.error());
      if (!r) return Error(r.error());
      n.add({.kind = Normalizer::kStrip, .strip_left = *l, .strip_right = *r});
      return {};
    }
    if (type == "Replace") {
      auto p = pattern(e, path);
      if (!p) return Error(p.error());
      auto c = text(e, "content", path);
      if (!c) return Error(c.error());
      n.add({.kind = Normalizer::kReplace, .pattern = std::move(*p), .content = std::move(*c)});
      return {};
    }
    if (type == "Prepend") {
      auto c = text(e, "prepend", path);
      if (!c) return Error(c.error());
      n.add({.kind = Normalizer::kPrepend, .content = std::move(*c)});
      return {};
    }
    if (type == "Precompiled") {
      // SentencePiece's compiled normalization rules; an empty map is the identity.
      auto m = field(e, "precompiled_charsmap");
      if (is_null_or_absent(m)) return {};
      auto b64 = string_of(m);
      if (!b64) return Error(path + ".precompiled_charsmap: not a string");
      if (b64->empty()) return {};
      auto map = PrecompiledCharsMap::parse(*b64);
      if (!map)
        return Error(path +
                     ".precompiled_charsmap: cannot read the Precompiled charsmap: " + map.error());
      n.add({.kind = Normalizer::kPrecompiled, .charsmap = std::move(*map)});
      return {};
    }
    return Error(path + ".type: unsupported \"" + type +
                 "\" (kvgate implements NFC, NFD, NFKC, NFKD, Lowercase, Strip, Replace, "
                 "Prepend, Precompiled and Sequence)");
  }

  static Status pre_tokenizer(PreTokenizer& pre, dom::element e, const std::string& path,
                              std::vector<std::string>& regexes) {
    const std::string type = type_of(e);
    PreTokenizer::Step step{.kind = PreTokenizer::kSplit};
    if (type == "Sequence") {
      dom::array a;
      auto list = field(e, "pretokenizers");
      if (!list || list->get(a)) return Error(path + ".pretokenizers: missing");
      size_t i = 0;
      for (dom::element x : a) {
        if (Status st = pre_tokenizer(pre, x, at(path, "pretokenizers", i++), regexes); !st)
          return st;
      }
      return {};
    }
    if (type == "Split") {
      auto p = pattern(e, path);
      if (!p) return Error(p.error());
      auto b = behavior(e, path, SplitBehavior::kIsolated);
      if (!b) return Error(b.error());
      auto inv = flag(e, "invert", false, path);
      if (!inv) return Error(inv.error());
      step.regex = std::move(*p);
      step.behavior = *b;
      step.invert = *inv;
      regexes.push_back(std::string(
          string_of(field(field(e, "pattern").value_or(dom::element()), "Regex")).value_or("")));
    } else if (type == "ByteLevel") {
      auto aps = flag(e, "add_prefix_space", true, path);
      auto ur = flag(e, "use_regex", true, path);
      if (!aps) return Error(aps.error());
      if (!ur) return Error(ur.error());
      step.kind = PreTokenizer::kByteLevel;
      step.add_prefix_space = *aps;
      if (*ur) step.regex = Regex::compile(kGpt2Regex).value();
      regexes.emplace_back();
    } else if (type == "Metaspace") {
      auto r = one_char(e, "replacement", path);
      if (!r) return Error(r.error());
      auto ps = prepend_scheme(e, path);
      if (!ps) return Error(ps.error());
      auto sp = flag(e, "split", true, path);
      if (!sp) return Error(sp.error());
      step.kind = PreTokenizer::kMetaspace;
      step.replacement = std::move(*r);
      step.prepend = *ps;
      step.split = *sp;
      regexes.emplace_back();
    } else if (type == "Digits") {
      auto d = flag(e, "individual_digits", false, path);
      if (!d) return Error(d.error());
      step.kind = PreTokenizer::kDigits;
      step.individual_digits = *d;
      regexes.emplace_back();
    } else if (type == "Punctuation") {
      auto b = behavior(e, path, SplitBehavior::kIsolated);
      if (!b) return Error(b.error());
      step.kind = PreTokenizer::kPunctuation;
      step.behavior = *b;
      regexes.emplace_back();
    } else if (type == "Whitespace" || type == "WhitespaceSplit") {
      step.kind = type == "Whitespace" ? PreTokenizer::kWhitespace : PreTokenizer::kWhitespaceSplit;
      regexes.emplace_back();
    } else if (type == "CharDelimiterSplit") {
      auto d = one_char(e, "delimiter", path);
      if (!d) return Error(d.error());
      step.kind = PreTokenizer::kCharDelimiter;
      step.replacement = std::move(*d);
      regexes.emplace_back();
    } else {
      return Error(path + ".type: unsupported \"" + type +
                   "\" (kvgate implements Split, ByteLevel, Metaspace, Digits, Punctuation, "
                   "Whitespace, WhitespaceSplit, CharDelimiterSplit and Sequence)");
    }
    pre.add(std::move(step));
    return {};
  }

  static Status model(Tokenizer& t, dom::element root, bool byte_level) {
    auto m = field(root, "model");
    if (!m) return Error("model: missing");
    const std::string type = type_of(*m);
    if (type != "BPE")
      return Error("model.type: unsupported \"" + type +
                   "\" (kvgate implements BPE; Unigram, WordPiece and WordLevel models are "
                   "refused)");
    auto dropout = field(*m, "dropout");
    double d = 0;
    if (!is_null_or_absent(dropout) && (dropout->get(d) || d != 0))
      return Error("model.dropout: not supported (encoding would be random)");
    BpeModel::Options o;
    o.byte_level = byte_level;
    for (auto [key, dst] : {std::pair{"continuing_subword_prefix", &o.continuing_subword_prefix},
                            {"end_of_word_suffix", &o.end_of_word_suffix},
                            {"unk_token", &o.unk_token}}) {
      auto v = field(*m, key);
      if (is_null_or_absent(v)) continue;
      auto s = string_of(v);
      if (!s) return Error(std::string("model.") + key + ": not a string");
      *dst = std::string(*s);
    }
    for (auto [key, dst] : {std::pair{"ignore_merges", &o.ignore_merges},
                            {"fuse_unk", &o.fuse_unk},
                            {"byte_fallback", &o.byte_fallback}}) {
      auto v = flag(*m, key, false, "model");
      if (!v) return Error(v.error());
      *dst = *v;
    }
    if (byte_level) {
      // Every byte has a token in a byte-level vocabulary (checked by BpeModel::build),
      // so unk_token and byte_fallback never apply.
      o.unk_token.clear();
      o.byte_fallback = false;
    }
    auto decode_key = [&](std::string_view s) -> std::optional<std::string> {
      if (!byte_level) return std::string(s);
      return byte_level_decode(s);
    };

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
      auto bytes = decode_key(key);
      if (!bytes) {
        entries.push_back({std::string(key), static_cast<uint32_t>(id), /*reachable=*/false});
        continue;
      }
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
      auto lb = decode_key(l);
      auto rb = decode_key(rt);
      if (!lb || !rb) return Error(mp + ": not in the byte-level alphabet");
      pairs.push_back({std::move(*lb), std::move(*rb)});
    }
    auto bpe = BpeModel::build(std::move(entries), pairs, o);
    if (!bpe) return Error(bpe.error());
    t.bpe_ = std::move(*bpe);
    return {};
  }

  static Status added_tokens(Tokenizer& t, dom::element root) {
    auto at_list = field(root, "added_tokens");
    if (is_null_or_absent(at_list)) return {};
    dom::array a;
    if (at_list->get(a)) return Error("added_tokens: not an array");
    size_t i = 0;
    std::vector<AddedToken> raw, normalized;
    std::vector<std::string> raw_patterns, normalized_patterns;
    Regex::Scratch scratch;
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
      if (tok.id >= t.added_by_id_.size()) t.added_by_id_.resize(tok.id + 1, -1);
      t.added_by_id_[tok.id] = static_cast<int32_t>(t.added_.size());
      t.added_.push_back(tok);
      if (tok.normalized) {
        // Matched in normalized text, so its pattern is its normalized content.
        std::string n;
        if (Status st = t.normalizer_.normalize(tok.content, n, scratch); !st)
          return Error(p + ": " + st.error());
        normalized.push_back(tok);
        normalized_patterns.push_back(std::move(n));
      } else {
        raw.push_back(tok);
        raw_patterns.push_back(tok.content);
      }
    }
    t.raw_matcher_ = AddedTokenMatcher(raw, raw_patterns);
    t.normalized_matcher_ = AddedTokenMatcher(normalized, normalized_patterns);
    return {};
  }

  static Result<std::vector<PostProcessor::Item>> tpl(dom::element pp, const char* key,
                                                      dom::object specials,
                                                      const std::string& path) {
    std::vector<PostProcessor::Item> out;
    dom::array list;
    auto s = field(pp, key);
    if (!s || s->get(list)) return Error(path + "." + key + ": missing");
    size_t i = 0;
    for (dom::element item : list) {
      const std::string ip = at(path, key, i++);
      if (auto seq = field(item, "Sequence")) {
        const std::string id(string_of(field(*seq, "id")).value_or(""));
        if (id != "A" && id != "B") return Error(ip + ".Sequence.id: need A or B");
        out.push_back({.sequence = id == "A" ? 0 : 1});
        continue;
      }
      auto sp = field(item, "SpecialToken");
      auto name = sp ? string_of(field(*sp, "id")) : std::nullopt;
      if (!name) return Error(ip + ": need Sequence or SpecialToken");
      dom::element entry;
      dom::array ids;
      if (specials.at_key(*name).get(entry) ||
          field(entry, "ids").value_or(dom::element()).get(ids))
        return Error(path + ".special_tokens[\"" + std::string(*name) + "\"]: missing ids");
      PostProcessor::Item it;
      for (dom::element id : ids) {
        int64_t v;
        if (id.get(v) || v < 0 || v > UINT32_MAX) return Error(ip + ": bad id");
        it.ids.push_back(static_cast<uint32_t>(v));
      }
      out.push_back(std::move(it));
    }
    return out;
  }

  // ["<s>", 0] of RobertaProcessing / BertProcessing.
  static Result<uint32_t> token_pair(dom::element pp, const char* key, const std::string& path) {
    dom::array a;
    int64_t id;
    auto f = field(pp, key);
    if (!f || f->get(a) || a.size() != 2 || a.at(1).get(id) || id < 0 || id > UINT32_MAX)
      return Error(path + "." + key + ": need [token, id]");
    return static_cast<uint32_t>(id);
  }

  static Status post_processor(Tokenizer& t, dom::element pp, const std::string& path) {
    const std::string type = type_of(pp);
    if (type == "ByteLevel") return {};
    if (type == "Sequence") {
      dom::array list;
      auto ps = field(pp, "processors");
      if (!ps || ps->get(list)) return Error(path + ".processors: missing");
      size_t i = 0;
      for (dom::element e : list) {
        if (Status st = post_processor(t, e, at(path, "processors", i++)); !st) return st;
      }
      return {};
    }
    if (t.post_.adds_ids())
      return Error(path + ": a second post-processor that adds tokens is not supported");
    if (type == "TemplateProcessing") {
      dom::object specials;
      auto st = field(pp, "special_tokens");
      if (!st || st->get(specials)) return Error(path + ".special_tokens: missing");
      auto single = tpl(pp, "single", specials, path);
      if (!single) return Error(single.error());
      auto pair = tpl(pp, "pair", specials, path);
      if (!pair) return Error(pair.error());
      t.post_.set(std::move(*single), std::move(*pair), type);
      return {};
    }
    if (type == "RobertaProcessing" || type == "BertProcessing") {
      auto sep = token_pair(pp, "sep", path);
      auto cls = token_pair(pp, "cls", path);
      if (!sep) return Error(sep.error());
      if (!cls) return Error(cls.error());
      using Item = PostProcessor::Item;
      std::vector<Item> single{{.ids = {*cls}}, {.sequence = 0}, {.ids = {*sep}}};
      std::vector<Item> pair{{.ids = {*cls}}, {.sequence = 0}, {.ids = {*sep}}};
      if (type == "RobertaProcessing") pair.push_back({.ids = {*sep}});
      pair.push_back({.sequence = 1});
      pair.push_back({.ids = {*sep}});
      t.post_.set(std::move(single), std::move(pair), type);
      return {};
    }
    return Error(path + ".type: unsupported \"" + type +
                 "\" (kvgate implements TemplateProcessing, RobertaProcessing, BertProcessing, "
                 "ByteLevel and Sequence)");
  }

  static Status decoder(Decoder& d, dom::element e, const std::string& path) {
    const std::string type = type_of(e);
    if (type == "Sequence") {
      dom::array a;
      auto list = field(e, "decoders");
      if (!list || list->get(a)) return Error(path + ".decoders: missing");
      size_t i = 0;
      for (dom::element x : a) {
        if (Status st = decoder(d, x, at(path, "decoders", i++)); !st) return st;
      }
      return {};
    }
    if (type == "ByteLevel") {
      d.add({.kind = Decoder::kByteLevel});
    } else if (type == "ByteFallback") {
      d.add({.kind = Decoder::kByteFallback});
    } else if (type == "Fuse") {
      d.add({.kind = Decoder::kFuse});
    } else if (type == "Metaspace") {
      auto r = one_char(e, "replacement", path);
      if (!r) return Error(r.error());
      auto ps = prepend_scheme(e, path);
      if (!ps) return Error(ps.error());
      d.add({.kind = Decoder::kMetaspace,
             .text = std::move(*r),
             .drop_first = *ps != PreTokenizer::Prepend::kNever});
    } else if (type == "Strip") {
      auto c = one_char(e, "content", path);
      auto s = count(e, "start", path);
      auto st = count(e, "stop", path);
      if (!c) return Error(c.error());
      if (!s) return Error(s.error());
      if (!st) return Error(st.error());
      d.add({.kind = Decoder::kStrip, .text = std::move(*c), .start = *s, .stop = *st});
    } else if (type == "Replace") {
      auto p = pattern(e, path);
      if (!p) return Error(p.error());
      auto c = text(e, "content", path);
      if (!c) return Error(c.error());
      d.add({.kind = Decoder::kReplace, .text = std::move(*c), .pattern = std::move(*p)});
    } else if (type == "BPEDecoder") {
      auto s = text(e, "suffix", path);
      if (!s) return Error(s.error());
      d.add({.kind = Decoder::kBpeSuffix, .text = std::move(*s)});
    } else {
      return Error(path + ".type: unsupported \"" + type +
                   "\" (kvgate implements ByteLevel, Metaspace, ByteFallback, Fuse, Strip, "
                   "Replace, BPEDecoder and Sequence)");
    }
    return {};
  }

  // The fast path: a pre-tokenizer of exactly [Split(known regex), ByteLevel without prefix
  // space or regex], whose Split the hand-written scanner runs.
  static void choose_path(Tokenizer& t, const std::vector<std::string>& regexes, bool fast_paths) {
    const auto& steps = t.pre_.steps();
    const bool shape = steps.size() == 2 && steps[0].kind == PreTokenizer::kSplit &&
                       steps[0].behavior == SplitBehavior::kIsolated && !steps[0].invert &&
                       steps[1].kind == PreTokenizer::kByteLevel && !steps[1].add_prefix_space &&
                       !steps[1].regex;
    const std::optional<SplitPattern> known =
        shape ? recognize_split_regex(regexes[0]) : std::nullopt;
    std::string c = "normalizer " + t.normalizer_.describe() + "; pre-tokenizer " +
                    t.pre_.describe() + "; model BPE (" +
                    (t.bpe_.byte_level() ? "byte-level" : "characters") +
                    (t.bpe_.premerge() ? ", pre-merged characters" : "") + "); decoder " +
                    t.decoder_.describe() + "; post-processor " + t.post_.kind();
    t.path_.components = std::move(c);
    if (known && fast_paths) {
      t.fast_split_ = known;
      t.path_.fast = true;
      t.path_.why = std::string("the Split regex is the ") +
                    (*known == SplitPattern::kQwen2 ? "Qwen2/Qwen3" : "Llama 3") +
                    " pattern: kvgate's hand-written scanner runs it";
      return;
    }
    t.path_.fast = false;
    if (known) {
      t.path_.why = "fast paths disabled: PCRE2 runs the Split regex";
    } else if (shape) {
      t.path_.why = "the Split regex is not one of the scanner patterns: PCRE2 (JIT) runs it";
    } else {
      t.path_.why =
          "the pre-tokenizer is not a single Split regex plus ByteLevel: the "
          "general pipeline runs it";
    }
  }
};

Result<Tokenizer> Tokenizer::load(std::string_view tokenizer_json, const LoadOptions& options) {
  dom::parser parser;
  dom::element root;
  const simdjson::padded_string text(tokenizer_json);
  if (auto err = parser.parse(text).get(root))
    return Error(std::string("tokenizer.json: not valid JSON: ") + simdjson::error_message(err));
  auto fail = [](const std::string& e) { return Error("tokenizer.json: " + e); };
  Tokenizer t;
  if (auto n = field(root, "normalizer"); !is_null_or_absent(n)) {
    if (Status st = Loaded::normalizer(t.normalizer_, *n, "normalizer"); !st)
      return fail(st.error());
  }
  std::vector<std::string> regexes;
  if (auto p = field(root, "pre_tokenizer"); !is_null_or_absent(p)) {
    if (Status st = Loaded::pre_tokenizer(t.pre_, *p, "pre_tokenizer", regexes); !st)
      return fail(st.error());
  }
  const auto& steps = t.pre_.steps();
  for (size_t i = 0; i + 1 < steps.size(); ++i) {
    if (steps[i].kind == PreTokenizer::kByteLevel)
      return fail(
          "pre_tokenizer: a ByteLevel step before other pre-tokenizers is not supported (they "
          "would split byte-level characters)");
  }
  if (Status st = Loaded::model(t, root, t.pre_.byte_level()); !st) return fail(st.error());
  if (Status st = Loaded::added_tokens(t, root); !st) return fail(st.error());
  if (auto d = field(root, "decoder"); !is_null_or_absent(d)) {
    t.decoder_.set_present(true);
    if (Status st = Loaded::decoder(t.decoder_, *d, "decoder"); !st) return fail(st.error());
  }
  if (auto pp = field(root, "post_processor"); !is_null_or_absent(pp)) {
    if (Status st = Loaded::post_processor(t, *pp, "post_processor"); !st) return fail(st.error());
  }
  t.post_prefix_ = t.post_.single_prefix();
  t.post_suffix_ = t.post_.single_suffix();
  Loaded::choose_path(t, regexes, options.fast_paths);
  for (const PreTokenizer::Step& s : t.pre_.steps())
    if (s.kind == PreTokenizer::kMetaspace && s.prepend == PreTokenizer::Prepend::kFirst)
      t.cut_exact_ = false;
  for (const AddedToken& a : t.added_)
    if (a.single_word) t.cut_exact_ = false;
  return t;
}

}  // namespace kvgate::tokenizer
