#!/usr/bin/env bash
# Regenerates the committed gRPC/protobuf code in informerd/v1/ from
# proto/informerd/v1/cache.proto with a pinned grpcio-tools (which bundles protoc).
#
#   clients/python/generate.sh          regenerate
#   clients/python/generate.sh --check  fail if the committed code differs from a fresh run
#
# The generated cache_pb2.py checks the protobuf runtime against the protobuf version of
# the bundled protoc (the "gencode" version), and cache_pb2_grpc.py checks grpcio against
# GRPCIO_TOOLS_VERSION: the dependency floors in pyproject.toml must be at least those. This
# script fails if they are not.
set -euo pipefail

GRPCIO_TOOLS_VERSION=1.78.0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="$root/.cache/grpcio-tools-$GRPCIO_TOOLS_VERSION"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "grpcio-tools==$GRPCIO_TOOLS_VERSION"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
(cd "$root/proto" && "$venv/bin/python" -m grpc_tools.protoc -I. \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  informerd/v1/cache.proto)

# The floors pyproject.toml must have.
gencode="$(sed -n '/ValidateProtobufRuntimeVersion(/,/)/p' "$out/informerd/v1/cache_pb2.py" |
  grep -Eo '^ +[0-9]+,' | tr -d ' ,' | paste -sd. -)"
grpc_gen="$(sed -n "s/^GRPC_GENERATED_VERSION = '\(.*\)'/\1/p" "$out/informerd/v1/cache_pb2_grpc.py")"
for want in "protobuf>=$gencode," "grpcio>=$grpc_gen,"; do
  if ! grep -qF "\"$want" "$here/pyproject.toml"; then
    echo "generate.sh: pyproject.toml must depend on \"$want<next major>\" (the generated code requires it)" >&2
    exit 1
  fi
done

files=(cache_pb2.py cache_pb2.pyi cache_pb2_grpc.py)
if [ "${1:-}" = "--check" ]; then
  status=0
  for f in "${files[@]}"; do
    if ! diff -u "$here/informerd/v1/$f" "$out/informerd/v1/$f"; then
      status=1
    fi
  done
  if [ "$status" -ne 0 ]; then
    echo "generate.sh: informerd/v1 is out of date: run clients/python/generate.sh" >&2
  fi
  exit "$status"
fi
for f in "${files[@]}"; do
  cp "$out/informerd/v1/$f" "$here/informerd/v1/$f"
done
(IFS=,; echo "generated informerd/v1/{${files[*]}} with grpcio-tools $GRPCIO_TOOLS_VERSION (protobuf gencode $gencode)")
