//! The wire vocabulary shared by the server (`api`) and the client (`client`): the generated
//! types and services of `proto/informerd/v1/cache.proto`, and the trailer `informerd-reason`
//! that carries an error's [`Reason`] (how it is written and read).

use tonic::Status;

/// The generated code, kept apart so that lints the generator does not meet stay on for the
/// rest of this file.
mod generated {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]

    tonic::include_proto!("informerd.v1");
}

pub use generated::*;

/// The encoded descriptors of the API, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/informerd_descriptor.bin"));

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
    /// The reason an error status names in its trailer, when it names one this build knows.
    pub fn of(status: &Status) -> Option<Reason> {
        reason_trailer(status)
            .and_then(Reason::from_str_name)
            .filter(|reason| *reason != Reason::Unspecified)
    }
}

#[cfg(test)]
mod tests {
    use tonic::metadata::{MetadataMap, MetadataValue};
    use tonic::Code;

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
