//! The sidecar injection webhook (`informerd inject-webhook`): a mutating admission webhook
//! that adds informerd as a native sidecar to the pods that ask for it by annotation, so that a
//! platform team adds informerd to controllers it does not own without editing their
//! Deployments (as Linkerd's `linkerd.io/inject` and Istio's injector do).
//!
//! - `annotations`: what a pod asks for (`informerd.io/inject`, `informerd.io/config`), or
//!   what is wrong with what it asks for.
//! - `patch`: the JSON patch that adds the sidecar, its volumes, and the socket to every
//!   container, as `deploy/sidecar/deployment.yaml` lays them out.
//! - `review`: an AdmissionReview in, an AdmissionReview out (kube's admission types).
//! - `server`: HTTPS, with the serving certificate reloaded when its files change (the same
//!   code as the gRPC listener's `server.tls`).
//!
//! What it must NOT do: change a pod that did not ask for informerd, inject twice, or admit a
//! pod whose annotations it cannot honour (it is refused, naming the annotation to fix). It
//! reads nothing from the API: it needs no RBAC.

mod annotations;
mod patch;
mod review;
mod server;

pub use annotations::{Request, ANNOTATION_CONFIG, ANNOTATION_INJECT};
pub use patch::{injected, patch, CONFIG_DIR, CONTAINER, SOCKET_DIR, SOCKET_ENV, SOCKET_PATH};
pub use review::review;
pub use server::{serve, ServeError, PATH};

/// What the injected sidecar gets that is not the pod's to choose: its image and resources
/// (the `inject-webhook` flags).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sidecar {
    /// The informerd image.
    pub image: String,
    /// `resources.requests.cpu`.
    pub cpu_request: String,
    /// `resources.requests.memory`.
    pub memory_request: String,
    /// `resources.limits.memory`.
    pub memory_limit: String,
    /// `resources.limits.cpu`, when set (none by default: a sync is not throttled).
    pub cpu_limit: Option<String>,
}

impl Sidecar {
    /// The sidecar of `deploy/sidecar/deployment.yaml` with `image`: its requests and limits
    /// (sized there from `make bench`).
    pub fn with_image(image: &str) -> Sidecar {
        Sidecar {
            image: image.to_string(),
            cpu_request: "50m".to_string(),
            memory_request: "64Mi".to_string(),
            memory_limit: "256Mi".to_string(),
            cpu_limit: None,
        }
    }
}

#[cfg(test)]
mod tests;
