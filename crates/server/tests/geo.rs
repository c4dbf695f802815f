//! Geo commands over real sockets. Every expected reply below was read off
//! Redis 7.0.15 given the same commands (and the Sicily values are those
//! of Redis's documentation): scores, distances to four decimals,
//! coordinates to Redis's 17 decimals, geohash strings, search order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{err, q, Server, WRONGTYPE};
use redis::{Connection, Value};

fn int(c: &mut Connection, args: &[&str]) -> i64 {
    q(c, args)
}

fn strs(c: &mut Connection, args: &[&str]) -> Vec<String> {
    q(c, args)
}

fn b(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn arr(v: Vec<Value>) -> Value {
    Value::Array(v)
}

fn sicily(c: &mut Connection) {
    let added = int(
        c,
        &[
            "GEOADD",
            "Sicily",
            "13.361389",
            "38.115556",
            "Palermo",
            "15.087269",
            "37.502669",
            "Catania",
        ],
    );
    assert_eq!(added, 2);
    let added = int(
        c,
        &[
            "GEOADD",
            "Sicily",
            "12.758489",
            "38.788135",
            "edge1",
            "17.241510",
            "38.788135",
            "edge2",
        ],
    );
    assert_eq!(added, 2);
}

#[test]
fn positions_hashes_and_distances_match_redis() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    sicily(c);
    assert_eq!(
        strs(c, &["ZRANGE", "Sicily", "0", "-1", "WITHSCORES"])[..4],
        ["Palermo", "3479099956230698", "edge1", "3479273021651468"]
    );
    assert_eq!(
        q::<String>(c, &["GEODIST", "Sicily", "Palermo", "Catania"]),
        "166274.1516"
    );
    assert_eq!(
        q::<String>(c, &["GEODIST", "Sicily", "Palermo", "Catania", "km"]),
        "166.2742"
    );
    assert_eq!(
        q::<String>(c, &["GEODIST", "Sicily", "Palermo", "Catania", "mi"]),
        "103.3182"
    );
    assert_eq!(
        q::<Option<String>>(c, &["GEODIST", "Sicily", "Palermo", "nope"]),
        None
    );
    assert_eq!(
        q::<Option<String>>(c, &["GEODIST", "nokey", "a", "b"]),
        None
    );
    let pos: Value = q(c, &["GEOPOS", "Sicily", "Palermo", "nope", "edge2"]);
    assert_eq!(
        pos,
        arr(vec![
            arr(vec![b("13.36138933897018433"), b("38.11555639549629859")]),
            Value::Nil,
            arr(vec![b("17.24151045083999634"), b("38.78813451624225195")]),
        ])
    );
    // RESP3 sends coordinates as doubles with the same 17 decimals.
    let mut r = common::RespConn::new(srv.raw());
    r.send(&["HELLO", "3"]);
    r.frame();
    r.send(&["GEOPOS", "Sicily", "Palermo"]);
    r.expect("*1\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n");
    let hashes: Vec<Option<String>> = q(c, &["GEOHASH", "Sicily", "Palermo", "edge1", "nope"]);
    assert_eq!(
        hashes,
        vec![
            Some("sqc8b49rny0".to_string()),
            Some("sqchdm4mq20".to_string()),
            None
        ]
    );
    let none: Vec<Option<String>> = q(c, &["GEOHASH", "nokey", "a"]);
    assert_eq!(none, vec![None]);
}

#[test]
fn searches_return_redis_order_distances_and_coordinates() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    sicily(c);
    let got: Value = q(
        c,
        &[
            "GEORADIUS",
            "Sicily",
            "15",
            "37",
            "200",
            "km",
            "WITHDIST",
            "WITHCOORD",
            "WITHHASH",
            "ASC",
        ],
    );
    assert_eq!(
        got,
        arr(vec![
            arr(vec![
                b("Catania"),
                b("56.4413"),
                Value::Int(3479447370796909),
                arr(vec![b("15.08726745843887329"), b("37.50266842333162032")]),
            ]),
            arr(vec![
                b("Palermo"),
                b("190.4424"),
                Value::Int(3479099956230698),
                arr(vec![b("13.36138933897018433"), b("38.11555639549629859")]),
            ]),
        ])
    );
    let got: Value = q(
        c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMLONLAT",
            "15",
            "37",
            "BYBOX",
            "400",
            "400",
            "km",
            "ASC",
            "WITHDIST",
        ],
    );
    assert_eq!(
        got,
        arr(vec![
            arr(vec![b("Catania"), b("56.4413")]),
            arr(vec![b("Palermo"), b("190.4424")]),
            arr(vec![b("edge2"), b("279.7403")]),
            arr(vec![b("edge1"), b("279.7405")]),
        ])
    );
    let got: Value = q(
        c,
        &[
            "GEOSEARCH",
            "Sicily",
            "FROMMEMBER",
            "Palermo",
            "BYRADIUS",
            "100",
            "km",
            "DESC",
            "WITHDIST",
        ],
    );
    assert_eq!(
        got,
        arr(vec![
            arr(vec![b("edge1"), b("91.4007")]),
            arr(vec![b("Palermo"), b("0.0000")]),
        ])
    );
    assert_eq!(
        strs(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "500",
                "km",
                "COUNT",
                "2",
                "DESC"
            ]
        ),
        ["edge1", "edge2"]
    );
    // COUNT alone sorts nearest first; ANY takes the first found.
    assert_eq!(
        strs(
            c,
            &["GEORADIUS", "Sicily", "15", "37", "500", "km", "COUNT", "1"]
        ),
        ["Catania"]
    );
    assert_eq!(
        strs(
            c,
            &[
                "GEORADIUS_RO",
                "Sicily",
                "15",
                "37",
                "500",
                "km",
                "COUNT",
                "4",
                "ANY"
            ]
        )
        .len(),
        4
    );
    assert_eq!(
        strs(
            c,
            &[
                "GEORADIUSBYMEMBER_RO",
                "Sicily",
                "Palermo",
                "100",
                "km",
                "ASC"
            ]
        ),
        ["Palermo", "edge1"]
    );

    // Near the antimeridian, and a whole-earth radius.
    let added = int(
        c,
        &[
            "GEOADD",
            "pts",
            "-122.27652",
            "37.805186",
            "a",
            "-122.2674626",
            "37.8062344",
            "b",
            "-122.2469854",
            "37.8104049",
            "c",
            "179.99",
            "0",
            "w1",
            "-179.99",
            "0",
            "w2",
        ],
    );
    assert_eq!(added, 5);
    let got: Value = q(
        c,
        &[
            "GEOSEARCH",
            "pts",
            "FROMLONLAT",
            "180",
            "0",
            "BYBOX",
            "10",
            "10",
            "km",
            "ASC",
            "WITHDIST",
        ],
    );
    assert_eq!(got, arr(vec![arr(vec![b("w1"), b("1.1125")])]));
    let got: Value = q(
        c,
        &[
            "GEORADIUS",
            "pts",
            "-122.2612767",
            "37.7936847",
            "3",
            "km",
            "WITHDIST",
            "ASC",
        ],
    );
    assert_eq!(
        got,
        arr(vec![
            arr(vec![b("b"), b("1.4979")]),
            arr(vec![b("a"), b("1.8523")]),
            arr(vec![b("c"), b("2.2441")]),
        ])
    );
    assert_eq!(
        strs(c, &["GEORADIUS", "pts", "0", "0", "50000", "km", "ASC"]),
        ["c", "b", "a", "w1", "w2"]
    );
}

#[test]
fn store_forms_write_sorted_sets() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    sicily(c);
    assert_eq!(
        int(
            c,
            &[
                "GEOSEARCHSTORE",
                "dst",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
                "STOREDIST"
            ]
        ),
        2
    );
    let stored: Vec<(String, f64)> = q(c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]);
    assert_eq!(stored[0].0, "Catania");
    assert!((stored[0].1 - 56.441_257_870_158_2).abs() < 1e-9);
    assert_eq!(stored[1].0, "Palermo");
    assert!((stored[1].1 - 190.442_429_847_757_84).abs() < 1e-9);
    assert_eq!(
        int(
            c,
            &[
                "GEORADIUSBYMEMBER",
                "Sicily",
                "Palermo",
                "1000",
                "km",
                "STORE",
                "dst"
            ]
        ),
        4
    );
    assert_eq!(
        strs(c, &["ZRANGE", "dst", "0", "-1", "WITHSCORES"]),
        [
            "Palermo",
            "3479099956230698",
            "edge1",
            "3479273021651468",
            "Catania",
            "3479447370796909",
            "edge2",
            "3481342659049484"
        ]
    );
    // Nothing found (or no source) deletes the destination.
    assert_eq!(
        int(
            c,
            &["GEORADIUS", "Sicily", "0", "0", "1", "km", "STORE", "dst"]
        ),
        0
    );
    assert_eq!(int(c, &["EXISTS", "dst"]), 0);
    let _: () = q(c, &["SET", "dst", "x"]);
    assert_eq!(
        int(
            c,
            &[
                "GEOSEARCHSTORE",
                "dst",
                "nokey",
                "FROMLONLAT",
                "0",
                "0",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        0
    );
    assert_eq!(int(c, &["EXISTS", "dst"]), 0);
}

#[test]
fn geoadd_options_and_errors_are_redis_s() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    sicily(c);
    // XX updates only, NX adds only, CH counts changes too.
    assert_eq!(
        int(
            c,
            &["GEOADD", "Sicily", "XX", "CH", "13.3", "38.1", "Palermo", "1", "1", "new"]
        ),
        1
    );
    assert_eq!(int(c, &["ZCARD", "Sicily"]), 4);
    assert_eq!(
        int(
            c,
            &["GEOADD", "Sicily", "NX", "1", "1", "Palermo", "1", "1", "new"]
        ),
        1
    );
    assert_eq!(
        int(
            c,
            &["GEOADD", "Sicily", "CH", "2", "2", "new", "1", "1", "new2"]
        ),
        2
    );
    assert_eq!(
        err(c, &["GEOADD", "Sicily", "200", "100", "x"]),
        "ERR invalid longitude,latitude pair 200.000000,100.000000"
    );
    assert_eq!(
        err(c, &["GEOADD", "Sicily", "XX", "NX", "1", "2", "x"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["GEOADD", "Sicily", "1", "2", "x", "3"]),
        "ERR syntax error"
    );
    assert_eq!(
        err(c, &["GEOADD", "Sicily", "a", "2", "x"]),
        "ERR value is not a valid float"
    );
    let e = |c: &mut Connection, args: &[&str]| err(c, args);
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "-1",
                "km"
            ]
        ),
        "ERR radius cannot be negative"
    );
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "1",
                "parsec"
            ]
        ),
        "ERR unsupported unit provided. please use M, KM, FT, MI"
    );
    assert_eq!(
        e(c, &["GEORADIUS", "Sicily", "15", "37", "200", "km", "STORE", "dst", "WITHDIST"]),
        "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"
    );
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "BYRADIUS",
                "1",
                "km",
                "ASC",
                "WITHDIST"
            ]
        ),
        "ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH"
    );
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMLONLAT",
                "1",
                "1",
                "ASC",
                "WITHDIST"
            ]
        ),
        "ERR exactly one of BYRADIUS and BYBOX can be specified for GEOSEARCH"
    );
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "Sicily",
                "FROMMEMBER",
                "nope",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        "ERR could not decode requested zset member"
    );
    assert_eq!(
        e(c, &["GEORADIUS", "Sicily", "15", "37", "1", "km", "ANY"]),
        "ERR the ANY argument requires COUNT argument"
    );
    assert_eq!(
        e(
            c,
            &["GEORADIUS", "Sicily", "15", "37", "1", "km", "COUNT", "0"]
        ),
        "ERR COUNT must be > 0"
    );
    assert_eq!(
        e(
            c,
            &[
                "GEORADIUS_RO",
                "Sicily",
                "15",
                "37",
                "1",
                "km",
                "STORE",
                "x"
            ]
        ),
        "ERR syntax error"
    );
    let _: () = q(c, &["SET", "str", "x"]);
    assert_eq!(e(c, &["GEOADD", "str", "1", "1", "m"]), WRONGTYPE);
    assert_eq!(
        e(
            c,
            &[
                "GEOSEARCH",
                "str",
                "FROMLONLAT",
                "1",
                "1",
                "BYRADIUS",
                "1",
                "km"
            ]
        ),
        WRONGTYPE
    );
}

#[test]
fn geo_sets_survive_kill9() {
    let mut srv = Server::start(&["--durability", "full"]);
    {
        let c = &mut srv.conn();
        sicily(c);
        int(
            c,
            &[
                "GEOSEARCHSTORE",
                "near",
                "Sicily",
                "FROMLONLAT",
                "15",
                "37",
                "BYRADIUS",
                "200",
                "km",
            ],
        );
    }
    srv.kill9();
    srv.restart();
    let c = &mut srv.conn();
    assert_eq!(
        q::<String>(c, &["GEODIST", "Sicily", "Palermo", "Catania"]),
        "166274.1516"
    );
    assert_eq!(
        strs(c, &["ZRANGE", "near", "0", "-1"]),
        ["Palermo", "Catania"]
    );
}

/// A sorted set whose scores were never GEO positions decodes as Redis
/// decodes it (its C cast of the score): a negative score wraps, one past
/// 2^64 is cell 0. Values from Redis 7.0.15.
#[test]
fn scores_out_of_geo_range_decode_as_redis_does() {
    let srv = Server::start(&[]);
    let c = &mut srv.conn();
    let _: i64 = q(
        c,
        &[
            "ZADD", "gz", "-5", "neg", "1e20", "big", "1.5e19", "hi", "-inf", "ninf",
        ],
    );
    let pos: Value = q(c, &["GEOPOS", "gz", "neg", "big", "hi", "ninf"]);
    assert_eq!(
        pos,
        arr(vec![
            arr(vec![b("180"), b("85.0511287799999991")]),
            arr(vec![
                b("-179.99999731779098511"),
                b("-85.05112751263942528")
            ]),
            arr(vec![b("180"), b("85.0511287799999991")]),
            arr(vec![b("180"), b("-85.05112751263942528")]),
        ])
    );
    let hashes: Vec<String> = q(c, &["GEOHASH", "gz", "neg", "big", "ninf"]);
    assert_eq!(hashes, ["bp05b5048p0", "00bh0hbj200", "00bh0hbj200"]);
}
