#include "openai/usage.h"

#include "openai/json_dom.h"
#include "openai/json_fast.h"

namespace kvgate::openai {

Usage parse_usage(std::string_view json_text) {
  Usage u;
  if (fast::parse_usage(json_text, u)) return u;
  return dom::parse_usage(json_text);
}

}  // namespace kvgate::openai
