//! The committed corpus: `tests/fuzz-corpus/<target>/*`, one input per file, replayed through
//! the target's check on every run.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use proptest::test_runner::{Config, FileFailurePersistence};

/// Runs `check` on every file of the target's corpus; fails naming each file that panicked.
pub fn replay(target: &str, check: impl Fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fuzz-corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the corpus of {target} ({}): {e}", dir.display()))
        .map(|entry| entry.expect("a corpus entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the corpus of {target} is empty");
    let failed: Vec<String> = files
        .iter()
        .filter(|file| {
            let input = std::fs::read(file).expect("a corpus file");
            catch_unwind(AssertUnwindSafe(|| check(&input))).is_err()
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(failed.is_empty(), "corpus inputs that fail: {failed:#?}");
}

/// The proptest configuration of a target: cases from `PROPTEST_CASES` (256 by default), and
/// failures saved in `proptest-regressions/fuzz/<target>.txt` (committed).
pub fn config(regressions: &'static str) -> Config {
    Config {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(regressions))),
        ..Config::default()
    }
}
