//! What a pod asks of the webhook, read from its annotations: nothing (`informerd.io/inject`
//! absent or `"false"`), or the sidecar with the configuration in a ConfigMap
//! (`informerd.io/config`). A value the webhook cannot honour is an error whose message names
//! the annotation and what to set it to: the pod is refused rather than run without the
//! sidecar it asked for, or with one that cannot start.

use std::collections::BTreeMap;

/// `"true"`: add the sidecar; `"false"` or absent: leave the pod alone.
pub const ANNOTATION_INJECT: &str = "informerd.io/inject";

/// The name of the ConfigMap, in the pod's namespace, whose `informerd.yaml` is the sidecar's
/// configuration.
pub const ANNOTATION_CONFIG: &str = "informerd.io/config";

/// What the annotations ask for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// No sidecar.
    Nothing,
    /// The sidecar, configured by this ConfigMap.
    Inject {
        /// The ConfigMap's name.
        config_map: String,
    },
}

impl Request {
    /// Reads the annotations of a pod in `namespace`; the error is the message the pod is
    /// refused with.
    pub fn of(
        annotations: Option<&BTreeMap<String, String>>,
        namespace: &str,
    ) -> Result<Request, String> {
        let get = |key: &str| annotations.and_then(|a| a.get(key)).map(String::as_str);
        match get(ANNOTATION_INJECT) {
            None | Some("false") => return Ok(Request::Nothing),
            Some("true") => {}
            Some(other) => {
                return Err(format!(
                    "annotation {ANNOTATION_INJECT} is {other:?}: set it to \"true\" to add the \
                     informerd sidecar, or to \"false\" (or remove it) to leave the pod alone"
                ))
            }
        }
        let what = format!(
            "set it to the name of the ConfigMap in namespace {namespace:?} whose key \
             informerd.yaml is the sidecar's configuration"
        );
        match get(ANNOTATION_CONFIG) {
            None | Some("") => Err(format!(
                "annotation {ANNOTATION_CONFIG} is missing, and {ANNOTATION_INJECT} is \"true\": {what}"
            )),
            Some(name) if !is_dns_subdomain(name) => Err(format!(
                "annotation {ANNOTATION_CONFIG} is {name:?}, which is not a ConfigMap name \
                 (lowercase letters, digits, '-' and '.', starting and ending with a letter or \
                 digit, at most 253 characters): {what}"
            )),
            Some(name) => Ok(Request::Inject {
                config_map: name.to_string(),
            }),
        }
    }
}

/// A DNS-1123 subdomain, the form of a ConfigMap's name (as the apiserver validates it).
fn is_dns_subdomain(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    name.len() <= 253
        && name.split('.').all(|label| {
            label.starts_with(alnum)
                && label.ends_with(alnum)
                && label.chars().all(|c| alnum(c) || c == '-')
        })
}
