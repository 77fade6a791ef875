// The image is named and labelled from the crate's own Cargo.toml, so that `image:
// informerd:0.1.0` in deploy/ and `informerd --version` inside the image cannot drift apart.

package main

import (
	"fmt"

	"github.com/BurntSushi/toml"
)

// crate is the part of Cargo.toml's [package] table the image carries.
type crate struct {
	Name        string `toml:"name"`
	Version     string `toml:"version"`
	Description string `toml:"description"`
	License     string `toml:"license"`
}

// readCrate reads [package] from a Cargo.toml; name and version are required.
func readCrate(path string) (crate, error) {
	var manifest struct {
		Package crate `toml:"package"`
	}
	if _, err := toml.DecodeFile(path, &manifest); err != nil {
		return crate{}, fmt.Errorf("%s: %w", path, err)
	}
	p := manifest.Package
	if p.Name == "" || p.Version == "" {
		return crate{}, fmt.Errorf("%s: [package] needs a name and a version (they name the image)", path)
	}
	return p, nil
}

// reference is the image's name as deploy/ and `docker load` know it: `informerd:0.1.0`,
// without a registry host (whoever pushes it chooses the registry).
func (c crate) reference() string {
	return c.Name + ":" + c.Version
}
