#!/usr/bin/env python3
"""`tessera serve --device cuda` answers the official openai client: models, chat and
completions, streaming and not, logprobs. Run on the GPU machine:
    scripts/gpu/openai_check.py BUILD/tessera MODEL.gguf
Prints what it saw; exit status 0 when every check passed."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "python"))
import openai  # noqa: E402
from server_util import ServeProcess  # noqa: E402


def main() -> int:
    binary, model = sys.argv[1], sys.argv[2]
    s = ServeProcess(binary, model, "--device", "cuda", "--max-model-len", 2048)
    ok = True
    try:
        c = openai.OpenAI(base_url=s.base_url + "/v1", api_key="none")
        name = c.models.list().data[0].id
        print("models:", name)
        msgs = [{"role": "user", "content": "Hello from the GPU"}]
        r = c.chat.completions.create(model=name, messages=msgs, max_tokens=16, temperature=0)
        print("chat:", repr(r.choices[0].message.content), r.usage)
        pieces = [ch.choices[0].delta.content or "" for ch in
                  c.chat.completions.create(model=name, messages=msgs, max_tokens=16, temperature=0, stream=True)
                  if ch.choices]
        same = "".join(pieces) == r.choices[0].message.content
        print("stream equals non-stream:", same)
        ok &= same and r.usage.completion_tokens == 16
        cr = c.completions.create(model=name, prompt="Once upon a time", max_tokens=8, temperature=0, logprobs=3)
        print("completion:", repr(cr.choices[0].text), cr.choices[0].logprobs.token_logprobs)
        ok &= len(cr.choices[0].logprobs.token_logprobs) == 8
        m = s.wait_idle()
        print("after:", {k: m[k] for k in ("tessera_requests_running", "tessera_kv_blocks_used")})
        ok &= m["tessera_kv_blocks_used"] == 0
    except Exception as e:  # noqa: BLE001
        print("FAILED:", e)
        ok = False
    finally:
        s.kill()
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
