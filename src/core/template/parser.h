// The Jinja parser: tokens -> Program, following Python Jinja's grammar and operator
// precedence (filters bind tighter than arithmetic, `not` looser than comparisons).
//
// Internal to the template engine (template.h is the public interface).
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "core/template/ast.h"
#include "core/template/lexer.h"

namespace kvgate::jinja {

// Throws SyntaxError. String literals view `pool` (or the source).
Program parse(const std::vector<Token>& tokens, std::deque<std::string>& pool);

}  // namespace kvgate::jinja
