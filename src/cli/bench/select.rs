//! Which objects of the dump a resource sees: those of its apiVersion and kind, then what the
//! apiserver does for the sidecar, done here locally with the sidecar's own selector types: the
//! namespace scope, the label selector and the field selector. A `namespaceSelector` is not
//! evaluated (a dump of pods has no Namespace objects): every namespace counts as matching.

use std::collections::{BTreeMap, HashMap, HashSet};

use informerd::{
    config::{ResourceConfig, Scope},
    filter::{FieldSelector, LabelSelector},
    store::ObjectKey,
};

use super::dump::Item;

/// Whether an object of the dump is of the resource's apiVersion and kind.
pub fn is_of_kind(item: &Item, rc: &ResourceConfig) -> bool {
    item.api_version.as_deref() == Some(&rc.api_version) && item.kind.as_deref() == Some(&rc.kind)
}

/// A resource's objects as the apiserver would list them for the sidecar, and how many each
/// step left out.
pub struct Selection<'d> {
    /// The namespace scope, as applied here.
    pub scope: String,
    /// Objects by the scope (stream) that lists them: one per listed namespace, as the fleet
    /// runs them, or one cluster-wide.
    pub by_scope: BTreeMap<Option<&'d str>, Vec<&'d Item>>,
    pub left_out_by_namespace_scope: usize,
    /// `None`: no labelSelector configured.
    pub left_out_by_label_selector: Option<usize>,
    pub left_out_by_field_selector: Option<usize>,
}

/// Why an object is not listed.
enum LeftOut {
    Scope,
    Labels,
    Fields,
}

/// The resource's namespace scope and selectors, parsed.
struct Selectors<'c> {
    /// `None`: every namespace.
    namespaces: Option<Vec<&'c str>>,
    labels: Option<LabelSelector>,
    fields: Option<FieldSelector>,
}

impl<'c> Selectors<'c> {
    fn new(rc: &'c ResourceConfig) -> Selectors<'c> {
        let namespaces = match &rc.scope {
            Scope::Namespaces(list) => Some(list.iter().map(String::as_str).collect()),
            Scope::AllNamespaces | Scope::Selector(_) => None,
        };
        let validated = "validated with the configuration";
        Selectors {
            namespaces,
            labels: rc
                .label_selector
                .as_deref()
                .map(|s| LabelSelector::parse(s).expect(validated)),
            fields: rc
                .field_selector
                .as_deref()
                .map(|s| FieldSelector::parse(s).expect(validated)),
        }
    }

    /// The scope that lists the object (`None`: the cluster-wide one), or why none does.
    fn place<'d>(&self, item: &'d Item) -> Result<Option<&'d str>, LeftOut> {
        let scope = match &self.namespaces {
            None => None,
            Some(list) => Some(
                item.key
                    .namespace()
                    .filter(|ns| list.contains(ns))
                    .ok_or(LeftOut::Scope)?,
            ),
        };
        if self.labels.is_none() && self.fields.is_none() {
            return Ok(scope);
        }
        // Decoded once for both selectors (the dump keeps objects as text).
        let object = item.object();
        if self
            .labels
            .as_ref()
            .is_some_and(|s| !s.matches_object(&object))
        {
            return Err(LeftOut::Labels);
        }
        if self.fields.as_ref().is_some_and(|s| !s.matches(&object)) {
            return Err(LeftOut::Fields);
        }
        Ok(scope)
    }
}

/// The scope as the report names it.
fn scope_text(scope: &Scope) -> String {
    match scope {
        Scope::AllNamespaces => "all namespaces".into(),
        Scope::Namespaces(list) => format!("namespaces {}", list.join(", ")),
        Scope::Selector(selector) => {
            format!("all namespaces (namespaceSelector {selector} not evaluated)")
        }
    }
}

impl<'d> Selection<'d> {
    /// Selects among `items` (the resource's kind) as the apiserver would.
    pub fn new(rc: &ResourceConfig, items: &[&'d Item]) -> Selection<'d> {
        let selectors = Selectors::new(rc);
        let (mut out_of_scope, mut out_by_labels, mut out_by_fields) = (0, 0, 0);
        let mut by_scope: BTreeMap<Option<&str>, Vec<&Item>> = BTreeMap::new();
        for item in items {
            match selectors.place(item) {
                Ok(scope) => by_scope.entry(scope).or_default().push(item),
                Err(LeftOut::Scope) => out_of_scope += 1,
                Err(LeftOut::Labels) => out_by_labels += 1,
                Err(LeftOut::Fields) => out_by_fields += 1,
            }
        }
        Selection {
            scope: scope_text(&rc.scope),
            by_scope,
            left_out_by_namespace_scope: out_of_scope,
            left_out_by_label_selector: selectors.labels.map(|_| out_by_labels),
            left_out_by_field_selector: selectors.fields.map(|_| out_by_fields),
        }
    }

    /// How many selected objects come after one with the same namespace/name (the later one
    /// replaces the earlier, as in the cache), and the compact JSON size of each key's last.
    pub fn repeats(&self) -> (usize, HashMap<&'d ObjectKey, usize>) {
        let mut seen = HashSet::new();
        let mut full_bytes_by_key = HashMap::new();
        let mut duplicates = 0;
        for item in self.by_scope.values().flatten() {
            if !seen.insert(&item.key) {
                duplicates += 1;
            }
            full_bytes_by_key.insert(&item.key, item.json_bytes);
        }
        (duplicates, full_bytes_by_key)
    }
}
