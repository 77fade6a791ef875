//! Why a call of the kube-rs adapter ([`crate::Api`]) failed: the sidecar's answer, an object
//! that does not decode into the caller's type, or a kube-rs option informerd cannot honour.

use crate::proto::Reason;
use crate::{code_name, reason, transport_failure};

/// An error of [`crate::Api`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The sidecar (or the connection to it) answered with an error status.
    #[error("informerd {call} of {resource:?}: {}", describe(status))]
    Status {
        /// `Get`, `List`, `Watch` or `Ensure`.
        call: &'static str,
        /// The resource's name in the sidecar's configuration.
        resource: String,
        /// The status as received; its `informerd-reason` trailer is [`Error::reason`].
        status: Box<tonic::Status>,
    },
    /// An object the sidecar sent does not decode into the requested type.
    #[error(
        "the {resource:?} object {key} from informerd does not decode into {type_name}: \
         {source}; is the sidecar's resource of that kind (its apiVersion and kind)?"
    )]
    Decode {
        /// The resource's name in the sidecar's configuration.
        resource: String,
        /// `namespace/name` of the object.
        key: String,
        /// The Rust type asked for.
        type_name: &'static str,
        /// What serde refused.
        #[source]
        source: serde_json::Error,
    },
    /// A kube-rs option that a shared cache cannot honour: answering without it would be
    /// silently wrong.
    #[error("{option} is not supported over informerd: {fix}")]
    Unsupported {
        /// The option, as kube-rs spells it (`ListParams.limit`, ...).
        option: &'static str,
        /// What to do instead.
        fix: &'static str,
    },
}

impl Error {
    /// The reason the sidecar gave (`NotFound`, `Expired`, ...), for [`Error::Status`].
    pub fn reason(&self) -> Option<Reason> {
        match self {
            Error::Status { status, .. } => Reason::of(status),
            _ => None,
        }
    }

    /// Whether the object or resource does not exist (the sidecar's `NotFound`).
    pub fn is_not_found(&self) -> bool {
        self.reason() == Some(Reason::NotFound)
    }

    /// Whether a watch must start again from the current state: its resume token is older
    /// than the sidecar's change log (`Expired`) or from another run of it (`EpochChanged`),
    /// the analogue of the apiserver's `410 Gone`.
    pub fn needs_relist(&self) -> bool {
        matches!(self.reason(), Some(Reason::Expired | Reason::EpochChanged))
    }

    /// Whether the sidecar refused the call for one of its limits (`TooManyWatchers`,
    /// `TooManyLists`, `OverMemoryLimit`, `RequestTooLarge`; the message names the
    /// configuration key): back off before retrying (a `RequestTooLarge` request fails again
    /// as it is), unlike `FellBehind`, which resumes at once.
    pub fn is_over_limit(&self) -> bool {
        matches!(
            self.reason(),
            Some(
                Reason::TooManyWatchers
                    | Reason::TooManyLists
                    | Reason::OverMemoryLimit
                    | Reason::RequestTooLarge
            )
        )
    }
}

/// `CODE (reason): message`, or the transport's causes when the status did not come from the
/// sidecar.
fn describe(status: &tonic::Status) -> String {
    let code = code_name(status.code());
    match (reason(status), transport_failure(status)) {
        (Some(reason), _) => format!("{code} ({reason}): {}", status.message()),
        (None, Some(cause)) => format!("{code}: {}: {cause}", status.message()),
        (None, None) => format!("{code}: {}", status.message()),
    }
}
