//! Connecting to a running sidecar: used by the CLI client, tests and benchmarks.
