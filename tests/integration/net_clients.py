#!/usr/bin/env python3
"""Clients of gpusliced's listeners for integration.daemon_net_* (daemon_net.sh): slow ones
that hold connections open, one request timed, requests pipelined in one write, and many
large uploads at once. An address is a unix socket's path, or HOST:PORT for TCP (with --tls
CAFILE for the webhook). Only the standard library: it also runs as another user, with the
system's python3.

  net_clients.py hold ADDR N SECONDS [--mode trickle|idle|tls] [--sources K] [--out FILE]
                    [--reconnect]
      N connections that send a request's first bytes, then one byte a second (trickle), or
      nothing (idle; tls: the TLS handshake, then trickle), from K source addresses
      (127.0.0.2 ...; TCP); each second "alive A answered B" (B: connections the daemon
      answered or closed, by status). With --reconnect, each one answered or closed is
      opened again at the next second (bench/node_soak.py's slow clients).
  net_clients.py probe ADDR [--tls CA] [--token FILE] [--path P] [--source IP] [--timeout S]
      One request; prints "STATUS SECONDS" (STATUS 0: no answer) and the body on a second line.
  net_clients.py pipeline ADDR [--token FILE] REQUEST...
      Sends every REQUEST ("METHOD PATH [BODY]", NOAUTH: prefixed for one without the token)
      in one write; prints each answer's status, in order, on one line.
  net_clients.py after-answer ADDR SECONDS [--token FILE] [--every S]
      One request whole and its answer, then on the same connection the next one's first
      bytes and one byte every S seconds (0.25) for at most SECONDS; prints "STATUS closed T"
      (T: seconds from the first answer until the daemon closed it) or "STATUS open SECONDS".
  net_clients.py uploads ADDR N BYTES KIND PID --tls CA
      N uploads of BYTES at once to /mutate (KIND: review, an AdmissionReview with a large
      annotation; objects, [{},{},...]); prints the answers by status and the peak VmRSS of PID
      (KiB) while they ran, and its VmRSS after.
"""
import argparse
import json
import re
import socket
import ssl
import sys
import threading
import time


def connect(addr, tls=None, source=None, timeout=10):
    if "/" in addr:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(addr)
        return s
    host, port = addr.rsplit(":", 1)
    s = socket.socket()
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect((host, int(port)))
    if tls:
        ctx = ssl.create_default_context(cafile=tls)
        s = ctx.wrap_socket(s, server_hostname=host)
    return s


def read_answers(s, want, timeout):
    """Reads up to `want` HTTP answers (by Content-Length) or until the peer closes."""
    data, out, end = b"", [], time.monotonic() + timeout
    while len(out) < want and time.monotonic() < end:
        m = re.match(rb"HTTP/1\.1 (\d+)[^\r]*\r\n(.*?)\r\n\r\n", data, re.S)
        if m:
            cl = re.search(rb"(?i)content-length: *(\d+)", m.group(2))
            n = m.end() + (int(cl.group(1)) if cl else 0)
            if len(data) >= n:
                out.append((int(m.group(1)), data[m.end():n]))
                data = data[n:]
                continue
        try:
            s.settimeout(max(0.01, end - time.monotonic()))
            x = s.recv(65536)
        except (socket.timeout, ssl.SSLError, OSError):
            break
        if not x:
            break
        data += x
    return out


def token_of(path):
    return open(path).read().strip() if path else None


def request_bytes(method, path, body=None, token=None):
    h = "%s %s HTTP/1.1\r\nHost: d\r\n" % (method, path)
    if token:
        h += "Authorization: Bearer %s\r\n" % token
    b = body.encode() if body is not None else b""
    if body is not None:
        h += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(b)
    return (h + "\r\n").encode() + b


def cmd_hold(a):
    answered = {}

    def count(k):
        answered[k] = answered.get(k, 0) + 1

    def open_one(i):
        src = "127.0.%d.%d" % ((i % a.sources) // 250, 2 + (i % a.sources) % 250) \
            if a.sources and "/" not in a.addr else None
        try:
            s = connect(a.addr, tls=a.tls if a.mode == "tls" else None, source=src, timeout=5)
            if a.mode in ("trickle", "tls"):
                s.send(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            s.setblocking(False)
            return s
        except OSError as e:
            count("connect " + type(e).__name__)
            return None

    socks = [open_one(i) for i in range(a.n)]
    out = open(a.out, "w", buffering=1) if a.out else sys.stdout
    print("opened %d" % sum(1 for s in socks if s), file=out)
    end = time.monotonic() + a.seconds
    while time.monotonic() < end:
        for i, s in enumerate(socks):
            if s is None:
                if a.reconnect:
                    socks[i] = open_one(i)
                continue
            try:
                d = s.recv(4096)
                st = re.match(rb"HTTP/1\.1 (\d+)", d)
                count(st.group(1).decode() if st else "closed")
                s.close()
                socks[i] = None
                continue
            except (BlockingIOError, ssl.SSLWantReadError):
                pass
            except OSError:
                count("closed")
                s.close()
                socks[i] = None
                continue
            try:
                if a.mode != "idle":
                    s.send(b"a")
            except (BlockingIOError, ssl.SSLWantWriteError):
                pass
            except OSError:
                count("closed")
                s.close()
                socks[i] = None
        print("alive %d answered %s" % (sum(1 for s in socks if s),
                                         json.dumps(answered, sort_keys=True)), file=out)
        time.sleep(1)


def cmd_probe(a):
    t0 = time.monotonic()
    try:
        s = connect(a.addr, tls=a.tls, source=a.source, timeout=a.timeout)
        s.sendall(request_bytes("GET", a.path, token=token_of(a.token)))
        ans = read_answers(s, 1, a.timeout)
    except OSError as e:
        ans = []
        print("0 %.3f" % (time.monotonic() - t0))
        print(type(e).__name__)
        return
    st, body = ans[0] if ans else (0, b"")
    print("%d %.3f" % (st, time.monotonic() - t0))
    print(body.decode(errors="replace"))


def cmd_pipeline(a):
    tok = token_of(a.token)
    reqs = []
    for r in a.requests:
        auth = tok
        if r.startswith("NOAUTH:"):
            r, auth = r[7:], None
        parts = r.split(" ", 2)
        reqs.append(request_bytes(parts[0], parts[1], parts[2] if len(parts) > 2 else None,
                                  auth))
    s = connect(a.addr, timeout=5)
    s.sendall(b"".join(reqs))
    print(" ".join(str(st) for st, _ in read_answers(s, len(reqs), 5)))


def cmd_chunked(a):
    """One POST whose body goes in chunks of a.chunk bytes; prints its answer's status, or
    "closed" when the daemon closed the connection without one."""
    tok = token_of(a.token)
    body = a.body.encode() if a.body is not None else b"x" * a.bytes
    h = "POST %s HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n" \
        "Transfer-Encoding: chunked\r\n" % a.path
    if tok:
        h += "Authorization: Bearer %s\r\n" % tok
    s = connect(a.addr, timeout=10)
    try:
        s.sendall((h + "\r\n").encode())
        for i in range(0, len(body), a.chunk):
            c = body[i:i + a.chunk]
            s.sendall(b"%x\r\n" % len(c) + c + b"\r\n")
        s.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # closed while sending: read what it said, if anything
    ans = read_answers(s, 1, 10)
    print(ans[0][0] if ans else "closed")


def cmd_after_answer(a):
    s = connect(a.addr, timeout=5)
    s.sendall(request_bytes("GET", "/healthz", token=token_of(a.token)))
    ans = read_answers(s, 1, 5)
    st = ans[0][0] if ans else 0
    t0 = time.monotonic()
    s.setblocking(False)
    first = True
    while time.monotonic() - t0 < a.seconds:
        try:
            if not s.recv(4096):
                print("%d closed %.2f" % (st, time.monotonic() - t0))
                return
            # (An answer to a request never finished is as good as a close: print it so.)
            print("%d closed %.2f answered" % (st, time.monotonic() - t0))
            return
        except BlockingIOError:
            pass
        except OSError:
            print("%d closed %.2f" % (st, time.monotonic() - t0))
            return
        try:
            s.send(b"GET /healthz HTTP/1.1\r\nX-Slow: " if first else b"a")
            first = False
        except BlockingIOError:
            pass
        except OSError:
            print("%d closed %.2f" % (st, time.monotonic() - t0))
            return
        time.sleep(a.every)
    print("%d open %.2f" % (st, a.seconds))


def rss(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cmd_uploads(a):
    if a.kind == "review":
        pod = {"metadata": {"name": "big", "annotations": {"a": "x" * (a.bytes - 400)}},
               "spec": {"containers": [{"name": "c", "resources": {
                   "limits": {"nvidia.com/gpu": "1"}}}]}}
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                           "request": {"uid": "r-1", "kind": {"group": "", "version": "v1",
                                                              "kind": "Pod"},
                                       "operation": "CREATE", "object": pod}}).encode()
    else:
        body = b"[" + b"{}," * ((a.bytes - 3) // 3) + b"{}]"
    head = b"POST /mutate HTTP/1.1\r\nHost: d\r\nContent-Type: application/json\r\n" \
           b"Content-Length: %d\r\n\r\n" % len(body)
    got, lock, peak, done = {}, threading.Lock(), [rss(a.pid)], [False]

    def one():
        try:
            s = connect(a.addr, tls=a.tls, timeout=60)
            s.sendall(head)
            try:
                s.sendall(body)
            except OSError:
                pass  # answered early (413, 503) and closed: read what it said
            ans = read_answers(s, 1, 60)
            k = str(ans[0][0]) if ans else "closed"
        except OSError:
            k = "closed"
        with lock:
            got[k] = got.get(k, 0) + 1

    def watch():
        while not done[0]:
            peak[0] = max(peak[0], rss(a.pid))
            time.sleep(0.005)

    w = threading.Thread(target=watch)
    w.start()
    ts = [threading.Thread(target=one) for _ in range(a.n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    done[0] = True
    w.join()
    time.sleep(0.3)
    print("answers %s peak_kib %d after_kib %d" % (json.dumps(got, sort_keys=True), peak[0],
                                                   rss(a.pid)))


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    h = sub.add_parser("hold")
    h.add_argument("addr")
    h.add_argument("n", type=int)
    h.add_argument("seconds", type=float)
    h.add_argument("--mode", default="trickle", choices=["trickle", "idle", "tls"])
    h.add_argument("--sources", type=int, default=0)
    h.add_argument("--tls")
    h.add_argument("--out")
    h.add_argument("--reconnect", action="store_true")
    r = sub.add_parser("probe")
    r.add_argument("addr")
    r.add_argument("--tls")
    r.add_argument("--token")
    r.add_argument("--path", default="/healthz")
    r.add_argument("--source")
    r.add_argument("--timeout", type=float, default=5)
    q = sub.add_parser("pipeline")
    q.add_argument("addr")
    q.add_argument("--token")
    q.add_argument("requests", nargs="+")
    c = sub.add_parser("chunked")
    c.add_argument("addr")
    c.add_argument("--token")
    c.add_argument("--path", default="/v1/tenants")
    c.add_argument("--chunk", type=int, default=1024)
    c.add_argument("--bytes", type=int, default=0)
    c.add_argument("--body")
    w = sub.add_parser("after-answer")
    w.add_argument("addr")
    w.add_argument("seconds", type=float)
    w.add_argument("--token")
    w.add_argument("--every", type=float, default=0.25)
    u = sub.add_parser("uploads")
    u.add_argument("addr")
    u.add_argument("n", type=int)
    u.add_argument("bytes", type=int)
    u.add_argument("kind", choices=["review", "objects"])
    u.add_argument("pid", type=int)
    u.add_argument("--tls", required=True)
    a = p.parse_args()
    {"hold": cmd_hold, "probe": cmd_probe, "pipeline": cmd_pipeline, "uploads": cmd_uploads,
     "chunked": cmd_chunked, "after-answer": cmd_after_answer}[a.cmd](a)


if __name__ == "__main__":
    main()
