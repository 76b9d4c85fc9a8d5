// The tree-walking interpreter behind Template::render, and the compiled form it walks.
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <atomic>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/template/ast.h"
#include "core/template/template.h"

namespace kvgate::jinja {

struct Compiled {
  std::string source;            // normalized; token and literal views point here
  std::deque<std::string> pool;  // decoded literals
  Program program;
  std::unordered_map<std::string_view, int> symbol_ids;  // name -> symbol id
  size_t memory = 0;
  // The size of the last output rendered, to reserve the next one's buffer at once (a
  // hint only: any value gives the same output).
  mutable std::atomic<size_t> output_hint{0};
};

// Thrown by run(); offset is into the normalized source.
struct RenderFailure {
  uint32_t offset;
  std::string message;
};

// Renders into out. Throws RenderFailure.
void run(const Compiled& compiled, const Value& context, const RenderOptions& options,
         std::string& out);

}  // namespace kvgate::jinja
