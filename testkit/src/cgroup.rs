//! A memory cgroup of its own with a limit, as the kubelet gives a container with
//! `resources.limits.memory`: the tests run the real sidecar in one to show what it does under
//! a real limit the kernel enforces (refusing new work, not being OOM-killed).
//!
//! Decision: cgroup v1's memory hierarchy when it is mounted, else cgroup v2's root when its
//! `memory` controller is delegated to children; anything else is an error saying what the test
//! needs (root, and a cgroup filesystem with the memory controller), never a skip: a test that
//! did not run must not pass.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// A fresh memory cgroup; removed when dropped (after its processes have left).
#[derive(Debug)]
pub struct MemoryCgroup {
    dir: PathBuf,
    v2: bool,
}

impl MemoryCgroup {
    /// Creates a cgroup named after `base` (and this process) with a memory limit of `limit`
    /// bytes.
    pub fn new(base: &str, limit: u64) -> Result<MemoryCgroup> {
        let (parent, v2) = memory_hierarchy()?;
        let dir = parent.join(format!("{base}-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).map_err(|e| fail(&dir, "create", e))?;
        let cgroup = MemoryCgroup { dir, v2 };
        let file = if v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        };
        cgroup.write(file, &limit.to_string())?;
        if v2 {
            // Without swap, the limit is the memory the process has, as under the kubelet.
            let _ = cgroup.write("memory.swap.max", "0");
        }
        Ok(cgroup)
    }

    /// Its directory; a process joins it by writing its pid to `cgroup.procs`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many processes of the cgroup the kernel's OOM killer has killed.
    pub fn oom_kills(&self) -> Result<u64> {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        let text = self.read(file)?;
        Ok(text
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0))
    }

    /// The most memory the cgroup has been charged at once, in bytes (cgroup v1's
    /// `max_usage_in_bytes`, v2's `memory.peak`), when the kernel reports it.
    pub fn peak(&self) -> Option<u64> {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        self.read(file).ok()?.trim().parse().ok()
    }

    fn read(&self, file: &str) -> Result<String> {
        let path = self.dir.join(file);
        std::fs::read_to_string(&path).map_err(|e| fail(&path, "read", e))
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        let path = self.dir.join(file);
        std::fs::write(&path, value).map_err(|e| fail(&path, "write", e))
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // The sidecar is killed first (fields drop after the test's own values); the kernel
        // lets go of an emptied cgroup a moment later.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::remove_dir(&self.dir).is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Where a new memory cgroup can be made: (parent directory, whether it is cgroup v2).
fn memory_hierarchy() -> Result<(PathBuf, bool)> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| fail(Path::new("/proc/self/mountinfo"), "read", e))?;
    let mut v2_root = None;
    for line in mounts.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let point = before.split(' ').nth(4).unwrap_or_default();
        let mut after = after.split(' ');
        let fstype = after.next().unwrap_or_default();
        let options = after.nth(1).unwrap_or_default();
        if fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
            return Ok((PathBuf::from(point), false));
        }
        if fstype == "cgroup2" {
            v2_root.get_or_insert(PathBuf::from(point));
        }
    }
    if let Some(root) = v2_root {
        let delegated = std::fs::read_to_string(root.join("cgroup.subtree_control"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "memory");
        if delegated {
            return Ok((root, true));
        }
    }
    Err(Error::Command {
        command: "make a memory cgroup".into(),
        detail: "no cgroup v1 memory hierarchy and no cgroup v2 root delegating the memory \
                 controller is mounted: run the test as root on a machine with cgroups"
            .into(),
    })
}

fn fail(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Command {
        command: format!("{what} {}", path.display()),
        detail: format!("{e} (a memory cgroup needs root and a cgroup filesystem)"),
    }
}
