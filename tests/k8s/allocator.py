#!/usr/bin/env python3
"""Plays the scheduler's part in DRA for the tests: allocates a ResourceClaim on the stand-in API
server (tests/k8s/apiserver.py), as kube-scheduler's structured allocator would, with consumable
capacity.

What it follows (facts, not text):
  - KEP-5075 "DRA: Consumable Capacity", kubernetes/enhancements
    keps/sig-scheduling/5075-dra-consumable-capacity/README.md at
    05421c409c0204749bcf079cd9aff8adbbcb1f07 (https://www.kubernetes.dev/resources/keps/5075/):
    a device with allowMultipleAllocations may go to many claims; the scheduler sums what the
    allocated claims' results consumed, plus what this allocation already took, and a device is
    eligible only when the rounded request still fits; each allocation of such a device gets a
    fresh random shareID and records its consumedCapacity; a request naming no amount consumes
    the default; a class may select on device.allowMultipleAllocations. (The KEP's design names
    -- sharingPolicy, capacityRequests.minimum, chunkSize -- became requestPolicy,
    capacity.requests and step in v1; the names here are v1's.)
  - resource.k8s.io/v1 types (kubernetes/api resource/v1/types.go at
    3e2530e16653153f11415a5e2527ce7b96a1f80d): CapacityRequestPolicy and its range (below min ->
    min; with a step, rounded up to min + n*step; over max -> the device is not eligible),
    validValues (the smallest one >= the request; over the largest -> not eligible), default
    (what a request that does not name the capacity consumes; without a policy, the whole
    value); shareID in the form of a UID (validation's validateUID: lower-case RFC 4122);
    CapacityRequirements (a request naming a capacity the device lacks -> not eligible);
    DeviceRequestAllocationResult (request, driver, pool, device, shareID, consumedCapacity);
    DeviceAllocationConfiguration (source FromClass / FromClaim); ExactDeviceRequest (count
    defaults to 1 with allocationMode ExactCount); ResourceClaimConsumerReference.
  - k8s.io/dynamic-resource-allocation structured/internal/incubating, the consumed-capacity
    helpers (calculateConsumedCapacity, roundUpRange, roundUpValidValues, violatesPolicy,
    CmpRequestOverCapacity): the order of rounding and checking reproduced below.
  - The allocator's pool rule: only the slices of a pool's highest generation count, and a pool
    with fewer slices than its resourceSliceCount is incomplete and not used.

The subset it understands (anything else is refused with exit 2, naming it):
  - requests with `exactly` (not firstAvailable), allocationMode ExactCount (not All);
  - CEL selectors (the DeviceClass's and the request's) made of terms joined by `&&`, each
    `device.driver == "NAME"` (or 'NAME'), `device.allowMultipleAllocations == true|false` or
    `true`; i.e. a match on the driver's name and on sharing;
  - no constraints, no tolerations or taints, no admin access; devices are taken greedily in
    the order of slice name and device order (no search for a better packing);
  - the claim's devices all come from one node: --node, or the first node (by name) where every
    request fits; allNodes slices fit any node.

usage:
  allocator.py (--control URL | --api URL [--ca FILE] [--token T]) allocate --claim NS/NAME
               [--pod NAME/UID] [--node NODE] [--force [POOL/]DEVICE]
  allocator.py (--control URL | --api URL ...) release --claim NS/NAME [--claim NS/NAME...]
    --control  the stand-in's control listener (reads /objects/..., writes the claim there)
    --api      its API (or any API server): lists resourceslices, gets deviceclasses, lists
               resourceclaims, writes the claim through resourceclaims/NAME/status
    --pod      added to status.reservedFor ({resource: pods, name, uid}); an allocated claim is
               only reserved for it
    --force    the allocation written on that device without checking fit or policy: a broken
               scheduler, for the driver's tests
    release    status.allocation and status.reservedFor removed
  What was written is printed, a line per result:
    NS/NAME: REQUEST -> DRIVER POOL/DEVICE [share SHAREID] [CAPACITY=QUANTITY...]
exit: 0 written; 1 the server failed or an object is missing; 2 a usage or a feature outside
the subset; 3 no device fits (the message says why for each device looked at).
"""
import argparse
import json
import re
import ssl
import sys
import time
import urllib.error
import urllib.request
import uuid
from fractions import Fraction

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
from schema import parse_quantity  # noqa: E402

EXIT_FAIL, EXIT_USAGE, EXIT_NOFIT = 1, 2, 3


class Refused(Exception):
    def __init__(self, code, msg):
        super().__init__(msg)
        self.code = code


# ---- the server ----
class Server:
    """The objects, from the stand-in's control listener or from an API server."""

    def __init__(self, a):
        self.control = a.control
        self.base = (a.control or a.api).rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if a.token:
            self.headers["Authorization"] = "Bearer " + a.token
        self.ctx = ssl.create_default_context(cafile=a.ca) if a.ca else None

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + path, method=method, headers=self.headers,
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            try:
                msg = json.load(e).get("message", "")
            except ValueError:
                msg = ""
            if e.code == 404:
                return None
            raise Refused(EXIT_FAIL, f"{method} {path}: {e.code} {msg}")
        except (urllib.error.URLError, OSError) as e:
            raise Refused(EXIT_FAIL, f"{method} {self.base}{path}: {e}")

    def items(self, res):
        if self.control:
            return self.call("GET", f"/objects/{res}") or []
        out = self.call("GET", f"/apis/resource.k8s.io/v1/{res}")
        return (out or {}).get("items", [])

    def get(self, res, ns, name):
        if self.control:
            return self.call("GET", f"/objects/{res}/" + (f"{ns}/" if ns else "") + name)
        return self.call("GET", "/apis/resource.k8s.io/v1/" + (f"namespaces/{ns}/" if ns else "")
                         + f"{res}/{name}")

    def write_claim(self, claim):
        md = claim["metadata"]
        if self.control:
            return self.call("POST", "/objects", claim)
        return self.call("PUT", f"/apis/resource.k8s.io/v1/namespaces/{md['namespace']}/"
                         f"resourceclaims/{md['name']}/status", claim)


# ---- quantities ----
def fmt_quantity(v, binary):
    """A whole quantity as the API server writes it: the largest suffix that divides it."""
    v = int(v)
    if v == 0:
        return "0"
    suffixes = ([("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20),
                 ("Ki", 2**10)] if binary else
                [("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3)])
    for suf, m in suffixes:
        if v % m == 0:
            return f"{v // m}{suf}"
    return str(v)


def is_binary(cap):
    pol = cap.get("requestPolicy") or {}
    rng = pol.get("validRange") or {}
    return any(isinstance(q, str) and q.endswith("i")
               for q in (cap.get("value"), pol.get("default"), rng.get("step"), rng.get("min")))


def consumed(requested, cap):
    """(what the request consumes of this capacity, None) or (None, why not): the policy's
    rounding (calculateConsumedCapacity), then its check (violatesPolicy)."""
    value, binary = parse_quantity(cap["value"]), is_binary(cap)
    pol = cap.get("requestPolicy")
    if requested is None:
        if pol and pol.get("default") is not None:
            return parse_quantity(pol["default"]), None
        return value, None
    if not pol:
        return requested, None
    rng, values = pol.get("validRange"), pol.get("validValues")
    if rng and rng.get("min") is not None:
        lo = parse_quantity(rng["min"])
        got = lo if requested < lo else requested
        if rng.get("step") is not None and requested >= lo:
            step = parse_quantity(rng["step"])
            n = -((-(requested - lo)) // step)  # rounded up
            got = lo + n * step
        if rng.get("max") is not None and got > parse_quantity(rng["max"]):
            return None, f"{fmt(got, binary)} is over the policy's max {rng['max']}"
        return got, None
    if values:
        for v in values:
            if requested <= parse_quantity(v):
                return parse_quantity(v), None
        return None, f"{fmt(requested, binary)} is over the largest valid value {values[-1]}"
    return requested, None


def fmt(q, binary=False):
    return fmt_quantity(q, binary) if q.denominator == 1 else str(float(q))


# ---- CEL, the subset ----
CEL_DRIVER = re.compile(r"""^device\.driver\s*==\s*(?:"([^"]*)"|'([^']*)')$""")
CEL_MULTI = re.compile(r"^device\.allowMultipleAllocations\s*==\s*(true|false)$")


def cel_terms(expr):
    """A CEL selector of the subset as tests on a Device, or Refused for other CEL."""
    tests = []
    for term in (t.strip() for t in expr.split("&&")):
        m, n = CEL_DRIVER.match(term), CEL_MULTI.match(term)
        if m:
            name = m.group(1) if m.group(1) is not None else m.group(2)
            tests.append(lambda d, name=name: d.driver == name)
        elif n:
            tests.append(lambda d, want=n.group(1) == "true": d.multi == want)
        elif term != "true":
            raise Refused(EXIT_USAGE, f'CEL selector {expr!r}: only device.driver == "NAME", '
                          "device.allowMultipleAllocations == true|false and true, joined by &&, "
                          "are understood here")
    return tests


# ---- the devices ----
class Device:
    def __init__(self, sl, dev):
        spec = sl["spec"]
        self.driver, self.pool, self.name = spec["driver"], spec["pool"]["name"], dev["name"]
        self.node = spec.get("nodeName")  # None: allNodes (a nodeSelector is not understood)
        self.all_nodes = spec.get("allNodes") is True
        self.multi = dev.get("allowMultipleAllocations") is True
        self.caps = {self.short(k): v for k, v in (dev.get("capacity") or {}).items()}
        self.key = (self.driver, self.pool, self.name)

    def short(self, name):
        """A capacity's name without its domain when that is the driver's own."""
        return name[len(self.driver) + 1:] if name.startswith(self.driver + "/") else name

    def where(self):
        return f"{self.pool}/{self.name}"


def devices(slices):
    """The usable devices: the highest generation of each pool, complete pools only."""
    pools = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        p = spec.get("pool") or {}
        pools.setdefault((spec.get("driver"), p.get("name")), []).append(sl)
    out = []
    for key, sls in sorted(pools.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        gen = max(s["spec"]["pool"].get("generation", 0) for s in sls)
        cur = sorted((s for s in sls if s["spec"]["pool"].get("generation", 0) == gen),
                     key=lambda s: s["metadata"]["name"])
        if len(cur) < max(s["spec"]["pool"].get("resourceSliceCount", 1) for s in cur):
            continue  # incomplete: the allocator waits for the rest
        for s in cur:
            if s["spec"].get("nodeSelector") or s["spec"].get("perDeviceNodeSelection"):
                continue  # outside the subset
            out += [Device(s, d) for d in s["spec"].get("devices") or []]
    return out


class Usage:
    """What the other claims hold: per device, the sum consumed by shares, or the whole."""

    def __init__(self, claims, me):
        self.used, self.whole = {}, set()
        for c in claims:
            md = c.get("metadata") or {}
            if (md.get("namespace"), md.get("name")) == me:
                continue
            alloc = (c.get("status") or {}).get("allocation") or {}
            for r in (alloc.get("devices") or {}).get("results") or []:
                self.add(r)

    def add(self, r):
        key = (r.get("driver"), r.get("pool"), r.get("device"))
        if r.get("shareID") is None:
            self.whole.add(key)
            return
        u = self.used.setdefault(key, {})
        for k, v in (r.get("consumedCapacity") or {}).items():
            name = k[len(key[0]) + 1:] if k.startswith(f"{key[0]}/") else k
            u[name] = u.get(name, Fraction(0)) + parse_quantity(v)


def try_device(d, caps_req, usage):
    """(consumedCapacity or {} for a whole device, None) or (None, why not)."""
    asked = {d.short(k): parse_quantity(v) for k, v in caps_req.items()}
    missing = sorted(set(asked) - set(d.caps))
    if missing:
        return None, f"has no capacity {', '.join(missing)}"
    if d.key in usage.whole:
        return None, "allocated whole to another claim"
    if not d.multi:
        if d.key in usage.used:
            return None, "shared by other claims"
        for k, q in asked.items():
            if q > parse_quantity(d.caps[k]["value"]):
                return None, f"{k} {fmt(q)} is over its capacity {d.caps[k]['value']}"
        return {}, None
    out, used = {}, usage.used.get(d.key, {})
    for k, cap in sorted(d.caps.items()):
        got, why = consumed(asked.get(k), cap)
        if why:
            return None, f"{k}: {why}"
        have = used.get(k, Fraction(0))
        if have + got > parse_quantity(cap["value"]):
            b = is_binary(cap)
            return None, (f"{k}: {fmt(got, b)} more does not fit ({fmt(have, b)} of {cap['value']} "
                          "consumed)")
        out[k] = got
    return out, None


def result(req_name, d, got):
    r = {"request": req_name, "driver": d.driver, "pool": d.pool, "device": d.name}
    if d.multi:
        r["shareID"] = str(uuid.uuid4())
        r["consumedCapacity"] = {k: fmt_quantity(v, is_binary(d.caps[k])) for k, v in got.items()}
    return r


# ---- allocation ----
def read_requests(claim, classes):
    """[(name, count, the selectors' tests, capacity requests, the class)] of the claim."""
    out = []
    where = f"{claim['metadata'].get('namespace')}/{claim['metadata']['name']}"
    for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = r.get("name")
        if r.get("firstAvailable"):
            raise Refused(EXIT_USAGE, f"{where}: request {name}: firstAvailable is outside the subset")
        ex = r.get("exactly") or {}
        if (ex.get("allocationMode") or "ExactCount") != "ExactCount":
            raise Refused(EXIT_USAGE, f"{where}: request {name}: allocationMode "
                          f"{ex.get('allocationMode')} is outside the subset (ExactCount only)")
        cls = classes.get(ex.get("deviceClassName"))
        if cls is None:
            raise Refused(EXIT_FAIL, f"{where}: request {name}: deviceclass "
                          f"{ex.get('deviceClassName')!r} not found")
        want = []
        for sel in ((cls.get("spec") or {}).get("selectors") or []) + (ex.get("selectors") or []):
            want += cel_terms(((sel or {}).get("cel") or {}).get("expression", ""))
        caps = ((ex.get("capacity") or {}).get("requests")) or {}
        out.append((name, ex.get("count") or 1, want, caps, cls))
    if not out:
        raise Refused(EXIT_USAGE, f"{where}: no requests")
    return out


def allocate_on(node, reqs, devs, usage):
    """The results on node, or (None, the reasons)."""
    results, why = [], []
    taken = set()  # the whole devices of this claim
    for name, count, want, caps, _ in reqs:
        picked = set()
        for _ in range(count):
            for d in devs:
                if (d.node != node and not d.all_nodes) or not all(t(d) for t in want):
                    continue
                if d.key in picked or d.key in taken:
                    continue
                got, no = try_device(d, caps, usage)
                if no:
                    why.append(f"{d.where()} for {name}: {no}")
                    continue
                results.append(result(name, d, got))
                picked.add(d.key)
                if d.multi:
                    usage.add(results[-1])  # later requests see it consumed
                else:
                    taken.add(d.key)
                break
            else:
                return None, why or [f"no device the selectors of {name} accept on "
                                     f"{node or 'any node'}"]
    return results, why


def node_selector(node):
    return {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def allocation(claim, reqs, results, node):
    spec_devices = (claim.get("spec") or {}).get("devices") or {}
    config = []
    for cls_name in sorted({r[4]["metadata"]["name"] for r in reqs}):
        names = [r[0] for r in reqs if r[4]["metadata"]["name"] == cls_name]
        cls = next(r[4] for r in reqs if r[4]["metadata"]["name"] == cls_name)
        for c in (cls.get("spec") or {}).get("config") or []:
            config.append(dict(c, source="FromClass", requests=names))
    for c in spec_devices.get("config") or []:
        config.append(dict(c, source="FromClaim"))
    alloc = {"devices": {"results": results}, "allocationTimestamp": time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if config:
        alloc["devices"]["config"] = config
    if node:
        alloc["nodeSelector"] = node_selector(node)
    return alloc


def reserve(claim, pod):
    if not pod:
        return
    name, _, uid = pod.partition("/")
    if not name or not uid:
        raise Refused(EXIT_USAGE, f"--pod: {pod!r} is not NAME/UID")
    st = claim.setdefault("status", {})
    ref = {"resource": "pods", "name": name, "uid": uid}
    if not any(r.get("uid") == uid for r in st.get("reservedFor") or []):
        st.setdefault("reservedFor", []).append(ref)


def cmd_allocate(srv, a):
    ns, _, name = a.claim.partition("/")
    claim = srv.get("resourceclaims", ns, name)
    if claim is None:
        raise Refused(EXIT_FAIL, f"resourceclaim {a.claim} not found")
    st = claim.get("status") or {}
    if st.get("allocation") and not a.force:
        reserve(claim, a.pod)
        srv.write_claim(claim)
        print(f"{a.claim}: already allocated; reserved for {a.pod or 'no one new'}")
        return 0
    classes = {c["metadata"]["name"]: c for c in srv.items("deviceclasses")}
    reqs = read_requests(claim, classes)
    devs = devices(srv.items("resourceslices"))
    claims = srv.items("resourceclaims")
    if a.force:
        pool, _, dev = a.force.rpartition("/")
        match = [d for d in devs if d.name == dev and (not pool or d.pool == pool)]
        if not match:
            raise Refused(EXIT_FAIL, f"--force: no device {a.force!r} in the resourceslices")
        d, results = match[0], []
        for rname, count, _, caps, _ in reqs:
            got = {}
            for k, cap in sorted(d.caps.items()):
                asked = {d.short(x): parse_quantity(v) for x, v in caps.items()}.get(k)
                q, _ = consumed(asked, cap)
                got[k] = q if q is not None else asked
            results.append(result(rname, d, got))
        node = d.node
    else:
        nodes = [a.node] if a.node else sorted({d.node for d in devs if d.node}) or [None]
        reasons = []
        for node in nodes:
            results, why = allocate_on(node, reqs, devs, Usage(claims, (ns, name)))
            if results is not None:
                break
            reasons += [f"{node}: {w}" for w in why]
        else:
            raise Refused(EXIT_NOFIT, f"{a.claim}: no device fits: " + ("; ".join(reasons) or
                                                                          "no devices"))
    claim.setdefault("status", {})["allocation"] = allocation(claim, reqs, results, node)
    reserve(claim, a.pod)
    srv.write_claim(claim)
    for r in results:
        share = f" share {r['shareID']}" if "shareID" in r else ""
        used = " ".join(f"{k}={v}" for k, v in sorted((r.get("consumedCapacity") or {}).items()))
        print(f"{a.claim}: {r['request']} -> {r['driver']} {r['pool']}/{r['device']}{share} {used}".rstrip())
    return 0


def cmd_release(srv, a):
    for ref in a.claim:
        ns, _, name = ref.partition("/")
        claim = srv.get("resourceclaims", ns, name)
        if claim is None:
            raise Refused(EXIT_FAIL, f"resourceclaim {ref} not found")
        claim["status"] = {}
        srv.write_claim(claim)
        print(f"{ref}: released")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--control", help="the stand-in's control listener, http://127.0.0.1:PORT")
    src.add_argument("--api", help="the API server, https://HOST:PORT")
    ap.add_argument("--ca")
    ap.add_argument("--token")
    sub = ap.add_subparsers(dest="cmd", required=True)
    al = sub.add_parser("allocate")
    al.add_argument("--claim", required=True, metavar="NS/NAME")
    al.add_argument("--pod", metavar="NAME/UID")
    al.add_argument("--node")
    al.add_argument("--force", metavar="[POOL/]DEVICE")
    rel = sub.add_parser("release")
    rel.add_argument("--claim", required=True, metavar="NS/NAME", action="append")
    a = ap.parse_args()
    for ref in a.claim if isinstance(a.claim, list) else [a.claim]:
        if "/" not in ref:
            ap.error(f"--claim: {ref!r} is not NS/NAME")
    try:
        return (cmd_allocate if a.cmd == "allocate" else cmd_release)(Server(a), a)
    except Refused as e:
        print(f"allocator: {e}", file=sys.stderr)
        return e.code
    except (KeyError, TypeError, ValueError) as e:
        print(f"allocator: a malformed object: {e!r}", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
