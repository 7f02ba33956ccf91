"""scripts/gpu/gdn_pairs.py: a chunked GDN call's prep and state pass, row by row, on synthetic
kernel_trace.cpp CSVs whose starts and durations are known by construction."""
import pathlib

from trace_helpers import run as run_script, write_csv

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "gdn_pairs.py"

PREP = "void tessera::cuda::fast::detail::prep_rt::wy_prep_rt_kernel<true, true>(ChArgs)"
PASS = ("void tessera::cuda::fast::detail::f16x3::(anonymous namespace)::wy_state16_rt_kernel<1, true, 1>"
        "(ChArgs, RtMaps)")
CONV = "void tessera::cuda::fast::detail::(anonymous namespace)::conv1d_silu_kernel<4>(ConvArgs)"


def write_rows(path, rows_of_calls):
    """rows_of_calls: per bench row, its calls as (prep us, pass start us from the prep's, pass us);
    each call 1 ms after the last, a conv kernel between calls that the script must skip."""
    rows, t = [], 0
    for calls in rows_of_calls:
        for prep, start, dur in calls:
            rows.append((t, int(prep * 1000), PREP))
            rows.append((t + int(start * 1000), int(dur * 1000), PASS))
            rows.append((t + 900_000, 5_000, CONV))
            t += 1_000_000
    write_csv(path, rows, memcpy=True)


def test_medians_per_row_past_its_warm_up(tmp_path):
    csv_path = tmp_path / "t.csv"
    warm = [(500.0, 400.0, 900.0)] * 2  # the warm-up calls: left out of the medians
    row1 = warm + [(47.0, 33.0, 50.0), (48.0, 34.0, 51.0), (49.0, 35.0, 52.0), (50.0, 36.0, 53.0),
                   (51.0, 37.0, 54.0), (52.0, 38.0, 55.0)]
    row2 = warm + [(170.0, 170.0, 200.0)] * 6
    write_rows(csv_path, [row1, row2])
    rc, out, err = run_script(SCRIPT, csv_path, "sched T=1024")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "sched T=1024, row 1: 6 calls; prep 49.5 us; the pass from 35.5 to 88.0"
    assert lines[2] == "sched T=1024, row 2: 6 calls; prep 170.0 us; the pass from 170.0 to 370.0"
    assert lines[3].endswith("170.0/170.0/370.0")


def test_rows_of_another_length(tmp_path):
    csv_path = tmp_path / "t.csv"
    write_rows(csv_path, [[(10.0, 1.0, 20.0)] * 3 + [(30.0, 2.0, 40.0)]])
    rc, out, err = run_script(SCRIPT, csv_path, "x", "4")
    assert rc == 0, err
    assert out.splitlines()[0] == "x, row 1: 2 calls; prep 20.0 us; the pass from 1.5 to 31.5"


def test_a_trace_without_pairs_is_an_error(tmp_path):
    csv_path = tmp_path / "t.csv"
    write_csv(csv_path, [(0, 5_000, CONV), (10_000, 5_000, PASS)])
    rc, out, err = run_script(SCRIPT, csv_path, "x")
    assert rc == 1 and "no prep / state-pass pair" in err
