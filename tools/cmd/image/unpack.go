// Reading an image back the way a container runtime does: the OCI archive's index.json names
// the manifest, the manifest lists the layers, and the layers stacked make the root filesystem.
// The test runs informerd from that filesystem; `image unpack` lets a user look inside too.

package main

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// imageFromArchive unpacks the OCI archive into dir and returns the image its index names ref.
func imageFromArchive(archive, ref, dir string) (v1.Image, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := untar(f, dir, false); err != nil {
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	index, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: not an OCI image layout: %w", archive, err)
	}
	manifest, err := index.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", archive, err)
	}
	var names []string
	for _, desc := range manifest.Manifests {
		if desc.Annotations[refNameAnnotation] == ref {
			return index.Image(desc.Digest)
		}
		names = append(names, desc.Annotations[refNameAnnotation])
	}
	return nil, fmt.Errorf("%s: no image named %q in index.json (it names %q)", archive, ref, names)
}

// unpackRootfs writes the image's flattened file system under root, with the owners and modes
// the layers give when run as root (as a runtime does); otherwise owned by the caller.
func unpackRootfs(img v1.Image, root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	// A runtime's root directory is world-readable: the image's user must reach its files.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	flat := mutate.Extract(img)
	defer flat.Close()
	return untar(flat, root, os.Geteuid() == 0)
}

// untar writes a tar's directories and regular files under dir, refusing any other kind of
// entry and any path that leaves dir.
func untar(r io.Reader, dir string, chown bool) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if !filepath.IsLocal(h.Name) {
			return fmt.Errorf("%q: a path outside the archive's root", h.Name)
		}
		path := filepath.Join(dir, h.Name)
		mode := os.FileMode(h.Mode).Perm()
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, mode)
			if err == nil {
				err = os.Chmod(path, mode)
			}
		case tar.TypeReg:
			err = writeFile(path, tr, mode)
		default:
			return fmt.Errorf("%q: an entry of type %q, which this image never holds", h.Name, h.Typeflag)
		}
		if err == nil && chown {
			err = os.Lchown(path, h.Uid, h.Gid)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
