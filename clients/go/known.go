package informerd

// What an Informer remembers of each object it has delivered, compactly: the Informer keeps
// no objects, but it must know every key with its uid and resourceVersion, to give the old side
// of an update and to find what a relist no longer holds. For a controller over a large cache
// that map is most of its memory, so an entry holds the uid as its 16 bytes and the
// resourceVersion as a number (what Kubernetes' apiservers give), not as two strings: 48 bytes
// against about 150 with their headers and allocations.
//
// Decision: uids and resourceVersions are opaque to clients in Kubernetes' API conventions, so
// one that is not a canonical lowercase UUID, or a canonical decimal number, is kept as written
// (in odd, allocated only then): the Informer never changes what it reports.

import (
	"encoding/hex"
	"strconv"
)

type entry struct {
	uid      [16]byte
	rv       uint64
	revision uint64
	pass     uint32
	// odd holds the uid and resourceVersion as written when either is not in the compact form.
	odd *oddVersions
}

type oddVersions struct{ uid, rv string }

func newEntry(uid, rv string, revision uint64, pass uint32) entry {
	e := entry{revision: revision, pass: pass}
	u, uidOK := parseUID(uid)
	n, rvOK := parseRV(rv)
	if uidOK && rvOK {
		e.uid, e.rv = u, n
	} else {
		e.odd = &oddVersions{uid: uid, rv: rv}
	}
	return e
}

func (e entry) uidString() string {
	if e.odd != nil {
		return e.odd.uid
	}
	return formatUID(e.uid)
}

func (e entry) rvString() string {
	if e.odd != nil {
		return e.odd.rv
	}
	return strconv.FormatUint(e.rv, 10)
}

func (e entry) sameUID(o entry) bool {
	if e.odd != nil || o.odd != nil {
		return e.uidString() == o.uidString()
	}
	return e.uid == o.uid
}

func (e entry) sameRV(o entry) bool {
	if e.odd != nil || o.odd != nil {
		return e.rvString() == o.rvString()
	}
	return e.rv == o.rv
}

// parseRV reads a canonical decimal number (no sign, no leading zero but "0").
func parseRV(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}

// uidDashes are where a UUID's text has its dashes (8-4-4-4-12 hex digits).
var uidDashes = [4]int{8, 13, 18, 23}

// parseUID reads a UUID in its canonical lowercase text.
func parseUID(s string) ([16]byte, bool) {
	var u [16]byte
	if len(s) != 36 {
		return u, false
	}
	digits := make([]byte, 0, 32)
	for i := 0; i < len(s); i++ {
		if i == uidDashes[0] || i == uidDashes[1] || i == uidDashes[2] || i == uidDashes[3] {
			if s[i] != '-' {
				return u, false
			}
			continue
		}
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return u, false
		}
		digits = append(digits, c)
	}
	if _, err := hex.Decode(u[:], digits); err != nil {
		return u, false
	}
	return u, true
}

func formatUID(u [16]byte) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
