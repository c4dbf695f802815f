//! The `redis` target: any RESP server (durakv, Redis, compatibles), using
//! YCSB's Redis binding data model.
//!
//! A record is a hash (`HMSET key field value ...`); every inserted key is
//! also added to the sorted set `_indices`, scored by Java's
//! `String.hashCode` of the key, which is what scans walk
//! (`ZRANGEBYSCORE _indices <score> +inf LIMIT 0 n`, then one read per key).
//! Commands that YCSB issues one after another (HMSET + ZADD, DEL + ZREM,
//! the reads of a scan) are pipelined into one write.

use super::{FieldSel, Schema, Status, TargetInfo, Values};
use crate::keys::index_score;
use crate::props::Props;
use crate::resp::{probe_durability, RespConn, RespEndpoint, RespError};
use durakv_protocol::Frame;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// YCSB's name for the scan index.
pub const INDEX_KEY: &[u8] = b"_indices";

/// Pause before retrying a failed reconnect, so a dead server produces a
/// steady trickle of counted errors rather than a busy loop.
const RECONNECT_BACKOFF_MS: u64 = 100;

pub struct RedisTarget {
    pub endpoint: RespEndpoint,
    pub schema: Arc<Schema>,
    /// Per-operation deadline; a request that exceeds it is an error and its
    /// connection is replaced (its replies could no longer be matched).
    pub op_timeout: Duration,
}

impl RedisTarget {
    pub fn new(props: &Props, schema: Arc<Schema>) -> Result<Self, String> {
        let port = props
            .u64_or("redis.port", 6379)
            .map_err(|e| e.to_string())?;
        let port = u16::try_from(port).map_err(|_| format!("redis.port={port} out of range"))?;
        let username = props
            .get("redis.username")
            .or_else(|| props.get("redis.cusername"))
            .map(str::to_string);
        let password = props
            .get("redis.password")
            .or_else(|| props.get("redis.cpassword"))
            .map(str::to_string);
        let timeout_ms = props
            .u64_or("redis.timeout", 2000)
            .map_err(|e| e.to_string())?;
        Ok(RedisTarget {
            endpoint: RespEndpoint {
                host: props.str_or("redis.host", "127.0.0.1"),
                port,
                username,
                password,
                connect_timeout_ms: timeout_ms,
            },
            schema,
            op_timeout: Duration::from_millis(timeout_ms.max(1)),
        })
    }

    pub async fn prepare(&self) -> Result<TargetInfo, String> {
        let mut conn = RespConn::connect(&self.endpoint)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", self.endpoint.addr()))?;
        match conn.call(&[b"PING"]).await {
            Ok(Frame::Error(e)) => {
                return Err(format!("PING failed: {}", String::from_utf8_lossy(&e)));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("PING failed: {e}")),
        }
        Ok(TargetInfo {
            durability: probe_durability(&mut conn).await,
            notes: vec![format!("redis target at {}", self.endpoint.addr())],
        })
    }
}

pub struct RedisClient {
    target: Arc<RedisTarget>,
    conn: Option<RespConn>,
    retry_at: Option<Instant>,
    pub last_error: Option<String>,
}

enum Outcome {
    Done(Status),
    Failed(RespError),
}

impl RedisClient {
    pub async fn connect(target: Arc<RedisTarget>) -> Result<RedisClient, String> {
        let conn = RespConn::connect(&target.endpoint)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", target.endpoint.addr()))?;
        Ok(RedisClient {
            target,
            conn: Some(conn),
            retry_at: None,
            last_error: None,
        })
    }

    /// The live connection, reconnecting after a failure.
    async fn conn(&mut self) -> Option<&mut RespConn> {
        if self.conn.is_none() {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
            }
            match RespConn::connect(&self.target.endpoint).await {
                Ok(c) => {
                    self.conn = Some(c);
                    self.retry_at = None;
                }
                Err(e) => {
                    self.last_error = Some(format!("reconnect failed: {e}"));
                    self.retry_at =
                        Some(Instant::now() + Duration::from_millis(RECONNECT_BACKOFF_MS));
                    return None;
                }
            }
        }
        self.conn.as_mut()
    }

    fn note_server_error(&mut self, status: Status, frame: Option<&Frame>) -> Status {
        if let Some(Frame::Error(e)) = frame {
            self.last_error = Some(String::from_utf8_lossy(e).into_owned());
        }
        status
    }

    pub async fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn().await else {
            return Status::Error;
        };
        let res = tokio::time::timeout(target.op_timeout, async {
            push_read(conn, key, fields, &target.schema);
            match conn.call_pushed().await {
                Ok(f) => {
                    let status = read_status(&f);
                    (Outcome::Done(status), f.is_error().then_some(f))
                }
                Err(e) => (Outcome::Failed(e), None),
            }
        })
        .await;
        self.settle_with_frame(res)
    }

    pub async fn insert(&mut self, key: &str, values: &Values) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn().await else {
            return Status::Error;
        };
        let res = tokio::time::timeout(target.op_timeout, async {
            push_hmset(conn, key, values, &target.schema);
            let score = index_score(key);
            conn.push(&[b"ZADD", INDEX_KEY, score.as_bytes(), key.as_bytes()]);
            if let Err(e) = conn.flush().await {
                return (Outcome::Failed(e), None);
            }
            let set = match conn.read_reply().await {
                Ok(f) => f,
                Err(e) => return (Outcome::Failed(e), None),
            };
            let zadd = match conn.read_reply().await {
                Ok(f) => f,
                Err(e) => return (Outcome::Failed(e), None),
            };
            if set.is_error() {
                return (Outcome::Done(Status::Error), Some(set));
            }
            if zadd.is_error() {
                return (Outcome::Done(Status::Error), Some(zadd));
            }
            (Outcome::Done(Status::Ok), None)
        })
        .await;
        self.settle_with_frame(res)
    }

    pub async fn update(&mut self, key: &str, values: &Values) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn().await else {
            return Status::Error;
        };
        let res = tokio::time::timeout(target.op_timeout, async {
            push_hmset(conn, key, values, &target.schema);
            match conn.call_pushed().await {
                Ok(f) if f.is_error() => (Outcome::Done(Status::Error), Some(f)),
                Ok(_) => (Outcome::Done(Status::Ok), None),
                Err(e) => (Outcome::Failed(e), None),
            }
        })
        .await;
        self.settle_with_frame(res)
    }

    pub async fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn().await else {
            return Status::Error;
        };
        let res = tokio::time::timeout(target.op_timeout, async {
            let score = index_score(start_key);
            let mut n = itoa::Buffer::new();
            let limit = n.format(count);
            conn.push(&[
                b"ZRANGEBYSCORE",
                INDEX_KEY,
                score.as_bytes(),
                b"+inf",
                b"LIMIT",
                b"0",
                limit.as_bytes(),
            ]);
            let keys = match conn.call_pushed().await {
                Ok(Frame::Array(items)) | Ok(Frame::Set(items)) => items,
                Ok(f) if f.is_error() => return (Outcome::Done(Status::Error), Some(f)),
                Ok(_) => return (Outcome::Done(Status::Error), None),
                Err(e) => return (Outcome::Failed(e), None),
            };
            let mut sent = 0;
            for k in &keys {
                if let Frame::Bulk(k) = k {
                    push_read_bytes(conn, k, fields, &target.schema);
                    sent += 1;
                }
            }
            if let Err(e) = conn.flush().await {
                return (Outcome::Failed(e), None);
            }
            let mut status = Status::Ok;
            let mut bad = None;
            for _ in 0..sent {
                match conn.read_reply().await {
                    Ok(f) if f.is_error() => {
                        status = Status::Error;
                        bad = Some(f);
                    }
                    Ok(_) => {}
                    Err(e) => return (Outcome::Failed(e), None),
                }
            }
            (Outcome::Done(status), bad)
        })
        .await;
        self.settle_with_frame(res)
    }

    pub async fn delete(&mut self, key: &str) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn().await else {
            return Status::Error;
        };
        let res = tokio::time::timeout(target.op_timeout, async {
            conn.push(&[b"DEL", key.as_bytes()]);
            conn.push(&[b"ZREM", INDEX_KEY, key.as_bytes()]);
            if let Err(e) = conn.flush().await {
                return (Outcome::Failed(e), None);
            }
            let del = match conn.read_reply().await {
                Ok(f) => f,
                Err(e) => return (Outcome::Failed(e), None),
            };
            let zrem = match conn.read_reply().await {
                Ok(f) => f,
                Err(e) => return (Outcome::Failed(e), None),
            };
            match (&del, &zrem) {
                (Frame::Error(_), _) => (Outcome::Done(Status::Error), Some(del)),
                (_, Frame::Error(_)) => (Outcome::Done(Status::Error), Some(zrem)),
                // YCSB's binding: an error only if neither removed anything.
                (Frame::Integer(0), Frame::Integer(0)) => (Outcome::Done(Status::Error), None),
                _ => (Outcome::Done(Status::Ok), None),
            }
        })
        .await;
        self.settle_with_frame(res)
    }

    /// Turns an operation's outcome into its status, remembering why it
    /// failed and dropping a connection whose reply stream is no longer in
    /// step with its requests.
    fn settle_with_frame(
        &mut self,
        res: Result<(Outcome, Option<Frame>), tokio::time::error::Elapsed>,
    ) -> Status {
        match res {
            Ok((Outcome::Done(s), frame)) => self.note_server_error(s, frame.as_ref()),
            Ok((Outcome::Failed(e), _)) => {
                self.last_error = Some(e.to_string());
                self.conn = None;
                Status::Error
            }
            Err(_) => {
                self.last_error = Some(format!(
                    "request timed out after {} ms (redis.timeout)",
                    self.target.op_timeout.as_millis()
                ));
                self.conn = None;
                Status::Error
            }
        }
    }
}

/// Classifies a read reply: an empty hash or a nil field is NOT_FOUND.
fn read_status(f: &Frame) -> Status {
    match f {
        Frame::Error(_) => Status::Error,
        Frame::Array(items) | Frame::Set(items) => {
            if items.is_empty() || items.iter().all(|i| matches!(i, Frame::Null)) {
                Status::NotFound
            } else {
                Status::Ok
            }
        }
        Frame::Map(pairs) if pairs.is_empty() => Status::NotFound,
        Frame::Map(_) => Status::Ok,
        Frame::Null | Frame::NullArray => Status::NotFound,
        _ => Status::Error,
    }
}

fn push_read(conn: &mut RespConn, key: &str, fields: FieldSel, schema: &Schema) {
    push_read_bytes(conn, key.as_bytes(), fields, schema)
}

fn push_read_bytes(conn: &mut RespConn, key: &[u8], fields: FieldSel, schema: &Schema) {
    match fields {
        FieldSel::All => conn.push(&[b"HGETALL", key]),
        FieldSel::One(i) => {
            let name = schema
                .field_names
                .get(i)
                .map(String::as_bytes)
                .unwrap_or(b"field0");
            conn.push(&[b"HMGET", key, name]);
        }
    }
}

fn push_hmset(conn: &mut RespConn, key: &str, values: &Values, schema: &Schema) {
    conn.begin(2 + 2 * values.len());
    conn.arg(b"HMSET");
    conn.arg(key.as_bytes());
    for (i, v) in values {
        let name = schema
            .field_names
            .get(*i)
            .map(String::as_bytes)
            .unwrap_or(b"field0");
        conn.arg(name);
        conn.arg(v.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn read_status_classifies_replies() {
        assert_eq!(read_status(&Frame::Array(vec![])), Status::NotFound);
        assert_eq!(
            read_status(&Frame::Array(vec![Frame::Null])),
            Status::NotFound
        );
        assert_eq!(
            read_status(&Frame::Array(vec![Frame::Bulk(Bytes::from_static(b"v"))])),
            Status::Ok
        );
        assert_eq!(read_status(&Frame::error("ERR x")), Status::Error);
    }
}
