//! What `/proc` says about another process (the sidecar, a peer) and about the machine. Memory
//! figures of a process (`/proc/PID/status`) are `informerd::vocab::memory`'s to read.

use std::fmt::Display;

/// A `Field: N kB` line of a `/proc` table (`status`, `meminfo`): its N.
fn kib_field(text: &str, field: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces), the process
/// state first. `pid` may be `self`.
fn stat_fields(pid: impl Display) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(String::from).collect())
}

/// User + system CPU time of a process so far (utime + stime), in clock ticks. `pid` may be
/// `self`.
pub fn cpu_ticks(pid: impl Display) -> Option<u64> {
    let f = stat_fields(pid)?;
    // Fields 14 and 15 of stat(5); field 3, the state, is the first after the name.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// Whether the process is gone (or a zombie).
pub fn exited(pid: u32) -> bool {
    stat_fields(pid).is_none_or(|f| f.first().is_none_or(|s| s == "Z" || s == "X"))
}

/// A field of `/proc/meminfo` (`MemAvailable`, `MemTotal`) in bytes; 0 when it cannot be read.
pub fn meminfo_bytes(field: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| kib_field(&text, field))
        .map_or(0, |kib| kib * 1024)
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`, 100 when it cannot say), the unit
/// of [`cpu_ticks`].
pub fn clock_ticks() -> u64 {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}
