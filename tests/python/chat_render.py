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
