"""Shared helpers for the Python tests: the tessera binary and paths."""
import os
import pathlib
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
SHARED = REPO.parent / "shared"


def tessera_bin():
    b = os.environ.get("TESSERA_BIN")
    if not b:
        pytest.fail("TESSERA_BIN is not set (run the tests through scripts/pytest.sh)")
    return b


def run_tessera(*args, check=True, **kw):
    """Runs `tessera ARGS`; returns the CompletedProcess (text mode)."""
    p = subprocess.run([tessera_bin(), *map(str, args)], capture_output=True, text=True, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"tessera {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
    return p
