"""Prefix caching through the server on a hybrid model (Gated DeltaNet + attention + MoE, made by
`tessera synth --arch qwen35moe --preset tiny`): the second turn of a conversation reuses the
first turn's prompt from the cache (usage.prompt_tokens_details.cached_tokens) and answers
exactly as a server without the cache does."""
import openai
import pytest

from conftest import tessera_bin
from server_util import ServeProcess, synth_model

LONG = " ".join(f"word{i % 97} number {i}." for i in range(120))  # a few hundred tokens


@pytest.fixture(scope="module")
def hybrid_model(tmp_path_factory):
    return synth_model(tessera_bin(), tmp_path_factory.mktemp("hybrid") / "q35.gguf", arch="qwen35moe")


def conversation(model, *extra):
    s = ServeProcess(tessera_bin(), model, "--device", "cpu", "--max-model-len", 4096, "--memory-budget", "256M",
                     *extra)
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="none")
        msgs = [{"role": "user", "content": LONG}]
        r1 = c.chat.completions.create(model=s.model_name, messages=msgs, max_tokens=24, temperature=0)
        msgs += [{"role": "assistant", "content": r1.choices[0].message.content},
                 {"role": "user", "content": "And then? " * 20}]
        r2 = c.chat.completions.create(model=s.model_name, messages=msgs, max_tokens=24, temperature=0)
        return r1, r2
    finally:
        s.kill()


def test_second_turn_reuses_the_first_and_matches_no_cache(hybrid_model):
    r1, r2 = conversation(hybrid_model)
    n1 = r1.usage.prompt_tokens
    assert n1 > 200
    cached = r2.usage.prompt_tokens_details.cached_tokens
    # At least the first prompt down to the 64-token state-snapshot grid (the turn-1 prompt is a
    # prefix of the turn-2 prompt under a ChatML template).
    assert cached >= (n1 - 1) // 64 * 64, (cached, n1, r2.usage.prompt_tokens)
    assert cached < r2.usage.prompt_tokens
    c1, c2 = conversation(hybrid_model, "--no-prefix-caching")
    assert c2.usage.prompt_tokens_details.cached_tokens == 0
    assert c1.choices[0].message.content == r1.choices[0].message.content
    assert c2.choices[0].message.content == r2.choices[0].message.content
