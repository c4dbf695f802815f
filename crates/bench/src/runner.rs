//! The YCSB client driver: runs a load or run phase with `-threads` client
//! connections and produces the figures for the report.
//!
//! Semantics follow YCSB's `Client`: all clients connect before the clock
//! starts; the operation budget is shared (a client stops when the run's
//! total is reached); `-target` paces each client open-loop at
//! `target / threads` operations per second with a random initial offset,
//! and then latency is charged from each request's *intended* start time so
//! that a stalled server is not hidden by the client waiting for it
//! (coordinated omission). Operations completing inside the warm-up window
//! are executed but not measured.

use crate::db::{DbTarget, Status, Threading};
use crate::exec::{self, ClientFuture, MakeClient};
use crate::measure::{Clock, OpKind, OpTiming, Snapshot, Stats};
use crate::pace::Pacer;
use crate::props::Props;
use crate::report::{status_line, YcsbReport};
use crate::workload::{ClientState, Phase, Workload};
use parking_lot::Mutex;
use rand::Rng;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};
use tokio::sync::watch;

/// Distinct error messages kept for the report.
const MAX_ERROR_SAMPLES: usize = 5;

/// A parsed `durakv bench ycsb` invocation.
#[derive(Clone, Debug)]
pub struct YcsbOptions {
    pub phase: Phase,
    pub db: String,
    pub props: Props,
    pub threads: usize,
    pub target_ops_per_sec: Option<f64>,
    pub status: bool,
    pub label: String,
}

/// Progress figures handed to a sweep's progress display.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub done_ops: u64,
    pub total_ops: u64,
    pub elapsed: Duration,
    pub current_ops_per_sec: f64,
}

pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Sync);

/// Settings derived from properties that are not part of CoreWorkload.
#[derive(Clone, Debug)]
struct RunSettings {
    status_interval_ms: u64,
    warmup_secs: f64,
    max_execution_secs: u64,
    runtime_threads: usize,
    seed: u64,
}

impl RunSettings {
    fn from_props(p: &Props) -> Result<RunSettings, String> {
        let e = |e: crate::props::PropError| e.to_string();
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Ok(RunSettings {
            status_interval_ms: p.u64_or("status.interval", 10).map_err(e)?.max(1) * 1000,
            warmup_secs: p.f64_or("warmup.seconds", 0.0).map_err(e)?.max(0.0),
            max_execution_secs: p.u64_or("maxexecutiontime", 0).map_err(e)?,
            runtime_threads: p.u64_or("runtime.threads", cores as u64).map_err(e)?.max(1) as usize,
            seed: match p.get("seed") {
                Some(_) => p.u64_or("seed", 0).map_err(e)?,
                None => SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos() as u64),
            },
        })
    }
}

#[derive(Clone, Copy, Debug)]
enum StartSignal {
    Pending,
    Go(Instant),
    Abort,
}

/// State shared by the driver and all clients of one run.
struct Shared {
    workload: Arc<Workload>,
    target: Arc<DbTarget>,
    phase: Phase,
    stats: Stats,
    op_budget: u64,
    claimed: AtomicU64,
    stop: AtomicBool,
    connected: AtomicUsize,
    connect_failed: AtomicUsize,
    start: watch::Receiver<StartSignal>,
    /// Per-client pacing interval under `-target`.
    pacing: Option<Duration>,
    warmup: Duration,
    seed: u64,
    /// Latest completion, in nanoseconds after the start.
    last_end_ns: AtomicU64,
    errors: Mutex<BTreeSet<String>>,
}

impl Shared {
    fn note_error(&self, msg: String) {
        let mut e = self.errors.lock();
        if e.len() < MAX_ERROR_SAMPLES {
            e.insert(msg);
        }
    }
}

/// Runs one phase and returns its report (also printing `-s` status lines
/// to stderr while it runs).
pub fn run_ycsb(
    opts: &YcsbOptions,
    progress: Option<ProgressFn<'_>>,
) -> Result<YcsbReport, String> {
    let settings = RunSettings::from_props(&opts.props)?;
    let schema = Arc::new(crate::db::Schema::from_props(&opts.props)?);
    // Batching holds a transaction open across operations; in a mixed run
    // that would block other clients' writes, so it is a load-phase setting.
    let mut db_props = opts.props.clone();
    let mut notes = Vec::new();
    if opts.phase == Phase::Run && db_props.u64_or("db.batchsize", 1).unwrap_or(1) > 1 {
        db_props.set("db.batchsize", "1");
        notes.push(
            "db.batchsize applies to the load phase only; run-phase inserts commit one by one"
                .to_string(),
        );
    }
    let target = Arc::new(DbTarget::new(&opts.db, &db_props, schema)?);
    // An in-process store at durability "none" keeps nothing between
    // processes, so a separate load run cannot feed it: load here first.
    if opts.phase == Phase::Run
        && opts.db == "embedded"
        && opts.props.bool_or("embedded.preload", false)
    {
        let mut load = opts.clone();
        load.phase = Phase::Load;
        load.status = false;
        let mut load_settings = settings.clone();
        load_settings.warmup_secs = 0.0;
        load_settings.max_execution_secs = 0;
        let r = run_phase(&load, &target, &load_settings, None, Vec::new())?;
        notes.push(format!(
            "embedded.preload: {} records loaded in this process before the run ({:.0} ops/s, not measured below)",
            r.operations, r.throughput_ops_per_sec
        ));
    }
    let report = run_phase(opts, &target, &settings, progress, notes);
    let finished = target.finish();
    let report = report?;
    finished?;
    Ok(report)
}

/// One phase against an already configured target.
fn run_phase(
    opts: &YcsbOptions,
    target: &Arc<DbTarget>,
    settings: &RunSettings,
    progress: Option<ProgressFn<'_>>,
    extra_notes: Vec<String>,
) -> Result<YcsbReport, String> {
    let workload = Arc::new(Workload::from_props(&opts.props)?);
    let threads = opts.threads.max(1);
    let op_budget = workload.op_count(opts.phase);
    if op_budget == 0 && settings.max_execution_secs == 0 {
        return Err(match opts.phase {
            Phase::Run => "set operationcount (or maxexecutiontime) for the run phase".into(),
            Phase::Load => "set recordcount (or insertcount) for the load phase".into(),
        });
    }

    let mut info = block_on_small(target.prepare())??;
    info.notes.extend(extra_notes);

    let os_threads = match target.threading() {
        Threading::Async => settings.runtime_threads.min(threads),
        Threading::ThreadPerClient => threads,
    };
    let pacing = match opts.target_ops_per_sec {
        Some(t) if t > 0.0 => Some(Duration::from_secs_f64(threads as f64 / t)),
        _ => None,
    };
    let (start_tx, start_rx) = watch::channel(StartSignal::Pending);
    let shared = Arc::new(Shared {
        workload,
        target: target.clone(),
        phase: opts.phase,
        stats: Stats::new(os_threads),
        op_budget,
        claimed: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        connected: AtomicUsize::new(0),
        connect_failed: AtomicUsize::new(0),
        start: start_rx,
        pacing,
        warmup: Duration::from_secs_f64(settings.warmup_secs),
        seed: settings.seed,
        last_end_ns: AtomicU64::new(0),
        errors: Mutex::new(BTreeSet::new()),
    });

    let make: MakeClient = {
        let shared = shared.clone();
        Arc::new(move |client, thread| -> ClientFuture {
            Box::pin(client_loop(shared.clone(), client, thread))
        })
    };
    let mut pool = exec::spawn(os_threads, threads, "ycsb", make)?;

    // All clients connect before the clock starts, as YCSB initialises
    // every DB instance before starting its threads.
    loop {
        let connected = shared.connected.load(Ordering::Acquire);
        let failed = shared.connect_failed.load(Ordering::Acquire);
        if failed > 0 || connected + failed >= threads {
            break;
        }
        if pool.wait_until(Instant::now() + Duration::from_millis(5)) {
            break;
        }
    }
    if shared.connect_failed.load(Ordering::Acquire) > 0
        || shared.connected.load(Ordering::Acquire) < threads
    {
        let _ = start_tx.send(StartSignal::Abort);
        pool.wait_until(Instant::now() + Duration::from_secs(30));
        let _ = pool.join();
        let errs: Vec<String> = shared.errors.lock().iter().cloned().collect();
        return Err(format!("client initialisation failed: {}", errs.join("; ")));
    }

    let start = Instant::now();
    let start_wall = SystemTime::now();
    let _ = start_tx.send(StartSignal::Go(start));

    let mut total = Snapshot::default();
    // What the next `-s` line covers; the drain tick can be shorter than the
    // status interval when a progress display also wants updates.
    let mut status_acc = Snapshot::default();
    let tick = if progress.is_some() {
        Duration::from_millis(settings.status_interval_ms.min(1000))
    } else {
        Duration::from_millis(settings.status_interval_ms)
    };
    let status_every = Duration::from_millis(settings.status_interval_ms);
    let mut next_tick = start + tick;
    let mut next_status = start + status_every;
    let mut last_status_at = start;
    let mut last_status_ops = 0u64;
    let mut last_tick_at = start;
    let mut last_tick_ops = 0u64;
    let deadline = (settings.max_execution_secs > 0)
        .then(|| start + Duration::from_secs(settings.max_execution_secs));
    loop {
        let wake = deadline.map_or(next_tick, |d| d.min(next_tick));
        let finished = pool.wait_until(wake);
        let now = Instant::now();
        if let Some(d) = deadline {
            if now >= d {
                shared.stop.store(true, Ordering::Release);
            }
        }
        if finished {
            break;
        }
        if now >= next_tick {
            let interval = shared.stats.drain();
            total.merge(interval.clone());
            let done = total.done_ops + total.warmup_ops;
            if let Some(p) = progress {
                let secs = now.duration_since(last_tick_at).as_secs_f64().max(1e-9);
                p(Progress {
                    done_ops: done,
                    total_ops: op_budget,
                    elapsed: now.duration_since(start),
                    current_ops_per_sec: (done - last_tick_ops) as f64 / secs,
                });
                last_tick_at = now;
                last_tick_ops = done;
            }
            if opts.status {
                status_acc.merge(interval);
            }
            if opts.status && now >= next_status {
                let acc = std::mem::take(&mut status_acc);
                eprintln!(
                    "{}",
                    status_line(
                        &opts.label,
                        SystemTime::now(),
                        now.duration_since(start),
                        done,
                        done.saturating_sub(last_status_ops),
                        now.duration_since(last_status_at),
                        op_budget.saturating_sub(done),
                        &acc,
                    )
                );
                last_status_at = now;
                last_status_ops = done;
                next_status += status_every;
            }
            next_tick += tick;
        }
    }
    let joined = pool.join();
    let final_interval = shared.stats.drain();
    total.merge(final_interval.clone());
    if opts.status {
        let mut acc = std::mem::take(&mut status_acc);
        acc.merge(final_interval);
        let now = Instant::now();
        let done = total.done_ops + total.warmup_ops;
        eprintln!(
            "{}",
            status_line(
                &opts.label,
                SystemTime::now(),
                now.duration_since(start),
                done,
                done.saturating_sub(last_status_ops),
                now.duration_since(last_status_at),
                0,
                &acc,
            )
        );
    }
    joined?;

    let end = start + Duration::from_nanos(shared.last_end_ns.load(Ordering::Acquire));
    let measure_start = start + shared.warmup;
    let runtime = end.saturating_duration_since(measure_start);
    let errors: Vec<String> = shared.errors.lock().iter().cloned().collect();
    Ok(YcsbReport::build(crate::report::YcsbReportInput {
        opts,
        snapshot: &total,
        runtime,
        start_wall,
        durability: info.durability,
        target_notes: info.notes,
        errors,
        warmup_secs: settings.warmup_secs,
        corrected: pacing.is_some(),
        os_threads,
        seed: settings.seed,
        max_execution_secs: settings.max_execution_secs,
    }))
}

/// Runs a future on a throwaway single-threaded runtime (setup work).
pub fn block_on_small<F: std::future::Future>(f: F) -> Result<F::Output, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))?;
    Ok(rt.block_on(f))
}

async fn client_loop(shared: Arc<Shared>, client: usize, thread: usize) {
    let mut db = match shared.target.connect(client).await {
        Ok(db) => db,
        Err(e) => {
            shared.note_error(e);
            shared.connect_failed.fetch_add(1, Ordering::AcqRel);
            return;
        }
    };
    shared.connected.fetch_add(1, Ordering::AcqRel);
    let mut rx = shared.start.clone();
    let start = match rx.wait_for(|s| !matches!(s, StartSignal::Pending)).await {
        Ok(s) => match *s {
            StartSignal::Go(at) => at,
            _ => return,
        },
        Err(_) => return,
    };
    let shard = shared.stats.shard(thread);
    let clock = Clock {
        from_intended: shared.pacing.is_some(),
        measure_from: start + shared.warmup,
    };
    let seed = shared
        .seed
        .wrapping_add((client as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut st = ClientState::new(seed);
    // A random initial offset spreads the clients' schedules so they do not
    // all fire at the same instants (YCSB does the same).
    let offset = shared
        .pacing
        .map(|p| Duration::from_nanos(st.rng.gen_range(0..p.as_nanos().max(1) as u64)));
    let mut pacer = shared.pacing.map(|_| Pacer::new());
    let mut issued: u32 = 0;
    loop {
        if shared.stop.load(Ordering::Acquire) {
            break;
        }
        if shared.op_budget > 0 && shared.claimed.fetch_add(1, Ordering::AcqRel) >= shared.op_budget
        {
            break;
        }
        let intended = match (shared.pacing, offset, pacer.as_mut()) {
            (Some(p), Some(off), Some(pacer)) => {
                let at = start + off + p * issued;
                pacer.sleep_until(at).await;
                at
            }
            _ => Instant::now(),
        };
        issued = issued.saturating_add(1);
        let timing = OpTiming { intended, clock };
        match shared.phase {
            Phase::Load => {
                shared
                    .workload
                    .do_insert(&mut db, &mut st, &timing, shard)
                    .await
            }
            Phase::Run => {
                if !shared
                    .workload
                    .do_transaction(&mut db, &mut st, &timing, shard)
                    .await
                {
                    break;
                }
            }
        }
        let end = Instant::now();
        timing.finish(shard, end);
        let lost = db.take_lost_batched_rows();
        timing.record_status_only(shard, OpKind::Insert, Status::Error, lost);
        let ns = end.saturating_duration_since(start).as_nanos() as u64;
        shared.last_end_ns.fetch_max(ns, Ordering::AcqRel);
    }
    let t0 = Instant::now();
    let status = db.cleanup().await;
    let t1 = Instant::now();
    let cleanup_timing = OpTiming {
        intended: t0,
        clock: Clock {
            from_intended: false,
            measure_from: start,
        },
    };
    cleanup_timing.record(shard, OpKind::Cleanup, status, t0, t1);
    let lost = db.take_lost_batched_rows();
    cleanup_timing.record_status_only(shard, OpKind::Insert, Status::Error, lost);
    if let Some(e) = db.last_error() {
        shared.note_error(e);
    }
}
