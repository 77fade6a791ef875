//! The queue's rules, driven with explicit times: coalescing, debounce and its maximum delay,
//! one delivery per key while in flight, the resync's end, and the mark a resume token holds.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn id(name: &str) -> KeyId {
    KeyId {
        owner: false,
        key: ObjectKey::new(Some("ns"), name),
    }
}

fn queue(debounce_ms: u64, max_delay_ms: u64) -> Queue {
    Queue::new(Debounce {
        debounce: MS * debounce_ms as u32,
        max_delay: MS * max_delay_ms as u32,
    })
}

/// A resync whose keys are all known at once.
fn resync(q: &mut Queue, keys: Vec<(KeyId, u64)>, now: Instant) {
    q.begin_resync(now);
    q.add_resync_keys(keys);
    q.end_resync_keys();
}

fn drain(q: &mut Queue, now: Instant) -> Vec<(String, u64)> {
    std::iter::from_fn(|| q.take_ready(now))
        .map(|d| (d.id.key.name.to_string(), d.revision))
        .collect()
}

#[test]
fn changes_to_a_pending_key_merge_into_one_delivery_of_the_last_revision() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    for revision in 1..=10 {
        q.mark(&id("a"), revision, false, t0);
    }
    q.mark(&id("b"), 11, false, t0);
    let mut sent = drain(&mut q, t0);
    sent.sort();
    assert_eq!(sent, vec![("a".into(), 10), ("b".into(), 11)]);
    assert_eq!((q.pending(), q.in_flight()), (0, 2));
}

#[test]
fn a_key_is_ready_after_a_quiet_period_or_at_the_maximum_delay() {
    let t0 = Instant::now();
    let mut q = queue(100, 250);
    q.mark(&id("a"), 1, false, t0);
    assert!(q.take_ready(t0 + 99 * MS).is_none());
    // Changes keep pushing the quiet period out...
    q.mark(&id("a"), 2, false, t0 + 90 * MS);
    q.mark(&id("a"), 3, false, t0 + 180 * MS);
    assert!(q.take_ready(t0 + 200 * MS).is_none());
    assert_eq!(q.next_ready_at(), Some(t0 + 250 * MS));
    // ...up to the maximum delay after the first change.
    q.mark(&id("a"), 4, false, t0 + 240 * MS);
    assert_eq!(drain(&mut q, t0 + 250 * MS), vec![("a".into(), 4)]);
}

#[test]
fn an_in_flight_key_is_sent_again_only_after_its_ack_with_the_sent_revision() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    q.mark(&id("a"), 1, false, t0);
    assert_eq!(drain(&mut q, t0), vec![("a".into(), 1)]);
    q.mark(&id("a"), 2, false, t0);
    q.mark(&id("a"), 3, true, t0);
    assert!(q.take_ready(t0).is_none(), "in flight: not sent again");
    assert!(
        !q.ack(&id("a"), 3),
        "an ack of a revision not sent is ignored"
    );
    assert!(q.take_ready(t0).is_none());
    assert!(q.ack(&id("a"), 1));
    let again = q.take_ready(t0).expect("pending again after the ack");
    assert_eq!((again.revision, again.deleted), (3, true));
    assert!(q.ack(&id("a"), 3));
    assert_eq!((q.pending(), q.in_flight()), (0, 0));
    assert!(!q.ack(&id("a"), 3), "a repeated ack is ignored");
}

#[test]
fn the_mark_is_the_revision_before_the_oldest_unacknowledged_change() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    assert_eq!(q.mark_revision(7), Some(7));
    q.mark(&id("a"), 8, false, t0);
    q.mark(&id("b"), 9, false, t0);
    assert_eq!(q.mark_revision(9), Some(7));
    drain(&mut q, t0);
    q.mark(&id("a"), 10, false, t0);
    assert_eq!(
        q.mark_revision(10),
        Some(7),
        "a's change 8 is not acknowledged"
    );
    assert!(q.ack(&id("a"), 8));
    assert_eq!(q.mark_revision(10), Some(8), "b's 9 is next");
    assert!(q.ack(&id("b"), 9));
    assert_eq!(q.mark_revision(10), Some(9), "a's 10 is pending");
    drain(&mut q, t0);
    assert!(q.ack(&id("a"), 10));
    assert_eq!(q.mark_revision(10), Some(10));
}

#[test]
fn a_resync_sends_every_key_once_then_ends_and_holds_the_mark_until_acknowledged() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    resync(
        &mut q,
        (0..5).map(|i| (id(&format!("p{i}")), 3)).collect(),
        t0,
    );
    assert_eq!(q.mark_revision(3), None);
    assert!(!q.resync_done());
    let sent = drain(&mut q, t0);
    assert_eq!(sent.len(), 5);
    assert!(q.resync_done());
    assert!(!q.resync_done(), "once per resync");
    for (name, revision) in &sent {
        assert_eq!(q.mark_revision(3), None);
        assert!(q.ack(&id(name), *revision));
    }
    assert_eq!(q.mark_revision(3), Some(3));
}

#[test]
fn what_the_queue_holds_is_bounded_by_keys_not_changes() {
    let t0 = Instant::now();
    let mut q = queue(1_000, 10_000);
    for revision in 1..=100 {
        q.mark(&id("p1"), revision, false, t0);
    }
    let one_key = q.bytes();
    for revision in 101..=100_000 {
        q.mark(&id(&format!("p{}", revision % 100)), revision, false, t0);
    }
    assert_eq!(q.pending(), 100);
    assert!(
        q.bytes() < one_key * 200,
        "100 keys after 100,000 changes: {} bytes, one key: {one_key}",
        q.bytes()
    );
}

#[test]
fn a_large_resync_is_entries_a_window_at_a_time_and_sends_every_key_once() {
    let t0 = Instant::now();
    let later = t0 + MS * 5_000;
    let keys = 3 * RESYNC_WINDOW + 7;
    let mut q = queue(300, 3_000);
    resync(
        &mut q,
        (0..keys).map(|i| (id(&format!("p{i}")), 3)).collect(),
        t0,
    );
    assert_eq!(q.entries.len(), RESYNC_WINDOW, "only a window is entries");
    assert!(
        q.bytes() < 200 * keys,
        "{} bytes for {keys} keys",
        q.bytes()
    );
    assert_eq!(q.pending(), keys, "the waiting keys count as pending");
    // A live change to a key still waiting: it merges with its resync entry once made.
    q.mark(&id(&format!("p{}", keys - 1)), 9, false, t0 + MS * 100);
    let mut sent = Vec::new();
    while let Some(d) = q.take_ready(later) {
        // The window, the key just sent (until its ack), the live change's own entry.
        assert!(q.entries.len() <= RESYNC_WINDOW + 2, "{}", q.entries.len());
        assert_eq!(
            q.mark_revision(9),
            None,
            "no token until the resync is acknowledged"
        );
        sent.push((d.id.key.name.to_string(), d.revision));
        if sent.len() < keys {
            assert!(!q.resync_done());
        }
        assert!(q.ack(&d.id, d.revision));
    }
    assert!(q.resync_done());
    let names: std::collections::BTreeSet<_> = sent.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!((sent.len(), names.len()), (keys, keys), "every key once");
    assert!(
        sent.contains(&(format!("p{}", keys - 1), 9)),
        "the later change's revision"
    );
    assert_eq!(q.mark_revision(9), Some(9));
    assert_eq!((q.pending(), q.in_flight(), q.key_bytes), (0, 0, 0));
}

#[test]
fn a_new_resync_replaces_the_keys_an_earlier_one_has_not_sent() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    resync(
        &mut q,
        (0..2 * RESYNC_WINDOW)
            .map(|i| (id(&format!("old{i}")), 1))
            .collect(),
        t0,
    );
    resync(&mut q, vec![(id("new"), 2)], t0);
    let sent = drain(&mut q, t0);
    assert_eq!(
        sent.len(),
        RESYNC_WINDOW + 1,
        "the first window, then the new view"
    );
    assert!(sent.contains(&("new".to_string(), 2)));
    assert!(!sent
        .iter()
        .any(|(n, _)| n == &format!("old{}", 2 * RESYNC_WINDOW - 1)));
    assert!(q.resync_done());
}

/// Every ready key, each acknowledged as it is taken.
fn drain_acked(q: &mut Queue, now: Instant) -> Vec<(String, u64)> {
    let mut sent = Vec::new();
    while let Some(d) = q.take_ready(now) {
        assert!(q.ack(&d.id, d.revision));
        sent.push((d.id.key.name.to_string(), d.revision));
    }
    sent
}

#[test]
fn a_resync_read_in_parts_ends_only_after_its_last_part_is_acknowledged() {
    let t0 = Instant::now();
    let mut q = queue(0, 0);
    q.begin_resync(t0);
    assert!(q.wants_resync_keys(), "nothing waits yet");
    q.add_resync_keys((0..2 * RESYNC_WINDOW).map(|i| (id(&format!("a{i}")), 3)));
    assert!(
        !q.wants_resync_keys(),
        "a window is entries and a window waits"
    );
    let sent = drain_acked(&mut q, t0);
    assert_eq!(sent.len(), 2 * RESYNC_WINDOW);
    assert!(q.wants_resync_keys());
    assert!(!q.resync_done(), "more keys may come");
    assert_eq!(q.mark_revision(9), None, "no token while keys may come");
    q.add_resync_keys([(id("b"), 4)]);
    q.end_resync_keys();
    assert!(!q.wants_resync_keys());
    assert_eq!(drain_acked(&mut q, t0), vec![("b".to_string(), 4)]);
    assert!(q.resync_done());
    assert_eq!(q.mark_revision(9), Some(9));
}

#[test]
fn a_resync_of_an_empty_view_is_done_at_once() {
    let mut q = queue(0, 0);
    resync(&mut q, Vec::new(), Instant::now());
    assert!(q.resync_done());
    assert_eq!(q.mark_revision(4), Some(4));
}
