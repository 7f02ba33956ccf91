#!/usr/bin/env bash
# Runs the Python tests against a built `tessera` binary: scripts/pytest.sh PATH/TO/tessera [pytest args]
# When TESSERA_LIB names a built libtessera.so (ctest's `pytest` entry sets it), the tessera
# package's own tests (python/tests) run too, in a pytest session of their own.
set -uo pipefail
cd "$(dirname "$0")/.."
export TESSERA_BIN="$(realpath "$1")"; shift
PY=${PYTHON:-python3}
$PY -m pytest -q -p no:cacheprovider tests/python "$@"
rc=$?
[ $rc -eq 5 ] && { echo "pytest: no tests collected"; rc=1; }
if [ -n "${TESSERA_LIB:-}" ]; then
  export TESSERA_LIB="$(realpath "$TESSERA_LIB")"
  $PY -m pytest -q -p no:cacheprovider python/tests
  prc=$?
  [ $prc -eq 5 ] && { echo "pytest: no tests collected in python/tests"; prc=1; }
  [ $rc -eq 0 ] && rc=$prc
fi
exit $rc
