package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheImageRunsInformerdOnItsOwn unpacks the image `make image` built (INFORMERD_IMAGE, the
// OCI archive) the way a runtime does and runs informerd from that root file system alone, as
// the image's user: with nothing from the host reachable, it proves the binary self-contained.
func TestTheImageRunsInformerdOnItsOwn(t *testing.T) {
	archive := os.Getenv("INFORMERD_IMAGE")
	if archive == "" {
		t.Skip("INFORMERD_IMAGE (the OCI archive of `make image`) is not set; `make test` sets it")
	}
	dir := t.TempDir()
	c, img := openImage(t, archive, dir)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "rootfs")
	if err := unpackRootfs(img, root); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (stdout, stderr string, exit int) {
		return inRoot(t, root, cf.Config.User, append(cf.Config.Entrypoint, args...))
	}

	out, errOut, exit := run("--version")
	if want := c.Name + " " + c.Version; exit != 0 || strings.TrimSpace(out) != want {
		t.Errorf("informerd --version: exit %d, %q (stderr %q); want %q, Cargo.toml's version", exit, out, errOut, want)
	}

	example, err := os.ReadFile("../../../examples/informerd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: v1\n  kind: Pod\n  filter: 'object.metadata.name'\n"
	etc := filepath.Join(root, "etc", "informerd")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string][]byte{"config.yaml": example, "bad.yaml": []byte(bad)} {
		if err := os.WriteFile(filepath.Join(etc, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	out, errOut, exit = run("check-config", configPath)
	if exit != 0 || !strings.HasPrefix(out, configPath+": ok") {
		t.Errorf("check-config of the example: exit %d, %q (stderr %q); want it accepted", exit, out, errOut)
	}
	_, errOut, exit = run("check-config", "/etc/informerd/bad.yaml")
	if want := "/etc/informerd/bad.yaml:6:11: resources[0].filter:"; exit != 1 || !strings.HasPrefix(errOut, want) {
		t.Errorf("check-config of a filter that is not a bool: exit %d, stderr %q; want exit 1 and %q", exit, errOut, want)
	}
}

// inRoot runs argv with root as its root directory: as user (uid:gid) with chroot when this
// test runs as root (as CI does), else as the caller mapped to root in a user namespace.
func inRoot(t *testing.T, root, user string, argv []string) (stdout, stderr string, exit int) {
	t.Helper()
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("chroot", append([]string{"--userspec=" + user, root}, argv...)...)
	} else {
		cmd = exec.Command("unshare", append([]string{"--map-root-user", "--root=" + root}, argv...)...)
	}
	// Nothing of the host's environment: the image's own is PATH, which argv does not need.
	cmd.Env = []string{}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		exit = exitErr.ExitCode()
	default:
		t.Fatalf("%s: %v", cmd, err)
	}
	return o.String(), e.String(), exit
}
