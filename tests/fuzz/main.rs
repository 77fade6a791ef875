//! Fuzzing: generated and hand-picked bad input for everything a user, a client or the
//! apiserver hands informerd as text or bytes: the configuration file, label and field
//! selectors, CEL filters and predicates, field paths and masks, resume tokens, and the JSON
//! of objects on their way into the store.
//!
//! The properties, for every target: it never panics; it answers with a value or an error that
//! names the problem; it stays bounded (deep nesting is refused before a recursive walker can
//! exhaust the stack, and small input cannot make it allocate without bound). Where a round
//! trip exists it holds: a selector or a path written back parses to the same thing, the store
//! gives back exactly the object it was given, a transform applied twice changes nothing more,
//! and decoding with a transform equals decoding whole and then applying it.
//!
//! Two forms run on every `cargo test`:
//! - `proptest` properties, 256 generated cases each (`PROPTEST_CASES` raises it: `make fuzz`
//!   runs 100000); a failure is shrunk and its seed is saved under `proptest-regressions/fuzz/`,
//!   which is committed, so that every later run tries it first.
//! - the corpus under `tests/fuzz-corpus/<target>/`: hand-picked nasty inputs, one per file,
//!   replayed through the same check as the generated ones (`corpus::replay`). A bug found here
//!   or by proptest gets its input added as a file.
//!
//! Decision: `proptest` on stable Rust rather than cargo-fuzz: libFuzzer needs a nightly
//! toolchain, which CI does not have; generators that know the grammars (selectors, CEL, paths,
//! Kubernetes-shaped objects) reach the interesting states without coverage guidance.

mod cel;
mod config;
mod corpus;
mod json;
mod objects;
mod paths;
mod selectors;
mod tokens;
