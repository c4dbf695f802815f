//! The `redis` target: any RESP server (durakv, Redis, compatibles), using
//! YCSB's Redis binding data model.
//!
//! A record is a hash (`HMSET key field value ...`); every inserted key is
//! also added to the sorted set `_indices`, scored by Java's
//! `String.hashCode` of the key, which is what scans walk
//! (`ZRANGEBYSCORE _indices <score> +inf LIMIT 0 n`, then one read per key).
//! Commands that YCSB issues one after another (HMSET + ZADD, DEL + ZREM,
//! the reads of a scan) are pipelined into one write. With
//! `redis.replicas`, each client sends its reads and scans to one of the
//! replicas (client by client, in turn) and its writes to the primary.

use super::{FieldSel, Schema, Status, TargetInfo, Values};
use crate::keys::index_score;
use crate::props::Props;
use crate::resp::{probe_durability, RespConn, RespEndpoint, RespError};
use durakv_protocol::Frame;
use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// Where reads go (`redis.replicas`); empty: to `endpoint`.
    pub replicas: Vec<RespEndpoint>,
    /// The replica the next client connecting reads from.
    next_replica: AtomicUsize,
    pub schema: Arc<Schema>,
    /// Per-operation deadline; a request that exceeds it is an error and its
    /// connection is replaced (its replies could no longer be matched).
    pub op_timeout: Duration,
}

/// `redis.replicas`: `host:port` entries separated by commas (an IPv6
/// host in brackets).
pub fn parse_replicas(list: &str) -> Result<Vec<(String, u16)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (host, port) = entry
                .rsplit_once(':')
                .ok_or_else(|| format!("redis.replicas: '{entry}' is not host:port"))?;
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let port: u16 = port
                .parse()
                .map_err(|_| format!("redis.replicas: bad port in '{entry}'"))?;
            if host.is_empty() {
                return Err(format!("redis.replicas: no host in '{entry}'"));
            }
            Ok((host.to_string(), port))
        })
        .collect()
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
        let endpoint = RespEndpoint {
            host: props.str_or("redis.host", "127.0.0.1"),
            port,
            username,
            password,
            connect_timeout_ms: timeout_ms,
        };
        let replicas = parse_replicas(props.get("redis.replicas").unwrap_or(""))?
            .into_iter()
            .map(|(host, port)| RespEndpoint {
                host,
                port,
                ..endpoint.clone()
            })
            .collect();
        Ok(RedisTarget {
            endpoint,
            replicas,
            next_replica: AtomicUsize::new(0),
            schema,
            op_timeout: Duration::from_millis(timeout_ms.max(1)),
        })
    }

    /// Where the next client sends its reads.
    fn read_endpoint(&self) -> Option<RespEndpoint> {
        if self.replicas.is_empty() {
            return None;
        }
        let i = self.next_replica.fetch_add(1, Ordering::Relaxed) % self.replicas.len();
        Some(self.replicas[i].clone())
    }

    pub async fn prepare(&self) -> Result<TargetInfo, String> {
        let mut conn = ping(&self.endpoint).await?;
        let mut notes = vec![format!("redis target at {}", self.endpoint.addr())];
        for r in &self.replicas {
            ping(r).await?;
        }
        if !self.replicas.is_empty() {
            let list: Vec<String> = self.replicas.iter().map(RespEndpoint::addr).collect();
            notes.push(format!(
                "reads and scans from replicas {} (one per client, in turn); writes to the primary",
                list.join(", ")
            ));
        }
        Ok(TargetInfo {
            durability: probe_durability(&mut conn).await,
            notes,
        })
    }
}

async fn ping(endpoint: &RespEndpoint) -> Result<RespConn, String> {
    let mut conn = RespConn::connect(endpoint)
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", endpoint.addr()))?;
    match conn.call(&[b"PING"]).await {
        Ok(Frame::Error(e)) => Err(format!(
            "PING {} failed: {}",
            endpoint.addr(),
            String::from_utf8_lossy(&e)
        )),
        Ok(_) => Ok(conn),
        Err(e) => Err(format!("PING {} failed: {e}", endpoint.addr())),
    }
}

/// One server connection of a client, reconnected after a failure.
struct Link {
    endpoint: RespEndpoint,
    conn: Option<RespConn>,
    retry_at: Option<Instant>,
}

impl Link {
    async fn open(endpoint: RespEndpoint) -> Result<Link, String> {
        let conn = RespConn::connect(&endpoint)
            .await
            .map_err(|e| format!("cannot connect to {}: {e}", endpoint.addr()))?;
        Ok(Link {
            endpoint,
            conn: Some(conn),
            retry_at: None,
        })
    }

    /// The live connection, reconnecting after a failure.
    async fn get(&mut self, last_error: &mut Option<String>) -> Option<&mut RespConn> {
        if self.conn.is_none() {
            if let Some(at) = self.retry_at {
                tokio::time::sleep_until(at).await;
            }
            match RespConn::connect(&self.endpoint).await {
                Ok(c) => {
                    self.conn = Some(c);
                    self.retry_at = None;
                }
                Err(e) => {
                    *last_error =
                        Some(format!("reconnect to {} failed: {e}", self.endpoint.addr()));
                    self.retry_at =
                        Some(Instant::now() + Duration::from_millis(RECONNECT_BACKOFF_MS));
                    return None;
                }
            }
        }
        self.conn.as_mut()
    }
}

/// Which connection an operation uses.
#[derive(Clone, Copy)]
enum Route {
    Write,
    Read,
}

pub struct RedisClient {
    target: Arc<RedisTarget>,
    primary: Link,
    /// Reads and scans, when `redis.replicas` is set.
    replica: Option<Link>,
    pub last_error: Option<String>,
}

enum Outcome {
    Done(Status),
    Failed(RespError),
}

impl RedisClient {
    pub async fn connect(target: Arc<RedisTarget>) -> Result<RedisClient, String> {
        let primary = Link::open(target.endpoint.clone()).await?;
        let replica = match target.read_endpoint() {
            Some(e) => Some(Link::open(e).await?),
            None => None,
        };
        Ok(RedisClient {
            target,
            primary,
            replica,
            last_error: None,
        })
    }

    fn link(&mut self, route: Route) -> (&mut Link, &mut Option<String>) {
        let RedisClient {
            primary,
            replica,
            last_error,
            ..
        } = self;
        let link = match (route, replica) {
            (Route::Read, Some(r)) => r,
            _ => primary,
        };
        (link, last_error)
    }

    /// The live connection for `route`, reconnecting after a failure.
    async fn conn(&mut self, route: Route) -> Option<&mut RespConn> {
        let (link, last_error) = self.link(route);
        link.get(last_error).await
    }

    fn note_server_error(&mut self, status: Status, frame: Option<&Frame>) -> Status {
        if let Some(Frame::Error(e)) = frame {
            self.last_error = Some(String::from_utf8_lossy(e).into_owned());
        }
        status
    }

    pub async fn read(&mut self, key: &str, fields: FieldSel) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn(Route::Read).await else {
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
        self.settle_with_frame(Route::Read, res)
    }

    pub async fn insert(&mut self, key: &str, values: &Values) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn(Route::Write).await else {
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
        self.settle_with_frame(Route::Write, res)
    }

    pub async fn update(&mut self, key: &str, values: &Values) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn(Route::Write).await else {
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
        self.settle_with_frame(Route::Write, res)
    }

    pub async fn scan(&mut self, start_key: &str, count: usize, fields: FieldSel) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn(Route::Read).await else {
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
        self.settle_with_frame(Route::Read, res)
    }

    pub async fn delete(&mut self, key: &str) -> Status {
        let target = self.target.clone();
        let Some(conn) = self.conn(Route::Write).await else {
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
        self.settle_with_frame(Route::Write, res)
    }

    /// Turns an operation's outcome into its status, remembering why it
    /// failed and dropping a connection whose reply stream is no longer in
    /// step with its requests.
    fn settle_with_frame(
        &mut self,
        route: Route,
        res: Result<(Outcome, Option<Frame>), tokio::time::error::Elapsed>,
    ) -> Status {
        match res {
            Ok((Outcome::Done(s), frame)) => self.note_server_error(s, frame.as_ref()),
            Ok((Outcome::Failed(e), _)) => {
                self.last_error = Some(e.to_string());
                self.link(route).0.conn = None;
                Status::Error
            }
            Err(_) => {
                self.last_error = Some(format!(
                    "request timed out after {} ms (redis.timeout)",
                    self.target.op_timeout.as_millis()
                ));
                self.link(route).0.conn = None;
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
    fn replica_lists_parse() {
        assert_eq!(
            parse_replicas("10.0.0.1:6380, [::1]:6381,").unwrap(),
            vec![("10.0.0.1".to_string(), 6380), ("::1".to_string(), 6381)]
        );
        assert!(parse_replicas("").unwrap().is_empty());
        assert!(parse_replicas("host").is_err());
        assert!(parse_replicas("host:99999").is_err());
        assert!(parse_replicas(":6379").is_err());
    }

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
