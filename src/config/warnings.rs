//! What a valid configuration may still get wrong, said by `informerd check-config` and logged
//! by `serve` at start-up, never refused: today, CEL that reads a field an object may not have
//! without testing it with `has()` (see `filter::unguarded_reads`), which errs on every such
//! object instead of evaluating to false.

use crate::filter::unguarded_reads;

use super::model::{resource_path, Config};
use super::Diagnostic;

impl Config {
    /// One diagnostic per unguarded read, `FILE:LINE:COLUMN: PATH: warning: ...`, for each
    /// resource's `filter` and `cel:` index and for `onDemand.filter`.
    pub fn warnings(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let mut check = |path: String, expression: &str| {
            for read in unguarded_reads(expression) {
                let message = format!(
                    "warning: reads object.{read} without has(object.{read}): on an object \
                     without it the expression errs (a filter then counts it as not matching, \
                     in Status's filter errors); test it first, e.g. has(object.{read}) && ..."
                );
                out.push(self.source.diagnostic(&path, message, false));
            }
        };
        for (i, rc) in self.resources.iter().enumerate() {
            if let Some(filter) = &rc.filter {
                check(resource_path(i, "filter"), filter.source());
            }
            for (j, index) in rc.indexes.iter().enumerate() {
                if index.expr.as_path().is_none() && !index.expr.is_labels() {
                    check(
                        resource_path(i, &format!("indexes[{j}].cel")),
                        index.expr.source(),
                    );
                }
            }
        }
        if let Some(filter) = self.on_demand.as_ref().and_then(|o| o.filter.as_ref()) {
            check("onDemand.filter".to_string(), filter.source());
        }
        out
    }
}
