//! The `changeLog` section: the bounds of the store's log of recent changes, in events and in
//! bytes (a Kubernetes quantity such as `64Mi`, or a plain number).

use serde_json::Value;

use crate::config::model::{ChangeLogConfig, DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS};
use crate::config::quantity::parse_bytes;
use crate::config::raw::RawChangeLog;

use super::Validator;

impl Validator {
    pub(super) fn change_log(&mut self, raw: RawChangeLog) -> ChangeLogConfig {
        ChangeLogConfig {
            max_events: self
                .max_events(raw.max_events)
                .unwrap_or(DEFAULT_MAX_EVENTS),
            max_bytes: self.max_bytes(raw.max_bytes).unwrap_or(DEFAULT_MAX_BYTES),
        }
    }

    /// `changeLog.maxEvents`; `None` for the default, also when it is invalid (the error
    /// recorded).
    fn max_events(&mut self, raw: Option<u64>) -> Option<usize> {
        match raw? {
            0 => {
                self.error("changeLog.maxEvents", "must be at least 1");
                None
            }
            n => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        }
    }

    /// `changeLog.maxBytes`; `None` for the default, also when it is invalid (the error
    /// recorded).
    fn max_bytes(&mut self, raw: Option<Value>) -> Option<usize> {
        let bytes = match raw? {
            Value::Number(n) => n.as_u64().or_else(|| {
                self.error(
                    "changeLog.maxBytes",
                    format!("{n} is not a whole, non-negative number of bytes"),
                );
                None
            }),
            Value::String(s) => parse_bytes(&s)
                .map_err(|e| self.error("changeLog.maxBytes", e))
                .ok(),
            other => {
                self.error(
                    "changeLog.maxBytes",
                    format!("expected a quantity such as 64Mi, found {other}"),
                );
                None
            }
        };
        match bytes? {
            0 => {
                self.error("changeLog.maxBytes", "must be at least 1 byte");
                None
            }
            b => Some(usize::try_from(b).unwrap_or(usize::MAX)),
        }
    }
}
