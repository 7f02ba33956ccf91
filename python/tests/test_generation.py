"""Token-level generation through tessera.Engine against transformers' recorded outputs
(tests/fixtures/qwen3_tiny): the single stream, per-request streams, batched requests, logits."""
import array

from conftest import FIXTURE


def stream(engine, prompt, **kw):
    out = [engine.prefill(prompt, **kw)]
    while (t := engine.decode_step()) is not None:
        out.append(t)
    return out


def test_greedy_continuation_matches_transformers(engine, ref):
    g = ref["greedy"]
    assert stream(engine, g["prompt_ids"], temperature=0, max_tokens=len(g["new_ids"])) == g["new_ids"]
    assert engine.finish_reason() == "length"
    assert engine.decode_step() is None  # FINISHED stays finished


def test_logits_match_transformers(engine, ref):
    a = ref["prompts"]["a"]
    vocab = a["logits"]["shape"][1]
    want = array.array("f")
    want.frombytes((FIXTURE / a["logits"]["file"]).read_bytes())
    want = want[(len(a["ids"]) - 1) * vocab:]  # the last prompt position
    tok = engine.prefill(a["ids"], temperature=0, max_tokens=2)
    got = engine.logits()
    assert len(got) == vocab
    err = max(abs(x - y) for x, y in zip(got, want)) / max(abs(y) for y in want)
    assert err <= 1e-3
    assert tok == max(range(vocab), key=got.__getitem__)  # greedy picks the argmax


def test_stop_token_and_max_tokens(engine, ref):
    g = ref["greedy"]
    full = g["new_ids"]
    assert stream(engine, g["prompt_ids"], temperature=0, max_tokens=3) == full[:3]
    assert stream(engine, g["prompt_ids"], temperature=0, stop_token_ids=[full[2]]) == full[:3]
    assert engine.finish_reason() == "stop"
    assert engine.prefill(g["prompt_ids"], max_tokens=0) is None


def test_per_request_streams_match_the_stream(engine, ref):
    g, a = ref["greedy"], ref["prompts"]["a"]["ids"]
    alone = stream(engine, a, temperature=0, max_tokens=6)
    got = {"g": [engine.prefill_req("g", g["prompt_ids"], temperature=0, max_tokens=6)],
           "a": [engine.prefill_req("a", a, temperature=0, max_tokens=6)]}
    for _ in range(5):
        for rid in ("a", "g"):
            got[rid].append(engine.decode_step_req(rid))
    assert got["g"] == g["new_ids"][:6]
    assert got["a"] == alone
    logits = engine.logits()  # of g's last token
    assert got["g"][-1] == max(range(engine.vocab_size), key=logits.__getitem__)
    assert engine.decode_step_req("g") is None
    engine.finish_req("g")
    engine.finish_req("a")


def test_batched_requests_match_alone(engine, ref):
    g, a, b = ref["greedy"], ref["prompts"]["a"]["ids"], ref["prompts"]["b"]["ids"]
    alone_a = stream(engine, a, temperature=0, max_tokens=7)
    alone_b = stream(engine, b, temperature=0, max_tokens=4)
    engine.add_request("g", g["prompt_ids"], temperature=0, max_tokens=16)
    engine.add_request("a", a, temperature=0, max_tokens=7)
    engine.add_request("b", b, temperature=0, max_tokens=4)
    tokens, finals = {}, {}
    cap = 2  # small: events beyond it wait for the next call
    while events := engine.step(cap):
        assert len(events) <= cap
        for ev in events:
            assert ev.request_id not in finals, "event after the final one"
            if ev.token >= 0:
                tokens.setdefault(ev.request_id, []).append(ev.token)
            if ev.finished:
                finals[ev.request_id] = ev.finish_reason
    assert tokens == {"g": g["new_ids"], "a": alone_a, "b": alone_b}
    assert finals == {"g": "length", "a": "length", "b": "length"}
