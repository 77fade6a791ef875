//! The atom table's arena: atoms keep their bytes through compactions and frees, ids are found
//! again by content, and the arena gives memory back as atoms go.

use std::collections::HashMap;

use proptest::prelude::*;

use crate::store::atoms::{AtomId, Atoms, KIND_STR, KIND_TEMPLATE};

/// Checks every live atom against the model: same bytes, same references, found by content.
fn check(atoms: &Atoms, model: &HashMap<Vec<u8>, (AtomId, u32)>) {
    assert_eq!(atoms.len(), model.len());
    let bytes: usize = model.keys().map(Vec::len).sum();
    assert_eq!(atoms.bytes(), bytes);
    for (key, &(id, refs)) in model {
        assert_eq!(atoms.kind(id), key[0]);
        assert_eq!(atoms.payload(id), &key[1..]);
        assert_eq!(atoms.refs(id), refs);
        assert_eq!(atoms.lookup(key[0], &key[1..]), Some(id));
    }
}

/// Acquires `payload` and records it in the model.
fn acquire(atoms: &mut Atoms, model: &mut HashMap<Vec<u8>, (AtomId, u32)>, kind: u8, p: &[u8]) {
    let (id, created) = atoms.acquire(kind, p);
    let mut key = vec![kind];
    key.extend_from_slice(p);
    let entry = model.entry(key).or_insert((id, 0));
    assert_eq!(entry.0, id, "an atom keeps its id while it lives");
    assert_eq!(created, entry.1 == 0);
    entry.1 += 1;
}

/// Releases the atom of `key`; returns whether it was freed, checking what `release` said.
fn release(atoms: &mut Atoms, model: &mut HashMap<Vec<u8>, (AtomId, u32)>, key: &[u8]) -> bool {
    let (id, refs) = model[key];
    let mut seen = None;
    let freed = atoms.release(id, |kind, payload| seen = Some((kind, payload.to_vec())));
    assert_eq!(freed, refs == 1);
    if freed {
        assert_eq!(seen, Some((key[0], key[1..].to_vec())));
        model.remove(key);
    } else {
        assert_eq!(seen, None);
        model.get_mut(key).expect("live").1 -= 1;
    }
    freed
}

#[test]
fn atoms_survive_compaction_and_the_arena_shrinks_as_they_go() {
    let mut atoms = Atoms::new();
    let mut model = HashMap::new();
    // Atoms of many sizes, one larger than a chunk.
    let payload = |i: usize| format!("value-{i}-{}", "x".repeat(i % 97)).into_bytes();
    for i in 0..20_000 {
        acquire(&mut atoms, &mut model, KIND_STR, &payload(i));
    }
    acquire(&mut atoms, &mut model, KIND_TEMPLATE, &vec![7u8; 200_000]);
    check(&atoms, &model);
    // The large atom's bytes are left out: they stay.
    let held = |atoms: &Atoms| atoms.structure_bytes() + atoms.bytes() - 200_001;
    let full_table = held(&atoms);
    // Free seven in eight (compacting several times on the way), then check the rest.
    for i in (0..20_000).filter(|i| i % 8 != 0) {
        let mut key = vec![KIND_STR];
        key.extend(payload(i));
        assert!(release(&mut atoms, &mut model, &key));
    }
    check(&atoms, &model);
    let after = held(&atoms);
    assert!(
        after < full_table / 2,
        "freeing seven atoms in eight gives memory back: {after} bytes held, {full_table} before"
    );
    // New atoms reuse freed ids and go on being found.
    for i in 20_000..25_000 {
        acquire(&mut atoms, &mut model, KIND_STR, &payload(i));
    }
    check(&atoms, &model);
    let keys: Vec<Vec<u8>> = model.keys().cloned().collect();
    for key in keys {
        while !release(&mut atoms, &mut model, &key) {}
    }
    assert_eq!(
        (atoms.len(), atoms.bytes(), atoms.structure_bytes()),
        (0, 0, 0)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any sequence of acquires and releases leaves the table equal to a plain map of
    /// payloads to reference counts.
    #[test]
    fn the_table_matches_a_model(ops in prop::collection::vec((any::<bool>(), 0usize..300, 0usize..600), 1..1500)) {
        let mut atoms = Atoms::new();
        let mut model: HashMap<Vec<u8>, (AtomId, u32)> = HashMap::new();
        for (is_acquire, which, len) in ops {
            let p: Vec<u8> = (0..len).map(|i| (which + i) as u8).collect();
            let mut key = vec![KIND_STR];
            key.extend_from_slice(&p);
            if is_acquire || !model.contains_key(&key) {
                acquire(&mut atoms, &mut model, KIND_STR, &p);
            } else {
                release(&mut atoms, &mut model, &key);
            }
        }
        check(&atoms, &model);
    }
}

/// A large string's atom is found again by the string (packed or not) while it is that string,
/// and never once the atom is gone, even when its id now names another atom.
#[test]
fn recent_large_strings_are_found_only_while_their_atom_holds_them() {
    use crate::store::atoms::KIND_STR_LZ4;
    use crate::store::packed;

    let manifest = format!(
        r#"{{"apiVersion":"apps/v1","kind":"Deployment","metadata":{{"name":"web"}},"spec":{{"replicas":3,"template":{{"spec":{{"containers":[{{"image":"acme/web:1.2.3","name":"web"}}]}}}}}}}}{}"#,
        " ".repeat(200)
    );
    let noise = packed::noise();
    let packed = packed::pack(&manifest).expect("a manifest packs");
    assert_eq!(packed::pack(&noise), None, "noise stays as it is");
    let mut atoms = Atoms::new();
    let hash = atoms
        .recent_large(&manifest)
        .expect_err("nothing remembered yet");
    let (id, _) = atoms.acquire(KIND_STR_LZ4, &packed);
    atoms.remember_large(hash, id);
    assert_eq!(atoms.recent_large(&manifest), Ok(id));
    let other = format!("{manifest} ");
    assert!(atoms.recent_large(&other).is_err(), "another string");

    let noise_hash = atoms.recent_large(&noise).expect_err("not remembered");
    let (noise_id, _) = atoms.acquire(KIND_STR, noise.as_bytes());
    atoms.remember_large(noise_hash, noise_id);
    assert_eq!(atoms.recent_large(&noise), Ok(noise_id));

    // Freed, then its id reused by another atom: the stale slot is not believed.
    assert!(atoms.release(id, |_, _| {}));
    let (reused, _) = atoms.acquire(KIND_STR, b"something else");
    assert_eq!(reused, id, "the freed id is reused");
    assert!(atoms.recent_large(&manifest).is_err());
}

/// A short string's atom, found through the cache of short strings, is never one that was
/// freed, even when its id now names another string.
#[test]
fn short_strings_are_found_only_while_their_atom_lives() {
    let mut atoms = Atoms::new();
    let (keep, _) = atoms.acquire(KIND_STR, b"metadata");
    let (gone, created) = atoms.acquire(KIND_STR, b"status");
    assert!(created);
    assert_eq!(atoms.intern(KIND_STR, b"status"), (gone, false), "cached");
    assert!(atoms.release(gone, |_, _| {}));
    let (reused, created) = atoms.acquire(KIND_STR, b"spec");
    assert!(created);
    assert_eq!(reused, gone, "the freed id is reused");
    let (again, created) = atoms.intern(KIND_STR, b"status");
    assert!(created, "a freed string is made again");
    assert_ne!(again, reused);
    assert_eq!(atoms.payload(reused), b"spec");
    assert_eq!(atoms.payload(again), b"status");
    assert_eq!(atoms.intern(KIND_STR, b"metadata"), (keep, false));
    // A template with the same bytes is another atom.
    let (template, created) = atoms.intern(KIND_TEMPLATE, b"metadata");
    assert!(created);
    assert_ne!(template, keep);
    assert_eq!(atoms.intern(KIND_STR, b"metadata"), (keep, false));
}
