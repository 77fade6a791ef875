//! A resource's secondary `indexes`: each a unique name and exactly one of a field `path` or a
//! `cel` expression yielding the keys.

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
            if let Some(expr) = self.index_expr(j, index.path, index.cel) {
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
                    "set path (a field path such as spec.nodeName) or cel (an expression \
                     yielding strings)",
                );
                return None;
            }
        };
        compiled
            .map_err(|e| self.error(&format!("indexes[{j}].{which}"), e.to_string()))
            .ok()
    }
}
