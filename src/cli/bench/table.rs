//! The report as aligned text (`-o table`): per resource, what each step left out, then the
//! bytes each stage holds, in total and per object, each figure beside what it measures.

use std::fmt::Write as _;

use super::report::{kinds_text, Report, ResourceReport};
use crate::cli::humanize::thousands;

/// Below this many objects kept, the table says that per-object figures carry the store's
/// fixed costs.
const FEW: usize = 1000;

/// The whole report.
pub fn table(report: &Report) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} objects read from {} ({}), measured with {}",
        thousands(report.objects_read),
        report.input,
        kinds_text(&report.objects_by_kind),
        report.config
    );
    if report.objects_not_configured > 0 {
        let _ = writeln!(
            s,
            "{} objects are of kinds no measured resource caches",
            thousands(report.objects_not_configured)
        );
    }
    for r in &report.resources {
        resource(&mut s, r);
    }
    if !report.notes.is_empty() {
        let _ = writeln!(s);
        for note in &report.notes {
            let _ = writeln!(s, "note: {note}");
        }
    }
    s
}

/// One resource: its counts, and the bytes of what it kept.
fn resource(s: &mut String, r: &ResourceReport) {
    let _ = writeln!(s);
    let _ = writeln!(s, "{} ({} {})", r.name, r.api_version, r.kind);
    if r.objects_read == 0 {
        let _ = writeln!(s, "  no objects of this kind in the input");
        return;
    }
    counts(s, r);
    if r.objects_kept == 0 {
        return;
    }
    let _ = writeln!(s);
    bytes(s, r);
    atoms(s, r);
    comparison(s, r);
}

/// The interned atoms by kind: what is shared, and what only one holder references (a unique
/// value that pays the interning overhead for nothing).
fn atoms(s: &mut String, r: &ResourceReport) {
    let a = &r.store_atoms;
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "  {:<38} {:>10}   {:>10}   {:>10}   {:>10}",
        "interned atoms", "atoms", "bytes", "used once", "its bytes"
    );
    let unpacked = Some(a.packed_strings_unpacked_bytes);
    for (label, k, uncompressed) in [
        ("strings", &a.strings, None),
        ("strings kept compressed", &a.packed_strings, unpacked),
        ("object templates", &a.templates, None),
        ("constant arrays", &a.constant_arrays, None),
        ("array templates", &a.array_templates, None),
    ] {
        let _ = writeln!(
            s,
            "  {label:<38} {:>10}   {:>10}   {:>10}   {:>10}",
            thousands(k.atoms),
            thousands(k.bytes),
            thousands(k.referenced_once),
            thousands(k.referenced_once_bytes)
        );
        if let Some(bytes) = uncompressed.filter(|_| k.atoms > 0) {
            let _ = writeln!(
                s,
                "  {:<38} {:>10}   {:>10}   what the strings kept compressed hold",
                "  uncompressed",
                "",
                thousands(bytes)
            );
        }
    }
    let _ = writeln!(
        s,
        "  {:<38} {:>10}   {:>10}   entries, hash table, unused room in the arena",
        "the atom table itself",
        "",
        thousands(a.table_bytes)
    );
    if !a.strings_referenced_once.is_empty() {
        let _ = writeln!(
            s,
            "  strings used once, first {}: {}",
            a.strings_referenced_once.len(),
            a.strings_referenced_once
                .iter()
                .map(|v| format!("{v:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

/// Objects read, what each step left out, and objects kept.
fn counts(s: &mut String, r: &ResourceReport) {
    count(s, "objects read", Some(r.objects_read), "");
    count(
        s,
        "left out by the namespace scope",
        Some(r.left_out_by_namespace_scope),
        &r.scope,
    );
    let selector_note = |n: Option<usize>| match n {
        Some(_) => "evaluated locally",
        None => "none configured",
    };
    let by_labels = r.left_out_by_label_selector;
    count(
        s,
        "left out by labelSelector",
        by_labels,
        selector_note(by_labels),
    );
    let by_fields = r.left_out_by_field_selector;
    count(
        s,
        "left out by fieldSelector",
        by_fields,
        selector_note(by_fields),
    );
    let filter_note = match r.left_out_by_filter {
        Some(_) => format!(
            "CEL filter; {} evaluation errors, each counted as \"does not match\"",
            r.filter_errors
        ),
        None => "no filter configured".into(),
    };
    count(
        s,
        "left out by the filter",
        r.left_out_by_filter.map(|n| n as usize),
        &filter_note,
    );
    if r.refused_by_store > 0 {
        count(
            s,
            "refused by the store",
            Some(r.refused_by_store as usize),
            "e.g. nested too deep: drop the deep fields with a transform",
        );
    }
    if r.same_name_as_an_earlier_object > 0 {
        count(
            s,
            "same namespace/name as an earlier one",
            Some(r.same_name_as_an_earlier_object),
            "the later object replaces the earlier, as in the cache",
        );
    }
    count(s, "objects kept", Some(r.objects_kept), "in the store");
}

/// One line of counts: `label  n  what`.
fn count(s: &mut String, label: &str, n: Option<usize>, what: &str) {
    let line = format!("  {label:<38} {:>10}   {what}", opt(n));
    let _ = writeln!(s, "{}", line.trim_end());
}

/// The bytes of each stage, in total and per object.
fn bytes(s: &mut String, r: &ResourceReport) {
    let _ = writeln!(
        s,
        "  {:<38} {:>10}   {:>10}",
        "bytes", "total", "per object"
    );
    let per = &r.per_object;
    let figures: [(&str, usize, Option<usize>, String); 8] = [
        (
            "full objects read, as JSON",
            r.full_json_bytes_read,
            per.full_json_bytes_read,
            "compact JSON of every object read, as given".into(),
        ),
        (
            "full objects kept, as JSON",
            r.full_json_bytes_kept,
            per.full_json_bytes_kept,
            "compact JSON of the kept objects, as given".into(),
        ),
        (
            "kept objects after the transform",
            r.transformed_json_bytes,
            per.transformed_json_bytes,
            "JSON of the stored objects, as clients receive them".into(),
        ),
        (
            "store: encoded_bytes",
            r.store_encoded_bytes,
            per.store_encoded_bytes,
            "each object's own encoding".into(),
        ),
        (
            "store: slots_bytes",
            r.store_slots_bytes,
            per.store_slots_bytes,
            "the table of current objects: locations, key table, lengths, arena room".into(),
        ),
        (
            "store: interned_bytes",
            r.store_interned_bytes,
            per.store_interned_bytes,
            format!(
                "{} strings and shapes stored once and shared by the objects (falls per \
                 object as objects grow in number)",
                thousands(r.store_interned_atoms)
            ),
        ),
        (
            "store: allocated (jemalloc)",
            r.store_allocated_bytes,
            per.store_allocated_bytes,
            format!(
                "stats.allocated after building the store minus before: objects, interned \
                 atoms, indexes, change log ({} entries)",
                thousands(r.store_change_log_entries)
            ),
        ),
        (
            "empty store: allocated (jemalloc)",
            r.empty_store_allocated_bytes,
            None,
            "the same reading around an empty store (tables, change log ring): part of the \
             figure above"
                .into(),
        ),
    ];
    for (label, total, per, what) in figures {
        let _ = writeln!(
            s,
            "  {label:<38} {:>10}   {:>10}   {what}",
            thousands(total),
            opt(per)
        );
    }
}

/// The store against the full JSON, and a word on small inputs.
fn comparison(s: &mut String, r: &ResourceReport) {
    if let Some(ratio) = r.times_less_than_full_json {
        let _ = writeln!(s);
        let comparison = if ratio >= 1.0 {
            format!("{ratio:.1} times less than")
        } else {
            format!("{:.1} times more than", 1.0 / ratio)
        };
        let _ = writeln!(
            s,
            "  {comparison} the full objects as JSON (full objects kept as JSON / store \
             allocated)"
        );
    }
    if r.objects_kept < FEW {
        let _ = writeln!(
            s,
            "  with fewer than {} objects kept, the store's tables and shared strings weigh \
             on every per-object figure; a dump of a real cluster gives steadier ones",
            thousands(FEW)
        );
    }
}

fn opt(n: Option<usize>) -> String {
    n.map(thousands).unwrap_or_else(|| "-".into())
}
