//! The figures `bench` prints, as one document (`-o json`) and the model the table renders:
//! each labelled with what it measures.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::cli::humanize::thousands;

/// Everything `bench` prints.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub config: String,
    pub input: String,
    /// Objects in the input.
    pub objects_read: usize,
    /// Objects in the input by "apiVersion kind".
    pub objects_by_kind: BTreeMap<String, usize>,
    pub resources: Vec<ResourceReport>,
    /// Objects of kinds that none of the measured resources caches.
    pub objects_not_configured: usize,
    pub notes: Vec<String>,
}

/// What one resource keeps of the input, and what that costs.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceReport {
    pub name: String,
    pub api_version: String,
    pub kind: String,
    /// The namespace scope, as applied here.
    pub scope: String,
    /// Objects of this apiVersion and kind in the input.
    pub objects_read: usize,
    pub left_out_by_namespace_scope: usize,
    /// `None`: no labelSelector configured.
    pub left_out_by_label_selector: Option<usize>,
    pub left_out_by_field_selector: Option<usize>,
    /// Objects the CEL filter did not keep (evaluation errors included); `None`: no filter.
    pub left_out_by_filter: Option<u64>,
    /// CEL evaluation errors (each counted as "does not match", as Kubernetes does).
    pub filter_errors: u64,
    pub refused_by_store: u64,
    /// Objects given to the pipeline after one with the same namespace/name (the later one
    /// replaces the earlier).
    pub same_name_as_an_earlier_object: usize,
    /// Objects in the store at the end.
    pub objects_kept: usize,
    /// Compact JSON of the objects read, as given.
    pub full_json_bytes_read: usize,
    /// Compact JSON of the kept objects, as given.
    pub full_json_bytes_kept: usize,
    /// JSON of the stored objects (after the transform), as clients receive them.
    pub transformed_json_bytes: usize,
    /// The store's `encoded_bytes`: each object's own encoding.
    pub store_encoded_bytes: usize,
    /// The store's `slots_bytes`: the table of current objects besides their encoding.
    pub store_slots_bytes: usize,
    /// The store's `interned_bytes`: strings and structure interned once, shared by objects.
    pub store_interned_bytes: usize,
    pub store_interned_atoms: usize,
    /// The interned atoms by kind, and those only one holder references.
    pub store_atoms: informerd::store::AtomBreakdown,
    pub store_change_log_entries: usize,
    /// jemalloc `stats.allocated` after the store was built minus before.
    pub store_allocated_bytes: usize,
    /// The same reading around an empty store of the same configuration.
    pub empty_store_allocated_bytes: usize,
    pub per_object: PerObject,
    /// Full objects kept as JSON ÷ what the store allocated.
    pub times_less_than_full_json: Option<f64>,
}

/// The figures of [`ResourceReport`] divided by objects (rounded); `None` when there are none.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PerObject {
    pub full_json_bytes_read: Option<usize>,
    pub full_json_bytes_kept: Option<usize>,
    pub transformed_json_bytes: Option<usize>,
    pub store_encoded_bytes: Option<usize>,
    pub store_slots_bytes: Option<usize>,
    pub store_interned_bytes: Option<usize>,
    pub store_allocated_bytes: Option<usize>,
}

impl ResourceReport {
    /// Fills in the figures derived from the measured ones: each total per object read or
    /// kept, and the full JSON kept against what the store allocated.
    pub fn derive_figures(&mut self) {
        let (read, kept, allocated) = (
            self.objects_read,
            self.objects_kept,
            self.store_allocated_bytes,
        );
        self.per_object = PerObject {
            full_json_bytes_read: per(self.full_json_bytes_read, read),
            full_json_bytes_kept: per(self.full_json_bytes_kept, kept),
            transformed_json_bytes: per(self.transformed_json_bytes, kept),
            store_encoded_bytes: per(self.store_encoded_bytes, kept),
            store_slots_bytes: per(self.store_slots_bytes, kept),
            store_interned_bytes: per(self.store_interned_bytes, kept),
            store_allocated_bytes: per(allocated, kept),
        };
        self.times_less_than_full_json = (kept > 0 && allocated > 0)
            .then(|| (self.full_json_bytes_kept as f64 / allocated as f64 * 10.0).round() / 10.0);
    }
}

fn per(total: usize, count: usize) -> Option<usize> {
    (count > 0).then(|| (total + count / 2) / count)
}

/// `N apiVersion kind, ...`, or `no objects`.
pub fn kinds_text(kinds: &BTreeMap<String, usize>) -> String {
    if kinds.is_empty() {
        return "no objects".into();
    }
    kinds
        .iter()
        .map(|(k, n)| format!("{} {k}", thousands(*n)))
        .collect::<Vec<_>>()
        .join(", ")
}
