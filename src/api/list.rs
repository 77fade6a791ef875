//! The List stream: the matching objects of one snapshot, decoded one at a time, rendered
//! through the request's field mask and sent in chunks; the last message says where the list
//! stands (epoch, revision, synced), so that a watch can follow on from it.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use prost::Message;
use tokio::sync::mpsc;
use tonic::Status;

use super::query::Query;
use super::reason::Reason;
use super::send::{send_or_give_up, GaveUp, STALL_TIMEOUT};
use super::Resource;
use crate::proto;
use crate::store::StoredObject;

/// List chunks hold about this many bytes of object JSON (gRPC's default message limit is
/// 4 MiB).
pub const CHUNK_BYTES: usize = 1 << 20;

/// The response stream of one List.
pub type ListStream = Pin<Box<dyn Stream<Item = Result<proto::ListResponse, Status>> + Send>>;

/// Streams the objects of `resource` that `query` wants, at most `limit` of them (0: every
/// match), in chunks of at most `chunk_size` objects (0: no limit) and about [`CHUNK_BYTES`].
pub fn stream(
    resource: Arc<Resource>,
    query: Query,
    chunk_size: usize,
    limit: usize,
) -> ListStream {
    let synced = resource.is_synced();
    let epoch = resource.store().epoch();
    let (revision, candidates) = query.candidates(&resource);
    let last = proto::ListResponse {
        objects: Vec::new(),
        last: true,
        epoch,
        revision,
        synced,
    };
    let (tx, rx) = mpsc::channel(2);
    let lister = Lister {
        resource,
        query,
        chunk_size,
        limit,
        tx,
    };
    tokio::spawn(lister.run(candidates, last));
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// The task behind one List stream.
struct Lister {
    resource: Arc<Resource>,
    query: Query,
    chunk_size: usize,
    /// At most this many objects in all (0: no limit); the rest are not decoded.
    limit: usize,
    tx: mpsc::Sender<Result<proto::ListResponse, Status>>,
}

impl Lister {
    /// Sends the matching `candidates` in chunks, then `last` with what remains.
    async fn run(self, candidates: Vec<StoredObject>, mut last: proto::ListResponse) {
        let mut chunk = Vec::new();
        let mut bytes = 0;
        let mut remaining = if self.limit == 0 {
            usize::MAX
        } else {
            self.limit
        };
        for stored in candidates {
            if remaining == 0 {
                break;
            }
            tokio::task::consume_budget().await;
            // Decoded one at a time and dropped: a list never holds decoded objects.
            let Some(object) = self.query.decode_if_matches(&self.resource, &stored) else {
                continue;
            };
            let rendered = self
                .query
                .mask()
                .render_owned(object, stored.revision(), None);
            bytes += rendered.encoded_len();
            chunk.push(rendered);
            remaining -= 1;
            // Whichever limit comes first: gRPC clients refuse messages over 4 MiB by
            // default, whatever chunk_size asks for.
            if bytes >= CHUNK_BYTES || (self.chunk_size > 0 && chunk.len() >= self.chunk_size) {
                let message = proto::ListResponse {
                    objects: std::mem::take(&mut chunk),
                    ..Default::default()
                };
                bytes = 0;
                if !self.send(message).await {
                    return;
                }
            }
        }
        last.objects = chunk;
        self.send(last).await;
    }

    /// Sends one message; false when the list is over.
    ///
    /// A client that stops reading is let go after [`STALL_TIMEOUT`], releasing the snapshot
    /// (which keeps replaced objects alive); shutdown ends the list too.
    async fn send(&self, message: proto::ListResponse) -> bool {
        match send_or_give_up(&self.tx, Ok(message), self.resource.stopped()).await {
            Ok(()) => true,
            Err(GaveUp::Stalled) => {
                let _ = self.tx.try_send(Err(Reason::FellBehind.status(format!(
                    "the list was not read for {} s; list again",
                    STALL_TIMEOUT.as_secs()
                ))));
                false
            }
            Err(GaveUp::Closed | GaveUp::Stopped) => false,
        }
    }
}
