"""scripts/gpu/prefill_profile.py: the busiest window of a GPU trace (the prefill) and its kernel
time per kernel name, on a synthetic trace whose sums are known by construction."""
import pathlib

from trace_helpers import run as run_script, table, write_csv

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "prefill_profile.py"


def run(path, *args):
    return run_script(SCRIPT, path, *args)


GEMM = "void tessera::cuda::fast::detail::(anonymous namespace)::gemm_wgmma_kernel<WTile<2, 256, 3>>(GemmArgs)"
MOE = "void tessera::cuda::fast::detail::(anonymous namespace)::moe_wgmma_kernel<MoeWTile<64, true, 4>>(int)"
NORM = "void tessera::cuda::ref::(anonymous namespace)::rms_norm_kernel(float*, float const*, long)"


def write_trace(path):
    """A warm-up window (one 50 us GEMM), 10 ms of host time, then the prefill: two chunks 500 us
    apart, each a 100 us GEMM, 300 us of MoE and 10 us of norm back to back; then 10 ms later one
    decode step (a 20 us GEMM)."""
    rows, t = [(0, 50_000, GEMM)], 10_050_000
    for _ in range(2):
        rows += [(t, 100_000, GEMM), (t + 100_000, 300_000, MOE), (t + 400_000, 10_000, NORM)]
        t += 410_000 + 500_000
    rows.append((t + 10_000_000, 20_000, GEMM))
    write_csv(path, rows, memcpy=True)


def test_the_prefill_window_and_its_sums(tmp_path):
    trace = tmp_path / "trace.csv"
    write_trace(trace)
    rc, out, err = run(trace, "--gap-us", "2000")
    assert rc == 0, err
    assert "the busiest of 3 windows: 6 kernels, 0.82 ms of kernel time in a span of 1.32 ms" in out
    rows = table(out)
    assert rows["moe_wgmma_kernel"] == ["2", "0.60", "300.0", "73.2%"]
    assert rows["gemm_wgmma_kernel"] == ["2", "0.20", "100.0", "24.4%"]
    assert rows["rms_norm_kernel"] == ["2", "0.02", "10.0", "2.4%"]


def test_a_short_gap_splits_the_chunks_and_top_folds_the_rest(tmp_path):
    trace = tmp_path / "trace.csv"
    write_trace(trace)
    rc, out, err = run(trace, "--gap-us", "100", "--top", "1")
    assert rc == 0, err
    assert "the busiest of 4 windows: 3 kernels, 0.41 ms" in out  # one chunk (the first of two equal ones)
    rows = table(out)
    assert rows["moe_wgmma_kernel"] == ["1", "0.30", "300.0", "73.2%"]
    assert rows["2 others"] == ["2", "0.11", "", "26.8%"]


def test_an_empty_trace_is_an_error(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("Start (ns),Duration (ns),Name\n")
    rc, out, err = run(trace)
    assert rc == 1 and "no kernels" in err
