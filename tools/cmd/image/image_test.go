package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// buildFake builds the image of a stand-in binary into dir, as `make image` would.
func buildFake(t *testing.T, dir string) (oci, docker string) {
	t.Helper()
	binary := filepath.Join(dir, "informerd")
	if err := os.WriteFile(binary, []byte("#!/not/really/informerd\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	oci, docker = filepath.Join(dir, "informerd.oci.tar"), filepath.Join(dir, "informerd.docker.tar")
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if _, _, err := build(cargoToml, binary, oci, docker, "0123abc"); err != nil {
		t.Fatal(err)
	}
	return oci, docker
}

// The repository's Cargo.toml, from tools/cmd/image.
const cargoToml = "../../../Cargo.toml"

// theCrate is Cargo.toml's [package].
func theCrate(t *testing.T) crate {
	t.Helper()
	c, err := readCrate(cargoToml)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// openImage reads the image Cargo.toml names from an OCI archive, unpacking it under dir.
func openImage(t *testing.T, archive, dir string) (crate, v1.Image) {
	t.Helper()
	c := theCrate(t)
	img, err := imageFromArchive(archive, c.reference(), filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	return c, img
}

func TestTheSameBinaryGivesTheSameArchives(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	ociA, dockerA := buildFake(t, a)
	ociB, dockerB := buildFake(t, b)
	for _, pair := range [][2]string{{ociA, ociB}, {dockerA, dockerB}} {
		x, errX := os.ReadFile(pair[0])
		y, errY := os.ReadFile(pair[1])
		if errX != nil || errY != nil {
			t.Fatal(errX, errY)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ: the image is not reproducible", pair[0], pair[1])
		}
	}
}

func TestTheOCIArchiveNamesAnImageThatRunsAsNonRoot(t *testing.T) {
	dir := t.TempDir()
	oci, _ := buildFake(t, dir)
	c, img := openImage(t, oci, dir)
	if err := validate.Image(img); err != nil {
		t.Fatalf("digests, sizes and diff IDs disagree: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want the numeric non-root 65532:65532 (runAsNonRoot needs a number)", cf.Config.User)
	}
	if want := []string{"/usr/local/bin/informerd"}; !reflect.DeepEqual(cf.Config.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", cf.Config.Entrypoint, want)
	}
	if want := []string{"serve", "--config", "/etc/informerd/config.yaml"}; !reflect.DeepEqual(cf.Config.Cmd, want) {
		t.Errorf("cmd %q, want %q", cf.Config.Cmd, want)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	for key, want := range map[string]string{
		"org.opencontainers.image.version":  c.Version,
		"org.opencontainers.image.title":    "informerd",
		"org.opencontainers.image.revision": "0123abc",
		"org.opencontainers.image.created":  "2023-11-14T22:13:20Z",
	} {
		if got := cf.Config.Labels[key]; got != want {
			t.Errorf("label %s = %q, want %q", key, got, want)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Annotations["org.opencontainers.image.version"] != c.Version {
		t.Errorf("manifest annotations %v lack the version", m.Annotations)
	}
}

func TestTheRootFileSystemHoldsTheBinaryAndTheSocketDirectory(t *testing.T) {
	dir := t.TempDir()
	oci, _ := buildFake(t, dir)
	_, img := openImage(t, oci, dir)
	got := map[string]tar.Header{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[strings.TrimSuffix(h.Name, "/")] = *h
	}
	bin, ok := got["usr/local/bin/informerd"]
	if !ok || bin.Mode != 0o755 || bin.Uid != 0 {
		t.Errorf("usr/local/bin/informerd: %+v; want a root-owned 0755 file", bin)
	}
	run, ok := got["run/informerd"]
	if !ok || run.Typeflag != tar.TypeDir || run.Uid != 65532 || run.Gid != 65532 {
		t.Errorf("run/informerd: %+v; want a directory the image's user owns", run)
	}
	if len(got) != 6 {
		t.Errorf("the file system holds %d entries, want the binary and 5 directories: %v", len(got), got)
	}
}

func TestTheDockerArchiveIsTaggedWithTheImageName(t *testing.T) {
	_, docker := buildFake(t, t.TempDir())
	c := theCrate(t)
	manifest, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(docker) })
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 1 || !reflect.DeepEqual(manifest[0].RepoTags, []string{c.reference()}) {
		t.Errorf("manifest.json %+v, want one image tagged %s", manifest, c.reference())
	}
}

func TestAnUnknownNameIsRefusedNamingWhatTheArchiveHolds(t *testing.T) {
	dir := t.TempDir()
	oci, _ := buildFake(t, dir)
	c := theCrate(t)
	_, err := imageFromArchive(oci, "informerd:9.9.9", filepath.Join(dir, "layout"))
	if err == nil || !strings.Contains(err.Error(), c.reference()) {
		t.Errorf("error %v, want one naming the image the archive holds", err)
	}
}
