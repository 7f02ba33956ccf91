"""Helpers for chat-template parity tests: run `tessera tokenize --render` and the references."""
import json
import os
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOKENIZERS = REPO.parent / "shared" / "data" / "tokenizers"


def tessera_bin():
    return os.environ.get("TESSERA_BIN", str(REPO / "build" / "tessera"))


def tessera_render(model, messages, tools=None, add_generation_prompt=False, kwargs=None, chat_template=None):
    """Returns (ok, text): the rendering, or the error output when tessera fails."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "messages.json").write_text(json.dumps(messages, ensure_ascii=False), encoding="utf-8")
        cmd = [tessera_bin(), "tokenize", "--model", str(model), "--messages", str(tmp / "messages.json"), "--render"]
        if tools is not None:
            (tmp / "tools.json").write_text(json.dumps(tools, ensure_ascii=False), encoding="utf-8")
            cmd += ["--tools", str(tmp / "tools.json")]
        if add_generation_prompt:
            cmd.append("--add-generation-prompt")
        if kwargs:
            cmd += ["--template-kwargs", json.dumps(kwargs)]
        if chat_template is not None:
            (tmp / "template.jinja").write_text(chat_template, encoding="utf-8")
            cmd += ["--chat-template", str(tmp / "template.jinja")]
        r = subprocess.run(cmd, capture_output=True, timeout=60)
        if r.returncode != 0:
            return False, r.stderr.decode("utf-8", "replace")
        return True, r.stdout.decode("utf-8")


def jinja_reference(template, **context):
    """Renders with transformers' own chat-template environment (the code apply_chat_template uses)."""
    from transformers.utils.chat_template_utils import _compile_jinja_template

    return _compile_jinja_template(template).render(**context)


def transformers_render(template, messages, tools=None, add_generation_prompt=False, special_tokens=None, kwargs=None):
    """apply_chat_template(tokenize=False) without a tokenizer: the same normalisation and rendering code."""
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

    context = {**(special_tokens or {}), **(kwargs or {})}
    rendered, _ = render_jinja_template(conversations=[_normalize_chat_messages(messages)], tools=tools,
                                        chat_template=template, add_generation_prompt=add_generation_prompt, **context)
    return rendered[0]


def render_both(tmp_path, template, messages, tools=None, add_generation_prompt=False, special_tokens=None, kwargs=None):
    """(reference, tessera) renderings; a failure on either side is returned as ('ERROR', message)."""
    import json

    special_tokens = special_tokens or {"bos_token": "<s>", "eos_token": "</s>"}
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "tokenizer_config.json").write_text(json.dumps(special_tokens), encoding="utf-8")
    try:
        want = transformers_render(template, messages, tools, add_generation_prompt, special_tokens, kwargs)
    except Exception as e:
        want = ("ERROR", f"{type(e).__name__}: {e}")
    ok, got = tessera_render(model, messages, tools, add_generation_prompt, kwargs, chat_template=template)
    return want, (got if ok else ("ERROR", got))
