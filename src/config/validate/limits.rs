//! The `limits` section: sizes in Kubernetes quantity syntax (`3Mi`, or a plain number of
//! bytes) and counts, each at least 1; an absent field takes its default
//! ([`LimitsConfig::default`]). Also the one reading of a byte-size field and of a count,
//! which `changeLog` uses too.

use serde_json::Value;

use crate::config::limits::LimitsConfig;
use crate::config::quantity::parse_bytes;
use crate::config::raw::RawLimits;

use super::Validator;

impl Validator {
    pub(super) fn limits(&mut self, raw: RawLimits) -> LimitsConfig {
        let default = LimitsConfig::default();
        LimitsConfig {
            max_object_size: self
                .byte_size("limits.maxObjectSize", raw.max_object_size)
                .unwrap_or(default.max_object_size),
            max_watchers: self
                .count("limits.maxWatchers", raw.max_watchers)
                .unwrap_or(default.max_watchers),
            max_concurrent_lists: self
                .count("limits.maxConcurrentLists", raw.max_concurrent_lists)
                .unwrap_or(default.max_concurrent_lists),
            max_request_size: self
                .byte_size("limits.maxRequestSize", raw.max_request_size)
                .unwrap_or(default.max_request_size),
            max_memory: self.byte_size("limits.maxMemory", raw.max_memory),
            container_memory: None,
        }
    }

    /// A count of at least 1; `None` when absent or invalid (the error recorded).
    ///
    /// Decision: no "0 means unlimited": a limit the file names is a limit, and a very large
    /// number says "unlimited" without a special case.
    pub(super) fn count(&mut self, path: &str, raw: Option<u64>) -> Option<u64> {
        match raw? {
            0 => {
                self.error(path, "must be at least 1");
                None
            }
            n => Some(n),
        }
    }

    /// A size in bytes, at least 1: a quantity string (`64Mi`) or a whole number; `None` when
    /// absent or invalid (the error recorded at `path`).
    pub(super) fn byte_size(&mut self, path: &str, raw: Option<Value>) -> Option<u64> {
        let bytes = match raw? {
            Value::Number(n) => n.as_u64().or_else(|| {
                self.error(
                    path,
                    format!("{n} is not a whole, non-negative number of bytes"),
                );
                None
            }),
            Value::String(s) => parse_bytes(&s).map_err(|e| self.error(path, e)).ok(),
            other => {
                self.error(
                    path,
                    format!("expected a quantity such as 64Mi, found {other}"),
                );
                None
            }
        };
        match bytes? {
            0 => {
                self.error(path, "must be at least 1 byte");
                None
            }
            b => Some(b),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{parse, LimitsConfig};

    const HEAD: &str = "apiVersion: informerd.io/v1alpha1\nkind: Config\n";
    const TAIL: &str = "resources:\n- apiVersion: v1\n  kind: Pod\n";

    fn limits(section: &str) -> Result<LimitsConfig, String> {
        let text = format!("{HEAD}{section}{TAIL}");
        parse("f.yaml", &text)
            .map(|c| c.limits)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn absent_fields_take_the_documented_defaults() {
        assert_eq!(limits(""), Ok(LimitsConfig::default()));
        assert_eq!(limits("limits: {}\n"), Ok(LimitsConfig::default()));
        let d = LimitsConfig::default();
        assert_eq!(d.max_object_size, 3 << 20);
        assert_eq!(d.max_request_size, 4 << 20);
        assert_eq!(d.max_memory, None);
    }

    #[test]
    fn sizes_are_quantities_and_counts_are_numbers() {
        let l = limits(
            "limits:\n  maxObjectSize: 512Ki\n  maxWatchers: 7\n  maxConcurrentLists: 3\n  \
             maxRequestSize: 1024\n  maxMemory: 1Gi\n",
        )
        .unwrap();
        assert_eq!(
            l,
            LimitsConfig {
                max_object_size: 512 << 10,
                max_watchers: 7,
                max_concurrent_lists: 3,
                max_request_size: 1024,
                max_memory: Some(1 << 30),
                container_memory: None,
            }
        );
    }

    #[test]
    fn every_bad_value_is_reported_at_its_line_and_column() {
        let err = limits(
            "limits:\n  maxObjectSize: 3MB\n  maxWatchers: 0\n  maxConcurrentLists: 0\n  \
             maxRequestSize: 0\n  maxMemory: -1Gi\n",
        )
        .unwrap_err();
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(
            lines,
            [
                "f.yaml:4:18: limits.maxObjectSize: '3MB' has an unknown suffix 'MB'; use Ki, \
                 Mi, Gi, Ti, Pi, Ei (powers of 1024) or k, M, G, T, P, E (powers of 1000)",
                "f.yaml:5:16: limits.maxWatchers: must be at least 1",
                "f.yaml:6:23: limits.maxConcurrentLists: must be at least 1",
                "f.yaml:7:19: limits.maxRequestSize: must be at least 1 byte",
                "f.yaml:8:14: limits.maxMemory: '-1Gi' is negative; expected a quantity such as \
                 64Mi, 1Gi, 500M or 1048576",
            ],
            "{err}"
        );
    }

    #[test]
    fn an_unknown_limit_is_refused_at_its_key() {
        let err = limits("limits:\n  maxPods: 3\n").unwrap_err();
        assert!(
            err.starts_with("f.yaml:4:3: limits.maxPods: unknown field `maxPods`"),
            "{err}"
        );
    }
}
