//! The process's families: what a scrape shows of the process's memory; and that a family
//! updated as things happen is listed before its first sample.

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

#[test]
fn a_listed_family_is_exposed_before_its_first_sample() {
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    type Labels = [(&'static str, &'static str); 1];
    let counts: Family<Labels, Counter> = Family::default();
    let mut registry = Registry::with_prefix(PREFIX);
    let errors = family("review_errors", "Reviews that failed");
    registry.register_collector(Box::new(Listed::new(errors, counts.clone())));
    let text = render(&registry);
    assert!(
        text.lines()
            .any(|l| l == "# TYPE informerd_review_errors counter"),
        "{text}"
    );
    assert!(
        samples(&text, "informerd_review_errors_total").is_empty(),
        "{text}"
    );

    counts.get_or_create(&[("check", "token")]).inc();
    let text = render(&registry);
    assert_eq!(
        samples(&text, "informerd_review_errors_total"),
        [r#"informerd_review_errors_total{check="token"} 1"#],
        "{text}"
    );
}
