#!/usr/bin/env python3
"""Opens many connections to a RESP server, one after another, and keeps them.

Issue 10's connection test, run by bench/durable.sh: connect, send PING, read
the reply, keep the socket open, next. It measures how fast the server accepts
connections from one client that waits for each reply, and how much memory an
idle connection costs it (the server's VmRSS from /proc before and after, so
the server must run on this machine). Past `maxclients` the server should
answer `-ERR max number of clients reached` and close.

usage: conns.py HOST PORT COUNT SERVER_PID
prints one line of `name=value` fields:
  elapsed_s       time to open COUNT connections and get each reply
  accepted        connections that got +PONG
  rss_before_kb   server VmRSS before the first connection
  rss_after_kb    server VmRSS with every accepted connection open
  rss_per_conn_kb (after - before) / accepted
  first_refused   1-based index of the first connection that did not get +PONG (0: none)
  reply_10001     what connection 10,001 got, as text (quoted; last field)
Standard library only.
"""

import resource
import socket
import sys
import time

PING = b"*1\r\n$4\r\nPING\r\n"
# A reply is one line; a slow server gets this long before we give up on it.
REPLY_TIMEOUT_S = 10.0
# The connection whose reply the issue asks about (maxclients is 10,000).
WATCHED = 10_001


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def read_line(sock):
    """The first reply line, without CRLF; a closed or silent server gives a note."""
    buf = b""
    try:
        while not buf.endswith(b"\r\n"):
            chunk = sock.recv(256)
            if not chunk:
                return "(connection closed: " + buf.decode(errors="replace") + ")"
            buf += chunk
    except OSError as e:  # timeout, reset
        return f"({type(e).__name__}: {e})"
    return buf[:-2].decode(errors="replace")


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    host, port, count, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    # One descriptor per connection: raise the soft limit as far as allowed.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))

    before = rss_kb(pid)
    kept = []
    accepted = 0
    first_refused = 0
    watched = "(not reached)"
    start = time.monotonic()
    for i in range(1, count + 1):
        try:
            s = socket.create_connection((host, port), timeout=REPLY_TIMEOUT_S)
            s.sendall(PING)
            reply = read_line(s)
        except OSError as e:
            s = None
            reply = f"(connect failed: {e})"
        if reply == "+PONG":
            accepted += 1
            kept.append(s)
        else:
            if first_refused == 0:
                first_refused = i
            if s is not None:
                s.close()
        if i == WATCHED:
            watched = reply
    elapsed = time.monotonic() - start
    after = rss_kb(pid)
    for s in kept:
        s.close()
    per_conn = (after - before) / accepted if accepted else 0.0
    print(
        f"elapsed_s={elapsed:.2f} accepted={accepted} rss_before_kb={before} "
        f"rss_after_kb={after} rss_per_conn_kb={per_conn:.1f} "
        f"first_refused={first_refused} reply_10001={watched!r}"
    )


if __name__ == "__main__":
    main()
