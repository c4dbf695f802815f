#!/usr/bin/env python3
"""redis-py compatibility checks against a running durakv.

    python3 scripts/compat.py PORT

Covers what applications lean on most: pipelines with and without MULTI,
optimistic transactions with WATCH (including a real conflict), RESP3, and
the handshake and introspection commands redis-py sends. Exits non-zero with
a message naming the first check that failed.
"""

import sys

import redis


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def main(port):
    r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    other = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    r.flushall()

    check(r.ping() is True, "PING")

    # Pipeline without a transaction: commands are just batched.
    p = r.pipeline(transaction=False)
    p.set("py:a", 1).incr("py:a").get("py:a").delete("py:missing")
    got = p.execute()
    check(got == [True, 2, "2", 0], f"pipeline(transaction=False): {got!r}")

    # Pipeline as MULTI/EXEC.
    with r.pipeline(transaction=True) as p:
        p.set("py:b", "x").append("py:b", "yz").get("py:b").lpush("py:l", 1, 2)
        got = p.execute()
    check(got == [True, 3, "xyz", 2], f"pipeline(transaction=True): {got!r}")

    # A runtime error inside EXEC fails only that command.
    with r.pipeline(transaction=True) as p:
        p.set("py:c", "1").incr("py:b").incr("py:c")
        got = p.execute(raise_on_error=False)
    check(
        got[0] is True and isinstance(got[1], redis.ResponseError) and got[2] == 2,
        f"error inside EXEC: {got!r}",
    )

    # r.transaction() WATCHes, retries on conflict, and returns the result.
    r.set("py:counter", 10)
    attempts = []

    def bump(pipe):
        attempts.append(1)
        cur = int(pipe.get("py:counter"))
        if len(attempts) == 1:
            other.set("py:counter", 100)  # conflicts with our WATCH
        pipe.multi()
        pipe.set("py:counter", cur + 1)

    r.transaction(bump, "py:counter")
    check(len(attempts) == 2, f"transaction() retried {len(attempts) - 1} times, expected 1")
    check(r.get("py:counter") == "101", f"after transaction(): {r.get('py:counter')!r}")

    # An explicit WATCH conflict raises WatchError.
    with r.pipeline() as p:
        p.watch("py:w")
        other.set("py:w", "theirs")
        p.multi()
        p.set("py:w", "ours")
        try:
            p.execute()
            raise AssertionError("EXEC after a WATCH conflict succeeded")
        except redis.WatchError:
            pass
    check(r.get("py:w") == "theirs", "WATCH conflict must not apply the transaction")

    # RESP3: maps come back as dicts, nulls as None.
    r3 = redis.Redis(host="127.0.0.1", port=port, protocol=3, decode_responses=True)
    r3.hset("py:h", mapping={"f1": "v1", "f2": "v2"})
    got = r3.hgetall("py:h")
    check(isinstance(got, dict) and got == {"f1": "v1", "f2": "v2"}, f"RESP3 HGETALL: {got!r}")
    check(r3.get("py:nothing") is None, "RESP3 null")
    got = r3.config_get("maxclients")
    check(got == {"maxclients": "10000"}, f"RESP3 CONFIG GET: {got!r}")
    check(r3.info("server")["redis_version"] == "7.2.4", "RESP3 INFO")
    with r3.pipeline(transaction=True) as p:
        got = p.incr("py:r3").incr("py:r3").execute()
    check(got == [1, 2], f"RESP3 MULTI/EXEC: {got!r}")

    # Introspection redis-py parses itself.
    info = r.info()
    check(info["redis_version"] == "7.2.4", "INFO redis_version")
    check(info["role"] == "master", "INFO role")
    check(info["connected_clients"] >= 3, f"INFO connected_clients: {info['connected_clients']}")
    check("db0" in r.info("keyspace"), "INFO keyspace lists db0")
    r.client_setname("compat-py")
    check(r.client_getname() == "compat-py", "CLIENT GETNAME")
    me = r.client_info()
    check(me["name"] == "compat-py", f"CLIENT INFO: {me!r}")
    check(me.get("lib-name") == "redis-py", f"redis-py sends CLIENT SETINFO: {me!r}")
    check(r.execute_command("CLIENT", "DURABILITY", "delayed") in (True, "OK"), "CLIENT DURABILITY")
    level = r.execute_command("CLIENT", "DURABILITY")
    check(level in (b"delayed", "delayed"), f"CLIENT DURABILITY reads the level back: {level!r}")
    check("durability" not in r.client_info(), "CLIENT INFO has only Redis's fields")
    names = [c["name"] for c in r.client_list()]
    check("compat-py" in names, f"CLIENT LIST names: {names!r}")
    check(r.config_set("hz", 20) is True and r.config_get("hz") == {"hz": "20"}, "CONFIG SET/GET")
    secs, micros = r.time()
    check(secs > 0 and 0 <= micros < 1_000_000, "TIME")
    check(r.dbsize() > 0, "DBSIZE")
    check(r.command_count() > 50, "COMMAND COUNT")
    print("redis-py: all checks passed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: compat.py PORT")
    try:
        main(int(sys.argv[1]))
    except AssertionError as e:
        print(f"FAIL (redis-py): {e}", file=sys.stderr)
        sys.exit(1)
    except redis.RedisError as e:
        print(f"FAIL (redis-py): unexpected {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
