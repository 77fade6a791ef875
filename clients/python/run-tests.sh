#!/usr/bin/env bash
# Runs the Python client's tests against a real informerd and a real kube-apiserver.
#
#   INFORMERD_BIN=target/debug/informerd INFORMERD_KUBECONFIG=.cluster/kubeconfig \
#     clients/python/run-tests.sh [PYTEST ARGS...]
#
# INFORMERD_BIN (the informerd binary) and INFORMERD_KUBECONFIG (the kubeconfig of a running
# kube-apiserver) are required (`make test` sets them); INFORMERD_SEED_BIN (the project's
# seeder) is optional. The virtualenv is .cache/venv at the repository root (created when
# missing, or $INFORMERD_PY_VENV); the package and its test extras are installed into it from
# PyPI, so this runs on a fresh machine with python3 (3.11 or later) alone. Before the tests,
# ruff and mypy --strict check the code (pyproject.toml says over what); a finding fails the run.
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
# Reinstalled on every run: the package under test is this tree, not an earlier build.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$here"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$here[test]"

cd "$here"
# The package ships py.typed: mypy --strict and ruff (pinned in the test extras, configured in
# pyproject.toml) check it first, and any finding fails the run before a test starts.
"$venv/bin/ruff" check
"$venv/bin/mypy"

# pytest's own entry point (not `python -m pytest`) so that the installed package is imported,
# not the source tree.
exec "$venv/bin/pytest" "$@"
