//! Encoding a body: JSON objects become interned templates, and only the values of their holes
//! (what is unique to this object, each in its compact form) are written to the body.

use super::refs::{atom_children, const_ids};
use super::varint::{put_varint, zigzag};
use super::{
    Identity, HOLE, OBJ_HOLE, SMALL_MAX, T_ARR, T_ARR_CONST, T_ARR_EMPTY, T_ARR_OBJ1, T_ATOM_STR,
    T_F64, T_FALSE, T_GEN_NAME, T_HEX64, T_IPV4, T_IPV4_CIDR, T_KEY_GEN_PREFIX, T_KEY_NAME,
    T_KEY_NAME_AFFIX, T_KEY_NAME_HASH, T_KEY_NAME_HEAD, T_KEY_NAME_ORDINAL, T_KEY_NS, T_KEY_RV,
    T_NEG, T_NULL, T_OBJ, T_SMALL, T_STR, T_TRUE, T_TS, T_TS_FRAC, T_U64, T_UINT_STR, T_UUID,
};
use crate::store::atoms::{
    AtomId, Atoms, KIND_ARRAY, KIND_ARRAY_TEMPLATE, KIND_STR, KIND_STR_LZ4, KIND_TEMPLATE,
};
use crate::store::packed;
use crate::store::scalar::{
    is_name_head, name_hash, name_ordinal, pack_suffix, parse_ipv4, parse_timestamp,
    parse_uint_str, parse_uuid, split_generated_name, split_hex64, GEN_SUFFIX_LEN, TS_BASE,
};
use crate::vocab::tree::{Num, Tree, View};

/// Names at least this long are looked for inside other strings (see `name_relative`).
const MIN_AFFIX_NAME: usize = 8;

/// Encoding of a constant: a tag and at most 33 bytes (a digest), a 10-byte varint, or two
/// string constants (`T_KEY_NAME_AFFIX`: 2 x (tag + 4-byte inline string or 5-byte varint)).
#[derive(Clone, Copy)]
struct Const {
    len: u8,
    buf: [u8; 40],
}

impl Const {
    fn new() -> Self {
        Self {
            len: 0,
            buf: [0; 40],
        }
    }

    fn tag(tag: u8) -> Self {
        let mut c = Self::new();
        c.push(tag);
        c
    }

    fn tag_id(tag: u8, id: AtomId) -> Self {
        let mut c = Self::tag(tag);
        c.varint(u64::from(id));
        c
    }

    fn push(&mut self, b: u8) {
        self.buf[self.len as usize] = b;
        self.len += 1;
    }

    fn extend(&mut self, bytes: &[u8]) {
        self.buf[self.len as usize..self.len as usize + bytes.len()].copy_from_slice(bytes);
        self.len += bytes.len() as u8;
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.push(v as u8);
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

enum Enc {
    /// A constant; its encoding goes into the enclosing template.
    Const(Const),
    /// The value's payload was written to the body; its tag goes into the enclosing template.
    Hole(u8),
    /// An object with holes, of this template: the values of its holes were written to the
    /// body, the enclosing container says which template they belong to.
    ObjHoles(AtomId),
}

/// Encodes the body of `root` (an object), taking references on the atoms it names.
pub(crate) fn encode_body<'t, T: Tree<'t>>(
    atoms: &mut Atoms,
    id: &Identity<'_>,
    root: T,
) -> Vec<u8> {
    encode_body_sized(atoms, id, root).0
}

/// [`encode_body`], and the object's encoded size: its body plus every string, key and shape
/// (template, array) it references, each counted in full at every use, shared or not. The
/// size is what the object would cost alone, whatever else the store holds, so it does not
/// depend on the order objects arrive in (`limits.maxObjectSize` is checked against it).
pub(crate) fn encode_body_sized<'t, T: Tree<'t>>(
    atoms: &mut Atoms,
    id: &Identity<'_>,
    root: T,
) -> (Vec<u8>, u64) {
    let mut enc = Encoder {
        atoms,
        id,
        name: NameParts::of(id.name),
        last_ts: TS_BASE,
        out: Vec::with_capacity(128),
        referenced: 0,
    };
    match enc.value(root, false) {
        Enc::Const(c) => enc.const_to_body(&c, false),
        Enc::ObjHoles(tid) => enc.tag_id_at(0, T_OBJ, tid),
        Enc::Hole(_) => unreachable!("objects are constants or have holes"),
    }
    let size = enc.referenced + enc.out.len() as u64;
    (enc.out, size)
}

/// The parts of an object's name that its strings may be made of (see `name_relative`), found
/// once per object rather than for each of its strings.
struct NameParts<'i> {
    /// The generateName prefix, when the name is a generated one.
    gen_prefix: Option<&'i str>,
    ordinal: Option<&'i str>,
    hash: Option<&'i str>,
}

impl<'i> NameParts<'i> {
    fn of(name: &'i str) -> Self {
        Self {
            gen_prefix: split_generated_name(name).map(|(prefix, _)| prefix),
            ordinal: name_ordinal(name),
            hash: name_hash(name),
        }
    }
}

/// Decision: the encoder looks atoms up without taking references, and an atom's holders take
/// theirs once they are known: a template or array when it is new (one reference on each atom
/// it names), the body for every atom it names. Most of a pod's templates already exist, so
/// their keys and constants are looked up and nothing else: before, each was acquired and,
/// once the template turned out to exist, released again. An atom created while encoding has
/// no reference until its holder takes one; it cannot be named by an existing template (those
/// name only live atoms, and a new atom's id was free), so its holder is always new or the
/// body, and nothing created is left unheld.
struct Encoder<'a, 'i> {
    atoms: &'a mut Atoms,
    id: &'a Identity<'i>,
    name: NameParts<'i>,
    last_ts: i64,
    out: Vec<u8>,
    /// Bytes of the atoms referenced so far, each counted at every use.
    referenced: u64,
}

impl Encoder<'_, '_> {
    fn value<'t, T: Tree<'t>>(&mut self, v: T, owner_refs: bool) -> Enc {
        match v.view() {
            View::Null => Enc::Const(Const::tag(T_NULL)),
            View::Bool(false) => Enc::Const(Const::tag(T_FALSE)),
            View::Bool(true) => Enc::Const(Const::tag(T_TRUE)),
            View::Num(n) => Enc::Const(number(n)),
            View::Str(s) => self.string(s, owner_refs),
            View::Array(len, elements) => self.array(len, elements, owner_refs),
            View::Object(len, members) => {
                let owner_refs = owner_refs && !names_a_job(v);
                self.object(len, members, owner_refs)
            }
        }
    }

    /// The id of the string atom `s` (no reference taken: see [`Encoder`]), counting its
    /// bytes.
    fn str_atom(&mut self, s: &str) -> AtomId {
        self.referenced += s.len() as u64;
        self.atoms.intern(KIND_STR, s.as_bytes()).0
    }

    /// Writes the id of the string atom `s` to the body, which holds a reference on it.
    fn str_atom_to_body(&mut self, s: &str, plus: u64) {
        let a = self.str_atom(s);
        self.atoms.hold(a);
        put_varint(&mut self.out, u64::from(a) + plus);
    }

    /// Writes the constant `c` to the body (without its tag when `payload_only`), which holds
    /// a reference on every atom it names.
    fn const_to_body(&mut self, c: &Const, payload_only: bool) {
        let atoms = &mut *self.atoms;
        const_ids(c.bytes(), &mut |id| atoms.hold(id));
        let bytes = c.bytes();
        self.out
            .extend_from_slice(if payload_only { &bytes[1..] } else { bytes });
    }

    /// Inserts `tag id` into the body at `pos` (before the holes of what it introduces); the
    /// body holds a reference on `id`.
    fn tag_id_at(&mut self, pos: usize, tag: u8, id: AtomId) {
        self.atoms.hold(id);
        let head = Const::tag_id(tag, id);
        insert_at(&mut self.out, pos, head.bytes());
    }

    /// Inserts `id` into the body at `pos`: the payload of a hole whose template names its tag
    /// (`T_OBJ`, `T_ARR`), before the holes of what it introduces; the body holds a reference
    /// on `id`.
    fn id_at(&mut self, pos: usize, id: AtomId) {
        self.atoms.hold(id);
        let mut head = Const::new();
        head.varint(u64::from(id));
        insert_at(&mut self.out, pos, head.bytes());
    }

    fn string(&mut self, s: &str, owner_refs: bool) -> Enc {
        if s == self.id.name {
            return Enc::Const(Const::tag(T_KEY_NAME));
        }
        if Some(s) == self.id.namespace {
            return Enc::Const(Const::tag(T_KEY_NS));
        }
        if Some(s) == self.id.resource_version {
            return Enc::Const(Const::tag(T_KEY_RV));
        }
        if let Some(c) = self.name_relative(s) {
            return Enc::Const(c);
        }
        // Decision: each parser below is tried only where its shape allows it (a UUID has 36
        // bytes; a timestamp, a decimal string and an IPv4 address start with a digit; a
        // generated name or a digest is long enough for its suffix). The parsers check the same
        // first, but most strings failed every one of them, a call each: 2,600 instructions a
        // watch event (`examples/ingest_profile.rs`).
        let b = s.as_bytes();
        if b.len() == 36 {
            if let Some(u) = parse_uuid(s) {
                if owner_refs {
                    // The owner's UID is shared by all its objects: keep it in the template.
                    let mut c = Const::tag(T_UUID);
                    c.extend(&u);
                    return Enc::Const(c);
                }
                self.out.extend_from_slice(&u);
                return Enc::Hole(T_UUID);
            }
        }
        if owner_refs {
            return Enc::Const(self.const_string(s));
        }
        if b.first().is_some_and(u8::is_ascii_digit) {
            if let Some(c) = self.digits_first(s) {
                return c;
            }
        }
        if b.len() >= GEN_SUFFIX_LEN + 2 {
            if let Some((prefix, suffix)) = split_generated_name(s) {
                self.str_atom_to_body(prefix, 0);
                self.out.extend_from_slice(&pack_suffix(&suffix));
                return Enc::Hole(T_GEN_NAME);
            }
        }
        if b.len() >= 64 {
            if let Some((prefix, digest)) = split_hex64(s) {
                if prefix.is_empty() {
                    // Decision: a bare digest is a constant, kept in its template. In a pod it is
                    // a checksum of its owner's configuration (Helm's `checksum/config`), shared by
                    // the owner's pods: as a hole it cost 33 bytes in every pod, in the template of
                    // the pod's annotations 33 bytes per owner. A container's ID, prefixed by its
                    // runtime (`containerd://`), is its pod's own: a hole.
                    let mut c = Const::tag(T_HEX64);
                    c.push(0);
                    c.extend(&digest);
                    return Enc::Const(c);
                }
                self.str_atom_to_body(prefix, 1);
                self.out.extend_from_slice(&digest);
                return Enc::Hole(T_HEX64);
            }
        }
        Enc::Const(self.const_string(s))
    }

    /// `s` as a timestamp, a decimal string or an IPv4 address, each a hole of its compact
    /// form: the string kinds that start with a digit.
    fn digits_first(&mut self, s: &str) -> Option<Enc> {
        if let Some(t) = parse_timestamp(s) {
            let delta = t.secs.wrapping_sub(self.last_ts);
            self.last_ts = t.secs;
            put_varint(&mut self.out, zigzag(delta));
            if let Some((digits, frac)) = t.frac {
                self.out.push(digits);
                put_varint(&mut self.out, u64::from(frac));
                return Some(Enc::Hole(T_TS_FRAC));
            }
            return Some(Enc::Hole(T_TS));
        }
        if let Some(n) = parse_uint_str(s) {
            put_varint(&mut self.out, n);
            return Some(Enc::Hole(T_UINT_STR));
        }
        let (ip, prefix) = parse_ipv4(s)?;
        self.out.extend_from_slice(&ip);
        self.out.extend(prefix);
        Some(Enc::Hole(if prefix.is_some() {
            T_IPV4_CIDR
        } else {
            T_IPV4
        }))
    }

    /// `s` as a constant relative to the object's name: the name's generateName prefix, the
    /// name up to one of its dashes (the owner's name), the ordinal that ends it, the hash
    /// before its random suffix (a ReplicaSet pod's `pod-template-hash`), or the name with a
    /// fixed prefix and suffix. Such a value is unique to the object or its owner, and
    /// as a constant it lets the objects of one owner, or of owners alike, share the template
    /// around it: a StatefulSet pod's `data-NAME` claim and `pod-index` label, a Job pod's
    /// `job-name` labels (one template per CronJob, not per Job), the owner reference's name
    /// (no string atom per ReplicaSet). Names shorter than [`MIN_AFFIX_NAME`] are not looked
    /// for inside other strings: in a string shared by many objects they would make it a
    /// different constant per name.
    fn name_relative(&mut self, s: &str) -> Option<Const> {
        let name = self.id.name;
        if self.name.gen_prefix == Some(s) {
            return Some(Const::tag(T_KEY_GEN_PREFIX));
        }
        if is_name_head(name, s) {
            let mut c = Const::tag(T_KEY_NAME_HEAD);
            c.varint(s.len() as u64);
            return Some(c);
        }
        if self.name.ordinal == Some(s) {
            return Some(Const::tag(T_KEY_NAME_ORDINAL));
        }
        if self.name.hash == Some(s) {
            return Some(Const::tag(T_KEY_NAME_HASH));
        }
        if name.len() < MIN_AFFIX_NAME || s.len() <= name.len() {
            return None;
        }
        let at = find_name(s.as_bytes(), name.as_bytes())?;
        let (prefix, suffix) = (&s[..at], &s[at + name.len()..]);
        let mut c = Const::tag(T_KEY_NAME_AFFIX);
        c.extend(self.const_string(prefix).bytes());
        c.extend(self.const_string(suffix).bytes());
        Some(c)
    }

    fn const_string(&mut self, s: &str) -> Const {
        if s.len() <= 3 {
            let mut c = Const::tag(T_STR);
            c.push(s.len() as u8);
            c.extend(s.as_bytes());
            c
        } else if s.len() >= packed::MIN_LEN {
            // Counted in full, as the object is served (`limits.maxObjectSize`).
            self.referenced += s.len() as u64;
            let a = self.atoms.recent_large(s).unwrap_or_else(|hash| {
                let a = match packed::pack(s) {
                    Some(packed) => self.atoms.intern(KIND_STR_LZ4, &packed).0,
                    None => self.atoms.intern(KIND_STR, s.as_bytes()).0,
                };
                self.atoms.remember_large(hash, a);
                a
            });
            Const::tag_id(T_ATOM_STR, a)
        } else {
            let a = self.str_atom(s);
            Const::tag_id(T_ATOM_STR, a)
        }
    }

    fn object<'t, T: Tree<'t>>(
        &mut self,
        len: usize,
        members: impl Iterator<Item = (&'t str, T)>,
        owner_refs: bool,
    ) -> Enc {
        // Room for a key and a short constant per member, and for one long constant (a uid, a
        // digest): growing the template was two reallocations a pod.
        let mut template = Vec::with_capacity(1 + len * 4 + 32);
        put_varint(&mut template, len as u64);
        let mut holes = false;
        for (k, v) in members {
            let key = self.str_atom(k);
            put_varint(&mut template, u64::from(key));
            let pos = self.out.len();
            match self.value(v, owner_refs || k == "ownerReferences") {
                Enc::Const(c) if member_in_body(k, &c) => {
                    self.const_to_body(&c, true);
                    template.extend([HOLE, c.bytes()[0]]);
                    holes = true;
                }
                Enc::Const(c) => template.extend_from_slice(c.bytes()),
                Enc::Hole(tag) => {
                    template.extend([HOLE, tag]);
                    holes = true;
                }
                Enc::ObjHoles(tid) => {
                    // The object's template id goes to the body: putting it in this template
                    // would multiply the number of templates (e.g. metadata x node name).
                    self.id_at(pos, tid);
                    template.extend([HOLE, T_OBJ]);
                    holes = true;
                }
            }
        }
        let tid = self.intern(KIND_TEMPLATE, &template);
        if holes {
            Enc::ObjHoles(tid)
        } else {
            Enc::Const(Const::tag_id(T_OBJ, tid))
        }
    }

    fn array<'t, T: Tree<'t>>(
        &mut self,
        len: usize,
        elements: impl Iterator<Item = T>,
        owner_refs: bool,
    ) -> Enc {
        if len == 0 {
            return Enc::Const(Const::tag(T_ARR_EMPTY));
        }
        let pos = self.out.len();
        let mut template = Vec::with_capacity(1 + len * 2);
        put_varint(&mut template, len as u64);
        let mut holes = false;
        for v in elements {
            match self.value(v, owner_refs) {
                Enc::Const(c) => template.extend_from_slice(c.bytes()),
                Enc::Hole(tag) => {
                    template.extend([HOLE, tag]);
                    holes = true;
                }
                Enc::ObjHoles(tid) => {
                    template.push(OBJ_HOLE);
                    put_varint(&mut template, u64::from(tid));
                    holes = true;
                }
            }
        }
        if !holes && len == 1 && template[1] == T_OBJ {
            // Decision: one constant object (an owner reference, nearly always) needs no
            // array atom of its own: the tag says "an array of this one object", and the
            // object's template reference is the constant's. An atom per owner less.
            let mut c = Const::tag(T_ARR_OBJ1);
            c.extend(&template[2..]);
            return Enc::Const(c);
        }
        if holes {
            let id = self.intern(KIND_ARRAY_TEMPLATE, &template);
            self.id_at(pos, id);
            Enc::Hole(T_ARR)
        } else {
            let id = self.intern(KIND_ARRAY, &template);
            Enc::Const(Const::tag_id(T_ARR_CONST, id))
        }
    }

    /// The id of the template or array `payload` (no reference taken: see [`Encoder`]). A new
    /// one takes a reference on each atom it names.
    fn intern(&mut self, kind: u8, payload: &[u8]) -> AtomId {
        self.referenced += payload.len() as u64;
        let (id, created) = self.atoms.intern(kind, payload);
        if created {
            let mut ids = Vec::new();
            atom_children(kind, payload, &mut ids);
            for child in ids {
                self.atoms.hold(child);
            }
        }
        id
    }
}

/// Inserts `bytes` (a few) into `out` at `pos`, before the holes written since.
///
/// Decision: not `Vec::splice`, whose iterator-driven insertion was most of inserting a
/// template's id (about 170 instructions for one to three bytes).
fn insert_at(out: &mut Vec<u8>, pos: usize, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out[pos..].rotate_right(bytes.len());
}

/// Where `name` first stands in `s`: each place that starts with its first byte (found by
/// `memchr`) compared with it.
///
/// Decision: not `memchr::memmem`, whose searcher prepared once per object was 2% of storing
/// a pod (`examples/ingest_profile.rs`, callgrind), for the few strings of an object long
/// enough to hold its name, a few dozen bytes each.
fn find_name(s: &[u8], name: &[u8]) -> Option<usize> {
    let (&first, _) = name.split_first()?;
    let last = s.len().checked_sub(name.len())?;
    let mut from = 0;
    while let Some(i) = memchr::memchr(first, &s[from..=last]) {
        let at = from + i;
        if s[at..at + name.len()] == *name {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// True when `m` is a reference to a Job.
///
/// Decision: an owner reference's uid is kept in its template, shared by the owner's objects,
/// except a Job's: a Job has one pod (nearly always; a CronJob makes one Job per run), so the
/// template would be that pod's alone, 30-odd bytes and an atom table entry for a uid that
/// costs 16 bytes in the pod's body. As a hole, Jobs whose names have the same length share
/// one template (the name is relative to the pod's), in practice one per CronJob or fewer.
fn names_a_job<'t, T: Tree<'t>>(m: T) -> bool {
    m.get("kind").and_then(T::as_str) == Some("Job")
        && m.get("apiVersion").and_then(T::as_str) == Some("batch/v1")
}

/// Keys whose string value is where the object was scheduled: one of a few hundred nodes for
/// every owner's objects alike.
const PLACEMENT_KEYS: [&str; 2] = ["nodeName", "nominatedNodeName"];

/// True when the constant member `key: c` of an object is written to the body rather than
/// kept in the object's template.
///
/// Decision: members whose values vary independently of the rest of the template go to the
/// body, where they cost their id (1 to 3 bytes per object; the tag is in the template); in
/// the template they would multiply the templates around them by the number of their
/// variants. That is every constant object or array (labels, annotations, owner references, a
/// spec of constants: every owner's labels x every owner's references x a label that differs
/// per pod made a metadata template per owner and variant, 7,268 at 20,000 realistic pods,
/// most used by one to five pods), and the node a pod runs on (a pod spec's template per owner
/// and node, nearly one per pod).
fn member_in_body(key: &str, c: &Const) -> bool {
    match c.bytes()[0] {
        T_OBJ | T_ARR_CONST | T_ARR_OBJ1 => true,
        T_ATOM_STR | T_STR => PLACEMENT_KEYS.contains(&key),
        _ => false,
    }
}

fn number(n: Num) -> Const {
    match n {
        Num::U64(u) if u <= SMALL_MAX => Const::tag(T_SMALL + u as u8),
        Num::U64(u) => {
            let mut c = Const::tag(T_U64);
            c.varint(u);
            c
        }
        Num::I64(i) => {
            let mut c = Const::tag(T_NEG);
            c.varint(!(i as u64));
            c
        }
        Num::F64(f) => {
            let mut c = Const::tag(T_F64);
            c.extend(&f.to_le_bytes());
            c
        }
    }
}
