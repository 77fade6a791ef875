//! Finding where a string or a skipped container ends, several bytes at a time: most of a pod
//! is skipped by the transform, so this is where the reader spends most of its time.

use wide::u8x32;

use super::{ReadError, Reader};

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` (eight of the text, little-endian) that end a string's plain run: a quote,
/// a backslash or a control character, as the high bit of each such byte. The lowest bit set
/// is exact (the borrow of the subtraction can only mark bytes above a true one).
#[inline]
pub(super) fn specials(x: u64) -> u64 {
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGHS;
    zero(x ^ (ONES * u64::from(b'"')))
        | zero(x ^ (ONES * u64::from(b'\\')))
        | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS)
}

impl Reader<'_> {
    /// The end of the object or array that starts at the reader's position: the byte after
    /// the bracket that closes it, found by following strings (and their escapes) and the
    /// nesting of brackets, 64 bytes at a time.
    ///
    /// Decision: a skipped container is scanned for its end, not parsed: its grammar inside
    /// (commas, colons, literals, which bracket closes which, control characters in its
    /// strings) is not checked. That made skipping 3.4 times faster than serde_json's
    /// `IgnoredAny` on the recorded pod lists (`cargo bench --bench ingest` records them), and
    /// most of a pod is skipped by the transform (managedFields, spec, container statuses).
    /// The text comes from the apiserver, and what is kept, which is what is stored, is
    /// checked whole; simdjson's On-Demand API makes the same trade for the values it skips.
    /// What a skipped container cannot hide is its end: an unterminated string or bracket is
    /// an error.
    pub(super) fn container_end(&self) -> Result<usize, ReadError> {
        container_end_from(self.bytes, self.at)
            .ok_or_else(|| self.error_at(self.bytes.len(), "EOF while parsing a value"))
    }
}

/// [`Reader::container_end`] on `b` from `at`; `None` at the end of the text.
///
/// Decision: built three times (for CPUs with AVX2 and `popcnt`, with `popcnt`, and for any
/// x86-64), the copy chosen at run time by `multiversion`, which detects the CPU once: the
/// default x86-64 target has no `popcnt` instruction, and counting a block's brackets with the
/// portable sequence instead was a third of the scan's instructions (14 of the 47 million for
/// 2,000 pods under callgrind; the AVX2 copy took 8 million fewer again). Building the whole
/// binary for x86-64-v2 or v3 would have made it refuse older CPUs. Tests run the copy of the
/// machine they run on; the others are the same source, built with fewer instructions.
///
/// Decision: 64 bytes a step (two vectors of 32), then 32, then byte by byte: the steps on the
/// masks (escapes, the strings' prefix XOR, counting brackets) take as long for 64 bits as for
/// 32, and were most of a 32-byte step (callgrind, `examples/ingest_profile.rs`: skipping from 15,400 to
/// 12,100 instructions per watch event).
#[multiversion::multiversion(targets("x86_64+avx+avx2+popcnt", "x86_64+popcnt"))]
fn container_end_from(b: &[u8], mut at: usize) -> Option<usize> {
    let mut scan = Scan::default();
    while let Some(chunk) = b.get(at..at + 64) {
        let (low, high) = chunk.split_at(32);
        let (low, high) = (Masks::of(low), Masks::of(high));
        let masks = Masks {
            backslashes: low.backslashes | high.backslashes << 32,
            quotes: low.quotes | high.quotes << 32,
            opens: low.opens | high.opens << 32,
            closes: low.closes | high.closes << 32,
        };
        if let Some(end) = scan.block(chunk, masks, 64) {
            return Some(at + end);
        }
        at += 64;
    }
    if let Some(chunk) = b.get(at..at + 32) {
        if let Some(end) = scan.block(chunk, Masks::of(chunk), 32) {
            return Some(at + end);
        }
        at += 32;
    }
    scan.bytewise(&b[at..]).map(|end| at + end)
}

/// The state of [`Reader::container_end`] between blocks.
#[derive(Debug, Default)]
struct Scan {
    /// Brackets open (the container's own included).
    depth: u32,
    /// Inside a string.
    string: bool,
    /// The next byte is escaped.
    escape: bool,
}

/// The bytes of a block that matter to the scan, as bits (byte `i` is bit `i`).
struct Masks {
    backslashes: u64,
    quotes: u64,
    /// `{` and `[`.
    opens: u64,
    /// `}` and `]`.
    closes: u64,
}

impl Masks {
    /// The masks of 32 bytes. Always inlined, so that it is built with the features of its
    /// caller's copy.
    #[inline(always)]
    fn of(chunk: &[u8]) -> Masks {
        let chunk: [u8; 32] = chunk.try_into().expect("32 bytes");
        let v = u8x32::new(chunk);
        // `{` and `[` differ in one bit (0x20), as do `}` and `]`.
        let folded = v | u8x32::splat(0x20);
        Masks {
            backslashes: bits(v, b'\\'),
            quotes: bits(v, b'"'),
            opens: bits(folded, b'{'),
            closes: bits(folded, b'}'),
        }
    }
}

/// The bytes of `v` equal to `byte`, as bits.
#[inline(always)]
fn bits(v: u8x32, byte: u8) -> u64 {
    u64::from(v.simd_eq(u8x32::splat(byte)).to_bitmask())
}

impl Scan {
    /// Follows one byte; `true` when it closes the container.
    #[inline]
    fn byte(&mut self, c: u8) -> bool {
        // A backslash escapes the next byte in or out of a string, as in `block` (outside one it
        // is not JSON, and only the end matters), so that where a container ends does not
        // depend on where the blocks fall.
        if c == b'\\' {
            self.escape = true;
            return false;
        }
        if self.string {
            if c == b'"' {
                self.string = false;
            }
            return false;
        }
        match c {
            b'"' => self.string = true,
            b'{' | b'[' => self.depth += 1,
            b'}' | b']' => {
                self.depth -= 1;
                return self.depth == 0;
            }
            _ => {}
        }
        false
    }

    /// Follows the block `chunk` of `width` bytes (32 or 64), whose `masks` are given; the
    /// offset after the bracket that closes the container, if it is in the block. Always
    /// inlined, so that it is built with the features of its caller's copy.
    #[inline(always)]
    fn block(&mut self, chunk: &[u8], masks: Masks, width: u32) -> Option<usize> {
        let last = width - 1;
        let backslashes = masks.backslashes;
        let carry = u64::from(self.escape);
        if backslashes & (backslashes << 1 | carry) != 0 {
            // A backslash escaped (`\\\\`), rare: byte by byte.
            return self.bytewise(chunk);
        }
        let escaped = backslashes << 1 | carry;
        self.escape = backslashes >> last & 1 != 0;
        let quotes = masks.quotes & !escaped;
        // Inside a string: from an opening quote (included) to its closing one (excluded),
        // the prefix XOR of the quotes, flipped when the block starts inside one. (Bits past
        // a 32-byte block's end are not read.)
        let mut inside = quotes;
        inside ^= inside << 1;
        inside ^= inside << 2;
        inside ^= inside << 4;
        inside ^= inside << 8;
        inside ^= inside << 16;
        inside ^= inside << 32;
        if self.string {
            inside = !inside;
        }
        self.string = inside >> last & 1 != 0;
        let opens = masks.opens & !inside;
        let closes = masks.closes & !inside;
        if opens | closes == 0 {
            return None;
        }
        let (o, c) = (opens.count_ones(), closes.count_ones());
        if self.depth > c {
            self.depth += o;
            self.depth -= c;
            return None;
        }
        let mut brackets = opens | closes;
        while brackets != 0 {
            let i = brackets.trailing_zeros();
            if opens >> i & 1 != 0 {
                self.depth += 1;
            } else {
                self.depth -= 1;
                if self.depth == 0 {
                    return Some(i as usize + 1);
                }
            }
            brackets &= brackets - 1;
        }
        None
    }

    /// Follows `chunk` byte by byte: a block with an escaped backslash, and the bytes after
    /// the last block.
    fn bytewise(&mut self, chunk: &[u8]) -> Option<usize> {
        for (i, &c) in chunk.iter().enumerate() {
            if self.escape {
                self.escape = false;
            } else if self.byte(c) {
                return Some(i + 1);
            }
        }
        None
    }
}
