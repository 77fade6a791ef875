#!/usr/bin/env bash
# Regenerates informerdv1/ (the Go stubs of proto/informerd/v1/cache.proto) reproducibly: the
# compiler and plugins are pinned and installed under the repo's .cache/ (git-ignored).
#
#   clients/go/generate.sh
#
# protoc comes from Python's grpcio-tools (which bundles it) in a virtualenv; the Go plugins are
# built with `go install` from the Go module proxy.
set -euo pipefail

GRPCIO_TOOLS_VERSION=1.85.1       # bundles libprotoc 35.1
PROTOC_GEN_GO_VERSION=v1.36.12    # google.golang.org/protobuf
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2 # google.golang.org/grpc/cmd/protoc-gen-go-grpc

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="$root/.cache/protoc"
mkdir -p "$tools/bin"

stamp="$tools/versions"
want="$GRPCIO_TOOLS_VERSION $PROTOC_GEN_GO_VERSION $PROTOC_GEN_GO_GRPC_VERSION"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "$tools/venv/bin/python" ]]; then
	rm -rf "$tools/venv"
	python3 -m venv "$tools/venv"
	"$tools/venv/bin/pip" install --quiet --disable-pip-version-check "grpcio-tools==$GRPCIO_TOOLS_VERSION"
	GOBIN="$tools/bin" GOFLAGS=-buildvcs=false go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
	GOBIN="$tools/bin" GOFLAGS=-buildvcs=false go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
	echo "$want" >"$stamp"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Paths relative to the proto root, so the generated files name the source as
# informerd/v1/cache.proto whatever the checkout's location.
cd "$root/proto"
PATH="$tools/bin:$PATH" "$tools/venv/bin/python" -m grpc_tools.protoc \
	-I . \
	--plugin=protoc-gen-go="$tools/bin/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$tools/bin/protoc-gen-go-grpc" \
	--go_out="$out" --go_opt=module=informerd.io/clients/go \
	--go-grpc_out="$out" --go-grpc_opt=module=informerd.io/clients/go \
	informerd/v1/cache.proto

rm -f "$here"/informerdv1/*.pb.go
mkdir -p "$here/informerdv1"
cp "$out"/informerdv1/*.pb.go "$here/informerdv1/"
echo "generated: $(cd "$here" && ls informerdv1/*.pb.go | tr '\n' ' ')"
