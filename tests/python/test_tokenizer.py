"""Token ids from `tessera tokenize` against Hugging Face `tokenizers` (the reference) for the real
Qwen3 and DeepSeek-V3 tokenizer.json files, over a hand-picked corpus and seeded random strings;
plus GGUF-built tokenizers (written with the `gguf` package) and the llama.cpp split rules
(qwen35, llama3, gpt2) checked against tokenizer.json files that carry the same regex."""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "tokenizers"
BIN = os.environ.get("TESSERA_BIN", str(REPO / "build" / "tessera"))
MODELS = ["qwen3", "deepseek_v3"]

QWEN35_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
             r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
             r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CORPUS = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog. It's 5 o'clock; isn't it?",
    "DON'T STOP! He'll say I'M fine, you'D think. WE'VE, they'RE, it'S, I'LL",
    "don't won't can't shouldn't y'all 'tis ma'am",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <vector>\nint main() {\n\tstd::vector<int> v{1, 2, 3};\n\treturn v[0] == 1 ? 0 : -1;\n}\n",
    "    indented\n\n\n    code\t\ttabs  \n  trailing   ",
    "a\r\nb\r\n\r\nc \r\n d",
    "   ", "\n", "\n\n\n", " \n \n ", "\t", "x  ", "  x", "x\n  ",
    "1234567890 3.14159 -42 1,000,000 0.001 1e-10 2024-01-01 12:34:56",
    "99999999999999999999999",
    "我爱自然语言处理。今天天气很好！",
    "日本語のテキストです。カタカナとひらがな、漢字。",
    "안녕하세요, 세계! 한국어 문장입니다.",
    "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🏳️‍🌈 ❤️ 🇯🇵",
    "Cafe\u0301 nai\u0308ve re\u0301sume\u0301 A\u030a \u1100\u1161\u11a8",
    "e\u0301\u0323 o\u0302\u0301 \u0041\u030a\u0301",
    "مرحبا بالعالم! هذا نص عربي مع تشكيل: كَتَبَ",
    "नमस्ते दुनिया, यह हिंदी पाठ है। क्षत्रिय",
    "สวัสดีครับ ผมชื่อสมชาย ภาษาไทยไม่มีช่องว่าง",
    "Ελληνικά Русский текст Ünïcödé ǅemal ﬁnance ſtraße",
    "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
    "text <think>reasoning</think> answer <tool_call>{\"a\": 1}</tool_call>",
    "<｜begin▁of▁sentence｜>Hello<｜User｜>Hi<｜Assistant｜>",
    "<|endoftext|><|im_start|><|im_start|>",
    "$$$ ... !!! ??? --- *** ``` \"\"\" ''' ///",
    "x'S y'T z're", "'s", "'", "''", " ' s",
    "\u00a0non-breaking\u00a0space \u3000ideographic\u2003em",
    "zero\u200bwidth joiner\u200d and bom\ufeff",
    "mixed123abc456DEF 7x8y9z",
    "https://example.com/path?q=1&r=two#frag user@example.org",
    "\x1c\x1d\x1e\x1f control \x07 bell",
    # Letters, digits, marks and symbols of Unicode 15-16 (Oniguruma's version, newer than Python 3.11's).
    "\u1c89\u1c8a x\ua7cb\ua7cc \U000105c0\U000105c1 \U00011f04\U00011f05 \U00010d40\U00010d41 a\u0897b \u2427\u2428",
]

ALPHABET = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") + list("0123456789") * 2
            + list(" " * 12) + ["\n", "\t", "\r\n", "  ", "\n\n"] + list(".,;:!?'\"()[]{}<>-_=+*/\\|@#$%^&~`")
            + list("的一是不了人我在有他这中大来上个国") + list("あいうえおカキクケコ") + list("한국어")
            + ["😀", "👍🏽", "👨‍👩‍👧", "🎉", "é", "e\u0301", "ñ", "ü", "ß", "ø", "ſ", "\u0915\u094d\u0937", "ก\u0e34"]
            + ["'s", "'T", "'re", "'LL", "'ve", "'M", "'d", "<|im_start|>", "<think>", "<｜end▁of▁sentence｜>"]
            + ["\u00a0", "\u3000", "\u2028", "\u0301", "\u200d", "\ufe0f"])


def random_corpus(n=200, seed=1234):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(ALPHABET) for _ in range(k)))
    return out


def tessera_batch(model, texts, special, tmp_path):
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(texts), encoding="utf-8")
    args = [BIN, "tokenize", "--model", str(model), "--batch", str(batch)]
    if special:
        args.append("--special")
    r = subprocess.run(args, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert len(lines) == len(texts)
    return [[int(x) for x in line.split()] for line in lines]


def hf_config(name):
    return json.loads((DATA / name / "tokenizer_config.json").read_text())


def token_content(v):
    return v["content"] if isinstance(v, dict) else v


def hf_expected(tok, config, texts, special):
    """Reference: tokenizers ids; with special, BOS/EOS added as tokenizer_config.json says."""
    tok.encode_special_tokens = not special
    bos = eos = []
    if special:
        if config.get("add_bos_token") and config.get("bos_token"):
            bos = [tok.token_to_id(token_content(config["bos_token"]))]
        if config.get("add_eos_token") and config.get("eos_token"):
            eos = [tok.token_to_id(token_content(config["eos_token"]))]
    return [bos + tok.encode(t, add_special_tokens=special).ids + eos for t in texts]


def compare(got, want, texts):
    bad = [(t, g, w) for t, g, w in zip(texts, got, want) if g != w]
    assert not bad, f"{len(bad)} mismatches; first: text={bad[0][0]!r}\n tessera={bad[0][1]}\n hf     ={bad[0][2]}"


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("name", MODELS)
def test_corpus_matches_hf(name, special, tmp_path):
    tok = tokenizers.Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
    texts = CORPUS + random_corpus()
    want = hf_expected(tok, hf_config(name), texts, special)
    compare(tessera_batch(DATA / name, texts, special, tmp_path), want, texts)


def test_bos_from_config(tmp_path):
    """DeepSeek-V3 adds BOS (add_bos_token), Qwen3 adds nothing; only with --special."""
    ds = tokenizers.Tokenizer.from_file(str(DATA / "deepseek_v3" / "tokenizer.json"))
    bos = ds.token_to_id("<｜begin▁of▁sentence｜>")
    assert tessera_batch(DATA / "deepseek_v3", ["hi"], True, tmp_path)[0][0] == bos
    assert tessera_batch(DATA / "deepseek_v3", ["hi"], False, tmp_path)[0][0] != bos
    assert tessera_batch(DATA / "qwen3", [""], True, tmp_path) == [[]]


def test_text_and_file_modes(tmp_path):
    tok = tokenizers.Tokenizer.from_file(str(DATA / "qwen3" / "tokenizer.json"))
    text = "Hello <|im_start|> wörld\n"
    r = subprocess.run([BIN, "tokenize", "--model", str(DATA / "qwen3"), "--text", text], capture_output=True, check=True)
    tok.encode_special_tokens = True
    assert [int(x) for x in r.stdout.split()] == tok.encode(text, add_special_tokens=False).ids
    f = tmp_path / "in.txt"
    f.write_bytes(text.encode())
    r = subprocess.run([BIN, "tokenize", "--model", str(DATA / "qwen3" / "tokenizer.json"), "--file", str(f), "--special"],
                       capture_output=True, check=True)
    tok.encode_special_tokens = False
    assert [int(x) for x in r.stdout.split()] == tok.encode(text).ids


def test_invalid_utf8_does_not_crash(tmp_path):
    f = tmp_path / "bad.bin"
    data = b"ok \xff\xfe bad \xc3( \xe2\x82 \xf0\x9f\x98 end\x80"
    f.write_bytes(data)
    for name in MODELS:
        r = subprocess.run([BIN, "tokenize", "--model", str(DATA / name), "--file", str(f)], capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        ids = [int(x) for x in r.stdout.split()]
        # Round trip through the reference vocabulary: the ids' byte-level pieces are the input bytes.
        tok = tokenizers.Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
        byte_of = {c: b for b, c in bytes_to_unicode().items()}
        out = b"".join(bytes(byte_of[c] for c in tok.id_to_token(i)) for i in ids)
        assert out == data


def test_long_inputs_are_fast(tmp_path):
    texts = ["a" * 100_000, " " * 100_000, "1" * 50_000, "!" * 100_000, "é" * 50_000, "\n" * 50_000 + "x"]
    tok = tokenizers.Tokenizer.from_file(str(DATA / "qwen3" / "tokenizer.json"))
    want = hf_expected(tok, hf_config("qwen3"), texts, False)
    compare(tessera_batch(DATA / "qwen3", texts, False, tmp_path), want, texts)


def test_bad_model_path_is_a_clear_error(tmp_path):
    r = subprocess.run([BIN, "tokenize", "--model", str(tmp_path), "--text", "x"], capture_output=True)
    assert r.returncode != 0
    assert "no tokenizer.json and not a .gguf file" in r.stderr.decode()
    bad = tmp_path / "t" / "tokenizer.json"
    bad.parent.mkdir()
    bad.write_text('{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}')  # truncated
    r = subprocess.run([BIN, "tokenize", "--model", str(bad.parent), "--text", "x"], capture_output=True)
    assert r.returncode != 0 and "tokenizer.json" in r.stderr.decode()


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


# ---- other split rules: the Qwen3 vocabulary with another pre-tokenizer regex -------------

def with_split(name, regex, out_dir, nfc=True):
    j = json.loads((DATA / name / "tokenizer.json").read_text(encoding="utf-8"))
    if regex is None:  # GPT-2: ByteLevel with its built-in regex
        j["pre_tokenizer"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    else:
        j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": regex}
    if not nfc:
        j["normalizer"] = None
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    (out_dir / "tokenizer_config.json").write_text((DATA / name / "tokenizer_config.json").read_text(encoding="utf-8"))
    return out_dir


SPLIT_RULES = {"qwen35": (QWEN35_RE, True), "llama3": (LLAMA3_RE, False), "gpt2": (None, False)}


@pytest.mark.parametrize("rule", list(SPLIT_RULES))
def test_split_rules_from_json(rule, tmp_path):
    regex, nfc = SPLIT_RULES[rule]
    d = with_split("qwen3", regex, tmp_path / rule, nfc)
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    texts = CORPUS + random_corpus(seed=99)
    compare(tessera_batch(d, texts, False, tmp_path), hf_expected(tok, hf_config("qwen3"), texts, False), texts)


def test_qwen35_rule_differs_from_qwen2_on_marks():
    """The corpus really exercises the \\p{M} difference (else the tests above prove little)."""
    pre = tokenizers.pre_tokenizers
    q2 = pre.Split(tokenizers.Regex(QWEN35_RE.replace(r"[\p{L}\p{M}]+", r"\p{L}+").replace(r"\p{M}", "")),
                   behavior="isolated")
    q35 = pre.Split(tokenizers.Regex(QWEN35_RE), behavior="isolated")
    differ = [t for t in CORPUS + random_corpus(seed=99) if q2.pre_tokenize_str(t) != q35.pre_tokenize_str(t)]
    assert len(differ) >= 5


# ---- GGUF ----------------------------------------------------------------------------

def write_gguf(name, pre, path, regex_json_dir=None):
    gguf = pytest.importorskip("gguf")
    src = regex_json_dir or (DATA / name)
    j = json.loads((src / "tokenizer.json").read_text(encoding="utf-8"))
    cfg = json.loads((DATA / name / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = dict(j["model"]["vocab"])
    added = {a["id"]: a for a in j["added_tokens"]}
    n = max(list(vocab.values()) + list(added)) + 1
    tokens = [f"[PAD{i}]" for i in range(n)]
    types = [gguf.TokenType.UNUSED] * n
    for t, i in vocab.items():
        tokens[i] = t
        types[i] = gguf.TokenType.NORMAL
    for i, a in added.items():
        tokens[i] = a["content"]
        types[i] = gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED
    merges = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t: i for t, i in vocab.items()} | {a["content"]: i for i, a in added.items()}
    if cfg.get("bos_token"):
        w.add_bos_token_id(ids[token_content(cfg["bos_token"])])
    w.add_eos_token_id(ids[token_content(cfg["eos_token"])])
    w.add_add_bos_token(bool(cfg.get("add_bos_token")))
    w.add_add_eos_token(bool(cfg.get("add_eos_token")))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.parametrize("special", [False, True])
@pytest.mark.parametrize("name,pre", [("qwen3", "qwen2"), ("deepseek_v3", "deepseek-v3")])
def test_gguf_matches_hf(name, pre, special, tmp_path):
    (tmp_path / "model").mkdir()
    g = write_gguf(name, pre, tmp_path / "model" / f"{name}.gguf")
    tok = tokenizers.Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
    texts = CORPUS + random_corpus(seed=7)
    want = hf_expected(tok, hf_config(name), texts, special)
    compare(tessera_batch(g, texts, special, tmp_path), want, texts)
    compare(tessera_batch(g.parent, texts[:20], special, tmp_path), want[:20], texts[:20])  # the folder holding it


def test_gguf_qwen35_rule(tmp_path):
    d = with_split("qwen3", QWEN35_RE, tmp_path / "q35", True)
    g = write_gguf("qwen3", "qwen35", tmp_path / "q35.gguf", regex_json_dir=d)
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    texts = CORPUS + random_corpus(seed=35)
    compare(tessera_batch(g, texts, False, tmp_path), hf_expected(tok, hf_config("qwen3"), texts, False), texts)


def llama3_style_dir(out_dir):
    """Qwen3's vocabulary dressed as a Llama-3 tokenizer: llama3 split rule, ignore_merges, and a
    TemplateProcessing post-processor that adds BOS; the config has no add_bos_token."""
    j = json.loads((DATA / "qwen3" / "tokenizer.json").read_text(encoding="utf-8"))
    j["normalizer"] = None
    j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {"Regex": LLAMA3_RE}
    j["model"]["ignore_merges"] = True
    bos = "<|endoftext|>"
    j["post_processor"] = {
        "type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {bos: {"id": bos, "ids": [151643], "tokens": [bos]}}}]}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    (out_dir / "tokenizer_config.json").write_text(json.dumps({"bos_token": bos, "eos_token": "<|im_end|>"}))
    return out_dir


@pytest.mark.parametrize("special", [False, True])
def test_llama3_style_template_and_gguf(special, tmp_path):
    d = llama3_style_dir(tmp_path / "l3")
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    tok.encode_special_tokens = not special
    texts = CORPUS + random_corpus(seed=3)
    want = [tok.encode(t, add_special_tokens=special).ids for t in texts]
    compare(tessera_batch(d, texts, special, tmp_path), want, texts)
    g = write_gguf("qwen3", "llama-bpe", tmp_path / "l3.gguf", regex_json_dir=d)  # add_bos_token false here
    want_gguf = [w[1:] if special and w[:1] == [151643] else w for w in want]
    compare(tessera_batch(g, texts, special, tmp_path), want_gguf, texts)


def test_gguf_unknown_pre_warns_and_falls_back(tmp_path):
    """As llama.cpp does: an unknown tokenizer.ggml.pre uses the 'default' rule, with a warning."""
    g = write_gguf("qwen3", "no-such-rule", tmp_path / "x.gguf")
    r = subprocess.run([BIN, "tokenize", "--model", str(g), "--text", "hello world"], capture_output=True)
    assert r.returncode == 0 and "no-such-rule" in r.stderr.decode()
    tok = tokenizers.Tokenizer.from_file(str(DATA / "qwen3" / "tokenizer.json"))
    assert [int(x) for x in r.stdout.split()] == tok.encode("hello world").ids


@pytest.mark.parametrize("pre", ["Whitespace", "WhitespaceSplit", "Punctuation", "Digits"])
def test_other_hf_pre_tokenizers(pre, tmp_path):
    j = json.loads((DATA / "qwen3" / "tokenizer.json").read_text(encoding="utf-8"))
    j["normalizer"] = None
    step = {"type": pre}
    if pre == "Punctuation":
        step["behavior"] = "Isolated"
    if pre == "Digits":
        step["individual_digits"] = False
    j["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        step, {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
    d = tmp_path / pre
    d.mkdir()
    (d / "tokenizer.json").write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    tok = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    texts = CORPUS[:30] + random_corpus(n=50, seed=11)
    compare(tessera_batch(d, texts, False, tmp_path), hf_expected(tok, {}, texts, False), texts)


def test_nfc_matches_hf_on_combining_marks(tmp_path):
    """NFC against tokenizers' own NFC (Qwen3's normalizer) on strings dense in combining marks of
    every class, composable pairs and Hangul jamo."""
    import unicodedata
    marks = [chr(c) for c in range(0x300, 0x20000) if not 0xD800 <= c <= 0xDFFF and unicodedata.combining(chr(c))]
    bases = list("aeiouAEIOUnNcCsSzZ") + ["\u0915", "\u0b47", "\u1100", "\u1161", "\u11a8", "\uac00", "\u3099",
                                         "\u304b", "\u0627", "\u05d0", "\U00011935", "\U00011930", " ", "x"]
    rng = random.Random(2024)
    texts = ["".join(rng.choice(marks) if rng.random() < 0.5 else rng.choice(bases) for _ in range(rng.randint(1, 12)))
             for _ in range(400)]
    tok = tokenizers.Tokenizer.from_file(str(DATA / "qwen3" / "tokenizer.json"))
    compare(tessera_batch(DATA / "qwen3", texts, False, tmp_path), hf_expected(tok, {}, texts, False), texts)
