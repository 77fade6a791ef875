package informerd

// Delta resume for the Informer (issue 32): when its resume token is refused (Expired,
// EpochChanged: a sidecar restarted cold, or another replica), an Informer that holds objects
// sends what it holds (WatchRequest.held: for each object the 64-bit FNV-1a hashes of its key
// and resourceVersion, little-endian) instead of asking for the whole initial state. The
// sidecar sends only the objects that changed or appeared, and SYNCED's gone names the held
// ones that are gone: the handler sees what a full relist would show it, without the unchanged
// objects being sent again.
//
// Decision: a sidecar that refuses the request (INVALID_ARGUMENT from one without delta
// resume, RequestTooLarge when the held entries exceed its limits.maxRequestSize) gets a full
// relist at once, and the Informer does not ask it again: retrying the same refused request
// would never catch up, and a full relist compares against what the handler has, so nothing
// can leave a wrong view.

import (
	"encoding/binary"
	"hash/fnv"

	"google.golang.org/grpc/codes"
)

// fnv1a64 is FNV-1a, 64 bits, of s.
func fnv1a64(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	return h.Sum64()
}

// heldEntries is WatchRequest.held's entries for known: key hash, then resourceVersion hash,
// 16 bytes per object; and the keys by their hash, to resolve SYNCED's gone.
func heldEntries(known map[string]entry) ([]byte, map[uint64]string) {
	out := make([]byte, 0, 16*len(known))
	keys := make(map[uint64]string, len(known))
	for key, e := range known {
		kh := fnv1a64(key)
		out = binary.LittleEndian.AppendUint64(out, kh)
		out = binary.LittleEndian.AppendUint64(out, fnv1a64(e.rvString()))
		keys[kh] = key
	}
	return out, keys
}

// goneHashes decodes SYNCED's gone: 8 bytes, little-endian, per key hash.
func goneHashes(b []byte) []uint64 {
	out := make([]uint64, 0, len(b)/8)
	for i := 0; i+8 <= len(b); i += 8 {
		out = append(out, binary.LittleEndian.Uint64(b[i:]))
	}
	return out
}

// refusesDelta reports whether a delta resume's error means the sidecar will not serve one.
func refusesDelta(err error) bool {
	return Code(err) == codes.InvalidArgument || Reason(err) == ReasonRequestTooLarge
}

// endDelta ends a delta resume at SYNCED: the held objects named in gone are deleted, as a
// relist reports a vanished object (OnDelete with a nil object); the others held and not sent
// are unchanged.
func (inf *Informer[T]) endDelta(gone []byte, keys map[uint64]string) {
	var deleted []Meta
	inf.mu.Lock()
	for _, h := range goneHashes(gone) {
		key, ok := keys[h]
		if !ok {
			inf.stats.Anomalies++
			continue
		}
		e, had := inf.known[key]
		if !had {
			continue
		}
		deleted = append(deleted, metaOfKey(key, e))
		delete(inf.known, key)
		inf.stats.Deletes++
	}
	inf.mu.Unlock()
	for _, m := range deleted {
		inf.handler.OnDelete(m, nil)
	}
}
