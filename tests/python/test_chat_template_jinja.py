"""Jinja feature parity: templates and snippets rendered by tessera (`tokenize --render
--chat-template`) and by transformers' own chat-template environment (jinja2 with trim_blocks,
lstrip_blocks, loopcontrols, its tojson / raise_exception / namespace), compared byte for byte."""
import copy

import pytest

from chat_render import render_both

pytest.importorskip("transformers")

# ---- whole templates in the styles of popular models (written for these tests) ----------------
LLAMA3_STYLE = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- Pull out the system message #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

CHATML = """{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"""

GEMMA_STYLE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\n'}}
{%- endif -%}
"""

# Indented blocks without "-": exercises trim_blocks / lstrip_blocks on every line.
PLAIN_BLOCKS = """{% for message in messages %}
  {% if message.role == 'system' %}
    <<SYS>>{{ message.content }}<</SYS>>
  {% elif message.role == 'user' %}
    [INST] {{ message.content | trim }} [/INST]
  {% else %}
    {{ message.content }}{{ eos_token }}
  {% endif %}
  {# a comment line #}
{% endfor %}
{% if add_generation_prompt %}   {{ 'ASSISTANT:' }}
{% endif %}"""

TOOL = {"type": "function", "function": {"name": "lookup", "description": "Look up — 検索 \"things\"",
                                         "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}, "required": ["q"]}}}
CONVS = {
    "plain": [{"role": "system", "content": "  Be brief.  "}, {"role": "user", "content": " Hi\n"}, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}],
    "no_system": [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2 ünï"}],
    "tool_call": [{"role": "user", "content": "find x"},
                  {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "lookup", "arguments": {"q": "x", "n": 2}}}]},
                  {"role": "tool", "content": "found x"}],
    "blocks": [{"role": "user", "content": [{"type": "text", "text": " part one "}, {"type": "image"}, {"type": "text", "text": "two"}]}],
    "bad_alternation": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
}


@pytest.mark.parametrize("template", [LLAMA3_STYLE, CHATML, GEMMA_STYLE, PLAIN_BLOCKS], ids=["llama3", "chatml", "gemma", "plain_blocks"])
@pytest.mark.parametrize("conv", list(CONVS))
@pytest.mark.parametrize("tools", [None, [TOOL]], ids=["notools", "tools"])
@pytest.mark.parametrize("agp", [False, True], ids=["nogen", "gen"])
def test_templates(tmp_path, template, conv, tools, agp):
    want, got = render_both(tmp_path, template, copy.deepcopy(CONVS[conv]), copy.deepcopy(tools), agp)
    if isinstance(want, tuple):
        assert isinstance(got, tuple), f"reference failed ({want[1]}) but tessera rendered {got!r}"
    else:
        assert got == want


def test_llama3_builtin_tools_and_kwargs(tmp_path):
    kwargs = {"builtin_tools": ["brave_search", "code_interpreter"], "date_string": "01 Jan 2030", "tools_in_user_message": False}
    msgs = [{"role": "user", "content": "search"},
            {"role": "assistant", "tool_calls": [{"function": {"name": "brave_search", "arguments": {"query": "jinja"}}}]}]
    want, got = render_both(tmp_path, LLAMA3_STYLE, msgs, [TOOL], True, kwargs=kwargs)
    assert got == want


# ---- snippets, one feature each; rendered with messages=[user "hi"] and the kwargs given ----------
SNIPPETS = {
    # whitespace control
    "ws_minus": "a  {%- if true -%}  b  {%- endif -%}  c {{- ' d ' -}} e",
    "ws_plus": "x\n    {%+ if true %}y{% endif +%}\nz",
    "ws_trim_lstrip": "line1\n    {% if true %}\n    kept\n    {% endif %}\nend\n",
    "ws_comment": "a\n  {# comment #}\nb {#- tight -#} c",
    "ws_var_no_trim": "{{ 'v' }}\nnext\n  {{ 'w' }}",
    "ws_edges": "   {% if true %}A{% endif %}\n{{ 'v' }}   {% if true %}B{% endif %}\n \t{# c #}  C\n\u3000{% if true %}D{% endif %}\n{{- 'E' -}}\n  {% for x in 'ab' %}\n  {{ x }}\n  {% endfor %}\n{%- if true %}  F  {% endif -%}\n  G\n{%+ if true %}H{% endif %}",
    "ws_nested_blocks": "<\n{% for m in messages %}\n    {% if m.role == 'user' %}\n        U:{{ m.content }}\n    {% endif %}\n{% endfor %}\n>",
    "raw": "{% raw %}{{ not rendered }} {% if %}{% endraw %}!",
    "crlf": "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n",
    # literals and operators
    "literals": "{{ 1 }} {{ -2 }} {{ 1.5 }} {{ 1e3 }} {{ 0.1 + 0.2 }} {{ 10 / 4 }} {{ 10 // 4 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1_000 }} {{ 0x1f }}",
    "strings": "{{ 'a' ~ 1 ~ none ~ true }} {{ 'x' * 3 }} {{ \"q'\" + 'q\"' }} {{ 'tab\\tnl\\nuni\\u00e9\\x41' }} {{ 'adj' 'acent' }}",
    "compare": "{{ 1 < 2 < 3 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 != 2 }} {{ 3 >= 3 }} {{ 'ab' in 'cab' }} {{ 2 not in [1] }} {{ 'k' in {'k': 1} }}",
    "logic": "{{ true and 'x' }} {{ false or 'y' }} {{ not 0 }} {{ none or [] }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}]",
    "printing": "{{ [1, 'a', none, true, 1.0, {'k': (1,)}] }} {{ (1, 2) }} {{ {'a': 'it\\'s'} }} {{ none }} {{ u }}",
    "subscripts": "{{ 'hello'[1] }} {{ 'hello'[-1] }} {{ 'hello'[1:3] }} {{ 'hello'[::-1] }} {{ [1,2,3,4][::2] }} {{ [1,2,3][-2:] }} {{ [1,2,3][:-1] }} {{ {'a': {'b': 5}}.a.b }} {{ {'a': [7]}['a'][0] }} {{ [1,2].0 }}",
    "unicode_len": "{{ 'héllo wörld 日本'|length }} {{ '日本語'[1] }} {{ '日本語'[::-1] }} {{ 'ÉCOLE'|lower }} {{ 'straße'|upper }}",
    # statements
    "if_elif": "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %},{% endfor %}",
    "for_loop_vars": "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
    "for_prev_next": "{% for x in [1,2,3] %}[{{ loop.previtem }}-{{ loop.nextitem }}]{% endfor %}",
    "for_else": "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in none_list %}x{% else %}undef{% endfor %}",
    "for_filter": "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }}{% if loop.last %}!{% endif %} {% endfor %}",
    "for_unpack": "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}",
    "for_dict_string": "{% for k in {'z': 1, 'a': 2} %}{{ k }}{% endfor %}{% for c in 'héé' %}<{{ c }}>{% endfor %}",
    "loop_controls": "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "nested_loops": "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ b }} {% endfor %}{% endfor %}",
    "loop_changed": "{% for p in people|sort(attribute='admin') %}{% if loop.changed(p.admin) %}[{{ p.admin }}]{% endif %}{{ p.name }}{% endfor %}",
    "groupby": "{% for key, group in people|groupby('admin') %}{{ key }}:{{ group|map(attribute='name')|join(',') }};{% endfor %}{{ ['b', 'A', 'a']|map('lower')|list }}",
    "loop_cycle": "{% for x in range(5) %}{{ loop.cycle('o', 'e') }}{% endfor %}",
    "scoping": "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}{% if true %}{% set y = 5 %}{% endif %}{{ y }}",
    "namespace": "{% set ns = namespace(n=0, items=[]) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.items = ns.items + [i] %}{% endfor %}{{ ns.n }} {{ ns.items }}",
    "set_tuple": "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 3, 4 %}{{ t }}",
    "set_block": "{% set block %}  Hello {{ 'World' }}  {% endset %}[{{ block }}]{% set up | upper | trim %} shout {% endset %}[{{ up }}]",
    "macro": "{% macro greet(name, punct='!', upper=false) %}{{ (name | upper) if upper else name }}{{ punct }}{% endmacro %}{{ greet('ann') }} {{ greet('bob', '?') }} {{ greet(upper=true, name='cy') }}",
    "macro_varargs": "{% macro m(a) %}{{ a }}|{{ varargs }}|{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k='v') }}",
    "macro_recursive": "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * (fact(n - 1) | int) }}{% endif %}{% endmacro %}{{ fact(6) }}",
    "call_block": "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}inside {{ 1 + 1 }}{% endcall %}",
    "call_block_args": "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(item) each([1, 2]) %}[{{ item }}]{% endcall %}",
    "filter_block": "{% filter upper %}quiet {{ 'words' }}{% endfilter %}",
    "with": "{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}[{{ a }}]",
    "generation_tag": "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}",
    "recursive_loop": "{% for item in tree recursive %}{{ item.name }}{% if item.children %}({{ loop(item.children) }}){% endif %}{% endfor %}",
    # filters
    "f_string_case": "{{ '  Hi There  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'hello world'|title }}|{{ \"it's a-b (c)\"|title }}|{{ 'hELLO'|capitalize }}|{{ 'Hi'|upper }}{{ 'Hi'|lower }}",
    "f_length_count": "{{ [1, 2]|length }}{{ 'abc'|count }}{{ {'a': 1}|length }}{{ u|length }}",
    "f_first_last": "{{ [3, 4]|first }}{{ [3, 4]|last }}{{ 'xyz'|first }}{{ []|first }}",
    "f_join": "{{ [1, 2, 3]|join(', ') }}|{{ ['a', 'b']|join }}|{{ [{'n': 'x'}, {'n': 'y'}]|join('-', attribute='n') }}",
    "f_replace": "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}",
    "f_default": "{{ u|default('d') }} {{ none|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ 0|d(5, boolean=true) }}",
    "f_tojson": "{{ obj|tojson }}\n{{ obj|tojson(indent=2) }}\n{{ obj|tojson(separators=(',', ':')) }}\n{{ obj|tojson(sort_keys=true) }}\n{{ obj|tojson(ensure_ascii=true) }}\n{{ 'x\"y'|tojson }} {{ none|tojson }} {{ [1.0, 2.5, 1e20, -0.0]|tojson }}",
    "f_string_int_float": "{{ 3|string }}{{ 1.0|string }}{{ '42'|int }}{{ '3.9'|int }}{{ 'x'|int }}{{ 'x'|int(7) }}{{ 3.9|int }}{{ '2.5'|float }}{{ 'a'|float }}{{ 3|float }}{{ '0x1f'|int(base=16) }}",
    "f_list_items": "{{ 'ab'|list }}{{ {'a': 1}|items|list }}{{ {'b': 2, 'a': 1}|dictsort }}{{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}",
    "f_select": "{{ [1, 2, 3, 4]|select('odd')|list }}{{ [1, 2, 3, 4]|reject('even')|list }}{{ [0, 1, '', 'a']|select|list }}{{ [1, 5, 10]|select('gt', 3)|list }}{{ [1, 2]|select('in', [2, 3])|list }}",
    "f_selectattr": "{{ people|selectattr('admin')|map(attribute='name')|list }}{{ people|rejectattr('admin')|map(attribute='name')|join }}{{ people|selectattr('age', 'ge', 30)|list|length }}{{ people|selectattr('name', 'equalto', 'Bo')|first }}",
    "f_map": "{{ [1, 2]|map('string')|list }}{{ ['a', 'B']|map('upper')|join }}{{ people|map(attribute='missing', default='?')|list }}{{ [[1, 2], [3]]|map('length')|list }}",
    "f_sort_unique": "{{ [3, 1, 2]|sort }}{{ [3, 1, 2]|sort(reverse=true) }}{{ ['b', 'A', 'c']|sort }}{{ ['b', 'A', 'c']|sort(case_sensitive=true) }}{{ people|sort(attribute='age')|map(attribute='name')|list }}{{ [1, 2, 1, 'a', 'A']|unique|list }}",
    "f_reverse_minmax": "{{ [1, 2, 3]|reverse|list }}{{ 'abc'|reverse }}{{ [3, 9, 2]|max }}{{ [3, 9, 2]|min }}{{ ['b', 'A']|max }}{{ [1, 2.5]|sum }}{{ people|sum(attribute='age') }}",
    "f_round_abs": "{{ 2.5|round }}{{ 3.5|round }}{{ 2.675|round(2) }}{{ 1.25|round(1) }}{{ 3.14159|round(3, 'floor') }}{{ 2.1|round(0, 'ceil') }}{{ -3|abs }}{{ -2.5|abs }}{{ 5|round }}",
    "f_indent": "[{{ 'a\\nb\\n\\nc'|indent }}]\n[{{ 'a\\nb'|indent(2, true) }}]\n[{{ 'a\\n\\nb'|indent(2, blank=true) }}]\n[{{ 'x\\ny'|indent('> ') }}]",
    "f_misc": "{{ '<b>x</b>  y'|striptags }}|{{ 'one two  three'|wordcount }}|{{ '<a href=\"x\">&</a>'|e }}|{{ 'x'|safe }}|{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ 'abc'|center(9) }}|{{ 'hello world foo'|truncate(9, leeway=0) }}|{{ '%s=%d'|format('a', 3) }}",
    "f_attr": "{{ people[0]|attr('name') }}",
    # tests
    "tests": "{{ u is defined }}{{ u is undefined }}{{ none is none }}{{ 1 is number }}{{ 1.0 is float }}{{ 1 is integer }}{{ true is boolean }}{{ 'x' is string }}{{ {} is mapping }}{{ [] is sequence }}{{ 'x' is iterable }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ 1 is eq 1 }}{{ 1 is ne 1 }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 'a' is in 'abc' }}{{ false is false }}{{ 0 is false }}{{ true is true }}{{ none is sameas none }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ range is callable }}{{ 1 is not none }}",
    # methods
    "m_str": "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'x\\ny'.splitlines() }}",
    "m_str2": "{{ 'hello'.startswith('he') }}{{ 'hello'.endswith(('x', 'lo')) }}{{ 'hello'.find('l') }}{{ 'hello'.rfind('l') }}{{ 'hello'.count('l') }}{{ 'a-b'.replace('-', '+') }}{{ 'hello world'.title() }}{{ 'Hi'.upper() }}{{ 'Hi'.lower() }}{{ 'hello'.capitalize() }}{{ '-'.join(['a', 'b']) }}{{ '42'.isdigit() }}{{ 'ab'.isalpha() }}{{ '5'.zfill(3) }}{{ 'ab'.center(6, '*') }}",
    "m_format": "{{ '{} and {}'.format('a', 1) }}|{{ '{0}{1}{0}'.format('x', 'y') }}|{{ '{name}!'.format(name='n') }}|{{ '{:>5}|{:<4}|{:^5}|{:05.2f}|{:,}|{!r}'.format('r', 'l', 'c', 3.14159, 1234567, 'q') }}",
    "m_dict": "{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}{{ d['items'] }}{{ d.items is defined }}",
    "m_center": "{% for w in range(9) %}[{{ 'ab'|center(w) }}][{{ 'abc'.center(w, '*') }}][{{ '{:^7}|{:*>4}|{:<3}|'.format('ab', 7, 'x') }}]{% endfor %}",
    "m_list": "{{ [1, 2, 2].count(2) }}{{ ['a', 'b'].index('b') }}",
    "globals": "{{ range(3)|list }}{{ range(1, 7, 2)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1, b=2) }}{{ namespace(x=1).x }}",
    "joiner": "{% set comma = joiner(', ') %}{% for x in 'abc' %}{{ comma() }}{{ x }}{% endfor %}",
    "undefined_chain": "{{ d.missing is defined }}{{ d.missing|default('m') }}{{ none_list|length }}{% if d.missing %}yes{% else %}no{% endif %}{{ (d.missing or 'fallback') }}",
    "macro_late_binding": "{% macro a(x) %}{{ b(x) }}{% endmacro %}{% macro b(x, e=True) %}<{{ x }}{{ e }}>{% endmacro %}{{ a(1) }}{{ b(2, e=False) }}",
    "items_key_vs_method": "{{ schema['items'] }}|{{ empty['items'] is mapping }}|{{ empty['items'] is defined }}|{{ schema.items is mapping }}|{% for k, v in schema|dictsort %}{{ k }};{% endfor %}",
    "none_namespace": "{% set ns = namespace(prev=None) %}{{ ns.prev is none }}{% if ns.prev != 'x' %}ok{% endif %}{% set ns.prev = 'tool' %}{{ ns.prev }}",
    "filter_precedence": "{{ 'r:' + none_list | default('unknown') + '{' }}|{{ -1 | abs }}|{{ 1 ~ 2 | string }}|{{ not true == false }}|{{ 2 * 3 ** 2 }}|{{ -2 ** 2 }}",
    "kwargs_vars": "{{ enable_thinking }} {{ obj.b.c }} {{ bos_token }}{{ eos_token }}{{ add_generation_prompt }}{{ tools is none }}{{ documents is none }}",
}
ERRORS = {
    "err_raise": "{{ raise_exception('custom failure') }}",
    "err_attr_of_undefined": "{{ u.attr }}",
    "err_add_undefined": "{{ 'a' + u }}",
    "err_add_types": "{{ 1 + 'a' }}",
    "err_unsafe_append": "{% set l = [] %}{{ l.append(1) }}",
    "err_ns_underscore": "{% set ns = namespace() %}{% set ns._x = 1 %}",
    "err_tojson_undefined": "{{ u|tojson }}",
    "err_div_zero": "{{ 1 / 0 }}",
    "err_unknown_filter": "{{ 1|nosuchfilter }}",
    "err_syntax": "{% if %}",
    "err_unclosed": "{% for x in y %}",
    "err_range_too_big": "{{ range(200000)|length }}",
}
CONTEXT = {
    "obj": {"b": {"c": "deep", "é": [1, 2.5, None, True]}, "a": "zé\"\\\n\t\u0001"},
    "people": [{"name": "Al", "age": 40, "admin": True}, {"name": "Bo", "age": 25, "admin": False}, {"name": "Cy", "age": 31, "admin": False}],
    "d": {"a": 1, "b": [1, 2], "items": "shadowed"},
    "tree": [{"name": "r", "children": [{"name": "c1", "children": []}, {"name": "c2", "children": [{"name": "g"}]}]}],
    "enable_thinking": False,
    "schema": {"type": "array", "items": {"type": "string"}, "Description": "x"},
    "empty": {},
}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("name", list(SNIPPETS))
def test_snippet(tmp_path, name):
    want, got = render_both(tmp_path, SNIPPETS[name], copy.deepcopy(MESSAGES), None, True, kwargs=copy.deepcopy(CONTEXT))
    assert not isinstance(want, tuple), f"reference failed: {want}"
    assert got == want


@pytest.mark.parametrize("name", list(ERRORS))
def test_error_cases_fail_like_jinja(tmp_path, name):
    want, got = render_both(tmp_path, ERRORS[name], copy.deepcopy(MESSAGES), None, False, kwargs=copy.deepcopy(CONTEXT))
    assert isinstance(want, tuple), f"reference rendered {want!r}"
    assert isinstance(got, tuple), f"tessera rendered {got!r} but jinja2 failed with {want[1]}"
    assert "chat template:" in got[1]
    if name == "err_raise":
        assert "custom failure" in got[1]


def test_hostile_templates_fail_cleanly(tmp_path):
    from chat_render import tessera_render

    (tmp_path / "tokenizer_config.json").write_text("{}")
    cases = ["{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",  # unbounded recursion
             "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",       # parser nesting
             "{% set s = 'x' * 1000000 %}{% for i in range(100000) %}{{ s }}{% endfor %}",  # output size
             "{{ 'a' * 10000000000 }}", "{% for %}", "{{ 'unterminated }}", "{# no end", "{% raw %}no end",
             "\xff\xfe{{ '\xc3' }}"]
    for template in cases:
        ok, out = tessera_render(tmp_path, MESSAGES, chat_template=template)
        if not ok:
            assert "error" in out and "Segmentation" not in out and "terminate called" not in out, out


def test_runaway_expressions_and_values_fail_cleanly(tmp_path):
    from chat_render import tessera_render

    (tmp_path / "tokenizer_config.json").write_text("{}")
    cases = {
        "{{ 1" + " + 1" * 100000 + " }}": "nested too deeply",
        "{{ 'a'" + "|trim" * 100000 + " }}": "nested too deeply",
        "{{ x" + "[0]" * 100000 + " }}": "nested too deeply",
        "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}": "nested deeper",
        "{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}": "namespace inside itself",
        "{% set ns = namespace(x=[1]) %}{% for i in range(60) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}{{ ns.x|tojson }}": "exceeds",
    }
    for template, message in cases.items():
        ok, out = tessera_render(tmp_path, MESSAGES, chat_template=template)
        assert not ok and message in out, (template[:60], out)
