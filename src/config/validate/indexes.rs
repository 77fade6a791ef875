//! A resource's secondary `indexes`: each a unique name and exactly one of a field `path`, a
//! `cel` expression yielding the keys, or `labels: true` (the label index, which a List of a
//! namespace by a label selector looks up instead of visiting the namespace).

use crate::config::model::IndexConfig;
use crate::config::raw::RawIndex;
use crate::filter::StringsExpr;

use super::resource::ResourceFields;

impl ResourceFields<'_> {
    /// `indexes`: the valid ones, compiled (the errors of the others recorded).
    pub(super) fn indexes(&mut self, raw: Vec<RawIndex>) -> Vec<IndexConfig> {
        let mut indexes = Vec::with_capacity(raw.len());
        for (j, index) in raw.into_iter().enumerate() {
            self.index_name(j, &index.name, &indexes);
            let expr = if index.labels {
                self.label_index(j, &index, &indexes)
            } else {
                self.index_expr(j, index.path, index.cel)
            };
            if let Some(expr) = expr {
                indexes.push(IndexConfig {
                    name: index.name,
                    expr,
                });
            }
        }
        indexes
    }

    /// `indexes[j].name`: 1 to 63 letters, digits, '-', '_' or '.', unique among `earlier`.
    fn index_name(&mut self, j: usize, name: &str, earlier: &[IndexConfig]) {
        let name_ok = !name.is_empty()
            && name.len() <= 63
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_ok {
            self.error(
                &format!("indexes[{j}].name"),
                format!(
                    "invalid index name '{name}': use 1 to 63 letters, digits, '-', '_' or '.'"
                ),
            );
        } else if earlier.iter().any(|ix| ix.name == name) {
            self.error(
                &format!("indexes[{j}].name"),
                format!("duplicate index name '{name}'"),
            );
        }
    }

    /// `indexes[j]` with `labels: true`: alone (no path or cel), and once per resource.
    fn label_index(
        &mut self,
        j: usize,
        index: &RawIndex,
        earlier: &[IndexConfig],
    ) -> Option<StringsExpr> {
        if index.path.is_some() || index.cel.is_some() {
            self.error(
                &format!("indexes[{j}]"),
                "set one of path, cel or labels: true, not several",
            );
            return None;
        }
        if let Some(other) = earlier.iter().find(|ix| ix.expr.is_labels()) {
            self.error(
                &format!("indexes[{j}].labels"),
                format!(
                    "the resource already has a label index ('{}'); one is enough",
                    other.name
                ),
            );
            return None;
        }
        Some(StringsExpr::labels())
    }

    /// `indexes[j].path` or `indexes[j].cel`, compiled.
    fn index_expr(
        &mut self,
        j: usize,
        path: Option<String>,
        cel: Option<String>,
    ) -> Option<StringsExpr> {
        let (which, compiled) = match (path, cel) {
            (Some(path), None) => ("path", StringsExpr::path(&path)),
            (None, Some(cel)) => ("cel", StringsExpr::cel(&cel)),
            (Some(_), Some(_)) => {
                self.error(&format!("indexes[{j}]"), "set either path or cel, not both");
                return None;
            }
            (None, None) => {
                self.error(
                    &format!("indexes[{j}]"),
                    "set path (a field path such as spec.nodeName), cel (an expression \
                     yielding strings) or labels: true (the label index)",
                );
                return None;
            }
        };
        compiled
            .map_err(|e| self.error(&format!("indexes[{j}].{which}"), e.to_string()))
            .ok()
    }
}
