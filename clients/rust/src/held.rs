//! What a client holds, for a delta resume ([`crate::Start::Held`], issue 32): instead of every
//! object again after its resume token is refused (`Expired`, `EpochChanged`, another
//! replica), the client sends a hash of each held object's key and resourceVersion, receives the
//! objects that changed or appeared, and, on SYNCED ([`crate::Change::gone`]), the key hashes of
//! the held objects that are gone.

/// FNV-1a, 64 bits: the hash of `WatchRequest.held` (and of the apiserver's shards).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The hash of an object's key as the sidecar computes it: of `namespace/name`, or of `name`
/// for a cluster-scoped object. [`crate::Change::gone`] lists these.
pub fn key_hash(namespace: Option<&str>, name: &str) -> u64 {
    match namespace.filter(|ns| !ns.is_empty()) {
        Some(ns) => fnv1a64(format!("{ns}/{name}").as_bytes()),
        None => fnv1a64(name.as_bytes()),
    }
}

/// The objects a client holds, by key and resourceVersion.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    entries: Vec<u8>,
}

impl Held {
    /// Nothing held: a delta resume then sends the whole initial state.
    pub fn new() -> Held {
        Held::default()
    }

    /// Adds an object held at `resource_version`.
    pub fn insert(&mut self, namespace: Option<&str>, name: &str, resource_version: &str) {
        self.entries
            .extend_from_slice(&key_hash(namespace, name).to_le_bytes());
        self.entries
            .extend_from_slice(&fnv1a64(resource_version.as_bytes()).to_le_bytes());
    }

    /// Adds an object by its hashes ([`key_hash`], and [`fnv1a64`] of its resourceVersion).
    pub fn insert_hashes(&mut self, key_hash: u64, resource_version_hash: u64) {
        self.entries.extend_from_slice(&key_hash.to_le_bytes());
        self.entries
            .extend_from_slice(&resource_version_hash.to_le_bytes());
    }

    /// How many objects are held.
    pub fn len(&self) -> usize {
        self.entries.len() / 16
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The request's `held`.
    pub(crate) fn into_proto(self) -> crate::proto::HeldObjects {
        crate::proto::HeldObjects {
            entries: self.entries,
        }
    }
}

/// The key hashes of a SYNCED event's `gone`.
pub(crate) fn gone(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_the_key_and_version_hashes_little_endian() {
        let mut held = Held::new();
        held.insert(Some("ns"), "p", "42");
        held.insert(None, "node-1", "7");
        assert_eq!(held.len(), 2);
        let e = held.into_proto().entries;
        assert_eq!(e[..8], fnv1a64(b"ns/p").to_le_bytes());
        assert_eq!(e[8..16], fnv1a64(b"42").to_le_bytes());
        assert_eq!(e[16..24], fnv1a64(b"node-1").to_le_bytes());
        // Go's hash/fnv New64a of "" is the offset basis.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(gone(&e[..16]), vec![fnv1a64(b"ns/p"), fnv1a64(b"42")]);
    }
}
