//! The fields every stored object keeps, and the "controller" profile of the benchmarks.

use crate::vocab::path::{FieldPath, Segment};

/// The fields that every stored object keeps, whatever the transform says.
pub const IDENTITY_FIELDS: &[&[&str]] = &[
    &["apiVersion"],
    &["kind"],
    &["metadata", "name"],
    &["metadata", "namespace"],
    &["metadata", "uid"],
    &["metadata", "resourceVersion"],
    &["metadata", "generation"],
];

/// The `keep` paths of the "controller" profile used in the benchmarks: what a typical
/// pod-watching controller reads. Use with [`CONTROLLER_DROP`], or [`Transform::controller`].
pub const CONTROLLER_KEEP: &[&str] = &[
    "metadata",
    "spec.nodeName",
    "status.phase",
    "status.conditions",
    "status.podIP",
];

/// The `drop` paths of the "controller" profile: [`CONTROLLER_KEEP`] keeps all of `metadata`
/// but its `managedFields`.
pub const CONTROLLER_DROP: &[&str] = &["metadata.managedFields"];

/// The identity field that removing `path` would remove, if any.
pub(super) fn identity_field_removed_by(path: &FieldPath) -> Option<&'static [&'static str]> {
    IDENTITY_FIELDS.iter().copied().find(|f| covers(path, f))
}

/// Whether removing `path` removes the field `field` (the path names it or one of its parents).
fn covers(path: &FieldPath, field: &[&str]) -> bool {
    path.segments().len() <= field.len()
        && path
            .segments()
            .iter()
            .zip(field)
            .all(|(segment, name)| match segment {
                Segment::Any => true,
                Segment::Field(f) => f == name,
            })
}
