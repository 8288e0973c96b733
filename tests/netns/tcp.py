#!/usr/bin/env python3
"""tcp.py: tiny TCP probes for the network-namespace harness (tests/netns/lib.sh).

  tcp.py connect HOST PORT [TIMEOUT_S]   exit 0 if a connection is established
                                         within TIMEOUT_S (default 2), else 1
  tcp.py serve PORT FILE [TIMEOUT_S]     listen on PORT (all addresses), accept one
                                         connection, read to EOF; then write
                                         "peer=IP bytes=N seconds=S" to FILE
                                         (exit 1 if nobody came within TIMEOUT_S, default 30)
  tcp.py send HOST PORT BYTES            connect (a refused connection is retried for
                                         10 s), send BYTES, wait for the receiver to
                                         close; print "seconds=S" (timed from the
                                         connection)
"""
import os
import socket
import sys
import time


def s_connect(host, port, timeout):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return 0
    except OSError:
        return 1


def s_serve(port, path, timeout):
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(1)
    srv.settimeout(timeout)
    try:
        c, peer = srv.accept()
    except OSError:
        return 1
    t0 = time.time()
    n = 0
    c.settimeout(timeout)
    while True:
        try:
            b = c.recv(1 << 16)
        except OSError:
            break
        if not b:
            break
        n += len(b)
    c.close()
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("peer=%s bytes=%d seconds=%.3f\n" % (peer[0], n, time.time() - t0))
    os.rename(tmp, path)
    return 0


def s_dial(host, port, bound):
    """A connection, retrying a refused one (the server may still be starting) up to bound seconds."""
    end = time.time() + bound
    while True:
        try:
            return socket.create_connection((host, port), timeout=10)
        except ConnectionRefusedError:
            if time.time() >= end:
                raise
            time.sleep(0.1)


def s_send(host, port, nbytes):
    with s_dial(host, port, 10) as s:
        s.settimeout(120)
        t0 = time.time()
        chunk = b"\0" * (1 << 16)
        left = nbytes
        while left > 0:
            k = s.send(chunk[:min(left, len(chunk))])
            left -= k
        s.shutdown(socket.SHUT_WR)
        while s.recv(1 << 16):
            pass
        print("seconds=%.3f" % (time.time() - t0))
    return 0


def main(argv):
    try:
        if argv[1] == "connect":
            return s_connect(argv[2], int(argv[3]), float(argv[4]) if len(argv) > 4 else 2.0)
        if argv[1] == "serve":
            return s_serve(int(argv[2]), argv[3], float(argv[4]) if len(argv) > 4 else 30.0)
        if argv[1] == "send":
            return s_send(argv[2], int(argv[3]), int(argv[4]))
    except (IndexError, ValueError):
        pass
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
