"""A CDI spec's container edits as a shell script a test runs in a mount namespace of its own
(`unshare --mount`), as a container runtime applies them: each mount bind-mounted, read-only
where its options say so, then the environment, then `exec "$@"`.

    python3 cdi_apply.py SPEC.json [DEVICE] > apply.sh;  unshare --mount sh apply.sh PROGRAM...

The host is never changed: a mount point the host lacks is made inside a tmpfs mounted, in the
namespace only, over its nearest existing parent directory (its other entries are then hidden
there). A file mount point the host lacks, /etc/ld.so.preload on most hosts, cannot be made
without writing /etc: the library it names is given as LD_PRELOAD instead, which the dynamic
loader treats the same way for programs the test runs.
"""
import json
import os
import shlex
import sys


def main():
    spec = json.load(open(sys.argv[1]))
    want = sys.argv[2] if len(sys.argv) > 2 else None
    devs = [d for d in spec.get("devices", []) if want is None or d["name"] == want]
    if len(devs) != 1:
        sys.exit("cdi_apply: %s: want one device%s, found %d" %
                 (sys.argv[1], " named " + want if want else "", len(devs)))
    edits = [spec.get("containerEdits", {}), devs[0].get("containerEdits", {})]
    out = ["set -e"]
    made = set()
    preload = None
    for e in edits:
        for m in e.get("mounts", []):
            src, dst, opts = m["hostPath"], m["containerPath"], m.get("options", [])
            if not os.path.lexists(dst) and dst not in made:
                if not os.path.isdir(src):
                    if dst == "/etc/ld.so.preload":
                        preload = src
                        continue
                    sys.exit("cdi_apply: %s: no such file on this host" % dst)
                parent = os.path.dirname(dst)
                while not os.path.isdir(parent):
                    parent = os.path.dirname(parent)
                if parent not in made:
                    out.append("mount -t tmpfs gs-cdi %s" % shlex.quote(parent))
                    made.add(parent)
                out.append("mkdir -p %s" % shlex.quote(dst))
                made.add(dst)
            out.append("mount --bind %s %s" % (shlex.quote(src), shlex.quote(dst)))
            if "ro" in opts:
                out.append("mount -o remount,bind,ro %s" % shlex.quote(dst))
    for e in edits:
        for kv in e.get("env", []):
            k, _, v = kv.partition("=")
            out.append("export %s=%s" % (k, shlex.quote(v)))
    if preload:
        libs = " ".join(x for x in open(preload).read().split() if x)
        out.append("export LD_PRELOAD=%s" % shlex.quote(libs))
    out.append('exec "$@"')
    print("\n".join(out))


if __name__ == "__main__":
    main()
