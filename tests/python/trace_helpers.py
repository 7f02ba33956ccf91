"""Shared by the tests of scripts/gpu's trace digests (timeline.py, prefill_profile.py): write a
synthetic cuda_gpu_trace CSV, run a script on it, read its markdown table back."""
import csv
import subprocess
import sys


def write_csv(path, rows, memcpy=False):
    """rows: (start ns, duration ns, kernel name); memcpy adds a copy row the scripts must skip."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Start (ns)", "Duration (ns)", "Name"])
        if memcpy:
            w.writerow([0, 1000, "[CUDA memcpy Host-to-Device]"])
        for s, d, n in rows:
            w.writerow([s, d, n])


def run(script, path, *args):
    out = subprocess.run([sys.executable, str(script), str(path), *args], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def table(stdout):
    """The first column of each table row → its other cells (the header row left out)."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and not line.startswith("| kernel"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
    return rows
