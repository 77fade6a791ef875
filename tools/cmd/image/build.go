// The image around the layer (config, labels, name) and the two archives `make image` writes:
// an OCI image layout as a tar (skopeo, podman, crane, containerd) and a `docker save` tar
// (`docker load` of any Docker version, `kind load image-archive`).

package main

import (
	"archive/tar"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// refNameAnnotation names an image inside an OCI layout: `skopeo copy
// oci-archive:FILE:informerd:0.1.0` selects it by this value.
const refNameAnnotation = "org.opencontainers.image.ref.name"

// imageUser is the image's user, uid:gid.
var imageUser = strconv.Itoa(uid) + ":" + strconv.Itoa(gid)

// defaultCmd is the entrypoint's default arguments: serve the config mounted at configPath.
var defaultCmd = []string{"serve", "--config", configPath}

// platform is the musl target's: the Makefile builds x86_64-unknown-linux-musl.
var platform = v1.Platform{OS: "linux", Architecture: "amd64"}

// labels are the OCI annotations the image carries, as config labels (`docker inspect`) and
// as manifest annotations (what a registry shows).
func (c crate) labels(created time.Time, revision string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       c.Name,
		"org.opencontainers.image.version":     c.Version,
		"org.opencontainers.image.description": c.Description,
		"org.opencontainers.image.licenses":    c.License,
		"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	return l
}

// image is informerd's image: the one layer, run as uid 65532 with informerd as entrypoint
// and `serve --config /etc/informerd/config.yaml` as the default arguments.
func image(c crate, l v1.Layer, created time.Time, revision string) (v1.Image, error) {
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer: l,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "make image: the static informerd at " + binaryPath,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = platform.OS, platform.Architecture
	cf.Created = v1.Time{Time: created}
	labels := c.labels(created, revision)
	cf.Config = v1.Config{
		User:       imageUser,
		Entrypoint: []string{binaryPath},
		Cmd:        defaultCmd,
		Env:        []string{"PATH=/usr/local/bin"},
		WorkingDir: "/",
		Labels:     labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	annotated, ok := mutate.Annotations(img, labels).(v1.Image)
	if !ok {
		return nil, fmt.Errorf("image: annotating the manifest did not give an image")
	}
	return annotated, nil
}

// writeOCIArchive writes img as an OCI image layout (oci-layout, index.json, blobs/) in a tar
// at out, the index naming it ref. Entries are sorted and timestamped at mtime, so that the
// same image gives the same archive.
func writeOCIArchive(img v1.Image, ref, out string, mtime time.Time) error {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".oci-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	err = p.AppendImage(img,
		layout.WithAnnotations(map[string]string{refNameAnnotation: ref}),
		layout.WithPlatform(platform))
	if err != nil {
		return fmt.Errorf("OCI layout: %w", err)
	}
	return writeAtomically(out, func(w io.Writer) error { return tarDir(dir, w, mtime) })
}

// writeDockerArchive writes img as `docker save` would, tagged ref.
func writeDockerArchive(img v1.Image, ref, out string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return writeAtomically(out, func(w io.Writer) error { return tarball.Write(tag, img, w) })
}

// writeAtomically writes out through a temporary file beside it, so that an interrupted
// build never leaves a truncated archive that looks finished.
func writeAtomically(out string, write func(io.Writer) error) error {
	f, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), out)
}

// tarDir writes the files under dir to w, paths relative to dir, owned by root.
func tarDir(dir string, w io.Writer, mtime time.Time) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag = h.Name+"/", 0o755, tar.TypeDir
			return tw.WriteHeader(h)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		h.Size = int64(len(data))
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
