// Statements and whitespace control, with the outputs Python Jinja 3 gives under
// transformers' settings (trim_blocks, lstrip_blocks, loopcontrols).
#include <gtest/gtest.h>

#include "render_helper.h"

namespace kvgate::jinja {
namespace {

using testing::render;

TEST(TemplateText, PrintsAndDropsOneTrailingNewline) {
  EXPECT_EQ(render("Hello {{ name }}!", R"({"name": "World"})"), "Hello World!");
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\n\n"), "a\n");
  EXPECT_EQ(render("a\r\nb"), "a\nb");  // newlines normalized
  EXPECT_EQ(render(""), "");
}

TEST(TemplateWhitespace, TrimBlocksAndLstripBlocks) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nafter"), "yes\nafter");
  EXPECT_EQ(render("  {% if true %}x{% endif %}"), "x");
  EXPECT_EQ(render("a\n    {% if true %}b\n    {% endif %}c"), "a\nb\nc");
  EXPECT_EQ(render("  {{ 1 }}"), "  1");                      // variables are not lstripped
  EXPECT_EQ(render("{{ 1 }}\nx"), "1\nx");                    // nor trimmed after
  EXPECT_EQ(render("x  {% if true %}y{% endif %}"), "x  y");  // not at a line start
  EXPECT_EQ(render("  {# c #}\nb"), "b");
  EXPECT_EQ(render("a{# c #}b"), "ab");
}

TEST(TemplateWhitespace, MinusAndPlusModifiers) {
  EXPECT_EQ(render("a   {%- if true -%}   b   {%- endif -%}   c"), "abc");
  EXPECT_EQ(render("a \n {{- 1 -}} \n b"), "a1b");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
  EXPECT_EQ(render("{% if true +%}\nx{% endif %}"), "\nx");
  EXPECT_EQ(render("a\u3000{{- 'b' }}"), "ab");  // Unicode whitespace, as Python's \s
}

TEST(TemplateRaw, KeepsTagsAsText) {
  EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
  EXPECT_EQ(render("{% raw -%}  a  {%- endraw %}"), "a");
}

TEST(TemplateFor, LoopVariables) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}"
                   "{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};"
                   "{% endfor %}"),
            "10TrueFalse332;21FalseFalse321;32FalseTrue310;");
  EXPECT_EQ(render("{% for x in 'abc' %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}"),
            "-b,a-c,b-,");
  EXPECT_EQ(render("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "abab");
  EXPECT_EQ(render("{% for a in [1] %}{% for b in [1] %}{{ loop.depth }}{% endfor %}"
                   "{{ loop.depth }}{% endfor %}"),
            "21");
}

TEST(TemplateFor, ElseFilterUnpackAndDicts) {
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in nothing %}a{% else %}none{% endfor %}"), "none");
  EXPECT_EQ(render("{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ loop.length }},{% endfor %}"),
            "04,34,64,94,");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
  EXPECT_EQ(render("{% for (k, v) in [[1, 2]] %}{{ k }}{{ v }}{% endfor %}"), "12");
  EXPECT_EQ(render("{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}"), "ab");
  EXPECT_EQ(render("{% for c in 'hé' %}[{{ c }}]{% endfor %}"), "[h][é]");
}

TEST(TemplateFor, BreakContinueAndScope) {
  EXPECT_EQ(render("{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}"
                   "{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "0134");
  EXPECT_EQ(render("{% for a in [1,2] %}{% set outer = loop %}{% for b in [1,2] %}"
                   "{{ outer.index }}{{ loop.index }} {% endfor %}{% endfor %}"),
            "11 12 21 22 ");
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
            "21");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");  // if has no scope
}

TEST(TemplateIf, ElifElse) {
  EXPECT_EQ(render("{% for x in [1,2,3] %}{% if x == 1 %}a{% elif x == 2 %}b{% else %}c"
                   "{% endif %}{% endfor %}"),
            "abc");
  EXPECT_EQ(render("{% if [] %}a{% elif none %}b{% endif %}"), "");
}

TEST(TemplateSet, BlockSetTuplesAndNamespaces) {
  EXPECT_EQ(render("{% set x %}Hello {{ 'W' }}{% endset %}[{{ x }}]"), "[Hello W]");
  EXPECT_EQ(render("{% set x | upper | replace('B', 'c') %}ab{% endset %}{{ x }}"), "Ac");
  EXPECT_EQ(render("{% set a, b = 1, 2 %}{{ a }}{{ b }}"), "12");
  EXPECT_EQ(render("{% set ns = namespace(items=[]) %}{% set ns.items = ns.items + [1] %}"
                   "{{ ns.items }}{{ ns.missing }}"),
            "[1]");
  EXPECT_EQ(render("{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}"), "12");
}

TEST(TemplateMacro, ArgumentsDefaultsVarargsKwargs) {
  EXPECT_EQ(render("{% macro greet(name, greeting='Hi') %}{{ greeting }} {{ name }}{% endmacro %}"
                   "{{ greet('A') }}|{{ greet('B', greeting='Yo') }}|{{ greet(name='C') }}"),
            "Hi A|Yo B|Hi C");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}"
                   "{{ m(1, 2, 3, x=4) }}"),
            "1(2, 3){'x': 4}");
  EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}"), "[]");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"),
            "error: 1:41: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(render("{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, b=2) }}"),
            "error: 1:41: macro 'm' takes no keyword argument 'b'");
  // A macro sees the template's top-level variables, not its caller's locals.
  EXPECT_EQ(render("{% set g = 'G' %}{% macro m() %}{{ g }}{{ l }}{% endmacro %}"
                   "{% for l in [1] %}{{ m() }}{% endfor %}"),
            "G");
}

// Python Jinja's scopes: a block set's and a filter block's body are their own (their
// `{% set %}`s end with them, a namespace's attributes do not), and a macro resolves free
// names where it was defined (a closure over a loop's or another macro's variables, as they
// are at the call), never in its caller's locals.
TEST(TemplateScope, BlocksAndMacroClosures) {
  EXPECT_EQ(render("{% filter trim %}{% set x = 1 %}{% endfilter %}[{{ x }}]"), "[]");
  EXPECT_EQ(render("{% set y = 'o' %}{% filter upper %}{% set y = 'a' %}{{ y }}{% endfilter %}"
                   "[{{ y }}]"),
            "A[o]");
  EXPECT_EQ(render("{% set x %}{% set y = 1 %}{% endset %}[{{ y }}]"), "[]");
  EXPECT_EQ(render("{% for m in ['a'] %}{% set x | upper %}{% set t = m %}{{ t }}{% endset %}"
                   "{{ x }}{{ t }}{% endfor %}"),
            "A");
  EXPECT_EQ(render("{% set ns = namespace(a=0) %}{% filter upper %}{% set ns.a = 'z' %}"
                   "{% endfilter %}[{{ ns.a }}]"),
            "[z]");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% macro m() %}{{ i }}{{ loop.index }}{% endmacro %}"
                   "{{ m() }}{% endfor %}"),
            "1122");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{% set i = 5 %}"
                   "{{ m() }}{% endfor %}"),
            "55");
  EXPECT_EQ(render("{% macro outer(a) %}{% macro inner() %}{{ a }}{{ b }}{% endmacro %}"
                   "{% set b = 2 %}{{ inner() }}{% endmacro %}{{ outer(1) }}"),
            "12");
  EXPECT_EQ(render("{% for i in [1, 2] %}{% set x %}{% macro m() %}{{ i }}{% endmacro %}"
                   "{{ m() }}{% endset %}{{ x }}{% endfor %}"),
            "12");
  EXPECT_EQ(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% for i in [1] %}"
                   "{% macro m() %}{% call wrap() %}{{ i }}{% endcall %}{% endmacro %}{{ m() }}"
                   "{% endfor %}"),
            "[1]");
  EXPECT_EQ(render("{% macro m() %}{{ b }}{% endmacro %}{% for b in [1] %}{{ m() }}{% endfor %}"),
            "");
}

TEST(TemplateMacro, CallBlocks) {
  EXPECT_EQ(render("{% macro wrap() %}[{{ caller() }}]{% endmacro %}"
                   "{% call wrap() %}inner{% endcall %}"),
            "[inner]");
  EXPECT_EQ(render("{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}"
                   "{% set p = '>' %}{% call(item) each([1, 2]) %}<{{ item }}{{ p }}{% endcall %}"),
            "<1><2>");
}

TEST(TemplateBlocks, FilterWithAndGeneration) {
  EXPECT_EQ(render("{% filter upper %}abc{{ 'd' }}{% endfilter %}"), "ABCD");
  EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }}"), "3");
  EXPECT_EQ(render("{% generation %}x{% endgeneration %}"), "x");
}

TEST(TemplateGlobals, RaiseExceptionAndStrftimeNow) {
  EXPECT_EQ(render("\n{{ raise_exception('Roles must alternate') }}"),
            "error: 2:4: Roles must alternate");
  RenderOptions opt;
  opt.now_unix_seconds = 1700000000;  // 2023-11-14 22:13:20 UTC, a Tuesday
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %a %B %b %-d %j %I%p %y') }}", "{}", opt),
            "2023-11-14 22:13:20 Tuesday Tue November Nov 14 318 10PM 23");
  opt.now_unix_seconds = 0;
  EXPECT_EQ(render("{{ strftime_now('%d %B %Y') }}", "{}", opt), "01 January 1970");
  EXPECT_EQ(render("{{ range(3)|list }}|{{ range(1, 7, 2)|list }}|{{ range(3, 0, -1)|list }}"),
            "[0, 1, 2]|[1, 3, 5]|[3, 2, 1]");
  EXPECT_EQ(render("{{ dict(a=1) }}"), "{'a': 1}");
}

TEST(TemplateErrors, SyntaxErrorsHaveLineAndColumn) {
  EXPECT_EQ(render("{% if %}"), "error: 1:7: expected an expression, got end of statement block");
  EXPECT_EQ(render("ok\n  {% foo %}"), "error: 2:3: encountered unknown tag 'foo'");
  EXPECT_EQ(render("{% if true %}x"), "error: 1:15: unexpected end of template, expected 'endif'");
  EXPECT_EQ(render("{% for x in y %}"),
            "error: 1:17: unexpected end of template, expected 'endfor'");
  EXPECT_EQ(render("{{ x|nope }}"), "error: 1:6: no filter named 'nope'");
  EXPECT_EQ(render("{{ x is nope }}"), "error: 1:6: no test named 'nope'");
  EXPECT_EQ(render("{{ 'abc }}"), "error: 1:4: unexpected end of string");
  EXPECT_EQ(render("{% raw %}x"), "error: 1:1: missing end of raw directive");
  EXPECT_EQ(render("{# x"), "error: 1:1: missing end of comment tag");
  EXPECT_EQ(render("{% break %}"), "error: 1:1: 'break' outside of a for loop");
  EXPECT_EQ(render("{% endif %}"), "error: 1:1: unexpected 'endif'");
  EXPECT_EQ(render("{{ 1 }"), "error: 1:6: unexpected '}'");
  EXPECT_EQ(render("{% include 'x' %}"),
            "error: 1:1: 'include' needs a template loader, which chat templates do not have");
  EXPECT_EQ(render("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}"),
            "error: 1:103: template nesting is too deep");
}

TEST(TemplateErrors, RenderErrorsHaveLineAndColumn) {
  EXPECT_EQ(render("{{ x.y }}"), "error: 1:5: 'x' is undefined");
  EXPECT_EQ(render("{{ d.y.z }}", R"({"d": {}})"), "error: 1:7: 'y' is undefined");
  EXPECT_EQ(render("line1\n{{ 1 + 'a' }}"),
            "error: 2:6: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(render("{{ 'a' + 1 }}"), "error: 1:8: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render("{{ 'a' < 1 }}"),
            "error: 1:4: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(render("{{ foo() }}"), "error: 1:4: 'foo' is undefined");
  EXPECT_EQ(render("{{ (1)() }}"), "error: 1:7: 'int' object is not callable");
  EXPECT_EQ(render("{{ 1 // 0 }}"), "error: 1:6: integer division or modulo by zero");
  EXPECT_EQ(render("{{ 9223372036854775807 + 1 }}"),
            "error: 1:24: integer overflow (kvgate ints are 64-bit)");
  EXPECT_EQ(render("{% set a, b = [1] %}"),
            "error: 1:1: not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(render("{% set x = 1 %}{% set x.y = 2 %}"),
            "error: 1:16: cannot assign attribute on non-namespace object");
  EXPECT_EQ(render("{{ [1].append(2) }}"),
            "error: 1:7: access to attribute 'append' of 'list' object is unsafe");
  EXPECT_EQ(render("{{ {}.update({}) }}"),
            "error: 1:6: access to attribute 'update' of 'dict' object is unsafe");
  EXPECT_EQ(render("{% for x in none %}{% endfor %}"),
            "error: 1:1: 'NoneType' object is not iterable");
  EXPECT_EQ(render("{{ 'a'.nope() }}"), "error: 1:7: 'str object' has no attribute 'nope'");
}

TEST(TemplateErrors, BudgetsStopRunawayTemplates) {
  EXPECT_EQ(render("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}"),
            "error: 1:20: macro calls nested deeper than 100 (an endless recursion?)");
  RenderOptions opt;
  opt.max_steps = 100000;
  EXPECT_EQ(render("{% for i in 'x' * 400 %}\n{% for j in 'x' * 400 %}{% endfor %}{% endfor %}",
                   "{}", opt),
            "error: 2:1: render exceeded its step budget of 100000 (an endless recursion?)");
  EXPECT_EQ(render("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}",
                   "{}", opt),
            "error: 1:39: range() larger than the render's step budget");
  EXPECT_EQ(render("{{ range(10 ** 12)|length }}", "{}", opt),
            "error: 1:4: range() larger than the render's step budget");
  opt.max_output_bytes = 1000;
  EXPECT_EQ(render("{{ 'x' * 1001 }}", "{}", opt), "error: 1:8: render output exceeds 1000 bytes");
  EXPECT_EQ(render("{% for i in range(200) %}xxxxxxx{% endfor %}", "{}", opt),
            "error: 1:26: render output exceeds 1000 bytes");
}

TEST(TemplateCompile, ReportsContentIterationAndMemory) {
  auto a = Template::compile(
      "{% for m in messages %}{% for p in m['content'] %}{% endfor %}{% endfor %}");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->iterates_content());
  auto b = Template::compile("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->iterates_content());
  EXPECT_GT(b->memory_bytes(), 100u);
  EXPECT_LT(b->memory_bytes(), 20000u);
}

}  // namespace
}  // namespace kvgate::jinja
