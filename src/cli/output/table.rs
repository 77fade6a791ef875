//! A kubectl-style table: columns as wide as their widest cell, three spaces apart.

/// Columns aligned kubectl-style: three spaces between columns, the last one unpadded.
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: Vec<&'static str>) -> Table {
        Table {
            headers,
            rows: Vec::new(),
        }
    }

    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            out.push_str(&line(row, &widths));
        }
        out
    }
}

/// One row padded to `widths`.
pub(super) fn line(row: &[String], widths: &[usize]) -> String {
    let mut out = String::new();
    let last = row.len().saturating_sub(1);
    for (i, cell) in row.iter().enumerate() {
        out.push_str(cell);
        if i < last {
            let width = widths.get(i).copied().unwrap_or(0);
            let pad = width.saturating_sub(cell.chars().count()) + 3;
            out.extend(std::iter::repeat_n(' ', pad));
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns() {
        let mut t = Table::new(vec!["NAME", "REVISION"]);
        t.push(vec!["a-long-name".into(), "7".into()]);
        t.push(vec!["b".into(), "12".into()]);
        assert_eq!(
            t.render(),
            "NAME          REVISION\na-long-name   7\nb             12\n"
        );
    }
}
