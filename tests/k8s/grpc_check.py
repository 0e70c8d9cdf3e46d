#!/usr/bin/python3
"""gpusliced's gRPC server (grpc.c, dra_wire.c, run by build/tests/grpc_server) through Debian's
python3-grpcio as the kubelet (tests/k8s/kubelet.py and grpc directly): registration, both
DRA versions, unknown methods, bad and oversize messages, garbage on the socket, many
connections, a stop with clients connected. usage: grpc_check.py --build BUILD_DIR
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
fails = 0


def ok(msg):
    print("ok: " + msg)


def bad(msg):
    global fails
    fails += 1
    print("FAIL: " + msg)


def check(cond, msg, why=""):
    if cond:
        ok(msg)
    else:
        bad(msg + (": " + why if why else ""))


class Server:
    def __init__(self, build, d):
        self.sock = os.path.join(d, "dra.sock")
        self.reg = os.path.join(d, "reg.sock")
        self.p = subprocess.Popen([os.path.join(build, "tests", "grpc_server"), self.sock, self.reg],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit("FAIL: grpc_server did not start: " + line)

    def stop(self, timeout=20):
        self.p.terminate()
        out, _ = self.p.communicate(timeout=timeout)
        return self.p.returncode, out


def kubelet(build, *args, timeout=5):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "kubelet.py"), "--descriptor-set",
           os.path.join(build, "proto", "kubelet.pb"), "--timeout", str(timeout)] + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
    try:
        return r.returncode, json.loads(r.stdout)
    except ValueError:
        return r.returncode, {"stdout": r.stdout, "stderr": r.stderr}


def raw_call(sock, method, data, timeout=5, **kw):
    # A connection of its own (grpc shares one per target across channels by default).
    with grpc.insecure_channel("unix:" + sock, options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
        f = ch.unary_unary(method)
        try:
            return "OK", f(data, timeout=timeout, **kw)
        except grpc.RpcError as e:
            return e.code().name, e.details()


def hpack_literal(name, value):
    # A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2).
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def frame(ftype, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([ftype, flags]) + stream.to_bytes(4, "big") + payload


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"")


def slow_peer(sock, out):
    """A call opened and never finished (half a message): the server cuts it in about 10 s."""
    c = socket.socket(socket.AF_UNIX)
    c.settimeout(30)
    c.connect(sock)
    hdr = b"".join(hpack_literal(n, v) for n, v in (
        (b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/test.Echo/Echo"),
        (b":authority", b"x"), (b"content-type", b"application/grpc"), (b"te", b"trailers")))
    t0 = time.time()
    c.sendall(PREFACE + frame(1, 4, 1, hdr) + frame(0, 0, 1, b"\x00\x00\x00\x00\x10abc"))
    try:
        while c.recv(65536):
            pass
    except OSError as e:
        out["slow_peer"] = f"error {e}"
        return
    out["slow_peer"] = time.time() - t0
    c.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    a = ap.parse_args()
    B = a.build
    d = tempfile.mkdtemp(prefix="gs-grpc-")
    s = Server(B, d)
    try:
        # A handler of 11 s (one that waits on the API server): not cut by the deadline of
        # calls waiting on the peer (10 s); checked at the end.
        res = {}
        long_th = threading.Thread(target=lambda: res.update(long=raw_call(
            s.sock, "/test.Echo/Sleep", b"11000", timeout=30)))
        long_th.start()
        slow_th = threading.Thread(target=slow_peer, args=(s.sock, res))
        slow_th.start()
        mode = os.stat(s.sock).st_mode & 0o777
        check(mode == 0o600, "the socket is made with mode 0600", oct(mode))

        rc, j = kubelet(B, "register", "--registry-sock", s.reg)
        check(rc == 0 and j.get("info", {}).get("type") == "DRAPlugin" and
              j["info"].get("endpoint") == s.sock and
              "v1.DRAPlugin" in j["info"].get("supported_versions", []),
              "register: GetInfo answers DRAPlugin gpu.gpuslice.io, its endpoint, v1 and v1beta1",
              json.dumps(j))

        for v in ("v1", "v1beta1"):
            rc, j = kubelet(B, "prepare", "--sock", s.sock, "--version", v, "ns/a/uid-a",
                            "ns/bad-b/uid-b")
            cl = j.get("claims", {})
            dev = (cl.get("uid-a", {}).get("devices") or [{}])[0]
            check(rc == 0 and dev.get("cdi_device_ids") == ["gpuslice.io/claim=uid-a"] and
                  dev.get("pool_name") == "node-1" and dev.get("device_name") == "gpu-0" and
                  dev.get("request_names") == ["gpu"] and
                  cl.get("uid-b", {}).get("error") == "ns/bad-b: cannot prepare" and
                  "devices" not in cl.get("uid-b", {}),
                  f"prepare {v}: a claim's device and CDI ID, another's error", json.dumps(j))
            rc, j = kubelet(B, "unprepare", "--sock", s.sock, "--version", v, "ns/a/uid-a")
            check(rc == 0 and j.get("claims") == {"uid-a": {}}, f"unprepare {v}: answered",
                  json.dumps(j))

        rc, j = kubelet(B, "call", "--sock", s.sock, "--method", "/test.Nope/Nothing")
        check(j.get("code") == "UNIMPLEMENTED" and "/test.Nope/Nothing" in j.get("details", ""),
              "an unknown method: UNIMPLEMENTED, naming it", json.dumps(j))
        rc, j = kubelet(B, "call", "--sock", s.sock, "--method",
                        "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources",
                        "--raw-hex", "0a03ffffff")
        check(j.get("code") == "INVALID_ARGUMENT" and "protobuf" in j.get("details", ""),
              "a request that is not protobuf: INVALID_ARGUMENT saying so", json.dumps(j))
        claims = "".join("0a0b0a016e120175" + "1a036e6d65" for _ in range(65))
        rc, j = kubelet(B, "call", "--sock", s.sock, "--method",
                        "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/NodePrepareResources",
                        "--raw-hex", claims)
        check(j.get("code") == "INVALID_ARGUMENT" and "65 claims" in j.get("details", ""),
              "65 claims in one call: refused, saying so", json.dumps(j))
        code, det = raw_call(s.sock, "/test.Echo/Fail", b"")
        check(code == "INVALID_ARGUMENT" and det == "refused: 100% wrong, caf\u00e9\nnext line",
              "a handler's status and message (percent-encoded, decoded by grpc)", f"{code} {det!r}")

        code, resp = raw_call(s.sock, "/test.Echo/Echo", b"x" * (4 << 20), timeout=20)
        check(code == "OK" and resp == b"x" * (4 << 20), "a message of 4 MiB: echoed", code)
        code, det = raw_call(s.sock, "/test.Echo/Echo", b"x" * ((4 << 20) + 1), timeout=20)
        check(code == "RESOURCE_EXHAUSTED", "a message of 4 MiB + 1: RESOURCE_EXHAUSTED",
              f"{code} {det!r}")
        code, det = raw_call(s.sock, "/test.Echo/Big", b"")
        check(code == "RESOURCE_EXHAUSTED", "a response of 4 MiB + 1: RESOURCE_EXHAUSTED",
              f"{code} {det!r}")
        code, det = raw_call(s.sock, "/test.Echo/Echo", b"hello" * 100,
                             compression=grpc.Compression.Gzip)
        check(code == "UNIMPLEMENTED" and "compressed" in str(det),
              "a compressed message: UNIMPLEMENTED, saying so", f"{code} {det!r}")

        # Garbage on the socket: no preface, a preface and junk, a cut frame; then a real call.
        junk = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", os.urandom(3000),
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + os.urandom(500),
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03"]
        for data in junk:
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(5)
            c.connect(s.sock)
            try:
                c.sendall(data)
                while c.recv(4096):
                    pass
            except OSError:
                pass
            c.close()
        code, resp = raw_call(s.sock, "/test.Echo/Echo", b"still")
        check(code == "OK" and resp == b"still", "garbage on the socket: the server still answers",
              code)

        # Many connections: 40 idle ones (each sends the preface and waits) are held to the
        # bound by cutting the oldest idle, and a new client is still served.
        idle = []
        for _ in range(40):
            c = socket.socket(socket.AF_UNIX)
            c.settimeout(5)
            c.connect(s.sock)
            c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
            idle.append(c)
        t0 = time.time()
        code, resp = raw_call(s.sock, "/test.Echo/Echo", b"newcomer")
        check(code == "OK" and time.time() - t0 < 3,
              "40 idle connections: a new client is served at once", code)
        cut = 0
        for c in idle:
            c.settimeout(0.2)
            try:
                while True:
                    b = c.recv(65536)
                    if not b:
                        cut += 1
                        break
            except OSError:
                pass
        check(cut >= 40 - 16, f"the oldest idle connections were cut ({cut} of 40)")

        # A slow handler on one connection does not hold up another connection's call.
        th = threading.Thread(target=lambda: res.update(slow=raw_call(s.sock, "/test.Echo/Sleep",
                                                                      b"2000")))
        th.start()
        time.sleep(0.3)
        t0 = time.time()
        code, _ = raw_call(s.sock, "/test.Echo/Echo", b"quick")
        check(code == "OK" and time.time() - t0 < 1.5,
              "a handler of 2 s on one connection: another connection is served meanwhile",
              f"{code} after {time.time() - t0:.2f}s")
        th.join()
        check(res.get("slow", ("",))[0] == "OK", "the slow handler's call completes")

        # Nor another call of its own connection (the kubelet keeps one and calls at once).
        with grpc.insecure_channel("unix:" + s.sock) as ch:
            slow_f = ch.unary_unary("/test.Echo/Sleep").future(b"2000", timeout=10)
            time.sleep(0.3)
            t0 = time.time()
            got = ch.unary_unary("/test.Echo/Echo")(b"beside", timeout=5)
            quick = time.time() - t0
            check(got == b"beside" and quick < 1.5 and slow_f.result() == b"",
                  "a handler of 2 s: another call on the same connection is served meanwhile",
                  f"{quick:.2f}s")

        # Several calls at once on one channel (one connection, several streams).
        with grpc.insecure_channel("unix:" + s.sock) as ch:
            f = ch.unary_unary("/test.Echo/Echo")
            futs = [f.future(b"n%d" % i, timeout=10) for i in range(12)]
            got = [x.result() for x in futs]
        check(got == [b"n%d" % i for i in range(12)], "12 calls at once on one connection")

        long_th.join()
        slow_th.join()
        sp = res.get("slow_peer")
        check(isinstance(sp, float) and 9 < sp < 14,
              "a call left half-sent: the connection is cut after about 10 s", str(sp))
        check(res.get("long", ("",))[0] == "OK", "a handler of 11 s is not cut by the deadline",
              str(res.get("long")))

        # A stop with clients connected: an idle connection and a call in flight.
        keep = socket.socket(socket.AF_UNIX)
        keep.connect(s.sock)
        keep.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        th = threading.Thread(target=lambda: res.update(inflight=raw_call(
            s.sock, "/test.Echo/Sleep", b"1000")))
        th.start()
        time.sleep(0.4)
        t0 = time.time()
        rc, out = s.stop()
        took = time.time() - t0
        th.join()
        lines = dict(l.split(" ", 1) for l in out.splitlines() if " " in l)
        check(rc == 0 and took < 5, f"stopped with clients connected in {took:.2f}s",
              f"rc {rc}, {out!r}")
        check(int(lines.get("conns", "99")) <= 16, f"connections at the stop: {lines.get('conns')} (bound 16)")
        check(res.get("inflight", ("",))[0] == "OK", "the call in flight at the stop completed",
              str(res.get("inflight")))
        check(not os.path.exists(s.sock), "the socket is removed at the stop")
        keep.close()
        for c in idle:
            c.close()
    finally:
        if s.p.poll() is None:
            s.p.kill()
    if fails:
        print(f"grpc_check: {fails} failure(s)")
        return 1
    print("grpc_check: all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
