//! The limits that protect the process from its clients (`limits` in the configuration):
//! Watch and List calls open at once (`maxWatchers`, `maxConcurrentLists`), and the memory
//! guard (`maxMemory`). Each call takes a slot when it starts and gives it back when its
//! response stream is dropped (the call ended, or the client left); beyond a limit the call
//! is refused with `RESOURCE_EXHAUSTED`, naming the limit and its configuration key, and
//! counted (`informerd_limit_refusals_total{limit}`).
//!
//! Each refusal names its limit in the `informerd-reason` trailer (`TooManyWatchers`,
//! `TooManyLists`, `OverMemoryLimit`), so that a client tells it from `FellBehind`, the other
//! `RESOURCE_EXHAUSTED`: `FellBehind` means "resume at once", a limit "back off".
//!
//! Decision (`maxMemory`): when jemalloc's allocated bytes are above it, new List and Watch
//! calls are refused; everything else goes on: the cache keeps following the apiserver (it
//! never drops or skips a change to save memory: that would make it lie), open watches keep
//! receiving, Get and Status answer, and readiness does not change (the cache is still
//! correct, and a pod that turns unready helps no controller reading over its socket). A
//! warning is logged when the process goes above, and again when it is back under. It is a
//! guard below the container's memory limit, which stays the hard stop: unset, it defaults to
//! a share of that limit when the process has one (`config/container.rs`). New on-demand
//! caches (`Ensure` of a cache not yet running) are refused above it too: a cache is the
//! largest new work a client can ask for.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::Status;

use super::reason::Reason;

use crate::config::LimitsConfig;
use crate::vocab::memory::allocated_bytes;

/// The limits a call may be refused for, by their configuration key.
pub const LIMITS: [&str; 3] = ["maxWatchers", "maxConcurrentLists", "maxMemory"];

/// The reason each limit of [`LIMITS`] is refused with, in the same order.
const REASONS: [Reason; 3] = [
    Reason::TooManyWatchers,
    Reason::TooManyLists,
    Reason::OverMemoryLimit,
];

/// The slots of the limited calls, and what was refused.
pub struct Limits {
    watchers: Arc<Semaphore>,
    lists: Arc<Semaphore>,
    config: LimitsConfig,
    /// Whether the last reading was above `maxMemory` (to log the crossings once).
    over_memory: AtomicBool,
    /// Refusals, in the order of [`LIMITS`].
    refused: [AtomicU64; 3],
}

/// A response stream that holds a slot of a limit while it lives.
pub type Holding<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

impl Limits {
    /// The limits of `config`.
    pub fn new(config: &LimitsConfig) -> Limits {
        let slots = |n: u64| {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS)))
        };
        Limits {
            watchers: slots(config.max_watchers),
            lists: slots(config.max_concurrent_lists),
            config: *config,
            over_memory: AtomicBool::new(false),
            refused: Default::default(),
        }
    }

    /// A slot for a new Watch call, or the status that refuses it.
    pub fn admit_watch(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.memory("Watch")?;
        self.watchers.clone().try_acquire_owned().map_err(|_| {
            let n = self.config.max_watchers;
            self.refuse(
                0,
                format!(
                    "too many watches: {n} Watch calls are open, the limit of this sidecar \
                 (limits.maxWatchers); close the watches you no longer need (one per resource \
                 and process is enough) and retry with backoff, or raise limits.maxWatchers in \
                 its configuration"
                ),
            )
        })
    }

    /// A slot for a new List call, or the status that refuses it.
    pub fn admit_list(&self) -> Result<OwnedSemaphorePermit, Status> {
        self.memory("List")?;
        self.lists.clone().try_acquire_owned().map_err(|_| {
            let n = self.config.max_concurrent_lists;
            self.refuse(
                1,
                format!(
                    "too many Lists at once: {n} List calls are in progress, the limit of this \
                 sidecar (limits.maxConcurrentLists); retry with backoff (read each List to \
                 its end: an open List holds its slot), or raise limits.maxConcurrentLists in \
                 its configuration"
                ),
            )
        })
    }

    /// Refuses to start a new on-demand cache while the process is above `maxMemory`.
    pub fn admit_cache(&self) -> Result<(), Status> {
        self.memory("Ensure")
    }

    /// The `maxMemory` in effect (set, or derived from the container's limit), if any.
    pub fn max_memory(&self) -> Option<u64> {
        self.config.max_memory
    }

    /// Refuses a new `call` while the process is above `maxMemory`; logs each crossing.
    fn memory(&self, call: &str) -> Result<(), Status> {
        match self.config.max_memory {
            None => Ok(()),
            Some(max) => self.judge_memory(call, allocated_bytes(), max),
        }
    }

    /// [`Limits::memory`] with `allocated` bytes read and `max` set.
    fn judge_memory(&self, call: &str, allocated: u64, max: u64) -> Result<(), Status> {
        let over = allocated > max;
        let container = self.config.container_memory;
        if self.over_memory.swap(over, Ordering::Relaxed) != over {
            if over {
                tracing::warn!(
                    allocated,
                    max_memory = max,
                    container_memory_limit = container,
                    "allocated memory is above limits.maxMemory: new List, Watch and Ensure \
                     calls are refused until it is back under (the cache, open watches and Get \
                     go on)"
                );
            } else {
                tracing::info!(
                    allocated,
                    max_memory = max,
                    "allocated memory is back under limits.maxMemory: List and Watch calls are \
                     accepted again"
                );
            }
        }
        if !over {
            return Ok(());
        }
        let (bound, raise) = match container {
            None => (format!("{max} bytes"), "raise limits.maxMemory"),
            Some(limit) => (
                format!(
                    "{max} bytes, by default {}% of the container's memory limit of {limit} bytes",
                    crate::config::container::DEFAULT_MAX_MEMORY_PERCENT
                ),
                "raise the container's memory limit (or set limits.maxMemory)",
            ),
        };
        Err(self.refuse(
            2,
            format!(
                "informerd has allocated {allocated} bytes, above limits.maxMemory ({bound}) of \
                 this sidecar: new {call} calls are refused until it is back under (Get and the \
                 watches already open go on); retry with backoff, or {raise} or cache less \
                 (filters, transforms) in its configuration"
            ),
        ))
    }

    /// Counts a refusal for limit `index` of [`LIMITS`]; the status that says so.
    fn refuse(&self, index: usize, message: String) -> Status {
        self.refused[index].fetch_add(1, Ordering::Relaxed);
        REASONS[index].status(message)
    }

    /// Calls refused so far, by limit (the keys of [`LIMITS`]).
    pub fn refusals(&self) -> [(&'static str, u64); 3] {
        std::array::from_fn(|i| (LIMITS[i], self.refused[i].load(Ordering::Relaxed)))
    }
}

/// `stream`, holding `permit` until it is dropped: when the call ends or its client leaves.
pub fn holding<T, S>(stream: S, permit: OwnedSemaphorePermit) -> Holding<T>
where
    T: Send + 'static,
    S: Stream<Item = Result<T, Status>> + Send + 'static,
{
    Box::pin(stream.map(move |item| {
        let _slot = &permit;
        item
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(watchers: u64, lists: u64, memory: Option<u64>) -> Limits {
        Limits::new(&LimitsConfig {
            max_watchers: watchers,
            max_concurrent_lists: lists,
            max_memory: memory,
            ..LimitsConfig::default()
        })
    }

    #[tokio::test]
    async fn a_slot_is_given_back_when_the_stream_is_dropped() {
        let l = limits(1, 1, None);
        let held = holding::<u32, _>(futures::stream::pending(), l.admit_watch().unwrap());
        let refused = l.admit_watch().unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert_eq!(Reason::of(&refused), Some(Reason::TooManyWatchers));
        assert!(
            refused.message().contains("limits.maxWatchers"),
            "{}",
            refused.message()
        );
        assert!(l.admit_list().is_ok(), "lists have slots of their own");
        let _list = holding::<u32, _>(futures::stream::pending(), l.admit_list().unwrap());
        let refused = l.admit_list().unwrap_err();
        assert_eq!(Reason::of(&refused), Some(Reason::TooManyLists));
        drop(held);
        assert!(l.admit_watch().is_ok());
        assert_eq!(
            l.refusals(),
            [
                ("maxWatchers", 1),
                ("maxConcurrentLists", 1),
                ("maxMemory", 0)
            ]
        );
    }

    #[test]
    fn above_max_memory_lists_and_watches_are_refused() {
        let l = limits(10, 10, Some(1000));
        let refused = l.judge_memory("List", 1001, 1000).unwrap_err();
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert_eq!(Reason::of(&refused), Some(Reason::OverMemoryLimit));
        assert!(
            refused.message().starts_with(
                "informerd has allocated 1001 bytes, above limits.maxMemory (1000 bytes) of \
                 this sidecar: new List calls are refused"
            ),
            "{}",
            refused.message()
        );
        assert!(
            l.judge_memory("Watch", 1000, 1000).is_ok(),
            "at the limit is not above"
        );
        assert_eq!(l.refusals()[2], ("maxMemory", 1));
        assert!(limits(10, 10, Some(u64::MAX)).admit_list().is_ok());
    }

    #[test]
    fn a_max_memory_from_the_container_names_the_container_limit() {
        let container = crate::config::container::ContainerMemory {
            limit: 4000,
            file: "/sys/fs/cgroup/memory.max".into(),
        };
        let config = LimitsConfig::default().under_container(Some(&container));
        assert_eq!(config.max_memory, Some(3000));
        let l = Limits::new(&config);
        let refused = l.judge_memory("Ensure", 3001, 3000).unwrap_err();
        assert_eq!(Reason::of(&refused), Some(Reason::OverMemoryLimit));
        assert!(
            refused.message().contains(
                "above limits.maxMemory (3000 bytes, by default 75% of the container's memory \
                 limit of 4000 bytes) of this sidecar: new Ensure calls are refused"
            ),
            "{}",
            refused.message()
        );
        let set = LimitsConfig {
            max_memory: Some(10),
            ..LimitsConfig::default()
        };
        assert_eq!(
            set.under_container(Some(&container)),
            set,
            "a maxMemory of the file is kept"
        );
    }
}
