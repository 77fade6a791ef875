//! `informerd check-config`: validates a configuration as `serve` would load it, and exits.

use std::{path::Path, process::ExitCode};

use informerd::config;

/// Prints `FILE: ok (N resources)` (after any warnings, on stderr), or the error (`FILE:LINE:COLUMN: field: message`) with the
/// exit status 1.
pub fn check_config(file: &Path) -> ExitCode {
    match config::load(file) {
        Ok(cfg) => {
            // Warnings (valid, but probably not what was meant) go to stderr; still ok.
            for warning in cfg.warnings() {
                eprintln!("{warning}");
            }
            println!("{}: ok ({} resources)", file.display(), cfg.resources.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::from(1)
        }
    }
}
