//! Transforms: `drop` and `keep` paths applied to every object before it is stored.
//!
//! This module changes objects; it never decides which objects are kept (that is
//! informerd's `filter`'s business). It owns the [`Transform`] and its compilation; the
//! path tree lives in `tree`, applying it to a value in `apply`, applying it while decoding in
//! `decode`, applying it while writing a stored object as JSON text in `render`, and the
//! identity fields and the benchmarks' profile in `profiles`.
//!
//! # Paths
//!
//! Dotted fields (`spec.nodeName`), map keys in brackets with double quotes
//! (`metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"]`), and `[*]` for
//! every element of a list, or every value of a map (`spec.containers[*].env`: every container's
//! `env`). A path never steps into a list implicitly: `spec.containers.env` matches nothing, since
//! `containers` is a list. List indexes (`[0]`) are not supported. Bad syntax is an error that
//! names the column; see [`path`] for the grammar.
//!
//! # Semantics
//!
//! - `drop` removes the fields it names, wherever they exist; missing fields are fine. Maps and
//!   lists that a drop leaves empty stay (an empty `annotations: {}` is harmless and keeps the
//!   transform a pure function of the paths).
//! - `keep` is an allow-list projection: only the listed paths, and everything below them,
//!   survive. Objects on the way to a kept path are kept with only the kept fields in them, even
//!   when none is there (`keep: [status.phase]` leaves `status: {}` on a pod without a phase:
//!   this keeps a projection of a projection unchanged); a scalar or a list found where the path
//!   goes on into an object is removed. A list under `[*]` keeps all its elements in place
//!   (positions matter), each projected: an object element with none of the kept fields becomes
//!   `{}`, a scalar element stays as is.
//! - The identity fields are always kept and cannot be dropped: `apiVersion`, `kind`,
//!   `metadata.name`, `metadata.namespace`, `metadata.uid`, `metadata.resourceVersion` and
//!   `metadata.generation`. `generation` is there because Kubernetes controllers rely on it
//!   (`GenerationChangedPredicate`, `status.observedGeneration`), and it costs a few bytes. Labels
//!   are not forced: a label selector evaluated on the cache sees only what the transform keeps.
//! - With both, `keep` applies first, then `drop` (`keep: [metadata]`, `drop:
//!   [metadata.managedFields]`).
//! - Both are idempotent: applying a transform to its own output changes nothing.
//!
//! # Cost
//!
//! Paths are compiled once into a tree; [`Transform::apply`] walks the object once, visiting only
//! the fields the tree names (a `drop` touches nothing else; a `keep` visits the keys of the
//! objects it projects). [`Transform::decode`] applies the same transform while decoding, so that
//! the fields a transform removes are never materialised.

mod apply;
mod decode;
mod error;
mod profiles;
mod render;
mod tree;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::vocab::path::FieldPath;

pub use error::TransformError;
pub use profiles::{CONTROLLER_DROP, CONTROLLER_KEEP, IDENTITY_FIELDS};

use tree::Node;

/// A compiled transform; cheap to clone and shareable between threads.
#[derive(Clone)]
pub struct Transform {
    inner: Arc<Inner>,
}

struct Inner {
    keep: Option<Node>,
    drop: Option<Node>,
    keep_paths: Vec<FieldPath>,
    drop_paths: Vec<FieldPath>,
    /// The nodes (high half) and text bytes (low half) of the last tape decoded, to reserve
    /// as much for the next (`decode`).
    size_hint: AtomicU64,
}

impl fmt::Debug for Transform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keep: Vec<&str> = self.inner.keep_paths.iter().map(|p| p.as_str()).collect();
        let drop: Vec<&str> = self.inner.drop_paths.iter().map(|p| p.as_str()).collect();
        f.debug_struct("Transform")
            .field("keep", &keep)
            .field("drop", &drop)
            .finish()
    }
}

impl Default for Transform {
    /// The identity transform.
    fn default() -> Self {
        Transform::identity()
    }
}

impl Transform {
    /// Compiles `drop` and `keep` paths; an empty `keep` keeps everything.
    pub fn new<S: AsRef<str>>(drop: &[S], keep: &[S]) -> Result<Transform, TransformError> {
        let parse = |list: &'static str, paths: &[S]| -> Result<Vec<FieldPath>, TransformError> {
            paths
                .iter()
                .enumerate()
                .map(|(index, p)| {
                    FieldPath::parse(p.as_ref()).map_err(|source| TransformError::Path {
                        list,
                        index,
                        source,
                    })
                })
                .collect()
        };
        let drop_paths = parse("drop", drop)?;
        let keep_paths = parse("keep", keep)?;
        for (index, path) in drop_paths.iter().enumerate() {
            if let Some(field) = profiles::identity_field_removed_by(path) {
                return Err(TransformError::DropsIdentity {
                    index,
                    path: path.to_string(),
                    field: field.join("."),
                });
            }
        }
        let keep = (!keep_paths.is_empty()).then(|| {
            let identity = IDENTITY_FIELDS
                .iter()
                .map(|f| FieldPath::from_fields(f.iter().copied()));
            Node::compile(keep_paths.iter().cloned().chain(identity))
        });
        let drop = (!drop_paths.is_empty()).then(|| Node::compile(drop_paths.iter().cloned()));
        Ok(Transform {
            inner: Arc::new(Inner {
                keep,
                drop,
                keep_paths,
                drop_paths,
                size_hint: AtomicU64::new(0),
            }),
        })
    }

    /// The transform that changes nothing.
    pub fn identity() -> Transform {
        Transform::new::<&str>(&[], &[]).expect("no paths")
    }

    /// The "controller" profile of the benchmarks: keep [`CONTROLLER_KEEP`], then drop
    /// [`CONTROLLER_DROP`].
    ///
    /// ```
    /// use informerd_store::transform::Transform;
    /// use serde_json::json;
    ///
    /// let mut pod = json!({
    ///     "apiVersion": "v1", "kind": "Pod",
    ///     "metadata": {"name": "p", "namespace": "default", "managedFields": [{"manager": "kubectl"}]},
    ///     "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "nginx"}]},
    ///     "status": {"phase": "Running", "podIP": "10.0.0.7", "containerStatuses": []},
    /// });
    /// Transform::controller().apply(&mut pod);
    /// assert_eq!(pod, json!({
    ///     "apiVersion": "v1", "kind": "Pod",
    ///     "metadata": {"name": "p", "namespace": "default"},
    ///     "spec": {"nodeName": "node-1"},
    ///     "status": {"phase": "Running", "podIP": "10.0.0.7"},
    /// }));
    /// ```
    pub fn controller() -> Transform {
        Transform::new(CONTROLLER_DROP, CONTROLLER_KEEP).expect("the controller profile is valid")
    }

    /// Whether this transform changes nothing.
    pub fn is_identity(&self) -> bool {
        self.inner.keep.is_none() && self.inner.drop.is_none()
    }

    /// The `keep` paths as configured (without the identity fields).
    pub fn keep_paths(&self) -> &[FieldPath] {
        &self.inner.keep_paths
    }

    /// The `drop` paths as configured.
    pub fn drop_paths(&self) -> &[FieldPath] {
        &self.inner.drop_paths
    }
}

#[cfg(test)]
mod tests;
