#!/usr/bin/python3
"""Our kubelet protos (proto/) against the upstream facts (tests/k8s/upstream_fields.json).

Compiles proto/ into a FileDescriptorSet with protoc-c (or reads one given with --set),
reduces every file to its facts (package, services and methods with their types, messages with
each field's number, type, label, type name, proto3 optional, map entries) and compares them
with the table, naming every difference. It also checks what gpusliced relies on: that the
messages of DRA v1beta1, whose generated C code decodes and encodes both versions, have the
fields of v1 with the same numbers and types (v1 only adds Device.share_id, which we never set).

usage: proto_check.py [--protoc PROTOC] [--set FILE] [--table FILE]
       proto_check.py --dump DIR FILE...   (the facts of upstream files, to write the table)
Run it with /usr/bin/python3 (Debian's python3-protobuf).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OURS = ["pluginregistration/v1/api.proto", "dra/v1/api.proto", "dra/v1beta1/api.proto"]

FDP = descriptor_pb2.FieldDescriptorProto
TYPES = {v: k[len("TYPE_"):].lower() for k, v in FDP.Type.items()}
LABELS = {v: k[len("LABEL_"):].lower() for k, v in FDP.Label.items()}


def compile_set(protoc, proto_dir, files):
    """The FileDescriptorSet of files (relative to proto_dir), as protoc-c writes it."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "set.pb")
        subprocess.run([protoc, "-I" + proto_dir, "--descriptor_set_out=" + out,
                        "--include_imports"] + files, check=True)
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
        return fds


def message_facts(m):
    fields = {}
    for f in m.field:
        fact = {"number": f.number, "type": TYPES[f.type], "label": LABELS[f.label]}
        if f.type_name:
            fact["type_name"] = f.type_name
        if f.proto3_optional:
            fact["proto3_optional"] = True
        fields[f.name] = fact
    facts = {"fields": fields}
    if m.options.map_entry:
        facts["map_entry"] = True
    nested = {n.name: message_facts(n) for n in m.nested_type}
    if nested:
        facts["nested"] = nested
    if m.enum_type:
        facts["enums"] = sorted(e.name for e in m.enum_type)
    return facts


def file_facts(fd):
    return {
        "package": fd.package,
        "syntax": fd.syntax or "proto2",
        "services": {s.name: {meth.name: {"input": meth.input_type, "output": meth.output_type,
                                          "client_streaming": meth.client_streaming,
                                          "server_streaming": meth.server_streaming}
                              for meth in s.method} for s in fd.service},
        "messages": {m.name: message_facts(m) for m in fd.message_type},
        "enums": sorted(e.name for e in fd.enum_type),
    }


def diff(path, want, got, out):
    """Appends to out a line for every difference between want and got, under path."""
    if isinstance(want, dict) and isinstance(got, dict):
        for k in sorted(set(want) | set(got)):
            if k not in got:
                out.append(f"{path}.{k}: upstream has it, ours does not ({json.dumps(want[k])})")
            elif k not in want:
                out.append(f"{path}.{k}: ours has it, upstream does not ({json.dumps(got[k])})")
            else:
                diff(f"{path}.{k}", want[k], got[k], out)
    elif want != got:
        out.append(f"{path}: upstream {json.dumps(want)}, ours {json.dumps(got)}")


def same_shape(v1, beta, out):
    """Every field of every v1beta1 message is in v1 with the same number, type and label."""
    def walk(path, a, b):
        for name, mb in b.items():
            ma = a.get(name)
            if ma is None:
                out.append(f"{path}{name}: in v1beta1, not in v1")
                continue
            for fname, fb in mb["fields"].items():
                fa = ma["fields"].get(fname)
                strip = lambda f: {k: v for k, v in f.items() if k != "type_name"}
                if fa is None or strip(fa) != strip(fb) or \
                        ("type_name" in fb) != ("type_name" in fa) or \
                        fa.get("type_name", "").rsplit(".", 1)[-1] != \
                        fb.get("type_name", "").rsplit(".", 1)[-1]:
                    out.append(f"{path}{name}.{fname}: v1 {json.dumps(fa)}, v1beta1 {json.dumps(fb)}")
            walk(f"{path}{name}.", ma.get("nested", {}), mb.get("nested", {}))
    walk("", v1["messages"], beta["messages"])
    if v1["services"] != {s: {m: dict(x, input=x["input"].replace(".v1beta1.", ".v1."),
                                      output=x["output"].replace(".v1beta1.", ".v1."))
                              for m, x in ms.items()} for s, ms in beta["services"].items()}:
        out.append("the services of v1 and v1beta1 differ")


def check_header(path, reg):
    import re
    with open(path, encoding="utf-8") as f:
        text = f.read()
    defs = dict(re.findall(r'^#define (GD_DRA_\w+) "([^"]*)"', text, re.M))
    want = {"GD_DRA_SERVICE_V1": reg["dra_service_versions"]["v1"],
            "GD_DRA_SERVICE_V1BETA1": reg["dra_service_versions"]["v1beta1"],
            "GD_DRA_PATH_V1": reg["grpc_paths"]["v1"],
            "GD_DRA_PATH_V1BETA1": reg["grpc_paths"]["v1beta1"],
            "GD_DRA_REG_PATH": reg["grpc_paths"]["registration"]}
    return [f"src/daemon/dra.h: {k} is {defs.get(k)!r}, upstream {v!r}"
            for k, v in want.items() if defs.get(k) != v]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default="protoc-c")
    ap.add_argument("--set", help="a FileDescriptorSet of proto/ already written")
    ap.add_argument("--table", default=os.path.join(HERE, "upstream_fields.json"))
    ap.add_argument("--dump", nargs="+", metavar=("DIR", "FILE"),
                    help="print the facts of FILEs under DIR (upstream) as JSON")
    a = ap.parse_args()
    if a.dump:
        fds = compile_set(a.protoc, a.dump[0], a.dump[1:])
        facts = {fd.name: file_facts(fd) for fd in fds.file if fd.name in a.dump[1:]}
        json.dump(facts, sys.stdout, indent=1, sort_keys=True)
        print()
        return 0

    with open(a.table, encoding="utf-8") as f:
        table = json.load(f)
    if a.set:
        fds = descriptor_pb2.FileDescriptorSet()
        with open(a.set, "rb") as f:
            fds.ParseFromString(f.read())
    else:
        fds = compile_set(a.protoc, os.path.join(ROOT, "proto"), OURS)
    ours = {fd.name: file_facts(fd) for fd in fds.file}
    errs = []
    for name, entry in table["files"].items():
        mine = entry["ours"]
        if mine not in ours:
            errs.append(f"{mine}: not among our protos (upstream {entry['upstream_path']})")
            continue
        diff(mine, entry["facts"], ours[mine], errs)
    extra = set(ours) - {e["ours"] for e in table["files"].values()}
    for name in sorted(extra):
        errs.append(f"{name}: ours, but the table has no upstream facts for it")
    if not errs and "dra/v1/api.proto" in ours and "dra/v1beta1/api.proto" in ours:
        same_shape(ours["dra/v1/api.proto"], ours["dra/v1beta1/api.proto"], errs)
    # What gpusliced names in its code (src/daemon/dra.h) against the same facts.
    errs += check_header(os.path.join(ROOT, "src", "daemon", "dra.h"), table["registration"])
    for e in errs:
        print("FAIL: " + e)
    if errs:
        print(f"proto_check: {len(errs)} difference(s) from {os.path.relpath(a.table, ROOT)} "
              f"(upstream {table['source']['repo']} at {table['source']['commit'][:12]})")
        return 1
    nfields = sum(len(m["fields"]) for f in ours.values() for m in f["messages"].values())
    nmeth = sum(len(s) for f in ours.values() for s in f["services"].values())
    print(f"ok: {len(ours)} proto files, {nmeth} methods, {nfields} top-level fields equal upstream; "
          "v1beta1's messages are v1's fields with the same numbers and types; dra.h's paths and "
          "versions are upstream's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
