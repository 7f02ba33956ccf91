// Jinja interpreter unit tests: expected strings derived by hand from jinja2 / Python semantics.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_lexer.h"
#include "tokenizer/jinja_parser.h"
#include "tokenizer/jinja_value.h"

namespace tessera {
namespace {

using nlohmann::ordered_json;

std::string R(const std::string& tpl, const ordered_json& ctx = ordered_json::object()) { return render_jinja(tpl, ctx); }

std::string error_of(const std::string& tpl, const ordered_json& ctx = ordered_json::object()) {
    try {
        R(tpl, ctx);
    } catch (const Error& e) {
        return e.what();
    }
    return "<no error>";
}

TEST(JinjaText, PlainTextAndExpressions) {
    EXPECT_EQ(R("hello"), "hello");
    EXPECT_EQ(R("{{ 1 + 2 * 3 }}"), "7");
    EXPECT_EQ(R("{{ (1 + 2) * 3 }}"), "9");
    EXPECT_EQ(R("{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }}"), "3 -4 2 3.5 256");
    EXPECT_EQ(R("{{ 'a' ~ 1 ~ none }}"), "a1None");
    EXPECT_EQ(R("{{ x }}", {{"x", "val"}}), "val");
    EXPECT_EQ(R("[{{ missing }}]"), "[]");
}

TEST(JinjaText, PythonPrinting) {
    EXPECT_EQ(R("{{ true }} {{ none }} {{ 1.0 }} {{ 1e16 }} {{ 0.0001 }} {{ 0.00001 }}"), "True None 1.0 1e+16 0.0001 1e-05");
    EXPECT_EQ(R("{{ [1, 'a', none, {'k': 2.5}] }}"), "[1, 'a', None, {'k': 2.5}]");
    EXPECT_EQ(R("{{ (1,) }} {{ \"it's\" }} {{ [\"it's\"] }}"), "(1,) it's [\"it's\"]");
}

TEST(JinjaText, WhitespaceControlMatchesTransformersSettings) {
    // trim_blocks eats the newline after a block tag; lstrip_blocks eats indentation before it.
    EXPECT_EQ(R("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
    EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif %}"), "ab");
    EXPECT_EQ(R("x {{- ' y ' -}} z"), "x y z");
    EXPECT_EQ(R("{{ 'v' }}\nw"), "v\nw");              // no trim after a variable tag
    EXPECT_EQ(R("a\n  {%+ if true %}b{% endif %}"), "a\n  b");  // + keeps the indentation
    EXPECT_EQ(R("a\n{# note #}\nb"), "a\nb");
    EXPECT_EQ(R("end\n"), "end");                      // one trailing newline dropped
    EXPECT_EQ(R("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(JinjaStatements, ForLoopVariablesAndElse) {
    EXPECT_EQ(R("{% for x in 'ab' %}{{ loop.index }}{{ x }}{{ loop.last }}{% endfor %}"), "1aFalse2bTrue");
    EXPECT_EQ(R("{% for x in [] %}x{% else %}none{% endfor %}"), "none");
    EXPECT_EQ(R("{% for x in [1,2,3,4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}"), "2/2 4/2 ");
    EXPECT_EQ(R("{% for x in range(6) %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
              "023");
    EXPECT_EQ(R("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}{{ v }}{% endfor %}"), "b1a2");
    EXPECT_EQ(R("{% for x in [1,2,3] %}{{ loop.previtem }}{{ loop.nextitem }},{% endfor %}"), "2,13,2,");
}

TEST(JinjaStatements, LoopScopeAndNamespace) {
    // A set inside a loop body does not leak out, and each iteration starts from the outer value.
    EXPECT_EQ(R("{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 5 %}{% endfor %}{{ x }}"), "111");
    EXPECT_EQ(R("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
    EXPECT_EQ(R("{% if true %}{% set y = 2 %}{% endif %}{{ y }}"), "2");
}

TEST(JinjaStatements, MacrosCallAndFilterBlocks) {
    EXPECT_EQ(R("{% macro m(a, b='x') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, 'y') }}{{ m(b='z', a=3) }}"), "1x2y3z");
    EXPECT_EQ(R("{% macro w() %}<{{ caller() }}>{% endmacro %}{% call w() %}in{% endcall %}"), "<in>");
    EXPECT_EQ(R("{% filter upper %}abc{% endfilter %}"), "ABC");
    EXPECT_EQ(R("{% set b %}x{{ 1 }}{% endset %}{{ b }}{{ b }}"), "x1x1");
}

TEST(JinjaExpressions, SubscriptsSlicesAndMethods) {
    ordered_json ctx = {{"m", {{"role", "user"}, {"content", "Hello World"}}}};
    EXPECT_EQ(R("{{ m.role }} {{ m['content'][::-1] }} {{ m.content[-5:] }} {{ m.content[0] }}", ctx), "user dlroW olleH World H");
    EXPECT_EQ(R("{{ m.content.split(' ')[1] }} {{ m.content.startswith('Hell') }} {{ m.content.lower() }}", ctx),
              "World True hello world");
    EXPECT_EQ(R("{{ '<think>a</think>b'.split('</think>')[-1] }}|{{ '\\n x \\n'.strip() }}|{{ 'xxa'.lstrip('x') }}"), "b|x|a");
    EXPECT_EQ(R("{{ m.get('role') }} {{ m.get('nope', 'd') }} {{ m.keys() | list }}", ctx), "user d ['role', 'content']");
    EXPECT_EQ(R("{{ 'a' if false else 'b' }}{{ 'c' if true }}[{{ 'd' if false }}]"), "bc[]");
    EXPECT_EQ(R("{{ 1 in [1, 2] }} {{ 'x' not in 'abc' }} {{ 'k' in {'k': 1} }}"), "True True True");
}

TEST(JinjaExpressions, UnicodeIsCodePointBased) {
    EXPECT_EQ(R("{{ 'héllo'|length }} {{ 'héllo'[1] }} {{ '日本語'[::-1] }} {{ 'ÉTÉ'|lower }}"), "5 é 語本日 été");
}

TEST(JinjaFilters, CommonFilters) {
    EXPECT_EQ(R("{{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}"), "x|AB|Hello World|Hello");
    EXPECT_EQ(R("{{ [3,1,2]|sort|join(',') }} {{ [1,2,2]|unique|list }} {{ [1,2]|reverse|list }} {{ [1,2]|first }}{{ [1,2]|last }}"),
              "1,2,3 [1, 2] [2, 1] 12");
    EXPECT_EQ(R("{{ none|default('d') }}{{ u|default('d') }}{{ ''|default('d', true) }}"), "Nonedd");
    EXPECT_EQ(R("{{ [{'a': 1}, {'a': 2}]|map(attribute='a')|list }} {{ [1,2,3]|select('odd')|list }} {{ [1,2,3]|reject('odd')|list }}"),
              "[1, 2] [1, 3] [2]");
    EXPECT_EQ(R("{{ 2.5|round }} {{ 3.14159|round(2) }} {{ '7'|int + 1 }} {{ 'x'|int }} {{ -3|abs }}"), "2.0 3.14 8 0 3");
    EXPECT_EQ(R("{{ 'a\\nb'|indent(2) }}|{{ {'b': 1, 'a': 2}|dictsort }}"), "a\n  b|[('a', 2), ('b', 1)]");
}

TEST(JinjaFilters, TojsonIsPythonJsonDumps) {
    ordered_json ctx = ordered_json::parse(R"({"t": {"name": "f", "d": "é \"q\" <&>", "n": [1, 2.0, null, true], "e": {}}})");
    EXPECT_EQ(R("{{ t|tojson }}", ctx), R"({"name": "f", "d": "é \"q\" <&>", "n": [1, 2.0, null, true], "e": {}})");
    EXPECT_EQ(R("{{ t.n|tojson(indent=2) }}", ctx), "[\n  1,\n  2.0,\n  null,\n  true\n]");
    EXPECT_EQ(R("{{ 'é'|tojson(ensure_ascii=true) }}"), "\"\\u00e9\"");
    EXPECT_EQ(R("{{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}"), "{\"a\":2,\"b\":1}");
}

TEST(JinjaTests, IsTests) {
    EXPECT_EQ(R("{{ u is defined }}{{ u is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is number }}{{ {} is mapping }}"),
              "FalseTrueTrueTrueTrueTrue");
    EXPECT_EQ(R("{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ false is false }}{{ 0 is false }}{{ 1 is not none }}"),
              "TrueTrueTrueTrueFalseTrue");
}

TEST(JinjaErrors, SyntaxErrorsCarryLineAndColumn) {
    EXPECT_NE(error_of("ok\n{{ 1 + }}").find("chat template: line 2 col"), std::string::npos);
    EXPECT_NE(error_of("{% if x %}never closed").find("chat template: line 1"), std::string::npos);
    EXPECT_NE(error_of("{% for x in y %}{% endif %}").find("chat template:"), std::string::npos);
    EXPECT_NE(error_of("{{ 'unterminated }}").find("unterminated string"), std::string::npos);
    EXPECT_NE(error_of("{% include 'x' %}").find("not supported"), std::string::npos);
}

TEST(JinjaErrors, RuntimeErrorsLikeJinja2) {
    EXPECT_NE(error_of("{{ raise_exception('Roles must alternate') }}").find("Roles must alternate"), std::string::npos);
    EXPECT_NE(error_of("{{ u.attr }}").find("'u' is undefined"), std::string::npos);
    EXPECT_NE(error_of("{{ 1 + 'a' }}").find("unsupported operand"), std::string::npos);
    EXPECT_NE(error_of("{% set l = [] %}{{ l.append(1) }}").find("unsafe"), std::string::npos);
    EXPECT_NE(error_of("{{ u|tojson }}").find("not JSON serializable"), std::string::npos);
}

TEST(JinjaErrors, RunawayTemplatesAreStopped) {
    EXPECT_NE(error_of("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}").find("nested deeper"), std::string::npos);
    EXPECT_NE(error_of("{{ range(1000000)|length }}").find("range too big"), std::string::npos);
    EXPECT_NE(error_of("{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}").find("limit"),
              std::string::npos);
    EXPECT_NE(error_of("{{ " + std::string(3000, '(') + "1" + std::string(3000, ')') + " }}").find("nested too deeply"),
              std::string::npos);
}

// Found by fuzz_chat_template: a value of the wrong kind where a filter wants a number, or a width
// past the output limit, is the template's error — it had crashed (std::bad_variant_access) or
// allocated without bound.
TEST(JinjaErrors, ArgumentsOfTheWrongKindAreErrors) {
    EXPECT_NE(error_of("{{ 'a\nb'|indent(w) }}").find("'w' is undefined"), std::string::npos);
    EXPECT_NE(error_of("{{ 'a'|indent(2.5) }}").find("expected an integer, got float"), std::string::npos);
    EXPECT_NE(error_of("{{ 'a'|indent([]) }}").find("expected an integer, got list"), std::string::npos);
    EXPECT_NE(error_of("{{ 'a\nb'|indent(1000000000000) }}").find("limit"), std::string::npos);
    EXPECT_NE(error_of("{{ ('x\n' * 1000000)|indent(100) }}").find("limit"), std::string::npos);
    EXPECT_EQ(R("{{ 'a\nb'|indent(2) }}|{{ 'a\nb'|indent('> ', true) }}"), "a\n  b|> a\n> b");
}

TEST(JinjaValue, FloatReprMatchesPython) {
    EXPECT_EQ(jinja::float_repr(0.1), "0.1");
    EXPECT_EQ(jinja::float_repr(1e22), "1e+22");
    EXPECT_EQ(jinja::float_repr(123456789012345678.0), "1.2345678901234568e+17");
    EXPECT_EQ(jinja::float_repr(1.5e-7), "1.5e-07");
    EXPECT_EQ(jinja::float_repr(-2.0), "-2.0");
    EXPECT_EQ(jinja::float_repr(1e15), "1000000000000000.0");
}

TEST(ChatTemplate, RenderChatAppliesTransformersPreprocessing) {
    ChatTemplateSource src;
    src.template_text =
        "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m.keys()|list }}{% endfor %}"
        "{% if add_generation_prompt %}>{% endif %}{{ enable_thinking }}";
    src.bos_token = "<s>";
    src.special_tokens = {{"bos_token", "<s>"}};
    ordered_json msgs = ordered_json::parse(
        R"([{"role": "assistant", "content": "a", "tool_calls": null, "reasoning_content": "r"}])");
    // None-valued keys are dropped; reasoning is aliased to `thinking` (first) and `reasoning_content`.
    EXPECT_EQ(render_chat(src, msgs, nullptr, true, ordered_json{{"enable_thinking", false}}),
              "<s>assistant:a|['thinking', 'role', 'content', 'reasoning_content']>False");
    EXPECT_THROW(render_chat(src, ordered_json::array(), nullptr, false, nullptr), Error);
}

TEST(ChatTemplate, LoadsRealQwen3Template) {
    ChatTemplateSource src = load_chat_template(std::string(TESSERA_SOURCE_DIR) + "/../shared/data/tokenizers/qwen3");
    EXPECT_EQ(src.eos_token, "<|im_end|>");
    EXPECT_EQ(src.bos_token, "");
    ordered_json msgs = ordered_json::parse(R"([{"role": "user", "content": "Hi"}])");
    EXPECT_EQ(render_chat(src, msgs, nullptr, true, ordered_json{{"enable_thinking", false}}),
              "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(JinjaErrors, DeepExpressionsAndValuesAreBounded) {
    std::string chain = "{{ 1";
    for (int i = 0; i < 50000; ++i) chain += " + 1";
    EXPECT_NE(error_of(chain + " }}").find("nested too deeply"), std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace(x=1) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                  .find("nested deeper"),
              std::string::npos);
    EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}").find("inside itself"), std::string::npos);
    // A legitimate long flat chain still works.
    EXPECT_EQ(R("{{ 1 + 1 + 1 + 1 + 1 }}{{ 'a' ~ 'b' ~ 'c' }}"), "5abc");
}

}  // namespace
}  // namespace tessera
