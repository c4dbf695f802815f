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
    use crate::test_seeds::seeds;
    use indexmap::IndexSet;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

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

    /// Member `n`: empty, inline (up to 23 bytes) or on the heap.
    fn sized_member(n: u32) -> Vec<u8> {
        const LENS: [usize; 8] = [1, 5, 22, 23, 24, 25, 64, 200];
        if n == 0 {
            return Vec::new();
        }
        let mut m = n.to_string().into_bytes();
        m.push(b'-');
        m.resize(LENS[n as usize % LENS.len()].max(m.len()), b's');
        m
    }

    /// Grows sets to sizes around the table's growth and shrink points
    /// and back (SADD, SREM, SPOP-like removals by position, SINTERSTORE
    /// -like retains, rebuilds from members); membership, positions and
    /// iteration must match an `IndexSet`, which moves members as SSCAN
    /// and SRANDMEMBER expect.
    #[test]
    fn behaves_as_an_index_set() {
        for seed in seeds(30) {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut s = SetValue::with_capacity(rng.gen_range(0..100));
            let mut model: IndexSet<Vec<u8>> = IndexSet::new();
            let mut fresh = 0u32;
            for _phase in 0..20 {
                let target: usize = [0, 3, 7, 8, 28, 56, 57, 64, 112, 224, 256, 257, 448, 600]
                    [rng.gen_range(0..14)];
                let steps = target.abs_diff(model.len()) + rng.gen_range(0..40);
                for step in 0..steps {
                    let grow = (model.len() < target) == rng.gen_bool(0.8);
                    let member = match model.len() {
                        n if n > 0 && rng.gen_bool(0.5) => {
                            model.get_index(rng.gen_range(0..n)).unwrap().clone()
                        }
                        _ if grow && rng.gen_bool(0.8) => {
                            fresh += 1;
                            sized_member(fresh)
                        }
                        _ => sized_member(rng.gen_range(0..=fresh)),
                    };
                    match rng.gen_range(0..100) {
                        0 => {
                            let keep_one_in = rng.gen_range(1..6);
                            let keep = |m: &[u8]| m.len().is_multiple_of(keep_one_in);
                            s.retain(|m| keep(m));
                            model.retain(|m| keep(m));
                        }
                        1 => {
                            s = model.iter().collect();
                            assert!(s
                                .iter()
                                .map(|m| m.as_slice())
                                .eq(model.iter().map(|m| &m[..])));
                        }
                        2 => s = s.clone(),
                        _ if grow => assert_eq!(s.insert(&member), model.insert(member.clone())),
                        _ => assert_eq!(s.swap_remove(&member), model.swap_remove(&member)),
                    }
                    assert_eq!(s.len(), model.len());
                    assert_eq!(s.is_empty(), model.is_empty());
                    assert_eq!(s.contains(&member), model.contains(&member));
                    if step % 8 == 0 || model.len() < 10 {
                        for (i, m) in model.iter().enumerate() {
                            assert_eq!(s.get_index(i).map(|k| k.as_slice()), Some(&m[..]));
                            assert!(s.contains(m));
                        }
                        assert!(s.get_index(model.len()).is_none());
                        assert!(s
                            .iter()
                            .map(|m| m.as_slice())
                            .eq(model.iter().map(|m| &m[..])));
                        let same: SetValue = model.iter().rev().collect();
                        assert_eq!(s, same);
                    }
                }
            }
        }
    }
}
