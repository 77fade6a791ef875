//! Compact forms of the strings that make most objects unique: UUIDs, RFC 3339 timestamps,
//! decimal counters, IPv4 addresses, generated names and hex digests.
//!
//! Every `parse_*` accepts only the canonical spelling, so that formatting the parsed value
//! gives back exactly the same string. Anything else stays an ordinary string.

use std::fmt::Write as _;

/// Seconds since the Unix epoch that timestamps are counted from (late 2023): keeps the first
/// timestamp of an object at four varint bytes for years.
pub(crate) const TS_BASE: i64 = 1_700_000_000;

/// The characters Kubernetes uses for random name suffixes (`generateName`).
const GEN_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the random suffix the API server appends to `generateName`.
pub(crate) const GEN_SUFFIX_LEN: usize = 5;

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn push_hex(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
}

/// Lowercase hex digits (even count) into bytes.
fn parse_hex(s: &[u8], out: &mut [u8]) -> Option<()> {
    debug_assert_eq!(s.len(), out.len() * 2);
    for (i, pair) in s.chunks_exact(2).enumerate() {
        out[i] = (hex_val(pair[0])? << 4) | hex_val(pair[1])?;
    }
    Some(())
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` in lowercase hex.
pub(crate) fn parse_uuid(s: &str) -> Option<[u8; 16]> {
    let b = s.as_bytes();
    if b.len() != 36 || b[8] != b'-' || b[13] != b'-' || b[18] != b'-' || b[23] != b'-' {
        return None;
    }
    let mut out = [0u8; 16];
    parse_hex(&b[0..8], &mut out[0..4])?;
    parse_hex(&b[9..13], &mut out[4..6])?;
    parse_hex(&b[14..18], &mut out[6..8])?;
    parse_hex(&b[19..23], &mut out[8..10])?;
    parse_hex(&b[24..36], &mut out[10..16])?;
    Some(out)
}

pub(crate) fn format_uuid(u: &[u8]) -> String {
    let mut s = String::with_capacity(36);
    push_hex(&mut s, &u[0..4]);
    s.push('-');
    push_hex(&mut s, &u[4..6]);
    s.push('-');
    push_hex(&mut s, &u[6..8]);
    s.push('-');
    push_hex(&mut s, &u[8..10]);
    s.push('-');
    push_hex(&mut s, &u[10..16]);
    s
}

/// `[prefix]` + 64 lowercase hex digits, where the prefix is empty or ends in `://`
/// (container IDs such as `containerd://<sha256>`, bare digests).
pub(crate) fn split_hex64(s: &str) -> Option<(&str, [u8; 32])> {
    let b = s.as_bytes();
    if b.len() < 64 {
        return None;
    }
    // Not `split_at`: the 64th byte from the end may fall inside a multi-byte character.
    let (prefix, hex) = s.split_at_checked(b.len() - 64)?;
    if !prefix.is_empty() && !prefix.ends_with("://") {
        return None;
    }
    let mut out = [0u8; 32];
    parse_hex(hex.as_bytes(), &mut out)?;
    Some((prefix, out))
}

pub(crate) fn format_hex64(prefix: &str, digest: &[u8]) -> String {
    let mut s = String::with_capacity(prefix.len() + 64);
    s.push_str(prefix);
    push_hex(&mut s, digest);
    s
}

/// A decimal integer without leading zeros that fits in a u64 (resourceVersion, counters).
pub(crate) fn parse_uint_str(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || b.len() > 19 || (b[0] == b'0' && b.len() > 1) {
        return None;
    }
    let mut n: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u64::from(c - b'0');
    }
    Some(n)
}

/// An RFC 3339 UTC timestamp as Kubernetes writes it: `YYYY-MM-DDTHH:MM:SSZ`, optionally with
/// 1 to 9 fraction digits (`metav1.MicroTime`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timestamp {
    pub secs: i64,
    /// (number of fraction digits, their value)
    pub frac: Option<(u8, u32)>,
}

fn digits(b: &[u8]) -> Option<u32> {
    let mut n = 0u32;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + u32::from(c - b'0');
    }
    Some(n)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if is_leap(y) => 29,
        _ => 28,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub(crate) fn parse_timestamp(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() == 21 || b.len() > 30 || b[b.len() - 1] != b'Z' {
        return None;
    }
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let y = i64::from(digits(&b[0..4])?);
    let mo = i64::from(digits(&b[5..7])?);
    let d = i64::from(digits(&b[8..10])?);
    let h = i64::from(digits(&b[11..13])?);
    let mi = i64::from(digits(&b[14..16])?);
    let se = i64::from(digits(&b[17..19])?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59
    {
        return None;
    }
    let frac = if b.len() > 20 {
        if b[19] != b'.' {
            return None;
        }
        let f = &b[20..b.len() - 1];
        Some((f.len() as u8, digits(f)?))
    } else {
        None
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se;
    Some(Timestamp { secs, frac })
}

pub(crate) fn format_timestamp(t: Timestamp) -> String {
    let mut out = Vec::with_capacity(30);
    write_timestamp(t, &mut out);
    String::from_utf8(out).expect("a timestamp is ASCII")
}

/// [`format_timestamp`] appended to `out`.
///
/// Decision: digits written by hand, not with `write!`: rendering a List's objects spent a
/// tenth of its time in the formatting machinery for their timestamps (issue 34). Years
/// outside 0-9999 and fractions wider than their digit count take `write!`, as before.
pub(crate) fn write_timestamp(t: Timestamp, out: &mut Vec<u8>) {
    let days = t.secs.div_euclid(86_400);
    let rem = t.secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    if !(0..=9999).contains(&y) {
        let s = format!(
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
        out.extend_from_slice(s.as_bytes());
    } else {
        push_digits(out, y as u64, 4);
        out.push(b'-');
        push_digits(out, m as u64, 2);
        out.push(b'-');
        push_digits(out, d as u64, 2);
        out.push(b'T');
        push_digits(out, (rem / 3600) as u64, 2);
        out.push(b':');
        push_digits(out, (rem % 3600 / 60) as u64, 2);
        out.push(b':');
        push_digits(out, (rem % 60) as u64, 2);
    }
    if let Some((n, v)) = t.frac {
        out.push(b'.');
        if u64::from(v) < 10u64.saturating_pow(u32::from(n)) {
            push_digits(out, u64::from(v), usize::from(n));
        } else {
            out.extend_from_slice(format!("{v:0width$}", width = n as usize).as_bytes());
        }
    }
    out.push(b'Z');
}

/// `v` in decimal, zero-padded to `width` digits (`v` has at most `width` digits).
fn push_digits(out: &mut Vec<u8>, mut v: u64, width: usize) {
    let start = out.len();
    out.resize(start + width, b'0');
    for slot in out[start..].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// `a.b.c.d` or `a.b.c.d/len` in canonical decimal form.
pub(crate) fn parse_ipv4(s: &str) -> Option<([u8; 4], Option<u8>)> {
    // `0.0.0.0` to `255.255.255.255/32`: most strings are rejected here, before any scan.
    if !(7..=18).contains(&s.len()) || !s.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    let (addr, prefix) = match s.split_once('/') {
        Some((a, p)) => {
            let p = parse_uint_str(p)?;
            if p > 32 {
                return None;
            }
            (a, Some(p as u8))
        }
        None => (s, None),
    };
    let mut out = [0u8; 4];
    let mut parts = addr.split('.');
    for o in &mut out {
        let part = parts.next()?;
        if part.len() > 3 {
            return None;
        }
        let n = parse_uint_str(part)?;
        *o = u8::try_from(n).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some((out, prefix))
}

pub(crate) fn format_ipv4(ip: &[u8], prefix: Option<u8>) -> String {
    let mut s = format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
    if let Some(p) = prefix {
        let _ = write!(s, "/{p}");
    }
    s
}

/// `<prefix>-xxxxx`, where `xxxxx` is the random suffix the API server appends to
/// `generateName`. Returns the prefix (with its dash) and the suffix.
pub(crate) fn split_generated_name(s: &str) -> Option<(&str, [u8; GEN_SUFFIX_LEN])> {
    let b = s.as_bytes();
    if b.len() < GEN_SUFFIX_LEN + 2 || b[b.len() - GEN_SUFFIX_LEN - 1] != b'-' {
        return None;
    }
    let tail = &b[b.len() - GEN_SUFFIX_LEN..];
    if !tail.iter().all(|c| GEN_ALPHABET.contains(c)) {
        return None;
    }
    let mut suffix = [0u8; GEN_SUFFIX_LEN];
    suffix.copy_from_slice(tail);
    Some((&s[..s.len() - GEN_SUFFIX_LEN], suffix))
}

/// The digits after the last `-` of `name` (`web-12`: `12`), the ordinal a StatefulSet gives
/// its pods; `None` if it ends otherwise.
pub(crate) fn name_ordinal(name: &str) -> Option<&str> {
    let (_, tail) = name.rsplit_once('-')?;
    (!tail.is_empty() && tail.bytes().all(|b| b.is_ascii_digit())).then_some(tail)
}

/// The part of a generated name between the last two dashes before its random suffix
/// (`web-7d9f8c6b5-x2k4p`: `7d9f8c6b5`), the pod template hash of a ReplicaSet's pods.
pub(crate) fn name_hash(name: &str) -> Option<&str> {
    let (prefix, _) = split_generated_name(name)?;
    let (_, hash) = prefix.strip_suffix('-')?.rsplit_once('-')?;
    (!hash.is_empty()).then_some(hash)
}

/// True when `s` is `name` up to one of its dashes (`web-7d9f-x2k4p`: `web`, `web-7d9f`): the
/// name of the object's owner, as a Job's or ReplicaSet's pods carry it.
pub(crate) fn is_name_head(name: &str, s: &str) -> bool {
    !s.is_empty() && name.as_bytes().get(s.len()) == Some(&b'-') && name.starts_with(s)
}

/// Bytes of a packed generated-name suffix.
pub(crate) const PACKED_SUFFIX_LEN: usize = 3;

/// Packs a suffix from [`split_generated_name`] into 3 bytes (27^5 < 2^24).
pub(crate) fn pack_suffix(suffix: &[u8; GEN_SUFFIX_LEN]) -> [u8; PACKED_SUFFIX_LEN] {
    let mut n = 0u32;
    for c in suffix.iter().rev() {
        let digit = GEN_ALPHABET
            .iter()
            .position(|a| a == c)
            .expect("suffix from the alphabet");
        n = n * GEN_ALPHABET.len() as u32 + digit as u32;
    }
    let b = n.to_le_bytes();
    [b[0], b[1], b[2]]
}

pub(crate) fn unpack_suffix(packed: &[u8]) -> [u8; GEN_SUFFIX_LEN] {
    let mut n = u32::from_le_bytes([packed[0], packed[1], packed[2], 0]);
    let mut out = [0u8; GEN_SUFFIX_LEN];
    for c in &mut out {
        *c = GEN_ALPHABET[(n % GEN_ALPHABET.len() as u32) as usize];
        n /= GEN_ALPHABET.len() as u32;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip_and_reject_non_canonical() {
        for s in [
            "2026-06-15T04:14:53Z",
            "1970-01-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2000-02-29T12:00:00Z",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "2024-03-01T10:11:12.5Z",
            "2024-03-01T10:11:12.000123Z",
            "2024-03-01T10:11:12.123456789Z",
        ] {
            let t = parse_timestamp(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(format_timestamp(t), s);
        }
        for s in [
            "2026-06-15T04:14:53+00:00",
            "2026-02-30T04:14:53Z",
            "2026-06-15 04:14:53Z",
            "2026-06-15T24:00:00Z",
            "2026-06-15T04:14:60Z",
            "2026-06-15T04:14:53.Z",
            "2026-06-15T04:14:53.1234567890Z",
            "2026-6-15T04:14:53Z",
        ] {
            assert_eq!(parse_timestamp(s), None, "{s}");
        }
    }

    /// The hand-written digits give what `write!` gives, outside the fast path's range too.
    #[test]
    fn timestamps_are_written_as_write_formats_them() {
        let reference = |t: Timestamp| {
            let days = t.secs.div_euclid(86_400);
            let rem = t.secs.rem_euclid(86_400);
            let (y, m, d) = civil_from_days(days);
            let mut s = format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60
            );
            if let Some((n, v)) = t.frac {
                s += &format!(".{v:0width$}", width = n as usize);
            }
            s + "Z"
        };
        let secs = [
            -62_135_596_800 - 86_400,
            -1,
            0,
            59,
            951_782_400,
            1_781_496_893,
        ];
        let secs = secs.into_iter().chain([253_402_300_799, 253_402_300_800]);
        for secs in secs {
            for frac in [
                None,
                Some((1, 5)),
                Some((6, 123)),
                Some((9, 999_999_999)),
                Some((2, 123)),
            ] {
                let t = Timestamp { secs, frac };
                assert_eq!(format_timestamp(t), reference(t), "{secs} {frac:?}");
            }
        }
    }

    #[test]
    fn other_forms_round_trip() {
        let u = "f78db027-d69e-485e-9a9e-a6dc7493b6d7";
        assert_eq!(format_uuid(&parse_uuid(u).unwrap()), u);
        assert_eq!(parse_uuid("F78DB027-D69E-485E-9A9E-A6DC7493B6D7"), None);
        for ip in [
            "10.244.0.3",
            "0.0.0.0",
            "255.255.255.255",
            "10.1.2.3/32",
            "10.0.0.0/8",
        ] {
            let (a, p) = parse_ipv4(ip).unwrap();
            assert_eq!(format_ipv4(&a, p), ip);
        }
        for ip in [
            "010.1.1.1",
            "256.1.1.1",
            "1.1.1",
            "1.1.1.1.1",
            "1.1.1.1/33",
            "1.1.1.1/",
        ] {
            assert_eq!(parse_ipv4(ip), None, "{ip}");
        }
        assert_eq!(parse_uint_str("481"), Some(481));
        assert_eq!(parse_uint_str("0"), Some(0));
        assert_eq!(parse_uint_str("0481"), None);
        assert_eq!(parse_uint_str("99999999999999999999"), None);
        let (p, s) = split_generated_name("coredns-589f44dc88-4fpns").unwrap();
        assert_eq!((p, &s), ("coredns-589f44dc88-", b"4fpns"));
        assert_eq!(unpack_suffix(&pack_suffix(&s)), s);
        assert_eq!(unpack_suffix(&pack_suffix(b"99999")), *b"99999");
        assert_eq!(unpack_suffix(&pack_suffix(b"bbbbb")), *b"bbbbb");
        assert_eq!(split_generated_name("web-0"), None);
        assert_eq!(split_generated_name("-4fpns"), None);
        let id = format!("containerd://{}", "0123456789abcdef".repeat(4));
        let (p, d) = split_hex64(&id).unwrap();
        assert_eq!(format_hex64(p, &d), id);
        assert_eq!(split_hex64(&format!("sha256:{}", "ab".repeat(32))), None);
    }

    #[test]
    fn a_string_cut_inside_a_character_is_not_a_digest() {
        // Found by fuzzing: 64 bytes from the end fall inside the 3-byte character U+FFDA.
        let s = format!("\u{ffda}{}", "a".repeat(62));
        assert_eq!(split_hex64(&s), None);
        assert_eq!(split_hex64(&format!("x\u{e9}{}", "0".repeat(63))), None);
    }
}
