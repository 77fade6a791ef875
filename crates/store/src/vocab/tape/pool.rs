//! Tapes handed back once their object is stored, to be decoded into again on the same thread:
//! each watch event otherwise allocated a tape's four vectors, grew them to a pod's size and
//! freed them again once the store had encoded it.
//!
//! Decision: a pool per thread, of a few tapes, not one shared pool behind a lock. The fleet
//! decodes a scope's lines and stores them in the same task, so a tape is nearly always handed
//! back on the thread that will decode the next line; one handed back elsewhere waits for that
//! thread's next event, and a thread holds at most [`POOL_MAX`] tapes of at most
//! [`POOLED_MAX_BYTES`] each (a tape that grew for a large object is freed).

use std::cell::RefCell;

use super::Tape;

/// Tapes a thread keeps.
const POOL_MAX: usize = 4;

/// A tape whose vectors grew past this many bytes is freed rather than kept (a pod's tape holds
/// a few kilobytes).
const POOLED_MAX_BYTES: usize = 256 * 1024;

thread_local! {
    static POOL: RefCell<Vec<Tape>> = const { RefCell::new(Vec::new()) };
}

impl Tape {
    /// An empty tape: one handed back on this thread ([`Tape::recycle`]), or a new one.
    pub fn pooled() -> Tape {
        POOL.with(|pool| pool.borrow_mut().pop())
            .unwrap_or_default()
    }

    /// Hands this tape back, emptied, for [`Tape::pooled`] to give out again on this thread.
    pub fn recycle(mut self) {
        if self.capacity_bytes() > POOLED_MAX_BYTES {
            return;
        }
        self.clear();
        POOL.with(|pool| {
            let mut pool = pool.borrow_mut();
            if pool.len() < POOL_MAX {
                pool.push(self);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_tape_is_given_out_empty_with_its_room() {
        let mut tape = Tape::pooled();
        let open = tape.open_object();
        tape.push_key("name");
        tape.push_str("web-0");
        tape.close_object(open);
        let room = tape.capacity_bytes();
        tape.recycle();

        let again = Tape::pooled();
        assert_eq!(again.sizes(), (0, 0), "a pooled tape is empty");
        assert_eq!(again.capacity_bytes(), room, "it keeps the room it had");
        assert!(again.root().is_none());
    }

    #[test]
    fn a_tape_grown_for_a_large_object_is_not_kept() {
        while POOL.with(|p| p.borrow_mut().pop()).is_some() {}
        let mut tape = Tape::new();
        tape.push_str(&"x".repeat(POOLED_MAX_BYTES + 1));
        tape.recycle();
        assert!(POOL.with(|p| p.borrow().is_empty()), "a long string's tape");

        let mut tape = Tape::new();
        let open = tape.open_array();
        for _ in 0..POOLED_MAX_BYTES / 8 {
            tape.push_null();
        }
        tape.close_array(open, POOLED_MAX_BYTES / 8);
        tape.recycle();
        assert!(POOL.with(|p| p.borrow().is_empty()), "a long array's tape");
    }

    #[test]
    fn a_thread_keeps_a_few_tapes_at_most() {
        for _ in 0..POOL_MAX + 3 {
            Tape::new().recycle();
        }
        assert_eq!(POOL.with(|p| p.borrow().len()), POOL_MAX);
    }
}
