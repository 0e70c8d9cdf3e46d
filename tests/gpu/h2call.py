"""The kubelet's Prepare and Unprepare calls, stdlib only, for machines without grpcio (the GPU
image: Python 3.12, and Debian's python3-grpcio is built for 3.11). One unary gRPC call over
HTTP/2 with prior knowledge on a Unix socket: the request's headers as HPACK literals (never
indexed, never Huffman-coded: valid for any server), its message in one DATA frame; the answer's
message is the DATA of stream 1. The answer's headers are not decoded (that needs HPACK's
Huffman table): a call that ends without a message is reported as failed, and the CPU suite's
client (tests/k8s/kubelet.py, on grpcio) checks statuses and trailers.

    python3 h2call.py prepare|unprepare SOCK v1|v1beta1 NS/NAME/UID ...   -> JSON on stdout
"""
import json
import socket
import struct
import sys

SERVICE = {"v1": "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin",
           "v1beta1": "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"}


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field_bytes(num, data):
    return varint(num << 3 | 2) + varint(len(data)) + data


def fields(buf):
    """(number, wire type, value) of a message's fields; length-delimited values as bytes."""
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(buf, i)
        elif wt == 2:
            n, i = read_varint(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def claims_request(refs):
    """NodePrepareResourcesRequest / NodeUnprepareResourcesRequest: field 1, repeated Claim
    (namespace 1, uid 2, name 3)."""
    out = b""
    for ref in refs:
        ns, name, uid = ref.split("/")
        out += field_bytes(1, field_bytes(1, ns.encode()) + field_bytes(2, uid.encode()) +
                           field_bytes(3, name.encode()))
    return out


def decode_answer(buf, prepare):
    """The claims map (field 1: entries of key 1, value 2) of either response."""
    claims = {}
    for num, _, entry in fields(buf):
        if num != 1:
            continue
        key, val = "", b""
        for n, _, v in fields(entry):
            if n == 1:
                key = v.decode()
            elif n == 2:
                val = v
        one = {"error": "", "devices": []}
        for n, _, v in fields(val):
            if prepare and n == 1:
                dev = {"request_names": [], "pool_name": "", "device_name": "",
                       "cdi_device_ids": []}
                for dn, _, dv in fields(v):
                    if dn == 1:
                        dev["request_names"].append(dv.decode())
                    elif dn == 2:
                        dev["pool_name"] = dv.decode()
                    elif dn == 3:
                        dev["device_name"] = dv.decode()
                    elif dn == 4:
                        dev["cdi_device_ids"].append(dv.decode())
                one["devices"].append(dev)
            elif (prepare and n == 2) or (not prepare and n == 1):
                one["error"] = v.decode()
        claims[key] = one
    return claims


def literal(name, value):
    """An HPACK literal header field without indexing, new name, no Huffman coding."""
    def s(x):
        x = x.encode()
        assert len(x) < 127
        return bytes([len(x)]) + x
    return b"\x00" + s(name) + s(value)


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + \
        struct.pack(">I", stream) + payload


def call(sock_path, path, message, timeout=60):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    hdrs = b"".join(literal(k, v) for k, v in (
        (":method", "POST"), (":scheme", "http"), (":path", path), (":authority", "localhost"),
        ("content-type", "application/grpc"), ("te", "trailers")))
    s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") +
              frame(1, 4, 1, hdrs) +
              frame(0, 1, 1, b"\x00" + struct.pack(">I", len(message)) + message))
    buf, data, ended = b"", b"", False
    while not ended:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 9:
            n = struct.unpack(">I", b"\x00" + buf[:3])[0]
            if len(buf) < 9 + n:
                break
            ftype, flags = buf[3], buf[4]
            stream = struct.unpack(">I", buf[5:9])[0] & 0x7FFFFFFF
            payload, buf = buf[9:9 + n], buf[9 + n:]
            if ftype == 4 and not flags & 1:
                s.sendall(frame(4, 1, 0, b""))  # the server's settings, acknowledged
            elif ftype == 6 and not flags & 1:
                s.sendall(frame(6, 1, 0, payload))
            elif ftype == 0 and stream == 1:
                data += payload
                ended = bool(flags & 1)
            elif ftype == 1 and stream == 1:
                ended = bool(flags & 1)
            elif ftype in (3, 7):
                ended = True
    s.close()
    if len(data) < 5:
        return None
    n = struct.unpack(">I", data[1:5])[0]
    return data[5:5 + n]


def main():
    op, sock, ver = sys.argv[1:4]
    refs = sys.argv[4:]
    method = "NodePrepareResources" if op == "prepare" else "NodeUnprepareResources"
    got = call(sock, "/%s/%s" % (SERVICE[ver], method), claims_request(refs))
    if got is None:
        print(json.dumps({"error": "the call ended without an answer (a gRPC error status)"}))
        sys.exit(1)
    print(json.dumps({"claims": decode_answer(got, op == "prepare")}))


if __name__ == "__main__":
    main()
