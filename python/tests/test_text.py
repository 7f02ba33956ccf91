"""Text through tessera.Engine (the fixture model with the real Qwen3 tokenizer): tokenize /
detokenize round trips, and generate() agreeing with the token-level calls."""
import pytest


def test_tokenize_round_trip(tok_engine):
    text = "Hello, world! Ünïcödé <|im_end|>"
    ids = tok_engine.tokenize(text)
    assert ids[-1] == 151645  # the special token written in the text
    assert tok_engine.detokenize(ids) == text
    assert tok_engine.tokenize("") == []
    long_text = "word " * 3000
    assert tok_engine.detokenize(tok_engine.tokenize(long_text)) == long_text


def test_detokenize_partial_utf8(tok_engine):
    ids = tok_engine.tokenize("é")
    raw = b"".join(tok_engine.detokenize_bytes([t]) for t in ids)
    assert raw == "é".encode()


def greedy_tokens(engine, prompt_ids, max_tokens):
    out = [engine.prefill(prompt_ids, temperature=0, max_tokens=max_tokens)]
    while (t := engine.decode_step()) is not None:
        out.append(t)
    return out


def test_generate_matches_token_calls(tok_engine, ref):
    g = ref["greedy"]
    # EOS (generation_config) is the fourth greedy token: generation stops there, EOS not in the text.
    toks = greedy_tokens(tok_engine, g["prompt_ids"], 16)
    assert toks == g["new_ids"][:4]
    want = tok_engine.detokenize(toks[:3])
    assert tok_engine.generate(g["prompt_ids"], max_tokens=16, temperature=0) == want
    pieces = list(tok_engine.generate(g["prompt_ids"], max_tokens=16, temperature=0, stream=True))
    assert "".join(pieces) == want
    # ignore_eos: the full recorded continuation.
    full = tok_engine.generate(g["prompt_ids"], max_tokens=16, temperature=0, ignore_eos=True)
    assert full == tok_engine.detokenize(g["new_ids"])
    # max_tokens keeps the last token (it did not end generation by being EOS).
    assert tok_engine.generate(g["prompt_ids"], max_tokens=2, temperature=0) == tok_engine.detokenize(g["new_ids"][:2])


def test_generate_from_text(tok_engine):
    prompt = "in the"
    ids = tok_engine.tokenize(prompt)
    assert all(t < tok_engine.vocab_size for t in ids)  # short, common words: inside the tiny model's vocab
    text = tok_engine.generate(prompt, max_tokens=5, temperature=0, ignore_eos=True)
    assert text == tok_engine.detokenize(greedy_tokens(tok_engine, ids, 5))
    # generate() uses a request of its own: it leaves the single stream alone.
    first = tok_engine.prefill(ids, temperature=0, max_tokens=3)
    tok_engine.generate(prompt, max_tokens=2, temperature=0)
    assert tok_engine.decode_step() is not None and first is not None


def test_generate_errors(tessera, tok_engine, engine):
    with pytest.raises(tessera.TesseraError) as e:
        tok_engine.generate([tok_engine.vocab_size + 5], max_tokens=2)
    assert e.value.status == tessera.Status.INVALID_ARGUMENT
    with pytest.raises(tessera.TesseraError) as e:
        engine.generate("no tokenizer here")
    assert e.value.status == tessera.Status.UNSUPPORTED


def test_seeded_sampling_is_reproducible(tok_engine, ref):
    p = ref["greedy"]["prompt_ids"]
    a = tok_engine.generate(p, max_tokens=8, temperature=1.0, seed=7, ignore_eos=True)
    b = tok_engine.generate(p, max_tokens=8, temperature=1.0, seed=7, ignore_eos=True)
    assert a == b
