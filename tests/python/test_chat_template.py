"""Chat-template parity: `tessera tokenize --render` against transformers' apply_chat_template
(tokenize=False) for the real Qwen3 and DeepSeek-V3 templates, byte for byte."""
import copy
import functools
import json
import shutil

import pytest

from chat_render import TOKENIZERS, tessera_render

transformers = pytest.importorskip("transformers")

MODELS = ["qwen3", "deepseek_v3"]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather — météo, 天气 ☀️",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country, e.g. \"Paris, FR\""},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "array", "items": {"type": "integer", "minimum": 1}},
                "options": {
                    "type": "object",
                    "properties": {"precision": {"type": "number"}, "verbose": {"type": "boolean", "default": False}},
                    "required": [],
                },
            },
            "required": ["location"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "web_search",
        "description": "Search the web.\nReturns <b>snippets</b> & links; handles 'quotes' and \\ backslashes.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "integer", "default": 5}, "ratio": {"type": "number", "default": 0.5}},
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]


def call(name, args, as_string, id_=None):
    c = {"type": "function", "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False) if as_string else args}}
    if id_:
        c["id"] = id_
    return c


CONVERSATIONS = {
    "single_turn": [{"role": "user", "content": "Hello!"}],
    "system_multi_turn": [
        {"role": "system", "content": "You are a concise assistant."},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "content": "6"},
        {"role": "user", "content": "Thanks"},
    ],
    "reasoning_content": [
        {"role": "user", "content": "Think about it: 17*3?"},
        {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51.\nDouble-check: 50+1."},
        {"role": "user", "content": "And 17*4?"},
        {"role": "assistant", "content": "68", "reasoning_content": "17*4 = 68"},
    ],
    "think_in_content": [
        {"role": "system", "content": "Reason first."},
        {"role": "user", "content": "Why is the sky blue?"},
        {"role": "assistant", "content": "<think>\nRayleigh scattering.\n</think>\n\nBecause of Rayleigh scattering."},
        {"role": "user", "content": "Short answer?"},
        {"role": "assistant", "content": "<think>\n\n</think>\n\nScattering."},
    ],
    "tool_calls_dict_args": [
        {"role": "system", "content": "Use tools when useful."},
        {"role": "user", "content": "Weather in Paris and Tokyo?"},
        {"role": "assistant", "content": "", "tool_calls": [
            call("get_weather", {"location": "Paris, FR", "unit": "celsius"}, False),
            call("get_weather", {"location": "東京", "days": [1, 2], "options": {"precision": 0.5}}, False),
        ]},
        {"role": "tool", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
        {"role": "tool", "content": "{\"temp\": 18.5, \"sky\": \"雨\"}"},
        {"role": "assistant", "content": "Paris: 21°C clear. Tokyo: 18.5°C rain."},
        {"role": "user", "content": "Great."},
    ],
    "tool_calls_string_args": [
        {"role": "user", "content": "Search for jinja"},
        {"role": "assistant", "content": "Let me search.", "tool_calls": [call("web_search", {"query": "jinja \"templates\"", "top_k": 3}, True, "call_1")]},
        {"role": "tool", "content": "Jinja is a template engine.", "tool_call_id": "call_1"},
        {"role": "tool", "content": "Second result."},
        {"role": "tool", "content": "Third result."},
    ],
    "tool_calls_after_reasoning": [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "", "reasoning_content": "Need the weather tool.", "tool_calls": [call("get_weather", {"location": "Oslo"}, True)]},
        {"role": "tool", "content": "cold"},
    ],
    "empty_content": [
        {"role": "system", "content": ""},
        {"role": "user", "content": ""},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "?"},
    ],
    "unicode": [
        {"role": "user", "content": "Ünïcödé — 日本語 テキスト, emoji 🎉👩‍💻, RTL مرحبا, \u00a0nbsp, tab\there"},
        {"role": "assistant", "content": "Réponse: «ok» ✓\n\n```python\nprint('héllo')\n```"},
        {"role": "user", "content": "Line1\r\nLine2\n\n  indented {{ not a template }} {% raw %}"},
    ],
    "tool_response_in_user": [
        {"role": "user", "content": "Start"},
        {"role": "assistant", "content": "calling", "tool_calls": [call("web_search", {"query": "x"}, False)]},
        {"role": "user", "content": "<tool_response>\nmanual\n</tool_response>"},
        {"role": "assistant", "content": "<think>\nok\n</think>\n\ndone"},
    ],
    "multiple_system": [
        {"role": "system", "content": "First system."},
        {"role": "system", "content": "Second system."},
        {"role": "user", "content": "Hi"},
    ],
}

# (conversation, tools, kwargs)
CASES = []
for name in CONVERSATIONS:
    CASES.append((name, None, None))
    CASES.append((name, "tools", None))
CASES += [
    ("single_turn", None, {"enable_thinking": False}),
    ("system_multi_turn", None, {"enable_thinking": False}),
    ("tool_calls_dict_args", "tools", {"enable_thinking": False}),
    ("single_turn", None, {"enable_thinking": True}),
    ("single_turn", "empty_tools", None),
]


@functools.lru_cache(maxsize=None)
def reference_tokenizer(model):
    return transformers.AutoTokenizer.from_pretrained(str(TOKENIZERS / model))


def reference(model, messages, tools, agp, kwargs):
    tok = reference_tokenizer(model)
    try:
        return True, tok.apply_chat_template(copy.deepcopy(messages), tools=copy.deepcopy(tools),
                                             add_generation_prompt=agp, tokenize=False, **(kwargs or {}))
    except Exception as e:  # the template itself failing is part of what must match
        return False, f"{type(e).__name__}: {e}"


def check(model_path, model, conv, tools_key, agp, kwargs):
    messages = CONVERSATIONS[conv]
    tools = {"tools": TOOLS, "empty_tools": [], None: None}[tools_key]
    ok_ref, want = reference(model, messages, tools, agp, kwargs)
    ok, got = tessera_render(model_path, messages, tools, agp, kwargs)
    if not ok_ref:
        assert not ok, f"transformers failed ({want}) but tessera rendered:\n{got}"
        return
    assert ok, f"tessera failed: {got}"
    assert got == want


@pytest.mark.parametrize("agp", [False, True], ids=["nogen", "gen"])
@pytest.mark.parametrize("conv,tools_key,kwargs", CASES, ids=[f"{c}-{t}-{k}" for c, t, k in CASES])
@pytest.mark.parametrize("model", MODELS)
def test_render_matches_transformers(model, conv, tools_key, kwargs, agp):
    check(TOKENIZERS / model, model, conv, tools_key, agp, kwargs)


@pytest.mark.parametrize("model", MODELS)
def test_folder_with_only_tokenizer_files(model, tmp_path):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(TOKENIZERS / model / f, tmp_path / f)
    check(tmp_path, model, "tool_calls_dict_args", "tools", True, None)


@pytest.mark.parametrize("model", MODELS)
def test_chat_template_jinja_file_beside_config(model, tmp_path):
    # transformers 5 saves the template as chat_template.jinja; it wins over tokenizer_config.json.
    cfg = json.loads((TOKENIZERS / model / "tokenizer_config.json").read_text(encoding="utf-8"))
    template = cfg.pop("chat_template")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (tmp_path / "chat_template.jinja").write_text(template, encoding="utf-8")
    want = reference(model, CONVERSATIONS["system_multi_turn"], None, True, None)[1]
    ok, got = tessera_render(tmp_path, CONVERSATIONS["system_multi_turn"], None, True, None)
    assert ok, got
    assert got == want


def test_named_templates_pick_tool_use(tmp_path):
    cfg = {"eos_token": "</s>", "chat_template": [
        {"name": "default", "template": "D{% for m in messages %}[{{ m.content }}]{% endfor %}"},
        {"name": "tool_use", "template": "T{{ tools | length }}{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}"},
    ]}
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    msgs = [{"role": "user", "content": "a"}]
    assert tessera_render(tmp_path, msgs) == (True, "D[a]")
    assert tessera_render(tmp_path, msgs, tools=TOOLS) == (True, "T2[a]</s>")


def test_raise_exception_message_is_reported(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ raise_exception('Roles must alternate!') }}"}))
    ok, err = tessera_render(tmp_path, [{"role": "user", "content": "x"}])
    assert not ok and "Roles must alternate!" in err


def test_syntax_error_has_line_and_column(tmp_path):
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"chat_template": "line one\n{% if x %}\n{{ 1 + }}"}))
    ok, err = tessera_render(tmp_path, [{"role": "user", "content": "x"}])
    assert not ok and "chat template: line 3 col" in err


def test_gguf_metadata_template(tmp_path):
    gguf = pytest.importorskip("gguf")
    cfg = json.loads((TOKENIZERS / "qwen3" / "tokenizer_config.json").read_text(encoding="utf-8"))
    path = tmp_path / "model.gguf"
    w = gguf.GGUFWriter(str(path), "qwen3")
    w.add_chat_template(cfg["chat_template"])
    w.add_token_list(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "hello"])
    w.add_eos_token_id(2)
    w.add_bos_token_id(0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    messages = CONVERSATIONS["tool_calls_dict_args"]
    want = reference("qwen3", messages, TOOLS, True, {"enable_thinking": False})[1]
    ok, got = tessera_render(path, messages, TOOLS, True, {"enable_thinking": False})
    assert ok, got
    assert got == want
    # bos/eos come from the GGUF token ids.
    ok, got = tessera_render(path, [{"role": "user", "content": "x"}], chat_template="{{ bos_token }}|{{ eos_token }}")
    assert (ok, got) == (True, "<|endoftext|>|<|im_end|>")


def test_template_files_replace_config_templates(tmp_path):
    # chat_template.jinja + additional_chat_templates/*.jinja (transformers 5 layout) win over the config.
    shutil.copy(TOKENIZERS / "qwen3" / "tokenizer.json", tmp_path / "tokenizer.json")
    cfg = json.loads((TOKENIZERS / "qwen3" / "tokenizer_config.json").read_text(encoding="utf-8"))
    cfg["chat_template"] = [{"name": "default", "template": "CONFIG"}, {"name": "rag", "template": "RAG"}]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(cfg), encoding="utf-8")
    (tmp_path / "chat_template.jinja").write_text("FILE{% for m in messages %}[{{ m.content }}]{% endfor %}", encoding="utf-8")
    (tmp_path / "additional_chat_templates").mkdir()
    (tmp_path / "additional_chat_templates" / "tool_use.jinja").write_text("TOOLS{{ tools|length }}{{ eos_token }}", encoding="utf-8")
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    msgs = [{"role": "user", "content": "a"}]
    for tools in (None, TOOLS):
        want = tok.apply_chat_template(msgs, tools=tools, tokenize=False)
        assert tessera_render(tmp_path, msgs, tools) == (True, want)


def test_model_path_variants():
    msgs = CONVERSATIONS["single_turn"]
    want = reference("qwen3", msgs, None, True, None)[1]
    for path in (TOKENIZERS / "qwen3", TOKENIZERS / "qwen3" / "tokenizer_config.json", TOKENIZERS / "qwen3" / "tokenizer.json"):
        assert tessera_render(path, msgs, add_generation_prompt=True) == (True, want), path
    ok, err = tessera_render(TOKENIZERS / "nonexistent", msgs)
    assert not ok and "no such file" in err


def test_hostile_json_input_is_a_clear_error(tmp_path):
    deep = {"role": "user", "content": "x", "extra": json.loads("[" * 600 + "]" * 600)}
    ok, err = tessera_render(TOKENIZERS / "qwen3", [deep])
    assert not ok and "nested deeper" in err
    for bad in ({"role": "user"}, "not a message"):
        ok, err = tessera_render(TOKENIZERS / "deepseek_v3", [bad])
        assert not ok and "error" in err
    ok, err = tessera_render(TOKENIZERS / "qwen3", [])
    assert not ok and "empty conversation" in err
