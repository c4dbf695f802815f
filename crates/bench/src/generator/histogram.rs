//! Field lengths drawn from an empirical histogram file
//! (`fieldlengthdistribution=histogram`, YCSB's `HistogramGenerator`): the
//! first line is `BlockSize<TAB>n`, then `bucket<TAB>count` lines; a draw
//! returns a multiple of the block size.

use super::BenchRng;
use rand::Rng;
use std::path::Path;

#[derive(Clone, Debug)]
pub struct HistogramGen {
    block_size: i64,
    buckets: Vec<i64>,
    area: i64,
}

impl HistogramGen {
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read field length histogram {}: {e}", path.display()))?;
        Self::parse(&text)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text.lines();
        let first = lines.next().ok_or("empty field length histogram")?;
        let mut parts = first.split('\t');
        if parts.next() != Some("BlockSize") {
            return Err("first line of the histogram is not BlockSize".into());
        }
        let block_size: i64 = parts
            .next()
            .and_then(|v| v.trim().parse().ok())
            .ok_or("bad BlockSize line")?;
        let mut buckets = Vec::new();
        for line in lines.filter(|l| !l.trim().is_empty()) {
            let mut parts = line.split('\t');
            let idx: usize = parts
                .next()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| format!("bad histogram line {line:?}"))?;
            let count: i64 = parts
                .next()
                .and_then(|v| v.trim().parse().ok())
                .ok_or_else(|| format!("bad histogram line {line:?}"))?;
            if buckets.len() <= idx {
                buckets.resize(idx + 1, 0);
            }
            buckets[idx] = count;
        }
        let area: i64 = buckets.iter().sum();
        if area <= 0 {
            return Err("field length histogram has no weight".into());
        }
        Ok(HistogramGen {
            block_size,
            buckets,
            area,
        })
    }

    pub fn next(&self, rng: &mut BenchRng) -> i64 {
        let mut number = rng.gen_range(0..self.area);
        let last = self.buckets.len() - 1;
        for (i, count) in self.buckets[..last].iter().enumerate() {
            number -= count;
            if number <= 0 {
                return (i as i64 + 1) * self.block_size;
            }
        }
        last as i64 * self.block_size
    }
}
