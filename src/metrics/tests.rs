//! The process's families: what a scrape shows of the process's memory.

use super::*;

/// The sample lines of `text` that start with `prefix`.
fn samples<'a>(text: &'a str, prefix: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.starts_with(prefix)).collect()
}

#[test]
fn the_process_memory_is_exposed() {
    let text = render(&registry());
    let resident = samples(&text, "informerd_memory_resident_bytes ");
    let bytes: u64 = resident[0].rsplit(' ').next().unwrap().parse().unwrap();
    assert!(bytes > 0, "{text}");
    assert_eq!(samples(&text, "informerd_memory_allocated_bytes ").len(), 1);
}
