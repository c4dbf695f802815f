//! Sorted set: members with scores, ordered by (score, member).
//!
//! A hash map answers `ZSCORE` in O(1); an ordered tree of (score, member)
//! serves ranges. Rank lookups walk the tree (O(rank)); Redis's skiplist is
//! O(log n) there, which matters only for very large sets. The map keeps
//! members by position (`crate::keymap`, as the keyspace does) so ZSCAN
//! walks positions (with the same guarantee as `Db::scan`) and ZRANDMEMBER
//! samples them.

use crate::key::Key;
use crate::keymap::KeyMap;
use bytes::Bytes;
use std::cmp::Ordering;
use std::collections::BTreeSet;
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

#[derive(Clone, Debug, Default)]
pub struct ZSet {
    // Members are compact keys held by both structures: short ones (most
    // members) inline, long ones in one block the two share
    // (`Key::shared`).
    scores: KeyMap<f64>,
    order: BTreeSet<(Score, Key)>,
}

/// Equal members with equal scores, wherever they sit in the map: the
/// tree holds every (score, member) pair.
impl PartialEq for ZSet {
    fn eq(&self, other: &ZSet) -> bool {
        self.order == other.order
    }
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

    /// A set of `pairs` (score, member), as a checkpoint or the log holds
    /// them: in order and each member once, so the map is sized once and
    /// the tree built bottom-up from sorted input rather than by an insert
    /// per member. Any other input gives what inserting each pair in turn
    /// gives (a repeated member keeps its last score).
    pub fn from_pairs(pairs: &[(f64, &[u8])]) -> ZSet {
        let score_of = |s: f64| {
            debug_assert!(!s.is_nan());
            if s == 0.0 {
                0.0
            } else {
                s
            }
        };
        let members: Vec<Key> = pairs.iter().map(|&(_, m)| Key::shared(m)).collect();
        let Some(scores) = unique_members(pairs, &members, score_of) else {
            let mut z = ZSet::default();
            for &(score, member) in pairs {
                z.insert(member, score);
            }
            return z;
        };
        let order = pairs
            .iter()
            .zip(members)
            .map(|(&(s, _), m)| (Score(score_of(s)), m))
            .collect();
        ZSet { scores, order }
    }

    /// Inserts or updates; returns true if the member is new.
    pub fn insert(&mut self, member: impl AsRef<[u8]>, score: f64) -> bool {
        let member = member.as_ref();
        debug_assert!(!score.is_nan());
        // -0.0 and 0.0 compare differently under total_cmp; Redis treats them alike.
        let score = if score == 0.0 { 0.0 } else { score };
        match self.scores.find(member) {
            Ok(i) => {
                let Some((held, slot)) = self.scores.get_index_mut(i) else {
                    unreachable!("find returned a position the map has")
                };
                let old = std::mem::replace(slot, score);
                if old.total_cmp(&score) != Ordering::Equal {
                    // The map's own key, so the order keeps sharing its block.
                    let held = held.clone();
                    self.order.remove(&(Score(old), held.clone()));
                    self.order.insert((Score(score), held));
                }
                false
            }
            Err(slot) => {
                let member = Key::shared(member);
                self.scores.insert_new(slot, member.clone(), score);
                self.order.insert((Score(score), member));
                true
            }
        }
    }

    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self.scores.swap_remove_full(member) {
            Some((_, m, s)) => {
                self.order.remove(&(Score(s), m));
                true
            }
            None => false,
        }
    }

    /// The member at position `i` of the hash index (not rank order), for
    /// cursor walks and random sampling. Removal moves the last position
    /// into the hole (`KeyMap::swap_remove_full`).
    pub fn get_index(&self, i: usize) -> Option<(&Key, f64)> {
        self.scores.get_index(i).map(|(m, s)| (m, *s))
    }

    /// 0-based rank in ascending order.
    pub fn rank(&self, member: &[u8]) -> Option<usize> {
        let s = self.score(member)?;
        Some(self.order.range(..(Score(s), Key::new(member))).count())
    }

    /// Members in ascending (score, member) order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&Key, f64)> + '_ {
        self.order.iter().map(|(s, m)| (m, s.0))
    }

    /// Members whose score lies within the bounds, ascending.
    pub fn range_by_score(&self, min: Bound<f64>, max: Bound<f64>) -> ScoreRange<'_> {
        let lo = match min {
            Bound::Included(v) => Bound::Included((Score(v), Key::default())),
            Bound::Excluded(v) if v == f64::INFINITY => return empty_range(self),
            Bound::Excluded(v) => Bound::Included((Score(v.next_up()), Key::default())),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi = match max {
            Bound::Included(v) if v == f64::INFINITY => Bound::Unbounded,
            Bound::Included(v) => Bound::Excluded((Score(v.next_up()), Key::default())),
            Bound::Excluded(v) => Bound::Excluded((Score(v), Key::default())),
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

impl ZSet {
    /// Members whose bytes lie within the bounds, in (score, member) order,
    /// or its reverse when `rev`.
    ///
    /// Lex ranges are meaningful only when all scores are equal; then this
    /// is a tree range. With mixed scores it walks as Redis walks a small
    /// sorted set, so replies agree: nothing if the last member is below
    /// `min` or the first above `max`; otherwise from the first member (the
    /// last, in reverse) that passes the near bound, while members pass the
    /// far bound.
    pub fn range_by_lex<'a>(
        &'a self,
        min: Bound<&[u8]>,
        max: Bound<&[u8]>,
        rev: bool,
    ) -> LexRange<'a> {
        let (Some(first), Some(last)) = (self.order.first(), self.order.last()) else {
            return Box::new(std::iter::empty());
        };
        if lex_bounds_empty(min, max)
            || !lex_in_bounds(&last.1, min, Bound::Unbounded)
            || !lex_in_bounds(&first.1, Bound::Unbounded, max)
        {
            return Box::new(std::iter::empty());
        }
        let pair = |(s, m): &'a (Score, Key)| (m, s.0);
        if first.0.cmp(&last.0) != Ordering::Equal {
            let (min, max) = (own(min), own(max));
            let (near, far) = if rev { (max, min) } else { (min, max) };
            let passes = move |b: &Bound<Bytes>, m: &[u8], upper: bool| {
                if upper {
                    lex_in_bounds(m, Bound::Unbounded, as_ref(b))
                } else {
                    lex_in_bounds(m, as_ref(b), Bound::Unbounded)
                }
            };
            let it: Box<dyn Iterator<Item = &'a (Score, Key)>> = if rev {
                Box::new(self.order.iter().rev())
            } else {
                Box::new(self.order.iter())
            };
            return Box::new(
                it.skip_while(move |(_, m)| !passes(&near, m, rev))
                    .take_while(move |(_, m)| passes(&far, m, !rev))
                    .map(pair),
            );
        }
        let score = first.0;
        let at = |b: Bound<&[u8]>| b.map(|m| (score, Key::new(m)));
        let range = self.order.range((at(min), at(max)));
        if rev {
            Box::new(range.rev().map(pair))
        } else {
            Box::new(range.map(pair))
        }
    }
}

/// True when no member can satisfy both bounds. `BTreeSet::range` panics on
/// such ranges, so they must be caught first.
fn lex_bounds_empty(min: Bound<&[u8]>, max: Bound<&[u8]>) -> bool {
    match (min, max) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
    }
}

fn own(b: Bound<&[u8]>) -> Bound<Bytes> {
    b.map(Bytes::copy_from_slice)
}

fn as_ref(b: &Bound<Bytes>) -> Bound<&[u8]> {
    b.as_ref().map(|m| &m[..])
}

fn lex_in_bounds(m: &[u8], min: Bound<&[u8]>, max: Bound<&[u8]>) -> bool {
    let lo_ok = match min {
        Bound::Included(b) => m >= b,
        Bound::Excluded(b) => m > b,
        Bound::Unbounded => true,
    };
    let hi_ok = match max {
        Bound::Included(b) => m <= b,
        Bound::Excluded(b) => m < b,
        Bound::Unbounded => true,
    };
    lo_ok && hi_ok
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

pub type ScoreRange<'a> = Box<dyn DoubleEndedIterator<Item = (&'a Key, f64)> + 'a>;

/// Members in a lex range, in the direction asked for.
pub type LexRange<'a> = Box<dyn Iterator<Item = (&'a Key, f64)> + 'a>;

fn empty_range(z: &ZSet) -> ScoreRange<'_> {
    Box::new(z.order.iter().take(0).map(|(s, m)| (m, s.0)))
}

/// Hints that `b` is about to be read.
#[inline(always)]
fn prefetch(b: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint; it never faults, whatever the
    // address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(b.as_ptr().cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}

/// Sets past this many members are indexed in the order of their slots in
/// the map's table rather than in score order: a table larger than the
/// caches then fills front to back instead of one cache miss per member.
const SLOT_ORDER_MIN: usize = 1 << 16;

/// The score map of `pairs`, holding `members` (their keys, in the same
/// order), or None if a member repeats.
fn unique_members(
    pairs: &[(f64, &[u8])],
    members: &[Key],
    score_of: impl Fn(f64) -> f64,
) -> Option<KeyMap<f64>> {
    let mut scores: KeyMap<f64> = KeyMap::with_capacity(pairs.len());
    if pairs.len() < SLOT_ORDER_MIN {
        for (&(s, m), key) in pairs.iter().zip(members) {
            let slot = scores.find(m).err()?;
            scores.insert_new(slot, key.clone(), score_of(s));
        }
        return Some(scores);
    }
    // The table's slot for a hash is its low bits, masked by the bucket
    // count, a power of two past the capacity by hashbrown's 8/7 load
    // factor. Were this guess off, the order would still be correct, only
    // slower.
    let mask = (pairs.len() * 8 / 7).next_power_of_two() as u64 - 1;
    let mut by_slot: Vec<(u64, usize)> = pairs
        .iter()
        .enumerate()
        .map(|(i, &(_, m))| (scores.hash(m), i))
        .collect();
    by_slot.sort_unstable_by_key(|&(h, _)| h & mask);
    // The members' bytes are now read out of order; ask for each a few
    // steps ahead.
    const AHEAD: usize = 8;
    for (j, &(h, i)) in by_slot.iter().enumerate() {
        if let Some(&(_, next)) = by_slot.get(j + AHEAD) {
            prefetch(pairs[next].1);
        }
        let (s, m) = pairs[i];
        let slot = scores.find_hashed(h, m).err()?;
        scores.insert_new(slot, members[i].clone(), score_of(s));
    }
    Some(scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_seeds::seeds;
    use rand::{Rng, SeedableRng};

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
        let names: Vec<_> = z.iter().map(|(m, _)| m.to_bytes()).collect();
        assert_eq!(names, vec![b("a"), b("b"), b("c")]);
        assert_eq!(z.rank(b"c"), Some(2));
        assert!(z.remove(b"a"));
        assert_eq!(z.len(), 2);
        let r: Vec<_> = z
            .range_by_score(Bound::Excluded(2.0), Bound::Unbounded)
            .map(|(m, _)| m.to_bytes())
            .collect();
        assert_eq!(r, vec![b("c")]);
        assert_eq!(
            z.range_by_score(Bound::Included(5.0), Bound::Included(1.0))
                .count(),
            0
        );
    }

    #[test]
    fn lex_ranges() {
        let mut z = ZSet::default();
        for m in ["a", "b", "c", "d"] {
            z.insert(b(m), 0.0);
        }
        fn names<'a>(r: impl Iterator<Item = (&'a Key, f64)>) -> Vec<Bytes> {
            r.map(|(m, _)| m.to_bytes()).collect()
        }
        let lex = |z: &ZSet, min: Bound<&[u8]>, max: Bound<&[u8]>, rev: bool| {
            names(z.range_by_lex(min, max, rev))
        };
        use Bound::{Excluded as Ex, Included as In, Unbounded as Un};
        assert_eq!(lex(&z, In(b"b"), Ex(b"d"), false), vec![b("b"), b("c")]);
        assert_eq!(lex(&z, In(b"b"), Ex(b"d"), true), vec![b("c"), b("b")]);
        assert_eq!(lex(&z, Un, In(b"a"), false), vec![b("a")]);
        assert!(lex(&z, Ex(b"c"), Ex(b"c"), false).is_empty());
        assert!(lex(&z, In(b"d"), In(b"a"), true).is_empty());
        assert_eq!(lex(&z, In(b"c"), In(b"c"), true), vec![b("c")]);
        assert!(lex(&z, Ex(b"d"), Un, false).is_empty());
        // Mixed scores: order is (0,b) (0,c) (0,d) (5,a). Redis walks from
        // the first member past the near bound while the far bound holds.
        z.insert(b("a"), 5.0);
        assert_eq!(lex(&z, In(b"a"), In(b"c"), false), vec![b("b"), b("c")]);
        // The last member (a) is below min "c": nothing.
        assert!(lex(&z, In(b"c"), Un, false).is_empty());
        assert_eq!(
            lex(&z, Un, In(b"c"), true),
            vec![b("a"), b("d"), b("c"), b("b")]
        );
        // The first member (b) is above max "a": nothing.
        assert!(lex(&z, Un, In(b"a"), false).is_empty());
        let at: Vec<_> = (0..z.len())
            .filter_map(|i| z.get_index(i).map(|(m, _)| m.to_bytes()))
            .collect();
        assert_eq!(at.len(), 4);
        z.remove(b"b");
        assert!(z.get_index(3).is_none());
    }

    #[test]
    fn built_from_pairs_equals_built_by_inserts() {
        let m = |i: usize| format!("member-{i:06}-{}", "x".repeat(i % 30));
        // Past SLOT_ORDER_MIN members the map is filled in table order.
        let sorted: Vec<(f64, String)> = (0..SLOT_ORDER_MIN + 5000)
            .map(|i| ((i / 3) as f64, m(i)))
            .collect();
        let mut shuffled = sorted.clone();
        shuffled.reverse();
        shuffled.swap(10, 4000);
        let small: Vec<(f64, String)> = sorted[..5000].to_vec();
        let mut repeated = sorted.clone();
        repeated.push((-0.0, m(17)));
        repeated.push((7.5, m(3)));
        for pairs in [sorted, shuffled, repeated, small] {
            let slices: Vec<(f64, &[u8])> = pairs.iter().map(|(s, m)| (*s, m.as_bytes())).collect();
            let mut by_inserts = ZSet::default();
            for (s, m) in &slices {
                by_inserts.insert(m, *s);
            }
            let built = ZSet::from_pairs(&slices);
            assert_eq!(built, by_inserts);
            assert!(built.iter().eq(by_inserts.iter()));
            assert_eq!(
                built.rank(m(17).as_bytes()),
                by_inserts.rank(m(17).as_bytes())
            );
        }
    }

    /// A model score: never NaN, and -0.0 is stored as 0.0, so the plain
    /// numeric order is total.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct M(f64);
    impl Eq for M {}
    impl PartialOrd for M {
        fn partial_cmp(&self, other: &M) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }
    impl Ord for M {
        fn cmp(&self, other: &M) -> Ordering {
            self.0.partial_cmp(&other.0).expect("no NaN")
        }
    }

    /// Positions as the map keeps them, and the (score, member) order.
    #[derive(Clone, Default)]
    struct ZModel {
        at: indexmap::IndexMap<Vec<u8>, f64>,
        order: BTreeSet<(M, Vec<u8>)>,
    }

    impl ZModel {
        fn insert(&mut self, m: &[u8], s: f64) -> bool {
            let s = if s == 0.0 { 0.0 } else { s };
            match self.at.insert(m.to_vec(), s) {
                Some(old) => {
                    self.order.remove(&(M(old), m.to_vec()));
                    self.order.insert((M(s), m.to_vec()));
                    false
                }
                None => {
                    self.order.insert((M(s), m.to_vec()));
                    true
                }
            }
        }

        fn remove(&mut self, m: &[u8]) -> bool {
            match self.at.swap_remove(m) {
                Some(s) => {
                    assert!(self.order.remove(&(M(s), m.to_vec())));
                    true
                }
                None => false,
            }
        }

        fn rank(&self, m: &[u8]) -> Option<usize> {
            self.order.iter().position(|(_, x)| x == m)
        }
    }

    /// Scores at the edges of the order: infinities, extremes, both zeros,
    /// the smallest subnormals, and small integers that repeat.
    fn edge_score(rng: &mut rand::rngs::StdRng) -> f64 {
        const AT: [f64; 13] = [
            f64::NEG_INFINITY,
            f64::MIN,
            -2.5,
            -1.0,
            -5e-324,
            -0.0,
            0.0,
            5e-324,
            1.0,
            2.5,
            f64::MAX,
            f64::INFINITY,
            1e-300,
        ];
        match rng.gen_range(0..4) {
            0 => AT[rng.gen_range(0..AT.len())],
            1 => rng.gen_range(-3..4) as f64,
            2 => rng.gen_range(-10.0..10.0),
            _ => {
                let s = AT[rng.gen_range(0..AT.len())];
                if rng.gen_bool(0.5) {
                    s.next_up()
                } else {
                    s.next_down()
                }
            }
        }
    }

    fn edge_bound(rng: &mut rand::rngs::StdRng) -> Bound<f64> {
        match rng.gen_range(0..5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(edge_score(rng)),
            _ => Bound::Excluded(edge_score(rng)),
        }
    }

    /// Member `n`: empty, inline (up to 23 bytes) or shared.
    fn sized_member(n: usize) -> Vec<u8> {
        const LENS: [usize; 9] = [1, 2, 5, 22, 23, 24, 25, 40, 100];
        if n == 0 {
            return Vec::new();
        }
        let mut m = format!("{:03}", n % 1000).into_bytes();
        m.resize(LENS[n % LENS.len()].max(3), b'm');
        m
    }

    fn lex_bound(rng: &mut rand::rngs::StdRng, z: &ZModel) -> Bound<Vec<u8>> {
        let m = if !z.at.is_empty() && rng.gen_bool(0.6) {
            z.at.get_index(rng.gen_range(0..z.at.len()))
                .unwrap()
                .0
                .clone()
        } else {
            let mut m = sized_member(rng.gen_range(0..300));
            m.truncate(rng.gen_range(0..=m.len()));
            m
        };
        match rng.gen_range(0..5) {
            0 => Bound::Unbounded,
            1 | 2 => Bound::Included(m),
            _ => Bound::Excluded(m),
        }
    }

    /// Redis's walk: nothing if the bounds cannot meet, the last member is
    /// below min or the first above max; otherwise from the first member
    /// past the near bound while members pass the far one.
    fn model_lex(z: &ZModel, min: Bound<&[u8]>, max: Bound<&[u8]>, rev: bool) -> Vec<Vec<u8>> {
        let above_min = |m: &[u8]| match min {
            Bound::Included(b) => m >= b,
            Bound::Excluded(b) => m > b,
            Bound::Unbounded => true,
        };
        let below_max = |m: &[u8]| match max {
            Bound::Included(b) => m <= b,
            Bound::Excluded(b) => m < b,
            Bound::Unbounded => true,
        };
        let never = match (min, max) {
            (Bound::Included(a), Bound::Included(b)) => a > b,
            (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
                a >= b
            }
            _ => false,
        };
        let (Some(first), Some(last)) = (z.order.first(), z.order.last()) else {
            return Vec::new();
        };
        if never || !above_min(&last.1) || !below_max(&first.1) {
            return Vec::new();
        }
        let members: Vec<&Vec<u8>> = if rev {
            z.order.iter().rev().map(|(_, m)| m).collect()
        } else {
            z.order.iter().map(|(_, m)| m).collect()
        };
        let near = |m: &[u8]| if rev { below_max(m) } else { above_min(m) };
        let far = |m: &[u8]| if rev { above_min(m) } else { below_max(m) };
        members
            .into_iter()
            .skip_while(|m| !near(m))
            .take_while(|m| far(m))
            .cloned()
            .collect()
    }

    fn check_zset(z: &ZSet, m: &ZModel) {
        assert_eq!(z.len(), m.at.len());
        assert_eq!(z.is_empty(), m.at.is_empty());
        let want: Vec<(Vec<u8>, u64)> = m
            .order
            .iter()
            .map(|(s, k)| (k.clone(), s.0.to_bits()))
            .collect();
        let got: Vec<(Vec<u8>, u64)> = z.iter().map(|(k, s)| (k.to_vec(), s.to_bits())).collect();
        assert_eq!(got, want);
        assert!(z
            .iter()
            .rev()
            .map(|(k, s)| (k.to_vec(), s.to_bits()))
            .eq(want.iter().rev().cloned()));
        for (i, (k, s)) in m.at.iter().enumerate() {
            assert_eq!(
                z.get_index(i).map(|(k, s)| (k.to_vec(), s.to_bits())),
                Some((k.clone(), s.to_bits()))
            );
            assert_eq!(z.score(k).map(f64::to_bits), Some(s.to_bits()));
        }
        assert!(z.get_index(m.at.len()).is_none());
        for (rank, (_, k)) in m.order.iter().enumerate() {
            assert_eq!(z.rank(k), Some(rank));
        }
    }

    /// Random inserts (new members and score updates), removals, rebuilds
    /// from pairs and clones, with scores at every edge of the order
    /// (infinities, both zeros, subnormals, ties) and members of every
    /// length class; scores, ranks, positions, both iteration orders, and
    /// score and lex ranges under every kind of bound must match the model
    /// after every step.
    #[test]
    fn behaves_as_an_ordered_set_with_positions() {
        for seed in seeds(30) {
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let mut z = ZSet::default();
            let mut m = ZModel::default();
            for _phase in 0..8 {
                // One score for every member, so lex ranges take the tree
                // path, or many.
                let one_score = rng.gen_bool(0.3).then(|| edge_score(&mut rng));
                let span = [4, 40, 300][rng.gen_range(0..3)];
                let target = rng.gen_range(0..span);
                for step in 0..300 {
                    let grow = (m.at.len() < target) == rng.gen_bool(0.8);
                    let member = if !m.at.is_empty() && rng.gen_bool(0.5) {
                        m.at.get_index(rng.gen_range(0..m.at.len()))
                            .unwrap()
                            .0
                            .clone()
                    } else {
                        sized_member(rng.gen_range(0..span))
                    };
                    match rng.gen_range(0..100) {
                        0 => z = z.clone(),
                        1 => {
                            let held = m.clone();
                            let mut pairs: Vec<(f64, &[u8])> =
                                held.at.iter().map(|(k, s)| (*s, &k[..])).collect();
                            if rng.gen_bool(0.5) {
                                pairs.reverse();
                            }
                            if !pairs.is_empty() && rng.gen_bool(0.3) {
                                let (_, k) = pairs[rng.gen_range(0..pairs.len())];
                                pairs.push((-0.0, k));
                            }
                            z = ZSet::from_pairs(&pairs);
                            m = ZModel::default();
                            for (s, k) in pairs {
                                m.insert(k, s);
                            }
                        }
                        _ if grow => {
                            let s = one_score.unwrap_or_else(|| edge_score(&mut rng));
                            assert_eq!(z.insert(&member, s), m.insert(&member, s));
                        }
                        _ => assert_eq!(z.remove(&member), m.remove(&member)),
                    }
                    assert_eq!(z.len(), m.at.len());
                    assert_eq!(
                        z.score(&member).map(f64::to_bits),
                        m.at.get(&member).map(|s| s.to_bits())
                    );
                    assert_eq!(z.rank(&member), m.rank(&member));
                    if step % 4 == 0 || m.at.len() < 8 {
                        check_zset(&z, &m);
                    }
                    let (min, max) = (edge_bound(&mut rng), edge_bound(&mut rng));
                    let want: Vec<(Vec<u8>, u64)> = m
                        .order
                        .iter()
                        .filter(|(s, _)| in_model_bounds(s.0, min, max))
                        .map(|(s, k)| (k.clone(), s.0.to_bits()))
                        .collect();
                    let got: Vec<(Vec<u8>, u64)> = z
                        .range_by_score(min, max)
                        .map(|(k, s)| (k.to_vec(), s.to_bits()))
                        .collect();
                    assert_eq!(got, want, "{min:?} {max:?}");
                    assert!(z
                        .range_by_score(min, max)
                        .rev()
                        .map(|(k, s)| (k.to_vec(), s.to_bits()))
                        .eq(want.into_iter().rev()));
                    let (lo, hi) = (lex_bound(&mut rng, &m), lex_bound(&mut rng, &m));
                    let (lo, hi) = (lo.as_ref().map(|b| &b[..]), hi.as_ref().map(|b| &b[..]));
                    for rev in [false, true] {
                        let got: Vec<Vec<u8>> = z
                            .range_by_lex(lo, hi, rev)
                            .map(|(k, _)| k.to_vec())
                            .collect();
                        assert_eq!(got, model_lex(&m, lo, hi, rev), "{lo:?} {hi:?} rev {rev}");
                    }
                }
            }
            check_zset(&z, &m);
        }
    }

    /// The model's own bounds check, not the `in_bounds` the ranges use:
    /// a model that shared it could not catch a mistake in it.
    fn in_model_bounds(v: f64, min: Bound<f64>, max: Bound<f64>) -> bool {
        let lo = match min {
            Bound::Included(b) => v >= b,
            Bound::Excluded(b) => v > b,
            Bound::Unbounded => true,
        };
        let hi = match max {
            Bound::Included(b) => v <= b,
            Bound::Excluded(b) => v < b,
            Bound::Unbounded => true,
        };
        lo && hi
    }
}
