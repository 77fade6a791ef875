//! The memory limit of the container informerd runs in, read from its cgroup: what
//! `limits.maxMemory` defaults to a share of, so that a sidecar given a memory limit (a pod's
//! `resources.limits.memory`) refuses new work before the kernel's OOM killer ends it, and with
//! it every controller's cache, without anyone having to set `maxMemory` too.
//!
//! Both cgroup versions are read, as the kubelet may run either (or a hybrid of the two):
//! cgroup v2's `memory.max` and cgroup v1's `memory.limit_in_bytes`, of the process's own
//! cgroup (from `/proc/self/cgroup`) found under its hierarchy's mount point (from
//! `/proc/self/mountinfo`), and of every ancestor up to that mount point: a parent's limit
//! (the pod's, when the container has none) binds too. The smallest is the limit.

use std::path::{Path, PathBuf};

/// The share of the container's memory limit that `limits.maxMemory` defaults to.
///
/// Decision: 75%. `maxMemory` is compared with jemalloc's allocated bytes, while the kernel
/// enforces the limit on the whole resident set: jemalloc's retained and dirty pages, its
/// fragmentation, thread stacks, and what is in flight (a relist's responses, buffers of
/// watchers not yet read) come on top. A quarter of the limit for these keeps the process
/// under the kernel's limit while new work is refused, in the benchmarks' and tests' runs.
pub const DEFAULT_MAX_MEMORY_PERCENT: u64 = 75;

/// A memory limit of the process's cgroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerMemory {
    /// The limit in bytes.
    pub limit: u64,
    /// The file it was read from.
    pub file: PathBuf,
}

impl ContainerMemory {
    /// The default `limits.maxMemory` under this limit ([`DEFAULT_MAX_MEMORY_PERCENT`]).
    #[must_use]
    pub fn default_max_memory(&self) -> u64 {
        self.limit / 100 * DEFAULT_MAX_MEMORY_PERCENT
    }
}

/// A warning when the change logs of `config`'s resources may hold more, at their bound, than
/// the headroom `maxMemory` leaves under the container's `limit`: the logs grow with changes
/// (a burst of deletions keeps each deleted object's last state), which no refusal can stop,
/// so the headroom must hold them.
#[must_use]
pub fn headroom_warning(config: &super::Config, limit: u64) -> Option<String> {
    let max_memory = config.limits.max_memory?;
    let headroom = limit.saturating_sub(max_memory);
    let per_log = config.change_log.max_bytes as u64;
    let logs = per_log.saturating_mul(config.resources.len() as u64);
    (logs > headroom).then(|| {
        format!(
            "the change logs of the {} resources may hold up to {logs} bytes (changeLog.maxBytes \
             {per_log} each) beyond what limits.maxMemory ({max_memory} bytes) guards, more than \
             the {headroom} bytes left of the container's memory limit ({limit} bytes): a burst \
             of changes to large objects could get the sidecar OOM-killed; lower \
             changeLog.maxBytes, lower limits.maxMemory or raise the memory limit",
            config.resources.len()
        )
    })
}

/// The smallest memory limit of this process's cgroups, if any is set.
#[must_use]
pub fn memory_limit() -> Option<ContainerMemory> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    smallest_limit(&cgroups, &mounts, |file| std::fs::read_to_string(file).ok())
}

/// [`memory_limit`] over the texts of `/proc/self/cgroup` and `/proc/self/mountinfo`, reading
/// the limit files with `read`.
fn smallest_limit(
    cgroups: &str,
    mounts: &str,
    read: impl Fn(&Path) -> Option<String>,
) -> Option<ContainerMemory> {
    let mut found: Option<ContainerMemory> = None;
    for (dir, file) in limit_dirs(cgroups, mounts) {
        for (at, text) in ancestors_up_to(&dir.0, &dir.1).filter_map(|d| {
            let at = d.join(file);
            read(&at).map(|text| (at, text))
        }) {
            let Some(limit) = parse_limit(&text) else {
                continue;
            };
            if found.as_ref().is_none_or(|f| limit < f.limit) {
                found = Some(ContainerMemory { limit, file: at });
            }
        }
    }
    found
}

/// A limit file's value: `max` (v2) or a v1 value of 2^63 rounded down to a page (no
/// limit) are none.
fn parse_limit(text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    // cgroup v1 says "no limit" with the largest page-aligned i64.
    (limit < (1 << 62)).then_some(limit)
}

/// For each memory hierarchy of the process: (its cgroup's directory, the mount point), and
/// the name of the limit file there.
fn limit_dirs(cgroups: &str, mounts: &str) -> Vec<((PathBuf, PathBuf), &'static str)> {
    let mut dirs = Vec::new();
    for line in cgroups.lines() {
        // "ID:CONTROLLERS:PATH"; v2's line is "0::PATH".
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (v2, file) = if id == "0" && controllers.is_empty() {
            (true, "memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            (false, "memory.limit_in_bytes")
        } else {
            continue;
        };
        for (root, point) in mounts.lines().filter_map(|m| memory_mount(m, v2)) {
            // The mount shows the hierarchy from `root` on; a cgroup outside it is not there.
            let Some(rel) = Path::new(path).strip_prefix(root).ok() else {
                continue;
            };
            let point = PathBuf::from(point);
            dirs.push(((point.join(rel), point), file));
        }
    }
    dirs
}

/// (root, mount point) of a mountinfo line that mounts a cgroup v2 hierarchy (`v2`) or a v1
/// hierarchy with the memory controller.
fn memory_mount(line: &str, v2: bool) -> Option<(&str, &str)> {
    // "ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS"
    let (before, after) = line.split_once(" - ")?;
    let fields: Vec<&str> = before.split(' ').collect();
    let (root, point) = (*fields.get(3)?, *fields.get(4)?);
    let mut after = after.split(' ');
    let fstype = after.next()?;
    let super_options = after.nth(1).unwrap_or_default();
    let wanted = if v2 {
        fstype == "cgroup2"
    } else {
        fstype == "cgroup" && super_options.split(',').any(|o| o == "memory")
    };
    wanted.then_some((root, point))
}

/// `dir` and its parents, up to and including `top`.
fn ancestors_up_to<'a>(dir: &'a Path, top: &'a Path) -> impl Iterator<Item = &'a Path> {
    dir.ancestors().take_while(move |d| d.starts_with(top))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    const MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw
";

    fn files(entries: &[(&str, &str)]) -> impl Fn(&Path) -> Option<String> {
        let map: HashMap<PathBuf, String> = entries
            .iter()
            .map(|(p, t)| (PathBuf::from(p), (*t).to_string()))
            .collect();
        move |p| map.get(p).cloned()
    }

    #[test]
    fn a_v1_limit_of_the_process_cgroup_or_a_parent_is_found_the_smallest_wins() {
        let cgroups = "4:memory:/pod/ctr\n1:cpu:/pod/ctr\n0::/pod/ctr\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/memory/pod/ctr/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
            (
                "/sys/fs/cgroup/memory/pod/memory.limit_in_bytes",
                "268435456\n",
            ),
            (
                "/sys/fs/cgroup/memory/memory.limit_in_bytes",
                "9223372036854771712\n",
            ),
        ]);
        let found = smallest_limit(cgroups, MOUNTS, read).expect("the pod's limit");
        assert_eq!(found.limit, 256 << 20);
        assert_eq!(
            found.file,
            Path::new("/sys/fs/cgroup/memory/pod/memory.limit_in_bytes")
        );
        assert_eq!(found.default_max_memory(), (256 << 20) / 100 * 75);
    }

    #[test]
    fn a_v2_limit_is_read_from_memory_max_and_max_is_no_limit() {
        let mounts = "30 23 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let cgroups = "0::/kubepods/pod1/ctr\n";
        let limited = files(&[
            ("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n"),
            ("/sys/fs/cgroup/kubepods/pod1/memory.max", "134217728\n"),
        ]);
        let found = smallest_limit(cgroups, mounts, limited).expect("the pod's limit");
        assert_eq!(found.limit, 128 << 20);
        let unlimited = files(&[("/sys/fs/cgroup/kubepods/pod1/ctr/memory.max", "max\n")]);
        assert_eq!(smallest_limit(cgroups, mounts, unlimited), None);
    }

    #[test]
    fn a_cgroup_namespace_shows_its_root_and_parents_above_the_mount_are_not_read() {
        // Inside a cgroup namespace the process's cgroup is "/", the mount's root too.
        let mounts = "30 23 0:27 / /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        let read = files(&[
            ("/sys/fs/cgroup/memory.max", "67108864"),
            ("/sys/memory.max", "1"),
        ]);
        let found = smallest_limit("0::/\n", mounts, read).expect("the container's limit");
        assert_eq!(found.limit, 64 << 20);
        // A hierarchy mounted from a root the process is not under shows nothing of it.
        let elsewhere = "30 23 0:27 /other /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
        let read = files(&[("/sys/fs/cgroup/memory.max", "67108864")]);
        assert_eq!(smallest_limit("0::/mine\n", elsewhere, read), None);
    }

    #[test]
    fn change_logs_larger_than_the_headroom_are_warned_of() {
        let text = "apiVersion: informerd.io/v1alpha1\nkind: Config\nresources:\n\
                    - {apiVersion: v1, kind: Pod}\n- {apiVersion: v1, kind: ConfigMap}\n";
        let config = crate::config::parse("c.yaml", text).expect("a valid config");
        let container = ContainerMemory {
            limit: 256 << 20,
            file: "/sys/fs/cgroup/memory.max".into(),
        };
        let mut config = crate::config::Config {
            limits: config.limits.under_container(Some(&container)),
            ..config
        };
        // Two logs of 64Mi by default: 128Mi, above the 64Mi left over 192Mi.
        let warning = headroom_warning(&config, container.limit).expect("a warning");
        assert!(
            warning.starts_with("the change logs of the 2 resources may hold up to 134217728"),
            "{warning}"
        );
        assert!(warning.contains("lower changeLog.maxBytes"), "{warning}");
        config.change_log.max_bytes = 8 << 20;
        assert_eq!(headroom_warning(&config, container.limit), None);
    }

    #[test]
    fn no_memory_hierarchy_no_limit() {
        let read = files(&[]);
        assert_eq!(smallest_limit("1:cpu:/x\n", MOUNTS, read), None);
    }
}
