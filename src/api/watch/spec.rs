//! A Watch request, validated once: its query, where it starts (now, the initial state, or a
//! resume token checked against the store's epoch), its update predicates and its bookmark
//! interval.

use std::time::Duration;

use serde_json::Value;
use tonic::Status;

use super::held::Held;
use super::DEFAULT_BOOKMARK_INTERVAL;
use crate::api::query::Query;
use crate::api::reason::{invalid, Reason};
use crate::api::Resource;
use crate::filter::ChangePredicate;
use crate::proto::{self, Predicate};

/// A validated watch request.
pub struct WatchSpec {
    pub query: Query,
    pub start: Start,
    predicates: Vec<Predicate>,
    predicate_cel: Option<ChangePredicate>,
    pub bookmark_interval: Duration,
    /// MODIFIED events carry the object before the change.
    pub send_previous: bool,
}

/// Where a watch starts.
pub enum Start {
    /// Follow from the current revision.
    Now,
    /// The current state, SYNCED, then follow.
    InitialState,
    /// Replay after this revision (the epoch was checked).
    Since(u64),
    /// The current state less what the client holds, SYNCED with what it holds that is gone,
    /// then follow (a delta resume, `held`).
    Held(Held),
}

impl WatchSpec {
    pub fn new(resource: &Resource, req: &proto::WatchRequest) -> Result<WatchSpec, Status> {
        let query = Query::new(resource, req.into())?;
        let epoch = resource.store().epoch();
        let start = match &req.start {
            None | Some(proto::watch_request::Start::SendInitialState(false)) => Start::Now,
            Some(proto::watch_request::Start::SendInitialState(true)) => Start::InitialState,
            Some(proto::watch_request::Start::Since(token)) if token.epoch != epoch => {
                return Err(Reason::EpochChanged.status(format!(
                    "the resume token is from epoch {}, but {} is at epoch {epoch} (the sidecar \
                     restarted): relist, then watch from the list's revision",
                    token.epoch,
                    resource.name()
                )))
            }
            Some(proto::watch_request::Start::Since(token)) => Start::Since(token.revision),
            Some(proto::watch_request::Start::Held(held)) => {
                Start::Held(Held::parse(&held.entries)?)
            }
        };
        let mut predicates = Vec::new();
        for (i, p) in req.predicates.iter().enumerate() {
            match Predicate::try_from(*p) {
                Ok(Predicate::Unspecified) | Err(_) => {
                    return Err(invalid(
                        &format!("predicates[{i}]"),
                        format!(
                            "{p} is not a predicate; use GENERATION_CHANGED, LABELS_CHANGED or \
                             ANNOTATIONS_CHANGED"
                        ),
                    ))
                }
                Ok(p) => predicates.push(p),
            }
        }
        let predicate_cel = match req.predicate_cel.trim() {
            "" => None,
            text => Some(ChangePredicate::compile(text).map_err(|e| invalid("predicate_cel", e))?),
        };
        let bookmark_interval = match req.bookmark_interval_seconds {
            0 => DEFAULT_BOOKMARK_INTERVAL,
            s => Duration::from_secs(u64::from(s)),
        };
        Ok(WatchSpec {
            query,
            start,
            predicates,
            predicate_cel,
            bookmark_interval,
            send_previous: req.send_previous,
        })
    }

    /// Whether a subscriber cares about an update that stays in its view.
    pub fn wants_update(&self, new: &Value, old: &Value) -> bool {
        if self.predicates.is_empty() && self.predicate_cel.is_none() {
            return true;
        }
        let meta = |v: &'_ Value, f: &str| v.get("metadata").and_then(|m| m.get(f)).cloned();
        self.predicates.iter().any(|p| {
            let field = match p {
                Predicate::GenerationChanged => "generation",
                Predicate::LabelsChanged => "labels",
                Predicate::AnnotationsChanged => "annotations",
                Predicate::Unspecified => return false,
            };
            meta(new, field) != meta(old, field)
        }) || self
            .predicate_cel
            .as_ref()
            .is_some_and(|p| p.matches(new, old))
    }
}
