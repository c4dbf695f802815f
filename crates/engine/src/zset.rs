//! Sorted set: members with scores, ordered by (score, member).
//!
//! A hash map answers `ZSCORE` in O(1); an ordered tree of (score, member)
//! serves ranges. Rank lookups walk the tree (O(rank)); Redis's skiplist is
//! O(log n) there, which matters only for very large sets.

use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::ops::Bound;

/// A score with a total order. NaN never enters a sorted set (commands reject it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score(pub f64);

impl Eq for Score {}

impl PartialOrd for Score {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Score {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ZSet {
    scores: HashMap<Bytes, f64, ahash::RandomState>,
    order: BTreeSet<(Score, Bytes)>,
}

impl ZSet {
    pub fn len(&self) -> usize {
        self.scores.len()
    }

    pub fn is_empty(&self) -> bool {
        self.scores.is_empty()
    }

    pub fn score(&self, member: &[u8]) -> Option<f64> {
        self.scores.get(member).copied()
    }

    /// Inserts or updates; returns true if the member is new.
    pub fn insert(&mut self, member: Bytes, score: f64) -> bool {
        debug_assert!(!score.is_nan());
        // -0.0 and 0.0 compare differently under total_cmp; Redis treats them alike.
        let score = if score == 0.0 { 0.0 } else { score };
        match self.scores.insert(member.clone(), score) {
            Some(old) => {
                if old.total_cmp(&score) != Ordering::Equal {
                    self.order.remove(&(Score(old), member.clone()));
                    self.order.insert((Score(score), member));
                }
                false
            }
            None => {
                self.order.insert((Score(score), member));
                true
            }
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.remove_entry(member) {
            Some((m, s)) => {
                self.order.remove(&(Score(s), m));
                true
            }
            None => false,
        }
    }

    /// 0-based rank in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.score(member)?;
        Some(self.order.range(..(Score(s), Bytes::copy_from_slice(member))).count())
    }

    /// Members in ascending (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Bytes, f64)> + '_ {
        self.order.iter().map(|(s, m)| (m, s.0))
    }

    /// Members whose score lies within the bounds, ascending.
    pub fn range_by_score(
        &self,
        min: Bound<f64>,
        max: Bound<f64>,
    ) -> ScoreRange<'_> {
        let lo = match min {
            Bound::Included(v) => Bound::Included((Score(v), Bytes::new())),
            Bound::Excluded(v) if v == f64::INFINITY => return empty_range(self),
            Bound::Excluded(v) => Bound::Included((Score(v.next_up()), Bytes::new())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi = match max {
            Bound::Included(v) if v == f64::INFINITY => Bound::Unbounded,
            Bound::Included(v) => Bound::Excluded((Score(v.next_up()), Bytes::new())),
            Bound::Excluded(v) => Bound::Excluded((Score(v), Bytes::new())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let empty = match (&lo, &hi) {
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a >= b
            }
            _ => false,
        };
        if empty {
            return empty_range(self);
        }
        Box::new(
            self.order
                .range((lo, hi))
                .filter(move |(s, _)| in_bounds(s.0, min, max))
                .map(|(s, m)| (m, s.0)),
        )
    }
}

fn in_bounds(v: f64, min: Bound<f64>, max: Bound<f64>) -> bool {
    let lo_ok = match min {
        Bound::Included(m) => v >= m,
        Bound::Excluded(m) => v > m,
        Bound::Unbounded => true,
    };
    let hi_ok = match max {
        Bound::Included(m) => v <= m,
        Bound::Excluded(m) => v < m,
        Bound::Unbounded => true,
    };
    lo_ok && hi_ok
}

pub type ScoreRange<'a> = Box<dyn DoubleEndedIterator<Item = (&'a Bytes, f64)> + 'a>;

fn empty_range(z: &ZSet) -> ScoreRange<'_> {
    Box::new(z.order.iter().take(0).map(|(s, m)| (m, s.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn order_and_rank() {
        let mut z = ZSet::default();
        assert!(z.insert(b("b"), 2.0));
        assert!(z.insert(b("a"), 2.0));
        assert!(z.insert(b("c"), 1.0));
        assert!(!z.insert(b("c"), 3.0));
        let names: Vec<_> = z.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(names, vec![b("a"), b("b"), b("c")]);
        assert_eq!(z.rank(b"c"), Some(2));
        assert!(z.remove(b"a"));
        assert_eq!(z.len(), 2);
        let r: Vec<_> = z
            .range_by_score(Bound::Excluded(2.0), Bound::Unbounded)
            .map(|(m, _)| m.clone())
            .collect();
        assert_eq!(r, vec![b("c")]);
        assert_eq!(
            z.range_by_score(Bound::Included(5.0), Bound::Included(1.0)).count(),
            0
        );
    }
}
