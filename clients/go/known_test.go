package informerd

import "testing"

// An entry gives back exactly the uid and resourceVersion it was made from, compact or not,
// and compares them as strings would.
func TestEntryKeepsUIDAndResourceVersionAsWritten(t *testing.T) {
	cases := []struct{ uid, rv string }{
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "12345"},
		{"0F1E2D3C-4B5A-6978-8796-A5B4C3D2E1F0", "1"}, // not lowercase: kept as written
		{"not-a-uuid", "7"},
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "0012"}, // not canonical: kept as written
		{"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "opaque-rv"},
		{"", ""},
	}
	for _, c := range cases {
		e := newEntry(c.uid, c.rv, 3, 1)
		if e.uidString() != c.uid || e.rvString() != c.rv {
			t.Errorf("newEntry(%q, %q) gives back %q, %q", c.uid, c.rv, e.uidString(), e.rvString())
		}
		if c.uid == "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" && c.rv == "12345" && e.odd != nil {
			t.Errorf("a canonical uid and resourceVersion are not kept compactly")
		}
	}
	a := newEntry("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "5", 0, 0)
	b := newEntry("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "6", 0, 0)
	odd := newEntry("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "05", 0, 0)
	if !a.sameUID(b) || a.sameRV(b) || !a.sameUID(odd) || a.sameRV(odd) {
		t.Errorf("comparisons differ from the strings'")
	}
}
