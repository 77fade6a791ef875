//! A vector that grows by fixed-size pages rather than by doubling: a table of hundreds of
//! thousands of small entries then wastes at most one page, not up to half its capacity.
//!
//! Decision: used for the atom table's entries (one per atom) and the slots' locations (one
//! per object): at 20,000 realistic pods a doubling `Vec` held 65,536 atom entries for 44,877
//! atoms, 16 bytes per pod never used. Indexing costs one more indirection.

use std::ops::{Index, IndexMut};

/// Entries per page.
const PAGE: usize = 1024;

pub(super) struct Paged<T> {
    pages: Vec<Box<[T]>>,
    len: usize,
}

impl<T: Copy + Default> Paged<T> {
    pub(super) fn new() -> Self {
        Self {
            pages: Vec::new(),
            len: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }

    pub(super) fn push(&mut self, value: T) {
        if self.len == self.pages.len() * PAGE {
            self.pages.push(vec![T::default(); PAGE].into_boxed_slice());
        }
        let len = self.len;
        self.len += 1;
        self[len] = value;
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.pages.iter().flat_map(|p| p.iter()).take(self.len)
    }

    /// Bytes allocated for the entries and the page table.
    pub(super) fn allocated_bytes(&self) -> usize {
        self.pages.len() * PAGE * size_of::<T>() + self.pages.capacity() * size_of::<Box<[T]>>()
    }
}

impl<T> Index<usize> for Paged<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} out of {} entries", self.len);
        &self.pages[i / PAGE][i % PAGE]
    }
}

impl<T> IndexMut<usize> for Paged<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index {i} out of {} entries", self.len);
        &mut self.pages[i / PAGE][i % PAGE]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pushes_index_and_iterates_across_pages() {
        let mut p = Paged::new();
        for i in 0..(3 * PAGE + 5) as u32 {
            p.push(i);
        }
        assert_eq!(p.len(), 3 * PAGE + 5);
        p[PAGE] = 7;
        assert_eq!(
            (p[0], p[PAGE], p[3 * PAGE + 4]),
            (0, 7, 3 * PAGE as u32 + 4)
        );
        assert_eq!(p.iter().count(), 3 * PAGE + 5);
        assert_eq!(
            p.allocated_bytes() / (PAGE * 4),
            4,
            "four pages, and a small page table"
        );
    }
}
