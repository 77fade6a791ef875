//! A WatchKeys subscription, validated once: its filters and predicates (a Watch's, checked by
//! [`WatchSpec`]), where it starts, its debounce, and its owner mapping. Every refusal is
//! `INVALID_ARGUMENT` naming the field (`subscribe.debounce_millis: ...`).

use std::time::Duration;

use tonic::Status;

use super::owner::{keeps_owner_references, Owners};
use super::queue::Debounce;
use crate::api::mask::Mask;
use crate::api::reason::{invalid, Reason};
use crate::api::watch::WatchSpec;
use crate::api::Resource;
use crate::proto::{self, OwnerMode};
use crate::transform::Transform;

/// A validated subscription.
pub struct KeysSpec {
    /// The filters and predicates (no field mask, no start: those are a Watch's).
    pub watch: WatchSpec,
    /// `send_objects`: the mask each key's object is rendered with; `None`: keys alone.
    pub objects: Option<Mask>,
    /// Where to resume: a token of this epoch; `None`: a resync.
    pub since: Option<u64>,
    pub timing: Debounce,
    pub owners: Option<Owners>,
    /// The resource's kind and the owner's, as keys name them.
    pub kind: String,
}

/// `max_delay_millis` when the subscription leaves it 0: this many times the debounce.
///
/// Decision: ten quiet periods. A key that keeps changing (a pod's status during a rollout)
/// still reaches its controller, at most every ten debounces.
pub const DEFAULT_MAX_DELAY_FACTOR: u32 = 10;

impl KeysSpec {
    /// `kind` and `transform` are the resource's, from the configuration.
    pub fn new(
        resource: &Resource,
        (kind, transform): (&str, &Transform),
        sub: &proto::KeysSubscription,
    ) -> Result<KeysSpec, Status> {
        let as_watch = proto::WatchRequest {
            resource: sub.resource.clone(),
            namespace: sub.namespace.clone(),
            label_selector: sub.label_selector.clone(),
            field_selector: sub.field_selector.clone(),
            index: sub.index.clone(),
            predicates: sub.predicates.clone(),
            predicate_cel: sub.predicate_cel.clone(),
            ..Default::default()
        };
        let watch = WatchSpec::new(resource, &as_watch).map_err(|status| {
            // The Watch's checks name the field as a WatchRequest's; here it is in `subscribe`.
            match Reason::of(&status) {
                Some(Reason::Invalid) => {
                    Reason::Invalid.status(format!("subscribe.{}", status.message()))
                }
                _ => status,
            }
        })?;
        let epoch = resource.store().epoch();
        // A token of another run, or from the future, cannot be resumed from: a resync.
        let since = sub
            .since
            .as_ref()
            .filter(|t| t.epoch == epoch && t.revision <= resource.store().revision())
            .map(|t| t.revision);
        Ok(KeysSpec {
            watch,
            objects: objects(sub)?,
            since,
            timing: timing(sub.debounce_millis, sub.max_delay_millis)?,
            owners: sub
                .owner
                .as_ref()
                .map(|o| owners(resource, transform, o))
                .transpose()?,
            kind: kind.to_string(),
        })
    }
}

/// The mask of `send_objects`; fields without it are refused rather than ignored, since the
/// client plainly expected objects.
fn objects(sub: &proto::KeysSubscription) -> Result<Option<Mask>, Status> {
    if !sub.send_objects {
        if sub.omit_labels {
            return Err(invalid(
                "subscribe.omit_labels",
                "applies to the objects that send_objects asks for: set send_objects, or leave \
                 omit_labels false",
            ));
        }
        if sub.fields.is_empty() {
            return Ok(None);
        }
        return Err(invalid(
            "subscribe.fields",
            "masks the objects that send_objects asks for: set send_objects, or leave fields \
             empty",
        ));
    }
    let mask = Mask::parse(&sub.fields).map_err(|status| {
        // `Mask::parse` names the field as a Get's (`fields[i]: ...`).
        Reason::Invalid.status(format!("subscribe.{}", status.message()))
    })?;
    Ok(Some(mask.omit_labels(sub.omit_labels)))
}

fn timing(debounce_millis: u32, max_delay_millis: u32) -> Result<Debounce, Status> {
    let max_delay = match max_delay_millis {
        0 => debounce_millis.saturating_mul(DEFAULT_MAX_DELAY_FACTOR),
        m if m < debounce_millis => {
            return Err(invalid(
                "subscribe.max_delay_millis",
                format!(
                    "{m} is shorter than debounce_millis ({debounce_millis}): give at least \
                     the debounce, or 0 for {DEFAULT_MAX_DELAY_FACTOR} times it"
                ),
            ))
        }
        m => m,
    };
    Ok(Debounce {
        debounce: Duration::from_millis(u64::from(debounce_millis)),
        max_delay: Duration::from_millis(u64::from(max_delay)),
    })
}

fn owners(
    resource: &Resource,
    transform: &Transform,
    owner: &proto::OwnerMapping,
) -> Result<Owners, Status> {
    if owner.kind.is_empty() {
        return Err(invalid(
            "subscribe.owner.kind",
            "is required: the kind of the owners whose keys to send, e.g. ReplicaSet",
        ));
    }
    if owner.api_version.matches('/').count() > 1 {
        return Err(invalid(
            "subscribe.owner.api_version",
            format!(
                "{:?} is not an apiVersion: give GROUP/VERSION (apps/v1), VERSION for the \
                 core group, or leave it empty for any group",
                owner.api_version
            ),
        ));
    }
    let and_self = match OwnerMode::try_from(owner.mode) {
        Ok(OwnerMode::Unspecified | OwnerMode::OwnerOnly) => false,
        Ok(OwnerMode::OwnerAndSelf) => true,
        Err(_) => {
            return Err(invalid(
                "subscribe.owner.mode",
                format!(
                    "{} is not a mode; use OWNER_ONLY or OWNER_AND_SELF",
                    owner.mode
                ),
            ))
        }
    };
    if !keeps_owner_references(transform) {
        return Err(invalid(
            "subscribe.owner",
            format!(
                "the transform of resource {} ({transform:?}) does not keep \
                 metadata.ownerReferences, so owners cannot be read: keep \
                 metadata.ownerReferences in its transform (or do not drop it)",
                resource.name()
            ),
        ));
    }
    Ok(Owners::new(&owner.kind, &owner.api_version, and_self))
}
