"""scripts/gpu/sass_digest.py: Nsight Compute's SASS source page digested per opcode, per phase
between barriers (with its stall reasons where the page has them) and per hottest instruction, on
synthetic pages whose sums are known by construction."""
import csv
import pathlib
import subprocess
import sys

from trace_helpers import run

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "sass_digest.py"

HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "# Samples", "Instructions Executed", "Thread Instructions Executed"]


def write_page(path, rows, preamble=True):
    """rows: (SASS text, samples, executed); ncu's page starts with a few lines before its header."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        if preamble:
            w.writerow(["Kernel Name", "k"])
            w.writerow([])
        w.writerow(HEADER)
        for i, (text, s, x) in enumerate(rows):
            w.writerow([hex(16 * i), text, f"{s:,}", 0, s, f"{x:,}", 32 * x])


# Two phases: a load phase closed by a barrier (40 samples, 10 executed), a math phase closed by
# EXIT (60 samples, 90 executed); 100 samples, 100 executed in all.
PAGE = [
    ("LDG.E.128 R4, desc[UR4][R2.64]", 10, 4),
    ("@P0 LDG.E.128 R8, desc[UR4][R2.64+0x10]", 20, 4),
    ("BAR.SYNC.DEFER_BLOCKING 0x0", 10, 2),
    ("HMMA.16816.F32.BF16 R12, R4, R8, R12", 45, 40),
    ("LOP3.LUT R5, R4, 0xf000f, R9, 0xea, !PT", 5, 40),
    ("EXIT", 10, 10),
]


def sections(out):
    """The digest's three tables as lists of cell lists (header and rule rows left out)."""
    tables, cur = [], None
    for line in out.splitlines():
        if line.startswith("|"):
            if cur is None:
                cur = []
                tables.append(cur)
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set(cells[0]) <= set("-:") and cells[0] not in ("opcode", "stall reason", "phase (lines)", "line"):
                cur.append(cells)
        else:
            cur = None
    return tables


def test_opcodes_phases_and_hottest(tmp_path):
    page = tmp_path / "source.csv"
    write_page(page, PAGE)
    rc, out, err = run(SCRIPT, page)
    assert rc == 0, err
    assert "6 instructions; 100 samples; 100 warp instructions executed" in out
    ops, phases, hottest = sections(out)
    by_op = {c[0]: c[1:] for c in ops}
    assert by_op["LDG"] == ["30.0", "8.0"]  # the predicated load counts as LDG
    assert by_op["HMMA"] == ["45.0", "40.0"]
    assert by_op["BAR"] == ["10.0", "2.0"]
    assert by_op["LOP3"] == ["5.0", "40.0"]
    assert [c[:4] for c in phases] == [["0–2", "40.0", "10.0", "3"], ["3–5", "60.0", "90.0", "3"]]
    assert hottest[0][:2] == ["3", "45.0"] and "HMMA" in hottest[0][2]


def test_stall_reasons_overall_and_per_phase(tmp_path):
    # PAGE with two reasons' columns (and a "(Not Issued)" twin, which must not count): the load
    # phase's 40 samples 30 long_sb + 10 barrier, the math phase's 60 samples 15 long_sb + 45 wait.
    reasons = [(10, 0, 0), (20, 0, 0), (0, 10, 0), (0, 0, 45), (5, 0, 0), (10, 0, 0)]  # PAGE's rows, in order
    page = tmp_path / "source.csv"
    with open(page, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER + ["stall_long_sb", "stall_barrier", "stall_wait", "stall_wait (Not Issued)"])
        for i, ((text, s, x), (lsb, bar, wait)) in enumerate(zip(PAGE, reasons)):
            w.writerow([hex(16 * i), text, s, 0, s, x, 32 * x, lsb, bar, wait, 999])
    rc, out, err = run(SCRIPT, page)
    assert rc == 0, err
    ops, overall, phases, hottest = sections(out)
    assert {c[0]: c[1] for c in overall} == {"long_sb": "45.0", "wait": "45.0", "barrier": "10.0"}
    assert phases[0][4] == "long_sb 75, barrier 25"
    assert phases[1][4] == "wait 75, long_sb 25"


def test_no_source_column_is_an_error(tmp_path):
    page = tmp_path / "bad.csv"
    page.write_text("Kernel Name,k\nAddress,Text\n0x0,EXIT\n")
    rc, out, err = run(SCRIPT, page)
    assert rc == 1
    assert "no 'Source' column" in err


def test_usage_without_arguments():
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert out.returncode == 2
    assert "sass_digest.py source.csv" in out.stderr
