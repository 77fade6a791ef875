//! Helpers shared by the benchmarks, so that each benchmark file holds what it measures and
//! how it reports it: here, a benchmark's `main` in a namespace of its own, settings from the
//! environment, and what a report says about the run; beside it, one file per concern
//! (percentiles, the control plane's pods, `/proc`, the results folder, calls to the sidecar,
//! watches, writes).
//!
//! Each benchmark includes this folder with `mod common;` and uses only part of it. Nothing
//! here measures or prints a figure of its own: what is measured, and how it is printed, is
//! each benchmark's to say.
#![allow(dead_code)]

pub mod cluster;
pub mod process;
pub mod results;
pub mod sidecar;
pub mod stats;
pub mod watch;
pub mod writes;

use std::process::ExitCode;

use informerd_testkit::{wait_default_service_account, ControlPlane, Fixture, Sidecar};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

/// Where a benchmark of [`main_in_namespace`] runs: the local control plane, and a namespace
/// of its own (of [`main_in_namespaces`]: namespaces of its own, the first being `ns`).
pub struct InNamespace<'a> {
    pub cluster: &'a ControlPlane,
    /// The (first) namespace's name.
    pub ns: &'a str,
    /// The (first) namespace's pods.
    pub pods: &'a Api<Pod>,
    /// Every namespace of the benchmark, `ns` first.
    pub namespaces: &'a [String],
}

/// A benchmark's `main`: reads its settings, runs `bench` in a namespace of its own (named
/// after `prefix`) on the local control plane once pods can be made there, deletes the
/// namespace, and exits non-zero when `bench` fails or reports a failed correctness check
/// (`Ok(false)`, described by `failed`). `name` starts the messages.
pub fn main_in_namespace<S>(
    name: &str,
    prefix: &str,
    failed: &str,
    settings: fn() -> anyhow::Result<S>,
    bench: impl AsyncFnOnce(&InNamespace<'_>, &S) -> anyhow::Result<bool>,
) -> ExitCode {
    main_in_namespaces(name, prefix, failed, settings, |_| 1, bench)
}

/// [`main_in_namespace`] in `namespaces(settings)` namespaces of its own (at least one), all
/// deleted at the end.
pub fn main_in_namespaces<S>(
    name: &str,
    prefix: &str,
    failed: &str,
    settings: fn() -> anyhow::Result<S>,
    namespaces: fn(&S) -> usize,
    bench: impl AsyncFnOnce(&InNamespace<'_>, &S) -> anyhow::Result<bool>,
) -> ExitCode {
    let run = || -> anyhow::Result<bool> {
        let settings = settings()?;
        let cluster = ControlPlane::get();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        rt.block_on(async {
            // Deleted when dropped, also when the benchmark panics.
            let mut fixture = Fixture::on(cluster, prefix).await?;
            for _ in 1..namespaces(&settings) {
                fixture.add_namespace(prefix).await?;
            }
            for ns in fixture.namespaces() {
                wait_default_service_account(fixture.kube(), ns).await?;
            }
            let pods = fixture.pods();
            let at = InNamespace {
                cluster,
                ns: fixture.ns(),
                pods: &pods,
                namespaces: fixture.namespaces(),
            };
            bench(&at, &settings).await
        })
    };
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("{name}: FAILED: a correctness check failed ({failed}; see above)");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A benchmark's `main` that sets its control plane up itself: runs `bench` on a Tokio
/// runtime, and exits non-zero with `name: error: ...` when it fails.
pub fn main_on_runtime(
    name: &str,
    bench: impl std::future::Future<Output = anyhow::Result<()>>,
) -> ExitCode {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    match rt.block_on(bench) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The value of the environment variable `name`, or `default` when it is unset or blank.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => v
            .trim()
            .parse()
            .map_err(|e| anyhow::anyhow!("{name}={v:?}: {e}")),
        _ => Ok(default),
    }
}

/// The build profile of this benchmark (and so of the sidecar binary cargo built with it).
pub fn profile() -> &'static str {
    if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    }
}

pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(0, |n| n.get())
}

/// A Markdown report made of `sections` (each its lines), a blank line between two sections.
pub fn join_sections(sections: impl IntoIterator<Item = Vec<String>>) -> String {
    let sections: Vec<String> = sections.into_iter().map(|lines| lines.join("\n")).collect();
    sections.join("\n\n")
}

/// The last 20 lines of the sidecar's log, to standard error.
pub fn print_log_tail(sidecar: &Sidecar) {
    let log = sidecar.log();
    let lines: Vec<&str> = log.lines().collect();
    eprintln!("sidecar log (last lines):");
    for l in &lines[lines.len().saturating_sub(20)..] {
        eprintln!("  {l}");
    }
}
