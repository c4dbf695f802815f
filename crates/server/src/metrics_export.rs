//! What the Prometheus endpoint (`metrics-port`, [`crate::metrics_http`])
//! serves: every INFO EVERYTHING field as a metric, read at the scrape, so
//! that a dashboard plots the very numbers an operator reads in INFO, under
//! names derived from INFO's. `docs/metrics.md` gives the rules with
//! examples; they are applied here field by field:
//!
//! - a number is a gauge named `durakv_<field>`, or a counter named
//!   `durakv_<field>_total` (a leading `total_` dropped) for the fields in
//!   [`COUNTERS`];
//! - text is an info metric, `durakv_<field>_info{value="..."} 1`;
//! - a per-item field (`db0`, `slave1`, `wal_stream0`, `cmdstat_get`,
//!   `errorstat_ERR`, `latency_percentiles_usec_get`, `listener0`,
//!   `db3_durability`) becomes one metric per number in it, the item as a
//!   label.

use crate::reply_wait;
use crate::state::Shared;
use bytes::Bytes;
use durakv_engine::wal::{WalStats, FSYNC_BUCKETS_US};
use metrics::{Key, Label, Level, Metadata, Recorder, SharedString};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use std::fmt::Write as _;

const PREFIX: &str = "durakv_";

const META: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// Plain INFO fields that only grow, exported as counters.
const COUNTERS: &[&str] = &[
    "total_connections_received",
    "total_commands_processed",
    "total_net_input_bytes",
    "total_net_output_bytes",
    "total_net_repl_input_bytes",
    "total_net_repl_output_bytes",
    "total_reads_processed",
    "total_writes_processed",
    "total_error_replies",
    "total_forks",
    "rejected_connections",
    "sync_full",
    "sync_partial_ok",
    "sync_partial_err",
    "expired_keys",
    "evicted_keys",
    "evicted_clients",
    "keyspace_hits",
    "keyspace_misses",
    "unexpected_error_replies",
    "acl_access_denied_auth",
    "acl_access_denied_cmd",
    "acl_access_denied_key",
    "acl_access_denied_channel",
    "watch_aborts",
    "lazyfreed_objects",
    "rdb_saves",
    "wal_bytes_written",
    "wal_records",
    "wal_fsyncs",
    "wal_writer_wakeups",
    "wal_replies_held",
    "checkpoint_count",
    "checkpoint_failures",
];

/// Numbers inside per-item fields that only grow: (item kind, key).
const ITEM_COUNTERS: &[(&str, &str)] = &[
    ("cmdstat", "calls"),
    ("cmdstat", "usec"),
    ("cmdstat", "rejected_calls"),
    ("cmdstat", "failed_calls"),
    ("errorstat", "count"),
    ("wal_stream", "fsyncs"),
    ("wal_stream", "records"),
];

/// Keys of per-item fields that name the item rather than measure it, so
/// they are labels even when they are numbers (a replica's port).
const LABEL_KEYS: &[&str] = &["ip", "port", "state", "name", "bind"];

/// Per-item fields named `<kind><name>`: the kind and the label the name
/// goes in. Longest kinds first, as `latency_percentiles_usec_` would
/// otherwise never be reached.
const NAMED_ITEMS: &[(&str, &str, &str)] = &[
    (
        "latency_percentiles_usec_",
        "latency_percentiles_usec",
        "cmd",
    ),
    ("errorstat_", "errorstat", "error"),
    ("cmdstat_", "cmdstat", "cmd"),
];

/// Per-item fields named `<kind><number>`: the kind and its label.
const NUMBERED_ITEMS: &[(&str, &str)] = &[
    ("wal_stream", "stream"),
    ("listener", "listener"),
    ("slave", "slave"),
    ("db", "db"),
];

/// The exposition text (Prometheus text format 0.0.4): INFO EVERYTHING,
/// then the log's fsync time histograms and the replies' wait for them.
pub fn render_all(shared: &Shared) -> String {
    let mut text = render(&crate::cmd::info::everything(shared));
    fsync_histograms(&shared.store.wal.stats(), &mut text);
    reply_wait_histogram(&shared.reply_waits.snapshot(), &mut text);
    text
}

/// `durakv_reply_wait_seconds`: how long replies were held until what
/// they depend on was durable ([`crate::reply_wait`]), the latency a
/// `full` client sees on top of the command's own.
pub fn reply_wait_histogram(waits: &reply_wait::Snapshot, out: &mut String) {
    let name = format!("{PREFIX}reply_wait_seconds");
    let _ = write!(
        out,
        "# HELP {name} Time each reply was held until the writes it depends on were durable\n\
         # TYPE {name} histogram\n"
    );
    let mut cumulative = 0;
    for (i, n) in waits.buckets.iter().enumerate() {
        cumulative += n;
        let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cumulative}", le(i));
    }
    let _ = writeln!(out, "{name}_sum {}", waits.total_us as f64 / 1e6);
    let _ = writeln!(out, "{name}_count {cumulative}");
}

/// The `le` label of bucket `i` of [`FSYNC_BUCKETS_US`] (seconds), or
/// `+Inf` past the last.
fn le(i: usize) -> String {
    match FSYNC_BUCKETS_US.get(i) {
        Some(us) => (*us as f64 / 1e6).to_string(),
        None => "+Inf".to_string(),
    }
}

/// `durakv_wal_fsync_seconds`, a histogram per log directory. INFO gives
/// only the average and the maximum since start; a histogram lets a
/// dashboard show the tail over any window, which is what a `full` write
/// waits for.
pub fn fsync_histograms(stats: &WalStats, out: &mut String) {
    let name = format!("{PREFIX}wal_fsync_seconds");
    let _ = write!(
        out,
        "# HELP {name} Time of each write + fdatasync of a log batch, per log directory (stream)\n\
         # TYPE {name} histogram\n"
    );
    for (s, ss) in stats.streams.iter().enumerate() {
        let mut cumulative = 0;
        for (i, n) in ss.fsync_buckets.iter().enumerate() {
            cumulative += n;
            let _ = writeln!(
                out,
                "{name}_bucket{{stream=\"{s}\",le=\"{}\"}} {cumulative}",
                le(i)
            );
        }
        let sum = ss.total_fsync_us as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{{stream=\"{s}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{stream=\"{s}\"}} {cumulative}");
    }
}

/// The exposition text (Prometheus text format 0.0.4) for INFO EVERYTHING.
pub fn render(info: &Bytes) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let text = String::from_utf8_lossy(info);
    let mut section = "";
    for line in text.lines() {
        if let Some(title) = line.strip_prefix("# ") {
            section = title.trim();
            continue;
        }
        let Some((field, value)) = line.split_once(':') else {
            continue;
        };
        export_field(&recorder, section, field, value.trim_end());
    }
    recorder.handle().render()
}

fn export_field(r: &PrometheusRecorder, section: &str, field: &str, value: &str) {
    if field.ends_with("_human") || value.is_empty() {
        // The same number again, formatted for people; or nothing to say.
        return;
    }
    if let Some((kind, label, name)) = item(field) {
        let help = format!("INFO {section}: {kind}<{label}> fields");
        let item_label = Label::new(label, name.to_string());
        if value.contains('=') {
            export_item(r, &help, kind, item_label, value);
        } else {
            // `db3_durability:full`: one setting per item.
            let metric = format!("{kind}_{}", field.split_once('_').map_or("", |x| x.1));
            export_scalar(r, &help, &metric, value, vec![item_label], false);
        }
        return;
    }
    let help = format!("INFO {section}: {field}");
    export_scalar(
        r,
        &help,
        field,
        value,
        Vec::new(),
        COUNTERS.contains(&field),
    );
}

/// A number as a gauge or counter, text as an info metric.
fn export_scalar(
    r: &PrometheusRecorder,
    help: &str,
    metric: &str,
    value: &str,
    mut labels: Vec<Label>,
    counter: bool,
) {
    // `used_memory_peak_perc:12.34%`
    let number = value.strip_suffix('%').unwrap_or(value);
    match (counter, number.parse::<u64>(), number.parse::<f64>()) {
        (true, Ok(n), _) => {
            let name = counter_name(metric);
            describe(r, &name, help, true);
            r.register_counter(&Key::from_parts(name, labels), &META)
                .absolute(n);
        }
        (_, _, Ok(x)) if x.is_finite() => {
            let name = prefixed(metric);
            describe(r, &name, help, false);
            r.register_gauge(&Key::from_parts(name, labels), &META)
                .set(x);
        }
        _ => {
            let name = format!("{}_info", prefixed(metric));
            describe(r, &name, help, false);
            labels.push(Label::new("value", value.to_string()));
            r.register_gauge(&Key::from_parts(name, labels), &META)
                .set(1.0);
        }
    }
}

/// `key=value,...` of one item: each number a metric, the rest labels.
fn export_item(r: &PrometheusRecorder, help: &str, kind: &str, item: Label, value: &str) {
    let mut labels = vec![item];
    let mut numbers = Vec::new();
    for pair in value.split(',') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let is_number = v.parse::<f64>().is_ok_and(f64::is_finite);
        if is_number && !LABEL_KEYS.contains(&k) {
            numbers.push((k, v));
        } else if let Some(l) = labels.iter_mut().find(|l| l.key() == k) {
            // `listener0:...,bind=*,bind=-::*`: a label appears once.
            *l = Label::new(k.to_string(), format!("{} {v}", l.value()));
        } else {
            labels.push(Label::new(k.to_string(), v.to_string()));
        }
    }
    if numbers.is_empty() {
        let name = format!("{PREFIX}{kind}_info");
        describe(r, &name, help, false);
        r.register_gauge(&Key::from_parts(name, labels), &META)
            .set(1.0);
        return;
    }
    for (k, v) in numbers {
        if kind == "latency_percentiles_usec" {
            // `p99.9=...`: one metric, the percentile as a quantile label.
            if let Some(q) = k.strip_prefix('p').and_then(|p| p.parse::<f64>().ok()) {
                let mut with_q = labels.clone();
                // Rounded to the percentile's own digits: 99.9 / 100 is
                // 0.9990000000000001 in binary.
                let q = (q * 1e4).round() / 1e6;
                with_q.push(Label::new("quantile", q.to_string()));
                export_scalar(r, help, kind, v, with_q, false);
                continue;
            }
        }
        let counter = ITEM_COUNTERS.contains(&(kind, k));
        export_scalar(r, help, &format!("{kind}_{k}"), v, labels.clone(), counter);
    }
}

/// `total_commands_processed` -> `durakv_commands_processed_total`.
fn counter_name(metric: &str) -> String {
    let base = metric.strip_prefix("total_").unwrap_or(metric);
    format!("{}_total", prefixed(base))
}

/// `used_memory` -> `durakv_used_memory`; `durakv_version` stays as it is.
fn prefixed(metric: &str) -> String {
    if metric.starts_with(PREFIX) {
        metric.to_string()
    } else {
        format!("{PREFIX}{metric}")
    }
}

fn describe(r: &PrometheusRecorder, name: &str, help: &str, counter: bool) {
    let help = SharedString::from(help.to_string());
    if counter {
        r.describe_counter(name.to_string().into(), None, help);
    } else {
        r.describe_gauge(name.to_string().into(), None, help);
    }
}

/// The kind, label and item name of a per-item field: `cmdstat_get` is
/// (`cmdstat`, `cmd`, `get`), `slave0` (`slave`, `slave`, `0`), and
/// `db3_durability` (`db`, `db`, `3`).
fn item(field: &str) -> Option<(&'static str, &'static str, &str)> {
    for &(prefix, kind, label) in NAMED_ITEMS {
        if let Some(name) = field.strip_prefix(prefix) {
            return Some((kind, label, name));
        }
    }
    for &(kind, label) in NUMBERED_ITEMS {
        let Some(rest) = field.strip_prefix(kind) else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let tail = &rest[digits..];
        if digits > 0 && (tail.is_empty() || tail.starts_with('_')) {
            return Some((kind, label, &rest[..digits]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(info: &str) -> String {
        render(&Bytes::from(info.replace('\n', "\r\n")))
    }

    #[test]
    fn plain_fields_are_gauges_counters_or_info() {
        let out = rendered(
            "# Memory\nused_memory:1024\nused_memory_human:1.00K\nused_memory_peak_perc:12.50%\n\
             # Stats\ntotal_commands_processed:7\nkeyspace_hits:3\n\
             # Persistence\ndurability:full\nwal_failure:\n# Server\ndurakv_version:0.1.0\n",
        );
        assert!(out.contains("durakv_used_memory 1024\n"), "{out}");
        assert!(out.contains("durakv_used_memory_peak_perc 12.5\n"), "{out}");
        assert!(out.contains("durakv_commands_processed_total 7\n"), "{out}");
        assert!(
            out.contains("# TYPE durakv_keyspace_hits_total counter"),
            "{out}"
        );
        assert!(out.contains("durakv_keyspace_hits_total 3\n"), "{out}");
        assert!(
            out.contains("durakv_durability_info{value=\"full\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("durakv_version_info{value=\"0.1.0\"} 1\n"),
            "{out}"
        );
        assert!(!out.contains("human"), "{out}");
        assert!(!out.contains("wal_failure"), "{out}");
        assert!(
            out.contains("# HELP durakv_used_memory INFO Memory: used_memory"),
            "{out}"
        );
    }

    #[test]
    fn items_become_labels() {
        let out = rendered(
            "# Stats\n\
             # Replication\nslave0:ip=127.0.0.1,port=6380,state=online,offset=42,lag=0\n\
             # Persistence\nwal_stream1:watermark_lsn=9,fsyncs=4,avg_fsync_us=250.5\n\
             db3_durability:none\n\
             # Commandstats\ncmdstat_config|get:calls=2,usec=30,usec_per_call=15.00,rejected_calls=0,failed_calls=1\n\
             # Errorstats\nerrorstat_WRONGTYPE:count=5\n\
             # Latencystats\nlatency_percentiles_usec_get:p50=1.003,p99=2.007,p99.9=4.015\n\
             # Keyspace\ndb0:keys=10,expires=1,avg_ttl=0\n\
             # Server\nlistener0:name=tcp,bind=*,bind=-::*,port=6379\n",
        );
        for want in [
            "durakv_slave_offset{slave=\"0\",ip=\"127.0.0.1\",port=\"6380\",state=\"online\"} 42",
            "durakv_wal_stream_fsyncs_total{stream=\"1\"} 4",
            "durakv_wal_stream_avg_fsync_us{stream=\"1\"} 250.5",
            "durakv_db_durability_info{db=\"3\",value=\"none\"} 1",
            "durakv_cmdstat_calls_total{cmd=\"config|get\"} 2",
            "durakv_cmdstat_failed_calls_total{cmd=\"config|get\"} 1",
            "durakv_errorstat_count_total{error=\"WRONGTYPE\"} 5",
            "durakv_latency_percentiles_usec{cmd=\"get\",quantile=\"0.999\"} 4.015",
            "durakv_db_keys{db=\"0\"} 10",
            "durakv_listener_info{listener=\"0\",name=\"tcp\",bind=\"* -::*\",port=\"6379\"} 1",
        ] {
            assert!(out.contains(want), "{want} missing from:\n{out}");
        }
    }

    #[test]
    fn fsync_times_are_a_cumulative_histogram_per_stream() {
        let mut buckets = vec![0; FSYNC_BUCKETS_US.len() + 1];
        buckets[0] = 2; // <= 50 µs
        buckets[3] = 1; // <= 500 µs
        buckets[FSYNC_BUCKETS_US.len()] = 1; // slower than the last bound
        let stats = WalStats {
            streams: vec![durakv_engine::wal::StreamStats {
                fsync_buckets: buckets,
                total_fsync_us: 3_000_400,
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut out = String::new();
        fsync_histograms(&stats, &mut out);
        for want in [
            "# TYPE durakv_wal_fsync_seconds histogram\n",
            "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"0.00005\"} 2\n",
            "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"0.00025\"} 2\n",
            "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"0.0005\"} 3\n",
            "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"2.5\"} 3\n",
            "durakv_wal_fsync_seconds_bucket{stream=\"0\",le=\"+Inf\"} 4\n",
            "durakv_wal_fsync_seconds_sum{stream=\"0\"} 3.0004\n",
            "durakv_wal_fsync_seconds_count{stream=\"0\"} 4\n",
        ] {
            assert!(out.contains(want), "{want} missing from:\n{out}");
        }
    }

    #[test]
    fn reply_waits_are_one_cumulative_histogram() {
        let waits = crate::reply_wait::ReplyWaits::default();
        for us in [10, 40, 300, 3_000_000] {
            waits.record(us);
        }
        let mut out = String::new();
        reply_wait_histogram(&waits.snapshot(), &mut out);
        for want in [
            "# TYPE durakv_reply_wait_seconds histogram\n",
            "durakv_reply_wait_seconds_bucket{le=\"0.00005\"} 2\n",
            "durakv_reply_wait_seconds_bucket{le=\"0.0005\"} 3\n",
            "durakv_reply_wait_seconds_bucket{le=\"2.5\"} 3\n",
            "durakv_reply_wait_seconds_bucket{le=\"+Inf\"} 4\n",
            "durakv_reply_wait_seconds_sum 3.00035\n",
            "durakv_reply_wait_seconds_count 4\n",
        ] {
            assert!(out.contains(want), "{want} missing from:\n{out}");
        }
    }

    #[test]
    fn field_names_that_only_look_like_items_stay_plain() {
        assert_eq!(item("db0"), Some(("db", "db", "0")));
        assert_eq!(item("db12_durability"), Some(("db", "db", "12")));
        assert_eq!(item("slave"), None);
        assert_eq!(item("dbsize"), None);
        assert_eq!(item("slaves_connected"), None);
    }
}
