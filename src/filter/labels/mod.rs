//! Kubernetes label selectors: the string syntax of `kubectl -l` and `?labelSelector=`, and the
//! structured `LabelSelector` of API objects, parsed, validated and matched locally.
//!
//! kube-core's `Selector` converts structured selectors and matches maps, but it has no parser
//! for the string syntax, no `<`/`>` requirements and no validation of keys and values, which is
//! what configuration and the gRPC API need; hence this module. [`LabelSelector::to_string`]
//! writes the string syntax, which kube-rs' `ListParams::labels` takes.
//!
//! The [`Requirement`]s and how each matches a value (`requirement`), the [`LabelSelector`] that
//! holds them (`selector`), the string syntax (`parse`), the structured selector (`structured`),
//! and the [`Labels`] a selector reads (`source`).

mod parse;
mod requirement;
mod selector;
mod source;
mod structured;

pub use requirement::Requirement;
pub use selector::LabelSelector;
pub use source::Labels;

#[cfg(test)]
mod tests;
