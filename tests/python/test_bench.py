"""`tessera bench` on the CPU with the tiny fixtures: the table and the JSON agree, every row of
the --ctx × --batch grid is there with positive speeds, and the KV + state column is the cache the
run held at its peak — checked against sizes computed here from the fixture's config.json (f16 K
and V rows per attention layer in blocks of 16 tokens, one recurrent state per sequence)."""
import json
import math
import re

import pytest

from conftest import FIXTURES, run_tessera

ROW = re.compile(r"^\| (\d+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([^|]+) \| ([^|]+) \|$")
UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def parse_bytes(text):
    value, unit = text.split()
    return float(value) * UNITS[unit]


def bench(tmp_path, fixture, *extra):
    out = tmp_path / "bench.json"
    p = run_tessera("bench", FIXTURES / fixture, "--device", "cpu", "--gen", "3", "--repeat", "2",
                    "--json", out, *extra)
    rows = [ROW.match(line) for line in p.stdout.splitlines()]
    return [m for m in rows if m], json.loads(out.read_text())


@pytest.mark.parametrize("fixture", ["qwen3_tiny", "qwen35moe_tiny"])
def test_table_and_json_agree(tmp_path, fixture):
    rows, j = bench(tmp_path, fixture, "--ctx", "16,100", "--batch", "1,3", "--prefill-chunk", "512")
    assert [(int(m[1]), int(m[2])) for m in rows] == [(16, 1), (16, 3), (100, 1), (100, 3)]
    assert [(r["ctx"], r["batch"]) for r in j["rows"]] == [(16, 1), (16, 3), (100, 1), (100, 3)]
    assert j["gen"] == 3 and j["repeat"] == 2 and j["prefill_chunk"] == 512
    for m, r in zip(rows, j["rows"]):
        assert r["prefill_tok_s"] > 0 and r["decode_tok_s"] > 0 and r["ttft_s"] > 0
        assert float(m[3]) == pytest.approx(r["prefill_tok_s"], abs=0.06)
        assert float(m[5]) == pytest.approx(r["decode_tok_s"], abs=0.06)
        assert parse_bytes(m[6]) == pytest.approx(r["kv_state_bytes"], rel=0.01)
        assert 0 < r["kv_state_bytes"] <= j["kv_pool_bytes"] + j["state_pool_bytes"]


def test_cache_column_is_the_runs_peak(tmp_path):
    # qwen3_tiny: attention only. With every prompt in one prefill step all sequences run at once,
    # each holding its prompt and the 2 generated tokens fed back (the 3rd is never fed).
    c = json.loads((FIXTURES / "qwen3_tiny" / "config.json").read_text())
    block_bytes = 16 * c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * c["head_dim"] * 2
    _, j = bench(tmp_path, "qwen3_tiny", "--ctx", "16,100", "--batch", "1,3", "--prefill-chunk", "512")
    for r in j["rows"]:
        want = r["batch"] * math.ceil((r["ctx"] + 2) / 16) * block_bytes
        assert r["kv_state_bytes"] == want, r


def test_hybrid_cache_counts_a_state_slot_a_sequence(tmp_path):
    # qwen35moe_tiny: three sequences at once hold three state slots, one holds one.
    _, j = bench(tmp_path, "qwen35moe_tiny", "--ctx", "64", "--batch", "1,3", "--prefill-chunk", "512")
    one, three = j["rows"]
    assert three["kv_state_bytes"] == 3 * one["kv_state_bytes"]
    assert one["kv_state_bytes"] > j["state_pool_bytes"] / 3  # a slot plus its KV blocks


def test_bad_options_are_clear_errors(tmp_path):
    p = run_tessera("bench", FIXTURES / "qwen3_tiny", "--device", "cpu", "--ctx", "0", check=False)
    assert p.returncode != 0 and "--ctx" in p.stderr
    p = run_tessera("bench", FIXTURES / "qwen3_tiny", "--device", "cpu", "--repeat", "0", check=False)
    assert p.returncode != 0 and "--repeat" in p.stderr


def test_sampled_runs(tmp_path):
    # --temperature / --top-p / --top-k / --min-p make every request sample (seeded); the header
    # and the JSON say how, and both sampling modes run on the CPU.
    for where in ("host", "device"):
        rows, j = bench(tmp_path, "qwen35moe_tiny", "--ctx", "16", "--temperature", "0.8", "--top-p", "0.9",
                        "--top-k", "40", "--min-p", "0.01", "--sampling", where)
        assert len(rows) == 1 and j["rows"][0]["decode_tok_s"] > 0
        assert j["sampling"] == {"temperature": pytest.approx(0.8), "top_p": pytest.approx(0.9), "top_k": 40,
                                 "min_p": pytest.approx(0.01), "where": where}
    _, j = bench(tmp_path, "qwen3_tiny", "--ctx", "16")
    assert j["sampling"]["temperature"] == 0  # greedy unless asked
    p = run_tessera("bench", FIXTURES / "qwen3_tiny", "--device", "cpu", "--top-p", "0", check=False)
    assert p.returncode != 0 and "top_p" in p.stderr
    p = run_tessera("bench", FIXTURES / "qwen3_tiny", "--device", "cpu", "--temperature", "1", "--sampling", "gpu",
                    check=False)
    assert p.returncode != 0 and "sampling" in p.stderr
