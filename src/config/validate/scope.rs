//! A resource's scope: the namespaces it is watched in, listed (`namespaces`), chosen by a label
//! selector on Namespaces (`namespaceSelector`), or, with neither, all of them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;

use crate::config::model::Scope;
use crate::config::raw::RawLabelSelector;
use crate::filter::{FilterError, LabelSelector};
use crate::vocab::names::dns1123_label;

use super::resource::ResourceFields;

impl ResourceFields<'_> {
    /// `namespaces` or `namespaceSelector` (not both); all namespaces when invalid (the error
    /// recorded).
    pub(super) fn scope(
        &mut self,
        namespaces: Option<Vec<String>>,
        selector: Option<RawLabelSelector>,
    ) -> Scope {
        match (namespaces, selector) {
            (Some(_), Some(_)) => {
                self.error(
                    "namespaceSelector",
                    "set either namespaces or namespaceSelector, not both",
                );
                Scope::AllNamespaces
            }
            (Some(namespaces), None) => self.namespaces(namespaces),
            (None, Some(selector)) => self.namespace_selector(selector),
            (None, None) => Scope::AllNamespaces,
        }
    }

    /// `namespaces`: a non-empty list of distinct namespace names.
    fn namespaces(&mut self, namespaces: Vec<String>) -> Scope {
        if namespaces.is_empty() {
            self.error(
                "namespaces",
                "the list is empty; list namespaces, or remove `namespaces` to watch all \
                 namespaces",
            );
        }
        for (j, ns) in namespaces.iter().enumerate() {
            let field = format!("namespaces[{j}]");
            if let Err(e) = dns1123_label(ns) {
                self.error(&field, format!("invalid namespace '{ns}': {e}"));
            } else if namespaces[..j].contains(ns) {
                self.error(&field, format!("namespace '{ns}' is listed twice"));
            }
        }
        Scope::Namespaces(namespaces)
    }

    /// `namespaceSelector`: a Kubernetes LabelSelector, errors shown at the part at fault.
    fn namespace_selector(&mut self, selector: RawLabelSelector) -> Scope {
        match LabelSelector::from_k8s(&to_k8s(selector)) {
            Ok(s) => Scope::Selector(s),
            Err(FilterError::LabelSelector { field, message }) => {
                let field = match field {
                    Some(f) => format!("namespaceSelector.{f}"),
                    None => "namespaceSelector".to_string(),
                };
                self.error(&field, format!("invalid label selector: {message}"));
                Scope::AllNamespaces
            }
            Err(e) => {
                self.error("namespaceSelector", e.to_string());
                Scope::AllNamespaces
            }
        }
    }
}

/// The selector as Kubernetes' own type, which the filter module compiles.
fn to_k8s(selector: RawLabelSelector) -> meta::LabelSelector {
    meta::LabelSelector {
        match_labels: selector.match_labels,
        match_expressions: selector.match_expressions.map(|exprs| {
            exprs
                .into_iter()
                .map(|e| meta::LabelSelectorRequirement {
                    key: e.key,
                    operator: e.operator,
                    values: e.values,
                })
                .collect()
        }),
    }
}
