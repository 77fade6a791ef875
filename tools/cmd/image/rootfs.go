// The image's one layer: what a `FROM scratch` image of a static binary holds, written as a
// tar with fixed owners, modes and times so that the same binary gives the same layer digest.

package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// binaryPath is where informerd lives in the image, and the entrypoint.
	binaryPath = "/usr/local/bin/informerd"
	// socketDir is the directory of the example config's socket (server.socket). Decision: the
	// image has it, owned by the image's user, so that `docker run` works without a volume; in
	// a pod the shared emptyDir is mounted over it and the image's copy is never seen.
	socketDir = "/run/informerd"
	// configPath is where the default command reads the config: mount a ConfigMap at
	// /etc/informerd, or pass `serve --config FILE` as the container's args.
	configPath = "/etc/informerd/config.yaml"
	// uid and gid are the image's user: non-root and numeric, so that a pod's runAsNonRoot is
	// checked without a passwd file (65532 is the `nonroot` user of distroless images).
	uid = 65532
	gid = 65532
)

// entry is one file or directory of the layer.
type entry struct {
	path     string // without the leading slash
	mode     int64
	uid, gid int
	content  []byte // nil for a directory
}

// rootfs lists the layer's entries, parents before children.
func rootfs(binary []byte) []entry {
	dir := func(path string, mode int64, owner int) entry {
		return entry{path: path, mode: mode, uid: owner, gid: owner}
	}
	return []entry{
		dir("run", 0o755, 0),
		dir("run/informerd", 0o755, uid),
		dir("usr", 0o755, 0),
		dir("usr/local", 0o755, 0),
		dir("usr/local/bin", 0o755, 0),
		{path: binaryPath[1:], mode: 0o755, content: binary},
	}
}

// layerTar writes the entries as an uncompressed tar, every time set to mtime.
func layerTar(entries []entry, mtime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path,
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.gid,
			ModTime: mtime,
		}
		if e.content == nil {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.content))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.content); err != nil {
			return nil, fmt.Errorf("layer: %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// layer is the OCI layer (gzip) of the static binary at binaryFile.
func layer(binaryFile string, mtime time.Time) (v1.Layer, error) {
	binary, err := os.ReadFile(binaryFile)
	if err != nil {
		return nil, fmt.Errorf("the informerd binary: %w (`make static` builds it)", err)
	}
	data, err := layerTar(rootfs(binary), mtime)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer),
	)
}
