"""Engine: a model loaded by libtessera.so, with the C ABI's calls as methods (one stream,
per request, batched, logits, tokenizer, memory). Calls on one Engine are serialized inside
the library, so an Engine may be shared between threads."""
import array
import collections
import ctypes

from . import _lib
from .errors import FINISH_REASONS, Status, TesseraError, check

TokenEvent = collections.namedtuple("TokenEvent", "request_id token finished finish_reason")
TokenEvent.__doc__ = """One event of a batched request: token is -1 when a final event carries
none; finish_reason is None, "stop", "length", "cancelled" or "error"."""

_OPTION_NAMES = {name for name, _ in _lib.Options._fields_} - {"struct_size"}
_SAMPLING_NAMES = {name for name, _ in _lib.Sampling._fields_} - {"struct_size", "stop_token_ids", "n_stop_token_ids"}


def _tokens(tokens):
    ids = list(tokens)
    return (ctypes.c_int32 * max(len(ids), 1))(*ids), len(ids)


def _c_string(value, what):
    """UTF-8 bytes for a NUL-terminated C string parameter."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if "\0" in value:
        raise ValueError(f"{what} contains a NUL character")
    return value.encode("utf-8")


def _request_id(request_id):
    return _c_string(request_id, "request_id")


class _SamplingArg:
    """A tessera_sampling from keyword arguments; keeps the stop-id array alive with it."""

    def __init__(self, lib, kw):
        self.struct = _lib.Sampling()
        lib.tessera_sampling_default(ctypes.byref(self.struct))
        kw = dict(kw)
        stop = list(kw.pop("stop_token_ids", None) or [])
        for name, value in kw.items():
            if name not in _SAMPLING_NAMES:
                raise TypeError(f"unknown sampling parameter {name!r} (known: {', '.join(sorted(_SAMPLING_NAMES))}, "
                                "stop_token_ids)")
            if value is not None:
                setattr(self.struct, name, int(value) if name == "ignore_eos" else value)
        self.stop = (ctypes.c_int32 * max(len(stop), 1))(*stop)
        self.struct.stop_token_ids = ctypes.cast(self.stop, ctypes.POINTER(ctypes.c_int32))
        self.struct.n_stop_token_ids = len(stop)

    def ref(self):
        return ctypes.byref(self.struct)


class Engine:
    """Engine(path, **options): loads the model at path (GGUF file, HF / MLX checkpoint folder).

    options are tessera_options' fields: device ("cpu" | "cuda" | "auto"), memory_budget,
    gpu_memory_fraction, max_model_len, max_num_seqs, max_num_batched_tokens, max_queue,
    block_size, kv_dtype ("f16" | "f32"), prefix_caching, memlog, sampling ("auto" | "host" |
    "device": where sampled requests draw), pipeline ("auto" | "on" | "off": greedy decode steps
    launched before the step before them has its tokens; auto = on a GPU). Use it as a context manager
    or call close(); sampling keywords of the generating calls are tessera_sampling's fields:
    temperature, top_p, top_k, min_p, seed, repetition_penalty, presence_penalty,
    frequency_penalty, max_tokens (-1 = until the context is full), stop_token_ids, ignore_eos.
    """

    def __init__(self, path, **options):
        self._lib = _lib.lib()
        self._h = None
        opts = _lib.Options()
        self._lib.tessera_options_default(ctypes.byref(opts))
        keep = []  # encoded strings must outlive the call
        for name, value in options.items():
            if name not in _OPTION_NAMES:
                raise TypeError(f"unknown engine option {name!r} (known: {', '.join(sorted(_OPTION_NAMES))})")
            if isinstance(value, str):
                value = value.encode("utf-8")
                keep.append(value)
            elif isinstance(value, bool):
                value = int(value)
            setattr(opts, name, value)
        h = self._lib.tessera_engine_create(str(path).encode("utf-8"), ctypes.byref(opts))
        if not h:
            self._raise_last()
        self._h = ctypes.c_void_p(h)

    def _raise_last(self):
        # For the calls that return a pointer: the failing call's status and message.
        raise TesseraError(self._lib.tessera_last_status(), self._lib.tessera_last_error().decode("utf-8", "replace"))

    # ---- lifecycle ----
    def close(self):
        """Frees the model and caches; idempotent."""
        if self._h is not None:
            self._lib.tessera_engine_destroy(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    @property
    def handle(self):
        if self._h is None:
            raise TesseraError(Status.INVALID_ARGUMENT, "the engine is closed")
        return self._h

    def _check(self, status):
        check(self._lib, status)

    # ---- model facts ----
    @property
    def vocab_size(self):
        return int(self._lib.tessera_vocab_size(self.handle))

    @property
    def num_layers(self):
        return int(self._lib.tessera_num_layers(self.handle))

    def memory(self):
        """Memory in use: a dict of tessera_memory's fields (bytes, blocks, slots)."""
        m = _lib.Memory()
        m.struct_size = ctypes.sizeof(m)
        self._check(self._lib.tessera_memory_snapshot(self.handle, ctypes.byref(m)))
        return {name: int(getattr(m, name)) for name, _ in _lib.Memory._fields_ if name != "struct_size"}

    # ---- tokenizer ----
    def tokenize(self, text, add_special=True):
        """Token ids of text (special tokens written in it become their ids)."""
        data = _c_string(text, "text")
        n = ctypes.c_int32(0)
        cap = len(data) + 8
        while True:
            buf = (ctypes.c_int32 * cap)()
            st = self._lib.tessera_tokenize(self.handle, data, int(bool(add_special)), buf, cap, ctypes.byref(n))
            if st == Status.TOO_LARGE and n.value > cap:
                cap = n.value
                continue
            self._check(st)
            return list(buf[:n.value])

    def detokenize_bytes(self, tokens):
        """Raw bytes of the tokens (special tokens included; may end inside a UTF-8 character)."""
        ids, n = _tokens(tokens)
        size = ctypes.c_size_t(0)
        st = self._lib.tessera_detokenize(self.handle, ids, n, None, 0, ctypes.byref(size))
        if st != Status.TOO_LARGE:
            self._check(st)
        buf = ctypes.create_string_buffer(size.value + 1)
        self._check(self._lib.tessera_detokenize(self.handle, ids, n, buf, size.value + 1, ctypes.byref(size)))
        return buf.raw[:size.value]

    def detokenize(self, tokens):
        """Text of the tokens; bytes that are not valid UTF-8 become U+FFFD."""
        return self.detokenize_bytes(tokens).decode("utf-8", "replace")

    # ---- one stream ----
    def _token_call(self, fn, *args):
        out = ctypes.c_int32(-1)
        st = fn(*args, ctypes.byref(out))
        if st == Status.FINISHED:
            return None
        self._check(st)
        return int(out.value)

    def prefill(self, tokens, **sampling):
        """Starts the single stream over with these tokens; returns the first token (None if
        nothing is generated, e.g. max_tokens=0)."""
        ids, n = _tokens(tokens)
        s = _SamplingArg(self._lib, sampling)
        return self._token_call(self._lib.tessera_prefill, self.handle, ids, n, s.ref())

    def decode_step(self):
        """Feeds the last token, returns the next; None once the stream has finished."""
        return self._token_call(self._lib.tessera_decode_step, self.handle)

    def logits(self):
        """Raw logits (array.array of float32) behind the last token prefill / decode_step returned."""
        n = ctypes.c_int32(0)
        p = self._lib.tessera_get_logits(self.handle, ctypes.byref(n))
        if not p:
            self._raise_last()
        out = array.array("f")
        out.frombytes(ctypes.string_at(p, n.value * 4))
        return out

    def reset(self):
        """Ends the single stream."""
        self._check(self._lib.tessera_reset(self.handle))

    def finish_reason(self, request_id=None):
        """Why the stream (request_id None) or a request ended: None while it goes on, else
        "stop", "length", "cancelled" or "error"."""
        r = ctypes.c_int(0)
        rid = None if request_id is None else _request_id(request_id)
        self._check(self._lib.tessera_get_finish_reason(self.handle, rid, ctypes.byref(r)))
        return FINISH_REASONS.get(r.value, "error")

    # ---- per request ----
    def prefill_req(self, request_id, tokens, **sampling):
        ids, n = _tokens(tokens)
        s = _SamplingArg(self._lib, sampling)
        return self._token_call(self._lib.tessera_prefill_req, self.handle, _request_id(request_id), ids, n, s.ref())

    def decode_step_req(self, request_id):
        return self._token_call(self._lib.tessera_decode_step_req, self.handle, _request_id(request_id))

    def finish_req(self, request_id):
        self._check(self._lib.tessera_finish_req(self.handle, _request_id(request_id)))

    # ---- batched ----
    def add_request(self, request_id, tokens, **sampling):
        """Queues a request that runs to completion; its tokens come from step()."""
        ids, n = _tokens(tokens)
        s = _SamplingArg(self._lib, sampling)
        self._check(self._lib.tessera_add_request(self.handle, _request_id(request_id), ids, n, s.ref()))

    def step(self, cap=256):
        """Up to cap TokenEvents of batched requests; [] once every one has been handed out."""
        buf = (_lib.TokenEvent * cap)()
        n = ctypes.c_int32(0)
        self._check(self._lib.tessera_step(self.handle, buf, cap, ctypes.byref(n)))
        return [TokenEvent(e.request_id.decode("utf-8", "replace"), int(e.token), bool(e.finished),
                           FINISH_REASONS.get(e.finish_reason, "error")) for e in buf[:n.value]]

    # ---- high level ----
    def generate(self, prompt, max_tokens=256, stream=False, add_special=True, **sampling):
        """Text generated from prompt (a str, tokenized here, or a list of token ids). Sampling
        keywords as above (temperature 1 by default; 0 = greedy). The token that ended the
        generation (EOS or a stop id) is not part of the text. stream=True returns an iterator
        of text pieces instead."""
        from .generate import generate
        return generate(self, prompt, max_tokens=max_tokens, stream=stream, add_special=add_special, **sampling)
