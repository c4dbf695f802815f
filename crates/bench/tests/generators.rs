//! Statistical checks of the request-distribution generators. Sample sizes
//! and tolerances are chosen so that a correct generator fails with
//! negligible probability (well over 5 standard deviations), while the
//! properties checked are the ones YCSB's generators are defined by.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use durakv_bench::generator::zipfian::{zeta_static, ZIPFIAN_CONSTANT};
use durakv_bench::generator::{
    AcknowledgedCounter, BenchRng, Discrete, Exponential, Hotspot, ScrambledZipfian, Sequential,
    SkewedLatest, UniformLong, Zipfian,
};
use rand::SeedableRng;
use std::collections::HashMap;
use std::sync::Arc;

fn rng(seed: u64) -> BenchRng {
    BenchRng::seed_from_u64(seed)
}

/// Allowed deviation of an observed count from `n * p`: six binomial
/// standard deviations.
fn tolerance(n: usize, p: f64) -> f64 {
    6.0 * (n as f64 * p * (1.0 - p)).sqrt()
}

#[test]
fn zipfian_rank_frequencies_follow_the_power_law() {
    let items = 1000;
    let z = Zipfian::new(0, items - 1);
    let zetan = zeta_static(0, items, ZIPFIAN_CONSTANT, 0.0);
    let n = 400_000;
    let mut r = rng(1);
    let mut counts = vec![0usize; items as usize];
    for _ in 0..n {
        let v = z.next_value(&mut r);
        assert!((0..items).contains(&v), "out of range: {v}");
        counts[v as usize] += 1;
    }
    // Ranks 0 and 1 are exact in Gray's algorithm: p(i) = (i+1)^-theta / zeta(n).
    for (rank, count) in counts.iter().enumerate().take(2) {
        let p = 1.0 / ((rank + 1) as f64).powf(ZIPFIAN_CONSTANT) / zetan;
        let diff = (*count as f64 - n as f64 * p).abs();
        assert!(
            diff < tolerance(n, p),
            "rank {rank}: {count} vs {:.0}",
            n as f64 * p
        );
    }
    // Beyond that the algorithm approximates the power law; frequencies
    // must still fall with rank roughly as (rank+1)^-theta.
    for rank in [4usize, 9, 49, 99] {
        let expected = counts[0] as f64 / ((rank + 1) as f64).powf(ZIPFIAN_CONSTANT);
        let ratio = counts[rank] as f64 / expected;
        assert!(
            (0.6..1.6).contains(&ratio),
            "rank {rank}: ratio to power law {ratio:.2}"
        );
    }
    // Strongly skewed: the top 10% of items take well over half the draws.
    let top: usize = counts[..100].iter().sum();
    assert!(
        top as f64 / n as f64 > 0.6,
        "top 10% share {}",
        top as f64 / n as f64
    );
}

#[test]
fn scrambled_zipfian_scatters_popular_items() {
    let g = ScrambledZipfian::new(0, 999);
    let n = 200_000;
    let mut r = rng(2);
    let mut counts: HashMap<i64, usize> = HashMap::new();
    for _ in 0..n {
        let v = g.next(&mut r);
        assert!((0..1000).contains(&v));
        *counts.entry(v).or_default() += 1;
    }
    let mut freq: Vec<(i64, usize)> = counts.into_iter().collect();
    freq.sort_by_key(|f| std::cmp::Reverse(f.1));
    // The most popular record carries about 1/zeta(1e10) = 3.8% of draws.
    let top_share = freq[0].1 as f64 / n as f64;
    assert!((0.03..0.06).contains(&top_share), "top share {top_share}");
    // ...and the popular records are not the lowest numbers.
    let top10: Vec<i64> = freq.iter().take(10).map(|(k, _)| *k).collect();
    assert!(
        top10.iter().any(|k| *k >= 100),
        "popular keys clustered: {top10:?}"
    );
    // Skewed overall (uniform would give the top 10% about 10% of draws).
    let top100: usize = freq.iter().take(100).map(|(_, c)| c).sum();
    let share = top100 as f64 / n as f64;
    // Ranks beyond the first hundred fold onto all records, so the skew is
    // milder than a plain zipfian: about zeta(100)/zeta(1e10) + 10% of the rest.
    assert!(share > 0.2, "top 10% share {share}");
}

#[test]
fn uniform_covers_the_range_evenly() {
    let g = UniformLong::new(10, 109);
    let n = 200_000;
    let mut r = rng(3);
    let mut counts = [0usize; 100];
    for _ in 0..n {
        let v = g.next(&mut r);
        assert!((10..=109).contains(&v));
        counts[(v - 10) as usize] += 1;
    }
    let p = 0.01;
    for (i, c) in counts.iter().enumerate() {
        assert!(
            (*c as f64 - n as f64 * p).abs() < tolerance(n, p),
            "value {}: {c}",
            i + 10
        );
    }
    // Chi-square with 99 degrees of freedom; 200 is far beyond its tail.
    let e = n as f64 * p;
    let chi2: f64 = counts.iter().map(|c| (*c as f64 - e).powi(2) / e).sum();
    assert!(chi2 < 200.0, "chi2 {chi2}");
}

#[test]
fn latest_favours_the_newest_records() {
    let counter = Arc::new(AcknowledgedCounter::new(1000));
    let g = SkewedLatest::new(counter.clone());
    let n = 100_000;
    let mut r = rng(4);
    let mut newest = 0;
    let mut recent = 0;
    for _ in 0..n {
        let v = g.next(&mut r);
        assert!((0..=999).contains(&v), "{v}");
        newest += usize::from(v == 999);
        recent += usize::from(v >= 900);
    }
    let zetan = zeta_static(0, 999, ZIPFIAN_CONSTANT, 0.0);
    let p = 1.0 / zetan;
    assert!(
        (newest as f64 - n as f64 * p).abs() < tolerance(n, p),
        "newest {newest}"
    );
    assert!(
        recent as f64 / n as f64 > 0.6,
        "newest 10% share {}",
        recent as f64 / n as f64
    );
    // After inserts are acknowledged the popularity moves to the new records.
    for _ in 0..50 {
        let k = counter.next();
        counter.acknowledge(k);
    }
    assert_eq!(counter.last_value(), 1049);
    let hits = (0..20_000).filter(|_| g.next(&mut r) == 1049).count();
    assert!(hits > 20_000 / 20, "newest after inserts: {hits}");
}

#[test]
fn hotspot_sends_the_configured_fraction_to_the_hot_set() {
    let g = Hotspot::new(0, 999, 0.2, 0.8);
    let n = 200_000;
    let mut r = rng(5);
    let mut hot = 0;
    for _ in 0..n {
        let v = g.next(&mut r);
        assert!((0..=999).contains(&v));
        hot += usize::from(v < 200);
    }
    assert!(
        (hot as f64 - n as f64 * 0.8).abs() < tolerance(n, 0.8),
        "hot {hot}"
    );
}

#[test]
fn exponential_percentile_falls_in_range() {
    let g = Exponential::new(95.0, 100.0);
    let n = 200_000;
    let mut r = rng(6);
    let within = (0..n).filter(|_| g.next(&mut r) < 100.0).count();
    assert!(
        (within as f64 - n as f64 * 0.95).abs() < tolerance(n, 0.95),
        "{within}"
    );
}

#[test]
fn sequential_wraps_and_discrete_honours_weights() {
    let s = Sequential::new(5, 7);
    let seq: Vec<i64> = (0..7).map(|_| s.next()).collect();
    assert_eq!(seq, vec![5, 6, 7, 5, 6, 7, 5]);

    let mut d = Discrete::new();
    d.add(0.5, 'r');
    d.add(0.3, 'u');
    d.add(0.2, 'i');
    let n = 100_000;
    let mut r = rng(7);
    let mut c: HashMap<char, usize> = HashMap::new();
    for _ in 0..n {
        *c.entry(d.next(&mut r).expect("value")).or_default() += 1;
    }
    for (k, p) in [('r', 0.5), ('u', 0.3), ('i', 0.2)] {
        assert!(
            (c[&k] as f64 - n as f64 * p).abs() < tolerance(n, p),
            "{k}: {}",
            c[&k]
        );
    }
    assert!(Discrete::<char>::new().next(&mut r).is_none());
}
