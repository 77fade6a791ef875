//! Decoding a body back into JSON: the templates give the structure and the constants, the
//! body the values of the holes, in the order they were written.

use serde_json::{Map, Number, Value};

use super::header::parse_header;
use super::varint::{get_id, get_varint, unzigzag};
use super::{
    utf8, Identity, HOLE, OBJ_HOLE, SMALL_MAX, T_ARR, T_ARR_CONST, T_ARR_EMPTY, T_ARR_OBJ1,
    T_ATOM_STR, T_F64, T_FALSE, T_GEN_NAME, T_HEX64, T_IPV4, T_IPV4_CIDR, T_KEY_GEN_PREFIX,
    T_KEY_NAME, T_KEY_NAME_AFFIX, T_KEY_NAME_HASH, T_KEY_NAME_HEAD, T_KEY_NAME_ORDINAL, T_KEY_NS,
    T_KEY_RV, T_NEG, T_NULL, T_OBJ, T_SMALL, T_STR, T_TRUE, T_TS, T_TS_FRAC, T_U64, T_UINT_STR,
    T_UUID,
};
use crate::store::atoms::{AtomId, Atoms, KIND_STR_LZ4};
use crate::store::packed;
use crate::store::scalar::{
    format_hex64, format_ipv4, format_timestamp, format_uuid, name_hash, name_ordinal,
    unpack_suffix, Timestamp, GEN_SUFFIX_LEN, PACKED_SUFFIX_LEN, TS_BASE,
};

/// Decodes the body of a blob whose identity is already known.
pub(crate) fn decode_body(atoms: &Atoms, body: &[u8], id: &Identity<'_>) -> Value {
    Decoder::new(atoms, body, id).body_value()
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

/// A cursor in a body (`path` walks it too).
pub(super) struct Decoder<'a, 'i> {
    pub(super) atoms: &'a Atoms,
    pub(super) s: &'a [u8],
    pub(super) p: usize,
    pub(super) last_ts: i64,
    pub(super) id: &'a Identity<'i>,
}

impl<'a, 'i> Decoder<'a, 'i> {
    pub(super) fn new(atoms: &'a Atoms, body: &'a [u8], id: &'a Identity<'i>) -> Self {
        Decoder {
            atoms,
            s: body,
            p: 0,
            last_ts: TS_BASE,
            id,
        }
    }
}

impl<'a> Decoder<'a, '_> {
    /// The body value at the cursor, its tag first (the root of a body).
    pub(super) fn body_value(&mut self) -> Value {
        let tag = self.s[self.p];
        self.p += 1;
        self.hole_value(tag)
    }

    /// The value of a hole whose template gives `tag`: its payload is at the cursor.
    pub(super) fn hole_value(&mut self, tag: u8) -> Value {
        let s = self.s;
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
                            q += 2;
                            self.hole_value(t[q - 1])
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
            _ => {
                let mut p = self.p;
                let v = self.const_payload(tag, s, &mut p);
                self.p = p;
                return v;
            }
        };
        Value::String(text)
    }

    /// An object of template `tid`, its holes read from the body.
    pub(super) fn object(&mut self, tid: AtomId) -> Value {
        let t = self.atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        let mut m = Map::new();
        for _ in 0..n {
            let key = self.atoms.str(get_id(t, &mut q)).to_owned();
            let v = if t[q] == HOLE {
                q += 2;
                self.hole_value(t[q - 1])
            } else {
                self.const_value(t, &mut q)
            };
            m.insert(key, v);
        }
        Value::Object(m)
    }

    /// The constant object of template `tid` (a template without holes).
    fn const_object(&self, tid: AtomId) -> Value {
        let atoms = self.atoms;
        let t = atoms.payload(tid);
        let mut q = 0;
        let n = get_varint(t, &mut q);
        let mut m = Map::new();
        for _ in 0..n {
            let key = atoms.str(get_id(t, &mut q)).to_owned();
            m.insert(key, self.const_value(t, &mut q));
        }
        Value::Object(m)
    }

    /// The constant at `buf[*p]` (in a template, an array or the body).
    pub(super) fn const_value(&self, buf: &[u8], p: &mut usize) -> Value {
        let tag = buf[*p];
        *p += 1;
        self.const_payload(tag, buf, p)
    }

    /// The constant of tag `tag` whose payload is at `buf[*p]`.
    pub(super) fn const_payload(&self, tag: u8, buf: &[u8], p: &mut usize) -> Value {
        let atoms: &'a Atoms = self.atoms;
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
            T_ATOM_STR => {
                let id = get_id(buf, p);
                Value::String(match atoms.kind(id) {
                    KIND_STR_LZ4 => packed::unpack(atoms.payload(id)),
                    _ => atoms.str(id).to_owned(),
                })
            }
            T_UUID => {
                *p += 16;
                Value::String(format_uuid(&buf[*p - 16..*p]))
            }
            T_HEX64 => {
                let prefix = match get_varint(buf, p) {
                    0 => "",
                    v => atoms.str((v - 1) as AtomId),
                };
                *p += 32;
                Value::String(format_hex64(prefix, &buf[*p - 32..*p]))
            }
            T_KEY_NAME | T_KEY_NAME_AFFIX | T_KEY_GEN_PREFIX | T_KEY_NAME_HEAD
            | T_KEY_NAME_HASH | T_KEY_NAME_ORDINAL | T_KEY_NS | T_KEY_RV => {
                self.identity_const(tag, buf, p)
            }
            T_OBJ => self.const_object(get_id(buf, p)),
            T_ARR_OBJ1 => Value::Array(vec![self.const_object(get_id(buf, p))]),
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

    /// A constant made of the object's identity (name, namespace, resourceVersion), of tag
    /// `tag`, whose payload is at `buf[*p]`.
    fn identity_const(&self, tag: u8, buf: &[u8], p: &mut usize) -> Value {
        match tag {
            T_KEY_NAME => Value::String(self.id.name.to_owned()),
            T_KEY_NAME_AFFIX => {
                let (Value::String(mut s), Value::String(suffix)) =
                    (self.const_value(buf, p), self.const_value(buf, p))
                else {
                    unreachable!("a name's affixes are strings")
                };
                s.push_str(self.id.name);
                s.push_str(&suffix);
                Value::String(s)
            }
            T_KEY_GEN_PREFIX => {
                let name = self.id.name;
                Value::String(name[..name.len() - GEN_SUFFIX_LEN].to_owned())
            }
            T_KEY_NAME_HEAD => {
                let len = get_varint(buf, p) as usize;
                Value::String(self.id.name[..len].to_owned())
            }
            T_KEY_NAME_HASH => Value::String(
                name_hash(self.id.name)
                    .expect("encoded for a generated name with a hash")
                    .to_owned(),
            ),
            T_KEY_NAME_ORDINAL => Value::String(
                name_ordinal(self.id.name)
                    .expect("encoded for a name that ends in an ordinal")
                    .to_owned(),
            ),
            T_KEY_NS => Value::String(self.id.namespace.unwrap_or_default().to_owned()),
            T_KEY_RV => Value::String(self.id.resource_version.unwrap_or_default().to_owned()),
            t => unreachable!("tag {t} is not made of the identity"),
        }
    }
}
