//! INFO persistence fields about the write-ahead log: what operators need to
//! see whether group commit is working (group size, fsync latency) and what
//! the last start-up recovery did.

use crate::state::Shared;
use std::fmt::Write;

/// Appends `wal_*` and `recovery_*` fields in Redis's `name:value` form.
pub fn fields(shared: &Shared, s: &mut String) {
    let st = shared.store.wal.stats();
    let mut f = |name: &str, value: &dyn std::fmt::Display| {
        let _ = write!(s, "{name}:{value}\r\n");
    };
    f("wal_streams", &st.streams.len());
    f("wal_bytes_written", &st.bytes_written);
    f("wal_records", &st.records);
    f("wal_fsyncs", &st.fsyncs);
    f(
        "wal_avg_records_per_fsync",
        &format!("{:.2}", st.avg_records_per_fsync),
    );
    f("wal_writer_wakeups", &st.writer_wakeups);
    f("wal_last_fsync_us", &st.last_fsync_us);
    f("wal_max_fsync_us", &st.max_fsync_us);
    f("wal_avg_fsync_us", &format!("{:.1}", st.avg_fsync_us));
    let waits = shared.reply_waits.snapshot();
    f("wal_replies_held", &waits.count);
    f("wal_avg_reply_wait_us", &format!("{:.1}", waits.avg_us()));
    f("wal_pending_bytes", &st.pending_bytes);
    f("wal_last_lsn", &st.last_lsn);
    f("wal_durable_lsn", &st.durable_lsn);
    f("wal_segments", &st.segments);
    f("wal_cpu_scarce", &u8::from(shared.store.wal.cpu_scarce()));
    // One line per directory, in the style of Redis's `slaveN:` lines:
    // what each stream has made durable and acknowledged, and its fsyncs.
    for (i, ss) in st.streams.iter().enumerate() {
        let avg = if ss.fsyncs > 0 {
            ss.total_fsync_us as f64 / ss.fsyncs as f64
        } else {
            0.0
        };
        f(
            &format!("wal_stream{i}"),
            &format_args!(
                "watermark_lsn={},acked_lsn={},fsyncs={},records={},avg_fsync_us={avg:.1},pending_bytes={},bandwidth_bound={}",
                ss.watermark_lsn,
                ss.acked_lsn,
                ss.fsyncs,
                ss.records,
                ss.pending_bytes,
                u8::from(ss.bandwidth_bound)
            ),
        );
    }
    let r = &shared.store.recovery;
    f("recovery_records_replayed", &r.records);
    f("recovery_bytes_replayed", &r.bytes);
    f("recovery_time_ms", &r.duration.as_millis());
    f("recovery_truncated_tails", &r.truncated_tail.len());
}
