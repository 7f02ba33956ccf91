"""`tessera serve` end to end with the official openai client: a real server process on a free
port, serving a random-weight qwen3 model made by `tessera synth` (its synthetic tokenizer and a
ChatML template; a second template file shows the tools)."""
import http.client
import json
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from conftest import tessera_bin
from server_util import ServeProcess, synth_model

KEY = "test-key-123"
NAME = "tiny"
MAX_LEN = 1024
MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me a story about the sea."}]

# ChatML that also prints the tools, so a test can see them reach the template.
TOOLS_TEMPLATE = """{%- if tools %}<|im_start|>system
# Tools
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}<|im_end|>
{% endif %}
{%- for message in messages %}<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("server_model")
    return synth_model(tessera_bin(), d / "tiny.gguf")


@pytest.fixture(scope="session")
def tools_template(tmp_path_factory):
    p = tmp_path_factory.mktemp("server_tpl") / "tools.jinja"
    p.write_text(TOOLS_TEMPLATE)
    return p


@pytest.fixture(scope="module")
def server(tiny_model, tools_template):
    s = ServeProcess(tessera_bin(), tiny_model, "--served-model-name", NAME, "--max-model-len", MAX_LEN,
                     "--memory-budget", "256M", "--max-body-bytes", "1M", "--chat-template", tools_template,
                     "--device", "cpu", api_key=KEY)
    yield s
    s.kill()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0, timeout=120)


def open_stream(server, path, body, key=None):
    """POSTs a streaming request with http.client; returns (connection, response) to read lines from."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=60)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request("POST", path, json.dumps(body), headers)
    return conn, conn.getresponse()


def greedy(**kw):
    return dict(temperature=0, **kw)


# ---- the API -------------------------------------------------------------------------------

def test_models_list(client):
    models = client.models.list()
    assert [m.id for m in models.data] == [NAME]
    assert client.models.retrieve(NAME).id == NAME


def test_chat_completion(server, client):
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=16, **greedy())
    c = r.choices[0]
    assert r.object == "chat.completion" and r.model == NAME and r.id.startswith("chatcmpl-")
    assert c.message.role == "assistant" and isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length")
    u = r.usage
    assert u.total_tokens == u.prompt_tokens + u.completion_tokens
    assert 1 <= u.completion_tokens <= 16
    # The prompt is the chat template's rendering, as /tokenize reports it.
    status, tok = server.post_json("/tokenize", {"messages": MESSAGES})
    assert status == 200 and tok["count"] == u.prompt_tokens == len(tok["tokens"])
    assert tok["max_model_len"] == MAX_LEN
    assert u.prompt_tokens_details.cached_tokens >= 0


def test_chat_streaming_matches_non_streaming(client):
    full = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=24, **greedy())
    chunks = list(client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=24, stream=True,
                                                 stream_options={"include_usage": True}, **greedy()))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    # include_usage: a last chunk with no choices and the usage; the others carry none.
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert all(c.usage is None for c in chunks[:-1])
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].usage.prompt_tokens == full.usage.prompt_tokens


def test_completions(server, client):
    r = client.completions.create(model=NAME, prompt="The quick brown fox", max_tokens=12, **greedy())
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    chunks = list(client.completions.create(model=NAME, prompt="The quick brown fox", max_tokens=12, stream=True,
                                            **greedy()))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == r.choices[0].text
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason
    # A prompt of token ids gives what the same text gives.
    ids = server.post_json("/tokenize", {"prompt": "The quick brown fox"})[1]["tokens"]
    r2 = client.completions.create(model=NAME, prompt=ids, max_tokens=12, **greedy())
    assert r2.choices[0].text == r.choices[0].text
    assert r2.usage.prompt_tokens == len(ids) == r.usage.prompt_tokens


def test_max_tokens_gives_length(client):
    r = client.completions.create(model=NAME, prompt="Hello", max_tokens=5, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_completion_tokens=3,
                                       extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length" and r.usage.completion_tokens == 3


def test_stop_strings(client):
    base = client.completions.create(model=NAME, prompt="Once upon a time", max_tokens=40, **greedy(),
                                     extra_body={"ignore_eos": True}).choices[0].text
    # A stop string first seen in the middle of the text: the output ends just before it.
    k = next(k for k in range(4, len(base) - 2) if base.find(base[k:k + 2]) == k and base[k:k + 2].strip())
    stop = base[k:k + 2]
    r = client.completions.create(model=NAME, prompt="Once upon a time", max_tokens=40, stop=[stop, "\x00never"],
                                  **greedy(), extra_body={"ignore_eos": True})
    assert r.choices[0].text == base[:k]
    assert r.choices[0].finish_reason == "stop"
    s = list(client.completions.create(model=NAME, prompt="Once upon a time", max_tokens=40, stop=stop, stream=True,
                                       **greedy(), extra_body={"ignore_eos": True}))
    assert "".join(c.choices[0].text for c in s) == base[:k]


def test_greedy_is_deterministic(client):
    a = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=20, **greedy())
    b = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=20, **greedy())
    assert a.choices[0].message.content == b.choices[0].message.content


def test_seed_reproducible(client):
    def sample(seed):
        return client.completions.create(model=NAME, prompt="The cat", max_tokens=20, temperature=1.0, seed=seed,
                                         extra_body={"ignore_eos": True}).choices[0].text
    a = sample(1234)
    assert sample(1234) == a
    assert any(sample(s) != a for s in (1, 2, 3))  # a different seed draws differently


def test_chat_logprobs(client):
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=8, logprobs=True, top_logprobs=3,
                                       **greedy(), extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 8
    for e in content:
        assert e.logprob <= 0
        assert len(e.top_logprobs) == 3
        lps = [t.logprob for t in e.top_logprobs]
        assert lps == sorted(lps, reverse=True)
        assert abs(e.logprob - lps[0]) < 1e-4  # greedy: the chosen token is the best one
        assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\ufffd" in e.token
    # Streaming carries the same tokens.
    s = list(client.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=8, logprobs=True,
                                            top_logprobs=3, stream=True, **greedy(), extra_body={"ignore_eos": True}))
    streamed = [e for c in s if c.choices and c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in streamed] == [e.token for e in content]


def test_completion_logprobs(client):
    r = client.completions.create(model=NAME, prompt="Hello there", max_tokens=6, logprobs=2, **greedy(),
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == 6
    assert all(x <= 0 for x in lp.token_logprobs)
    assert all(1 <= len(t) <= 2 for t in lp.top_logprobs)
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0


def test_tools_reach_the_template(server, client):
    status, with_tools = server.post_json("/tokenize", {"messages": MESSAGES, "tools": TOOLS})
    assert status == 200
    _, without = server.post_json("/tokenize", {"messages": MESSAGES})
    assert with_tools["count"] > without["count"]
    r = client.chat.completions.create(model=NAME, messages=MESSAGES, tools=TOOLS, max_tokens=2)
    assert r.usage.prompt_tokens == with_tools["count"]
    _, detok = server.post_json("/detokenize", {"tokens": with_tools["tokens"]})
    assert '"name": "get_weather"' in detok["prompt"] or '"name":"get_weather"' in detok["prompt"]
    assert detok["content"] == detok["prompt"]


def test_tokenize_prompt_and_content(server):
    s1, a = server.post_json("/tokenize", {"prompt": "hello world"})
    s2, b = server.post_json("/tokenize", {"content": "hello world"})
    assert s1 == s2 == 200 and a["tokens"] == b["tokens"] and a["count"] == len(a["tokens"]) > 0
    _, d = server.post_json("/detokenize", {"tokens": a["tokens"]})
    assert d["prompt"] == "hello world"


# ---- errors --------------------------------------------------------------------------------

def error_of(status_body):
    status, body = status_body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}
    return status, err


def test_malformed_json(server):
    status, body = server.request("POST", "/v1/chat/completions", b'{"messages": [', {"Content-Type": "application/json"})
    assert status == 400
    assert "JSON" in json.loads(body)["error"]["message"]


def test_wrong_types_and_missing_fields(client, server):
    with pytest.raises(openai.BadRequestError, match="temperature"):
        client.chat.completions.create(model=NAME, messages=MESSAGES, temperature="hot")
    with pytest.raises(openai.BadRequestError, match="messages"):
        client.chat.completions.create(model=NAME, messages=[])
    status, err = error_of(server.post_json("/v1/completions", {"model": NAME}))
    assert status == 400 and "prompt" in err["message"] and err["type"] == "invalid_request_error"
    with pytest.raises(openai.BadRequestError, match="'n'"):
        client.chat.completions.create(model=NAME, messages=MESSAGES, n=2)


def test_image_part_is_refused(client):
    with pytest.raises(openai.BadRequestError, match="image_url"):
        client.chat.completions.create(model=NAME, messages=[{"role": "user", "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}])


def test_context_overflow(client):
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=NAME, prompt="hello", max_tokens=MAX_LEN)
    with pytest.raises(openai.BadRequestError):
        client.completions.create(model=NAME, prompt=[5] * (MAX_LEN + 10), max_tokens=1)


def test_oversized_body(server):
    status, body = server.request("POST", "/v1/completions", b'{"prompt": "' + b"a" * (2 << 20) + b'"}')
    assert status == 413


def test_auth(server):
    bad = openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    for path in ("/v1/models", "/metrics"):
        assert server.request("GET", path, auth=False)[0] == 401
    assert server.request("POST", "/tokenize", {"prompt": "x"}, auth=False)[0] == 401
    status, body = server.request("GET", "/health", auth=False)
    assert status == 200


def test_unknown_model_and_route(client, server):
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=MESSAGES)
    status, err = error_of((lambda s, b: (s, json.loads(b)))(*server.request("GET", "/v1/nothing")))
    assert status == 404


# ---- cancellation, load, shutdown ----------------------------------------------------------

def test_client_disconnect_cancels(server):
    before = server.metrics().get('tessera_requests_total{finish_reason="cancelled"}', 0)
    body = {"model": NAME, "prompt": "Tell me everything", "max_tokens": MAX_LEN - 16, "stream": True,
            "ignore_eos": True}
    conn, r = open_stream(server, "/v1/completions", body, KEY)
    assert r.status == 200
    n = 0
    while n < 3:
        n += r.readline().startswith(b"data: ")
    assert server.metrics()["tessera_requests_running"] >= 1
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    m = server.wait_idle()
    assert m["tessera_requests_running"] == 0 and m["tessera_kv_blocks_used"] == 0
    assert m['tessera_requests_total{finish_reason="cancelled"}'] == before + 1


def test_bounded_load(server):
    """32 concurrent streams for ~10 s: no failure, and nothing left running or held after."""
    stop_at = time.time() + 10
    c = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0, timeout=120)

    def worker(i):
        done = failed = 0
        while time.time() < stop_at:
            try:
                kind = (i + done) % 2
                if kind:
                    s = c.chat.completions.create(model=NAME, messages=MESSAGES, max_tokens=24, stream=True,
                                                  seed=i, stream_options={"include_usage": True})
                else:
                    s = c.completions.create(model=NAME, prompt=f"Story {i}:", max_tokens=24, stream=True, seed=i,
                                             stream_options={"include_usage": True})
                chunks = list(s)
                assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
                done += 1
            except Exception as e:  # noqa: BLE001 — counted as a failure
                print("load failure:", repr(e))
                failed += 1
        return done, failed

    with ThreadPoolExecutor(32) as ex:
        results = list(ex.map(worker, range(32)))
    assert sum(f for _, f in results) == 0
    assert sum(d for d, _ in results) >= 32
    m = server.wait_idle()
    assert m["tessera_requests_running"] == 0 and m["tessera_requests_waiting"] == 0
    assert m["tessera_kv_blocks_used"] == 0
    assert m['tessera_requests_total{finish_reason="error"}'] == 0
    assert m["tessera_time_to_first_token_seconds_count"] >= 32


def test_metrics_format(server):
    status, body = server.request("GET", "/metrics")
    text = body.decode()
    assert status == 200
    for name in ("tessera_requests_total", "tessera_prompt_tokens_total", "tessera_generation_tokens_total",
                 "tessera_time_to_first_token_seconds", "tessera_inter_token_latency_seconds",
                 "tessera_e2e_request_latency_seconds", "tessera_requests_waiting", "tessera_requests_running",
                 "tessera_kv_blocks_used", "tessera_kv_blocks_total", "tessera_kv_blocks_cached",
                 "tessera_state_slots_used", "tessera_state_slots_total", "tessera_snapshots_used",
                 "tessera_prefix_cache_hit_tokens_total", "tessera_memory_bytes"):
        assert f"# TYPE {name} " in text, name
        assert f"# HELP {name} " in text, name
    m = server.metrics()
    assert m["tessera_kv_blocks_total"] > 0
    assert m["tessera_generation_tokens_total"] > 0
    assert any(k.startswith("tessera_memory_bytes{kind=") for k in m)


def test_timeout_then_sigterm_exits_cleanly(tiny_model):
    s = ServeProcess(tessera_bin(), tiny_model, "--max-model-len", MAX_LEN, "--memory-budget", "256M",
                     "--device", "cpu", "--request-timeout", "0.3")
    # A request still generating after --request-timeout is cancelled: 504, counted, blocks freed.
    status, body = s.post_json("/v1/completions", {"prompt": "Go on", "max_tokens": MAX_LEN - 16,
                                                   "ignore_eos": True})
    assert status == 504 and "timed out" in body["error"]["message"]
    m = s.wait_idle()
    assert m['tessera_requests_total{finish_reason="timeout"}'] == 1 and m["tessera_kv_blocks_used"] == 0
    got = {}

    def stream():
        try:
            _, r = open_stream(s, "/v1/completions",
                               {"prompt": "Go on", "max_tokens": MAX_LEN - 16, "stream": True, "ignore_eos": True})
            got["lines"] = [line.decode() for line in r.read().split(b"\n") if line.strip()]
        except (OSError, http.client.HTTPException) as e:
            got["error"] = e

    t = threading.Thread(target=stream)
    t.start()
    deadline = time.time() + 30
    while s.metrics()["tessera_requests_running"] < 1 and time.time() < deadline:
        time.sleep(0.01)
    assert s.metrics()["tessera_requests_running"] == 1  # in flight when the signal comes
    assert s.terminate(timeout=30) == 0, "".join(s.log)
    t.join(30)
    assert not t.is_alive()
    # The stream ended early: with an error event, or cut off.
    if "lines" in got:
        assert not any('"finish_reason":"length"' in line for line in got["lines"])
    with pytest.raises(OSError):
        socket.create_connection((s.host, s.port), timeout=2).close()
