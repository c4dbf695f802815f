//! Stream changes as the commands Redis 7.0 propagates for them, so both a
//! durakv and a Redis replica end with the same entries, groups, consumers
//! and pending entries. Deliveries and claims carry their results (IDs,
//! times, counts), as XCLAIM ... FORCE JUSTID does, so the replica never
//! reads its own clock or chooses an entry.

use super::effects::{cmd, cmd_tail, num};
use bytes::Bytes;
use durakv_engine::mutation::StreamOp;
use durakv_engine::stream::StreamId;

/// The commands that reproduce `op` on `key`, in order (none for the
/// empty stream XGROUP CREATE MKSTREAM makes: its group's command makes
/// it too).
pub fn commands(key: &[u8], op: &StreamOp) -> impl Iterator<Item = Vec<u8>> {
    let mut out = Vec::new();
    match op {
        StreamOp::Create => {}
        StreamOp::Add { id, fields, .. } => {
            let id = num(id);
            out.push(cmd_tail(
                &[b"XADD", key, &id],
                fields.iter().flat_map(|(f, v)| [&f[..], &v[..]]),
            ));
        }
        StreamOp::Trim { cutoff } => out.push(cmd(&[b"XTRIM", key, b"MINID", &num(cutoff)])),
        StreamOp::Delete(ids) => out.push(with_ids(&[b"XDEL", key], ids, &[])),
        StreamOp::SetId {
            last_id,
            entries_added,
            max_deleted_id,
        } => {
            let mut args: Vec<Bytes> = vec![num(last_id)];
            if let Some(n) = entries_added {
                args.extend([Bytes::from_static(b"ENTRIESADDED"), num(n)]);
            }
            if let Some(m) = max_deleted_id {
                args.extend([Bytes::from_static(b"MAXDELETEDID"), num(m)]);
            }
            out.push(cmd_tail(&[b"XSETID", key], args.iter().map(|a| &a[..])));
        }
        StreamOp::GroupCreate {
            group,
            last_id,
            entries_read,
        } => out.push(cmd(&[
            b"XGROUP",
            b"CREATE",
            key,
            group,
            &num(last_id),
            b"MKSTREAM",
            b"ENTRIESREAD",
            &num(entries_read),
        ])),
        StreamOp::GroupSetId {
            group,
            last_id,
            entries_read,
        } => out.push(set_group_id(key, group, *last_id, *entries_read)),
        StreamOp::GroupDestroy { group } => out.push(cmd(&[b"XGROUP", b"DESTROY", key, group])),
        StreamOp::ConsumerCreate {
            group, consumer, ..
        } => out.push(create_consumer(key, group, consumer)),
        StreamOp::ConsumerDelete { group, consumer } => {
            out.push(cmd(&[b"XGROUP", b"DELCONSUMER", key, group, consumer]))
        }
        StreamOp::Ack { group, ids } => out.push(with_ids(&[b"XACK", key, group], ids, &[])),
        StreamOp::Deliver {
            group,
            consumer,
            time,
            new,
            noack,
            last,
            history,
        } => {
            let head: [&[u8]; 5] = [b"XCLAIM", key, group, consumer, b"0"];
            let time = num(time);
            let claims_new = !*noack && !new.is_empty();
            if claims_new {
                // Pending for the consumer, delivered once, now.
                let tail: [&[u8]; 6] = [b"TIME", &time, b"RETRYCOUNT", b"1", b"FORCE", b"JUSTID"];
                out.push(with_ids(&head, new, &tail));
            }
            if !history.is_empty() {
                // Re-read from its own pending list: delivered once more,
                // now (an XCLAIM without JUSTID counts the delivery).
                out.push(with_ids(&head, history, &[b"TIME", &time]));
            }
            if !claims_new && history.is_empty() {
                // Seen by the group even when it got nothing.
                out.push(create_consumer(key, group, consumer));
            }
            if let Some((id, read)) = last {
                out.push(set_group_id(key, group, *id, *read));
            }
        }
        StreamOp::Claim {
            group,
            consumer,
            claimed,
            dropped,
            last_id,
            ..
        } => {
            if !dropped.is_empty() {
                // Deleted from the stream: they leave the pending list.
                out.push(with_ids(&[b"XACK", key, group], dropped, &[]));
            }
            // The group's last ID moves with the first claim.
            let lastid = last_id.map(num);
            let mut pending_lastid = lastid.as_deref();
            for c in claimed {
                let (time, count) = (num(c.delivery_time), num(c.delivery_count));
                let mut tail: Vec<&[u8]> =
                    vec![b"TIME", &time, b"RETRYCOUNT", &count, b"FORCE", b"JUSTID"];
                if let Some(l) = pending_lastid.take() {
                    tail.extend([&b"LASTID"[..], l]);
                }
                out.push(with_ids(
                    &[b"XCLAIM", key, group, consumer, b"0"],
                    &[c.id],
                    &tail,
                ));
            }
            if let Some(l) = pending_lastid {
                // Nothing claimed, but the group's last ID moves: 0-0 is in
                // no pending list, so only LASTID acts.
                out.push(with_ids(
                    &[b"XCLAIM", key, group, consumer, b"0"],
                    &[StreamId::MIN],
                    &[b"JUSTID", b"LASTID", l],
                ));
            }
        }
    }
    out.into_iter()
}

/// `head`, the IDs, then `tail`.
fn with_ids(head: &[&[u8]], ids: &[StreamId], tail: &[&[u8]]) -> Vec<u8> {
    let ids: Vec<Bytes> = ids.iter().map(num).collect();
    cmd_tail(head, ids.iter().map(|i| &i[..]).chain(tail.iter().copied()))
}

fn set_group_id(key: &[u8], group: &[u8], last_id: StreamId, entries_read: i64) -> Vec<u8> {
    cmd(&[
        b"XGROUP",
        b"SETID",
        key,
        group,
        &num(last_id),
        b"ENTRIESREAD",
        &num(entries_read),
    ])
}

fn create_consumer(key: &[u8], group: &[u8], consumer: &[u8]) -> Vec<u8> {
    cmd(&[b"XGROUP", b"CREATECONSUMER", key, group, consumer])
}
