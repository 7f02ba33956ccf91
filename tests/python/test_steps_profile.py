"""scripts/gpu/steps_profile.py: a decode step's kernel time per kernel name as the difference of
two traces of the same run with 32 decode steps more in the second, on synthetic traces whose
sums are known by construction."""
import pathlib

from trace_helpers import run as run_script, table, write_csv

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "steps_profile.py"

GEMV = "void tessera::cuda::fast::detail::(anonymous namespace)::gemv_dp4a_kernel<8>(GemvArgs)"
MID = "void tessera::cuda::fast::detail::(anonymous namespace)::mid_kernel<2, 3, 1>(int)"
NORM = "void tessera::cuda::ref::(anonymous namespace)::rms_norm_kernel(float*, float const*, long)"
PREFILL = "void tessera::cuda::fast::detail::(anonymous namespace)::moe_wgmma_kernel<MoeWTile<64, true, 4>>(int)"


def write_run(path, steps, prefill_launches=3):
    """A prefill (prefill_launches 400 us MoE tiles), then `steps` decode steps, each a 20 us GEMV,
    two 100 us mid kernels and a 5 us norm, 1 us apart, the steps 50 us apart."""
    rows, t = [], 0
    for _ in range(prefill_launches):
        rows.append((t, 400_000, PREFILL))
        t += 401_000
    for _ in range(steps):
        for dur, name in ((20_000, GEMV), (100_000, MID), (100_000, MID), (5_000, NORM)):
            rows.append((t, dur, name))
            t += dur + 1_000
        t += 50_000
    write_csv(path, rows, memcpy=True)


def test_the_steps_between_the_runs(tmp_path):
    short, long = tmp_path / "short.csv", tmp_path / "long.csv"
    write_run(short, 4)
    write_run(long, 36)
    rc, out, err = run_script(SCRIPT, short, long, "--steps", "32")
    assert rc == 0, err
    assert "32 decode steps between the traces: 225.0 us of kernel time a step (4 launches)" in out
    rows = table(out)
    assert rows["mid_kernel"] == ["2.0", "100.0", "200.0", "88.9%"]
    assert rows["gemv_dp4a_kernel"] == ["1.0", "20.0", "20.0", "8.9%"]
    assert rows["rms_norm_kernel"] == ["1.0", "5.0", "5.0", "2.2%"]
    assert "moe_wgmma_kernel" not in rows  # the prefill: the same in both runs


def test_top_folds_the_rest_and_fewer_launches_are_left_out(tmp_path):
    short, long = tmp_path / "short.csv", tmp_path / "long.csv"
    write_run(short, 4, prefill_launches=5)  # the long run's prefill two launches shorter
    write_run(long, 36)
    rc, out, err = run_script(SCRIPT, short, long, "--steps", "32", "--top", "1")
    assert rc == 0, err
    rows = table(out)
    assert rows["mid_kernel"] == ["2.0", "100.0", "200.0", "88.9%"]
    assert rows["2 others"] == ["2.0", "", "25.0", "11.1%"]
    assert "moe_wgmma_kernel" not in rows


def test_an_empty_long_trace_is_an_error(tmp_path):
    short, long = tmp_path / "short.csv", tmp_path / "long.csv"
    write_run(short, 4)
    long.write_text("Start (ns),Duration (ns),Name\n")
    rc, out, err = run_script(SCRIPT, short, long)
    assert rc == 1 and "no kernels" in err
