#!/usr/bin/env bash
# Runs the Python client's tests against a real informerd and a real kube-apiserver.
#
#   INFORMERD_BIN=target/debug/informerd INFORMERD_KUBECONFIG=.cluster/kubeconfig \
#     clients/python/run-tests.sh [PYTEST ARGS...]
#
# INFORMERD_BIN (the informerd binary) and INFORMERD_KUBECONFIG (the kubeconfig of a running
# kube-apiserver) are required (`make test` sets them); INFORMERD_SEED_BIN (the project's
# seeder) is optional. The virtualenv is .cache/venv at the repository root (created when
# missing, or $INFORMERD_PY_VENV); the package's dependencies and test extras are installed into
# it from PyPI, so this runs on a fresh machine with python3 (3.11 or later) alone. Then
# `python -m build` makes the wheel and the sdist, the wheel is what the tests import, and
# check-package.sh installs each into a fresh virtualenv; ruff and mypy --strict check the code
# (pyproject.toml says over what). A failure of any of these fails the run before a test starts.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${INFORMERD_PY_VENV:-$root/.cache/venv}"
python="${PYTHON:-python3}"

# Relative paths in the environment are relative to where we were started.
for var in INFORMERD_BIN INFORMERD_KUBECONFIG INFORMERD_SEED_BIN; do
  value="${!var:-}"
  if [ -n "$value" ] && [ "${value#/}" = "$value" ]; then
    export "$var=$PWD/$value"
  fi
done

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "run-tests.sh: needs Python 3.11 or later ($python is $("$python" --version 2>&1))" >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  rm -rf "$venv"
  "$python" -m venv "$venv"
fi
dist="$(mktemp -d)"
trap 'rm -rf "$dist"' EXIT
# The dependencies and the test extras (pinned: the linters, pytest-asyncio, build and the
# setuptools it builds with), read from pyproject.toml: pip need not build the package for them.
"$venv/bin/python" - "$here/pyproject.toml" >"$dist/requirements.txt" <<'PY'
import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["test"]))
PY
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$dist/requirements.txt"

# The wheel and the sdist, as a user gets them (the wheel is built from the sdist). Decision:
# without build isolation, with the pinned setuptools of the test extras: an isolated build
# makes a virtualenv and installs setuptools into it on every run.
if ! "$venv/bin/python" -m build --no-isolation --outdir "$dist" "$here" >"$dist/build.log" 2>&1; then
  cat "$dist/build.log" >&2
  echo "run-tests.sh: python -m build failed (above)" >&2
  exit 1
fi
# Reinstalled on every run: the package under test is this tree's wheel, not an earlier build.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$dist"/informerd-*.whl

cd "$here"
# The package ships py.typed: mypy --strict and ruff (pinned in the test extras, configured in
# pyproject.toml) check it first, and any finding fails the run before a test starts.
"$venv/bin/ruff" check
"$venv/bin/mypy"

# Each package installs and imports on its own, in a fresh virtualenv.
"$here/check-package.sh" "$venv/bin/python" "$dist"

# pytest's own entry point (not `python -m pytest`) so that the installed package is imported,
# not the source tree.
status=0
"$venv/bin/pytest" "$@" || status=$?
exit "$status"
