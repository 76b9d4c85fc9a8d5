// Test helper: compile and render a template against a JSON context; the result is the
// output, or "error: <message>" for a compile or render error.
#pragma once

#include <boost/json.hpp>
#include <string>
#include <string_view>

#include "core/template/json_value.h"
#include "core/template/template.h"

namespace kvgate::jinja::testing {

inline std::string render(std::string_view source, std::string_view context_json = "{}",
                          RenderOptions options = {}) {
  auto t = Template::compile(source);
  if (!t) return "error: " + t.error();
  const boost::json::value ctx = boost::json::parse(context_json);
  auto value = from_json(ctx);
  if (!value) return "error: " + value.error();
  auto out = t->render(*value, options);
  if (!out) return "error: " + out.error();
  return *out;
}

}  // namespace kvgate::jinja::testing
