//! The `limits` section, validated: the bounds that protect the process from what it is sent,
//! by the apiserver (an object too large to keep) and by its clients (too many watches or
//! Lists at once, a request too large, memory beyond a budget). Their defaults are here, each
//! with why; `validate/limits.rs` checks the file's values and `docs/bad-input.md` lists what
//! each limit answers when reached.

/// The default `maxObjectSize`: 3Mi of JSON.
///
/// Decision: above anything a default cluster stores (etcd refuses requests over 1.5 MiB,
/// and an object's JSON is at most about twice its stored protobuf), and below the 4 MiB a
/// gRPC client accepts in one message by default: an object the cache keeps can always be
/// sent to a client that did not raise its limit.
pub const DEFAULT_MAX_OBJECT_SIZE: u64 = 3 << 20;
/// The default `maxWatchers`: Watch calls open at once, over every resource.
///
/// Decision: 1000. A sidecar serves the few controllers of its pod, each with a watch or two
/// per resource; 1000 is far above that, and bounds what a runaway client (a watch per
/// reconcile, never closed) can make the sidecar hold: a watcher costs its buffer (up to
/// 1,024 events) while it lasts.
pub const DEFAULT_MAX_WATCHERS: u64 = 1000;
/// The default `maxConcurrentLists`: List calls open at once, over every resource.
///
/// Decision: 100. A List holds a snapshot of the store (replaced objects stay alive until it
/// ends) and decodes every object it sends; a controller lists once per resource at start and
/// after a relist, so 100 at once is far above a pod's controllers starting together.
pub const DEFAULT_MAX_CONCURRENT_LISTS: u64 = 100;
/// The default `maxRequestSize`: 4Mi, gRPC's own default for a received message, so the
/// default changes nothing for a client; requests are small (selectors, masks, CEL).
pub const DEFAULT_MAX_REQUEST_SIZE: u64 = 4 << 20;

/// The `limits` section: what the process accepts before it refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitsConfig {
    /// `maxObjectSize`: the largest object kept, in bytes of its encoding in the store (after
    /// the transform; `fleet/ingest/size.rs`); a larger one is skipped, counted and logged.
    pub max_object_size: u64,
    /// `maxWatchers`: Watch calls open at once; beyond, `RESOURCE_EXHAUSTED`.
    pub max_watchers: u64,
    /// `maxConcurrentLists`: List calls open at once; beyond, `RESOURCE_EXHAUSTED`.
    pub max_concurrent_lists: u64,
    /// `maxRequestSize`: the largest request message, in bytes.
    pub max_request_size: u64,
    /// `maxMemory`: allocated bytes beyond which new List, Watch and Ensure calls are refused;
    /// off when unset and no container memory limit is found.
    pub max_memory: Option<u64>,
    /// The container's memory limit that `max_memory` was set from, when the file did not set
    /// it ([`LimitsConfig::under_container`]); refusals name it.
    pub container_memory: Option<u64>,
}

impl LimitsConfig {
    /// These limits in a container of `container` memory limit: `maxMemory`, unless the file
    /// sets it, defaults to a share of it (`config/container.rs`).
    #[must_use]
    pub fn under_container(self, container: Option<&super::container::ContainerMemory>) -> Self {
        match (self.max_memory, container) {
            (None, Some(c)) => LimitsConfig {
                max_memory: Some(c.default_max_memory()),
                container_memory: Some(c.limit),
                ..self
            },
            _ => self,
        }
    }
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_object_size: DEFAULT_MAX_OBJECT_SIZE,
            max_watchers: DEFAULT_MAX_WATCHERS,
            max_concurrent_lists: DEFAULT_MAX_CONCURRENT_LISTS,
            max_request_size: DEFAULT_MAX_REQUEST_SIZE,
            max_memory: None,
            container_memory: None,
        }
    }
}
