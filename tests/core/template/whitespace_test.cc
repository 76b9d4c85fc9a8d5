// Whitespace of every kind Python calls whitespace (str.isspace: what `\s` and str.strip()
// mean to Python Jinja) around `trim`, `{%-`/`-%}`, trim_blocks, lstrip_blocks and inside
// tags (issue #38). Every expected output below is Python Jinja 3.1.6's, rendered with
// trim_blocks=True and lstrip_blocks=True as transformers sets them.
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "render_helper.h"

namespace kvgate::jinja {
// Named after the file: the tests compile in unity batches (docs/development.md).
namespace whitespace_test {

using testing::render;

// Each character of str.isspace(), as template text (U+0085, a control character, spelled as
// its UTF-8 bytes) and as a JSON string escape.
struct Space {
  const char* text;
  const char* json;
};
constexpr Space kSpaces[] = {
    {"\t", "\\t"},         {"\n", "\\n"},           {"\v", "\\u000b"},
    {"\f", "\\f"},         {"\r", "\\r"},           {" ", " "},
    {"\034", "\\u001c"},   {"\035", "\\u001d"},     {"\036", "\\u001e"},
    {"\037", "\\u001f"},   {"\302\205", "\\u0085"}, {"\u00a0", "\\u00a0"},
    {"\u1680", "\\u1680"}, {"\u2000", "\\u2000"},   {"\u2001", "\\u2001"},
    {"\u2002", "\\u2002"}, {"\u2003", "\\u2003"},   {"\u2004", "\\u2004"},
    {"\u2005", "\\u2005"}, {"\u2006", "\\u2006"},   {"\u2007", "\\u2007"},
    {"\u2008", "\\u2008"}, {"\u2009", "\\u2009"},   {"\u200a", "\\u200a"},
    {"\u2028", "\\u2028"}, {"\u2029", "\\u2029"},   {"\u202f", "\\u202f"},
    {"\u205f", "\\u205f"}, {"\u3000", "\\u3000"},
};

// {"s": "<json>"}
std::string with_s(std::string_view json) { return R"({"s": ")" + std::string(json) + "\"}"; }

bool is_line_break(const Space& w) {
  return std::string_view(w.text) == "\n" || std::string_view(w.text) == "\r";
}

TEST(TemplateWhitespaceKinds, TrimStripsEveryPythonWhitespace) {
  for (const Space& w : kSpaces) {
    SCOPED_TRACE(w.json);
    EXPECT_EQ(render("[{{ s|trim }}]", with_s(std::string(w.json) + w.json + "a b" + w.json)),
              "[a b]");
  }
  EXPECT_EQ(render("[{{ s|trim }}]", with_s(R"(\n\n\na\tb\n\n\n)")), "[a\tb]");
  EXPECT_EQ(render("[{{ s|trim }}]", with_s(R"(\r\na\r\n)")), "[a]");
  EXPECT_EQ(render("[{{ s|trim }}]", with_s(R"( \t\r\n\u000b\f\u0085\u00a0\u3000)")), "[]");
  // Not whitespace to Python: zero width space, the BOM, the Mongolian vowel separator.
  EXPECT_EQ(render("[{{ s|trim }}]", with_s(R"(\u200ba\ufeff\u180e)")), "[\u200ba\ufeff\u180e]");
}

// Issue #38's template: string content trimmed, then `{%-` on the next line. The minus
// strips the template's text before the tag, never what was printed: a string's trailing
// tab goes because of `trim`; a part's text, printed untrimmed, keeps it.
TEST(TemplateWhitespaceKinds, Issue38TrimThenMinusOnTheNextLine) {
  const char* tpl =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n"
      "{% if m.content is string %}{{ m.content | trim }}"
      "{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}\n"
      "{%- if loop.last %} [latest]{% endif %}<|im_end|>\n"
      "{% endfor %}";
  EXPECT_EQ(render(tpl, R"({"messages": [{"role": "user", "content": "a tab\t"},
                                         {"role": "assistant", "content": " \u3000b\n\n"}]})"),
            "<|im_start|>user\na tab<|im_end|>\n<|im_start|>assistant\nb [latest]<|im_end|>\n");
  EXPECT_EQ(render(tpl, R"({"messages": [
      {"role": "user", "content": [{"type": "text", "text": "a tab\t"}]},
      {"role": "assistant", "content": [{"type": "text", "text": " \u3000b\n\n"}]}]})"),
            "<|im_start|>user\na tab\t<|im_end|>\n<|im_start|>assistant\n \u3000b\n\n "
            "[latest]<|im_end|>\n");
  EXPECT_EQ(render("{% if true %}{{ s|trim }}{% else %}{% endif %}\n"
                   "{%- if true %} [latest]{% endif %}<|im_end|>",
                   with_s(R"(a tab\t)")),
            "a tab [latest]<|im_end|>");
  EXPECT_EQ(render("<|im_start|>user\n  {% if true %}{{ s|trim }}{% endif %}\n"
                   "  {%- if true %} [latest]{% endif %}<|im_end|>\n",
                   with_s(R"(\u3000a\u00a0\t)")),
            "<|im_start|>user\na [latest]<|im_end|>");
}

// The brief's other suspects for #38, each after an if/else, elif, endif, a print, a macro,
// a block set or a filter block and then `{%-`/`-%}`/lstrip_blocks on the next line: the
// minus strips template text only, and `trim` (in any branch, on any value) strips every
// kind. Python Jinja and @huggingface/jinja agree on each.
TEST(TemplateWhitespaceKinds, TrimInBranchesThenMinusOnTheNextLine) {
  const std::string s = with_s(R"(\u3000a tab\t\u00a0\n)");
  const std::string printed = "\u3000a tab\t\u00a0\n";
  EXPECT_EQ(render("{{ s }}\n{%- if true %} [l]{% endif %}|", s), printed + " [l]|");
  EXPECT_EQ(render("{% if false %}{% elif true %}{{ s | trim }}{% endif %}\n"
                   "{%- if true %} [l]{% endif %}|",
                   s),
            "a tab [l]|");
  EXPECT_EQ(render("{% if false %}x{% else %}{{ s | trim }}{% endif %}\n"
                   "  {%- if true %} [l]{% endif %}|",
                   s),
            "a tab [l]|");
  EXPECT_EQ(render("{% macro m() %}{{ s }}{% endmacro %}{{ m() | trim }}\n"
                   "{%- if true %} [l]{% endif %}|",
                   s),
            "a tab [l]|");
  EXPECT_EQ(render("{% macro m() %}{{ s }}{% endmacro %}{{ m() }}\n"
                   "{%- if true %} [l]{% endif %}|",
                   s),
            printed + " [l]|");
  EXPECT_EQ(render("{% set x %}{{ s }}{% endset %}{{ x | trim }}\n{{- '|' }}", s), "a tab|");
  EXPECT_EQ(render("{% filter trim %}{{ s }}\n{% endfilter %}\n{%- if true %} [l]{% endif %}|", s),
            "a tab [l]|");
  EXPECT_EQ(render("{% for c in [s] %}{{ c | trim -}}\n\t{% endfor %}|", s), "a tab|");
  EXPECT_EQ(render("{% if true -%}\n\t{{ s | trim }}\t\n{%- endif %}|", s), "a tab|");
  EXPECT_EQ(render("  {% if true %}\n{{ s | trim }}\n  {% endif %}\n|", s), "a tab\n|");
}

TEST(TemplateWhitespaceKinds, MinusStripsEveryWhitespaceOfTheTemplateText) {
  for (const Space& w : kSpaces) {
    SCOPED_TRACE(w.json);
    const std::string s = w.text;
    EXPECT_EQ(render("a" + s + s + "{%- if true -%}" + s + "b" + s + "{{- 'c' -}}" + s + "d" + s +
                     "{#- c -#}" + s + "e" + s + "{%- endif -%}" + s + s + "f"),
              "abcdef");
    // What a tag printed is not template text: the minus leaves it whole.
    EXPECT_EQ(render("{{ s }}{%- if true -%}" + s + "|{%- endif %}",
                     with_s(std::string(w.json) + "x" + w.json)),
              s + "x" + s + "|");
  }
}

TEST(TemplateWhitespaceKinds, TrimBlocksRemovesOneNewlineAfterABlockOrComment) {
  EXPECT_EQ(render("{% if true %}\nx{% endif %}"), "x");
  EXPECT_EQ(render("{% if true %}\n\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("{% if true %}\r\nx{% endif %}"), "x");  // the source's \r\n is \n
  EXPECT_EQ(render("{% if true %} \nx{% endif %}"), " \nx");
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
  EXPECT_EQ(render("{# c #}\nb"), "b");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("{% if true -%}\n\n \u3000x{% endif %}"), "x");
  EXPECT_EQ(render("a\r\n  {% if true %}\r\nb\r\n  {% endif %}\r\nc"), "a\nb\nc");
  EXPECT_EQ(render("a\n\n\n"), "a\n\n");  // one trailing newline dropped
  for (const Space& w : kSpaces) {
    if (is_line_break(w)) continue;
    SCOPED_TRACE(w.json);
    const std::string s = w.text;
    EXPECT_EQ(render("{% if true %}" + s + "\nb{% endif %}"), s + "\nb");  // only a newline
    EXPECT_EQ(render("{% if true %}" + s + "b{% endif %}"), s + "b");
  }
}

TEST(TemplateWhitespaceKinds, LstripBlocksStripsEveryWhitespaceFromALineStart) {
  for (const Space& w : kSpaces) {
    if (is_line_break(w)) continue;
    SCOPED_TRACE(w.json);
    const std::string s = w.text;
    EXPECT_EQ(render("a\n" + s + s + "{% if true %}b{% endif %}"), "a\nb");
    EXPECT_EQ(render(s + "{% if true %}b{% endif %}"), "b");  // the template's first line
    EXPECT_EQ(render("a\n" + s + "{# c #}b"), "a\nb");
    EXPECT_EQ(render("a\n" + s + "{{ 'b' }}"), "a\n" + s + "b");  // not before a variable
    EXPECT_EQ(render("a\n" + s + "{%+ if true %}b{% endif %}"), "a\n" + s + "b");
    EXPECT_EQ(render("a" + s + "{% if true %}b{% endif %}"), "a" + s + "b");  // mid-line
  }
}

TEST(TemplateWhitespaceKinds, AnyWhitespaceSeparatesATagsTokens) {
  for (const Space& w : kSpaces) {
    if (is_line_break(w)) continue;
    SCOPED_TRACE(w.json);
    const std::string s = w.text;
    EXPECT_EQ(render("{{" + s + "x" + s + "}}", R"({"x": 1})"), "1");
    EXPECT_EQ(render("{%" + s + "if" + s + "x" + s + "-%}" + s + "y{% endif %}", R"({"x": true})"),
              "y");
  }
  EXPECT_EQ(render("{{ x\u00a0-}} \u3000z", R"({"x": 1})"), "1z");
}

}  // namespace whitespace_test
}  // namespace kvgate::jinja
