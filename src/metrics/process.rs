//! The process's memory at each scrape: what jemalloc has allocated, and the resident set the
//! kernel counts (the figure a memory limit is enforced on), read as the Status RPC reads them.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

use super::{gauge, in_bytes, Descriptor};
use crate::vocab::memory::Memory;

const ALLOCATED: Descriptor = in_bytes(
    "memory_allocated",
    "Bytes allocated and not freed, by the allocator's (jemalloc's) count",
);
const RESIDENT: Descriptor = in_bytes(
    "memory_resident",
    "Resident set size of the process, by the kernel's count",
);

/// Reads [`Memory::now`] at each scrape.
#[derive(Debug, Clone, Copy)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let memory = Memory::now();
        gauge(&mut encoder, &ALLOCATED, memory.allocated)?;
        gauge(&mut encoder, &RESIDENT, memory.resident)
    }
}
