//! YCSB's CoreWorkload: what each operation does, on which record, with
//! which data, configured by the same property names and defaults as YCSB
//! 0.17.
//!
//! The workload is built once per run and shared by every client; all
//! per-client mutable state (RNG, key and value buffers) lives in
//! [`ClientState`], so choosing an operation never synchronises clients
//! except through the shared insert counters YCSB also shares.

use crate::db::{DbClient, FieldSel, Schema, Status, Values};
use crate::generator::{
    AcknowledgedCounter, BenchRng, Counter, Discrete, Exponential, HistogramGen, Hotspot, IntGen,
    ScrambledZipfian, Sequential, SkewedLatest, UniformLong, Zipfian,
};
use crate::keys::build_key_name_into;
use crate::measure::{OpKind, OpTiming, Snapshot};
use crate::props::Props;
use parking_lot::Mutex;
use rand::{Rng, RngCore, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Load,
    Run,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Load => "load",
            Phase::Run => "run",
        }
    }
}

/// A transaction type chosen by `*proportion`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOp {
    Read,
    Update,
    Insert,
    Scan,
    ReadModifyWrite,
}

/// `requestdistribution`: how the record of a read/update/scan is chosen.
pub enum KeyChooser {
    Uniform(UniformLong),
    Zipfian(ScrambledZipfian),
    Hotspot(Hotspot),
    Sequential(Sequential),
    Exponential(Exponential),
    Latest(SkewedLatest),
}

pub struct Workload {
    pub schema: Arc<Schema>,
    pub record_count: i64,
    pub insert_start: i64,
    pub insert_count: i64,
    pub zero_padding: usize,
    pub ordered_inserts: bool,
    pub read_all_fields: bool,
    /// Accepted for compatibility; every target already returns all fields
    /// for an all-fields read, so naming them changes nothing here.
    pub read_all_fields_by_name: bool,
    pub write_all_fields: bool,
    pub request_distribution: String,
    /// Operations the run phase performs (0 = until `maxexecutiontime`).
    pub operation_count: u64,
    /// Records the load phase inserts.
    pub load_count: u64,
    insertion_retry_limit: u32,
    insertion_retry_interval_secs: f64,
    field_length: IntGen,
    key_sequence: Counter,
    op_chooser: Discrete<TxOp>,
    key_chooser: KeyChooser,
    field_chooser: UniformLong,
    insert_sequence: Arc<AcknowledgedCounter>,
    scan_length: IntGen,
}

fn perr(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Workload {
    /// Builds the workload from YCSB properties (`-P` files and `-p`).
    pub fn from_props(props: &Props) -> Result<Workload, String> {
        if props.bool_or("dataintegrity", false) {
            return Err(
                "dataintegrity=true is not supported: reads do not return values to verify".into(),
            );
        }
        let schema = Arc::new(Schema::from_props(props)?);
        let field_count = schema.field_names.len() as i64;
        if field_count == 0 {
            return Err("fieldcount must be at least 1".into());
        }
        let field_length = field_length_gen(props)?;

        let mut record_count = props.i64_or("recordcount", 0).map_err(perr)?;
        if record_count == 0 {
            // YCSB treats an unset record count as "unbounded".
            record_count = i64::from(i32::MAX);
        }
        let insert_start = props.i64_or("insertstart", 0).map_err(perr)?;
        let insert_count = props
            .i64_or("insertcount", record_count - insert_start)
            .map_err(perr)?;
        if record_count < insert_start + insert_count {
            return Err(format!(
                "invalid combination: recordcount ({record_count}) must be at least insertstart ({insert_start}) + insertcount ({insert_count})"
            ));
        }
        let zero_padding = props.u64_or("zeropadding", 1).map_err(perr)? as usize;
        let ordered_inserts = props.str_or("insertorder", "hashed") != "hashed";
        let operation_count = props.u64_or("operationcount", 0).map_err(perr)?;
        let load_count = if props.contains("insertcount") {
            insert_count.max(0) as u64
        } else {
            record_count.max(0) as u64
        };

        let op_chooser = operation_chooser(props)?;
        let insert_sequence = Arc::new(AcknowledgedCounter::new(record_count));
        let request_distribution = props.str_or("requestdistribution", "uniform");
        let key_chooser = match request_distribution.as_str() {
            "uniform" => KeyChooser::Uniform(UniformLong::new(
                insert_start,
                insert_start + insert_count - 1,
            )),
            "exponential" => {
                let percentile = props.f64_or("exponential.percentile", 95.0).map_err(perr)?;
                let frac = props
                    .f64_or("exponential.frac", 0.857_142_857_1)
                    .map_err(perr)?;
                KeyChooser::Exponential(Exponential::new(percentile, record_count as f64 * frac))
            }
            "sequential" => KeyChooser::Sequential(Sequential::new(
                insert_start,
                insert_start + insert_count - 1,
            )),
            "zipfian" => {
                // Room for the records the run will insert, so inserts do not
                // shift which records are popular (YCSB's 2x fudge factor).
                let insert_proportion = props.f64_or("insertproportion", 0.0).map_err(perr)?;
                let expected_new_keys = (operation_count as f64 * insert_proportion * 2.0) as i64;
                KeyChooser::Zipfian(ScrambledZipfian::new(
                    insert_start,
                    insert_start + insert_count + expected_new_keys,
                ))
            }
            "latest" => KeyChooser::Latest(SkewedLatest::new(insert_sequence.clone())),
            "hotspot" => {
                let hot_set = props.f64_or("hotspotdatafraction", 0.2).map_err(perr)?;
                let hot_opn = props.f64_or("hotspotopnfraction", 0.8).map_err(perr)?;
                KeyChooser::Hotspot(Hotspot::new(
                    insert_start,
                    insert_start + insert_count - 1,
                    hot_set,
                    hot_opn,
                ))
            }
            other => return Err(format!("unknown requestdistribution {other:?}")),
        };

        let min_scan = props.i64_or("minscanlength", 1).map_err(perr)?;
        let max_scan = props.i64_or("maxscanlength", 1000).map_err(perr)?;
        let scan_length = match props.str_or("scanlengthdistribution", "uniform").as_str() {
            "uniform" => IntGen::Uniform(UniformLong::new(min_scan, max_scan)),
            "zipfian" => IntGen::Zipfian(Zipfian::new(min_scan, max_scan)),
            other => return Err(format!("scanlengthdistribution {other:?} is not allowed")),
        };

        Ok(Workload {
            record_count,
            insert_start,
            insert_count,
            zero_padding,
            ordered_inserts,
            read_all_fields: props.bool_or("readallfields", true),
            read_all_fields_by_name: props.bool_or("readallfieldsbyname", false),
            write_all_fields: props.bool_or("writeallfields", false),
            request_distribution,
            operation_count,
            load_count,
            insertion_retry_limit: props
                .u64_or("core_workload_insertion_retry_limit", 0)
                .map_err(perr)? as u32,
            insertion_retry_interval_secs: props
                .f64_or("core_workload_insertion_retry_interval", 3.0)
                .map_err(perr)?,
            field_length,
            key_sequence: Counter::new(insert_start),
            op_chooser,
            key_chooser,
            field_chooser: UniformLong::new(0, field_count - 1),
            insert_sequence,
            scan_length,
            schema,
        })
    }

    /// The operations a phase performs (0 = unbounded).
    pub fn op_count(&self, phase: Phase) -> u64 {
        match phase {
            Phase::Load => self.load_count,
            Phase::Run => self.operation_count,
        }
    }

    /// YCSB's `nextKeynum`: a record number that is known to exist.
    pub fn next_keynum(&self, rng: &mut BenchRng) -> i64 {
        let last = self.insert_sequence.last_value();
        match &self.key_chooser {
            KeyChooser::Exponential(e) => loop {
                let k = last - (e.next(rng) as i32) as i64;
                if k >= 0 {
                    return k;
                }
            },
            chooser => {
                // Bounded so an impossible configuration cannot spin forever.
                for _ in 0..1_000_000 {
                    let k = match chooser {
                        KeyChooser::Uniform(g) => g.next(rng),
                        KeyChooser::Zipfian(g) => g.next(rng),
                        KeyChooser::Hotspot(g) => g.next(rng),
                        KeyChooser::Sequential(g) => g.next(),
                        KeyChooser::Latest(g) => g.next(rng),
                        KeyChooser::Exponential(_) => 0,
                    };
                    if k <= self.insert_sequence.last_value() {
                        return k;
                    }
                }
                self.insert_sequence.last_value().max(0)
            }
        }
    }

    pub fn choose_op(&self, rng: &mut BenchRng) -> Option<TxOp> {
        self.op_chooser.next(rng)
    }

    fn fill_value(&self, rng: &mut BenchRng, out: &mut String) {
        let len = self.field_length.next(rng).max(0) as usize;
        random_printable(rng, len, out);
    }

    /// Values for every field (inserts, `writeallfields=true`).
    pub fn build_values(&self, rng: &mut BenchRng, out: &mut Values) {
        out.clear();
        for i in 0..self.schema.field_names.len() {
            let mut v = String::new();
            self.fill_value(rng, &mut v);
            out.push((i, v));
        }
    }

    /// A value for one randomly chosen field (single-field updates).
    pub fn build_single_value(&self, rng: &mut BenchRng, out: &mut Values) {
        out.clear();
        let i = self.field_chooser.next(rng) as usize;
        let mut v = String::new();
        self.fill_value(rng, &mut v);
        out.push((i, v));
    }

    fn read_fields(&self, rng: &mut BenchRng) -> FieldSel {
        if self.read_all_fields {
            FieldSel::All
        } else {
            FieldSel::One(self.field_chooser.next(rng) as usize)
        }
    }

    fn key(&self, st: &mut ClientState, keynum: i64) {
        build_key_name_into(&mut st.key, keynum, self.zero_padding, self.ordered_inserts);
    }

    /// One load-phase insert (YCSB's `doInsert`), retried up to
    /// `core_workload_insertion_retry_limit` times.
    pub async fn do_insert(
        &self,
        db: &mut DbClient,
        st: &mut ClientState,
        t: &OpTiming,
        shard: &Mutex<Snapshot>,
    ) {
        let keynum = self.key_sequence.next();
        self.key(st, keynum);
        self.build_values(&mut st.rng, &mut st.values);
        let mut attempt = 0;
        loop {
            let status = measured(db, t, shard, OpKind::Insert, |db| {
                db.insert(&st.key, &st.values)
            })
            .await;
            if status.is_ok() || attempt >= self.insertion_retry_limit {
                break;
            }
            attempt += 1;
            let jitter = 0.8 + 0.4 * st.rng.gen::<f64>();
            let pause =
                std::time::Duration::from_secs_f64(self.insertion_retry_interval_secs * jitter);
            tokio::time::sleep(pause).await;
        }
    }

    /// One run-phase transaction (YCSB's `doTransaction`). Returns false if
    /// no operation has a positive proportion.
    pub async fn do_transaction(
        &self,
        db: &mut DbClient,
        st: &mut ClientState,
        t: &OpTiming,
        shard: &Mutex<Snapshot>,
    ) -> bool {
        let Some(op) = self.choose_op(&mut st.rng) else {
            return false;
        };
        match op {
            TxOp::Read => {
                let keynum = self.next_keynum(&mut st.rng);
                self.key(st, keynum);
                let fields = self.read_fields(&mut st.rng);
                measured(db, t, shard, OpKind::Read, |db| db.read(&st.key, fields)).await;
            }
            TxOp::Update => {
                let keynum = self.next_keynum(&mut st.rng);
                self.key(st, keynum);
                self.update_values(st);
                measured(db, t, shard, OpKind::Update, |db| {
                    db.update(&st.key, &st.values)
                })
                .await;
            }
            TxOp::Insert => {
                let keynum = self.insert_sequence.next();
                self.key(st, keynum);
                self.build_values(&mut st.rng, &mut st.values);
                measured(db, t, shard, OpKind::Insert, |db| {
                    db.insert(&st.key, &st.values)
                })
                .await;
                // Even a failed insert is acknowledged, as in YCSB, so the
                // visible record range keeps advancing.
                self.insert_sequence.acknowledge(keynum);
            }
            TxOp::Scan => {
                let keynum = self.next_keynum(&mut st.rng);
                self.key(st, keynum);
                let len = self.scan_length.next(&mut st.rng).max(0) as usize;
                let fields = self.read_fields(&mut st.rng);
                measured(db, t, shard, OpKind::Scan, |db| {
                    db.scan(&st.key, len, fields)
                })
                .await;
            }
            TxOp::ReadModifyWrite => {
                let keynum = self.next_keynum(&mut st.rng);
                self.key(st, keynum);
                let fields = self.read_fields(&mut st.rng);
                self.update_values(st);
                let start = Instant::now();
                let mut status =
                    measured(db, t, shard, OpKind::Read, |db| db.read(&st.key, fields)).await;
                if status.is_ok() {
                    status = measured(db, t, shard, OpKind::Update, |db| {
                        db.update(&st.key, &st.values)
                    })
                    .await;
                }
                t.record(
                    shard,
                    OpKind::ReadModifyWrite,
                    status,
                    start,
                    Instant::now(),
                );
            }
        }
        true
    }

    fn update_values(&self, st: &mut ClientState) {
        if self.write_all_fields {
            self.build_values(&mut st.rng, &mut st.values);
        } else {
            self.build_single_value(&mut st.rng, &mut st.values);
        }
    }
}

/// Runs one DB call and records it under `kind`, as YCSB's `DBWrapper` does
/// for every call (so a read-modify-write also counts a READ and an UPDATE).
async fn measured<'a, F, Fut>(
    db: &'a mut DbClient,
    t: &OpTiming,
    shard: &Mutex<Snapshot>,
    kind: OpKind,
    call: F,
) -> Status
where
    F: FnOnce(&'a mut DbClient) -> Fut,
    Fut: std::future::Future<Output = Status> + 'a,
{
    let start = Instant::now();
    let status = call(db).await;
    t.record(shard, kind, status, start, Instant::now());
    status
}

/// Per-client mutable state, reused across operations.
pub struct ClientState {
    pub rng: BenchRng,
    pub key: String,
    pub values: Values,
}

impl ClientState {
    pub fn new(seed: u64) -> ClientState {
        ClientState {
            rng: BenchRng::seed_from_u64(seed),
            key: String::with_capacity(32),
            values: Vec::new(),
        }
    }
}

/// Fills `out` with `len` random printable ASCII characters (field values
/// are text so every target can store them unchanged).
pub fn random_printable(rng: &mut BenchRng, len: usize, out: &mut String) {
    out.clear();
    out.reserve(len);
    let mut remaining = len;
    while remaining > 0 {
        let word = rng.next_u64();
        for b in word.to_le_bytes().iter().take(remaining) {
            out.push(char::from(b' ' + (b % 95)));
        }
        remaining = remaining.saturating_sub(8);
    }
}

fn field_length_gen(props: &Props) -> Result<IntGen, String> {
    let dist = props.str_or("fieldlengthdistribution", "constant");
    let max = props.i64_or("fieldlength", 100).map_err(perr)?;
    let min = props.i64_or("minfieldlength", 1).map_err(perr)?;
    Ok(match dist.as_str() {
        "constant" => IntGen::Constant(max),
        "uniform" => IntGen::Uniform(UniformLong::new(min, max)),
        "zipfian" => IntGen::Zipfian(Zipfian::new(min, max)),
        "histogram" => {
            let file = props.str_or("fieldlengthhistogram", "hist.txt");
            IntGen::Histogram(HistogramGen::from_file(Path::new(&file))?)
        }
        other => return Err(format!("unknown fieldlengthdistribution {other:?}")),
    })
}

fn operation_chooser(props: &Props) -> Result<Discrete<TxOp>, String> {
    let mut d = Discrete::new();
    let entries = [
        ("readproportion", 0.95, TxOp::Read),
        ("updateproportion", 0.05, TxOp::Update),
        ("insertproportion", 0.0, TxOp::Insert),
        ("scanproportion", 0.0, TxOp::Scan),
        ("readmodifywriteproportion", 0.0, TxOp::ReadModifyWrite),
    ];
    for (name, default, op) in entries {
        let w = props.f64_or(name, default).map_err(perr)?;
        if w > 0.0 {
            d.add(w, op);
        }
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printable_values_have_requested_length() {
        let mut rng = BenchRng::seed_from_u64(1);
        let mut s = String::new();
        for len in [0, 1, 7, 8, 9, 100] {
            random_printable(&mut rng, len, &mut s);
            assert_eq!(s.len(), len);
            assert!(s.bytes().all(|b| (b' '..=b'~').contains(&b)));
        }
    }

    #[test]
    fn defaults_follow_ycsb() {
        let mut p = Props::new();
        p.set("recordcount", "1000");
        let w = Workload::from_props(&p).expect("workload");
        assert_eq!(w.schema.field_names.len(), 10);
        assert_eq!(w.schema.field_names[3], "field3");
        assert_eq!(w.schema.table, "usertable");
        assert_eq!(w.request_distribution, "uniform");
        assert!(w.read_all_fields && !w.write_all_fields);
        assert_eq!(w.load_count, 1000);
        assert_eq!(w.insert_sequence.last_value(), 999);
    }
}
