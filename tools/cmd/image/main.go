// Command image builds informerd's container image without a container daemon or a registry,
// with go-containerregistry: a `FROM scratch` image holding the static (musl) binary, run as
// uid 65532, named `NAME:VERSION` from Cargo.toml, written as an OCI image layout in a tar and
// as a `docker save` tar. The Dockerfile beside Cargo.toml builds the same image with Docker.
//
//	image build  --binary FILE --cargo-toml FILE --oci OUT.tar [--docker OUT.tar] [--revision SHA]
//	image unpack --oci FILE --cargo-toml FILE --dir DIR   the image's root file system, into DIR/rootfs
//
// Timestamps (file times, `created`) come from SOURCE_DATE_EPOCH (the Makefile passes the last
// commit's time), 1970 when unset: the same binary and revision give the same archives.
//
// Decision: its own Go module, not tools/go.mod. That module is pinned to Kubernetes' own
// dependencies and a change to it rebuilds the control plane; this tool shares nothing with it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: image build|unpack [flags]; image CMD -h for flags")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	cargoToml := fs.String("cargo-toml", "Cargo.toml", "the crate's manifest: [package] name and version name the image")
	oci := fs.String("oci", ".cache/image/informerd.oci.tar", "the OCI image layout archive")
	var err error
	switch os.Args[1] {
	case "build":
		binary := fs.String("binary", "", "the statically linked informerd")
		docker := fs.String("docker", "", "also write a `docker save` archive here")
		revision := fs.String("revision", "", "the source revision (label org.opencontainers.image.revision)")
		_ = fs.Parse(os.Args[2:])
		var ref, digest string
		ref, digest, err = build(*cargoToml, *binary, *oci, *docker, *revision)
		if err == nil {
			fmt.Printf("%s: %s %s\n", *oci, ref, digest)
			if *docker != "" {
				fmt.Printf("%s: %s (for docker load)\n", *docker, ref)
			}
		}
	case "unpack":
		dir := fs.String("dir", "", "an empty directory: the layout goes to DIR/layout, the file system to DIR/rootfs")
		_ = fs.Parse(os.Args[2:])
		err = unpack(*cargoToml, *oci, *dir)
	default:
		err = fmt.Errorf("unknown command %q: build or unpack", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// build writes the archives and returns the image's name and manifest digest.
func build(cargoToml, binary, oci, docker, revision string) (ref, digest string, err error) {
	c, err := readCrate(cargoToml)
	if err != nil {
		return "", "", err
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return "", "", err
	}
	l, err := layer(binary, created)
	if err != nil {
		return "", "", err
	}
	img, err := image(c, l, created, revision)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(filepath.Dir(oci), 0o755); err != nil {
		return "", "", err
	}
	if err := writeOCIArchive(img, c.reference(), oci, created); err != nil {
		return "", "", err
	}
	if docker != "" {
		if err := writeDockerArchive(img, c.reference(), docker); err != nil {
			return "", "", err
		}
	}
	h, err := img.Digest()
	if err != nil {
		return "", "", err
	}
	return c.reference(), h.String(), nil
}

func unpack(cargoToml, oci, dir string) error {
	if dir == "" {
		return fmt.Errorf("unpack: --dir is required")
	}
	c, err := readCrate(cargoToml)
	if err != nil {
		return err
	}
	img, err := imageFromArchive(oci, c.reference(), filepath.Join(dir, "layout"))
	if err != nil {
		return err
	}
	return unpackRootfs(img, filepath.Join(dir, "rootfs"))
}

// sourceDateEpoch is the time every timestamp of the image carries (reproducible-builds.org's
// SOURCE_DATE_EPOCH convention).
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	secs, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: seconds since 1970 expected", s)
	}
	return time.Unix(secs, 0).UTC(), nil
}
