// libFuzzer target for chat templates: the Jinja engine a checkpoint's template runs on, and the
// conversations clients send through it. The first byte picks the mode, the rest is the input:
//   even: a template. Parsed and rendered (with smaller limits than the server's, so that runaway
//         loops end fast) against a fixed conversation — system, user, an assistant turn with
//         reasoning and tool calls, a tool result, a user turn of content parts — with tools.
//   odd:  a conversation as JSON: a message list, or {"messages": …, "tools": …, "kwargs": …,
//         "add_generation_prompt": …}, rendered by render_chat with a Qwen-style template written
//         here (tool calls, reasoning, content parts, a namespace walked backwards).
// Each either renders or is refused with tessera::Error; nothing crashes, overflows the stack,
// over-reads (ASan) or hits undefined behaviour (UBSan).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja_interp.h"
#include "tokenizer/jinja_json.h"
#include "tokenizer/jinja_parser.h"

namespace {

using nlohmann::ordered_json;

volatile uint64_t g_sink;

const char* const kConversation = R"([
  {"role": "system", "content": "You are terse."},
  {"role": "user", "content": "What is the weather in Paris?"},
  {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
   "tool_calls": [{"id": "c1", "type": "function",
                   "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
                  {"type": "function", "function": {"name": "get_time", "arguments": "{\"tz\": \"CET\"}"}}]},
  {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21}"},
  {"role": "user", "content": [{"type": "text", "text": "And "}, {"type": "text", "text": "tomorrow?"}]}
])";

const char* const kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                  "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
])";

// A template in the manner of Qwen3's (written for this target): the constructs real chat
// templates lean on.
const char* const kTemplate = R"JINJA(
{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
    {{- "# Tools\n\n<tools>" }}
    {%- for tool in tools %}{{- "\n" }}{{- tool | tojson }}{%- endfor %}
    {{- "\n</tools><|im_end|>\n" }}
{%- elif messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string
          and not (message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- elif message.content is iterable and message.content is not mapping %}
        {%- set parts = namespace(text='') %}
        {%- for part in message.content %}
            {%- if part is mapping and part.type == 'text' %}{%- set parts.text = parts.text ~ part.text %}{%- endif %}
        {%- endfor %}
        {%- set content = parts.text %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if message.role == "user" or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning = message.reasoning_content %}
        {%- elif '</think>' in content %}
            {%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- set content = content.split('</think>')[-1].lstrip('\n') %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or reasoning) %}
            {{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
        {%- else %}
            {{- '<|im_start|>assistant\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}{{- '\n' }}{%- endif %}
                {%- if tool_call.function %}{%- set tool_call = tool_call.function %}{%- endif %}
                {{- '<tool_call>\n{"name": "' }}{{- tool_call.name }}{{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}{{- tool_call.arguments }}
                {%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}{{- '<|im_start|>user' }}{%- endif %}
        {{- '\n<tool_response>\n' }}{{- content }}{{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}{{- '<|im_end|>\n' }}{%- endif %}
    {%- elif message.role != "system" %}
        {{- raise_exception('unknown role: ' ~ message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}
)JINJA";

void fuzz_template(std::string_view text) {
    static const ordered_json conversation = ordered_json::parse(kConversation);
    static const ordered_json tools = ordered_json::parse(kTools);
    tessera::jinja::Dict ctx;
    ctx.set(tessera::jinja::Value("messages"), tessera::jinja::from_json(conversation));
    ctx.set(tessera::jinja::Value("tools"), tessera::jinja::from_json(tools));
    ctx.set(tessera::jinja::Value("add_generation_prompt"), tessera::jinja::Value(true));
    ctx.set(tessera::jinja::Value("bos_token"), tessera::jinja::Value(std::string("<s>")));
    ctx.set(tessera::jinja::Value("eos_token"), tessera::jinja::Value(std::string("</s>")));
    ctx.set(tessera::jinja::Value("enable_thinking"), tessera::jinja::Value(false));
    try {
        const tessera::jinja::Template tpl = tessera::jinja::parse(text);
        tessera::jinja::RenderLimits limits;
        limits.max_output_bytes = size_t{1} << 20;
        limits.max_steps = 200'000;
        tessera::jinja::Interpreter in(tpl, limits);
        g_sink = g_sink + in.render(ctx).size();
    } catch (const tessera::Error&) {
    }
}

void fuzz_conversation(std::string_view text) {
    static const tessera::ChatTemplateSource src = [] {
        tessera::ChatTemplateSource s;
        s.template_text = kTemplate;
        s.bos_token = "";
        s.eos_token = "<|im_end|>";
        s.special_tokens = {{"eos_token", "<|im_end|>"}, {"pad_token", "<|endoftext|>"}};
        return s;
    }();
    const ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return;
    ordered_json messages = j, tools = nullptr, kwargs = nullptr;
    bool add_generation_prompt = true;
    if (j.is_object()) {
        messages = j.contains("messages") ? j["messages"] : ordered_json();
        if (j.contains("tools")) tools = j["tools"];
        if (j.contains("kwargs")) kwargs = j["kwargs"];
        if (j.contains("add_generation_prompt") && j["add_generation_prompt"].is_boolean())
            add_generation_prompt = j["add_generation_prompt"].get<bool>();
    }
    try {
        g_sink = g_sink + tessera::render_chat(src, messages, tools, add_generation_prompt, kwargs).size();
    } catch (const tessera::Error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
    if ((data[0] & 1) == 0) fuzz_template(rest);
    else fuzz_conversation(rest);
    return 0;
}
