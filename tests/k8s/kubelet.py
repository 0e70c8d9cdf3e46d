#!/usr/bin/python3
"""The kubelet's side of a DRA plugin, through a real gRPC library (Debian's python3-grpcio).

Message classes come from a FileDescriptorSet of our proto/ (--descriptor-set FILE, as the
build writes it to build/proto/kubelet.pb; else protoc-c writes one into a temporary
directory). Every call has a deadline (--timeout, seconds). Prints JSON; exits 0 on success,
1 when the plugin answered wrong or failed, 2 on bad usage.

  register --registry-sock PATH        GetInfo, checked as the kubelet does; then
                                       NotifyRegistrationStatus(plugin_registered=true)
  prepare   --sock PATH --version v1|v1beta1 [--errors FILE] NS/NAME/UID ...
  unprepare --sock PATH --version v1|v1beta1 [--errors FILE] NS/NAME/UID ...
                                       (FILE: a line a claim, its UID, a tab and its error)
  call --sock PATH --method /pkg.Service/Method --raw-hex HEX   (bytes in, bytes out)
  serve-batch --sock PATH --version v1|v1beta1
                                       one connection kept, as the kubelet keeps its own: each
                                       line of stdin {"op": "prepare"|"unprepare", "claims":
                                       ["NS/NAME/UID", ...]} is one call, answered by a line
                                       {"claims": {...}, "seconds": how long the call took}

Run it with /usr/bin/python3: it needs Debian's python3-grpcio and python3-protobuf.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PROTOS = ["pluginregistration/v1/api.proto", "dra/v1/api.proto", "dra/v1beta1/api.proto"]
DRA_PKG = "k8s.io.kubelet.pkg.apis.dra."
# What the kubelet knows (tests/k8s/upstream_fields.json, "registration").
FACTS = json.load(open(os.path.join(HERE, "upstream_fields.json"), encoding="utf-8"))["registration"]


def load_set(path):
    fds = descriptor_pb2.FileDescriptorSet()
    if path:
        with open(path, "rb") as f:
            fds.ParseFromString(f.read())
    else:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "set.pb")
            subprocess.run(["protoc-c", "-I" + os.path.join(ROOT, "proto"),
                            "--descriptor_set_out=" + out, "--include_imports"] + PROTOS,
                           check=True)
            with open(out, "rb") as f:
                fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    return pool


class Messages:
    def __init__(self, pool):
        self.pool = pool
        self.factory = message_factory.MessageFactory(pool)

    def cls(self, full_name):
        d = self.pool.FindMessageTypeByName(full_name)
        if hasattr(message_factory, "GetMessageClass"):
            return message_factory.GetMessageClass(d)
        return self.factory.GetPrototype(d)


def unary(channel, path, req_cls, resp_cls):
    return channel.unary_unary(path, request_serializer=req_cls.SerializeToString if req_cls else None,
                               response_deserializer=resp_cls.FromString if resp_cls else None)


def rpc_error(e):
    return {"code": e.code().name, "code_value": e.code().value[0], "details": e.details()}


def out(obj, rc=0):
    print(json.dumps(obj, indent=1, sort_keys=True))
    return rc


def channel_for(sock):
    return grpc.insecure_channel("unix:" + sock)


def do_register(a, m):
    ch = channel_for(a.registry_sock)
    info_cls = m.cls("pluginregistration.PluginInfo")
    get = unary(ch, "/pluginregistration.Registration/GetInfo",
                m.cls("pluginregistration.InfoRequest"), info_cls)
    try:
        info = get(m.cls("pluginregistration.InfoRequest")(), timeout=a.timeout)
    except grpc.RpcError as e:
        return out({"error": "GetInfo failed", **rpc_error(e)}, 1)
    got = json_format.MessageToDict(info, preserving_proto_field_name=True)
    problems = []
    if info.type != FACTS["plugin_type"]["value"]:
        problems.append(f"type is {info.type!r}, not {FACTS['plugin_type']['value']!r}")
    if not info.name:
        problems.append("name is empty")
    known = [v for k, v in FACTS["dra_service_versions"].items() if k != "from"]
    if not any(v in known for v in info.supported_versions):
        problems.append(f"supported_versions {list(info.supported_versions)} has none of {known}")
    endpoint = info.endpoint
    if not endpoint:
        problems.append("endpoint is empty")
    elif not os.path.exists(endpoint):
        problems.append(f"endpoint {endpoint} does not exist")
    status_cls = m.cls("pluginregistration.RegistrationStatus")
    notify = unary(ch, "/pluginregistration.Registration/NotifyRegistrationStatus", status_cls,
                   m.cls("pluginregistration.RegistrationStatusResponse"))
    st = status_cls(plugin_registered=not problems, error="; ".join(problems))
    try:
        notify(st, timeout=a.timeout)
    except grpc.RpcError as e:
        return out({"error": "NotifyRegistrationStatus failed", "info": got, **rpc_error(e)}, 1)
    if problems:
        return out({"error": "; ".join(problems), "info": got}, 1)
    return out({"info": got, "registered": True})


def parse_claims(specs):
    claims = []
    for s in specs:
        parts = s.split("/")
        if len(parts) != 3:
            raise SystemExit(f"kubelet.py: {s!r} is not NAMESPACE/NAME/UID")
        claims.append({"namespace": parts[0], "name": parts[1], "uid": parts[2]})
    return claims


def do_claims(a, m, verb):
    pkg = DRA_PKG + a.version + "."
    req_name = "NodePrepareResourcesRequest" if verb == "prepare" else "NodeUnprepareResourcesRequest"
    resp_name = req_name.replace("Request", "Response")
    method = "NodePrepareResources" if verb == "prepare" else "NodeUnprepareResources"
    req_cls, resp_cls = m.cls(pkg + req_name), m.cls(pkg + resp_name)
    req = req_cls()
    for c in parse_claims(a.claims):
        req.claims.add(**c)
    call = unary(channel_for(a.sock), f"/{pkg}DRAPlugin/{method}", req_cls, resp_cls)
    errors = open(a.errors, "w") if a.errors else None
    try:
        resp = call(req, timeout=a.timeout)
    except grpc.RpcError as e:
        return out(rpc_error(e), 1)
    claims = json_format.MessageToDict(resp, preserving_proto_field_name=True).get("claims", {})
    if errors:
        # One line a claim answered: its UID, a tab, its error ("" for none), on one line.
        for uid, ans in claims.items():
            err = " ".join(ans.get("error", "").replace("\t", " ").splitlines())
            errors.write(f"{uid}\t{err}\n")
        errors.close()
    return out({"claims": claims})


def do_batch(a, m):
    import time
    pkg = DRA_PKG + a.version + "."
    ch = channel_for(a.sock)
    calls = {}
    for verb, method in (("prepare", "NodePrepareResources"), ("unprepare", "NodeUnprepareResources")):
        req_name = method + "Request"
        req_cls, resp_cls = m.cls(pkg + req_name), m.cls(pkg + method + "Response")
        calls[verb] = (req_cls, unary(ch, f"/{pkg}DRAPlugin/{method}", req_cls, resp_cls))
    for line in sys.stdin:
        if not line.strip():
            continue
        op = json.loads(line)
        req_cls, call = calls[op["op"]]
        req = req_cls()
        for c in parse_claims(op["claims"]):
            req.claims.add(**c)
        t0 = time.monotonic()
        try:
            resp = call(req, timeout=a.timeout)
            ans = {"claims": json_format.MessageToDict(resp, preserving_proto_field_name=True)
                   .get("claims", {})}
        except grpc.RpcError as e:
            ans = {"rpc_error": rpc_error(e), "claims": {}}
        ans["seconds"] = time.monotonic() - t0
        print(json.dumps(ans), flush=True)
    return 0


def do_call(a, m):
    call = unary(channel_for(a.sock), a.method, None, None)
    try:
        data = bytes.fromhex(a.raw_hex)
    except ValueError:
        print(f"kubelet.py: --raw-hex {a.raw_hex!r} is not hex", file=sys.stderr)
        return 2
    try:
        resp = call(data, timeout=a.timeout)
    except grpc.RpcError as e:
        return out(rpc_error(e), 1)
    return out({"code": "OK", "code_value": 0, "response_hex": resp.hex()})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--descriptor-set", help="a FileDescriptorSet of proto/ (build/proto/kubelet.pb)")
    ap.add_argument("--timeout", type=float, default=10.0, help="each call's deadline, seconds")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("register")
    r.add_argument("--registry-sock", required=True)
    for verb in ("prepare", "unprepare"):
        p = sub.add_parser(verb)
        p.add_argument("--sock", required=True)
        p.add_argument("--version", choices=("v1", "v1beta1"), required=True)
        p.add_argument("--errors", metavar="FILE", help="also write each claim's UID and error "
                       "(empty for none), tab-separated, a line each (an empty file when the "
                       "call fails)")
        p.add_argument("claims", nargs="+", metavar="NS/NAME/UID")
    b = sub.add_parser("serve-batch")
    b.add_argument("--sock", required=True)
    b.add_argument("--version", choices=("v1", "v1beta1"), required=True)
    c = sub.add_parser("call")
    c.add_argument("--sock", required=True)
    c.add_argument("--method", required=True)
    c.add_argument("--raw-hex", default="")
    a = ap.parse_args()
    m = Messages(load_set(a.descriptor_set))
    if a.cmd == "register":
        return do_register(a, m)
    if a.cmd in ("prepare", "unprepare"):
        return do_claims(a, m, a.cmd)
    if a.cmd == "serve-batch":
        return do_batch(a, m)
    return do_call(a, m)


if __name__ == "__main__":
    sys.exit(main())
