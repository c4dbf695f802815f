//! Group commit: many appenders, a few writer threads per stream, one fsync
//! per batch, several batches of a stream in flight, and the durable
//! watermark across streams.
//!
//! Every write of the server ends here, so this is the hot path. An
//! appender takes its stream's mutex, encodes its record straight into the
//! stream's pending buffer, takes the next LSN from the one global counter
//! (still under the mutex, so LSNs increase within a stream), and leaves. It
//! never does I/O.
//!
//! Each stream has `syncs_in_flight` writer threads. A writer not busy with
//! an fsync seals the pending buffer into a batch (one at a time, so that
//! batches reach the sink in seal order), writes it, and only then
//! fdatasyncs; another writer can seal and write the records that arrived
//! meanwhile while that fsync runs. A record that arrives during an old
//! enough fsync therefore starts its own instead of waiting for the running
//! one to finish first (which would cost it two fsync periods); during a
//! young one on a fast disk, the writer of that fsync seals it as soon as it
//! returns, which costs no thread wake-up. Batches complete
//! in seal order: a stream's watermark only passes batches whose own fsync
//! and every earlier one succeeded. Each writer syncs through its own file
//! description (see `BatchSink`), so a write-back error is reported to every
//! writer whose batch it may concern.
//!
//! A `Full` append makes a writer flush at once; `Delayed` appends wait up
//! to `delayed_flush_ms` or until `delayed_flush_bytes` are pending.
//!
//! Each stream publishes a watermark `W_s`: every LSN <= `W_s` that belongs to
//! stream `s` is durable. The WAL's durable LSN is the minimum over streams.
//! A stream's acknowledged LSN `A_s` is `W_s`, held below the first sealed
//! batch whose dependency (`depends_on`) the durable LSN does not cover yet:
//! a reply to a write of stream `s` waits for `A_s`, not for every stream.
//! After a successful batch `W_s` becomes the global LSN observed under the
//! mutex when the batch was sealed (or the current one if nothing is pending
//! or in flight by the time the fsync returns), which is how an idle stream
//! stops holding the minimum back. `docs/durability.md` has the proof.
//!
//! A failed write or fsync is never retried: the stream's watermark freezes,
//! the WAL enters a failed state, and appends are refused until restart.
//!
//! The I/O itself is behind [`BatchSink`], so this module is tested here
//! with an in-memory sink and benchmarked in `benches/group_commit.rs`.

use super::barging::{self, Condvar, MutexGuard};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::io;
use std::sync::atomic::{
    AtomicBool, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::error::WalError;
use super::format::{
    align_up, seal_record, RecordHeader, BATCH_HEADER_BYTES, BATCH_TRAILER, PAGE_BYTES,
    RECORD_HEADER_BYTES,
};
use crate::durability::Durability;

/// The shortest time between two batches of a stream whose fsyncs are
/// slow: below it a batch would carry a record or two, and the machine
/// would spend more CPU on fsyncs than the records gain.
const OVERLAP_AGE_MIN_US: u64 = 50;

/// Batches of a stream in flight at once while the CPU is scarce
/// (`Core::set_cpu_scarce`).
const SCARCE_IN_FLIGHT: usize = 2;

/// Capacity a pending buffer starts with.
const BUFFER_INITIAL_BYTES: usize = 64 * 1024;
/// A buffer that grew past this for one large batch shrinks back to it
/// afterwards. Each stream has one pending buffer, one for its leader and one per
/// writer thread, so keeping every one at 8 MiB (as before 2026-11-29)
/// held tens of MiB after a burst of large values, counted in
/// `used_memory` against `maxmemory`. Batches of small writes stay well
/// under this (800 pipelined 128-byte SETs are about 150 KiB), and a batch
/// larger spends far longer in its write and fsync than in allocating its
/// buffer again.
const BUFFER_KEEP_BYTES: usize = 256 * 1024;
/// What the log's batch buffers hold past `BUFFER_KEEP_BYTES` each
/// ([`buffered_bytes`]).
static GROWN: AtomicUsize = AtomicUsize::new(0);

/// Bytes the log's batch buffers hold past what each keeps between
/// batches (`BUFFER_KEEP_BYTES`): what a burst of writes made them grow
/// to for a moment, given back once written. Redis likewise leaves its
/// AOF buffer out of what `maxmemory` counts; counted, a burst of large
/// writes evicted keys to make room for the log's passing copy of them.
/// What is kept is counted: left out too, it put `used_memory` a megabyte
/// above what eviction saw for good, and a limit set from `used_memory`
/// (as Redis's unit/maxmemory sets it) was crossed without evicting.
pub fn buffered_bytes() -> usize {
    GROWN.load(Relaxed)
}

/// Notes a batch buffer's capacity change from `before` to `after`.
fn grown(before: usize, after: usize) {
    let (before, after) = (
        before.saturating_sub(BUFFER_KEEP_BYTES),
        after.saturating_sub(BUFFER_KEEP_BYTES),
    );
    if after > before {
        GROWN.fetch_add(after - before, Relaxed);
    } else if before > after {
        // Saturating: a count gone wrong must not wrap into "everything
        // is the log's".
        let _ = GROWN.fetch_update(Relaxed, Relaxed, |g| Some(g.saturating_sub(before - after)));
    }
}

/// A writer thread of `sc` waits on `cv` until woken or until `until`.
fn park_on<'a>(
    sc: &StreamCore,
    cv: &Condvar,
    mut st: MutexGuard<'a, StreamState>,
    until: Option<Instant>,
) -> MutexGuard<'a, StreamState> {
    st.writers_waiting += 1;
    let mut st = match until {
        Some(at) => cv.wait_until(st, at),
        None => cv.wait(st),
    };
    st.writers_waiting -= 1;
    sc.counters.writer_wakeups.fetch_add(1, Relaxed);
    st
}

/// Writer thread `slot` of `sc` waits on its condition variable, until
/// woken or until `until`. Whatever woke it, it looks at the whole stream
/// next, so a wake sent for any writer is answered (`Core::writer_to_wake`).
/// Idle writers are woken last parked first: on a fast disk one writer
/// then does nearly every batch, its stack and the stream's lines still in
/// its core's cache. Woken in turn (a condition variable's order), six
/// writers took 5% more CPU per `full` SET than one alone, at -P 16 and
/// at -P 1.
fn park_writer<'a>(
    sc: &StreamCore,
    mut st: MutexGuard<'a, StreamState>,
    slot: usize,
    until: Option<Instant>,
) -> MutexGuard<'a, StreamState> {
    st.idle_writers.push(slot);
    let mut st = park_on(sc, &sc.writer_cvs[slot], st, until);
    // Still listed if it woke by itself (its timer, a spurious wake-up, a
    // shutdown's notify_all); a waker takes its slot off the list.
    if let Some(at) = st.idle_writers.iter().rposition(|&w| w == slot) {
        st.idle_writers.remove(at);
    }
    st.wake_sent = false;
    st
}

/// The one writer of `sc` gathering its pending batch waits on `fill_cv`
/// until `until` or until an appender finds the batch full enough: that
/// wake reaches it and not a writer with nothing to gather.
fn park_filler<'a>(
    sc: &StreamCore,
    mut st: MutexGuard<'a, StreamState>,
    until: Instant,
) -> MutexGuard<'a, StreamState> {
    st.filling += 1;
    let mut st = park_on(sc, &sc.fill_cv, st, Some(until));
    st.filling -= 1;
    st
}

/// Longest a bandwidth-bound stream's short batch waits to fill its page.
const FILL_WAIT_MAX: Duration = Duration::from_millis(2);
/// Longest a fast disk's batch waits for writers outside every batch
/// (`CommitConfig::gather_wait`): 250 µs gave smaller batches and less,
/// 1 ms no more than this (redis-benchmark -P 16, memtier 4 × 50).
pub const GATHER_WAIT: Duration = Duration::from_micros(500);
/// Length of the windows over which `WaitingPeak` keeps its maximum.
const PEAK_WINDOW: Duration = Duration::from_millis(50);

/// The most records waiting to become durable seen lately: about how many
/// writers there are, when each waits for its write before the next (every
/// request-reply client does). The largest count of the current window and
/// of the one before; races between updates only blur an estimate.
struct WaitingPeak {
    started: Instant,
    window: AtomicU64,
    current: AtomicU64,
    previous: AtomicU64,
}

impl WaitingPeak {
    fn new() -> WaitingPeak {
        WaitingPeak {
            started: Instant::now(),
            window: AtomicU64::new(0),
            current: AtomicU64::new(0),
            previous: AtomicU64::new(0),
        }
    }

    /// Notes `waiting` now; returns the peak.
    fn note(&self, waiting: u64, now: Instant) -> u64 {
        let w = (now.saturating_duration_since(self.started).as_nanos() / PEAK_WINDOW.as_nanos())
            as u64;
        let seen = self.window.load(Relaxed);
        if w != seen
            && self
                .window
                .compare_exchange(seen, w, Relaxed, Relaxed)
                .is_ok()
        {
            let last = self.current.swap(0, Relaxed);
            self.previous
                .store(if w == seen + 1 { last } else { 0 }, Relaxed);
        }
        let current = self.current.fetch_max(waiting, Relaxed).max(waiting);
        current.max(self.previous.load(Relaxed))
    }
}

/// How long a bandwidth-bound stream's pending batch waits for more records,
/// from the end of the stream's last fsync (which took `last_sync_us`): the
/// batch takes `used` bytes sealed, its records about `typical` bytes each,
/// and about `coming` writers per stream are outside every batch. None:
/// write it now.
///
/// A disk writes whole pages, so only a last page with room for another
/// such record is worth waiting for. A batch's own writers wait for it and
/// cannot fill it; writers outside every batch can. With twice as many of
/// them as the page has room for, it waits up to `FILL_WAIT_MAX`: on four
/// volumes capped at 8 MB/s, 40 and 200 connections wrote 15-29% more
/// (bench/durable.sh volumes). With fewer, a batch on its first page still
/// waits half an fsync: 4 to 8 connections measured 10% faster with that
/// wait than with none, and slower with the long one.
fn fill_wait(used: u64, typical: u64, coming: u64, last_sync_us: u64) -> Option<Duration> {
    let room = (PAGE_BYTES - used % PAGE_BYTES) % PAGE_BYTES;
    if room < typical {
        None
    } else if coming >= 2 * (room / typical) {
        Some(FILL_WAIT_MAX)
    } else if used <= PAGE_BYTES {
        Some(Duration::from_micros(last_sync_us / 2).min(FILL_WAIT_MAX))
    } else {
        None
    }
}

/// Whether a fast disk's pending batch of `records` waits for more (up to
/// `CommitConfig::gather_wait` from the end of the stream's last fsync):
/// about `writers` write to the stream lately, `coming` of them outside
/// every batch, and `min_writers` is `CommitConfig::gather_writers`.
///
/// An fsync costs the machine about the same CPU (about 25 µs here: the
/// journal commit, the block layer, the device's interrupt) whatever it
/// carries. When the cores are the bottleneck, every record a batch leaves
/// to the next fsync makes the commit dearer for everyone, so a batch waits
/// while as many writers as it holds are still to come; an appender that
/// tips the balance wakes its writer. Few writers mean the disk's latency,
/// not the cores, sets the pace, and there waiting only slows them down:
/// 4 and 8 connections measured 5-25% slower with the wait and 16 the
/// same, while from 32 connections, and with pipelines, it paid
/// (docs/durability.md, "Gather writers on a fast disk").
fn gathers(records: u64, writers: u64, coming: u64, min_writers: u64) -> bool {
    min_writers > 0 && writers >= min_writers && coming >= records.max(1)
}

thread_local! {
    /// The core whose `Full` appends this thread leaves for its caller to
    /// make durable (`defer_syncs`), as an address; 0: none.
    static DEFERRING: Cell<usize> = const { Cell::new(0) };
    /// Streams (bit `s`) an append left urgent for this thread's caller.
    static OWED: Cell<u64> = const { Cell::new(0) };
}

/// Streams whose urgent records no writer thread was woken for: the caller
/// of [`Core::defer_syncs`] must [`Core::lead`] or [`Core::hand_off`] each.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Owed(pub u64);

impl Owed {
    pub fn streams(self) -> impl Iterator<Item = usize> {
        (0..64).filter(move |s| self.0 & (1 << s) != 0)
    }
}

/// A `defer_syncs` call in progress on this thread: restores the outer
/// scope's state when it ends, and hands off what it owes if it unwinds.
struct DeferScope<'a> {
    core: &'a Core,
    outer: usize,
    owed_before: u64,
}

impl DeferScope<'_> {
    /// The streams this scope owes.
    fn end(self) -> Owed {
        let owed = OWED.with(|o| o.replace(self.owed_before));
        DEFERRING.with(|d| d.set(self.outer));
        std::mem::forget(self);
        Owed(owed)
    }
}

impl Drop for DeferScope<'_> {
    fn drop(&mut self) {
        let owed = Owed(OWED.with(|o| o.replace(self.owed_before)));
        DEFERRING.with(|d| d.set(self.outer));
        for s in owed.streams() {
            self.core.hand_off(s);
        }
    }
}

/// Limits that govern batching.
#[derive(Debug, Clone)]
pub struct CommitConfig {
    /// A `Delayed` record is written at most this long after it was appended.
    pub delayed_flush_ms: u64,
    /// Pending bytes that trigger a flush even without a `Full` append.
    pub delayed_flush_bytes: u64,
    /// Appenders block (backpressure) while a stream has this many bytes
    /// pending.
    pub max_pending_bytes: u64,
    /// Largest payload of one record.
    pub max_record_bytes: u64,
    /// Batches of one stream that may be between write and fsync completion
    /// at once (its writer threads); 1 is classic one-fsync-at-a-time group
    /// commit.
    pub syncs_in_flight: usize,
    /// A batch starts while others are in flight only once the most recent
    /// of them has been in flight this long.
    pub sync_overlap: Duration,
    /// On a fast disk, a batch waits for more records once about this many
    /// writers write to its stream (`gathers`); 0 never.
    pub gather_writers: u64,
    /// How long after the stream's last fsync such a batch waits at most.
    pub gather_wait: Duration,
    /// Every record depends on every record before it (`WalConfig::
    /// total_order`).
    pub total_order: bool,
    /// An event loop may write and fsync its own `Full` appends
    /// (`WalConfig::inline_sync`; see [`Core::lead`]).
    pub inline_sync: bool,
}

/// What a sealed batch covers.
#[derive(Debug, Clone, Copy)]
pub struct BatchMeta {
    pub records: u32,
    /// Bytes of records (between header and trailer).
    pub body_len: u32,
    pub first_lsn: u64,
    pub last_lsn: u64,
    /// The WAL's durable LSN when the batch was sealed.
    pub durable_hint: u64,
    /// Every LSN <= this must be recovered for the batch to be (0: none
    /// outside its stream); see `docs/durability.md`.
    pub depends_on: u64,
    /// This stream's batch number, counting from 0 at start-up.
    pub seq: u64,
    /// Every batch of this stream numbered below this was durable when this
    /// one was sealed.
    pub durable_seq: u64,
    /// The stream's disk is bandwidth-bound ([`StreamCore::
    /// bandwidth_capped`]): the sink pads every batch to its page's end.
    pub bandwidth_bound: bool,
}

/// Where a stream's batches go. `batch` holds a zeroed header slot
/// (`BATCH_HEADER_BYTES`), the records, the trailer and zero padding to
/// `BATCH_ALIGN_BYTES`; the sink fills in the header and writes the batch
/// after every batch written before it, and returns what must be synced to
/// make it durable. Writes are serialized by the caller; syncs of different
/// `slot`s run concurrently, and the handle for `slot` must report any
/// write-back error since that slot's previous sync (on Linux: a file
/// description of its own per slot, because an error is reported once per
/// description).
pub trait BatchSink: Send {
    fn write_batch(
        &mut self,
        slot: usize,
        batch: &mut [u8],
        meta: &BatchMeta,
    ) -> io::Result<Arc<dyn BatchSync>>;
    /// Called once when the writers stop cleanly, after every sync returned.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Makes the batches a [`BatchSink`] wrote durable.
pub trait BatchSync: Send + Sync {
    fn sync(&self) -> io::Result<()>;
}

/// Upper bounds, in µs, of the buckets that count a stream's write +
/// fdatasync times (`StreamCounters::fsync_buckets`); one more bucket
/// counts the slower ones. From a fast local SSD (tens of µs) to network
/// block storage having a bad second.
pub const FSYNC_BUCKETS_US: [u64; 15] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000,
];

/// Per-stream counters for `WalStats`.
#[derive(Default)]
pub(crate) struct StreamCounters {
    /// Batches by write + fdatasync time, [`FSYNC_BUCKETS_US`] (not
    /// cumulative).
    pub fsync_buckets: [AtomicU64; FSYNC_BUCKETS_US.len() + 1],
    pub bytes_written: AtomicU64,
    pub fsyncs: AtomicU64,
    pub records: AtomicU64,
    pub last_fsync_us: AtomicU64,
    pub max_fsync_us: AtomicU64,
    pub total_fsync_us: AtomicU64,
    pub pending_bytes: AtomicU64,
    /// Times a writer thread woke from waiting: against `fsyncs`, how
    /// much switching between threads each batch cost.
    pub writer_wakeups: AtomicU64,
}

struct StreamState {
    /// Header slot + records of the batch being gathered.
    buf: Vec<u8>,
    records: u32,
    first_lsn: u64,
    last_lsn: u64,
    /// Flush as soon as possible (a `Full` append, a sync request, or
    /// backpressure).
    urgent: bool,
    /// When the oldest pending `Delayed` record must be written.
    deadline: Option<Instant>,
    /// Batches sealed whose fate is not known yet.
    in_flight: usize,
    /// Seal number of the first batch not yet known durable; the next
    /// batch's is `durable_seq + completions.len()`.
    durable_seq: u64,
    /// Outcome of each batch from `durable_seq` on, in seal order: the
    /// watermark its success allows, once its fsync returned.
    completions: VecDeque<Option<u64>>,
    /// Writer threads waiting on `writer_cvs` or `fill_cv`.
    writers_waiting: u32,
    /// The slots of the writers waiting on their `writer_cvs`, in the order
    /// they parked.
    idle_writers: Vec<usize>,
    /// A writer is between sealing a batch and handing it to the sink:
    /// batches reach the sink in seal order, so nobody else seals meanwhile.
    writing: bool,
    /// Microseconds the most recent fsync of this stream took, and when
    /// it returned.
    last_sync_us: u64,
    /// Recent fsyncs' typical duration in microseconds (a moving average
    /// weighting the newest by 1/8): what spaces batches on a slow disk
    /// (`Core::overlap_age`).
    sync_us_avg: u64,
    last_sync_end: Instant,
    /// The writer waiting for the pending batch to fill (1 at most,
    /// `park_filler`; `Core::fill_deadline`).
    filling: u32,
    /// An append found the pending batch complete (`fill_deadline` none)
    /// and woke the gathering writer: it seals then, as the append saw it,
    /// rather than look again after more records have come. A batch that
    /// had just filled its page has started another by then, and would
    /// wait for that one too: about four wake-ups per fsync for nothing at
    /// -P 16 `full` on the local disk.
    fill_met: bool,
    /// `BatchSink::finish` ran.
    finished: bool,
    /// When the most recent batch was sealed.
    last_seal: Instant,
    space_waiters: u32,
    shutdown: bool,
    /// This stream's write or fsync failed: its watermark is frozen.
    failed: bool,
    /// Largest dependency of a pending record not yet durable when it was
    /// appended (0: none); becomes the batch's `depends_on`.
    pending_dep: u64,
    /// A pending record is `Full`.
    has_full: bool,
    /// The pending records are urgent but no writer was woken for them:
    /// a caller of `Core::defer_syncs` leads them (`Core::lead`).
    deferred: bool,
    /// A writer was woken and has not looked at the stream yet
    /// (`Core::writer_to_wake`).
    wake_sent: bool,
}

/// A writer of a stream to wake: decided under the stream's mutex, sent
/// after it is released where the path is hot, so that the woken thread
/// does not run only to wait for the mutex its waker still holds (on two
/// vCPUs it often preempts the waker there).
#[derive(Debug, Clone, Copy)]
enum Wake {
    Writer(usize),
    Filler,
}

impl StreamCore {
    fn send(&self, wake: Option<Wake>) {
        match wake {
            Some(Wake::Writer(slot)) => self.writer_cvs[slot].notify_one(),
            Some(Wake::Filler) => self.fill_cv.notify_one(),
            None => {}
        }
    }

    fn wake_all_writers(&self) {
        for cv in self.writer_cvs.iter() {
            cv.notify_all();
        }
    }
}

impl StreamState {
    fn pending_bytes(&self) -> u64 {
        (self.buf.len() - BATCH_HEADER_BYTES) as u64
    }
}

pub(crate) struct StreamCore {
    state: barging::Mutex<StreamState>,
    /// Where writer `slot` waits while idle (`park_writer`); the lead's
    /// slot (`syncs_in_flight`) never does.
    writer_cvs: Box<[Condvar]>,
    /// Where the writer gathering the pending batch waits (`park_filler`).
    fill_cv: Condvar,
    space_cv: Condvar,
    /// `W_s`: every LSN <= this that belongs to this stream is durable.
    pub watermark: AtomicU64,
    /// The highest LSN of this stream somebody needs durable soon.
    sync_target: AtomicU64,
    /// `A_s`: every record of this stream with an LSN <= this is durable,
    /// and so is everything it depends on; its reply may go out.
    pub acked: AtomicU64,
    /// Sealed batches whose dependency was not durable yet, as
    /// (first LSN, depends_on), in seal order. `A_s` stays below the first
    /// one whose dependency the durable LSN does not cover.
    steps: Mutex<VecDeque<(u64, u64)>>,
    pub counters: StreamCounters,
    /// The disk is bandwidth-bound (set by segment preallocation, which
    /// measures it): batches of this stream do not overlap. There an fsync
    /// takes as long as its bytes need, so a second one in flight makes
    /// nothing durable sooner, and every extra fsync writes a partly filled
    /// page once more.
    bandwidth_capped: AtomicBool,
    /// The batch buffer of `Core::lead`, which runs for one thread at a
    /// time (nothing else in flight). Allocated up front like the writer
    /// threads' own, so leading does not move `used_memory`.
    lead_buffer: Mutex<Vec<u8>>,
}

/// Told the durable LSN and each stream's `A_s`.
pub type Listener = Box<dyn Fn(u64, &[u64]) + Send + Sync>;

struct ListenerSlot {
    f: Option<Listener>,
    last_notified: u64,
    /// Every stream's `A_s` as the listener was last told them.
    acked: Vec<u64>,
}

impl ListenerSlot {
    /// Reads every stream's `A_s` into `acked`; true if any moved.
    fn refresh_acked(&mut self, streams: &[StreamCore]) -> bool {
        let mut moved = false;
        for (seen, s) in self.acked.iter_mut().zip(streams) {
            let a = s.acked.load(SeqCst);
            moved |= a != *seen;
            *seen = a;
        }
        moved
    }
}

/// State shared by appenders, writer threads and the `Wal` handle.
pub(crate) struct Core {
    pub cfg: CommitConfig,
    /// The next LSN to hand out. The only LSN counter.
    pub next_lsn: AtomicU64,
    /// min over streams of `W_s`, published.
    pub durable: AtomicU64,
    /// The highest LSN somebody needs durable soon (`Full` appends, sync
    /// requests). Streams lagging behind it are flushed without waiting for
    /// their timer.
    sync_target: AtomicU64,
    pub streams: Vec<StreamCore>,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    listener: Mutex<ListenerSlot>,
    /// Threads blocked in `wait_durable`, keyed by (LSN, ticket): a durable
    /// advance wakes exactly the satisfied ones, not every waiter.
    waiters: Mutex<BTreeMap<(u64, u64), Thread>>,
    waiter_count: AtomicUsize,
    next_ticket: AtomicU64,
    /// How many writers the log has lately (`Core::writers`).
    waiting_peak: WaitingPeak,
    /// The machine has no idle CPU (`Core::set_cpu_scarce`): on a slow
    /// disk, batches no longer start evenly through an fsync, and at most
    /// [`SCARCE_IN_FLIGHT`] of a stream are in flight.
    cpu_scarce: AtomicBool,
}

/// Where a pending buffer (header slot, then records) is cut so that the
/// batch sealed from its first part ends its last page nearly full.
#[derive(Debug, PartialEq, Eq)]
struct PageCut {
    /// Offset in the buffer of the first record left behind.
    at: usize,
    /// Records before it, and the LSN of the last of them.
    records: u32,
    last_lsn: u64,
    /// LSN of the first record left behind.
    rest_first_lsn: u64,
}

/// Bytes a batch sealed from the first `len` bytes of a pending buffer
/// (header slot, then records) takes in its segment: trailer and alignment
/// added.
fn sealed_len(len: usize) -> u64 {
    align_up((len + BATCH_TRAILER.len()) as u64)
}

/// The cut of `buf` for a stream whose batches end their page (a
/// bandwidth-bound disk, where each batch starts a page): the records that
/// fit in the whole pages the batch would fill stay in it, the ones that
/// would spill into one more page wait. `None` when the batch fits in one
/// page, ends on a page boundary, or its first record alone spills.
fn page_cut(buf: &[u8]) -> Option<PageCut> {
    let whole = sealed_len(buf.len()) / PAGE_BYTES * PAGE_BYTES;
    if whole == 0 || sealed_len(buf.len()) == whole {
        return None;
    }
    let mut at = BATCH_HEADER_BYTES;
    let mut cut = None;
    let mut records = 0;
    while at < buf.len() {
        let h = RecordHeader::parse(&buf[at..]);
        let len = RECORD_HEADER_BYTES + h.payload_len as usize;
        if sealed_len(at + len) > whole {
            break;
        }
        records += 1;
        cut = Some(PageCut {
            at: at + len,
            records,
            last_lsn: h.lsn,
            rest_first_lsn: 0,
        });
        at += len;
    }
    let mut cut = cut?;
    if cut.at >= buf.len() {
        return None;
    }
    cut.rest_first_lsn = RecordHeader::parse(&buf[cut.at..]).lsn;
    Some(cut)
}

/// An empty batch: also each writer's buffer ([`Core::run_writer`]).
pub(crate) fn new_buffer() -> Vec<u8> {
    let mut b = Vec::with_capacity(BUFFER_INITIAL_BYTES);
    b.resize(BATCH_HEADER_BYTES, 0);
    b
}

/// Restores the pending buffer if the caller's encoder panics, so a partial
/// record never reaches the disk.
struct TruncateOnUnwind<'a> {
    buf: &'a mut Vec<u8>,
    len: usize,
    armed: bool,
}

impl Drop for TruncateOnUnwind<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.buf.truncate(self.len);
        }
    }
}

impl Core {
    /// A core whose log already holds every LSN <= `last_lsn` durably
    /// (recovery fsyncs what it read before it gets here), so they start out
    /// covered by the durable LSN.
    pub fn new(num_streams: usize, cfg: CommitConfig, last_lsn: u64) -> Core {
        let streams = (0..num_streams)
            .map(|_| StreamCore {
                state: barging::Mutex::new(StreamState {
                    buf: new_buffer(),
                    records: 0,
                    first_lsn: 0,
                    last_lsn: 0,
                    urgent: false,
                    deadline: None,
                    in_flight: 0,
                    durable_seq: 0,
                    completions: VecDeque::new(),
                    writers_waiting: 0,
                    idle_writers: Vec::with_capacity(cfg.syncs_in_flight),
                    writing: false,
                    last_sync_us: 0,
                    sync_us_avg: 0,
                    last_sync_end: Instant::now(),
                    filling: 0,
                    fill_met: false,
                    finished: false,
                    last_seal: Instant::now(),
                    space_waiters: 0,
                    shutdown: false,
                    failed: false,
                    pending_dep: 0,
                    has_full: false,
                    deferred: false,
                    wake_sent: false,
                }),
                writer_cvs: (0..cfg.syncs_in_flight).map(|_| Condvar::new()).collect(),
                fill_cv: Condvar::new(),
                space_cv: Condvar::new(),
                watermark: AtomicU64::new(last_lsn),
                acked: AtomicU64::new(last_lsn),
                sync_target: AtomicU64::new(last_lsn),
                steps: Mutex::new(VecDeque::new()),
                counters: StreamCounters::default(),
                bandwidth_capped: AtomicBool::new(false),
                lead_buffer: Mutex::new(new_buffer()),
            })
            .collect();
        Core {
            cfg,
            next_lsn: AtomicU64::new(last_lsn + 1),
            durable: AtomicU64::new(last_lsn),
            sync_target: AtomicU64::new(last_lsn),
            streams,
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            listener: Mutex::new(ListenerSlot {
                f: None,
                last_notified: last_lsn,
                acked: vec![last_lsn; num_streams],
            }),
            waiters: Mutex::new(BTreeMap::new()),
            waiter_count: AtomicUsize::new(0),
            next_ticket: AtomicU64::new(0),
            waiting_peak: WaitingPeak::new(),
            cpu_scarce: AtomicBool::new(false),
        }
    }

    pub fn last_lsn(&self) -> u64 {
        self.next_lsn.load(SeqCst) - 1
    }

    pub fn durable_lsn(&self) -> u64 {
        self.durable.load(SeqCst)
    }

    /// `A_s` of stream `s`: see [`StreamCore::acked`].
    pub fn acked_lsn(&self, s: usize) -> u64 {
        self.streams[s].acked.load(SeqCst)
    }

    pub fn is_failed(&self) -> bool {
        self.failed.load(SeqCst)
    }

    pub fn failure(&self) -> Option<String> {
        if !self.is_failed() {
            return None;
        }
        self.failure.lock().clone()
    }

    fn failed_error(&self) -> WalError {
        WalError::Failed(self.failure().unwrap_or_else(|| "unknown failure".into()))
    }

    /// Appends one record; see `Wal::append`.
    pub fn append(
        &self,
        stream: usize,
        time_ms: u64,
        level: Durability,
        depends_on: u64,
        encode: &mut dyn FnMut(&mut Vec<u8>),
    ) -> Result<u64, WalError> {
        if self.is_failed() {
            return Err(self.failed_error());
        }
        let sc = &self.streams[stream];
        let mut st = sc.state.lock();
        while st.pending_bytes() >= self.cfg.max_pending_bytes && !st.shutdown && !self.is_failed()
        {
            // Backpressure: make the writer drain, wait for space.
            if !st.urgent {
                st.urgent = true;
                self.nudge_writer(sc, &mut st);
            } else {
                self.release_deferred_locked(sc, &mut st);
            }
            st.space_waiters += 1;
            st = sc.space_cv.wait(st);
            st.space_waiters -= 1;
        }
        if self.is_failed() {
            return Err(self.failed_error());
        }
        if st.shutdown {
            return Err(WalError::Closed);
        }

        let start = st.buf.len();
        let capacity = st.buf.capacity();
        st.buf.resize(start + RECORD_HEADER_BYTES, 0);
        {
            let mut guard = TruncateOnUnwind {
                buf: &mut st.buf,
                len: start,
                armed: true,
            };
            encode(guard.buf);
            assert!(
                guard.buf.len() >= start + RECORD_HEADER_BYTES,
                "WAL encode callback removed bytes it did not write"
            );
            guard.armed = false;
        }
        grown(capacity, st.buf.capacity());
        let payload_len = (st.buf.len() - start - RECORD_HEADER_BYTES) as u64;
        if payload_len > self.cfg.max_record_bytes {
            st.buf.truncate(start);
            return Err(WalError::RecordTooLarge {
                len: payload_len,
                max: self.cfg.max_record_bytes,
            });
        }
        // The LSN is taken only once the record is certain to be logged: a
        // hole in the LSN sequence would end recovery there.
        let lsn = self.next_lsn.fetch_add(1, SeqCst);
        seal_record(&mut st.buf[start..], lsn, time_ms);
        if st.records == 0 {
            st.first_lsn = lsn;
        }
        st.records += 1;
        st.last_lsn = lsn;
        let pending = st.pending_bytes();
        sc.counters.pending_bytes.store(pending, SeqCst);
        let depends_on = if self.cfg.total_order {
            lsn - 1
        } else {
            depends_on
        };
        // A dependency already durable can never be missing after a crash.
        let depends = depends_on > self.durable_lsn();
        if depends {
            st.pending_dep = st.pending_dep.max(depends_on);
        }

        let mut wake = false;
        // Wakes sent once the mutex is released (`Wake`).
        let mut gathered = None;
        let mut nudged = None;
        if level.syncs() || pending >= self.cfg.delayed_flush_bytes {
            // Only this stream must flush for the reply, unless the record
            // depends on others: then they are hurried up to that point.
            if level.syncs() {
                st.has_full = true;
                sc.sync_target.fetch_max(lsn, SeqCst);
                if self.cfg.total_order || self.streams.len() == 1 {
                    // The reply waits for a plain LSN (every stream up to
                    // this record): with the target covering it,
                    // `request_sync_upto` returns at its first load rather
                    // than taking every stream's mutex again.
                    self.sync_target.fetch_max(lsn, SeqCst);
                } else if depends {
                    self.sync_target.fetch_max(depends_on, SeqCst);
                }
            }
            if !st.urgent {
                st.urgent = true;
                wake = true;
            } else if st.filling > 0 && !st.fill_met && self.fill_deadline(sc, &st).is_none() {
                // The batch has what its writer waited for.
                st.fill_met = true;
                gathered = Some(Wake::Filler);
            } else if st.in_flight > 0
                && st.writers_waiting > 0
                && !st.writing
                && self.overlap_due(sc, &st)
            {
                // The running fsync grew old while this batch gathered:
                // start it now rather than when that fsync returns.
                gathered = self.writer_to_wake(&mut st);
            }
        } else if st.records == 1 {
            st.deadline = Some(Instant::now() + Duration::from_millis(self.cfg.delayed_flush_ms));
            wake = true;
        }
        if level.syncs() && (wake || st.deferred) && self.may_defer(stream, sc, &st) {
            // Whichever event loop that owes the stream leads first seals
            // every record pending.
            st.deferred = true;
            OWED.with(|o| o.set(o.get() | 1 << stream));
        } else if wake {
            nudged = self.writer_to_nudge(sc, &mut st);
        } else if level.syncs() {
            // An event loop was to lead what is pending, but this appender
            // cannot wait for it to finish running its requests.
            nudged = self.deferred_to_release(sc, &mut st);
        }
        drop(st);
        sc.send(gathered);
        sc.send(nudged);
        Ok(lsn)
    }

    /// Runs `f`, leaving the writer threads asleep for `Full` appends it
    /// makes to a stream that is idle on a fast disk: the caller (an event
    /// loop) then writes and fsyncs them itself once it has run every
    /// request it had ready (`lead`), instead of paying a wake-up of a
    /// writer thread and another of itself per batch. Every stream returned
    /// must be led or handed off; if `f` panics they are handed off here.
    pub fn defer_syncs<R>(&self, f: impl FnOnce() -> R) -> (R, Owed) {
        if !self.cfg.inline_sync {
            return (f(), Owed(0));
        }
        let scope = DeferScope {
            core: self,
            outer: DEFERRING.with(|d| d.replace(self.id())),
            owed_before: OWED.with(|o| o.take()),
        };
        let r = f();
        (r, scope.end())
    }

    fn id(&self) -> usize {
        self as *const Core as usize
    }

    /// Whether an urgent append to stream `s` may be left to the caller of
    /// `defer_syncs`: only if that caller could lead it now (`may_lead`)
    /// and nobody is sealing the stream.
    fn may_defer(&self, s: usize, sc: &StreamCore, st: &StreamState) -> bool {
        s < 64
            && DEFERRING.with(|d| d.get()) == self.id()
            && !st.writing
            && !st.shutdown
            && self.may_lead(sc, st)
    }

    /// Whether a caller of `lead` may write and fsync a batch of stream
    /// `sc` now: only while nothing of the stream is in flight. A writer
    /// thread's batch is followed by the next as soon as its fsync returns;
    /// two event loops in fsync at once measured slower (smaller batches)
    /// than one. Never on a disk whose last fsync was slow or that is
    /// bandwidth-bound: an event loop blocked in a slow fsync stalls every
    /// connection it serves, and there the writer threads' overlap and
    /// page rules pay.
    fn may_lead(&self, sc: &StreamCore, st: &StreamState) -> bool {
        st.in_flight == 0 && !sc.bandwidth_capped.load(SeqCst) && !self.last_sync_was_slow(sc, st)
    }

    /// Writes and fsyncs stream `s`'s urgent records on the calling thread
    /// (what Redis does before its event loop sleeps), if it may
    /// (`may_lead`). Otherwise a batch in flight is followed by the next
    /// as usual, or a writer thread is woken.
    pub fn lead(&self, s: usize, sink: &Mutex<Box<dyn BatchSink>>) {
        let sc = &self.streams[s];
        let mut st = sc.state.lock();
        if st.records == 0 || !st.urgent || st.writing || st.failed || self.is_failed() {
            // Sealed by someone else already, or being sealed.
            return;
        }
        // The buffer is never waited for under the stream's mutex: the
        // leader before this one holds it until it returns, and after its
        // batch completes it takes stream mutexes (this stream's to fail
        // the log when its fsync failed, the others' in `publish_from`).
        // Waiting here would close the cycle; the writer threads take the
        // records instead, as when this thread may not lead at all.
        // A batch that waits for more records waits in a writer thread,
        // not in the event loop.
        let waits = !st.shutdown && self.batch_waits(sc, &st).is_some();
        let batch = (!st.shutdown && !waits && self.may_lead(sc, &st))
            .then(|| sc.lead_buffer.try_lock())
            .flatten();
        let Some(mut batch) = batch else {
            if waits && st.filling > 0 {
                // A writer thread gathers these records already, on a
                // timer, and the append that completes its batch wakes it:
                // woken now, it would only find the batch still short and
                // wait again.
                st.deferred = false;
            } else {
                self.release_deferred_locked(sc, &mut st);
            }
            return;
        };
        // The writer threads' slots are 0..syncs_in_flight; event loops
        // share the next, one at a time.
        if !self.seal_and_sync(s, self.cfg.syncs_in_flight, sink, st, &mut batch) {
            return;
        }
        drop(batch);
        // What a writer thread does on finding the stream urgent after its
        // fsync, done here for the one this thread just ran.
        let mut st = sc.state.lock();
        if st.in_flight > 0 {
            // The writer of the batch in flight (one overlapping this one)
            // sees to what is pending.
        } else if st.records > 0 {
            // Appends made during the fsync found it in flight and left
            // their records to its writer, which is this thread: hand them
            // to a writer thread rather than keep this event loop from the
            // replies the fsync just released. `Delayed` ones too: their
            // appends woke nobody, so without this no timer would run for
            // them and they could stay unsynced past `delayed_flush_ms`.
            st.deferred = false;
            let wake = self.writer_to_nudge(sc, &mut st);
            drop(st);
            sc.send(wake);
        } else if st.urgent {
            // A sync request came while the batch was in flight: the
            // stream is idle now, so all of its LSNs so far are durable.
            self.idle_advance_locked(s, &mut st);
            drop(st);
            self.recompute_durable();
        }
    }

    /// Wakes a writer thread for stream `s`'s urgent records, if they still
    /// wait for one.
    pub fn hand_off(&self, s: usize) {
        let sc = &self.streams[s];
        let mut st = sc.state.lock();
        if st.records > 0 && st.urgent {
            st.deferred = false;
            self.nudge_writer(sc, &mut st);
        }
    }

    /// A stream whose urgent records were left to a caller of
    /// `defer_syncs` gets its writer woken after all: somebody is about to
    /// block for them, possibly that very caller (a command waiting for
    /// durability in the middle of its requests).
    fn release_deferred_locked(&self, sc: &StreamCore, st: &mut StreamState) {
        sc.send(self.deferred_to_release(sc, st));
    }

    /// The wake `release_deferred_locked` would send, marked as sent.
    fn deferred_to_release(&self, sc: &StreamCore, st: &mut StreamState) -> Option<Wake> {
        if std::mem::take(&mut st.deferred) {
            self.writer_to_nudge(sc, st)
        } else {
            None
        }
    }

    /// `release_deferred_locked` on every stream.
    pub fn release_deferred(&self) {
        for sc in &self.streams {
            let mut st = sc.state.lock();
            self.release_deferred_locked(sc, &mut st);
        }
    }

    /// `lsn` should become durable soon. Once `sync_target` covers it, the
    /// stream holding it is already urgent (its append was `Full`) or was
    /// made so, and every other stream below the target is hurried when
    /// that one completes (`publish_from`), so there is nothing to do.
    pub fn request_sync_upto(&self, lsn: u64) {
        if self.sync_target.load(SeqCst) >= lsn {
            return;
        }
        self.request_sync();
    }

    /// Stream `s`'s records up to `lsn` should become durable soon (a
    /// reply waits for `A_s`); other streams are left alone. Free when a
    /// `Full` append or an earlier request asked for as much.
    pub fn request_stream_sync(&self, s: usize, lsn: u64) {
        let sc = &self.streams[s];
        // A load first: on a reply's path this is nearly always enough, and
        // it does not contend with the appenders' `fetch_max`.
        if sc.sync_target.load(SeqCst) >= lsn || sc.sync_target.fetch_max(lsn, SeqCst) >= lsn {
            return;
        }
        {
            let mut st = sc.state.lock();
            if st.records > 0 || st.in_flight > 0 {
                if st.records > 0 && !st.urgent {
                    st.urgent = true;
                    self.nudge_writer(sc, &mut st);
                } else {
                    self.release_deferred_locked(sc, &mut st);
                }
            } else {
                self.idle_advance_locked(s, &mut st);
            }
        }
        self.recompute_durable();
    }

    /// Everything appended so far should become durable soon.
    pub fn request_sync(&self) {
        self.sync_target.fetch_max(self.last_lsn(), SeqCst);
        for (s, sc) in self.streams.iter().enumerate() {
            let mut st = sc.state.lock();
            if st.records > 0 || st.in_flight > 0 {
                if !st.urgent {
                    st.urgent = true;
                    self.nudge_writer(sc, &mut st);
                } else {
                    self.release_deferred_locked(sc, &mut st);
                }
            } else {
                self.idle_advance_locked(s, &mut st);
            }
        }
        self.recompute_durable();
    }

    /// Idle stream (nothing pending, nothing in flight): all of its LSNs up
    /// to the current global one are durable. Must hold the stream's mutex,
    /// which is what keeps an appender from taking an LSN meanwhile.
    ///
    /// Whatever made the stream urgent is settled with it. Left set, the
    /// urgency would pass to the next record appended, which its writer
    /// would then seal alone even if it were `Delayed`.
    fn idle_advance_locked(&self, s: usize, st: &mut StreamState) {
        if !st.failed && st.records == 0 && st.in_flight == 0 {
            st.urgent = false;
            st.deferred = false;
            let g = self.last_lsn();
            self.streams[s].watermark.fetch_max(g, SeqCst);
        }
    }

    /// After stream `from` advanced: advance idle streams, hurry streams
    /// that hold back a needed LSN, and publish the new minimum.
    fn publish_from(&self, from: usize) {
        if self.streams.len() > 1 {
            let target = self.sync_target.load(SeqCst);
            let w_from = self.streams[from].watermark.load(SeqCst);
            for (t, sc) in self.streams.iter().enumerate() {
                let w = sc.watermark.load(SeqCst);
                if t == from || (w >= target && w >= w_from) {
                    continue;
                }
                let mut st = sc.state.lock();
                if st.failed {
                    continue;
                }
                if st.records == 0 && st.in_flight == 0 {
                    // Free: no I/O, just the current LSN.
                    self.idle_advance_locked(t, &mut st);
                } else if w < target && !st.urgent {
                    // Holds back an LSN somebody waits for: flush now.
                    st.urgent = true;
                    self.nudge_writer(sc, &mut st);
                }
            }
        }
        self.recompute_durable();
    }

    fn recompute_durable(&self) {
        let min = self
            .streams
            .iter()
            .map(|s| s.watermark.load(SeqCst))
            .min()
            .unwrap_or(0);
        let prev = self.durable.fetch_max(min, SeqCst);
        let d = prev.max(min);
        let mut acked_moved = false;
        for sc in &self.streams {
            // The watermark first: a batch it covers pushed its step before
            // it was written, so the step is seen below.
            let w = sc.watermark.load(SeqCst);
            let a = {
                let mut steps = sc.steps.lock();
                while steps.front().is_some_and(|&(_, dep)| dep <= d) {
                    steps.pop_front();
                }
                steps.front().map_or(w, |&(first, _)| w.min(first - 1))
            };
            acked_moved |= sc.acked.fetch_max(a, SeqCst) < a;
        }
        if min > prev || acked_moved {
            self.notify_durable();
        }
    }

    /// Tells the listener (when the durable LSN or some stream's `A_s`
    /// moved) and wakes `wait_durable` callers.
    fn notify_durable(&self) {
        {
            let mut l = self.listener.lock();
            let d = self.durable.load(SeqCst);
            let acked_moved = l.refresh_acked(&self.streams);
            if d > l.last_notified || acked_moved {
                l.last_notified = d;
                if let Some(f) = &l.f {
                    f(d, &l.acked);
                }
            }
        }
        if self.waiter_count.load(SeqCst) > 0 {
            self.wake_waiters(Some(self.durable.load(SeqCst)));
        }
    }

    /// Unparks waiters whose LSN is <= `upto` (all of them if `None`).
    fn wake_waiters(&self, upto: Option<u64>) {
        let ready = {
            let mut w = self.waiters.lock();
            match upto {
                Some(d) => {
                    let rest = w.split_off(&(d.saturating_add(1), 0));
                    std::mem::replace(&mut *w, rest)
                }
                None => std::mem::take(&mut *w),
            }
        };
        for t in ready.into_values() {
            t.unpark();
        }
    }

    /// Whether stream `s`'s disk is bandwidth-bound: see
    /// [`StreamCore::bandwidth_capped`].
    pub fn set_bandwidth_capped(&self, s: usize, capped: bool) {
        let sc = &self.streams[s];
        if sc.bandwidth_capped.swap(capped, SeqCst) != capped {
            tracing::info!(
                stream = s,
                capped,
                "WAL: stream's disk is {}bandwidth-bound; its fsyncs {} overlap",
                if capped { "" } else { "no longer " },
                if capped { "no longer" } else { "may again" }
            );
        }
    }

    /// Whether the machine's CPU is all in use, as its owner measures it.
    /// On a disk whose fsyncs are slow, batches started evenly through an
    /// fsync each cost a few context switches of a writer thread and the
    /// event loops it releases (tens of microseconds of CPU), for a record
    /// or two each under a mixed load. With idle CPU that buys latency;
    /// without, it takes the CPU the requests need. So then a stream's
    /// batches start only every `sync_overlap`, at most
    /// [`SCARCE_IN_FLIGHT`] are in flight (the next starts when one
    /// completes), and one writer at a time stands by for the next.
    pub fn set_cpu_scarce(&self, scarce: bool) {
        if self.cpu_scarce.swap(scarce, SeqCst) != scarce {
            tracing::debug!(scarce, "WAL: CPU scarcity changed");
        }
    }

    pub fn cpu_scarce(&self) -> bool {
        self.cpu_scarce.load(SeqCst)
    }

    pub fn bandwidth_capped(&self, s: usize) -> bool {
        self.streams[s].bandwidth_capped.load(SeqCst)
    }

    pub fn set_listener(&self, f: Listener) {
        let mut l = self.listener.lock();
        let d = self.durable.load(SeqCst);
        l.last_notified = d;
        l.refresh_acked(&self.streams);
        f(d, &l.acked);
        l.f = Some(f);
    }

    /// Enters the failed state (first reason wins) and wakes everybody.
    pub fn fail(&self, reason: String) {
        {
            let mut f = self.failure.lock();
            if f.is_none() {
                tracing::error!(reason = %reason, "write-ahead log failed; refusing writes until restart");
                *f = Some(reason);
            }
        }
        self.failed.store(true, SeqCst);
        for sc in &self.streams {
            let _st = sc.state.lock();
            sc.wake_all_writers();
            sc.fill_cv.notify_all();
            sc.space_cv.notify_all();
        }
        self.wake_waiters(None);
    }

    /// Blocks until `lsn` is durable (`Ok(true)`), the timeout passes
    /// (`Ok(false)`), or the WAL fails (`Err`).
    pub fn wait_durable(&self, lsn: u64, timeout: Option<Duration>) -> Result<bool, WalError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        if self.durable_lsn() < lsn {
            // Every stream up to `lsn`, not only the one a record went to.
            self.request_sync_upto(lsn);
            // This thread may be the one that was to lead them.
            self.release_deferred();
        }
        loop {
            if self.durable_lsn() >= lsn {
                return Ok(true);
            }
            if self.is_failed() {
                return Err(self.failed_error());
            }
            // Register, then re-check under the registry lock: a publisher
            // updates `durable` before taking that lock, so it either sees
            // this entry or this check sees its value.
            self.waiter_count.fetch_add(1, SeqCst);
            let key = (lsn, self.next_ticket.fetch_add(1, SeqCst));
            let registered = {
                let mut w = self.waiters.lock();
                if self.durable_lsn() >= lsn || self.is_failed() {
                    false
                } else {
                    w.insert(key, std::thread::current());
                    true
                }
            };
            if registered {
                match deadline {
                    Some(d) => {
                        let now = Instant::now();
                        if now < d {
                            std::thread::park_timeout(d - now);
                        }
                    }
                    None => std::thread::park(),
                }
                // Spurious wake-up or timeout: drop a stale entry.
                self.waiters.lock().remove(&key);
            }
            self.waiter_count.fetch_sub(1, SeqCst);
            if let Some(d) = deadline {
                if Instant::now() >= d && self.durable_lsn() < lsn && !self.is_failed() {
                    return Ok(false);
                }
            }
        }
    }

    /// One line per stream of what its writers and appenders are waiting
    /// for, to diagnose a stall. A stream whose mutex stays held is
    /// reported as such instead of blocking the caller.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "last {} durable {} sync_target {} waiters {} failed {}",
            self.last_lsn(),
            self.durable_lsn(),
            self.sync_target.load(SeqCst),
            self.waiter_count.load(SeqCst),
            self.is_failed()
        );
        for (s, sc) in self.streams.iter().enumerate() {
            let _ = write!(
                out,
                "\nstream {s}: watermark {} acked {} sync_target {} capped {} steps {:?}",
                sc.watermark.load(SeqCst),
                sc.acked.load(SeqCst),
                sc.sync_target.load(SeqCst),
                sc.bandwidth_capped.load(SeqCst),
                sc.steps
                    .try_lock_for(Duration::from_millis(100))
                    .map(|q| q.clone()),
            );
            let _ = match sc.state.try_lock_for(Duration::from_millis(100)) {
                Some(st) => write!(
                    out,
                    " records {} lsns {}..={} urgent {} deferred {} writing {} in_flight {} \
                     writers_waiting {} filling {} space_waiters {} shutdown {} failed {} \
                     completions {} durable_seq {} last_sync_us {} since_seal {:?}",
                    st.records,
                    st.first_lsn,
                    st.last_lsn,
                    st.urgent,
                    st.deferred,
                    st.writing,
                    st.in_flight,
                    st.writers_waiting,
                    st.filling,
                    st.space_waiters,
                    st.shutdown,
                    st.failed,
                    st.completions.len(),
                    st.durable_seq,
                    st.last_sync_us,
                    st.last_seal.elapsed(),
                ),
                None => write!(out, " (state mutex held)"),
            };
        }
        out
    }

    /// Asks every writer to flush what is pending and stop.
    pub fn shutdown(&self) {
        for sc in &self.streams {
            let mut st = sc.state.lock();
            st.shutdown = true;
            sc.wake_all_writers();
            sc.fill_cv.notify_all();
            sc.space_cv.notify_all();
        }
    }

    /// Bytes appended but not yet handed to a writer, per stream.
    #[cfg(test)]
    pub fn pending_bytes(&self, stream: usize) -> u64 {
        self.streams[stream].counters.pending_bytes.load(SeqCst)
    }

    /// Whether stream `s` has a batch being written right now.
    #[cfg(test)]
    pub fn in_flight(&self, stream: usize) -> bool {
        self.streams[stream].state.lock().in_flight > 0
    }

    /// Wakes a waiting writer of `sc` if it has something to do now. While
    /// a batch is being written, or a young fsync runs on a fast disk, the
    /// writer busy with it seals what is pending as soon as it is done, so
    /// waking another thread would only cost two context switches. When the
    /// last fsync was slow, a waiting writer is woken to stand by for the
    /// moment the running one grows old enough to overlap.
    fn nudge_writer(&self, sc: &StreamCore, st: &mut StreamState) {
        sc.send(self.writer_to_nudge(sc, st));
    }

    /// The wake `nudge_writer` would send, marked as sent in `st`: the
    /// caller sends it ([`StreamCore::send`]) once it has released the
    /// stream's mutex.
    fn writer_to_nudge(&self, sc: &StreamCore, st: &mut StreamState) -> Option<Wake> {
        if st.writers_waiting == 0 || st.writing {
            return None;
        }
        if st.in_flight == 0 || self.last_sync_was_slow(sc, st) || self.overlap_due(sc, st) {
            self.writer_to_wake(st)
        } else {
            None
        }
    }

    /// Picks one waiting writer to wake. On a fast disk, not while one
    /// woken before has not run yet: that one looks at the whole stream
    /// when it does, so waking another only costs two context switches.
    /// Every append notified while the woken writer waited for the
    /// stream's mutex, which woke the writers one after another: about ten
    /// wake-ups per fsync under redis-benchmark -P 16, and CPU the cores
    /// lacked. On a slow disk (fsyncs averaging over `sync_overlap`)
    /// batches start through a running fsync, and there writers woken
    /// ahead pay: memtier write-only under slowsync was 20% slower with
    /// one wake at a time.
    ///
    /// Returns the wake, marked as sent in `st`, for the caller to send
    /// ([`StreamCore::send`]), after releasing the mutex where it can.
    fn writer_to_wake(&self, st: &mut StreamState) -> Option<Wake> {
        if st.wake_sent && !self.spreads_batches(st) {
            return None;
        }
        if let Some(slot) = st.idle_writers.pop() {
            st.wake_sent = true;
            Some(Wake::Writer(slot))
        } else if st.filling > 0 {
            // Only the gathering writer waits: it is the one to go.
            Some(Wake::Filler)
        } else {
            None
        }
    }

    /// Until when the pending batch waits for more records: none once an
    /// append has found it complete (`StreamState::fill_met`).
    fn batch_waits(&self, sc: &StreamCore, st: &StreamState) -> Option<Instant> {
        if st.fill_met {
            None
        } else {
            self.fill_deadline(sc, st)
        }
    }

    /// Until when the pending batch waits for more records, counted from
    /// the end of the stream's last fsync. On a bandwidth-bound disk it
    /// waits to fill its page (`fill_wait`): waiting costs the disk that
    /// idle time, not waiting costs it the page's empty part, and there
    /// short batches are the common case (with several streams under total
    /// order, 6 records of 1 KB per fsync). On a fast one it waits to share
    /// the fsync's CPU with more writers (`gathers`). A slow disk's
    /// batches overlap instead, and appenders blocked for space never wait.
    fn fill_deadline(&self, sc: &StreamCore, st: &StreamState) -> Option<Instant> {
        if st.shutdown || !st.urgent || st.space_waiters > 0 {
            return None;
        }
        let capped = sc.bandwidth_capped.load(SeqCst);
        if !capped && (self.cfg.gather_writers == 0 || self.last_sync_was_slow(sc, st)) {
            return None;
        }
        let now = Instant::now();
        let (writers, coming) = self.writers(now);
        let n = self.streams.len() as u64;
        let wait = if capped {
            let typical = (st.pending_bytes() / u64::from(st.records.max(1))).max(1);
            fill_wait(
                sealed_len(st.buf.len()),
                typical,
                coming / n,
                st.last_sync_us,
            )?
        } else {
            let records = u64::from(st.records);
            if !gathers(records, writers / n, coming / n, self.cfg.gather_writers) {
                return None;
            }
            self.cfg.gather_wait
        };
        let by = st.last_sync_end + wait;
        (now < by).then_some(by)
    }

    /// About how many writers the log has lately, and how many of them are
    /// between two writes (their reply on its way, their next request not
    /// yet appended): the recent peak of records waiting to become durable,
    /// and that peak less those waiting now.
    fn writers(&self, now: Instant) -> (u64, u64) {
        let waiting = self.last_lsn().saturating_sub(self.durable_lsn());
        let peak = self.waiting_peak.note(waiting, now);
        (peak, peak - waiting)
    }

    /// The newest batch in flight is old enough for another to start
    /// beside it, on a disk where overlapping pays.
    fn overlap_due(&self, sc: &StreamCore, st: &StreamState) -> bool {
        !sc.bandwidth_capped.load(SeqCst)
            && !self.overlap_full(st)
            && Instant::now() >= st.last_seal + self.overlap_age(sc, st)
    }

    /// The stream's fsyncs are slow and the machine has CPU to spare: its
    /// batches start evenly through an fsync (`overlap_age`), and every
    /// wake-up reaches a writer (`writer_to_wake`). The average, not the last
    /// fsync, so that a local disk's occasional slow one changes neither.
    fn spreads_batches(&self, st: &StreamState) -> bool {
        st.sync_us_avg >= self.cfg.sync_overlap.as_micros() as u64 && !self.cpu_scarce()
    }

    /// While the CPU is scarce, at most [`SCARCE_IN_FLIGHT`] batches of a
    /// stream are in flight: the next one starts when one completes.
    fn overlap_full(&self, st: &StreamState) -> bool {
        self.cpu_scarce() && st.in_flight >= SCARCE_IN_FLIGHT
    }

    /// How old the newest batch in flight must be before another starts.
    /// On a fast disk, `sync_overlap`: a young fsync there is followed, not
    /// overlapped. On a slow one an fsync's duration is its latency, not
    /// work the disk shares among batches (network block storage serves
    /// several at once), so batches start evenly through it, one every
    /// fsync ÷ `syncs_in_flight`: a record then waits one fsync and a small
    /// part of another, where a fixed age of `sync_overlap` cost it up to
    /// half of one more. Under slowsync at 1 ms, memtier write-only at 200
    /// connections measured 13-18% faster with batches 150-250 µs apart
    /// than 500 µs apart.
    fn overlap_age(&self, sc: &StreamCore, st: &StreamState) -> Duration {
        let overlap = self.cfg.sync_overlap;
        if sc.bandwidth_capped.load(SeqCst) || !self.spreads_batches(st) {
            return overlap;
        }
        let even = st.sync_us_avg / self.cfg.syncs_in_flight.max(1) as u64;
        Duration::from_micros(even.max(OVERLAP_AGE_MIN_US)).min(overlap)
    }

    /// The last fsync outlasted the overlap age (network block storage):
    /// a writer waiting for it stands by on a timer.
    fn last_sync_was_slow(&self, sc: &StreamCore, st: &StreamState) -> bool {
        !sc.bandwidth_capped.load(SeqCst)
            && st.last_sync_us >= self.cfg.sync_overlap.as_micros() as u64
    }

    /// One writer loop of stream `s`, syncing through `slot`; run
    /// `syncs_in_flight` of them per stream on one shared sink. Returns when
    /// shut down or failed.
    ///
    /// Any free writer may seal the pending records, one at a time (the
    /// `writing` flag) so that batches reach the sink in seal order. Under a
    /// steady load the writer whose fsync just returned finds the records
    /// that arrived meanwhile and seals them at once, without a wake-up;
    /// the other writers sleep until a batch needs to start while one is
    /// still in flight.
    ///
    /// `batch` comes from [`new_buffer`], taken before the thread is
    /// spawned, so that the log holds its buffers once it is open, not at
    /// some point after (the server reads its start-up memory then).
    pub fn run_writer(
        &self,
        s: usize,
        slot: usize,
        sink: &Mutex<Box<dyn BatchSink>>,
        mut batch: Vec<u8>,
    ) {
        let sc = &self.streams[s];
        let delay = Duration::from_millis(self.cfg.delayed_flush_ms);
        loop {
            let mut st = sc.state.lock();
            loop {
                if self.is_failed() {
                    return;
                }
                if st.records > 0 && !st.writing {
                    if st.in_flight > 0 && !st.shutdown {
                        // Overlapping a young fsync costs a fast disk more
                        // (CPU, and fsyncs that slow each other) than it
                        // saves: wait for it to finish or to grow old. On a
                        // fast disk the writer of that fsync seals next, so
                        // this one sleeps until woken.
                        if !self.overlap_due(sc, &st) {
                            let overlap_at = st.last_seal + self.overlap_age(sc, &st);
                            let until = (self.last_sync_was_slow(sc, &st)
                                && !self.overlap_full(&st))
                            .then_some(overlap_at);
                            st = park_writer(sc, st, slot, until);
                            continue;
                        }
                    }
                    if let Some(fill_by) = self.batch_waits(sc, &st) {
                        // A bandwidth-bound disk writes at least a page per
                        // fsync, however few records it carries, and any
                        // disk costs the machine an fsync's CPU: a short
                        // batch waits a little for more (an appender that
                        // fills it wakes this one). One writer gathers; the
                        // others wait until needed, rather than each on its
                        // own timer, every expiry a wake-up for nothing.
                        if st.filling > 0 {
                            st = park_writer(sc, st, slot, None);
                            continue;
                        }
                        st = park_filler(sc, st, fill_by);
                        continue;
                    }
                    if st.urgent
                        || st.shutdown
                        || st.pending_bytes() >= self.cfg.delayed_flush_bytes
                    {
                        break;
                    }
                    let deadline = *st.deadline.get_or_insert_with(|| Instant::now() + delay);
                    if Instant::now() >= deadline {
                        break;
                    }
                    st = park_writer(sc, st, slot, Some(deadline));
                } else if st.records > 0 {
                    // Another writer is handing its batch to the sink; when
                    // done it wakes a waiter only if one may seal at once,
                    // and otherwise seals these itself after its fsync.
                    st = park_writer(sc, st, slot, None);
                } else {
                    if st.urgent {
                        st.urgent = false;
                        st.deferred = false;
                        self.idle_advance_locked(s, &mut st);
                        drop(st);
                        self.recompute_durable();
                        st = sc.state.lock();
                        continue;
                    }
                    if st.shutdown {
                        // The last writer out, once nothing is in flight,
                        // closes the sink; the others just leave.
                        // Others may be waiting for what this one did.
                        sc.wake_all_writers();
                        sc.fill_cv.notify_all();
                        if st.in_flight == 0 && !st.finished {
                            st.finished = true;
                            drop(st);
                            if let Err(e) = sink.lock().finish() {
                                self.fail(format!("stream {s}: closing failed: {e}"));
                            }
                        }
                        return;
                    }
                    st = park_writer(sc, st, slot, None);
                }
            }

            if !self.seal_and_sync(s, slot, sink, st, &mut batch) {
                return;
            }
        }
    }

    /// Seals what stream `s` has pending (`st` holds its mutex), writes it
    /// through `slot`, fsyncs it and completes it: the writer threads' step,
    /// and an event loop's when it leads (`lead`). False once the log has
    /// failed.
    fn seal_and_sync(
        &self,
        s: usize,
        slot: usize,
        sink: &Mutex<Box<dyn BatchSink>>,
        mut st: MutexGuard<'_, StreamState>,
        batch: &mut Vec<u8>,
    ) -> bool {
        let sc = &self.streams[s];
        // On a bandwidth-bound disk, the part of a batch's last page it
        // does not fill is written as zeros (it ends its page): leave the
        // records that would spill into a new page for the next batch,
        // which starts with them, so no record waits more than one extra
        // fsync for it.
        let cut = if sc.bandwidth_capped.load(SeqCst) && !st.shutdown {
            page_cut(&st.buf).filter(|c| {
                // What the sealed part depends on must not include the
                // records left behind, or its replies would wait for
                // them: exact under total order, the whole batch's
                // otherwise.
                self.cfg.total_order || st.pending_dep < c.rest_first_lsn
            })
        } else {
            None
        };
        // Seal: take the pending records, leave an empty buffer behind.
        std::mem::swap(&mut st.buf, batch);
        let mut dep = std::mem::take(&mut st.pending_dep);
        let has_full = std::mem::take(&mut st.has_full);
        let (records, last_lsn) = match &cut {
            Some(c) => {
                let capacity = st.buf.capacity();
                st.buf.extend_from_slice(&batch[c.at..]);
                grown(capacity, st.buf.capacity());
                batch.truncate(c.at);
                st.pending_dep = dep;
                st.has_full = has_full;
                if self.cfg.total_order {
                    // Each record depends on the one before it.
                    dep = dep.min(c.last_lsn.saturating_sub(1));
                }
                (c.records, c.last_lsn)
            }
            None => (st.records, st.last_lsn),
        };
        let depends_on = if dep > self.durable_lsn() {
            // Pushed before the batch is written, so before any
            // watermark can cover it (see `recompute_durable`).
            sc.steps.lock().push_back((st.first_lsn, dep));
            if has_full {
                // A reply waits for this batch: hurry the streams it
                // depends on (else their timers bound the wait).
                self.sync_target.fetch_max(dep, SeqCst);
            }
            dep
        } else {
            0
        };
        let mut meta = BatchMeta {
            records,
            body_len: (batch.len() - BATCH_HEADER_BYTES) as u32,
            first_lsn: st.first_lsn,
            last_lsn,
            durable_hint: 0,
            depends_on,
            seq: st.durable_seq + st.completions.len() as u64,
            durable_seq: st.durable_seq,
            bandwidth_bound: sc.bandwidth_capped.load(SeqCst),
        };
        st.last_seal = Instant::now();
        st.completions.push_back(None);
        st.in_flight += 1;
        st.writing = true;
        // Every LSN of this stream <= g is in `batch`, in a batch sealed
        // before it, or already durable.
        let g = match &cut {
            Some(c) => {
                // The records left behind stay urgent.
                st.records -= c.records;
                st.first_lsn = c.rest_first_lsn;
                c.rest_first_lsn - 1
            }
            None => {
                st.records = 0;
                st.urgent = false;
                st.deadline = None;
                self.last_lsn()
            }
        };
        st.deferred = false;
        st.fill_met = false;
        sc.counters.pending_bytes.store(st.pending_bytes(), SeqCst);
        if st.space_waiters > 0 {
            sc.space_cv.notify_all();
        }
        drop(st);

        meta.durable_hint = self.durable_lsn();
        let padded = sealed_len(batch.len()) as usize;
        let capacity = batch.capacity();
        batch.extend_from_slice(&BATCH_TRAILER);
        batch.resize(padded, 0);
        grown(capacity, batch.capacity());
        let t0 = Instant::now();
        let written = sink.lock().write_batch(slot, batch, &meta);
        let res = match written {
            Ok(handle) => {
                // The next batch may be sealed and written while this
                // one syncs.
                let mut st = sc.state.lock();
                st.writing = false;
                let wake = if st.shutdown {
                    // Writers waiting for `writing` to clear must see the
                    // shutdown, whatever the overlap rules say.
                    sc.wake_all_writers();
                    sc.fill_cv.notify_all();
                    None
                } else if st.records > 0 {
                    self.writer_to_nudge(sc, &mut st)
                } else {
                    None
                };
                drop(st);
                sc.send(wake);
                handle.sync()
            }
            Err(e) => {
                // Fail while still `writing`: the next writer must not
                // write where this one may have left a part.
                sc.state.lock().failed = true;
                self.fail(format!(
                    "stream {s}: writing the batch of LSNs {}..={} failed: {e}",
                    meta.first_lsn, meta.last_lsn
                ));
                return false;
            }
        };
        let us = t0.elapsed().as_micros() as u64;

        let mut st = sc.state.lock();
        st.in_flight -= 1;
        st.last_sync_us = us;
        st.sync_us_avg = if st.sync_us_avg == 0 {
            us
        } else {
            (st.sync_us_avg * 7 + us) / 8
        };
        st.last_sync_end = Instant::now();
        match res {
            Ok(()) => {
                let c = &sc.counters;
                c.bytes_written.fetch_add(batch.len() as u64, SeqCst);
                c.fsyncs.fetch_add(1, SeqCst);
                c.records.fetch_add(meta.records as u64, SeqCst);
                c.last_fsync_us.store(us, SeqCst);
                c.max_fsync_us.fetch_max(us, SeqCst);
                c.total_fsync_us.fetch_add(us, SeqCst);
                c.fsync_buckets[FSYNC_BUCKETS_US.partition_point(|&ub| ub < us)]
                    .fetch_add(1, Relaxed);
                if let Some(w) = self.complete_locked(&mut st, meta.seq, g) {
                    sc.watermark.fetch_max(w, SeqCst);
                    // A sync asked for while this batch was in flight is
                    // done if nothing came after it: settled now, not when
                    // this writer next looks (an append made meanwhile
                    // would take the urgency over).
                    if st.urgent {
                        self.idle_advance_locked(s, &mut st);
                    }
                    drop(st);
                    self.publish_from(s);
                }
            }
            Err(e) => {
                st.failed = true;
                drop(st);
                self.fail(format!(
                    "stream {s}: writing the batch of LSNs {}..={} failed: {e}",
                    meta.first_lsn, meta.last_lsn
                ));
                return false;
            }
        }
        if batch.capacity() > BUFFER_KEEP_BYTES {
            // Kept at the size it passed rather than its first: growing it
            // again, by doublings, would move what `maxmemory` counts.
            let capacity = batch.capacity();
            batch.clear();
            batch.shrink_to(BUFFER_KEEP_BYTES);
            batch.resize(BATCH_HEADER_BYTES, 0);
            grown(capacity, batch.capacity());
        } else {
            batch.clear();
            batch.resize(BATCH_HEADER_BYTES, 0);
        }
        true
    }

    /// Records that batch `seq` (sealed when the global LSN was `g`) is
    /// durable. Returns the stream's new watermark if the prefix of durable
    /// batches grew: batches complete in seal order, whatever order their
    /// fsyncs return in.
    fn complete_locked(&self, st: &mut StreamState, seq: u64, g: u64) -> Option<u64> {
        if st.failed {
            // A failed sync may concern pages of earlier batches too (they
            // can share a page): nothing completes after a failure.
            return None;
        }
        let i = (seq - st.durable_seq) as usize;
        st.completions[i] = Some(g);
        let mut w = None;
        while let Some(Some(g)) = st.completions.front() {
            w = Some(*g);
            st.completions.pop_front();
            st.durable_seq += 1;
        }
        if w.is_some() && st.completions.is_empty() && st.records == 0 {
            // Nothing pending or in flight: every LSN of this stream so far
            // is durable.
            w = Some(self.last_lsn());
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::format::{BATCH_ALIGN_BYTES, BATCH_TRAILER_BYTES};
    use std::collections::BTreeMap;
    use std::thread;

    /// Records every batch; can be told to fail or to block.
    #[derive(Clone, Default)]
    struct MemSink {
        inner: Arc<Mutex<MemInner>>,
    }

    #[derive(Default)]
    struct MemInner {
        batches: Vec<(BatchMeta, Vec<u8>)>,
        fail_next: bool,
        gate_closed: bool,
        /// Batch numbers whose sync blocks (after the write) until removed.
        sync_blocked: Vec<u64>,
        /// Batch numbers whose sync fails.
        sync_fail: Vec<u64>,
        /// The slot each batch was written through.
        slots: Vec<usize>,
    }

    struct MemSync {
        inner: Arc<Mutex<MemInner>>,
        seq: u64,
    }

    impl BatchSync for MemSync {
        fn sync(&self) -> io::Result<()> {
            loop {
                let inner = self.inner.lock();
                if inner.sync_fail.contains(&self.seq) {
                    return Err(io::Error::other("injected sync failure"));
                }
                if !inner.sync_blocked.contains(&self.seq) {
                    return Ok(());
                }
                drop(inner);
                thread::sleep(Duration::from_millis(1));
            }
        }
    }

    impl MemSink {
        /// Waits until `n` batches were written, failing with `what` after
        /// 10 s.
        fn await_batches(&self, n: usize, what: &str) {
            let t0 = Instant::now();
            while self.inner.lock().batches.len() < n {
                assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
                thread::sleep(Duration::from_millis(1));
            }
        }

        fn lsns(&self) -> Vec<u64> {
            let inner = self.inner.lock();
            let mut out = Vec::new();
            for (_, b) in &inner.batches {
                let mut off = BATCH_HEADER_BYTES;
                let body_end = b.len() - BATCH_TRAILER_BYTES;
                while off + RECORD_HEADER_BYTES <= body_end {
                    let h = RecordHeader::parse(&b[off..]);
                    if h.lsn == 0 {
                        break;
                    }
                    out.push(h.lsn);
                    off += RECORD_HEADER_BYTES + h.payload_len as usize;
                }
            }
            out
        }
    }

    impl BatchSink for MemSink {
        fn write_batch(
            &mut self,
            slot: usize,
            batch: &mut [u8],
            meta: &BatchMeta,
        ) -> io::Result<Arc<dyn BatchSync>> {
            loop {
                let mut inner = self.inner.lock();
                if inner.gate_closed {
                    drop(inner);
                    thread::sleep(Duration::from_millis(1));
                    continue;
                }
                if inner.fail_next {
                    inner.fail_next = false;
                    return Err(io::Error::other("injected"));
                }
                assert_eq!(batch.len() % BATCH_ALIGN_BYTES, 0);
                // Strip padding so the record walk in `lsns` is exact.
                let mut end = batch.len();
                while batch[..end].ends_with(&[0]) {
                    end -= 1;
                }
                inner.batches.push((*meta, batch[..end].to_vec()));
                inner.slots.push(slot);
                return Ok(Arc::new(MemSync {
                    inner: self.inner.clone(),
                    seq: meta.seq,
                }));
            }
        }
    }

    fn cfg() -> CommitConfig {
        CommitConfig {
            delayed_flush_ms: 3_600_000,
            delayed_flush_bytes: 1 << 30,
            max_pending_bytes: 1 << 30,
            max_record_bytes: 1 << 20,
            syncs_in_flight: 1,
            sync_overlap: Duration::ZERO,
            gather_writers: 0,
            gather_wait: GATHER_WAIT,
            total_order: false,
            inline_sync: true,
        }
    }

    fn start(core: &Arc<Core>, sinks: &[MemSink]) -> Vec<thread::JoinHandle<()>> {
        start_shared(core, sinks).1
    }

    type SharedSink = Arc<Mutex<Box<dyn BatchSink>>>;

    /// `start`, also returning each stream's sink as the writer threads
    /// share it (for `Core::lead`).
    fn start_shared(
        core: &Arc<Core>,
        sinks: &[MemSink],
    ) -> (Vec<SharedSink>, Vec<thread::JoinHandle<()>>) {
        let mut handles = Vec::new();
        let mut shared_sinks = Vec::new();
        for (s, sink) in sinks.iter().enumerate() {
            let shared: SharedSink = Arc::new(Mutex::new(Box::new(sink.clone())));
            shared_sinks.push(shared.clone());
            for slot in 0..core.cfg.syncs_in_flight {
                let core = core.clone();
                let shared = shared.clone();
                let batch = new_buffer();
                handles.push(thread::spawn(move || {
                    core.run_writer(s, slot, &shared, batch)
                }));
            }
        }
        (shared_sinks, handles)
    }

    /// `cfg` with an overlap age no in-memory fsync reaches: with 0 every
    /// fsync counts as slow, and event loops never lead.
    fn lead_cfg() -> CommitConfig {
        CommitConfig {
            sync_overlap: Duration::from_secs(1),
            ..cfg()
        }
    }

    /// Polls (never `wait_durable`, which releases deferred records itself)
    /// until `lsn` is durable, failing with `what` after 10 s.
    fn await_durable(core: &Core, lsn: u64, what: &str) {
        let t0 = Instant::now();
        while core.durable_lsn() < lsn {
            assert!(t0.elapsed() < Duration::from_secs(10), "{what}");
            thread::sleep(Duration::from_millis(1));
        }
    }

    fn put(core: &Core, s: usize, level: Durability, payload: &[u8]) -> u64 {
        core.append(s, 0, level, 0, &mut |b: &mut Vec<u8>| {
            b.extend_from_slice(payload)
        })
        .unwrap()
    }

    fn stop(core: &Core, handles: Vec<thread::JoinHandle<()>>) {
        core.shutdown();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Calls `writer_to_wake` three times under one hold of the stream's
    /// mutex, with the fsyncs averaging `sync_us_avg`, and returns how many
    /// of the three idle writers woke: once `expected` have, and nothing
    /// more came in the 100 ms after.
    fn writers_woken_by_three_wakes(sync_us_avg: u64, expected: u64) -> u64 {
        let mut c = lead_cfg();
        c.syncs_in_flight = 3;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let sc = &core.streams[0];
        while sc.state.lock().writers_waiting < 3 {
            thread::yield_now();
        }
        let before = sc.counters.writer_wakeups.load(Relaxed);
        {
            let mut st = sc.state.lock();
            st.sync_us_avg = sync_us_avg;
            for _ in 0..3 {
                let wake = core.writer_to_wake(&mut st);
                sc.send(wake);
            }
        }
        // A woken writer finds nothing to do and waits again.
        let woken = || sc.counters.writer_wakeups.load(Relaxed) - before;
        let t0 = Instant::now();
        while woken() < expected && t0.elapsed() < Duration::from_secs(10) {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(100));
        let n = woken();
        stop(&core, hs);
        n
    }

    #[test]
    fn on_a_fast_disk_a_woken_writer_is_not_joined_by_another_before_it_runs() {
        assert_eq!(writers_woken_by_three_wakes(0, 1), 1);
    }

    #[test]
    fn on_a_slow_disk_every_wake_reaches_a_writer() {
        assert_eq!(writers_woken_by_three_wakes(2_000_000, 3), 3);
    }

    #[test]
    fn an_event_loop_writes_and_syncs_its_own_full_appends() {
        let mut c = lead_cfg();
        c.syncs_in_flight = 2;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        let (shared, hs) = start_shared(&core, std::slice::from_ref(&sink));
        // Writers that are awake take whatever is urgent, deferred or not.
        while core.streams[0].state.lock().writers_waiting < 2 {
            thread::yield_now();
        }
        let ((a, b), owed) = core.defer_syncs(|| {
            (
                put(&core, 0, Durability::Full, b"a"),
                put(&core, 0, Durability::Full, b"b"),
            )
        });
        assert_eq!(owed, Owed(1));
        thread::sleep(Duration::from_millis(30));
        assert!(sink.inner.lock().batches.is_empty(), "no writer was woken");
        core.lead(0, &shared[0]);
        // Durable when `lead` returns, on this thread, in one batch through
        // the slot after the writers'.
        assert_eq!(core.durable_lsn(), b);
        let inner = sink.inner.lock();
        assert_eq!(inner.batches.len(), 1);
        assert_eq!(
            (inner.batches[0].0.first_lsn, inner.batches[0].0.records),
            (a, 2)
        );
        assert_eq!(inner.slots, vec![2]);
        drop(inner);
        // Delayed appends are the writers' timers' business, not deferred.
        let ((), owed) = core.defer_syncs(|| {
            put(&core, 0, Durability::Delayed, b"c");
        });
        assert_eq!(owed, Owed(0));
        stop(&core, hs);
    }

    #[test]
    fn a_delayed_append_during_a_leaders_fsync_keeps_its_flush_deadline() {
        let mut c = lead_cfg();
        c.delayed_flush_ms = 20;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0];
        let (shared, hs) = start_shared(&core, std::slice::from_ref(&sink));
        while core.streams[0].state.lock().writers_waiting < 1 {
            thread::yield_now();
        }
        let (_a, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"a"));
        assert_eq!(owed, Owed(1));
        let b = thread::scope(|sc| {
            let leader = sc.spawn(|| core.lead(0, &shared[0]));
            sink.await_batches(1, "a written by its leader");
            // Appended while the leader's fsync runs: its writer, asleep
            // behind that fsync, is not woken by it.
            let b = put(&core, 0, Durability::Delayed, b"b");
            sink.inner.lock().sync_blocked.clear();
            leader.join().unwrap();
            b
        });
        // Nothing else is appended: b's timer alone must flush it.
        await_durable(&core, b, "a delayed record outlived its flush deadline");
        stop(&core, hs);
    }

    #[test]
    fn a_leader_never_waits_for_the_lead_buffer_under_the_stream_mutex() {
        let core = Arc::new(Core::new(1, lead_cfg(), 0));
        let sink = MemSink::default();
        let (shared, hs) = start_shared(&core, std::slice::from_ref(&sink));
        while core.streams[0].state.lock().writers_waiting < 1 {
            thread::yield_now();
        }
        // The leader before, its batch complete, still holding the buffer
        // while it takes the stream's mutex (to fail the log, say).
        let held = core.streams[0].lead_buffer.lock();
        let (a, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"a"));
        assert_eq!(owed, Owed(1));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        thread::scope(|sc| {
            sc.spawn(|| {
                core.lead(0, &shared[0]);
                done_tx.send(()).unwrap();
            });
            let returned = done_rx.recv_timeout(Duration::from_secs(10)).is_ok();
            if returned {
                // What the holder does next: it gets the stream's mutex.
                drop(core.streams[0].state.lock());
            }
            drop(held);
            assert!(
                returned,
                "lead waited for the buffer under the stream's mutex"
            );
        });
        await_durable(&core, a, "a handed to a writer");
        stop(&core, hs);
    }

    /// On a fast disk, writes that each find every writer idle are all
    /// written by the writer that parked last, not by each writer in turn.
    #[test]
    fn the_writer_that_parked_last_is_woken_first() {
        let core = Arc::new(Core::new(
            1,
            CommitConfig {
                syncs_in_flight: 4,
                ..lead_cfg()
            },
            0,
        ));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let all_idle = || {
            let t0 = Instant::now();
            while core.streams[0].state.lock().idle_writers.len() < 4 {
                assert!(
                    t0.elapsed() < Duration::from_secs(10),
                    "writers never parked"
                );
                thread::yield_now();
            }
        };
        for i in 0..12u8 {
            all_idle();
            let lsn = put(&core, 0, Durability::Full, &[i]);
            await_durable(&core, lsn, "a write reached no writer");
        }
        all_idle();
        let slots = sink.inner.lock().slots.clone();
        assert_eq!(slots.len(), 12);
        assert!(slots.iter().all(|&s| s == slots[0]), "{slots:?}");
        stop(&core, hs);
    }

    #[test]
    fn a_stream_with_a_batch_in_flight_is_not_deferred() {
        let core = Arc::new(Core::new(1, lead_cfg(), 0));
        let sink = MemSink::default();
        sink.inner.lock().gate_closed = true;
        let (shared, hs) = start_shared(&core, std::slice::from_ref(&sink));
        let _a = put(&core, 0, Durability::Full, b"a");
        while !core.in_flight(0) {
            thread::yield_now();
        }
        // The writer busy with `a` seals `b` as soon as it is done.
        let (b, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"b"));
        assert_eq!(owed, Owed(0));
        core.lead(0, &shared[0]);
        sink.inner.lock().gate_closed = false;
        await_durable(&core, b, "b was left to its writer");
        assert_eq!(sink.inner.lock().slots, vec![0, 0]);
        stop(&core, hs);
    }

    #[test]
    fn owed_records_reach_a_writer_whoever_does_not_lead_them() {
        let core = Arc::new(Core::new(1, lead_cfg(), 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        // Handed off.
        let (a, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"a"));
        assert_eq!(owed, Owed(1));
        core.hand_off(0);
        await_durable(&core, a, "a handed off");
        // Waited for inside the scope that owes it (a command blocking for
        // durability among its connection's requests).
        let (ok, _) = core.defer_syncs(|| {
            let b = put(&core, 0, Durability::Full, b"b");
            core.wait_durable(b, Some(Duration::from_secs(10))).unwrap()
        });
        assert!(ok);
        // Owed by an event loop that has not led yet, when an appender
        // outside any scope needs the stream synced.
        let (_, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"c"));
        assert_eq!(owed, Owed(1));
        let d = thread::scope(|sc| {
            sc.spawn(|| put(&core, 0, Durability::Full, b"d"))
                .join()
                .unwrap()
        });
        await_durable(&core, d, "c and d released by d's append");
        // Owed by a scope that panicked.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.defer_syncs(|| {
                put(&core, 0, Durability::Full, b"e");
                panic!("a command panicked");
            })
        }));
        assert!(r.is_err());
        await_durable(&core, d + 1, "e handed off by the unwinding scope");
        // And this thread no longer defers.
        let f = put(&core, 0, Durability::Full, b"f");
        await_durable(&core, f, "f appended outside any scope");
        stop(&core, hs);
    }

    #[test]
    fn slow_or_bandwidth_bound_disks_are_left_to_the_writers() {
        let mut c = cfg();
        c.sync_overlap = Duration::from_millis(2);
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0];
        let hs = start(&core, std::slice::from_ref(&sink));
        // An fsync far longer than the overlap age: network block storage.
        let a = put(&core, 0, Durability::Full, b"a");
        sink.await_batches(1, "a written");
        thread::sleep(Duration::from_millis(10));
        sink.inner.lock().sync_blocked.clear();
        await_durable(&core, a, "a synced");
        let (b, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"b"));
        assert_eq!(owed, Owed(0));
        await_durable(&core, b, "b synced by a writer");
        // The last fsync (b's) was fast again; then a bandwidth-bound disk.
        let (d, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"d"));
        assert_eq!(owed, Owed(1));
        core.hand_off(0);
        await_durable(&core, d, "d synced");
        core.set_bandwidth_capped(0, true);
        let (e, owed) = core.defer_syncs(|| put(&core, 0, Durability::Full, b"e"));
        assert_eq!(owed, Owed(0));
        await_durable(&core, e, "e synced");
        stop(&core, hs);
    }

    #[test]
    fn full_append_becomes_durable() {
        let core = Arc::new(Core::new(1, cfg(), 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let lsn = put(&core, 0, Durability::Full, b"hello");
        assert_eq!(lsn, 1);
        assert!(core.wait_durable(lsn, None).unwrap());
        assert_eq!(sink.lsns(), vec![1]);
        stop(&core, hs);
    }

    /// A reply to a `Full` write waits for a plain LSN when the log is one
    /// stream or totally ordered: its own append must already cover that
    /// LSN in the sync target, or `request_sync_upto` takes every stream's
    /// mutex once more per write. With causal order over several streams
    /// the reply waits on its stream's target instead, and the global one
    /// only covers the dependency.
    #[test]
    fn a_full_append_covers_its_own_lsn_in_the_sync_target() {
        let total = CommitConfig {
            total_order: true,
            ..cfg()
        };
        for (streams, c, covered) in [(1, cfg(), true), (3, total, true), (3, cfg(), false)] {
            let core = Core::new(streams, c, 0);
            let lsn = put(&core, streams - 1, Durability::Full, b"x");
            let target = core.sync_target.load(SeqCst);
            assert_eq!(target >= lsn, covered, "{streams} streams: target {target}");
            assert!(core.streams[streams - 1].sync_target.load(SeqCst) >= lsn);
            let delayed = put(&core, 0, Durability::Delayed, b"y");
            assert!(core.sync_target.load(SeqCst) < delayed);
            core.shutdown();
        }
    }

    #[test]
    fn records_gather_while_a_batch_is_in_flight() {
        let core = Arc::new(Core::new(1, cfg(), 0));
        let sink = MemSink::default();
        sink.inner.lock().gate_closed = true;
        let hs = start(&core, std::slice::from_ref(&sink));
        let first = put(&core, 0, Durability::Full, b"a");
        // Wait until the writer took the first batch (it is now blocked).
        while !core.in_flight(0) {
            thread::yield_now();
        }
        let rest: Vec<u64> = (0..10)
            .map(|_| put(&core, 0, Durability::Full, b"b"))
            .collect();
        assert_eq!(core.durable_lsn(), 0);
        sink.inner.lock().gate_closed = false;
        assert!(core.wait_durable(*rest.last().unwrap(), None).unwrap());
        let inner = sink.inner.lock();
        assert_eq!(inner.batches.len(), 2, "ten records share the second fsync");
        assert_eq!(inner.batches[0].0.first_lsn, first);
        assert_eq!(inner.batches[1].0.records, 10);
        drop(inner);
        stop(&core, hs);
    }

    #[test]
    fn delayed_waits_for_bytes_threshold() {
        let mut c = cfg();
        c.delayed_flush_bytes = 1000;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let mut last = 0;
        for _ in 0..3 {
            last = put(&core, 0, Durability::Delayed, &[7u8; 100]);
        }
        // Below the threshold and the timer is an hour: nothing is written
        // until more bytes arrive.
        assert_eq!(
            core.pending_bytes(0),
            3 * (100 + RECORD_HEADER_BYTES as u64)
        );
        assert_eq!(core.durable_lsn(), 0);
        for _ in 0..10 {
            last = put(&core, 0, Durability::Delayed, &[7u8; 100]);
        }
        assert!(core.wait_durable(last - 5, None).unwrap());
        stop(&core, hs);
        assert_eq!(core.durable_lsn(), last, "shutdown flushes the rest");
    }

    #[test]
    fn delayed_flushes_on_timer() {
        let mut c = cfg();
        c.delayed_flush_ms = 1;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let lsn = put(&core, 0, Durability::Delayed, b"x");
        // Liveness only: no request_sync, no Full append, yet it gets there.
        assert!(core.wait_durable(lsn, None).unwrap());
        stop(&core, hs);
    }

    #[test]
    fn idle_stream_does_not_hold_back_the_watermark() {
        let core = Arc::new(Core::new(3, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let mut last = 0;
        for i in 0..50 {
            last = put(&core, 1, Durability::Full, &[i as u8]);
        }
        assert!(core.wait_durable(last, None).unwrap());
        assert!(sinks[0].lsns().is_empty() && sinks[2].lsns().is_empty());
        stop(&core, hs);
    }

    #[test]
    fn delayed_only_watermark_passes_idle_streams() {
        let mut c = cfg();
        c.delayed_flush_ms = 1;
        let core = Arc::new(Core::new(2, c, 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let lsn = put(&core, 0, Durability::Delayed, b"x");
        // No Full append, no sync request: the timer flush of stream 0 must
        // also carry idle stream 1 forward.
        assert!(core.wait_durable(lsn, None).unwrap());
        stop(&core, hs);
    }

    /// Waits (bounded) until `f` holds.
    fn eventually(f: impl Fn() -> bool) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !f() {
            if Instant::now() > deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(1));
        }
        true
    }

    #[test]
    fn a_stream_acknowledges_its_records_without_waiting_for_the_others() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        // Stream 0 holds a Delayed record for its (hour-long) timer.
        let d = put(&core, 0, Durability::Delayed, b"delayed");
        let f = put(&core, 1, Durability::Full, b"full");
        assert!(eventually(|| core.acked_lsn(1) >= f));
        assert!(core.durable_lsn() < d, "stream 0 was not flushed");
        assert!(sinks[0].lsns().is_empty());
        // A record that depends on the delayed one waits for it, and gets
        // it flushed.
        let g = core
            .append(1, 0, Durability::Full, d, &mut |b: &mut Vec<u8>| b.push(1))
            .unwrap();
        assert!(eventually(|| core.acked_lsn(1) >= g));
        assert!(core.durable_lsn() >= d);
        assert_eq!(sinks[0].lsns(), vec![d]);
        stop(&core, hs);
    }

    #[test]
    fn in_total_order_every_record_waits_for_every_stream() {
        let core = Arc::new(Core::new(
            2,
            CommitConfig {
                total_order: true,
                ..cfg()
            },
            0,
        ));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let d = put(&core, 0, Durability::Delayed, b"delayed");
        let f = put(&core, 1, Durability::Full, b"full");
        assert!(eventually(|| core.acked_lsn(1) >= f));
        // Acknowledged only with everything before it.
        assert!(core.durable_lsn() >= d);
        assert_eq!(sinks[0].lsns(), vec![d]);
        stop(&core, hs);
    }

    #[test]
    fn full_append_pulls_delayed_records_of_other_streams() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let d = put(&core, 0, Durability::Delayed, b"delayed");
        let f = put(&core, 1, Durability::Full, b"full");
        assert!(d < f);
        // The Full record is only durable once the earlier Delayed one is.
        assert!(core.wait_durable(f, None).unwrap());
        assert_eq!(sinks[0].lsns(), vec![d]);
        assert_eq!(sinks[1].lsns(), vec![f]);
        stop(&core, hs);
    }

    #[test]
    fn failed_write_freezes_watermark_and_refuses_appends() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let ok = put(&core, 0, Durability::Full, b"ok");
        assert!(core.wait_durable(ok, None).unwrap());
        sinks[0].inner.lock().fail_next = true;
        let bad = put(&core, 0, Durability::Full, b"bad");
        assert!(core.wait_durable(bad, None).is_err());
        assert!(core.failure().unwrap().contains("injected"));
        assert!(core.durable_lsn() < bad);
        assert!(matches!(
            core.append(1, 0, Durability::Full, 0, &mut |b: &mut Vec<u8>| b.push(1)),
            Err(WalError::Failed(_))
        ));
        // Sync requests cannot move the frozen stream either.
        core.request_sync();
        assert!(core.durable_lsn() < bad);
        stop(&core, hs);
    }

    #[test]
    fn oversized_record_takes_no_lsn() {
        let mut c = cfg();
        c.max_record_bytes = 10;
        let core = Arc::new(Core::new(1, c, 5));
        let e = core
            .append(0, 0, Durability::Full, 0, &mut |b: &mut Vec<u8>| {
                b.extend_from_slice(&[0; 11])
            })
            .unwrap_err();
        assert!(matches!(e, WalError::RecordTooLarge { len: 11, max: 10 }));
        assert_eq!(core.last_lsn(), 5);
        assert_eq!(core.pending_bytes(0), 0);
    }

    #[test]
    fn panicking_encoder_leaves_no_partial_record() {
        let core = Arc::new(Core::new(1, cfg(), 0));
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core.append(0, 0, Durability::Full, 0, &mut |b: &mut Vec<u8>| {
                b.push(1);
                panic!("encoder bug");
            })
        }));
        assert!(r.is_err());
        assert_eq!(core.pending_bytes(0), 0);
        assert_eq!(core.last_lsn(), 0);
    }

    #[test]
    fn concurrent_appenders_lsns_increase_within_each_stream() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let core = core.clone();
                thread::spawn(move || {
                    let mut mine = BTreeMap::new();
                    for i in 0..200u32 {
                        let s = (t + i as usize) % 2;
                        let lsn = put(&core, s, Durability::Full, &i.to_le_bytes());
                        mine.insert(lsn, s);
                    }
                    let max = *mine.keys().last().unwrap();
                    core.wait_durable(max, None).unwrap();
                    mine
                })
            })
            .collect();
        let mut all = BTreeMap::new();
        for t in threads {
            all.extend(t.join().unwrap());
        }
        stop(&core, hs);
        assert_eq!(all.len(), 800);
        assert_eq!(*all.keys().next().unwrap(), 1);
        assert_eq!(*all.keys().last().unwrap(), 800);
        for (s, sink) in sinks.iter().enumerate() {
            let l = sink.lsns();
            assert!(l.windows(2).all(|w| w[0] < w[1]), "stream {s} out of order");
            assert!(l.iter().all(|x| all[x] == s));
        }
    }

    #[test]
    fn listener_sees_monotonic_values() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s2 = seen.clone();
        core.set_listener(Box::new(move |d, _| s2.lock().push(d)));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let mut last = 0;
        for i in 0..100 {
            last = put(&core, i % 2, Durability::Full, b"v");
        }
        core.wait_durable(last, None).unwrap();
        stop(&core, hs);
        let seen = seen.lock();
        // Called again with the same durable LSN when only a stream's
        // acknowledged LSN moved.
        assert!(seen.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(*seen.last().unwrap(), last);
    }

    #[test]
    fn backpressure_blocks_then_drains() {
        let mut c = cfg();
        c.max_pending_bytes = 256;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        let hs = start(&core, std::slice::from_ref(&sink));
        let mut last = 0;
        for _ in 0..100 {
            last = put(&core, 0, Durability::Delayed, &[1u8; 100]);
        }
        core.request_sync();
        assert!(core.wait_durable(last, None).unwrap());
        assert_eq!(sink.lsns().len(), 100);
        stop(&core, hs);
    }

    #[test]
    fn a_record_arriving_during_an_fsync_starts_its_own() {
        let mut c = cfg();
        c.syncs_in_flight = 2;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0];
        let hs = start(&core, std::slice::from_ref(&sink));
        let first = put(&core, 0, Durability::Full, b"a");
        while sink.inner.lock().batches.is_empty() {
            thread::yield_now();
        }
        // Batch 0 is written and its fsync hangs; the next record is written
        // and synced by the second writer without waiting for it.
        let second = put(&core, 0, Durability::Full, b"b");
        while sink.inner.lock().batches.len() < 2 {
            thread::yield_now();
        }
        let meta = sink.inner.lock().batches[1].0;
        assert_eq!((meta.seq, meta.durable_seq), (1, 0));
        // Batch 1's sync returns first, yet nothing is durable before batch 0.
        thread::sleep(Duration::from_millis(20));
        assert_eq!(core.durable_lsn(), 0);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(second, None).unwrap());
        assert!(first < second);
        stop(&core, hs);
    }

    #[test]
    fn a_young_fsync_on_a_fast_disk_is_followed_not_overlapped() {
        let mut c = cfg();
        c.syncs_in_flight = 3;
        c.sync_overlap = Duration::from_millis(30);
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0];
        let hs = start(&core, std::slice::from_ref(&sink));
        put(&core, 0, Durability::Full, b"a");
        while sink.inner.lock().batches.is_empty() {
            thread::yield_now();
        }
        // No fsync was slow yet: a record arriving while batch 0 syncs waits
        // for it, even past the overlap age, instead of waking a writer.
        let second = put(&core, 0, Durability::Full, b"b");
        thread::sleep(Duration::from_millis(60));
        assert_eq!(sink.inner.lock().batches.len(), 1);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(second, None).unwrap());
        assert_eq!(sink.inner.lock().batches.len(), 2);
        stop(&core, hs);
    }

    #[test]
    fn after_a_slow_fsync_an_old_one_is_overlapped() {
        let mut c = cfg();
        c.syncs_in_flight = 3;
        c.sync_overlap = Duration::from_millis(20);
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0, 1];
        let hs = start(&core, std::slice::from_ref(&sink));
        let a = put(&core, 0, Durability::Full, b"a");
        while sink.inner.lock().batches.is_empty() {
            thread::yield_now();
        }
        // Batch 0's fsync takes longer than the overlap age.
        thread::sleep(Duration::from_millis(40));
        sink.inner.lock().sync_blocked.retain(|&b| b != 0);
        assert!(core.wait_durable(a, None).unwrap());
        let b = put(&core, 0, Durability::Full, b"b");
        while sink.inner.lock().batches.len() < 2 {
            thread::yield_now();
        }
        // Batch 1 hangs; a record arriving now starts batch 2 once batch 1
        // is old enough, without waiting for it.
        let c3 = put(&core, 0, Durability::Full, b"c");
        sink.await_batches(3, "batch 2 never started");
        assert!(core.durable_lsn() < b);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(c3, None).unwrap());
        stop(&core, hs);
    }

    #[test]
    fn on_a_slow_disk_batches_start_evenly_through_an_fsync() {
        let mut c = cfg();
        c.syncs_in_flight = 4;
        c.sync_overlap = Duration::from_micros(500);
        let core = Core::new(1, c, 0);
        let sc = &core.streams[0];
        let age = |avg: u64| {
            let mut st = sc.state.lock();
            st.sync_us_avg = avg;
            core.overlap_age(sc, &st)
        };
        // A fast disk (or none measured yet): the configured age.
        assert_eq!(age(0), Duration::from_micros(500));
        assert_eq!(age(499), Duration::from_micros(500));
        // Fsyncs of 1 ms and 4 ms: a batch every quarter of one, never
        // further apart than the configured age, never closer than the
        // floor.
        assert_eq!(age(1000), Duration::from_micros(250));
        assert_eq!(age(4000), Duration::from_micros(500));
        assert_eq!(age(600), Duration::from_micros(150));
        // Without idle CPU the batches of a slow disk keep the configured
        // age, as on a fast one.
        core.set_cpu_scarce(true);
        assert_eq!(age(1000), Duration::from_micros(500));
        core.set_cpu_scarce(false);
        assert_eq!(age(1000), Duration::from_micros(250));
        let mut few = cfg();
        few.syncs_in_flight = 16;
        few.sync_overlap = Duration::from_micros(500);
        let core = Core::new(1, few, 0);
        let sc = &core.streams[0];
        let mut st = sc.state.lock();
        st.sync_us_avg = 600;
        assert_eq!(
            core.overlap_age(sc, &st),
            Duration::from_micros(OVERLAP_AGE_MIN_US)
        );
        drop(st);
        // A bandwidth-bound disk never overlaps: its age does not shrink.
        core.set_bandwidth_capped(0, true);
        let mut st = sc.state.lock();
        st.sync_us_avg = 4000;
        assert_eq!(core.overlap_age(sc, &st), Duration::from_micros(500));
    }

    #[test]
    fn without_idle_cpu_two_batches_of_a_stream_are_in_flight_at_most() {
        let mut c = cfg();
        c.syncs_in_flight = 4;
        c.sync_overlap = Duration::from_millis(5);
        let core = Arc::new(Core::new(1, c, 0));
        core.set_cpu_scarce(true);
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0, 1, 2];
        let hs = start(&core, std::slice::from_ref(&sink));
        let a = put(&core, 0, Durability::Full, b"a");
        sink.await_batches(1, "batch 0 never started");
        // Batch 0 hangs past the overlap age: batch 1 starts beside it.
        thread::sleep(Duration::from_millis(10));
        let b = put(&core, 0, Durability::Full, b"b");
        sink.await_batches(2, "batch 1 never started beside batch 0");
        // Two hang now: a third waits, however old they grow.
        thread::sleep(Duration::from_millis(10));
        let c3 = put(&core, 0, Durability::Full, b"c");
        thread::sleep(Duration::from_millis(60));
        assert_eq!(sink.inner.lock().batches.len(), 2);
        // With idle CPU again, the next append starts it.
        core.set_cpu_scarce(false);
        let d = put(&core, 0, Durability::Full, b"d");
        sink.await_batches(3, "batch 2 never started once the CPU was idle");
        assert!(core.durable_lsn() < a);
        // Scarce again: once batch 0 returns, batches 1 and 2 still hang,
        // so a record appended then waits for one of them.
        core.set_cpu_scarce(true);
        sink.inner.lock().sync_blocked.retain(|&x| x != 0);
        assert!(core.wait_durable(a, None).unwrap());
        let e = put(&core, 0, Durability::Full, b"e");
        thread::sleep(Duration::from_millis(60));
        assert_eq!(sink.inner.lock().batches.len(), 3);
        sink.inner.lock().sync_blocked.clear();
        sink.await_batches(4, "batch 3 never started once batch 1 returned");
        for lsn in [b, c3, d, e] {
            assert!(core.wait_durable(lsn, None).unwrap());
        }
        stop(&core, hs);
    }

    /// One stream whose disk is bandwidth-bound, with batch 0 (record
    /// "a", whose LSN is returned) written and its fsync hung until the
    /// test clears `sync_blocked`.
    fn bound_with_batch_0_hung(
        c: CommitConfig,
    ) -> (Arc<Core>, MemSink, Vec<thread::JoinHandle<()>>, u64) {
        let core = Arc::new(Core::new(1, c, 0));
        core.set_bandwidth_capped(0, true);
        let sink = MemSink::default();
        sink.inner.lock().sync_blocked = vec![0];
        let hs = start(&core, std::slice::from_ref(&sink));
        let a = put(&core, 0, Durability::Full, b"a");
        while sink.inner.lock().batches.is_empty() {
            thread::yield_now();
        }
        (core, sink, hs, a)
    }

    #[test]
    fn a_bandwidth_bound_stream_never_overlaps_its_fsyncs() {
        let mut c = cfg();
        c.syncs_in_flight = 3;
        c.sync_overlap = Duration::from_millis(5);
        let (core, sink, hs, a) = bound_with_batch_0_hung(c);
        assert!(core.bandwidth_capped(0));
        // Batch 0 hangs far past the overlap age: on a fast-enough disk
        // batch 1 would start beside it, here it waits.
        let b = put(&core, 0, Durability::Full, b"b");
        thread::sleep(Duration::from_millis(60));
        assert_eq!(sink.inner.lock().batches.len(), 1);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(a, None).unwrap());
        assert!(core.wait_durable(b, None).unwrap());
        assert_eq!(sink.inner.lock().batches.len(), 2);

        // Measured fast again: after a slow fsync (batch 2), a record
        // arriving while batch 3 hangs starts batch 4 beside it.
        core.set_bandwidth_capped(0, false);
        sink.inner.lock().sync_blocked = vec![2, 3];
        let c3 = put(&core, 0, Durability::Full, b"c");
        while sink.inner.lock().batches.len() < 3 {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(40));
        sink.inner.lock().sync_blocked.retain(|&x| x != 2);
        assert!(core.wait_durable(c3, None).unwrap());
        let d = put(&core, 0, Durability::Full, b"d");
        while sink.inner.lock().batches.len() < 4 {
            thread::yield_now();
        }
        let e = put(&core, 0, Durability::Full, b"e");
        sink.await_batches(5, "batch 4 never started beside batch 3");
        assert!(core.durable_lsn() < d);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(e, None).unwrap());
        stop(&core, hs);
    }

    /// A pending buffer holding records of these payload lengths, LSNs
    /// from 1.
    fn pending(lens: &[usize]) -> Vec<u8> {
        let mut buf = vec![0u8; BATCH_HEADER_BYTES];
        for (i, &len) in lens.iter().enumerate() {
            let start = buf.len();
            buf.resize(start + RECORD_HEADER_BYTES + len, 7);
            seal_record(&mut buf[start..], i as u64 + 1, 0);
        }
        buf
    }

    #[test]
    fn a_page_cut_keeps_what_fills_whole_pages() {
        let rec = RECORD_HEADER_BYTES + 1000;
        // One page or less, or exactly whole pages: nothing to cut.
        assert_eq!(page_cut(&pending(&[1000; 3])), None);
        let exact = 2 * PAGE_BYTES as usize - BATCH_HEADER_BYTES - BATCH_TRAILER.len() - rec;
        assert_eq!(
            page_cut(&pending(&[1000, exact - RECORD_HEADER_BYTES])),
            None
        );
        // Nine 1 KB records need three pages; seven fill two (7 * 1024 +
        // 56 <= 8192), the last two wait.
        let c = page_cut(&pending(&[1000; 9])).unwrap();
        assert_eq!(
            c,
            PageCut {
                at: BATCH_HEADER_BYTES + 7 * rec,
                records: 7,
                last_lsn: 7,
                rest_first_lsn: 8,
            }
        );
        assert!(sealed_len(c.at) <= 2 * PAGE_BYTES);
        // A first record longer than a page spills whatever happens.
        assert_eq!(page_cut(&pending(&[5000, 10])), None);
        assert_eq!(
            page_cut(&pending(&[5000, 3100, 10])).map(|c| c.records),
            Some(1)
        );
    }

    #[test]
    fn a_bandwidth_bound_stream_leaves_what_spills_into_a_new_page_for_the_next_batch() {
        for total_order in [true, false] {
            let mut c = cfg();
            c.total_order = total_order;
            let (core, sink, hs, first) = bound_with_batch_0_hung(c);
            // Nine 1 KB records gather behind the hung batch 0: batch 1
            // takes the seven that fill two pages.
            let lsns: Vec<u64> = (0..9)
                .map(|_| put(&core, 0, Durability::Full, &[1u8; 1000]))
                .collect();
            sink.inner.lock().sync_blocked.clear();
            assert!(core.wait_durable(lsns[8], None).unwrap());
            assert!(core.wait_durable(first, None).unwrap());
            let batches = sink.inner.lock().batches.clone();
            let counts: Vec<u32> = batches.iter().map(|(m, _)| m.records).collect();
            assert_eq!(counts, vec![1, 7, 2], "total_order={total_order}");
            let b1 = &batches[1].0;
            assert_eq!((b1.first_lsn, b1.last_lsn), (lsns[0], lsns[6]));
            // Under total order batch 1 depends on what precedes its own
            // last record, not on the two records left behind.
            if total_order {
                assert!(b1.depends_on < lsns[6]);
            }
            assert_eq!(batches[2].0.first_lsn, lsns[7]);
            assert_eq!(sink.lsns(), (1..=10).collect::<Vec<u64>>());
            stop(&core, hs);
        }
    }

    #[test]
    fn a_bandwidth_bound_stream_gives_a_short_batch_time_to_fill_its_page() {
        let (core, sink, hs, a) = bound_with_batch_0_hung(cfg());
        // Batch 0's fsync takes 40 ms, so a short batch after it waits up
        // to FILL_WAIT_MAX from its end, which is after the release.
        thread::sleep(Duration::from_millis(40));
        let released = Instant::now();
        sink.inner.lock().sync_blocked.clear();
        let b = put(&core, 0, Durability::Full, b"b");
        assert!(core.wait_durable(b, None).unwrap());
        assert!(released.elapsed() >= FILL_WAIT_MAX);
        assert!(core.wait_durable(a, None).unwrap());
        assert_eq!(sink.inner.lock().batches.len(), 2);

        // Records that fill their page exactly go at once, together.
        sink.inner.lock().sync_blocked = vec![2];
        let c = put(&core, 0, Durability::Full, b"c");
        while sink.inner.lock().batches.len() < 3 {
            thread::yield_now();
        }
        let d = put(&core, 0, Durability::Full, b"d");
        let e = put(&core, 0, Durability::Full, &[9u8; 3960]);
        sink.inner.lock().sync_blocked.clear();
        assert!(core.wait_durable(e, None).unwrap());
        let batches = sink.inner.lock().batches.clone();
        assert_eq!(batches.len(), 4);
        assert_eq!((batches[3].0.first_lsn, batches[3].0.last_lsn), (d, e));
        assert!(core.durable_lsn() >= c);
        stop(&core, hs);
    }

    #[test]
    fn a_page_waits_long_only_for_writers_outside_every_batch() {
        let us = Duration::from_micros;
        // One 1 KB record on its first page: room for two more.
        let one = sealed_len(BATCH_HEADER_BYTES + 1054);
        assert_eq!((PAGE_BYTES - one) / 1054, 2);
        // Nobody outside: half the last fsync, at most FILL_WAIT_MAX.
        assert_eq!(fill_wait(one, 1054, 0, 400), Some(us(200)));
        assert_eq!(fill_wait(one, 1054, 3, 10_000), Some(FILL_WAIT_MAX));
        // Twice the room in writers outside: the long wait.
        assert_eq!(fill_wait(one, 1054, 4, 400), Some(FILL_WAIT_MAX));
        // A second page waits only for them.
        let five = sealed_len(BATCH_HEADER_BYTES + 5 * 1054);
        assert!(five > PAGE_BYTES && (2 * PAGE_BYTES - five) / 1054 == 2);
        assert_eq!(fill_wait(five, 1054, 3, 400), None);
        assert_eq!(fill_wait(five, 1054, 4, 400), Some(FILL_WAIT_MAX));
        // A page with no room for another such record goes at once.
        assert_eq!(fill_wait(PAGE_BYTES, 1054, 100, 400), None);
        assert_eq!(fill_wait(PAGE_BYTES - 64, 1054, 100, 400), None);
        assert_eq!(fill_wait(2 * PAGE_BYTES, 64, 100, 400), None);
    }

    #[test]
    fn the_waiting_peak_spans_this_window_and_the_last() {
        let p = WaitingPeak::new();
        let at = |ms| p.started + Duration::from_millis(ms);
        assert_eq!(p.note(5, at(0)), 5);
        assert_eq!(p.note(3, at(10)), 5);
        // The next window keeps the last one's peak...
        assert_eq!(p.note(2, at(60)), 5);
        // ...the one after only its own.
        assert_eq!(p.note(1, at(110)), 2);
        assert_eq!(p.note(4, at(120)), 4);
        // After an idle gap of whole windows, nothing of before.
        assert_eq!(p.note(1, at(400)), 1);
    }

    #[test]
    fn writers_outside_are_the_peak_less_those_waiting_now() {
        let core = Core::new(2, cfg(), 0);
        core.next_lsn.store(31, SeqCst);
        core.durable.store(10, SeqCst);
        // 20 records wait now, and that is the peak: nobody outside.
        assert_eq!(core.writers(Instant::now()), (20, 0));
        core.durable.store(26, SeqCst);
        // Then 16 went durable; their writers have not written again.
        assert_eq!(core.writers(Instant::now()), (20, 16));
    }

    #[test]
    fn a_batch_waits_for_as_many_writers_as_it_holds_once_there_are_many() {
        // Off, or too few writers: at once.
        assert!(!gathers(10, 100, 90, 0));
        assert!(!gathers(3, 15, 12, 16));
        // Many writers, as many still to come as the batch holds: wait.
        assert!(gathers(8, 16, 8, 16));
        assert!(gathers(50, 800, 750, 16));
        // The batch holds more than are to come: at once.
        assert!(!gathers(9, 16, 8, 16));
        assert!(!gathers(400, 800, 399, 16));
        // An empty batch (a sync request) counts as one record.
        assert!(!gathers(0, 16, 0, 16));
        assert!(gathers(0, 16, 1, 16));
    }

    #[test]
    fn a_fast_disk_batch_waits_for_the_writers_to_come_and_no_longer() {
        let core = Arc::new(Core::new(
            1,
            CommitConfig {
                gather_writers: 4,
                gather_wait: Duration::from_secs(30),
                ..lead_cfg()
            },
            0,
        ));
        let sink = MemSink::default();
        let (sinks, hs) = start_shared(&core, std::slice::from_ref(&sink));
        // Eight writers lately, none of whose records wait now.
        core.waiting_peak.note(8, Instant::now());
        let a = put(&core, 0, Durability::Full, b"a");
        // An event loop does not lead a batch that waits: a writer thread
        // holds it while six writers are still to come.
        let ((), owed) = core.defer_syncs(|| {
            put(&core, 0, Durability::Full, b"b");
        });
        for s in owed.streams() {
            core.lead(s, &sinks[s]);
        }
        thread::sleep(Duration::from_millis(20));
        assert!(
            sink.inner.lock().batches.is_empty(),
            "sealed without waiting"
        );
        assert_eq!(core.durable_lsn(), 0);
        // Three more (five waiting, three to come): the batch holds more
        // than are to come, and goes at once, well before the wait's end.
        // (The peak noted again: a loaded machine may have slept past its
        // windows.)
        core.waiting_peak.note(8, Instant::now());
        for p in [b"c", b"d", b"e"] {
            put(&core, 0, Durability::Full, p);
        }
        await_durable(&core, a + 4, "the batch never went");
        let batches = sink.inner.lock().batches.clone();
        assert_eq!(batches.len(), 1);
        assert_eq!((batches[0].0.first_lsn, batches[0].0.last_lsn), (a, a + 4));
        stop(&core, hs);
    }

    #[test]
    fn a_failed_sync_freezes_the_watermark_before_later_successes() {
        let mut c = cfg();
        c.syncs_in_flight = 3;
        let core = Arc::new(Core::new(1, c, 0));
        let sink = MemSink::default();
        {
            let mut inner = sink.inner.lock();
            inner.sync_blocked = vec![0];
            inner.sync_fail = vec![1];
        }
        let hs = start(&core, std::slice::from_ref(&sink));
        let a = put(&core, 0, Durability::Full, b"a");
        while sink.inner.lock().batches.is_empty() {
            thread::yield_now();
        }
        let b = put(&core, 0, Durability::Full, b"b");
        assert!(core.wait_durable(b, None).is_err());
        // Batch 2 (if any) may succeed later; batch 0 may too. Neither may
        // carry the watermark past batch 1.
        sink.inner.lock().sync_blocked.clear();
        thread::sleep(Duration::from_millis(20));
        assert!(core.durable_lsn() < b);
        assert!(core.durable_lsn() <= a);
        stop(&core, hs);
    }

    #[test]
    fn pipelined_writers_keep_lsns_and_seal_order() {
        let mut c = cfg();
        c.syncs_in_flight = 4;
        let core = Arc::new(Core::new(2, c, 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let core = core.clone();
                thread::spawn(move || {
                    let mut last = 0;
                    for i in 0..300u32 {
                        last = put(
                            &core,
                            (t + i as usize) % 2,
                            Durability::Full,
                            &i.to_le_bytes(),
                        );
                        core.wait_durable(last, None).unwrap();
                    }
                    last
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        stop(&core, hs);
        assert_eq!(core.durable_lsn(), 2400);
        let mut all: Vec<u64> = Vec::new();
        for sink in &sinks {
            let inner = sink.inner.lock();
            // Batches were written in seal order.
            for (i, (m, _)) in inner.batches.iter().enumerate() {
                assert_eq!(m.seq, i as u64);
                assert!(m.durable_seq <= m.seq);
            }
            drop(inner);
            let l = sink.lsns();
            assert!(l.windows(2).all(|w| w[0] < w[1]));
            all.extend(l);
        }
        all.sort_unstable();
        assert_eq!(all, (1..=2400).collect::<Vec<u64>>());
    }

    #[test]
    fn sync_requests_up_to_an_lsn() {
        let core = Arc::new(Core::new(2, cfg(), 0));
        let sinks = vec![MemSink::default(), MemSink::default()];
        let hs = start(&core, &sinks);
        // Delayed, with an hour-long timer: only a request moves it.
        let d = put(&core, 0, Durability::Delayed, b"d");
        core.request_sync_upto(d);
        assert!(core.wait_durable(d, None).unwrap());
        // A later delayed record, then a full one in the other stream: the
        // request for the delayed one is covered by the full append's
        // target, and both get there.
        let d2 = put(&core, 0, Durability::Delayed, b"d2");
        let f = put(&core, 1, Durability::Full, b"f");
        core.request_sync_upto(d2);
        assert!(core.wait_durable(d2, None).unwrap());
        assert!(core.wait_durable(f, None).unwrap());
        stop(&core, hs);
    }
}
