"""tessera.Engine basics: loading, model facts, memory, and errors raised as TesseraError with
the C ABI's status and message."""
import json

import pytest

from conftest import BUDGET, FIXTURE


def test_finds_the_library_from_tessera_lib(tessera, monkeypatch):
    import os
    assert tessera.find_library() == os.environ["TESSERA_LIB"]
    monkeypatch.setenv("TESSERA_LIB", "/nonexistent/libtessera.so")
    with pytest.raises(OSError, match="/nonexistent/libtessera.so"):
        tessera.find_library()


def test_model_facts(engine):
    cfg = json.loads((FIXTURE / "config.json").read_text())
    assert engine.vocab_size == cfg["vocab_size"]
    assert engine.num_layers == cfg["num_hidden_layers"]


def test_memory(engine, ref):
    m = engine.memory()
    assert m["weights_bytes"] > (FIXTURE / "model.safetensors").stat().st_size // 2
    assert 0 < m["kv_pool_bytes"] <= BUDGET
    assert m["kv_blocks_total"] > 0 and m["kv_blocks_used"] == 0
    assert m["host_rss_bytes"] > 0
    engine.prefill_req("m", ref["prompts"]["a"]["ids"], temperature=0)
    assert 0 < engine.memory()["kv_blocks_used"] <= m["kv_blocks_total"]


def test_bad_model_path_raises(tessera, tmp_path):
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Engine(tmp_path / "missing")
    assert "missing" in e.value.message
    assert e.value.status not in (tessera.Status.OK, tessera.Status.INTERNAL)


def test_unknown_options_are_type_errors(tessera):
    with pytest.raises(TypeError, match="no_such_option"):
        tessera.Engine(FIXTURE, no_such_option=1)


def test_errors_carry_status_and_message(tessera, engine):
    with pytest.raises(tessera.TesseraError) as e:
        engine.decode_step_req("ghost")
    assert e.value.status == tessera.Status.NOT_FOUND
    assert "'ghost'" in e.value.message and "NOT_FOUND" in str(e.value)

    with pytest.raises(tessera.TesseraError) as e:
        engine.prefill([1, engine.vocab_size])  # a token past the vocabulary
    assert e.value.status == tessera.Status.INVALID_ARGUMENT

    with pytest.raises(tessera.TesseraError) as e:
        engine.prefill([])
    assert e.value.status == tessera.Status.INVALID_ARGUMENT and "at least one token" in e.value.message

    with pytest.raises(tessera.TesseraError) as e:
        engine.logits()
    assert e.value.status == tessera.Status.NOT_FOUND

    with pytest.raises(tessera.TesseraError) as e:
        engine.decode_step()  # no stream yet
    assert e.value.status == tessera.Status.NOT_FOUND

    with pytest.raises(tessera.TesseraError) as e:
        engine.add_request("x" * 64, [1, 2])
    assert e.value.status == tessera.Status.INVALID_ARGUMENT

    with pytest.raises(ValueError, match="NUL"):
        engine.finish_req("a\0b")

    with pytest.raises(TypeError, match="bogus"):
        engine.prefill([1, 2], bogus=3)

    engine.prefill_req("dup", [1, 2, 3], temperature=0)
    with pytest.raises(tessera.TesseraError, match="already in use"):
        engine.add_request("dup", [1, 2, 3])
    engine.finish_req("dup")
    with pytest.raises(tessera.TesseraError) as e:
        engine.finish_req("dup")
    assert e.value.status == tessera.Status.NOT_FOUND


def test_tokenizer_calls_without_a_tokenizer_are_unsupported(tessera, engine):
    with pytest.raises(tessera.TesseraError) as e:
        engine.tokenize("hello")
    assert e.value.status == tessera.Status.UNSUPPORTED


def test_close_is_idempotent_and_final(tessera):
    e = tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET)
    e.close()
    e.close()
    with pytest.raises(tessera.TesseraError, match="closed"):
        e.vocab_size


def test_sampling_option(tessera, ref):
    """sampling="device" draws through the backend's sample op (the CPU reference here): a seed
    repeats its tokens across engines; an unknown mode is refused with the option's name."""
    prompt = ref["greedy"]["prompt_ids"]

    def draw():
        with tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET, sampling="device") as e:
            out = [e.prefill(prompt, temperature=0.9, top_p=0.9, seed=5, max_tokens=8)]
            while (t := e.decode_step()) is not None:
                out.append(t)
            return out

    first = draw()
    assert len(first) == 8 and draw() == first
    assert first != ref["greedy"]["new_ids"][:8]  # temperature 0.9 over a tiny random model's flat rows
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET, sampling="bogus")
    assert "sampling" in e.value.message


def test_pipeline_option(tessera, ref):
    """pipeline="on" (on the CPU the chained steps read their tokens on the host): the greedy
    continuation is transformers' as with it off; an unknown mode is refused naming the option."""
    prompt = ref["greedy"]["prompt_ids"]
    want = ref["greedy"]["new_ids"]
    for mode in ("on", "off"):
        with tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET, pipeline=mode) as e:
            out = [e.prefill(prompt, temperature=0, max_tokens=len(want))]
            while (t := e.decode_step()) is not None:
                out.append(t)
            assert out == want, mode
    with pytest.raises(tessera.TesseraError) as e:
        tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET, pipeline="sometimes")
    assert "pipeline" in e.value.message

