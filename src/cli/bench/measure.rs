//! The measurement: each resource's selected objects run through the sidecar's own pipeline,
//! [`ScopeIngest`], as one initial list per scope (CEL filter, transform, and a real store with
//! the configured indexes and change log bounds), with jemalloc's `stats.allocated` read before
//! and after the store is built.

use std::{collections::BTreeMap, sync::Arc};

use informerd::{
    config::{Config, ResourceConfig, Scope},
    fleet::{decode, Applied, Decoding, Pipeline, ScopeIngest},
    store::Writer,
};
use kube::runtime::watcher;

use super::{
    dump::{Dump, Item},
    report::{PerObject, Report, ResourceReport},
    select::{is_of_kind, Selection},
};

/// Measures each resource on the objects of its kind in the dump.
pub fn measure(cfg: &Config, resources: &[&ResourceConfig], dump: &Dump, input: &str) -> Report {
    let mut objects_by_kind = BTreeMap::new();
    for item in &dump.items {
        *objects_by_kind.entry(item.type_name()).or_insert(0) += 1;
    }
    exact_allocation_stats();
    let mut configured = vec![false; dump.items.len()];
    let mut reports = Vec::with_capacity(resources.len());
    // Each store stays alive until the end, so that one resource's measurement cannot free
    // memory in another's.
    let mut stores = Vec::with_capacity(resources.len());
    for rc in resources {
        let items: Vec<&Item> = dump
            .items
            .iter()
            .enumerate()
            .filter(|(_, it)| is_of_kind(it, rc))
            .map(|(i, it)| {
                configured[i] = true;
                it
            })
            .collect();
        let (report, store) = measure_resource(cfg, rc, &items);
        reports.push(report);
        stores.push(store);
    }
    Report {
        config: cfg.file().to_string(),
        input: input.to_string(),
        objects_read: dump.items.len(),
        objects_by_kind,
        objects_not_configured: configured.iter().filter(|c| !**c).count(),
        resources: reports,
        notes: notes(resources, dump),
    }
}

/// What the figures do not show: what was not evaluated as the sidecar would, and objects
/// that no resource could take.
fn notes(resources: &[&ResourceConfig], dump: &Dump) -> Vec<String> {
    let mut notes = Vec::new();
    for rc in resources {
        if let Scope::Selector(selector) = &rc.scope {
            notes.push(format!(
                "{}: namespaceSelector ({selector}) needs the Namespace objects, which the input \
                 does not have: every namespace was counted as matching",
                rc.name
            ));
        }
    }
    if resources
        .iter()
        .any(|rc| rc.label_selector.is_some() || rc.field_selector.is_some())
    {
        notes.push(
            "labelSelector and fieldSelector were evaluated here, on the objects as given (the \
             sidecar has the apiserver evaluate them)"
                .into(),
        );
    }
    let without_kind = dump
        .items
        .iter()
        .filter(|it| it.api_version.is_none() || it.kind.is_none())
        .count();
    if without_kind > 0 {
        notes.push(format!(
            "{without_kind} objects have no apiVersion/kind (items of a plain List that do not \
             say theirs) and match no resource"
        ));
    }
    notes
}

/// Bytes allocated by the process (jemalloc's count).
fn allocated() -> usize {
    informerd::vocab::memory::allocated_bytes() as usize
}

fn exact_allocation_stats() {
    if !informerd::vocab::memory::exact_allocation_stats() {
        tracing::debug!("the thread cache of jemalloc stays on");
    }
}

/// Runs the objects of one resource through scope, selectors, filter, transform and store.
fn measure_resource(
    cfg: &Config,
    rc: &ResourceConfig,
    items: &[&Item],
) -> (ResourceReport, Arc<Writer>) {
    let selection = Selection::new(rc, items);
    let (duplicates, full_bytes_by_key) = selection.repeats();

    // What a store costs before its first object: tables and the change log's ring.
    let before = allocated();
    let empty = Pipeline::new(&cfg.change_log, rc);
    let empty_allocated = allocated().saturating_sub(before);
    drop(empty);

    let (pipeline, counters, allocated) = ingest(cfg, rc, &selection);
    let store = pipeline.store.clone();
    let stats = store.stats();
    let (_, stored) = store.list(None);
    let transformed: usize = stored.iter().map(|o| o.to_json_bytes().len()).sum();
    let full_kept: usize = stored
        .iter()
        .filter_map(|o| full_bytes_by_key.get(o.key()))
        .sum();
    drop(stored);
    let mut report = ResourceReport {
        name: rc.name.clone(),
        api_version: rc.api_version.clone(),
        kind: rc.kind.clone(),
        scope: selection.scope,
        objects_read: items.len(),
        left_out_by_namespace_scope: selection.left_out_by_namespace_scope,
        left_out_by_label_selector: selection.left_out_by_label_selector,
        left_out_by_field_selector: selection.left_out_by_field_selector,
        left_out_by_filter: rc.filter.as_ref().map(|_| counters.filtered_out),
        filter_errors: counters.filter_errors,
        refused_by_store: counters.refused,
        same_name_as_an_earlier_object: duplicates,
        objects_kept: stats.objects,
        full_json_bytes_read: items.iter().map(|it| it.json_bytes).sum(),
        full_json_bytes_kept: full_kept,
        transformed_json_bytes: transformed,
        store_encoded_bytes: stats.encoded_bytes,
        store_slots_bytes: stats.slots_bytes,
        store_interned_bytes: stats.interned_bytes,
        store_interned_atoms: stats.interned_strings,
        store_atoms: store.atom_breakdown(),
        store_change_log_entries: stats.log_entries,
        store_allocated_bytes: allocated,
        empty_store_allocated_bytes: empty_allocated,
        per_object: PerObject::default(),
        times_less_than_full_json: None,
    };
    report.derive_figures();
    (report, store)
}

/// The sidecar's own code path, as an initial list per scope: the pipeline (its store filled),
/// what it applied, and the bytes allocated meanwhile. Nothing else is kept between the two
/// readings of the allocator.
fn ingest(
    cfg: &Config,
    rc: &ResourceConfig,
    selection: &Selection<'_>,
) -> (Pipeline, Applied, usize) {
    let before = allocated();
    let pipeline = Pipeline::new(&cfg.change_log, rc);
    let mut counters = Applied::default();
    for (namespace, scope_items) in &selection.by_scope {
        let mut ingest = ScopeIngest::new(pipeline.clone(), namespace.map(str::to_string));
        ingest.handle(watcher::Event::Init);
        // Decoded as the fleet's watchers decode (the transform applied while decoding).
        let _decoding = Decoding::enter(pipeline.decoding());
        for item in scope_items {
            let object = decode::object(item.json.get()).expect("a JSON object always decodes");
            ingest.handle(watcher::Event::InitApply(object));
        }
        ingest.handle(watcher::Event::InitDone);
        counters.filtered_out += ingest.counters.filtered_out;
        counters.filter_errors += ingest.counters.filter_errors;
        counters.refused += ingest.counters.refused;
    }
    pipeline.store.reclaim();
    let allocated = allocated().saturating_sub(before);
    (pipeline, counters, allocated)
}
