//! Stream writes as loggable results: every ID generated, every time and
//! trim cutoff is resolved by the command, so replay never asks the clock
//! or the node layout.

use crate::stream::{Group, NodeLimits, PendingEntry, Stream, StreamId};
use bytes::Bytes;

/// One pending entry's state after a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimed {
    pub id: StreamId,
    pub delivery_time: u64,
    pub delivery_count: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub enum StreamOp {
    /// Creates the stream empty if the key is missing (XGROUP CREATE
    /// MKSTREAM; XADD whose entry a trim removes at once still adds).
    Create,
    /// XADD's entry, with the ID it got.
    Add {
        id: StreamId,
        fields: Vec<(Bytes, Bytes)>,
        limits: NodeLimits,
    },
    /// Removes every entry below `cutoff` (XTRIM and XADD's trim, resolved).
    Trim {
        cutoff: StreamId,
    },
    Delete(Vec<StreamId>),
    /// XSETID.
    SetId {
        last_id: StreamId,
        entries_added: Option<u64>,
        max_deleted_id: Option<StreamId>,
    },
    GroupCreate {
        group: Bytes,
        last_id: StreamId,
        entries_read: i64,
    },
    GroupSetId {
        group: Bytes,
        last_id: StreamId,
        entries_read: i64,
    },
    GroupDestroy {
        group: Bytes,
    },
    ConsumerCreate {
        group: Bytes,
        consumer: Bytes,
        time: u64,
    },
    ConsumerDelete {
        group: Bytes,
        consumer: Bytes,
    },
    /// XREADGROUP: the consumer is seen at `time`; `new` entries become
    /// pending for it (unless `noack`) and move the group to `last`;
    /// `history` entries it re-read count one more delivery.
    Deliver {
        group: Bytes,
        consumer: Bytes,
        time: u64,
        new: Vec<StreamId>,
        noack: bool,
        last: Option<(StreamId, i64)>,
        history: Vec<StreamId>,
    },
    Ack {
        group: Bytes,
        ids: Vec<StreamId>,
    },
    /// XCLAIM/XAUTOCLAIM: `claimed` become the consumer's with these
    /// details, `dropped` (deleted from the stream) leave the PEL.
    Claim {
        group: Bytes,
        consumer: Bytes,
        time: u64,
        claimed: Vec<Claimed>,
        dropped: Vec<StreamId>,
        last_id: Option<StreamId>,
    },
}

impl StreamOp {
    pub fn creates(&self) -> bool {
        matches!(self, StreamOp::Create | StreamOp::Add { .. })
    }

    /// Removals: applied to a missing key they do nothing.
    pub fn only_removes(&self) -> bool {
        matches!(
            self,
            StreamOp::Trim { .. }
                | StreamOp::Delete(_)
                | StreamOp::Ack { .. }
                | StreamOp::GroupDestroy { .. }
                | StreamOp::ConsumerDelete { .. }
        )
    }
}

fn group<'a>(s: &'a mut Stream, name: &[u8]) -> Result<&'a mut Group, &'static str> {
    s.groups.get_mut(name).ok_or("no such consumer group")
}

fn seen(g: &mut Group, consumer: &Bytes, time: u64) {
    g.consumers.entry(consumer.clone()).or_default().seen_time = time;
}

/// Seen, and got at least one entry.
fn active(g: &mut Group, consumer: &Bytes, time: u64) {
    let c = g.consumers.entry(consumer.clone()).or_default();
    c.seen_time = time;
    c.active_time = Some(time);
}

pub fn apply(s: &mut Stream, op: &StreamOp) -> Result<(), &'static str> {
    match op {
        StreamOp::Create => {}
        StreamOp::Add { id, fields, limits } => {
            if !s.last_id.is_zero() && *id <= s.last_id {
                return Err("stream ID not greater than the last");
            }
            s.add(*id, fields, *limits);
        }
        StreamOp::Trim { cutoff } => {
            s.remove_before(*cutoff);
        }
        StreamOp::Delete(ids) => {
            for id in ids {
                s.delete(*id);
            }
        }
        StreamOp::SetId {
            last_id,
            entries_added,
            max_deleted_id,
        } => {
            s.last_id = *last_id;
            if let Some(n) = entries_added {
                s.entries_added = *n;
            }
            if let Some(m) = max_deleted_id {
                s.max_deleted_id = *m;
            }
        }
        StreamOp::GroupCreate {
            group,
            last_id,
            entries_read,
        } => {
            if s.groups.contains_key(group) {
                return Err("consumer group exists");
            }
            s.groups
                .insert(group.clone(), Group::new(*last_id, *entries_read));
        }
        StreamOp::GroupSetId {
            group: name,
            last_id,
            entries_read,
        } => {
            let g = group(s, name)?;
            g.last_id = *last_id;
            g.entries_read = *entries_read;
        }
        StreamOp::GroupDestroy { group } => {
            s.groups.remove(group);
        }
        StreamOp::ConsumerCreate {
            group: name,
            consumer,
            time,
        } => {
            let g = group(s, name)?;
            seen(g, consumer, *time);
        }
        StreamOp::ConsumerDelete {
            group: name,
            consumer,
        } => {
            let g = group(s, name)?;
            if let Some(c) = g.consumers.remove(consumer) {
                for id in c.pending {
                    g.pel.remove(&id);
                }
            }
        }
        StreamOp::Deliver {
            group: name,
            consumer,
            time,
            new,
            noack,
            last,
            history,
        } => {
            let g = group(s, name)?;
            if new.is_empty() && history.is_empty() {
                seen(g, consumer, *time);
            } else {
                active(g, consumer, *time);
            }
            if let Some((id, read)) = last {
                g.last_id = *id;
                g.entries_read = *read;
            }
            if !*noack {
                for id in new {
                    g.pend(
                        *id,
                        PendingEntry {
                            consumer: consumer.clone(),
                            delivery_time: *time,
                            delivery_count: 1,
                        },
                    );
                }
            }
            for id in history {
                if let Some(p) = g.pel.get_mut(id) {
                    p.delivery_time = *time;
                    p.delivery_count += 1;
                }
            }
        }
        StreamOp::Ack { group: name, ids } => {
            let g = group(s, name)?;
            for id in ids {
                g.unpend(*id);
            }
        }
        StreamOp::Claim {
            group: name,
            consumer,
            time,
            claimed,
            dropped,
            last_id,
        } => {
            let g = group(s, name)?;
            if !claimed.is_empty() {
                active(g, consumer, *time);
            }
            for id in dropped {
                g.unpend(*id);
            }
            for c in claimed {
                g.pend(
                    c.id,
                    PendingEntry {
                        consumer: consumer.clone(),
                        delivery_time: c.delivery_time,
                        delivery_count: c.delivery_count,
                    },
                );
            }
            if let Some(l) = last_id {
                if *l > g.last_id {
                    g.last_id = *l;
                }
            }
        }
    }
    Ok(())
}
