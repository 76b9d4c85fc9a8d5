// Which templates get message content as a list of parts (vLLM's "openai" content format):
// vLLM's rule (content_format.h). Each expectation is what vLLM's _detect_content_format
// answers for the template, run on Python Jinja 3.1.6's syntax tree.
#include <gtest/gtest.h>

#include <string_view>

#include "core/template/template.h"

namespace kvgate::jinja {
// Named after the file: the tests compile in unity batches (docs/development.md).
namespace content_format_test {

bool parts(std::string_view source) {
  auto t = Template::compile(source);
  EXPECT_TRUE(t.ok()) << t.error();
  return t.ok() && t->iterates_content();
}

// A loop over `m.content` or `m['content']` (also through filters, tests, a slice), where
// `m` is a loop variable over messages or over a variable set from it; anywhere in the
// template (macros, call and filter blocks, block sets, for-else).
TEST(TemplateContentFormat, LoopsOverAMessagesContentArePartsAsVllmFindsThem) {
  EXPECT_TRUE(parts("{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% for p in m['content'] %}{% endfor %}"
            "{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% for p in m.content if p.type == 'text' %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}"
            "{% for p in m.content | selectattr('type', 'equalto', 'text') %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% for p in m['content'][1:] %}{% endfor %}"
            "{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% for p in (m.content is iterable) %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% macro f(m) %}{% for p in m.content %}{% endfor %}{% endmacro %}"
            "{% for m in messages %}{{ f(m) }}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% set ms = messages[1:] %}{% for m in ms %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% set a = messages|list %}{% set b = a %}{% for m in b %}"
            "{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% set x = messages %}{% set x = x[1:] %}{% for m in x %}"
            "{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages if m.role != 'system' %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages|reverse %}{% for p in m.content|list %}{% endfor %}"
            "{% endfor %}"));
  EXPECT_TRUE(
      parts("{% set x %}{% for m in messages %}{% for p in m.content %}{% endfor %}"
            "{% endfor %}{% endset %}"));
  EXPECT_TRUE(
      parts("{% if true %}{% elif false %}{% for m in messages %}"
            "{% for p in m.content %}{% endfor %}{% endfor %}{% endif %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% else %}{% endfor %}{% for p in m.content %}"
            "{% endfor %}"));
  EXPECT_TRUE(
      parts("{% filter upper %}{% for m in messages %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}{% endfilter %}"));
  EXPECT_TRUE(
      parts("{% generation %}{% for m in messages %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}{% endgeneration %}"));
  EXPECT_TRUE(
      parts("{% macro f() %}{% for m in messages %}{{ caller() }}{% endfor %}"
            "{% endmacro %}{% call f() %}{% for p in m.content %}{% endfor %}"
            "{% endcall %}"));
}

// A macro's parameter is not a loop variable over messages (unless named like one), nor is
// an item indexed out of messages, a `with` variable, or a variable holding content.
TEST(TemplateContentFormat, OtherLoopsOverAContentAreNot) {
  EXPECT_FALSE(
      parts("{% macro f(msg) %}{% for p in msg.content %}{% endfor %}{% endmacro %}"
            "{% for m in messages %}{{ f(m) }}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% set a = messages[0] %}{% for m in a %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% for i in range(messages|length) %}{% set m = messages[i] %}"
            "{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% for m in messages %}{% set c = m.content %}{% for p in c %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_FALSE(parts("{% for m in messages %}{% for p in content %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% with x = messages %}{% for m in x %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}{% endwith %}"));
  EXPECT_FALSE(
      parts("{% for m in messages %}{% if m.content is string %}{{ m.content }}"
            "{% endif %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% for m in messages %}{% for p in m.content() %}{% endfor %}"
            "{% endfor %}"));
  EXPECT_FALSE(parts("{% for m in messages %}{% for p in m.contents %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(parts("{% for p in messages[0].content %}{% endfor %}"));
}

// vLLM asserts single-name targets; a failed assertion makes its answer "string": a tuple
// or namespace attribute set from messages, a tuple loop over messages, or a tuple target
// on the first loop over a message's content.
TEST(TemplateContentFormat, WhereVllmsAnalysisFailsContentIsAString) {
  EXPECT_FALSE(
      parts("{% for m in messages %}{% for a, b in m.content %}{% endfor %}"
            "{% endfor %}"));
  EXPECT_TRUE(
      parts("{% for m in messages %}{% for p in m.content %}{% endfor %}"
            "{% for a, b in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% for m in messages %}{% for a, b in m.content %}{% endfor %}"
            "{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% set ns = namespace(x=1) %}{% set ns.x = messages %}"
            "{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% set a, b = messages %}{% for m in messages %}{% for p in m.content %}"
            "{% endfor %}{% endfor %}"));
  EXPECT_FALSE(
      parts("{% for i, m in messages %}{% for p in m.content %}{% endfor %}"
            "{% endfor %}"));
}

}  // namespace content_format_test
}  // namespace kvgate::jinja
