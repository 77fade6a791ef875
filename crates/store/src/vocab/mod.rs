//! The vocabulary every stage of the pipeline speaks, kept apart from any one stage so that no
//! stage imports another for a word: field paths (`spec.nodeName`, used by transforms, filters,
//! indexes and masks), JSON documents in flat form (decoded by the transform, encoded by the
//! store), Kubernetes' name rules (used by the config and the selectors), and the
//! process's memory figures (used by Status, the logs and the benchmarks).
//!
//! It owns no state and imports nothing else of the crate.

pub mod memory;
pub mod names;
pub mod path;
pub mod reader;
pub mod tape;
pub mod tree;
