#!/usr/bin/env bash
# Runs the Python tests against a built `tessera` binary: scripts/pytest.sh PATH/TO/tessera [pytest args]
set -uo pipefail
cd "$(dirname "$0")/.."
export TESSERA_BIN="$(realpath "$1")"; shift
PY=${PYTHON:-python3}
$PY -m pytest -q -p no:cacheprovider tests/python "$@"
rc=$?
[ $rc -eq 5 ] && { echo "pytest: no tests collected"; exit 1; }
exit $rc
