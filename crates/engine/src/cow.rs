//! Writes to collections a checkpoint may be serializing.
//!
//! Large collections are shared (`Arc`): a snapshot takes one in O(1)
//! under its shard's lock, and a write to one that a snapshot still holds
//! copies it first. A checkpoint serializes what it took as soon as it has
//! let the lock go, and that takes less time than a copy (a sorted set of a
//! million members: about 80 ms to serialize, 190 ms to copy). So a write
//! that finds a collection leased by a checkpoint waits for the lease to
//! end, holding its shard's lock as a writer did when the checkpoint
//! serialized under that lock, and then writes in place. Any other sharing
//! (a replica's full sync, which holds its copy until it is sent; a
//! checkpoint's copy of a key changed before it was taken) is copied.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;

/// Addresses of the collections checkpoints are serializing now.
static LEASED: Mutex<Vec<usize>> = Mutex::new(Vec::new());
static RETURNED: Condvar = Condvar::new();

/// What a lease names a shared collection by: where it lives (the same
/// for every `Arc` sharing it).
pub(crate) fn address<T>(v: &T) -> usize {
    std::ptr::from_ref(v) as *const () as usize
}

/// The collection behind `a`, to write: in place once no one else holds
/// it (after waiting out a checkpoint's lease), otherwise a copy.
pub(crate) fn make_mut<T: Clone>(a: &mut Arc<T>) -> &mut T {
    if Arc::get_mut(a).is_none() {
        let at = address(&**a);
        let mut leased = LEASED.lock();
        while leased.contains(&at) {
            RETURNED.wait(&mut leased);
        }
    }
    Arc::make_mut(a)
}

/// A checkpoint's hold on `value`, a clone of the shared collection at
/// `at` (or of an entry holding it): while it lives, writers wait rather
/// than copy. Taken under the collection's shard lock, so a writer (which
/// holds that lock) sees it or writes before it exists.
pub(crate) struct Lease<V> {
    // Fields drop in order: the clone must be gone before a waiting writer
    // looks again, or it would still copy.
    value: V,
    _listed: Listed,
}

impl<V> Lease<V> {
    pub(crate) fn new(at: usize, value: V) -> Lease<V> {
        LEASED.lock().push(at);
        Lease {
            value,
            _listed: Listed(at),
        }
    }

    pub(crate) fn get(&self) -> &V {
        &self.value
    }
}

/// An address in `LEASED`, until dropped.
struct Listed(usize);

impl Drop for Listed {
    fn drop(&mut self) {
        let mut leased = LEASED.lock();
        if let Some(i) = leased.iter().position(|&p| p == self.0) {
            leased.swap_remove(i);
        }
        drop(leased);
        RETURNED.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_write_waits_for_a_lease_and_then_writes_in_place() {
        let mut v = Arc::new(vec![1, 2, 3]);
        let lease = Lease::new(address(&*v), v.clone());
        let before = Arc::as_ptr(&v);
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(**lease.get(), [1, 2, 3], "the lease saw no write");
            drop(lease);
        });
        make_mut(&mut v).push(4);
        // Had it not waited, the lease's reference would have made it copy.
        assert_eq!(Arc::as_ptr(&v), before, "copied instead of waiting");
        assert_eq!(*v, vec![1, 2, 3, 4]);
        reader.join().unwrap();
    }

    #[test]
    fn other_sharing_is_copied_at_once() {
        let mut v = Arc::new(vec![1]);
        let kept = v.clone();
        make_mut(&mut v).push(2);
        assert_eq!((&*kept, &*v), (&vec![1], &vec![1, 2]));
    }
}
