#include "core/tokenizer/post_processor.h"

namespace kvgate::tokenizer {

void PostProcessor::apply(std::span<const uint32_t> a, const std::span<const uint32_t>* b,
                          std::vector<uint32_t>& out) const {
  const std::vector<Item>& tpl = b ? pair_ : single_;
  if (tpl.empty()) {
    out.insert(out.end(), a.begin(), a.end());
    if (b) out.insert(out.end(), b->begin(), b->end());
    return;
  }
  for (const Item& it : tpl) {
    if (it.sequence == 0) {
      out.insert(out.end(), a.begin(), a.end());
    } else if (it.sequence == 1) {
      if (b) out.insert(out.end(), b->begin(), b->end());
    } else {
      out.insert(out.end(), it.ids.begin(), it.ids.end());
    }
  }
}

std::vector<uint32_t> PostProcessor::single_prefix() const {
  std::vector<uint32_t> out;
  for (const Item& it : single_) {
    if (it.sequence >= 0) break;
    out.insert(out.end(), it.ids.begin(), it.ids.end());
  }
  return out;
}

std::vector<uint32_t> PostProcessor::single_suffix() const {
  std::vector<uint32_t> out;
  bool seen = false;
  for (const Item& it : single_) {
    if (it.sequence >= 0) {
      seen = true;
      continue;
    }
    if (seen) out.insert(out.end(), it.ids.begin(), it.ids.end());
  }
  return out;
}

}  // namespace kvgate::tokenizer
