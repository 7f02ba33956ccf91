"""Engine.generate: text in, text out, over a private per-request stream (so it disturbs neither
the single stream nor batched requests)."""
import codecs
import itertools

_ids = itertools.count(1)


def generated_tokens(engine, prompt_ids, **sampling):
    """Yields the generated token ids; the one that ended generation by EOS / a stop id is left
    out. The request is finished even if the caller stops early."""
    rid = f"__generate_{id(engine):x}_{next(_ids)}"
    token = engine.prefill_req(rid, prompt_ids, **sampling)
    try:
        while token is not None:
            nxt = engine.decode_step_req(rid)
            if nxt is None and engine.finish_reason(rid) == "stop":
                return  # `token` was EOS or a stop id
            yield token
            token = nxt
    finally:
        engine.finish_req(rid)


def _pieces(engine, tokens):
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for t in tokens:
        piece = dec.decode(engine.detokenize_bytes([t]))
        if piece:
            yield piece
    tail = dec.decode(b"", final=True)
    if tail:
        yield tail


def generate(engine, prompt, max_tokens=256, stream=False, add_special=True, **sampling):
    ids = engine.tokenize(prompt, add_special=add_special) if isinstance(prompt, str) else list(prompt)
    tokens = generated_tokens(engine, ids, max_tokens=max_tokens, **sampling)
    if stream:
        return _pieces(engine, tokens)
    return engine.detokenize(list(tokens))
