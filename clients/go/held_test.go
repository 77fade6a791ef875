package informerd

import (
	"encoding/binary"
	"testing"
)

// The held entries are, per object, FNV-1a 64 of its key then of its resourceVersion,
// little-endian (the layout the sidecar reads, src/api/watch/held.rs), and gone resolves back
// to the keys.
func TestHeldEntriesLayout(t *testing.T) {
	// FNV-1a 64 of "" is the offset basis; of "a", a published test value.
	if fnv1a64("") != 0xcbf29ce484222325 || fnv1a64("a") != 0xaf63dc4c8601ec8c {
		t.Fatalf("fnv1a64: %x %x", fnv1a64(""), fnv1a64("a"))
	}
	known := map[string]entry{"ns/p": newEntry("u", "42", 1, 0)}
	b, keys := heldEntries(known)
	if len(b) != 16 {
		t.Fatalf("%d bytes for one object, want 16", len(b))
	}
	if binary.LittleEndian.Uint64(b) != fnv1a64("ns/p") || binary.LittleEndian.Uint64(b[8:]) != fnv1a64("42") {
		t.Errorf("entry %x: want the key's hash then the resourceVersion's", b)
	}
	if g := goneHashes(b[:8]); len(g) != 1 || keys[g[0]] != "ns/p" {
		t.Errorf("gone %v resolves to %q, want ns/p", g, keys[g[0]])
	}
}
