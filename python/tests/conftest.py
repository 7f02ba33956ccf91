"""Shared fixtures for the tessera package's tests: the package imported from python/ by path,
the qwen3_tiny fixture model (tests/fixtures) and a variant with a real tokenizer and an EOS id.
Every test is skipped when TESSERA_LIB is unset (no built libtessera.so to test)."""
import json
import os
import pathlib
import sys

import pytest

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
FIXTURE = REPO / "tests" / "fixtures" / "qwen3_tiny"
QWEN3_TOKENIZER = REPO.parent / "shared" / "data" / "tokenizers" / "qwen3"
sys.path.insert(0, str(PYTHON_DIR))

BUDGET = 64 << 20  # bytes of KV cache: tests never size pools from the machine's free memory


def pytest_collection_modifyitems(config, items):
    if not os.environ.get("TESSERA_LIB"):
        skip = pytest.mark.skip(reason="TESSERA_LIB is not set (point it at a built libtessera.so)")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tessera():
    import tessera as t
    return t


@pytest.fixture(scope="session")
def ref():
    return json.loads((FIXTURE / "reference.json").read_text())


@pytest.fixture
def engine(tessera):
    with tessera.Engine(FIXTURE, device="cpu", memory_budget=BUDGET) as e:
        yield e


@pytest.fixture(scope="session")
def tokenizer_model(tmp_path_factory, ref):
    """qwen3_tiny + the Qwen3 tokenizer, with EOS = the fourth greedy token."""
    if not (QWEN3_TOKENIZER / "tokenizer.json").exists():
        pytest.skip(f"no {QWEN3_TOKENIZER}")
    d = tmp_path_factory.mktemp("qwen3_tiny_tok")
    for f in ("config.json", "model.safetensors"):
        (d / f).symlink_to(FIXTURE / f)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (d / f).symlink_to(QWEN3_TOKENIZER / f)
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": ref["greedy"]["new_ids"][3]}))
    return d


@pytest.fixture(scope="session")
def tok_engine(tessera, tokenizer_model):  # shared: loading the 11 MB tokenizer.json takes a while
    with tessera.Engine(tokenizer_model, device="cpu", memory_budget=BUDGET) as e:
        yield e
