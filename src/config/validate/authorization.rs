//! The `server.authorization` section: whether informerd checks each client's own RBAC before
//! serving it (`kubernetes`), or serves every client that can reach the socket (`none`, the
//! default of the single-tenant sidecar), and the tuning of those checks.
//!
//! ```yaml
//! server:
//!   authorization: kubernetes        # shorthand for {mode: kubernetes} with every default
//!   # or:
//!   authorization:
//!     mode: kubernetes               # or none; the default when the mapping is written
//!     audiences: [informerd]         # the token's audience(s) TokenReview must accept
//!     allowedTTL: 5m                 # how long an allowed decision is reused
//!     deniedTTL: 30s                 # how long a denied one is reused
//!     recheckInterval: 30s           # how often a running Watch is authorized again
//!     cacheSize: 10000               # decisions (and tokens) kept, least recently used out
//! ```
//!
//! Decision: the TTLs are those of the apiserver's webhook authorizer
//! (`--authorization-webhook-cache-authorized-ttl=5m`, `...-unauthorized-ttl=30s`): a grant
//! reaches a client within 30 s, a revocation reaches new requests within 5 m and running
//! watches within `recheckInterval` (a re-check does not reuse decisions older than it).
//! Durations are written as Kubernetes writes them (`30s`, `5m`, `1m30s`).

use std::time::Duration;

use serde_json::Value;

use super::Validator;

/// `server.authorization.mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every client that can connect is served (the socket's permissions are the only gate).
    #[default]
    None,
    /// A client's bearer token is reviewed with TokenReview and each request with
    /// SubjectAccessReview, as the apiserver would authorize the same read.
    Kubernetes,
}

/// `server.authorization`, validated, with its defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationConfig {
    /// `none` (the default) or `kubernetes`.
    pub mode: AuthorizationMode,
    /// The audiences a token must be issued for (default `[informerd]`).
    pub audiences: Vec<String>,
    /// How long an allowed decision (and an accepted token) is reused.
    pub allowed_ttl: Duration,
    /// How long a denied decision (and a rejected token) is reused.
    pub denied_ttl: Duration,
    /// How often a running Watch is authorized again.
    pub recheck_interval: Duration,
    /// How many decisions, and how many tokens, are kept.
    pub cache_size: usize,
}

/// The audience clients request their projected token for.
pub const DEFAULT_AUDIENCE: &str = "informerd";

impl Default for AuthorizationConfig {
    fn default() -> Self {
        AuthorizationConfig {
            mode: AuthorizationMode::None,
            audiences: vec![DEFAULT_AUDIENCE.to_string()],
            allowed_ttl: Duration::from_secs(300),
            denied_ttl: Duration::from_secs(30),
            recheck_interval: Duration::from_secs(30),
            cache_size: 10_000,
        }
    }
}

impl AuthorizationConfig {
    /// Whether clients are authorized at all.
    pub fn enabled(&self) -> bool {
        self.mode == AuthorizationMode::Kubernetes
    }
}

const FIELD: &str = "server.authorization";

impl Validator {
    pub(super) fn authorization(&mut self, raw: Option<Value>) -> AuthorizationConfig {
        let mut config = AuthorizationConfig::default();
        match raw {
            None | Some(Value::Null) => {}
            Some(Value::String(mode)) => {
                if let Some(mode) = self.authorization_mode(FIELD, &mode) {
                    config.mode = mode;
                }
            }
            Some(Value::Object(fields)) => {
                // Writing the section out means wanting it: `mode` defaults to kubernetes here.
                config.mode = AuthorizationMode::Kubernetes;
                for (key, value) in fields {
                    self.authorization_field(&mut config, &key, value);
                }
            }
            Some(other) => self.error(
                FIELD,
                format!(
                    "expected `kubernetes`, `none` or a mapping (mode, audiences, allowedTTL, \
                     deniedTTL, recheckInterval, cacheSize), found {other}"
                ),
            ),
        }
        config
    }

    /// One field of the mapping form.
    fn authorization_field(&mut self, config: &mut AuthorizationConfig, key: &str, value: Value) {
        let path = format!("{FIELD}.{key}");
        match key {
            "mode" => match value.as_str() {
                Some(text) => {
                    if let Some(mode) = self.authorization_mode(&path, text) {
                        config.mode = mode;
                    }
                }
                None => self.error(&path, "expected `kubernetes` or `none`"),
            },
            "audiences" => {
                let audiences: Option<Vec<String>> = value.as_array().and_then(|items| {
                    items
                        .iter()
                        .map(|a| a.as_str().filter(|a| !a.is_empty()).map(String::from))
                        .collect()
                });
                match audiences {
                    Some(list) if !list.is_empty() => config.audiences = list,
                    _ => self.error(
                        &path,
                        "expected a non-empty list of audiences, e.g. [informerd]: the \
                         audience clients request their projected token for",
                    ),
                }
            }
            "allowedTTL" => set(&mut config.allowed_ttl, self.duration_value(&path, &value)),
            "deniedTTL" => set(&mut config.denied_ttl, self.duration_value(&path, &value)),
            "recheckInterval" => set(
                &mut config.recheck_interval,
                self.duration_value(&path, &value),
            ),
            "cacheSize" => match value.as_u64().filter(|n| *n > 0) {
                Some(n) => config.cache_size = usize::try_from(n).unwrap_or(usize::MAX),
                None => self.error(&path, "expected a whole number of decisions, at least 1"),
            },
            _ => self.error(
                &path,
                "unknown field; the fields are mode, audiences, allowedTTL, deniedTTL, \
                 recheckInterval, cacheSize",
            ),
        }
    }

    fn authorization_mode(&mut self, path: &str, text: &str) -> Option<AuthorizationMode> {
        match text.trim() {
            "kubernetes" => Some(AuthorizationMode::Kubernetes),
            "none" => Some(AuthorizationMode::None),
            _ => {
                self.error(
                    path,
                    format!(
                        "unknown mode {text:?}: use `kubernetes` (check each client's token \
                         and RBAC) or `none` (serve every client that can connect)"
                    ),
                );
                None
            }
        }
    }

    /// A positive duration written as Kubernetes writes them: `30s`, `5m`, `1m30s`.
    fn duration_value(&mut self, path: &str, value: &Value) -> Option<Duration> {
        match value.as_str() {
            Some(text) => self.duration(path, text, Duration::from_millis(1)),
            None => {
                self.error(
                    path,
                    format!("{value} is not a duration; write one like 30s, 5m or 1m30s"),
                );
                None
            }
        }
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse;

    fn server(section: &str) -> Result<AuthorizationConfig, String> {
        let text = format!(
            "apiVersion: informerd.io/v1alpha1\nkind: Config\nserver:\n  authorization: \
             {section}\nresources:\n- apiVersion: v1\n  kind: Pod\n"
        );
        parse("informerd.yaml", &text)
            .map(|c| c.server.authorization)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn off_unless_asked_for() {
        let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n- apiVersion: \
                    v1\n  kind: Pod\n";
        let config = parse("informerd.yaml", text).unwrap();
        assert!(!config.server.authorization.enabled());
        assert!(!server("none").unwrap().enabled());
    }

    #[test]
    fn the_shorthand_and_the_mapping_agree() {
        let short = server("kubernetes").unwrap();
        assert!(short.enabled());
        assert_eq!(short.audiences, ["informerd"]);
        assert_eq!(short.allowed_ttl, Duration::from_secs(300));
        assert_eq!(short.denied_ttl, Duration::from_secs(30));
        let long = server(
            "{mode: kubernetes, audiences: [a, b], allowedTTL: 1m30s, deniedTTL: 10s, \
             recheckInterval: 2s, cacheSize: 50}",
        )
        .unwrap();
        assert_eq!(
            long,
            AuthorizationConfig {
                mode: AuthorizationMode::Kubernetes,
                audiences: vec!["a".into(), "b".into()],
                allowed_ttl: Duration::from_secs(90),
                denied_ttl: Duration::from_secs(10),
                recheck_interval: Duration::from_secs(2),
                cache_size: 50,
            }
        );
        assert!(server("{recheckInterval: 1s}").unwrap().enabled());
    }

    #[test]
    fn mistakes_point_at_the_field() {
        let e = server("kubernets").unwrap_err();
        assert!(
            e.contains("informerd.yaml:4:18: server.authorization: unknown mode"),
            "{e}"
        );
        let e = server("{allowedTTL: soon, cacheSize: 0, audiences: [], colour: red}").unwrap_err();
        for field in ["allowedTTL", "cacheSize", "audiences", "colour"] {
            assert!(
                e.contains(&format!("server.authorization.{field}: ")),
                "{field}: {e}"
            );
        }
    }
}
