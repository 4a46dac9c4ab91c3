//! [`Store`]: the elements of one root buffer, either owned or borrowed from a caller (zero-copy inputs).
//!
//! A borrowed store reads the caller's memory in place, the way `torch.from_numpy` does; the first write through
//! it (any `&mut` access) copies the elements into an owned vector first, so the caller's memory is never written
//! through a store. Kernels get the elements' address with [`Store::kernel_ptr`], which does not copy: a backend
//! may write through it only into buffers it made itself (the executor shares an input with kernels only when no
//! kernel writes in place into memory it did not make).
//! Who borrows must end the borrow before the memory goes away: [`Store::make_owned`] on every store still
//! reachable once the run is over (`embed` does this for the Python package).

use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Element storage: an owned vector, or `len` elements of a caller's memory read in place.
pub struct Store<T: Copy>(Repr<T>);

enum Repr<T> {
    Owned(Vec<T>),
    Borrowed(NonNull<T>, usize),
}

// SAFETY: an owned store is a `Vec<T>`. A borrowed one is a shared, read-only view of memory that
// [`Store::borrowed`]'s caller promises stays valid and unwritten for the store's whole life, on any thread (it
// behaves as a `&'a [T]`, which is `Send` and `Sync` for these plain element types).
unsafe impl<T: Copy + Send + Sync> Send for Store<T> {}
// SAFETY: as for `Send`: `&Store` only reads, and a borrowed store's memory is not written while it lives.
unsafe impl<T: Copy + Send + Sync> Sync for Store<T> {}

impl<T: Copy> Store<T> {
    /// `len` elements at `ptr`, read in place.
    ///
    /// # Safety
    /// `ptr` is aligned and valid for reads of `len` elements of `T`, each a valid `T`, and the memory is neither
    /// freed nor written (by anyone) while this store lives: end the borrow with [`Store::make_owned`] before that.
    pub unsafe fn borrowed(ptr: NonNull<T>, len: usize) -> Store<T> {
        Store(Repr::Borrowed(ptr, len))
    }

    /// Whether the elements are still read from the caller's memory.
    pub fn is_borrowed(&self) -> bool {
        matches!(self.0, Repr::Borrowed(..))
    }

    /// Copies borrowed elements into an owned vector (nothing to do when owned): the borrow ends here.
    pub fn make_owned(&mut self) {
        if let Repr::Borrowed(..) = self.0 {
            self.0 = Repr::Owned(self.deref().to_vec());
        }
    }

    /// The elements as an owned vector (copied when borrowed).
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::Owned(v) => v,
            Repr::Borrowed(..) => self.deref().to_vec(),
        }
    }

    /// The first element's address for a kernel, without copying a borrowed store (see the module doc for who may
    /// write through it).
    pub fn kernel_ptr(&mut self) -> *mut T {
        match &mut self.0 {
            Repr::Owned(v) => v.as_mut_ptr(),
            Repr::Borrowed(p, _) => p.as_ptr(),
        }
    }
}

impl<T: Copy> Deref for Store<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        match &self.0 {
            Repr::Owned(v) => v,
            // SAFETY: `borrowed`'s contract: valid, aligned, initialized and unwritten while the store lives.
            Repr::Borrowed(p, n) => unsafe { std::slice::from_raw_parts(p.as_ptr(), *n) },
        }
    }
}

impl<T: Copy> DerefMut for Store<T> {
    /// Copy on write: a borrowed store becomes owned before its first write.
    fn deref_mut(&mut self) -> &mut [T] {
        self.make_owned();
        match &mut self.0 {
            Repr::Owned(v) => v,
            Repr::Borrowed(..) => unreachable!("made owned above"),
        }
    }
}

impl<T: Copy> From<Vec<T>> for Store<T> {
    fn from(v: Vec<T>) -> Store<T> {
        Store(Repr::Owned(v))
    }
}

impl<T: Copy> FromIterator<T> for Store<T> {
    fn from_iter<I: IntoIterator<Item = T>>(it: I) -> Store<T> {
        Store(Repr::Owned(it.into_iter().collect()))
    }
}

/// A clone is owned: it copies the elements, so it never extends a borrow.
impl<T: Copy> Clone for Store<T> {
    fn clone(&self) -> Store<T> {
        Store(Repr::Owned(self.deref().to_vec()))
    }
}

impl<T: Copy + fmt::Debug> fmt::Debug for Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.deref().fmt(f)
    }
}

impl<T: Copy + PartialEq> PartialEq for Store<T> {
    fn eq(&self, other: &Store<T>) -> bool {
        self.deref() == other.deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_borrowed_store_reads_in_place_and_copies_on_its_first_write() {
        let caller = vec![1.0f32, 2.0, 3.0];
        // SAFETY: `caller` outlives `s` and is not written while `s` borrows it.
        let mut s = unsafe { Store::borrowed(NonNull::new(caller.as_ptr() as *mut f32).unwrap(), 3) };
        assert!(s.is_borrowed());
        assert_eq!(&s[..], &[1.0, 2.0, 3.0]);
        assert_eq!(s.kernel_ptr() as *const f32, caller.as_ptr(), "a kernel reads the caller's memory");
        let c = s.clone();
        assert!(!c.is_borrowed(), "a clone is owned");
        s[1] = 9.0;
        assert!(!s.is_borrowed());
        assert_eq!(&s[..], &[1.0, 9.0, 3.0]);
        assert_eq!(caller, vec![1.0, 2.0, 3.0], "the caller's memory is never written");
        assert_eq!(c, Store::from(vec![1.0, 2.0, 3.0]));
    }

    #[test]
    fn make_owned_ends_the_borrow() {
        let caller = vec![5i64, 6];
        // SAFETY: `caller` outlives the borrow, which `make_owned` ends before `caller` is dropped.
        let mut s = unsafe { Store::borrowed(NonNull::new(caller.as_ptr() as *mut i64).unwrap(), 2) };
        s.make_owned();
        drop(caller);
        assert!(!s.is_borrowed());
        assert_eq!(s.into_vec(), vec![5, 6]);
    }
}
