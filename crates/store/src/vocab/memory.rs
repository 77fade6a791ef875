//! What this process holds in memory, by the allocator's count and by the kernel's: the figures
//! that Status, the logs, `informerd bench` and the benchmarks print. One reading here, so that
//! every place that prints "allocated" means the same thing.
//!
//! The binary and the benchmarks make jemalloc the global allocator; where it is not (a test
//! binary), `allocated` reads jemalloc's own arenas, which then hold next to nothing.

/// The memory of this process at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Memory {
    /// Bytes allocated and not freed, by jemalloc's `stats.allocated`.
    pub allocated: u64,
    /// The resident set size (`VmRSS` of `/proc/self/status`); 0 where it cannot be read.
    pub resident: u64,
}

impl Memory {
    /// Reads both figures now.
    pub fn now() -> Memory {
        Memory {
            allocated: allocated_bytes(),
            resident: proc_status_bytes("VmRSS").unwrap_or(0),
        }
    }
}

/// Bytes allocated and not freed, by jemalloc's own count (refreshed before reading).
pub fn allocated_bytes() -> u64 {
    use tikv_jemalloc_ctl::{epoch, stats};
    let _ = epoch::advance();
    stats::allocated::read().unwrap_or(0) as u64
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`, ...) in bytes.
pub fn proc_status_bytes(field: &str) -> Option<u64> {
    status_bytes("self", field)
}

/// A `kB` field of `/proc/PID/status` in bytes, for another process (the benchmarks read the
/// sidecar's); `None` when the process or the field is not there.
pub fn status_bytes(pid: impl std::fmt::Display, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|line| {
        let value = line.strip_prefix(field)?.strip_prefix(':')?;
        let kib: u64 = value.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// Turns this thread's jemalloc cache off (flushing it), so that `stats.allocated` counts
/// exactly what the thread holds: with the cache on, regions the cache keeps count as
/// allocated, and a measurement of a few objects would see the cache's comings and goings.
/// Returns false (and the cache stays on) where jemalloc refuses.
pub fn exact_allocation_stats() -> bool {
    use tikv_jemalloc_ctl::{Access as _, AsName as _};
    b"thread.tcache.enabled\0".name().write(false).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_set_of_a_running_process_is_read() {
        let rss = proc_status_bytes("VmRSS").expect("VmRSS in /proc/self/status");
        assert!(rss > 0);
        assert_eq!(proc_status_bytes("NoSuchField"), None);
    }
}
