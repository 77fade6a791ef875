//! Watch events as table lines, aligned as they come (`kubectl get -w`).

use informerd::proto::WatchEvent;
use k8s_openapi::jiff::Timestamp;

use super::{
    event_name,
    objects::{age, labels, phase},
    table::line,
    token, Decoded,
};

/// Watch events as table lines: the header once, then one line per event. Columns are as wide
/// as the widest cell seen so far (the events to come are unknown), like `kubectl get -w`.
pub struct WatchTable {
    namespace: bool,
    labels: bool,
    widths: Vec<usize>,
    header_done: bool,
}

impl WatchTable {
    pub fn new(namespace: bool, labels: bool) -> WatchTable {
        WatchTable {
            namespace,
            labels,
            widths: Vec::new(),
            header_done: false,
        }
    }

    fn headers(&self) -> Vec<String> {
        let mut h = vec!["EVENT", "REVISION"];
        if self.namespace {
            h.push("NAMESPACE");
        }
        h.extend(["NAME", "STATUS", "AGE"]);
        if self.labels {
            h.push("LABELS");
        }
        h.into_iter().map(String::from).collect()
    }

    /// The header line: printed once the watch is established, before any event.
    pub fn header(&mut self) -> String {
        if self.header_done {
            return String::new();
        }
        self.header_done = true;
        let header = self.headers();
        // Room for typical names from the start, so that most lines align.
        self.widths = header
            .iter()
            .map(|h| match h.as_str() {
                "EVENT" => 8,
                "NAMESPACE" | "NAME" => 20,
                "STATUS" => 11,
                "AGE" => 5,
                _ => h.len(),
            })
            .collect();
        line(&header, &self.widths)
    }

    /// The text to print for one event (the header first, if not printed yet).
    pub fn event(&mut self, event: &WatchEvent, object: Option<&Decoded<'_>>) -> String {
        let mut out = self.header();
        let mut row = vec![
            event_name(event.r#type).to_string(),
            event.revision.to_string(),
        ];
        match object {
            Some(o) => {
                if self.namespace {
                    row.push(o.meta.namespace.clone());
                }
                row.push(o.meta.name.clone());
                row.push(phase(&o.json).unwrap_or("").to_string());
                row.push(age(&o.json, Timestamp::now()));
                if self.labels {
                    row.push(labels(o.meta));
                }
            }
            None => {
                // SYNCED, BOOKMARK: no object; the token to resume from, in place of the
                // object's columns (and without widening them).
                row.push(format!(
                    "(resume with --since {})",
                    token(event.epoch, event.revision)
                ));
                out.push_str(&line(&row, &self.widths));
                return out;
            }
        }
        for (w, cell) in self.widths.iter_mut().zip(&row) {
            *w = (*w).max(cell.chars().count());
        }
        out.push_str(&line(&row, &self.widths));
        out
    }
}
