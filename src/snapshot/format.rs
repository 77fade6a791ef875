//! The snapshot file, byte by byte: what is written and how it is read back and checked.
//!
//! ```text
//! "informerd-snapshot\n"        magic
//! u32 LE                        format version (FORMAT_VERSION)
//! u32 LE, JSON                  the header (Header), length-prefixed
//! per atom: u32 LE id, u32 LE length, its bytes
//! per object: u32 LE length, its blob
//! u32 LE                        CRC-32C of every byte before it
//! ```
//!
//! Atoms and blobs are the store's own encoding (see `store::snapshot`), which the header's
//! `layout` names; format 1 held each object's JSON instead.
//!
//! Decision: a JSON header (readable with `head`, extended without a format change as long as
//! fields are only added), and a checksum over the whole file checked before anything is
//! restored, so that a torn or corrupt file is refused as a whole, never half-served.

use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};

use serde::{Deserialize, Serialize};

use super::SnapshotError;
use crate::store::StoreImage;

/// The first bytes of every snapshot file.
pub const MAGIC: &[u8] = b"informerd-snapshot\n";
/// The format this build writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 2;
/// A record (atom or object) may not be longer than this: a length past it is refused before
/// anything is allocated for it.
const MAX_RECORD_BYTES: u32 = 64 << 20;

/// What the file says about itself and the cache it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The resource's name in the configuration.
    pub resource: String,
    /// Fingerprint of the configuration that shaped the cache (see `fingerprint`).
    pub config: String,
    /// Fingerprint of the cluster it was read from.
    pub cluster: String,
    /// When it was written, in milliseconds since the Unix epoch.
    pub written_at_ms: u64,
    /// Written at shutdown, after the streams stopped: no revision after `revision` was ever
    /// handed out, so clients' tokens stay valid (see the module's decision on epochs).
    pub clean: bool,
    /// The store's epoch and revision.
    pub epoch: u64,
    pub revision: u64,
    /// The store's encoding (`store::layout`): only a build with the same one restores it.
    pub layout: String,
    /// How many atoms follow.
    pub atoms: u64,
    /// How many objects follow them.
    pub objects: u64,
    /// Scope label → the resourceVersion its watch resumes from.
    pub scopes: std::collections::BTreeMap<String, String>,
}

/// Writes a snapshot of `image` to `out`; returns the bytes written.
pub fn write(out: impl Write, header: &Header, image: &StoreImage) -> io::Result<u64> {
    let mut out = Crc::new(out);
    out.write_all(MAGIC)?;
    out.write_all(&FORMAT_VERSION.to_le_bytes())?;
    let header = serde_json::to_vec(header).map_err(io::Error::other)?;
    out.write_all(&len32(header.len())?.to_le_bytes())?;
    out.write_all(&header)?;
    for (id, bytes) in image.atoms() {
        out.write_all(&id.to_le_bytes())?;
        out.write_all(&len32(bytes.len())?.to_le_bytes())?;
        out.write_all(bytes)?;
    }
    for blob in image.objects() {
        out.write_all(&len32(blob.len())?.to_le_bytes())?;
        out.write_all(blob)?;
    }
    let crc = out.crc;
    out.inner.write_all(&crc.to_le_bytes())?;
    Ok(out.written + 4)
}

fn len32(n: usize) -> io::Result<u32> {
    u32::try_from(n).map_err(|_| io::Error::other("a record longer than 4 GiB"))
}

/// A writer or reader that checksums what passes through it.
struct Crc<T> {
    inner: T,
    crc: u32,
    written: u64,
}

impl<T> Crc<T> {
    fn new(inner: T) -> Self {
        Crc {
            inner,
            crc: 0,
            written: 0,
        }
    }
}

impl<W: Write> Write for Crc<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A snapshot file being read: checked whole first ([`Reader::open`]), then read atom by
/// atom and object by object.
pub struct Reader<R> {
    input: BufReader<R>,
    /// Where the objects end (the checksum starts).
    end: u64,
    position: u64,
    atoms: u64,
    objects: u64,
}

impl<R: Read + Seek> Reader<R> {
    /// Checks magic, version and checksum, and reads the header.
    pub fn open(mut input: R) -> Result<(Header, Reader<R>), SnapshotError> {
        let len = input.seek(SeekFrom::End(0))?;
        input.seek(SeekFrom::Start(0))?;
        let mut input = BufReader::with_capacity(1 << 20, input);
        let mut magic = vec![0; MAGIC.len()];
        read_or_truncated(&mut input, &mut magic)?;
        if magic != MAGIC {
            return Err(SnapshotError::NotASnapshot);
        }
        let version = u32::from_le_bytes(read_array(&mut input)?);
        if version != FORMAT_VERSION {
            return Err(SnapshotError::UnknownVersion {
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let header_start = (MAGIC.len() + 4) as u64;
        let end = len.checked_sub(4).filter(|&e| e >= header_start + 4);
        let end = end.ok_or(SnapshotError::Truncated)?;
        verify_checksum(&mut input, end)?;
        input.seek(SeekFrom::Start(header_start))?;
        let header_len = u32::from_le_bytes(read_array(&mut input)?);
        let mut header = vec![0; header_len as usize];
        read_or_truncated(&mut input, &mut header)?;
        let header: Header = serde_json::from_slice(&header)
            .map_err(|e| SnapshotError::Invalid(format!("header: {e}")))?;
        let reader = Reader {
            input,
            end,
            position: header_start + 4 + u64::from(header_len),
            atoms: header.atoms,
            objects: header.objects,
        };
        Ok((header, reader))
    }

    /// The next atom's id, its bytes in `buf`; `None` after the last one.
    pub fn next_atom(&mut self, buf: &mut Vec<u8>) -> Result<Option<u32>, SnapshotError> {
        if self.atoms == 0 {
            return Ok(None);
        }
        self.atoms -= 1;
        let id = u32::from_le_bytes(read_array(&mut self.input)?);
        self.position += 4;
        self.record(buf)?;
        Ok(Some(id))
    }

    /// The next object's blob in `buf`; false after the last one (once every atom was read).
    pub fn next_object(&mut self, buf: &mut Vec<u8>) -> Result<bool, SnapshotError> {
        if self.atoms > 0 {
            return Err(SnapshotError::Invalid(
                "objects read before the atoms".to_owned(),
            ));
        }
        if self.objects == 0 {
            if self.position != self.end {
                return Err(SnapshotError::Invalid(
                    "bytes after the last object".to_owned(),
                ));
            }
            return Ok(false);
        }
        self.objects -= 1;
        self.record(buf)?;
        Ok(true)
    }

    /// A length-prefixed record, into `buf`.
    fn record(&mut self, buf: &mut Vec<u8>) -> Result<(), SnapshotError> {
        let len = u32::from_le_bytes(read_array(&mut self.input)?);
        if len > MAX_RECORD_BYTES || self.position + 4 + u64::from(len) > self.end {
            return Err(SnapshotError::Invalid(format!(
                "a record of {len} bytes at offset {}",
                self.position
            )));
        }
        buf.clear();
        buf.resize(len as usize, 0);
        read_or_truncated(&mut self.input, buf)?;
        self.position += 4 + u64::from(len);
        Ok(())
    }
}

/// Compares the checksum of the bytes before `end` with the one stored after them.
fn verify_checksum<R: Read + Seek>(
    input: &mut BufReader<R>,
    end: u64,
) -> Result<(), SnapshotError> {
    input.seek(SeekFrom::Start(0))?;
    let mut crc = 0;
    let mut left = end;
    while left > 0 {
        let buf = input.fill_buf()?;
        if buf.is_empty() {
            return Err(SnapshotError::Truncated);
        }
        let n = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        input.consume(n);
        left -= n as u64;
    }
    let stored = u32::from_le_bytes(read_array(input)?);
    if stored != crc {
        return Err(SnapshotError::Checksum {
            stored,
            computed: crc,
        });
    }
    Ok(())
}

fn read_array<const N: usize>(input: &mut impl Read) -> Result<[u8; N], SnapshotError> {
    let mut bytes = [0; N];
    read_or_truncated(input, &mut bytes)?;
    Ok(bytes)
}

fn read_or_truncated(input: &mut impl Read, buf: &mut [u8]) -> Result<(), SnapshotError> {
    input.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => SnapshotError::Truncated,
        _ => SnapshotError::Io(e),
    })
}
