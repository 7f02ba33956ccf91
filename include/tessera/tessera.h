/* tessera C ABI (libtessera.so): load a model, generate token by token (one stream, per request
 * or batched), read raw logits, tokenize, and see where the memory goes. Plain C, no exception
 * ever crosses it. The Python package (python/tessera) is a ctypes layer over exactly this file.
 *
 * Conventions
 *  - Every call that can fail returns a tessera_status; TESSERA_STATUS_OK is 0. On failure,
 *    tessera_last_error() gives a one-line message with context (thread-local: it describes the
 *    last failing call made by this thread; a successful call sets it to "").
 *  - NULL pointers (except where a parameter says NULL is allowed) and bad lengths are
 *    TESSERA_STATUS_INVALID_ARGUMENT.
 *  - Structs that may grow (tessera_options, tessera_sampling, tessera_memory) start with
 *    struct_size: fill them with the matching *_default() (or set struct_size = sizeof) first.
 *    A caller built against an older, smaller struct gets defaults for the fields it lacks; a
 *    larger struct from a newer header is accepted only if the fields this library does not
 *    know are zero.
 *  - Thread safety: calls on one engine are serialized by a mutex inside the engine, so they may
 *    come from any thread; different engines are independent. tessera_engine_destroy must not
 *    race with other calls on the same engine.
 *  - Request ids are NUL-terminated strings of 1 to TESSERA_REQUEST_ID_MAX - 1 bytes. One
 *    namespace per engine is shared by the per-request and the batched calls; an id is in use
 *    from tessera_prefill_req / tessera_add_request until tessera_finish_req (or, for a batched
 *    request, until tessera_step has handed out its final event).
 */
#ifndef TESSERA_TESSERA_H
#define TESSERA_TESSERA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TESSERA_API __attribute__((visibility("default")))
#else
#define TESSERA_API
#endif

#define TESSERA_ABI_VERSION 1
#define TESSERA_REQUEST_ID_MAX 64 /* bytes, the terminating NUL included */

typedef enum tessera_status {
    TESSERA_STATUS_OK = 0,
    TESSERA_STATUS_INVALID_ARGUMENT = 1, /* bad argument: NULL, bad length, bad token, bad parameter */
    TESSERA_STATUS_NOT_FOUND = 2,        /* unknown request id, missing file, no logits yet */
    TESSERA_STATUS_IO = 3,               /* a file could not be read */
    TESSERA_STATUS_UNSUPPORTED = 4,      /* unknown architecture or format; model without tokenizer */
    TESSERA_STATUS_OUT_OF_MEMORY = 5,
    TESSERA_STATUS_BUSY = 6,             /* queue full, or the caches are held by other requests */
    TESSERA_STATUS_TOO_LARGE = 7,        /* prompt past the context; output buffer too small */
    TESSERA_STATUS_FINISHED = 8,         /* the stream / request has ended (EOS, stop id, max_tokens) */
    TESSERA_STATUS_INTERNAL = 9          /* a bug in tessera */
} tessera_status;

typedef enum tessera_finish_reason {
    TESSERA_FINISH_REASON_NONE = 0,      /* still generating */
    TESSERA_FINISH_REASON_STOP = 1,      /* EOS or a stop token id */
    TESSERA_FINISH_REASON_LENGTH = 2,    /* max_tokens, or the context is full */
    TESSERA_FINISH_REASON_CANCELLED = 3,
    TESSERA_FINISH_REASON_ERROR = 4      /* the forward pass failed; see tessera_last_error of the step */
} tessera_finish_reason;

typedef struct tessera_engine tessera_engine; /* opaque */

/* How the engine is set up. Zero / NULL means "derive it" (from the model, the memory budget
 * and the device), as in tessera's EngineOptions. */
typedef struct tessera_options {
    size_t struct_size;              /* sizeof(tessera_options) */
    const char* device;              /* "cpu" | "cuda" | "auto"; NULL = "auto" */
    int64_t memory_budget;           /* CPU: bytes for KV + state caches; 0 = from free memory */
    double gpu_memory_fraction;      /* GPU: share of device memory the process may use (0.90) */
    int64_t max_model_len;           /* 0 = the model's context (clamped to what the pool holds) */
    int64_t max_num_seqs;            /* sequences at once; 0 = as many as the budget allows */
    int64_t max_num_batched_tokens;  /* tokens per engine step (512) */
    int64_t max_queue;               /* waiting requests beyond which adding is BUSY (1024) */
    int64_t block_size;              /* tokens per KV block (16) */
    const char* kv_dtype;            /* "f16" | "f32"; NULL = "f16" */
    int32_t prefix_caching;          /* 1 = reuse cached prompt prefixes (default), 0 = off */
    int32_t memlog;                  /* 1 = print memory-log snapshots to stderr */
    const char* sampling;            /* where sampled requests draw: "auto" (the device on a GPU) |
                                        "host" | "device"; NULL = "auto" (docs/engine.md) */
    const char* pipeline;            /* "auto" (on where the backend queues work: a GPU) | "on" | "off":
                                        launch a greedy decode step before the step before it has
                                        handed out its tokens; NULL = "auto" (docs/engine.md) */
} tessera_options;

/* How one stream / request generates; mirrors the numeric fields of tessera's GenerationParams
 * (OpenAI / vLLM semantics). */
typedef struct tessera_sampling {
    size_t struct_size;            /* sizeof(tessera_sampling) */
    float temperature;             /* <= 0: greedy (argmax); default 1 */
    float top_p;                   /* nucleus mass; 1 = off */
    int32_t top_k;                 /* <= 0: off */
    float min_p;                   /* 0: off */
    uint64_t seed;                 /* the RNG stream; equal seeds give equal samples */
    float repetition_penalty;      /* over prompt + output; 1 = off */
    float presence_penalty;        /* over output, in [-2, 2]; 0 = off */
    float frequency_penalty;       /* over output, in [-2, 2]; 0 = off */
    int64_t max_tokens;            /* generated tokens at most; -1 = until the context is full */
    const int32_t* stop_token_ids; /* end generation (in addition to the model's EOS ids); may be NULL if n is 0 */
    int32_t n_stop_token_ids;
    int32_t ignore_eos;            /* 1 = do not stop at the model's EOS ids */
} tessera_sampling;

/* Memory in use, in bytes unless named otherwise. */
typedef struct tessera_memory {
    size_t struct_size;            /* sizeof(tessera_memory); only this many bytes are written */
    int64_t weights_bytes;
    int64_t kv_pool_bytes;         /* the paged KV block pool (attention layers) */
    int64_t state_pool_bytes;      /* recurrent-state slots (Gated DeltaNet layers) */
    int64_t activations_peak_bytes;/* the largest per-step activation use so far (process-wide) */
    int64_t host_rss_bytes;        /* resident set size of the process; 0 if unknown */
    int64_t kv_blocks_used;
    int64_t kv_blocks_total;
    int64_t state_slots_used;
    int64_t state_slots_total;
} tessera_memory;

/* One generated token (or the end) of a batched request, from tessera_step. */
typedef struct tessera_token_event {
    char request_id[TESSERA_REQUEST_ID_MAX]; /* NUL-terminated */
    int32_t token;                           /* -1 when a final event carries no token */
    int32_t finished;                        /* 1 on the request's last event */
    tessera_finish_reason finish_reason;     /* NONE unless finished */
} tessera_token_event;

/* ---- errors ------------------------------------------------------------------------------ */
TESSERA_API const char* tessera_last_error(void);                 /* never NULL */
/* The status of the same failing call (OK after a success): for the calls that return a pointer,
 * tessera_engine_create and tessera_get_logits. */
TESSERA_API tessera_status tessera_last_status(void);
TESSERA_API const char* tessera_status_name(tessera_status s);    /* "OK", "INVALID_ARGUMENT", ... */
TESSERA_API const char* tessera_finish_reason_name(tessera_finish_reason r); /* "", "stop", "length", ... */
TESSERA_API const char* tessera_version(void);                    /* "0.1.0" */

/* ---- engine ------------------------------------------------------------------------------ */
TESSERA_API void tessera_options_default(tessera_options* opts);
TESSERA_API void tessera_sampling_default(tessera_sampling* sampling);

/* Loads the model at path (GGUF file, HF / MLX checkpoint directory) and sizes the caches.
 * opts NULL = defaults. Returns NULL on failure (tessera_last_error says why). */
TESSERA_API tessera_engine* tessera_engine_create(const char* path, const tessera_options* opts);
TESSERA_API void tessera_engine_destroy(tessera_engine* engine); /* NULL is a no-op */

TESSERA_API int32_t tessera_vocab_size(const tessera_engine* engine); /* logits per row; -1 if engine is NULL */
TESSERA_API int32_t tessera_num_layers(const tessera_engine* engine); /* -1 if engine is NULL */
/* Caller sets out->struct_size (sizeof(tessera_memory)). */
TESSERA_API tessera_status tessera_memory_snapshot(tessera_engine* engine, tessera_memory* out);

/* ---- one stream ---------------------------------------------------------------------------
 * Starts the engine's single stream over with these n tokens (ending the previous stream) and
 * returns the first sampled token. Repeating a conversation's history each turn is cheap: the
 * prefix cache reuses what was computed before. sampling NULL = tessera_sampling_default. */
TESSERA_API tessera_status tessera_prefill(tessera_engine* engine, const int32_t* tokens, int32_t n,
                                           const tessera_sampling* sampling, int32_t* first_token);
/* Feeds the previously returned token and samples the next. FINISHED once the stream has ended
 * (the token that ended it — EOS, a stop id, or the max_tokens-th token — was returned by the
 * previous call); NOT_FOUND before any prefill. */
TESSERA_API tessera_status tessera_decode_step(tessera_engine* engine, int32_t* next_token);
/* Raw logits (before penalties and sampling, [n_vocab] floats) of the step that produced the
 * token returned by the last successful prefill / decode_step call of either form. Valid until
 * the next call on this engine; NULL (last_error set) if there are none, e.g. after a reset,
 * tessera_step or tessera_add_request. */
TESSERA_API const float* tessera_get_logits(tessera_engine* engine, int32_t* n_vocab);
/* Ends the single stream and frees its caches (per-request and batched requests go on). */
TESSERA_API tessera_status tessera_reset(tessera_engine* engine);

/* ---- per request: the same as the stream, for many streams at once, keyed by request id ---- */
/* INVALID_ARGUMENT if request_id is in use. */
TESSERA_API tessera_status tessera_prefill_req(tessera_engine* engine, const char* request_id, const int32_t* tokens,
                                               int32_t n, const tessera_sampling* sampling, int32_t* first_token);
/* NOT_FOUND for an unknown id; INVALID_ARGUMENT for a batched request's id; FINISHED as above. */
TESSERA_API tessera_status tessera_decode_step_req(tessera_engine* engine, const char* request_id,
                                                   int32_t* next_token);
/* Ends the request (cancelling it if it is still generating, batched ones included), drops
 * its undelivered events, frees its caches and its id. NOT_FOUND for an unknown id. */
TESSERA_API tessera_status tessera_finish_req(tessera_engine* engine, const char* request_id);

/* Why the stream (request_id NULL) or a request ended: NONE while it goes on (or, for a step-mode
 * stream, until its last token has been returned). E.g. STOP after the returned token was EOS or
 * a stop id, LENGTH after the max_tokens-th token. NOT_FOUND for an unknown id or no stream. */
TESSERA_API tessera_status tessera_get_finish_reason(tessera_engine* engine, const char* request_id,
                                                     tessera_finish_reason* reason);

/* ---- batched: continuous batching of whole requests ----------------------------------------
 * Queues a request that runs to completion under its sampling's max_tokens / stop ids / EOS,
 * batched with the others; its tokens come back from tessera_step. */
TESSERA_API tessera_status tessera_add_request(tessera_engine* engine, const char* request_id, const int32_t* tokens,
                                               int32_t n, const tessera_sampling* sampling);
/* Hands out up to cap events (oldest first) of batched requests into out[0 .. *n_out). When
 * fewer than cap are waiting, first runs engine steps until at least one event is ready or
 * nothing is left to run; so *n_out == 0 means every batched request has been handed out.
 * Events that do not fit stay for the next call. A request's last event has finished = 1. */
TESSERA_API tessera_status tessera_step(tessera_engine* engine, tessera_token_event* out, int32_t cap,
                                        int32_t* n_out);

/* ---- tokenizer (UNSUPPORTED when the model has none) -------------------------------------- */
/* Encodes UTF-8 text; special tokens written in the text become their ids; add_special != 0
 * adds BOS/EOS as the tokenizer's config says. *n_out = the number of tokens; if that is more
 * than cap, nothing useful is in out and the status is TOO_LARGE (out may be NULL when cap is 0,
 * to ask for the size). */
TESSERA_API tessera_status tessera_tokenize(tessera_engine* engine, const char* text, int add_special, int32_t* out,
                                            int32_t cap, int32_t* n_out);
/* Concatenated raw bytes of the tokens (special tokens included; not necessarily valid UTF-8
 * when the tokens end inside a character), NUL-terminated. *n_out = the text's length without
 * the NUL; if cap < *n_out + 1, the status is TOO_LARGE and nothing is written (out may be NULL
 * when cap is 0, to ask for the size). */
TESSERA_API tessera_status tessera_detokenize(tessera_engine* engine, const int32_t* tokens, int32_t n, char* out,
                                              size_t cap, size_t* n_out);

#ifdef __cplusplus
}
#endif

#endif /* TESSERA_TESSERA_H */
