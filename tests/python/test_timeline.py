"""scripts/gpu/timeline.py: a decode step's wall time charged per kernel from a GPU trace — each
kernel from its predecessor's end to its own end, overlap with that predecessor excluded — on a
synthetic trace whose charges are known by construction."""
import pathlib

from trace_helpers import run as run_script, table, write_csv

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "timeline.py"


def run(path, *args):
    return run_script(SCRIPT, path, *args)


GEMV = "void tessera::cuda::fast::detail::(anonymous namespace)::gemv_dp4a_kernel<1, false>(float*, long, int)"
ROUTE = "void tessera::cuda::fast::detail::(anonymous namespace)::route_kernel<8>(float const*, long)"


def write_trace(path, steps, host_gap_ns=100_000):
    """Each step: a GEMV of 10 us, then a route kernel started 4 us before the GEMV ends (PDL) and
    ending 3 us after it, then a GEMV starting 1 us after that (a launch gap). Returns the steps'
    spans in ns."""
    rows, t = [], 1_000_000
    for _ in range(steps):
        rows.append((t, 10_000, GEMV))             # [t, t+10]
        rows.append((t + 6_000, 7_000, ROUTE))     # [t+6, t+13]: charge 3
        rows.append((t + 14_000, 5_000, GEMV))     # [t+14, t+19]: charge 6 (1 gap + 5)
        t += 19_000 + host_gap_ns
    write_csv(path, rows)


def test_charges_sum_to_the_step(tmp_path):
    trace = tmp_path / "trace.csv"
    write_trace(trace, steps=10)
    rc, out, err = run(trace, "--steps", "8", "--gap-us", "30")
    assert rc == 0, err
    assert "8 decode steps of 3 kernels: 19.0 us a step" in out
    rows = table(out)
    # gemv: 2 a step, mean time 7.5 us, charges 10 (first: from the step's start) and 6.
    assert rows["gemv_dp4a_kernel"][:4] == ["2", "7.50", "8.00", "16.0"]
    assert rows["route_kernel"][:4] == ["1", "7.00", "3.00", "3.0"]
    assert float(rows["gemv_dp4a_kernel"][3]) + float(rows["route_kernel"][3]) == 19.0
    # start lags: the first GEMV 0 (the step's start), the second 1 (mean 0.5); the route -4 (PDL).
    assert rows["gemv_dp4a_kernel"][5] == "0.50"
    assert rows["route_kernel"][5] == "-4.00"


def test_sequence_lists_positions_in_launch_order(tmp_path):
    trace = tmp_path / "trace.csv"
    write_trace(trace, steps=4)
    seq = tmp_path / "seq.md"
    rc, _, err = run(trace, "--steps", "3", "--sequence", str(seq))
    assert rc == 0, err
    lines = [ln for ln in seq.read_text().splitlines() if ln.startswith("| ") and ln[2].isdigit()]
    cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
    assert [c[1] for c in cells] == ["gemv_dp4a_kernel", "route_kernel", "gemv_dp4a_kernel"]
    assert cells[0][2:] == ["10.00", "10.00", "0.00"]
    assert cells[1][2:] == ["7.00", "3.00", "-4.00"]
    assert cells[2][2:] == ["5.00", "6.00", "1.00"]


def test_no_steps_is_an_error(tmp_path):
    trace = tmp_path / "empty.csv"
    trace.write_text('"Start (ns)","Duration (ns)","Name"\n')
    rc, _, err = run(trace)
    assert rc == 1
    assert "no decode steps" in err
