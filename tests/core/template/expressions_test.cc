// Expressions, filters, tests and Python methods, with the outputs Python Jinja 3 (and
// transformers' tojson) gives.
#include <gtest/gtest.h>

#include "render_helper.h"

namespace kvgate::jinja {
namespace {

using testing::render;

TEST(TemplateValues, PythonStrAndRepr) {
  EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 0.1 + 0.2 }} {{ 1e-5 }}"),
            "None True 1.0 1e+20 0.30000000000000004 1e-05");
  EXPECT_EQ(
      render("{{ [1, 'a', none, true, 2.5] }} {{ {'a': [1], 'b': 'x'} }} {{ (1,) }} {{ () }}"),
      "[1, 'a', None, True, 2.5] {'a': [1], 'b': 'x'} (1,) ()");
  EXPECT_EQ(render("{{ [\"it's\", 'say \"x\"', 'a\\nb', '\\x01'] }}"),
            R"(["it's", 'say "x"', 'a\nb', '\x01'])");
  EXPECT_EQ(render("{{ True }}{{ False }}{{ None }}{{ 'a\\tb' }}{{ 'x' 'y' }}{{ 1_000 }}"),
            "TrueFalseNonea\tbxy1000");
  EXPECT_EQ(render("{{ '\\u00e9\\U0001F600' }}"), "é😀");
  EXPECT_EQ(render("{{ nothing }}|{{ nothing is defined }}|{{ nothing is undefined }}"),
            "|False|True");
}

TEST(TemplateValues, TruthinessAndBooleanOperators) {
  EXPECT_EQ(render("{{ [] or 'e' }}{{ 0 or 'z' }}{{ '' or 'y' }}{{ {} or 'd' }}{{ none or 'n' }}"
                   "{{ 1 and 2 }}{{ 0 and 2 }}{{ not [] }}{{ not 'a' }}"),
            "ezydn20TrueFalse");
  EXPECT_EQ(render("{{ 'y' if true else 'n' }}{{ 'y' if false }}|{{ 0.0 or 'f' }}"), "y|f");
}

TEST(TemplateValues, ComparisonsAndMembership) {
  EXPECT_EQ(render("{{ 1 == 1.0 }}{{ true == 1 }}{{ 'a' < 'b' }}{{ [1,2] < [1,3] }}"
                   "{{ (1,2) == [1,2] }}{{ 1 < 2 < 3 }}{{ 3 > 2 > 2 }}{{ 'é' > 'z' }}"),
            "TrueTrueTrueTrueFalseTrueFalseTrue");
  EXPECT_EQ(render("{{ {'a': 1, 'b': 2} == {'b': 2, 'a': 1} }}{{ none == none }}{{ 'a' != 'a' }}"),
            "TrueTrueFalse");
  EXPECT_EQ(render("{{ 'a' in 'cat' }}{{ 2 in [1,2] }}{{ 'k' in {'k': 1} }}{{ 3 not in [1] }}"
                   "{{ 'x' in nothing }}"),
            "TrueTrueTrueTrueFalse");
  EXPECT_EQ(render("{{ 1 in 'abc' }}"),
            "error: 1:4: 'in <string>' requires string as left operand, not int");
}

TEST(TemplateValues, Arithmetic) {
  EXPECT_EQ(
      render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} "
             "{{ 1 / 4 }} {{ 10 / 5 }} {{ 'ab' * 2 }} {{ [1] * 2 }} {{ 1 + 2.5 }} {{ true + 1 }}"),
      "3 -4 -2 2 1024 0.5 0.25 2.0 abab [1, 1] 3.5 2");
  EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ nothing }}|{{ [1] + [2] }}|{{ -(3) }}|{{ 5 - 7.5 }}"),
            "a1None|[1, 2]|-3|-2.5");
  EXPECT_EQ(render("{{ messages|length - 1 }}|{{ (messages|length - 1) - 1 }}",
                   R"({"messages": [1, 2, 3]})"),
            "2|1");
  EXPECT_EQ(render("{{ '%s and %s' % ('a', 1) }}|{{ '%d%%' % 50 }}|{{ '%(x)s' % {'x': 'y'} }}"),
            "a and 1|50%|y");
}

TEST(TemplateValues, SubscriptsSlicesAndAttributes) {
  EXPECT_EQ(render("{{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4][::2] }} {{ 'héllo'[1] }} "
                   "{{ 'héllo'[-1] }} {{ [1,2,3][-2:] }} [{{ 'abc'[5:] }}] {{ 'héllo'[1:3] }}"),
            "el olleh [1, 3] é o [2, 3] [] él");
  const char* ctx = R"({"d": {"a": 1, "items": "key"}, "xs": [7, 8]})";
  EXPECT_EQ(
      render("{{ d.a }}|{{ d['a'] }}|{{ d.missing }}|{{ d.get('a') }}|{{ d.get('z', 'dflt') }}"
             "|{{ d.get('z') }}|{{ xs.0 }}|{{ xs[5] }}|{{ none.x }}|{{ d['items'] }}",
             ctx),
      "1|1||1|dflt|None|7|||key");
  // `.items` finds the dict method first, as Python's getattr does.
  EXPECT_EQ(render("{{ d.items()|list }}", ctx), "[('a', 1), ('items', 'key')]");
  EXPECT_EQ(render("{{ d.keys()|list }}|{{ d.values()|list }}", ctx), "['a', 'items']|[1, 'key']");
}

TEST(TemplateFilters, Tojson) {
  EXPECT_EQ(render("{{ {'a': 1, 'b': [1.5, 'x', none, true], 'c': 'é\"\\n', 'd': 1.0}|tojson }}"),
            R"({"a": 1, "b": [1.5, "x", null, true], "c": "é\"\n", "d": 1.0})");
  EXPECT_EQ(render("{{ {'a': [1, 2], 'b': {}, 'c': []}|tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {},\n  \"c\": []\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true) }}"), R"({"a": 2, "b": 1})");
  EXPECT_EQ(render("{{ 'é😀'|tojson(ensure_ascii=true) }}"), R"("\u00e9\ud83d\ude00")");
  EXPECT_EQ(render("{{ [1, {'a': 2}]|tojson(separators=(',', ':')) }}"), R"([1,{"a":2}])");
  EXPECT_EQ(render("{{ x|tojson }}"),
            "error: 1:6: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(render("{{ t|tojson }}", R"({"t": {"k": [1e-7, 12345678901234567890]}})"),
            R"({"k": [1e-07, 1.2345678901234567e+19]})");
}

TEST(TemplateFilters, Strings) {
  EXPECT_EQ(render("{{ '  a  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 5|trim }}"), "a|a|5");
  EXPECT_EQ(render("{{ 'hello world'|upper }}|{{ 'HeLLo'|lower }}|{{ 'hello wORLD-foo(bar'|title }}"
                   "|{{ 'hELLO world'|capitalize }}|{{ 'ünï'|upper }}"),
            "HELLO WORLD|hello|Hello World-Foo(Bar|Hello world|ÜNÏ");
  EXPECT_EQ(render("{{ 'aaa'|replace('a', 'b') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ "
                   "'ab'|replace('', '-') }}"),
            "bbb|bba|-a-b-");
  EXPECT_EQ(render("{{ 12|string ~ 'x' }}|{{ '<b>'|safe }}|{{ '<a href=\"x\">&\\'</a>'|e }}"),
            "12x|<b>|&lt;a href=&#34;x&#34;&gt;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(render("{{ 'a\nb\n\nc'|indent(2) }}"), "a\n  b\n\n  c");
  EXPECT_EQ(render("{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ "
                   "'a\nb'|indent('> ') }}"),
            "  a\n  b|a\n  \n  b|a\n> b");
  EXPECT_EQ(render("{{ 'a b  c'|wordcount }}|{{ 'ab'|center(6) }}|{{ '%s-%d'|format('x', 3) }}"),
            "3|  ab  |x-3");
}

TEST(TemplateFilters, Sequences) {
  EXPECT_EQ(
      render("{{ [1,2]|length }}{{ 'héllo'|length }}{{ {'a': 1}|count }}{{ nothing|length }}"),
      "2510");
  EXPECT_EQ(render("{{ [1,2,3]|join(', ') }}|{{ [{'n':'a'},{'n':'b'}]|join('-', attribute='n') }}"
                   "|{{ ['a','b']|join }}"),
            "1, 2, 3|a-b|ab");
  EXPECT_EQ(
      render("{{ [{'n':'a'},{'n':'b'}]|map(attribute='n')|join }}|{{ ['a','b']|map('upper')|join }}"
             "|{{ [{'n':'a'},{}]|map(attribute='n', default='z')|join }}|{{ ['a b']|map('replace', "
             "' ', '_')|join }}"),
      "ab|AB|az|a_b");
  EXPECT_EQ(render("{{ [1,2,3,4]|select('odd')|list }}|{{ [1,2,3,4]|reject('odd')|list }}"
                   "|{{ [0,1,'',2]|select|list }}|{{ [1,2,3]|select('gt', 1)|list }}"),
            "[1, 3]|[2, 4]|[1, 2]|[2, 3]");
  const char* users = R"({"users": [{"n": "a", "active": true}, {"n": "b", "active": false}]})";
  EXPECT_EQ(render("{{ users|selectattr('active')|map(attribute='n')|join }}|"
                   "{{ users|rejectattr('active')|map(attribute='n')|join }}|"
                   "{{ users|selectattr('n', 'equalto', 'b')|map(attribute='n')|join }}",
                   users),
            "a|b|b");
  EXPECT_EQ(
      render("{% for k, v in {'a': 1}|items %}{{ k }}{{ v }}{% endfor %}{{ nothing|items|list }}"),
      "a1[]");
  EXPECT_EQ(render("{{ 'abc'|list }}|{{ [1,2,3]|first }}|{{ [1,2,3]|last }}|{{ []|first }}|{{ "
                   "'xyz'|last }}"),
            "['a', 'b', 'c']|1|3||z");
  EXPECT_EQ(
      render(
          "{{ ['a','A','b','a']|unique|list }}|{{ ['a','A']|unique(case_sensitive=true)|list }}"),
      "['a', 'b']|['a', 'A']");
  EXPECT_EQ(
      render("{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }}|{{ {'b': 1, 'a': 2}|dictsort(by='value') }}"
             "|{{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}"),
      "[('A', 2), ('b', 1), ('c', 0)]|[('b', 1), ('a', 2)]|[('b', 1), ('a', 2)]");
  EXPECT_EQ(render("{{ [3,1,2]|sort|list }}|{{ [1,2]|reverse|list }}|{{ 'abc'|reverse }}"
                   "|{{ [{'n': 2}, {'n': 1}]|sort(attribute='n')|map(attribute='n')|join }}"
                   "|{{ ['b', 'A', 'c']|sort(reverse=true)|join }}"),
            "[1, 2, 3]|[2, 1]|cba|12|cbA");
  EXPECT_EQ(
      render("{{ [1,2,3]|sum }}|{{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }}|{{ [3,1,2]|min }}"
             "|{{ ['b','A']|max }}|{{ []|max }}"),
      "6|3|1|b|");
}

TEST(TemplateFilters, NumbersAndDefaults) {
  EXPECT_EQ(render("{{ x|default('d') }}|{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ "
                   "none|d('n') }}"),
            "d||d|None");
  EXPECT_EQ(
      render(
          "{{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(7) }}|{{ '1A'|int(0, 16) }}"
          "|{{ 3.9|int }}|{{ ' 12 '|int }}"),
      "43|4|0|7|26|3|12");
  EXPECT_EQ(render("{{ '2.5'|float }}|{{ 'a'|float }}|{{ 3|float }}"), "2.5|0.0|3.0");
  EXPECT_EQ(render("{{ -3|abs }}|{{ 2.5|round }}|{{ 3.14159|round(2) }}|{{ 2.1|round(0, 'ceil') }}"
                   "|{{ 2.9|round(method='floor') }}"),
            "3|2.0|3.14|3.0|2.0");
  EXPECT_EQ(render("{{ d|attr('items') is callable }}|{{ d|attr('a') }}", R"({"d": {"a": 1}})"),
            "True|");
}

TEST(TemplateTests, AllTests) {
  EXPECT_EQ(
      render("{{ none is none }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}"
             "{{ true is integer }}{{ true is boolean }}{{ 'a' is string }}{{ {} is mapping }}"
             "{{ [] is iterable }}{{ 'a' is sequence }}{{ true is true }}{{ 1 is true }}"
             "{{ false is false }}{{ 2 is equalto 2 }}{{ 2 is eq(3) }}{{ 'a' is in 'abc' }}"),
      "TrueTrueTrueTrueFalseTrueTrueTrueTrueTrueTrueFalseTrueTrueFalseTrue");
  EXPECT_EQ(
      render("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ x is defined }}"
             "{{ x is undefined }}{{ 1 is not string }}{{ range is callable }}{{ 'AB' is upper }}"
             "{{ 'ab' is lower }}{{ none is sameas none }}{{ 5 is gt 3 }}{{ {} is sequence }}"
             "{{ 1 is iterable }}{{ 2 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is ge 2 }}{{ 1 is le 0 }}"),
      "TrueTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueFalseFalseTrueTrueFalse");
  EXPECT_EQ(render("{{ m.reasoning_content is defined and m.reasoning_content is not none }}",
                   R"({"m": {"reasoning_content": null}})"),
            "False");
}

TEST(TemplateMethods, StripSplitAndAffixes) {
  EXPECT_EQ(
      render(
          "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\n a\\n'.lstrip('\\n') }}"
          "|{{ 'a\\n\\n'.rstrip('\\n') }}|{{ 'ab'.lstrip('ba') }}|{{ '\\u3000a\\u0085'.strip() }}"),
      "a b|a| a\n|a||a");
  EXPECT_EQ(render("{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}"
                   "|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'a<t>b'.split('<t>')[-1] }}|{{ ' a b "
                   "'.split(none, 1) }}"
                   "|{{ ' a b c '.rsplit(none, 1) }}"),
            "['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|['a,b', 'c']|b|['a', 'b ']|[' a b', 'c']");
  EXPECT_EQ(render("{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}"
                   "{{ 'hello'.startswith('l', 2) }}{{ 'hello'.endswith('he', 0, 2) }}"),
            "TrueTrueTrueTrue");
  EXPECT_EQ(render("{{ 'a'.split('') }}"), "error: 1:7: empty separator");
}

TEST(TemplateMethods, CaseReplaceFormatAndOthers) {
  EXPECT_EQ(
      render(
          "{{ 'aB'.upper() }}|{{ 'aB'.lower() }}|{{ 'hello wORLD'.title() }}|"
          "{{ \"they're\".title() }}|{{ 'aXa'.replace('a', 'b') }}|{{ 'aXa'.replace('a', 'b', 1) }}"
          "|{{ 'hELLO'.capitalize() }}"),
      "AB|ab|Hello World|They'Re|bXb|bXa|Hello");
  EXPECT_EQ(
      render("{{ '{} is {}'.format('x', 1) }}|{{ '{0}{1}{0}'.format('a', 'b') }}"
             "|{{ '{name}!'.format(name='n') }}|{{ '{:>5}|{:.2f}|{:03d}|{:<3}|{:^5}'.format('a', "
             "3.14159, 7, 'b', 'c') }}"
             "|{{ '{{x}}'.format() }}|{{ '{!r}'.format('q') }}|{{ '{0[k]}'.format({'k': 'v'}) }}"),
      "x is 1|aba|n!|    a|3.14|007|b  |  c  |{x}|'q'|v");
  EXPECT_EQ(
      render(
          "{{ 'a-b'.find('-') }}|{{ 'abcabc'.count('b') }}|{{ ', '.join(['a', 'b']) }}"
          "|{{ '42'.isdigit() }}|{{ 'ab'.isalpha() }}|{{ ' '.isspace() }}"
          "|{{ 'prefix_x'.removeprefix('prefix_') }}|{{ 'a\\nb'.splitlines() }}|{{ 'x'.zfill(3) }}"
          "|{{ 'a=b'.partition('=') }}|{{ 'ab'.ljust(4, '.') }}|{{ 'Ab'.swapcase() }}"),
      "1|2|a, b|True|True|True|x|['a', 'b']|00x|('a', '=', 'b')|ab..|aB");
  EXPECT_EQ(render("{{ [1, 2, 1].count(1) }}|{{ [1, 2].index(2) }}"), "2|1");
  EXPECT_EQ(render("{{ 'ab'.index('z') }}"), "error: 1:8: substring not found");
}

}  // namespace
}  // namespace kvgate::jinja
