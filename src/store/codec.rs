//! The compact encoding of one stored object.
//!
//! An encoded object ("blob") is a header and a body:
//!
//! * header: store revision, namespace (string atom), name (inline, or generateName prefix atom
//!   plus the packed 5-character random suffix) and upstream resourceVersion.
//! * body: the JSON tree split into *templates* and *holes*. Every JSON object becomes a
//!   template atom — its keys (string atoms) and, for each key, either a constant value or a
//!   hole — and the body holds only the values of the holes, depth first. Constants are null,
//!   booleans, numbers, ordinary strings, strings equal to the object's name, namespace or
//!   resourceVersion, and nested containers without holes (template or constant-array atoms):
//!   labels, owner references, condition types and the like are kept once for every object
//!   that has the same ones. An array with holes gets a template too (per element: a
//!   constant, a hole, or an object of a given template), so a list of conditions costs only
//!   its timestamps. Holes are what makes an object unique, each in a compact form: UUIDs
//!   (16 bytes), timestamps (seconds as a varint delta from the previous timestamp of the
//!   object), decimal counters, IPv4 addresses, generated names (prefix atom + 3 bytes), hex
//!   digests (32 bytes).
//!
//! A value is one tag byte and a payload (varints are LEB128). References to atoms are
//! counted: whatever holds bytes naming an atom (a blob, a template, an array) holds one
//! reference on it, released through [`release_blob`] / [`release_body`].

use serde_json::{Map, Number, Value};

use super::atoms::{AtomId, Atoms, KIND_ARRAY, KIND_ARRAY_TEMPLATE, KIND_STR, KIND_TEMPLATE};
use super::scalar::{
    format_hex64, format_ipv4, format_timestamp, format_uuid, pack_suffix, parse_ipv4,
    parse_timestamp, parse_uint_str, parse_uuid, split_generated_name, split_hex64, unpack_suffix,
    Timestamp, GEN_SUFFIX_LEN, PACKED_SUFFIX_LEN, TS_BASE,
};

// Value tags. Constants (allowed in templates and constant arrays, and in the body):
const T_NULL: u8 = 0;
const T_FALSE: u8 = 1;
const T_TRUE: u8 = 2;
const T_U64: u8 = 3; // varint
const T_NEG: u8 = 4; // varint of !i (i < 0)
const T_F64: u8 = 5; // 8 bytes LE
const T_STR: u8 = 6; // varint length + UTF-8
const T_ATOM_STR: u8 = 7; // string atom id
const T_UUID: u8 = 8; // 16 bytes
const T_OBJ: u8 = 9; // template atom id; in the body, the values of its holes follow
const T_ARR_CONST: u8 = 10; // constant-array atom id
const T_ARR_EMPTY: u8 = 11;
const T_KEY_NAME: u8 = 12; // the object's name
const T_KEY_NS: u8 = 13; // the object's namespace
const T_KEY_RV: u8 = 14; // the object's resourceVersion
                         // Body only:
const T_ARR: u8 = 15; // array template atom id, then the values of its holes
const T_UINT_STR: u8 = 16; // varint
const T_TS: u8 = 17; // zigzag varint delta seconds
const T_TS_FRAC: u8 = 18; // zigzag varint delta seconds, digit count, varint fraction
const T_IPV4: u8 = 19; // 4 bytes
const T_IPV4_CIDR: u8 = 20; // 4 bytes + prefix length
const T_GEN_NAME: u8 = 21; // prefix atom id + packed suffix
const T_HEX64: u8 = 22; // varint (0: no prefix, else prefix atom id + 1) + 32 bytes
/// Unsigned integers 0..=63 in the tag itself.
const T_SMALL: u8 = 0x80;
const SMALL_MAX: u64 = 63;
/// In a template: an object of the given template id, whose holes are in the body.
const OBJ_HOLE: u8 = 0xFE;
/// In a template: the value is in the body.
const HOLE: u8 = 0xFF;

const NAME_INLINE: u8 = 0;
const NAME_GENERATED: u8 = 1;
const RV_NONE: u8 = 0;
const RV_UINT: u8 = 1;
const RV_STR: u8 = 2;

/// Objects nested deeper than this are refused (encoding and decoding recurse).
pub(crate) const MAX_DEPTH: usize = 256;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn get_varint(buf: &[u8], p: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    loop {
        let b = buf[*p];
        *p += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return v;
        }
        shift += 7;
    }
}

fn get_id(buf: &[u8], p: &mut usize) -> AtomId {
    get_varint(buf, p) as AtomId
}

fn zigzag(i: i64) -> u64 {
    ((i << 1) ^ (i >> 63)) as u64
}

fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

fn utf8(b: &[u8]) -> &str {
    std::str::from_utf8(b).expect("encoded strings are UTF-8")
}

/// Identity of an object: its key and upstream resourceVersion, kept in the header and
/// referenced from the body.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Identity<'a> {
    pub namespace: Option<&'a str>,
    pub name: &'a str,
    pub resource_version: Option<&'a str>,
}

// ---------------------------------------------------------------------------------------------
// Header

pub(crate) fn encode_header(
    atoms: &mut Atoms,
    revision: u64,
    id: &Identity<'_>,
    out: &mut Vec<u8>,
) {
    put_varint(out, revision);
    match id.namespace {
        None => out.push(0),
        Some(ns) => {
            let (a, _) = atoms.acquire(KIND_STR, ns.as_bytes());
            put_varint(out, u64::from(a) + 1);
        }
    }
    match split_generated_name(id.name) {
        Some((prefix, suffix)) => {
            out.push(NAME_GENERATED);
            let (a, _) = atoms.acquire(KIND_STR, prefix.as_bytes());
            put_varint(out, u64::from(a));
            out.extend_from_slice(&pack_suffix(&suffix));
        }
        None => {
            out.push(NAME_INLINE);
            put_varint(out, id.name.len() as u64);
            out.extend_from_slice(id.name.as_bytes());
        }
    }
    match id.resource_version {
        None => out.push(RV_NONE),
        Some(rv) => match parse_uint_str(rv) {
            Some(n) => {
                out.push(RV_UINT);
                put_varint(out, n);
            }
            None => {
                out.push(RV_STR);
                put_varint(out, rv.len() as u64);
                out.extend_from_slice(rv.as_bytes());
            }
        },
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Name<'b> {
    Inline(&'b str),
    Generated {
        prefix: AtomId,
        suffix: [u8; GEN_SUFFIX_LEN],
    },
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum Rv<'b> {
    None,
    Uint(u64),
    Str(&'b str),
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Header<'b> {
    pub revision: u64,
    pub namespace: Option<AtomId>,
    pub name: Name<'b>,
    pub rv: Rv<'b>,
    pub body_start: usize,
}

pub(crate) fn parse_header(blob: &[u8]) -> Header<'_> {
    let mut p = 0;
    let revision = get_varint(blob, &mut p);
    let namespace = match get_varint(blob, &mut p) {
        0 => None,
        n => Some((n - 1) as AtomId),
    };
    let kind = blob[p];
    p += 1;
    let name = if kind == NAME_GENERATED {
        let prefix = get_id(blob, &mut p);
        let suffix = unpack_suffix(&blob[p..p + PACKED_SUFFIX_LEN]);
        p += PACKED_SUFFIX_LEN;
        Name::Generated { prefix, suffix }
    } else {
        let len = get_varint(blob, &mut p) as usize;
        let s = utf8(&blob[p..p + len]);
        p += len;
        Name::Inline(s)
    };
    let kind = blob[p];
    p += 1;
    let rv = match kind {
        RV_UINT => Rv::Uint(get_varint(blob, &mut p)),
        RV_STR => {
            let len = get_varint(blob, &mut p) as usize;
            let s = utf8(&blob[p..p + len]);
            p += len;
            Rv::Str(s)
        }
        _ => Rv::None,
    };
    Header {
        revision,
        namespace,
        name,
        rv,
        body_start: p,
    }
}

impl Name<'_> {
    pub(crate) fn to_string(self, atoms: &Atoms) -> String {
        match self {
            Name::Inline(s) => s.to_owned(),
            Name::Generated { prefix, suffix } => {
                let prefix = atoms.str(prefix);
                let mut s = String::with_capacity(prefix.len() + suffix.len());
                s.push_str(prefix);
                s.push_str(utf8(&suffix));
                s
            }
        }
    }

    pub(crate) fn eq_str(self, atoms: &Atoms, name: &str) -> bool {
        match self {
            Name::Inline(s) => s == name,
            Name::Generated { prefix, suffix } => {
                let prefix = atoms.str(prefix);
                name.len() == prefix.len() + suffix.len()
                    && name.starts_with(prefix)
                    && name.as_bytes()[prefix.len()..] == suffix
            }
        }
    }
}

impl Rv<'_> {
    pub(crate) fn matches(self, rv: Option<&str>) -> bool {
        match (self, rv) {
            (Rv::None, None) => true,
            (Rv::Uint(n), Some(s)) => parse_uint_str(s) == Some(n),
            (Rv::Str(a), Some(b)) => a == b,
            _ => false,
        }
    }

    pub(crate) fn to_string(self) -> Option<String> {
        match self {
            Rv::None => None,
            Rv::Uint(n) => Some(n.to_string()),
            Rv::Str(s) => Some(s.to_owned()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Encoding of a constant: a tag and at most 16 bytes (UUID) or a 10-byte varint.
#[derive(Clone, Copy)]
struct Const {
    len: u8,
    buf: [u8; 20],
}

impl Const {
    fn new() -> Self {
        Self {
            len: 0,
            buf: [0; 20],
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
    /// The value was written to the body.
    Hole,
    /// An object with holes, of this template: the values of its holes were written to the
    /// body, the enclosing container says which template they belong to.
    ObjHoles(AtomId),
}

/// True when `v` nests containers deeper than `max`.
pub(crate) fn too_deep(v: &Value, max: usize) -> bool {
    let mut stack = vec![(v, 0usize)];
    while let Some((v, d)) = stack.pop() {
        if d > max {
            return true;
        }
        match v {
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            Value::Object(m) => stack.extend(m.values().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    false
}

/// Encodes the body of `root`, taking references on the atoms it names.
pub(crate) fn encode_body(
    atoms: &mut Atoms,
    id: &Identity<'_>,
    root: &Map<String, Value>,
) -> Vec<u8> {
    let mut enc = Encoder {
        atoms,
        id,
        last_ts: TS_BASE,
        out: Vec::with_capacity(128),
    };
    match enc.object(root, false) {
        Enc::Const(c) => enc.out.extend_from_slice(c.bytes()),
        Enc::ObjHoles(tid) => enc.tag_id_at(0, T_OBJ, tid),
        Enc::Hole => unreachable!("objects are constants or have holes"),
    }
    enc.out
}

struct Encoder<'a, 'i> {
    atoms: &'a mut Atoms,
    id: &'a Identity<'i>,
    last_ts: i64,
    out: Vec<u8>,
}

impl Encoder<'_, '_> {
    fn value(&mut self, v: &Value, owner_refs: bool) -> Enc {
        match v {
            Value::Null => Enc::Const(Const::tag(T_NULL)),
            Value::Bool(false) => Enc::Const(Const::tag(T_FALSE)),
            Value::Bool(true) => Enc::Const(Const::tag(T_TRUE)),
            Value::Number(n) => Enc::Const(number(n)),
            Value::String(s) => self.string(s, owner_refs),
            Value::Array(a) => self.array(a, owner_refs),
            Value::Object(m) => self.object(m, owner_refs),
        }
    }

    /// Inserts `tag id` into the body at `pos` (before the holes of what it introduces).
    fn tag_id_at(&mut self, pos: usize, tag: u8, id: AtomId) {
        let head = Const::tag_id(tag, id);
        self.out.splice(pos..pos, head.bytes().iter().copied());
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
        if let Some(u) = parse_uuid(s) {
            if owner_refs {
                // The owner's UID is shared by all its objects: keep it in the template.
                let mut c = Const::tag(T_UUID);
                c.extend(&u);
                return Enc::Const(c);
            }
            self.out.push(T_UUID);
            self.out.extend_from_slice(&u);
            return Enc::Hole;
        }
        if owner_refs {
            return Enc::Const(self.const_string(s));
        }
        if let Some(t) = parse_timestamp(s) {
            let delta = t.secs.wrapping_sub(self.last_ts);
            self.last_ts = t.secs;
            self.out
                .push(if t.frac.is_some() { T_TS_FRAC } else { T_TS });
            put_varint(&mut self.out, zigzag(delta));
            if let Some((digits, frac)) = t.frac {
                self.out.push(digits);
                put_varint(&mut self.out, u64::from(frac));
            }
            return Enc::Hole;
        }
        if let Some(n) = parse_uint_str(s) {
            self.out.push(T_UINT_STR);
            put_varint(&mut self.out, n);
            return Enc::Hole;
        }
        if let Some((ip, prefix)) = parse_ipv4(s) {
            self.out.push(if prefix.is_some() {
                T_IPV4_CIDR
            } else {
                T_IPV4
            });
            self.out.extend_from_slice(&ip);
            self.out.extend(prefix);
            return Enc::Hole;
        }
        if let Some((prefix, suffix)) = split_generated_name(s) {
            let (a, _) = self.atoms.acquire(KIND_STR, prefix.as_bytes());
            self.out.push(T_GEN_NAME);
            put_varint(&mut self.out, u64::from(a));
            self.out.extend_from_slice(&pack_suffix(&suffix));
            return Enc::Hole;
        }
        if let Some((prefix, digest)) = split_hex64(s) {
            self.out.push(T_HEX64);
            if prefix.is_empty() {
                self.out.push(0);
            } else {
                let (a, _) = self.atoms.acquire(KIND_STR, prefix.as_bytes());
                put_varint(&mut self.out, u64::from(a) + 1);
            }
            self.out.extend_from_slice(&digest);
            return Enc::Hole;
        }
        Enc::Const(self.const_string(s))
    }

    fn const_string(&mut self, s: &str) -> Const {
        if s.len() <= 3 {
            let mut c = Const::tag(T_STR);
            c.push(s.len() as u8);
            c.extend(s.as_bytes());
            c
        } else {
            let (a, _) = self.atoms.acquire(KIND_STR, s.as_bytes());
            Const::tag_id(T_ATOM_STR, a)
        }
    }

    fn object(&mut self, m: &Map<String, Value>, owner_refs: bool) -> Enc {
        let mut template = Vec::with_capacity(1 + m.len() * 4);
        put_varint(&mut template, m.len() as u64);
        let mut holes = false;
        for (k, v) in m {
            let (key, _) = self.atoms.acquire(KIND_STR, k.as_bytes());
            put_varint(&mut template, u64::from(key));
            let pos = self.out.len();
            match self.value(v, owner_refs || k == "ownerReferences") {
                Enc::Const(c) => template.extend_from_slice(c.bytes()),
                Enc::Hole => {
                    template.push(HOLE);
                    holes = true;
                }
                Enc::ObjHoles(tid) => {
                    // The object's template id goes to the body: putting it in this template
                    // would multiply the number of templates (e.g. metadata x node name).
                    self.tag_id_at(pos, T_OBJ, tid);
                    template.push(HOLE);
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

    fn array(&mut self, a: &[Value], owner_refs: bool) -> Enc {
        if a.is_empty() {
            return Enc::Const(Const::tag(T_ARR_EMPTY));
        }
        let pos = self.out.len();
        let mut template = Vec::with_capacity(1 + a.len() * 2);
        put_varint(&mut template, a.len() as u64);
        let mut holes = false;
        for v in a {
            match self.value(v, owner_refs) {
                Enc::Const(c) => template.extend_from_slice(c.bytes()),
                Enc::Hole => {
                    template.push(HOLE);
                    holes = true;
                }
                Enc::ObjHoles(tid) => {
                    template.push(OBJ_HOLE);
                    put_varint(&mut template, u64::from(tid));
                    holes = true;
                }
            }
        }
        if holes {
            let id = self.intern(KIND_ARRAY_TEMPLATE, &template);
            self.tag_id_at(pos, T_ARR, id);
            Enc::Hole
        } else {
            let id = self.intern(KIND_ARRAY, &template);
            Enc::Const(Const::tag_id(T_ARR_CONST, id))
        }
    }

    /// Interns a template or array whose payload already holds references on its children;
    /// when an equal atom exists, those references are returned (the existing atom has its own).
    fn intern(&mut self, kind: u8, payload: &[u8]) -> AtomId {
        let (id, created) = self.atoms.acquire(kind, payload);
        if !created {
            let mut ids = Vec::new();
            atom_children(kind, payload, &mut ids);
            release_all(self.atoms, ids);
        }
        id
    }
}

fn number(n: &Number) -> Const {
    if let Some(u) = n.as_u64() {
        if u <= SMALL_MAX {
            return Const::tag(T_SMALL + u as u8);
        }
        let mut c = Const::tag(T_U64);
        c.varint(u);
        c
    } else if let Some(i) = n.as_i64() {
        let mut c = Const::tag(T_NEG);
        c.varint(!(i as u64));
        c
    } else {
        let mut c = Const::tag(T_F64);
        c.extend(&n.as_f64().unwrap_or(0.0).to_le_bytes());
        c
    }
}

// ---------------------------------------------------------------------------------------------
// Reference walking and release

/// Skips the constant at `buf[*p]`, passing the atoms it names to `on_ref`.
fn const_refs(buf: &[u8], p: &mut usize, on_ref: &mut impl FnMut(AtomId)) {
    let tag = buf[*p];
    *p += 1;
    match tag {
        T_NULL | T_FALSE | T_TRUE | T_ARR_EMPTY | T_KEY_NAME | T_KEY_NS | T_KEY_RV => {}
        T_U64 | T_NEG => {
            get_varint(buf, p);
        }
        T_F64 => *p += 8,
        T_STR => {
            let len = get_varint(buf, p) as usize;
            *p += len;
        }
        T_UUID => *p += 16,
        T_ATOM_STR | T_OBJ | T_ARR_CONST => on_ref(get_id(buf, p)),
        t if (T_SMALL..=T_SMALL + SMALL_MAX as u8).contains(&t) => {}
        t => unreachable!("tag {t} is not a constant"),
    }
}

/// The atoms a template or constant-array payload references.
fn atom_children(kind: u8, payload: &[u8], ids: &mut Vec<AtomId>) {
    let mut p = 0;
    let n = get_varint(payload, &mut p);
    for _ in 0..n {
        if kind == KIND_TEMPLATE {
            ids.push(get_id(payload, &mut p));
        }
        match payload[p] {
            HOLE => p += 1,
            OBJ_HOLE => {
                p += 1;
                ids.push(get_id(payload, &mut p));
            }
            _ => const_refs(payload, &mut p, &mut |id| ids.push(id)),
        }
    }
}

/// Skips the body value at `s[*p]`, collecting the atoms it names.
fn body_refs(atoms: &Atoms, s: &[u8], p: &mut usize, ids: &mut Vec<AtomId>) {
    let tag = s[*p];
    *p += 1;
    match tag {
        T_OBJ => {
            let tid = get_id(s, p);
            ids.push(tid);
            object_hole_refs(atoms, tid, s, p, ids);
        }
        T_ARR => {
            let id = get_id(s, p);
            ids.push(id);
            let t = atoms.payload(id);
            let mut q = 0;
            let n = get_varint(t, &mut q);
            for _ in 0..n {
                match t[q] {
                    HOLE => {
                        q += 1;
                        body_refs(atoms, s, p, ids);
                    }
                    OBJ_HOLE => {
                        q += 1;
                        let tid = get_id(t, &mut q);
                        object_hole_refs(atoms, tid, s, p, ids);
                    }
                    // The template holds the references of its constants.
                    _ => const_refs(t, &mut q, &mut |_| {}),
                }
            }
        }
        T_UINT_STR | T_TS => {
            get_varint(s, p);
        }
        T_TS_FRAC => {
            get_varint(s, p);
            *p += 1;
            get_varint(s, p);
        }
        T_IPV4 => *p += 4,
        T_IPV4_CIDR => *p += 5,
        T_GEN_NAME => {
            ids.push(get_id(s, p));
            *p += PACKED_SUFFIX_LEN;
        }
        T_HEX64 => {
            let v = get_varint(s, p);
            if v > 0 {
                ids.push((v - 1) as AtomId);
            }
            *p += 32;
        }
        _ => {
            *p -= 1;
            const_refs(s, p, &mut |id| ids.push(id));
        }
    }
}

/// Skips the hole values of an object of template `tid`, collecting the atoms they name.
fn object_hole_refs(atoms: &Atoms, tid: AtomId, s: &[u8], p: &mut usize, ids: &mut Vec<AtomId>) {
    let t = atoms.payload(tid);
    let mut q = 0;
    let n = get_varint(t, &mut q);
    for _ in 0..n {
        get_varint(t, &mut q);
        if t[q] == HOLE {
            q += 1;
            body_refs(atoms, s, p, ids);
        } else {
            const_refs(t, &mut q, &mut |_| {});
        }
    }
}

/// Drops one reference on each atom, freeing (recursively) those that are no longer used.
fn release_all(atoms: &mut Atoms, mut ids: Vec<AtomId>) {
    while let Some(id) = ids.pop() {
        if let Some(bytes) = atoms.release(id) {
            if bytes[0] != KIND_STR {
                atom_children(bytes[0], &bytes[1..], &mut ids);
            }
        }
    }
}

/// Releases the references held by a body that was encoded but not kept.
pub(crate) fn release_body(atoms: &mut Atoms, body: &[u8]) {
    let mut ids = Vec::new();
    let mut p = 0;
    body_refs(atoms, body, &mut p, &mut ids);
    debug_assert_eq!(p, body.len());
    release_all(atoms, ids);
}

/// The atoms a stored blob references (header and body), once per reference.
fn blob_refs(atoms: &Atoms, blob: &[u8]) -> Vec<AtomId> {
    let h = parse_header(blob);
    let mut ids = Vec::new();
    ids.extend(h.namespace);
    if let Name::Generated { prefix, .. } = h.name {
        ids.push(prefix);
    }
    let mut p = h.body_start;
    body_refs(atoms, blob, &mut p, &mut ids);
    debug_assert_eq!(p, blob.len());
    ids
}

/// Releases every reference held by a stored blob.
pub(crate) fn release_blob(atoms: &mut Atoms, blob: &[u8]) {
    let ids = blob_refs(atoms, blob);
    release_all(atoms, ids);
}

/// Rough bookkeeping cost of one atom besides its bytes (entry, table slot, allocation).
const ATOM_OVERHEAD: usize = 40;

/// About how many bytes stay in memory only because of this blob: the blob itself and the
/// atoms nothing else references.
pub(crate) fn exclusive_bytes(atoms: &Atoms, blob: &[u8]) -> usize {
    let mut total = blob.len();
    let mut ids = blob_refs(atoms, blob);
    while let Some(id) = ids.pop() {
        if atoms.refs(id) == 1 {
            let payload = atoms.payload(id);
            total += payload.len() + ATOM_OVERHEAD;
            let kind = atoms.kind(id);
            if kind != KIND_STR {
                atom_children(kind, payload, &mut ids);
            }
        }
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Decodes the body of a blob whose identity is already known.
pub(crate) fn decode_body(atoms: &Atoms, body: &[u8], id: &Identity<'_>) -> Value {
    let mut dec = Decoder {
        atoms,
        s: body,
        p: 0,
        last_ts: TS_BASE,
        id,
    };
    dec.body_value()
}

/// Decodes a whole blob.
pub(crate) fn decode_blob(atoms: &Atoms, blob: &[u8]) -> Value {
    let h = parse_header(blob);
    let name = h.name.to_string(atoms);
    let rv = h.rv.to_string();
    let id = Identity {
        namespace: h.namespace.map(|a| atoms.str(a)),
        name: &name,
        resource_version: rv.as_deref(),
    };
    decode_body(atoms, &blob[h.body_start..], &id)
}

struct Decoder<'a, 'i> {
    atoms: &'a Atoms,
    s: &'a [u8],
    p: usize,
    last_ts: i64,
    id: &'a Identity<'i>,
}

impl<'a> Decoder<'a, '_> {
    fn body_value(&mut self) -> Value {
        let s = self.s;
        let tag = s[self.p];
        self.p += 1;
        let text = match tag {
            T_OBJ => {
                let tid = get_id(s, &mut self.p);
                return self.object(tid);
            }
            T_ARR => {
                let t = self.atoms.payload(get_id(s, &mut self.p));
                let mut q = 0;
                let n = get_varint(t, &mut q) as usize;
                let mut a = Vec::with_capacity(n);
                for _ in 0..n {
                    a.push(match t[q] {
                        HOLE => {
                            q += 1;
                            self.body_value()
                        }
                        OBJ_HOLE => {
                            q += 1;
                            let tid = get_id(t, &mut q);
                            self.object(tid)
                        }
                        _ => self.const_value(t, &mut q),
                    });
                }
                return Value::Array(a);
            }
            T_UINT_STR => get_varint(s, &mut self.p).to_string(),
            T_TS | T_TS_FRAC => {
                let secs = self
                    .last_ts
                    .wrapping_add(unzigzag(get_varint(s, &mut self.p)));
                self.last_ts = secs;
                let frac = (tag == T_TS_FRAC).then(|| {
                    let digits = s[self.p];
                    self.p += 1;
                    (digits, get_varint(s, &mut self.p) as u32)
                });
                format_timestamp(Timestamp { secs, frac })
            }
            T_IPV4 => {
                self.p += 4;
                format_ipv4(&s[self.p - 4..self.p], None)
            }
            T_IPV4_CIDR => {
                self.p += 5;
                format_ipv4(&s[self.p - 5..self.p - 1], Some(s[self.p - 1]))
            }
            T_GEN_NAME => {
                let prefix = self.atoms.str(get_id(s, &mut self.p));
                let suffix = unpack_suffix(&s[self.p..self.p + PACKED_SUFFIX_LEN]);
                self.p += PACKED_SUFFIX_LEN;
                let mut name = String::with_capacity(prefix.len() + GEN_SUFFIX_LEN);
                name.push_str(prefix);
                name.push_str(utf8(&suffix));
                name
            }
            T_HEX64 => {
                let prefix = match get_varint(s, &mut self.p) {
                    0 => "",
                    v => self.atoms.str((v - 1) as AtomId),
                };
                self.p += 32;
                format_hex64(prefix, &s[self.p - 32..self.p])
            }
            _ => {
                self.p -= 1;
                let mut p = self.p;
                let v = self.const_value(s, &mut p);
                self.p = p;
                return v;
            }
        };
        Value::String(text)
    }

    /// An object of template `tid`, its holes read from the body.
    fn object(&mut self, tid: AtomId) -> Value {
        let t = self.atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        let mut m = Map::new();
        for _ in 0..n {
            let key = self.atoms.str(get_id(t, &mut q)).to_owned();
            let v = if t[q] == HOLE {
                q += 1;
                self.body_value()
            } else {
                self.const_value(t, &mut q)
            };
            m.insert(key, v);
        }
        Value::Object(m)
    }

    /// The constant at `buf[*p]` (in a template, an array or the body).
    fn const_value(&self, buf: &[u8], p: &mut usize) -> Value {
        let atoms: &'a Atoms = self.atoms;
        let tag = buf[*p];
        *p += 1;
        match tag {
            T_NULL => Value::Null,
            T_FALSE => Value::Bool(false),
            T_TRUE => Value::Bool(true),
            T_U64 => Value::Number(get_varint(buf, p).into()),
            T_NEG => Value::Number((!get_varint(buf, p) as i64).into()),
            T_F64 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(&buf[*p..*p + 8]);
                *p += 8;
                Number::from_f64(f64::from_le_bytes(b)).map_or(Value::Null, Value::Number)
            }
            T_STR => {
                let len = get_varint(buf, p) as usize;
                *p += len;
                Value::String(utf8(&buf[*p - len..*p]).to_owned())
            }
            T_ATOM_STR => Value::String(atoms.str(get_id(buf, p)).to_owned()),
            T_UUID => {
                *p += 16;
                Value::String(format_uuid(&buf[*p - 16..*p]))
            }
            T_KEY_NAME => Value::String(self.id.name.to_owned()),
            T_KEY_NS => Value::String(self.id.namespace.unwrap_or_default().to_owned()),
            T_KEY_RV => Value::String(self.id.resource_version.unwrap_or_default().to_owned()),
            T_OBJ => {
                let t = atoms.payload(get_id(buf, p));
                let mut q = 0;
                let n = get_varint(t, &mut q);
                let mut m = Map::new();
                for _ in 0..n {
                    let key = atoms.str(get_id(t, &mut q)).to_owned();
                    m.insert(key, self.const_value(t, &mut q));
                }
                Value::Object(m)
            }
            T_ARR_CONST => {
                let a = atoms.payload(get_id(buf, p));
                let mut q = 0;
                let n = get_varint(a, &mut q) as usize;
                let mut out = Vec::with_capacity(n);
                for _ in 0..n {
                    out.push(self.const_value(a, &mut q));
                }
                Value::Array(out)
            }
            T_ARR_EMPTY => Value::Array(Vec::new()),
            t if (T_SMALL..=T_SMALL + SMALL_MAX as u8).contains(&t) => {
                Value::Number(u64::from(t - T_SMALL).into())
            }
            t => unreachable!("tag {t} is not a constant"),
        }
    }
}
