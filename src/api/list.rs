//! The List stream: the matching objects of one snapshot, each written as JSON straight from
//! the store through the request's field mask and sent in chunks; the last message says where the list
//! stands (epoch, revision, synced), so that a watch can follow on from it.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use prost::Message;
use tokio::sync::{mpsc, OwnedSemaphorePermit};
use tonic::Status;

use super::query::Query;
use super::reason::Reason;
use super::send::{send_or_give_up, GaveUp, STALL_TIMEOUT};
use super::Resource;
use crate::proto;
use crate::store::{JsonBatch, StoredObject};

/// List chunks hold about this many bytes of object JSON (gRPC's default message limit is
/// 4 MiB).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The JSON a chunk's buffer is first given room for, per candidate object, before the List
/// knows how large its objects render.
///
/// Decision: room for up to [`ROOM_OBJECTS`] objects of 4 KiB (whole pods of the controller
/// profile render to about 2.3 KB) before the first is written, then for up to as many more at
/// the size of the first; past that the buffer grows by doubling, which longer Lists amortize.
/// A buffer that grew from nothing by doubling took a dozen reallocations and copies for a
/// List of 5 pods: jemalloc's `rallocx` was 4% of the sidecar's time on Lists by label
/// selector, beside the copies (perf, 8 callers, issue 34). At most 64 KiB is set aside for a
/// List that then finds nothing to write (a selector the index does not answer), and only
/// until its message is sent.
const FIRST_ROOM: usize = 4 << 10;
/// How many of the candidates left each reservation makes room for, at most.
const ROOM_OBJECTS: usize = 16;

/// A List whose snapshot holds more objects than this waits for a snapshot permit.
///
/// Decision: 1,000 objects, a few hundred KiB of copies: below that a snapshot costs less than
/// the wait would, and the Lists a controller makes by selector stay below it.
pub const LARGE_SNAPSHOT: usize = 1_000;

/// The response stream of one List.
pub type ListStream = Pin<Box<dyn Stream<Item = Result<proto::ListResponse, Status>> + Send>>;

/// Streams the objects of `resource` that `query` wants, at most `limit` of them (0: every
/// match), in chunks of at most `chunk_size` objects (0: no limit) and about [`CHUNK_BYTES`].
///
/// Decision: the first chunk is rendered here, before the response starts. A List that fits in
/// one message (nearly every List a controller makes: an app's pods by a label selector, a
/// node's by an index) is then a ready stream of that one message, which hyper writes with
/// the response's headers and trailers at once, with no task and no channel between the
/// rendering and the connection (issue 34: the task, its channel and their wake-ups cost a
/// 5-pod List more than rendering the pods). A longer List goes on in a task, which sends the
/// first chunk and renders the rest as the client reads; either way a List holds at most
/// about one chunk rendered.
pub async fn stream(
    resource: Arc<Resource>,
    query: Query,
    chunk_size: usize,
    limit: usize,
) -> ListStream {
    let synced = resource.is_synced();
    let epoch = resource.store().epoch();
    let (mut revision, mut candidates) = query.candidates(&resource);
    // A large snapshot waits for a permit (`SNAPSHOTS`, `resource.rs`), then is taken again;
    // a small one (a List by a selector the label index answers) never waits behind them.
    let mut permit = None;
    if candidates.len() > LARGE_SNAPSHOT {
        drop(candidates);
        permit = Some(resource.snapshot_permit().await);
        (revision, candidates) = query.candidates(&resource);
    }
    let last = proto::ListResponse {
        objects: Vec::new(),
        last: true,
        epoch,
        revision,
        synced,
    };
    let mut lister = Lister {
        resource,
        query,
        chunk_size,
        remaining: if limit == 0 { usize::MAX } else { limit },
        chunk: Vec::new(),
        json: JsonBatch::new(),
        ends: Vec::new(),
        bytes: 0,
        _permit: permit,
    };
    let mut candidates = candidates.into_iter();
    if !lister.fill(&mut candidates).await {
        let last = lister.finish(last);
        return Box::pin(futures::stream::iter([Ok(last)]));
    }
    let first = lister.take_chunk();
    let (tx, rx) = mpsc::channel(2);
    tokio::spawn(lister.run(tx, first, candidates, last));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// What renders one List: the request, and the chunk being filled.
struct Lister {
    resource: Arc<Resource>,
    query: Query,
    chunk_size: usize,
    /// How many more objects the List may hold (`usize::MAX`: no limit); the rest are not
    /// rendered.
    remaining: usize,
    chunk: Vec<proto::Object>,
    /// The JSON of the chunk's objects, one after the other (`Mask::render_stored_into`).
    json: JsonBatch,
    /// Where each object's JSON ends in `json`.
    ends: Vec<usize>,
    /// Encoded bytes of `chunk`.
    bytes: usize,
    /// Held while a large snapshot is listed.
    _permit: Option<OwnedSemaphorePermit>,
}

impl Lister {
    /// Renders the matching candidates into the chunk until it is full (true) or the List has
    /// no more objects (false).
    async fn fill(&mut self, candidates: &mut std::vec::IntoIter<StoredObject>) -> bool {
        self.make_room(candidates.len());
        while self.remaining > 0 {
            let Some(stored) = candidates.next() else {
                return false;
            };
            tokio::task::consume_budget().await;
            if !self.query.wants(&stored) {
                continue;
            }
            // Written straight from the store's encoding: a list never holds decoded objects.
            let start = self.json.len();
            let rendered = self
                .query
                .mask()
                .render_stored_into(&stored, &mut self.json);
            let json = self.json.len() - start;
            // The object's encoding with its JSON (field 7): the tag, the length, the bytes.
            self.bytes += rendered.encoded_len() + 1 + prost::length_delimiter_len(json) + json;
            self.ends.push(self.json.len());
            self.chunk.push(rendered);
            if self.chunk.len() == 1 {
                self.make_room(candidates.len());
            }
            self.remaining -= 1;
            // Whichever limit comes first: gRPC clients refuse messages over 4 MiB by
            // default, whatever chunk_size asks for.
            if self.bytes >= CHUNK_BYTES
                || (self.chunk_size > 0 && self.chunk.len() >= self.chunk_size)
            {
                return true;
            }
        }
        false
    }

    /// Gives the chunk's buffer room for the next objects: for the candidates not yet seen
    /// (`left`), at most [`ROOM_OBJECTS`] of them and no more than the List and the chunk may
    /// still hold; [`FIRST_ROOM`] each before any is written, then the size of those written.
    fn make_room(&mut self, left: usize) {
        let mut left = left.min(self.remaining).min(ROOM_OBJECTS);
        if self.chunk_size > 0 {
            left = left.min(self.chunk_size.saturating_sub(self.chunk.len()));
        }
        let room = match self.json.len().checked_div(self.ends.len()) {
            None => left * FIRST_ROOM,
            Some(each) => left * each,
        };
        let room = room.min(CHUNK_BYTES.saturating_sub(self.json.len()));
        self.json.reserve(room);
    }

    /// The full chunk as a message, and a new chunk to fill.
    fn take_chunk(&mut self) -> proto::ListResponse {
        proto::ListResponse {
            objects: self.objects(),
            ..Default::default()
        }
    }

    /// `last`, with the objects of the chunk.
    fn finish(&mut self, mut last: proto::ListResponse) -> proto::ListResponse {
        last.objects = self.objects();
        last
    }

    /// The chunk's objects, each given its part of the chunk's JSON (one allocation for all);
    /// the next chunk starts empty.
    fn objects(&mut self) -> Vec<proto::Object> {
        self.bytes = 0;
        let json = bytes::Bytes::from(self.json.take());
        let mut objects = std::mem::take(&mut self.chunk);
        let mut start = 0;
        for (object, end) in objects.iter_mut().zip(self.ends.drain(..)) {
            object.json = json.slice(start..end);
            start = end;
        }
        objects
    }

    /// The task of a List longer than a chunk: sends `first`, then the other chunks of the
    /// `candidates` as they fill, then `last` with what remains.
    async fn run(
        mut self,
        tx: mpsc::Sender<Result<proto::ListResponse, Status>>,
        first: proto::ListResponse,
        mut candidates: std::vec::IntoIter<StoredObject>,
        last: proto::ListResponse,
    ) {
        if !self.send(&tx, first).await {
            return;
        }
        while self.fill(&mut candidates).await {
            let message = self.take_chunk();
            if !self.send(&tx, message).await {
                return;
            }
        }
        let last = self.finish(last);
        self.send(&tx, last).await;
    }

    /// Sends one message; false when the list is over.
    ///
    /// A client that stops reading is let go after [`STALL_TIMEOUT`], releasing the snapshot
    /// (which keeps replaced objects alive); shutdown ends the list too.
    async fn send(
        &self,
        tx: &mpsc::Sender<Result<proto::ListResponse, Status>>,
        message: proto::ListResponse,
    ) -> bool {
        match send_or_give_up(tx, Ok(message), self.resource.stopped()).await {
            Ok(()) => true,
            Err(GaveUp::Stalled) => {
                let _ = tx.try_send(Err(Reason::FellBehind.status(format!(
                    "the list was not read for {} s; list again",
                    STALL_TIMEOUT.as_secs()
                ))));
                false
            }
            Err(GaveUp::Closed | GaveUp::Stopped) => false,
        }
    }
}
