package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

type imageOptions struct {
	binary, name, out, user, entrypoint string
}

// writeImage writes a `docker save` archive of a one-layer image holding a static binary, the
// form `ctr images import` reads and names by its RepoTags (as the CRI resolves them). Its
// timestamps are the epoch: the same binary gives the same archive.
func writeImage(o imageOptions) error {
	if o.binary == "" || o.name == "" || o.out == "" {
		return fmt.Errorf("--binary, --name and --out are required")
	}
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return err
	}
	if o.entrypoint == "" {
		o.entrypoint = "/" + filepath.Base(o.binary)
	}
	epoch := time.Unix(0, 0).UTC()
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(o.entrypoint, "/"), Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.Format(time.RFC3339),
		"config": map[string]any{
			"User":       o.user,
			"Entrypoint": []string{o.entrypoint},
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	layerName := hex.EncodeToString(diffID[:]) + "/layer.tar"
	manifest, err := json.Marshal([]map[string]any{{"Config": configName, "RepoTags": []string{o.name}, "Layers": []string{layerName}}})
	if err != nil {
		return err
	}
	var out bytes.Buffer
	aw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{configName, config}, {layerName, layer.Bytes()}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := aw.Write(f.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, o.out)
}
