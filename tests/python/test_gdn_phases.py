"""scripts/gpu/gdn_phases.py: one stamped chunked GDN call (the TESSERA_GDN_PHASES build's
PREFIX_prep.csv and PREFIX_pass.csv) digested, on synthetic stamps whose medians, windows and
chunk times are known by construction."""
import csv
import pathlib

from trace_helpers import run

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "gdn_phases.py"

PHASES = [100, 200, 300, 400, 500, 600, 700, 800]  # cycles of phases 1 … 8, every item alike


def write(prefix, items, chunks):
    """items: (sm, start ns, end ns); chunks: (head, chunk, ready, start, end, block start) in ns."""
    with open(f"{prefix}_prep.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["item", "sm", "gt_start", "gt_end"] + [f"c{k}" for k in range(9)])
        for i, (sm, t0, t1) in enumerate(items):
            clocks, c = [1000 * i], 1000 * i
            for p in PHASES:
                c += p
                clocks.append(c)
            w.writerow([i, sm, t0, t1] + clocks)
    with open(f"{prefix}_pass.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["head", "chunk", "ready", "start", "end", "block_start"])
        w.writerows(chunks)


def rows(out):
    """Table rows (first cell → the rest), headers and rules left out."""
    got = {}
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and not set(cells[0]) <= set("-:") and cells[0] not in ("items", "chunk"):
            got[cells[0]] = cells[1:]
    return got


def test_phases_by_window_and_the_pass_chunks(tmp_path):
    prefix = str(tmp_path / "p")
    base = 5_000_000  # the global timer's origin: subtracted
    items = [(0, base, base + 10_000), (0, base, base + 10_000), (1, base, base + 30_000),
             (1, base + 12_000, base + 20_000), (1, base + 15_000, base + 25_000), (1, base + 22_000, base + 28_000)]
    chunks = [(0, 0, base + 31_000, base + 32_000, base + 34_500, base + 30_500),
              (0, 1, base + 33_000, base + 34_600, base + 36_000, 0),
              (1, 0, base + 31_500, base + 32_500, base + 37_000, base + 30_000)]
    write(prefix, items, chunks)
    rc, out, err = run(SCRIPT, prefix, "T=1024")
    assert rc == 0, err
    assert out.startswith("## T=1024")
    assert "prep: 6 items from 0 to 30.0 µs" in out
    got = rows(out)
    phases = [str(p) for p in PHASES]
    # n, median µs, median cycles, then the phases' medians
    assert got["all"] == ["6", "10.00", "3600"] + phases
    assert got["first wave (< 1 µs)"] == ["3", "10.00", "3600"] + phases
    assert "started 1–10 µs" not in got  # (no item started then)
    assert got["started 10–20 µs"][:2] == ["2", "9.00"]
    assert got["started 20–30 µs"][:2] == ["1", "6.00"]
    assert got["SMs of 2 items"][:2] == ["2", "10.00"]
    assert "items an SM: 2 on 1 SMs, 4 on 1 SMs" in out
    assert "state pass: blocks start 30.0 µs, last chunk ends 37.0 µs; value head 0:" in out
    assert got["0"] == ["31.0", "32.0", "34.5", "2.50"]
    assert got["1"] == ["33.0", "34.6", "36.0", "1.40"]
    assert len([k for k in got if k.isdigit()]) == 2  # head 1's chunk is not in head 0's table


def test_the_pass_split_into_its_chunks_its_waits_on_the_prep_and_other_gaps(tmp_path):
    # Two value heads, two chunks, one sequence: item = chunk · 2 + head. ns from `base`.
    prefix = str(tmp_path / "split")
    base = 5_000_000
    items = [(0, base, base + 10_000), (0, base, base + 12_000), (1, base, base + 20_000), (1, base, base + 15_000)]
    chunks = [
        # head 0: c0 after a 6 µs gap, 5 of them on item 0 (ends at 10); c1 after 8, 7 on item 2 (ends at 20)
        (0, 0, base + 10_500, base + 11_000, base + 13_000, base + 5_000),
        (0, 1, base + 20_500, base + 21_000, base + 23_000, 0),
        # head 1: c0 after 7.5, 7 on item 1 (ends at 12); c1 after 0.5, item 3 done before c0 ended
        (1, 0, base + 12_000, base + 12_500, base + 15_000, base + 5_000),
        (1, 1, base + 15_200, base + 15_500, base + 17_500, 0),
    ]
    write(prefix, items, chunks)
    rc, out, err = run(SCRIPT, prefix)
    assert rc == 0, err
    # work 4.0 / 4.5, on the prep 12.0 / 7.0, other 2.0 / 1.0: medians 4.25, 9.50, 1.50
    assert ("state pass a value head (medians over 2 heads of sequence 0, from its block's start): its chunks "
            "4.25 µs, waiting on the prep 9.50, other gaps 1.50") in out


def test_the_pass_split_is_skipped_where_the_order_cannot_be_read(tmp_path):
    prefix = str(tmp_path / "odd")
    write(prefix, [(0, 0, 10), (0, 0, 10), (1, 0, 10)], [(0, 0, 1, 2, 3, 1), (0, 1, 4, 5, 6, 0), (1, 0, 1, 2, 3, 1)])
    rc, out, err = run(SCRIPT, prefix)
    assert rc == 0, err
    assert "not chunk-major over the stamped heads (skipped)" in out


def test_no_stamped_items_is_an_error(tmp_path):
    prefix = str(tmp_path / "empty")
    write(prefix, [], [])
    rc, out, err = run(SCRIPT, prefix)
    assert rc != 0
    assert "no stamped prep items" in err
