//! Errors as clients meet them: a gRPC status code they can act on, a message that says what to
//! do, and the trailer `informerd-reason` naming a [`Reason`] (the enum of the proto, generated:
//! no reason is spelled out here; its status code and trailer are `informerd-client`'s
//! `Reason::code` and `Reason::status`, beside the code that reads them back).

use std::time::Duration;

use tonic::metadata::MetadataMap;
use tonic::Status;

pub use crate::proto::{Reason, REASON_TRAILER};
use crate::store::StoreError;

/// `INVALID_ARGUMENT` naming the request field at fault.
pub fn invalid(field: &str, message: impl std::fmt::Display) -> Status {
    Reason::Invalid.status(format!("{field}: {message}"))
}

/// A resume token the change log cannot serve.
pub fn from_store(error: &StoreError) -> Status {
    match error {
        StoreError::Expired { .. } => Reason::Expired.status(error.to_string()),
        StoreError::FutureRevision { .. } => Reason::EpochChanged.status(error.to_string()),
        other => Status::internal(other.to_string()),
    }
}

/// How long a call may wait, from its `grpc-timeout` header (set by clients with a deadline),
/// or `default` without one. Waits end a tenth early (at most a second), so that the client
/// receives the server's status, which says what it was waiting for, rather than its own
/// timeout.
pub fn deadline(metadata: &MetadataMap, default: Duration) -> Duration {
    let timeout = metadata
        .get("grpc-timeout")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_grpc_timeout)
        .unwrap_or(default);
    timeout - (timeout / 10).min(Duration::from_secs(1))
}

/// `grpc-timeout`: up to 8 digits and a unit (H, M, S, m, u, n).
fn parse_grpc_timeout(text: &str) -> Option<Duration> {
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use tonic::Code;

    use super::*;

    #[test]
    fn grpc_timeouts_parse_in_every_unit() {
        assert_eq!(parse_grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(
            parse_grpc_timeout("1500m"),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_grpc_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_grpc_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_grpc_timeout("S"), None);
        assert_eq!(parse_grpc_timeout(""), None);
        assert_eq!(parse_grpc_timeout("5x"), None);
    }

    #[test]
    fn statuses_carry_code_and_reason() {
        let s = Reason::Expired.status("relist");
        assert_eq!(s.code(), Code::OutOfRange);
        assert_eq!(
            s.metadata()
                .get(REASON_TRAILER)
                .and_then(|v| v.to_str().ok()),
            Some("Expired")
        );
    }

    /// The generated names are the trailer strings clients in the field parse: the server sends
    /// exactly these, and the client reads them back as the same reason.
    #[test]
    fn every_reason_is_sent_as_the_string_clients_parse() {
        let sent = [
            (Reason::Expired, "Expired"),
            (Reason::EpochChanged, "EpochChanged"),
            (Reason::FellBehind, "FellBehind"),
            (Reason::NotSynced, "NotSynced"),
            (Reason::NotFound, "NotFound"),
            (Reason::NotCaughtUp, "NotCaughtUp"),
            (Reason::Invalid, "Invalid"),
            (Reason::ShuttingDown, "ShuttingDown"),
            (Reason::Unauthenticated, "Unauthenticated"),
            (Reason::Forbidden, "Forbidden"),
            (Reason::TooManyWatchers, "TooManyWatchers"),
            (Reason::TooManyLists, "TooManyLists"),
            (Reason::OverMemoryLimit, "OverMemoryLimit"),
            (Reason::RequestTooLarge, "RequestTooLarge"),
        ];
        for (reason, text) in sent {
            let status = reason.status("m");
            assert_eq!(crate::proto::reason_trailer(&status), Some(text));
            assert_eq!(Reason::of(&status), Some(reason));
        }
    }
}
