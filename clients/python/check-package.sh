#!/usr/bin/env bash
# Proves the Python client's packages are whole: the wheel, and the sdist, each installed alone
# (with its dependencies, from the index or pip's cache) into a fresh virtualenv in a temporary
# directory, import `informerd` and `informerd.aio` from there, with the generated protobuf and
# gRPC modules (informerd/v1) and the py.typed marker inside. run-tests.sh runs it on what it
# built with `python -m build`; any failure prints what failed and fails the run.
#
#   clients/python/check-package.sh PIP_PYTHON DIST_DIR
#
# PIP_PYTHON is an interpreter with pip (the test virtualenv's); DIST_DIR holds one
# informerd-*.whl and one informerd-*.tar.gz.
#
# Decision: the fresh virtualenvs are made without pip (`venv --without-pip`) and the test
# virtualenv's pip installs into them (`pip --python`): ensurepip takes longer than the
# install itself, and what is checked is the environment the package lands in, not its pip.
# The two checks run side by side.
set -euo pipefail

pip_python="$1"
dist="$2"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

wheel=("$dist"/informerd-*.whl)
sdist=("$dist"/informerd-*.tar.gz)
for f in "${wheel[0]}" "${sdist[0]}"; do
  if [ ! -f "$f" ]; then
    echo "check-package.sh: no $(basename "$f") in $dist (python -m build makes both)" >&2
    exit 1
  fi
done

# What must hold in the fresh virtualenv; run from an empty directory, so that nothing is
# imported from the source tree.
cat >"$work/check.py" <<'PY'
import importlib
import importlib.metadata
import pathlib
import sys

prefix = pathlib.Path(sys.prefix).resolve()
for name in ["informerd", "informerd.aio", "informerd.keys", "informerd.v1.cache_pb2", "informerd.v1.cache_pb2_grpc"]:
    module = importlib.import_module(name)
    where = pathlib.Path(module.__file__).resolve()
    assert prefix in where.parents, f"{name} imported from {where}, not from the virtualenv {prefix}"
files = {str(f) for f in importlib.metadata.files("informerd") or []}
for want in ["informerd/py.typed", "informerd/v1/cache_pb2.py", "informerd/v1/cache_pb2.pyi",
             "informerd/v1/cache_pb2_grpc.py", "informerd/aio/__init__.py"]:
    assert want in files, f"{want} is not in the installed distribution"
import informerd, informerd.aio  # noqa: E401
assert informerd.aio.Client is not informerd.Client and informerd.aio.InformerdError is informerd.InformerdError
print(f"informerd {importlib.metadata.version('informerd')}: imports, with informerd/v1 and py.typed")
PY

check() {
  local kind="$1" artifact="$2" venv="$work/venv-$1"
  "$python" -m venv --without-pip "$venv"
  "$pip_python" -m pip --python "$venv/bin/python" install --quiet --disable-pip-version-check --no-compile "$artifact"
  (cd "$work" && "$venv/bin/python" check.py)
}

check wheel "${wheel[0]}" >"$work/wheel.log" 2>&1 &
wheel_pid=$!
check sdist "${sdist[0]}" >"$work/sdist.log" 2>&1 &
sdist_pid=$!
status=0
for kind in wheel sdist; do
  pid="${kind}_pid"
  if wait "${!pid}"; then
    echo "check-package.sh: the $kind in a fresh virtualenv: $(tail -1 "$work/$kind.log")"
  else
    echo "check-package.sh: FAILED: the $kind in a fresh virtualenv:" >&2
    cat "$work/$kind.log" >&2
    status=1
  fi
done
exit "$status"
