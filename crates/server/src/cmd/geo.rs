//! Geo commands: GEOADD, GEODIST, GEOHASH, GEOPOS, GEOSEARCH,
//! GEOSEARCHSTORE and GEORADIUS[BYMEMBER][_RO]. A geo set is a sorted set
//! whose scores are Redis's 52-bit geohashes ([`crate::geohash`]), so the
//! sorted-set commands work on it and its writes are sorted-set writes.

use super::zsets::store_scored;
use super::{apply, read_as, syntax};
use crate::command::{flags::*, spec, CommandSpec, Ctx, Handler, Keys, Reply, FIRST_KEY};
use crate::geohash::{self, Search, Shape};
use crate::util::{arg_f64, is, parse_f64};
use bytes::Bytes;
use durakv_engine::mutation::KeyOp;
use durakv_engine::txn::Txn;
use durakv_engine::value::{parse_i64, Value};
use durakv_engine::zset::ZSet;
use durakv_protocol::Frame;
use std::collections::HashMap;
use std::ops::Bound;

#[rustfmt::skip]
pub fn commands() -> Vec<CommandSpec> {
    vec![
        spec("geoadd", -5, WRITE | DENYOOM, FIRST_KEY, Handler::Data(geoadd), "geo", "Stores members at longitude/latitude positions in a geo index."),
        spec("geodist", -4, READONLY, FIRST_KEY, Handler::Data(geodist), "geo", "Measures how far apart two members of a geo index are."),
        spec("geohash", -2, READONLY, FIRST_KEY, Handler::Data(geohash_cmd), "geo", "Encodes members' positions as geohash strings."),
        spec("geopos", -2, READONLY, FIRST_KEY, Handler::Data(geopos), "geo", "Looks up geo index members' coordinates."),
        spec("georadius", -6, WRITE | DENYOOM, Keys::Custom(radius_keys), Handler::Data(georadius), "geo", "Finds members within a radius of a point, optionally saving them to a key."),
        spec("georadius_ro", -6, READONLY, FIRST_KEY, Handler::Data(georadius_ro), "geo", "Finds members within a radius of a point, without writing."),
        spec("georadiusbymember", -5, WRITE | DENYOOM, Keys::Custom(radius_keys), Handler::Data(georadiusbymember), "geo", "Finds members within a radius of another member, optionally saving them to a key."),
        spec("georadiusbymember_ro", -5, READONLY, FIRST_KEY, Handler::Data(georadiusbymember_ro), "geo", "Finds members within a radius of another member, without writing."),
        spec("geosearch", -7, READONLY, FIRST_KEY, Handler::Data(geosearch), "geo", "Finds members inside a circle or rectangle around a point or member."),
        spec("geosearchstore", -8, WRITE | DENYOOM, crate::command::TWO_KEYS, Handler::Data(geosearchstore), "geo", "Finds members inside a circle or rectangle and saves them to a key."),
    ]
}

/// GEORADIUS[BYMEMBER]: the source, and the key after any STORE or
/// STOREDIST (locked even if the word turns out to be something else).
fn radius_keys(args: &[Bytes]) -> Vec<usize> {
    let mut keys = vec![1];
    for (i, w) in args.windows(2).enumerate().skip(2) {
        if is(&w[0], "store") || is(&w[0], "storedist") {
            keys.push(i + 1);
        }
    }
    keys
}

fn read_zset<'t>(txn: &'t mut Txn<'_>, db: usize, key: &[u8]) -> Result<Option<&'t ZSet>, Frame> {
    read_as(txn, db, key, Value::as_zset)
}

/// Redis's `%f` rendering of a coordinate in its error message.
fn lonlat(args: &[Bytes]) -> Result<(f64, f64), Frame> {
    let lon = arg_f64(&args[0])?;
    let lat = arg_f64(&args[1])?;
    if !geohash::valid(lon, lat) {
        return Err(Frame::error(format!(
            "ERR invalid longitude,latitude pair {lon:.6},{lat:.6}"
        )));
    }
    Ok((lon, lat))
}

/// Meters per unit.
fn unit(arg: &[u8]) -> Result<f64, Frame> {
    if is(arg, "m") {
        Ok(1.0)
    } else if is(arg, "km") {
        Ok(1000.0)
    } else if is(arg, "ft") {
        Ok(0.3048)
    } else if is(arg, "mi") {
        Ok(1609.34)
    } else {
        Err(Frame::error(
            "ERR unsupported unit provided. please use M, KM, FT, MI",
        ))
    }
}

fn number(arg: &[u8], what: &'static str) -> Result<f64, Frame> {
    parse_f64(arg).ok_or_else(|| Frame::error(what))
}

/// `radius unit`: (radius in the unit, meters per unit).
fn radius_arg(args: &[Bytes]) -> Result<(f64, f64), Frame> {
    let r = number(&args[0], "ERR need numeric radius")?;
    if r < 0.0 {
        return Err(Frame::error("ERR radius cannot be negative"));
    }
    Ok((r, unit(&args[1])?))
}

/// `width height unit`.
fn box_arg(args: &[Bytes]) -> Result<(f64, f64, f64), Frame> {
    let w = number(&args[0], "ERR need numeric width")?;
    let h = number(&args[1], "ERR need numeric height")?;
    if h < 0.0 || w < 0.0 {
        return Err(Frame::error("ERR height or width cannot be negative"));
    }
    Ok((w, h, unit(&args[2])?))
}

/// A coordinate as Redis's "human" long double: 17 decimals, trailing
/// zeros dropped.
fn human(v: f64) -> String {
    let s = format!("{v:.17}");
    let s = s.trim_end_matches('0');
    s.trim_end_matches('.').to_string()
}

fn coord_frame(v: f64) -> Frame {
    Frame::DoubleText(Bytes::from(human(v)))
}

/// Distances always go out as bulk strings with four decimals.
fn distance_frame(d: f64) -> Frame {
    Frame::Bulk(Bytes::from(format!("{d:.4}")))
}

fn member_pos(z: &ZSet, member: &[u8]) -> Option<(f64, f64)> {
    z.score(member).and_then(geohash::decode_score)
}

// ---------------------------------------------------------------------------

fn geoadd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut i = 2;
    while i < args.len() {
        let a = &args[i];
        if is(a, "nx") {
            nx = true;
        } else if is(a, "xx") {
            xx = true;
        } else if is(a, "ch") {
            ch = true;
        } else {
            break;
        }
        i += 1;
    }
    let triples = &args[i..];
    // Options alone are a syntax error too, as the ZADD Redis hands
    // GEOADD to finds no elements.
    if triples.is_empty() || !triples.len().is_multiple_of(3) || (nx && xx) {
        return Err(syntax());
    }
    let mut scored = Vec::with_capacity(triples.len() / 3);
    for t in triples.chunks_exact(3) {
        let (lon, lat) = lonlat(&t[..2])?;
        let score = geohash::score(lon, lat).ok_or_else(syntax)?;
        scored.push((score as f64, t[2].clone()));
    }
    let db = ctx.db();
    let key = &args[1];
    let z = read_zset(txn, db, key)?;
    let (mut added, mut changed) = (0i64, 0i64);
    let mut changes: Vec<(f64, Bytes)> = Vec::new();
    let mut slot: HashMap<Bytes, usize> = HashMap::new();
    for (score, member) in scored {
        let cur = match slot.get(&member) {
            Some(&k) => Some(changes[k].0),
            None => z.and_then(|z| z.score(&member)),
        };
        match cur {
            Some(_) if nx => continue,
            None if xx => continue,
            Some(c) if c == score => continue,
            Some(_) => changed += 1,
            None => added += 1,
        }
        match slot.get(&member) {
            Some(&k) => changes[k].0 = score,
            None => {
                slot.insert(member.clone(), changes.len());
                changes.push((score, member));
            }
        }
    }
    if !changes.is_empty() {
        apply(txn, db, key, KeyOp::ZAdd(changes))?;
    }
    Ok(Frame::Integer(if ch { added + changed } else { added }))
}

fn geodist(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let to_meter = match args.len() {
        4 => 1.0,
        5 => unit(&args[4])?,
        _ => return Err(syntax()),
    };
    let Some(z) = read_zset(txn, ctx.db(), &args[1])? else {
        return Ok(Frame::Null);
    };
    match (member_pos(z, &args[2]), member_pos(z, &args[3])) {
        (Some((lon1, lat1)), Some((lon2, lat2))) => Ok(distance_frame(
            geohash::distance(lon1, lat1, lon2, lat2) / to_meter,
        )),
        _ => Ok(Frame::Null),
    }
}

fn geohash_cmd(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|m| {
                z.and_then(|z| z.score(m))
                    .and_then(geohash::standard_string)
                    .map_or(Frame::Null, |s| Frame::Bulk(Bytes::from(s)))
            })
            .collect(),
    ))
}

fn geopos(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    let z = read_zset(txn, ctx.db(), &args[1])?;
    Ok(Frame::Array(
        args[2..]
            .iter()
            .map(|m| {
                z.and_then(|z| member_pos(z, m))
                    .map_or(Frame::NullArray, |(lon, lat)| {
                        Frame::Array(vec![coord_frame(lon), coord_frame(lat)])
                    })
            })
            .collect(),
    ))
}

// ---------------------------------------------------------------------------
// Searches.

#[derive(Clone, Copy, PartialEq)]
enum Form {
    Radius,
    RadiusByMember,
    Search,
    SearchStore,
}

#[derive(Clone, Copy, PartialEq)]
enum Sort {
    None,
    Asc,
    Desc,
}

struct Found {
    member: Bytes,
    score: f64,
    dist: f64,
    lon: f64,
    lat: f64,
}

fn georadius(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::Radius, true)
}

fn georadius_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::Radius, false)
}

fn georadiusbymember(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::RadiusByMember, true)
}

fn georadiusbymember_ro(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::RadiusByMember, false)
}

fn geosearch(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::Search, false)
}

fn geosearchstore(ctx: &mut Ctx<'_>, txn: &mut Txn<'_>, args: &[Bytes]) -> Reply {
    search(ctx, txn, args, Form::SearchStore, false)
}

/// Every search command, parsed in Redis's order so the same bad
/// arguments get the same error.
fn search(
    ctx: &mut Ctx<'_>,
    txn: &mut Txn<'_>,
    args: &[Bytes],
    form: Form,
    may_store: bool,
) -> Reply {
    let db = ctx.db();
    let src_idx = if form == Form::SearchStore { 2 } else { 1 };
    let z = read_zset(txn, db, &args[src_idx])?;
    let geosearch = matches!(form, Form::Search | Form::SearchStore);
    // Centre (lon, lat) and shape (in meters) as they are parsed.
    let mut centre: Option<(f64, f64)> = None;
    let mut shape: Option<(Shape, f64)> = None;
    let mut store: Option<Bytes> = None;
    let mut storedist = false;
    let base = match form {
        Form::Radius => {
            centre = Some(lonlat(&args[2..4])?);
            let (r, conv) = radius_arg(&args[4..6])?;
            shape = Some((Shape::Radius(r), conv));
            6
        }
        Form::RadiusByMember => {
            if let Some(z) = z {
                let pos = member_pos(z, &args[2]).ok_or_else(undecodable)?;
                centre = Some(pos);
                let (r, conv) = radius_arg(&args[3..5])?;
                shape = Some((Shape::Radius(r), conv));
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            store = Some(args[1].clone());
            3
        }
    };
    let (mut withdist, mut withhash, mut withcoord, mut any) = (false, false, false, false);
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let mut sort = Sort::None;
    let mut count: i64 = 0;
    let rest = &args[base..];
    let mut i = 0;
    while i < rest.len() {
        let a = &rest[i];
        let left = rest.len() - i - 1;
        if is(a, "withdist") {
            withdist = true;
        } else if is(a, "withhash") {
            withhash = true;
        } else if is(a, "withcoord") {
            withcoord = true;
        } else if is(a, "any") {
            any = true;
        } else if is(a, "asc") {
            sort = Sort::Asc;
        } else if is(a, "desc") {
            sort = Sort::Desc;
        } else if is(a, "count") && left >= 1 {
            count = parse_i64(&rest[i + 1])
                .ok_or_else(|| crate::errors::err(crate::errors::NOT_INTEGER))?;
            if count <= 0 {
                return Err(Frame::error("ERR COUNT must be > 0"));
            }
            i += 1;
        } else if (is(a, "store") || is(a, "storedist")) && left >= 1 && may_store && !geosearch {
            store = Some(rest[i + 1].clone());
            storedist = is(a, "storedist");
            i += 1;
        } else if is(a, "storedist") && form == Form::SearchStore {
            storedist = true;
        } else if is(a, "frommember") && left >= 1 && geosearch && !fromloc {
            if let Some(z) = z {
                centre = Some(member_pos(z, &rest[i + 1]).ok_or_else(undecodable)?);
            }
            frommember = true;
            i += 1;
        } else if is(a, "fromlonlat") && left >= 2 && geosearch && !frommember {
            centre = Some(lonlat(&rest[i + 1..i + 3])?);
            fromloc = true;
            i += 2;
        } else if is(a, "byradius") && left >= 2 && geosearch && !bybox {
            let (r, conv) = radius_arg(&rest[i + 1..i + 3])?;
            shape = Some((Shape::Radius(r), conv));
            byradius = true;
            i += 2;
        } else if is(a, "bybox") && left >= 3 && geosearch && !byradius {
            let (w, h, conv) = box_arg(&rest[i + 1..i + 4])?;
            shape = Some((
                Shape::Box {
                    width: w,
                    height: h,
                },
                conv,
            ));
            bybox = true;
            i += 3;
        } else {
            return Err(syntax());
        }
        i += 1;
    }
    if store.is_some() && (withdist || withhash || withcoord) {
        let who = if form == Form::SearchStore {
            "GEOSEARCHSTORE"
        } else {
            "STORE option in GEORADIUS"
        };
        return Err(Frame::error(format!(
            "ERR {who} is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
        )));
    }
    let name = String::from_utf8_lossy(&args[0]).into_owned();
    if geosearch && !(frommember || fromloc) {
        return Err(Frame::error(format!(
            "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for {name}"
        )));
    }
    if geosearch && !(byradius || bybox) {
        return Err(Frame::error(format!(
            "ERR exactly one of BYRADIUS and BYBOX can be specified for {name}"
        )));
    }
    if any && count == 0 {
        return Err(Frame::error("ERR the ANY argument requires COUNT argument"));
    }
    let (Some(z), Some((lon, lat)), Some((shape, conv))) = (z, centre, shape) else {
        return match store {
            Some(dest) => {
                if txn.get(db, &dest).is_some() {
                    apply(txn, db, &dest, KeyOp::Del)?;
                }
                Ok(Frame::Integer(0))
            }
            None => Ok(Frame::Array(Vec::new())),
        };
    };
    if count != 0 && sort == Sort::None && !any {
        sort = Sort::Asc;
    }
    let shape = match shape {
        Shape::Radius(r) => Shape::Radius(r * conv),
        Shape::Box { width, height } => Shape::Box {
            width: width * conv,
            height: height * conv,
        },
    };
    let s = Search { lon, lat, shape };
    let limit = if any { count as usize } else { 0 };
    let mut found = scan(z, &s, limit);
    match sort {
        Sort::None => {}
        Sort::Asc => found.sort_by(|a, b| a.dist.total_cmp(&b.dist)),
        Sort::Desc => found.sort_by(|a, b| b.dist.total_cmp(&a.dist)),
    }
    if count > 0 {
        found.truncate(usize::try_from(count).unwrap_or(usize::MAX));
    }
    for f in &mut found {
        f.dist /= conv;
    }
    if let Some(dest) = store {
        let items = found
            .into_iter()
            .map(|f| (f.member, if storedist { f.dist } else { f.score }))
            .collect();
        return store_scored(txn, db, &dest, items);
    }
    let with = withdist || withhash || withcoord;
    Ok(Frame::Array(
        found
            .into_iter()
            .map(|f| {
                if !with {
                    return Frame::Bulk(f.member);
                }
                let mut item = vec![Frame::Bulk(f.member)];
                if withdist {
                    item.push(distance_frame(f.dist));
                }
                if withhash {
                    item.push(Frame::Integer(f.score as i64));
                }
                if withcoord {
                    item.push(Frame::Array(vec![coord_frame(f.lon), coord_frame(f.lat)]));
                }
                Frame::Array(item)
            })
            .collect(),
    ))
}

fn undecodable() -> Frame {
    Frame::error("ERR could not decode requested zset member")
}

/// The members inside the search, box by box in Redis's order, each box
/// in score order; stops once `limit` (if not 0) are found.
fn scan(z: &ZSet, s: &Search, limit: usize) -> Vec<Found> {
    let mut out = Vec::new();
    for b in s.boxes() {
        if limit > 0 && out.len() >= limit {
            break;
        }
        let (min, max) = b.score_range();
        let range = z.range_by_score(Bound::Included(min as f64), Bound::Excluded(max as f64));
        for (member, score) in range {
            let Some((lon, lat)) = geohash::decode_score(score) else {
                continue;
            };
            let Some(dist) = s.distance_if_within(lon, lat) else {
                continue;
            };
            out.push(Found {
                member: member.to_bytes(),
                score,
                dist,
                lon,
                lat,
            });
            if limit > 0 && out.len() >= limit {
                break;
            }
        }
    }
    out
}
