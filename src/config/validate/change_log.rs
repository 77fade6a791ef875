//! The `changeLog` section: the bounds of the store's log of recent changes, in events and in
//! bytes (a Kubernetes quantity such as `64Mi`, or a plain number).

use serde_json::Value;

use crate::config::model::{ChangeLogConfig, DEFAULT_MAX_BYTES, DEFAULT_MAX_EVENTS};
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
        let n = self.count("changeLog.maxEvents", raw)?;
        Some(usize::try_from(n).unwrap_or(usize::MAX))
    }

    /// `changeLog.maxBytes`; `None` for the default, also when it is invalid (the error
    /// recorded).
    fn max_bytes(&mut self, raw: Option<Value>) -> Option<usize> {
        let bytes = self.byte_size("changeLog.maxBytes", raw)?;
        Some(usize::try_from(bytes).unwrap_or(usize::MAX))
    }
}
