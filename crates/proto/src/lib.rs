//! The wire vocabulary shared by the server and its clients: the generated messages and client
//! of `proto/informerd/v1/cache.proto` (and, with the `server` feature, its service trait), the
//! trailer `informerd-reason` that carries an error's [`Reason`] (how it is written and read),
//! the names of status codes as the proto writes them, and the encoded descriptors for gRPC
//! server reflection.
//!
//! What it must not do: hold behaviour of either side. It is what both agree on, nothing more.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};

/// The generated code, kept apart so that lints the generator does not meet stay on for the
/// rest of this file.
mod generated {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]

    tonic::include_proto!("informerd.v1");
}

pub use generated::*;

/// The trailer that names the reason of an error status: a [`Reason`] spelled as its name in
/// the proto (`Expired`, `NotFound`, ...; see [`Reason::as_str_name`]).
pub const REASON_TRAILER: &str = "informerd-reason";

/// The `informerd-reason` trailer of an error status as it was sent, when there is one: also a
/// reason newer than this build, which [`Reason::of`] does not know.
pub fn reason_trailer(status: &Status) -> Option<&str> {
    status
        .metadata()
        .get(REASON_TRAILER)
        .and_then(|v| v.to_str().ok())
}

impl Reason {
    /// The status code that comes with the reason, as the proto documents it.
    pub fn code(self) -> Code {
        match self {
            Reason::Expired | Reason::EpochChanged => Code::OutOfRange,
            Reason::FellBehind
            | Reason::TooManyWatchers
            | Reason::TooManyLists
            | Reason::OverMemoryLimit
            | Reason::RequestTooLarge => Code::ResourceExhausted,
            Reason::NotSynced | Reason::ShuttingDown => Code::Unavailable,
            Reason::NotFound => Code::NotFound,
            Reason::NotCaughtUp => Code::DeadlineExceeded,
            Reason::Invalid => Code::InvalidArgument,
            Reason::Unauthenticated => Code::Unauthenticated,
            Reason::Forbidden => Code::PermissionDenied,
            // The proto's zero value, never sent.
            Reason::Unspecified => Code::Unknown,
        }
    }

    /// The status, with the reason as a trailer (its name in the proto).
    pub fn status(self, message: impl Into<String>) -> Status {
        let mut metadata = MetadataMap::new();
        metadata.insert(
            REASON_TRAILER,
            MetadataValue::from_static(self.as_str_name()),
        );
        Status::with_metadata(self.code(), message, metadata)
    }

    /// The reason an error status names in its trailer, when it names one this build knows.
    pub fn of(status: &Status) -> Option<Reason> {
        reason_trailer(status)
            .and_then(Reason::from_str_name)
            .filter(|reason| *reason != Reason::Unspecified)
    }
}

/// The encoded descriptors of the API, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/informerd_descriptor.bin"));

/// The canonical name of a gRPC status code, as the proto and other gRPC tools write it
/// (`NOT_FOUND`, `INVALID_ARGUMENT`, ...).
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_trailer(value: &'static str) -> Status {
        let mut metadata = MetadataMap::new();
        metadata.insert(REASON_TRAILER, MetadataValue::from_static(value));
        Status::with_metadata(Code::Unavailable, "m", metadata)
    }

    #[test]
    fn a_trailer_names_a_reason_by_its_proto_name() {
        assert_eq!(
            Reason::of(&with_trailer("ShuttingDown")),
            Some(Reason::ShuttingDown)
        );
        assert_eq!(Reason::of(&Status::unavailable("no trailer")), None);
    }

    #[test]
    fn an_unknown_reason_is_kept_as_text() {
        let status = with_trailer("SomethingNew");
        assert_eq!(Reason::of(&status), None);
        assert_eq!(reason_trailer(&status), Some("SomethingNew"));
        assert_eq!(Reason::of(&with_trailer("REASON_UNSPECIFIED")), None);
    }
}
