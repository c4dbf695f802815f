//! The set value: members as compact keys in a [`KeyMap`].
//!
//! A member is 24 bytes in the map (inline up to 23 bytes, which covers
//! most members: ids, short names, integers) plus a 4-byte index slot.
//! Kept as `Bytes` in an `IndexSet`, each member cost a 32-byte handle, an
//! 8-byte hash, an 8-byte index slot and a heap block of its own.
//!
//! Members keep positions as the keyspace does (appended on insert; a
//! removal moves the last member into the hole), which SSCAN, SRANDMEMBER
//! and SPOP rely on.

use crate::key::Key;
use crate::keymap::KeyMap;

#[derive(Clone, Debug, Default)]
pub struct SetValue(KeyMap<()>);

impl SetValue {
    pub fn with_capacity(n: usize) -> SetValue {
        SetValue(KeyMap::with_capacity(n))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        self.0.find(member).is_ok()
    }

    /// Adds `member`; true if it is new.
    pub fn insert(&mut self, member: impl AsRef<[u8]>) -> bool {
        self.0.set(member.as_ref(), ())
    }

    /// Removes `member`, moving the last member into its position; true if
    /// it was there.
    pub fn swap_remove(&mut self, member: &[u8]) -> bool {
        self.0.swap_remove(member).is_some()
    }

    /// The member at position `i` (not sorted), for cursors and sampling.
    pub fn get_index(&self, i: usize) -> Option<&Key> {
        self.0.get_index(i).map(|(k, _)| k)
    }

    /// Members in position order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Key> + '_ {
        self.0.iter().map(|(k, _)| k)
    }

    /// Keeps the members `keep` accepts, in their order.
    pub fn retain(&mut self, keep: impl FnMut(&Key) -> bool) {
        self.0.retain(keep);
    }
}

/// Equal as sets, whatever the order.
impl PartialEq for SetValue {
    fn eq(&self, other: &SetValue) -> bool {
        self.len() == other.len() && self.iter().all(|m| other.contains(m))
    }
}

impl<T: AsRef<[u8]>> FromIterator<T> for SetValue {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> SetValue {
        let mut s = SetValue::default();
        s.extend(iter);
        s
    }
}

impl<T: AsRef<[u8]>> Extend<T> for SetValue {
    fn extend<I: IntoIterator<Item = T>>(&mut self, iter: I) {
        for m in iter {
            self.insert(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_a_set_with_positions() {
        let mut s: SetValue = ["a", "b", "c", "a-member-longer-than-23-bytes"]
            .iter()
            .collect();
        assert_eq!(s.len(), 4);
        assert!(!s.insert("b"));
        assert!(s.insert(bytes::Bytes::from_static(b"d")));
        assert!(s.contains(b"a-member-longer-than-23-bytes"));
        assert!(s.swap_remove(b"a"));
        assert!(!s.swap_remove(b"a"));
        // The last member took the removed one's position.
        assert_eq!(s.get_index(0).map(|k| k.as_slice()), Some(&b"d"[..]));
        s.retain(|m| m.as_slice() != b"c");
        let order: Vec<&[u8]> = s.iter().map(|k| k.as_slice()).collect();
        assert_eq!(
            order,
            vec![&b"d"[..], b"b", b"a-member-longer-than-23-bytes"]
        );
        assert!(!s.contains(b"c"));
        let same: SetValue = ["b", "a-member-longer-than-23-bytes", "d"].iter().collect();
        assert_eq!(s, same);
        assert_ne!(s, SetValue::default());
    }
}
