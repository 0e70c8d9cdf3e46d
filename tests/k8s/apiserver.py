#!/usr/bin/env python3
"""A stand-in Kubernetes API server for the CPU tests (no cluster runs on these machines).

It speaks the parts of the real protocol that gpusliced and kubectl use, with objects in the
real JSON format:
- discovery (/api, /apis, the resource lists of core v1, apps/v1, rbac.authorization.k8s.io/v1,
  events.k8s.io/v1, admissionregistration.k8s.io/v1), so that `kubectl apply --dry-run=client` maps the manifests offline;
- pods: GET /api/v1/pods (a PodList with metadata.resourceVersion; fieldSelector
  spec.nodeName=X and metadata.name=X; limit and continue, in pages), GET
  /api/v1/namespaces/NS/pods/NAME, and watches (?watch=true): a chunked stream of one JSON
  event per line (ADDED, MODIFIED, DELETED; BOOKMARK with allowWatchBookmarks; ERROR with a
  410 Expired Status when resourceVersion is older than the history kept), from
  resourceVersion on, ended after timeoutSeconds;
- events: POST /api/v1/namespaces/NS/events (and events.k8s.io/v1), kept for the tests;
- resource.k8s.io/v1 (DRA): discovery (/apis/resource.k8s.io, /apis/resource.k8s.io/v1) and
  resourceslices and deviceclasses (cluster-scoped), resourceclaims (+ /status) and
  resourceclaimtemplates (namespaced; listed across namespaces at /apis/resource.k8s.io/v1/RES):
  list (labelSelector; fieldSelector metadata.name, metadata.namespace, and for resourceslices
  spec.nodeName, spec.driver, spec.pool.name; the list's resourceVersion), get, create (POST;
  generateName; 409 AlreadyExists; uid, resourceVersion, creationTimestamp, generation set; a
  claim's status dropped), update (PUT; 409 Conflict on a stale metadata.resourceVersion; the
  main resource keeps the status, /status changes only it; generation counts spec changes),
  delete, and delete of a collection (with the list's selectors). Every object written is
  checked by schema.py (ResourceSlices and ResourceClaimTemplates in full, claims' specs,
  device classes' selectors and configs; the slice's driver, pool name and nodeName and the
  spec of claims and templates are immutable), as the real server's validation does: 422
  Invalid with a cause per field. Watches of these are not served (405);
- a path with repeated slashes ("//api/v1/pods") found by no route: 404, as kube-apiserver;
- a bearer token (401 without it), RBAC refusals (403, a Status naming the verb and
  resource), TLS with the tests' own CA (--tls CERT KEY).

The tests drive it through a second listener, plain HTTP on 127.0.0.1 (--control-port-file):
  POST /pods                 body: a Pod; added or replaced (uid and resourceVersion set)
  DELETE /pods/NS/NAME       the pod deleted
  POST /compact              the history so far dropped: a watch from before it gets 410
  POST /drop                 every open watch closed in the middle of an event's line
  POST /bookmark             a BOOKMARK to every watch that asked for them (its
                             resourceVersion the newest, which changes of other kinds move on)
  POST /watch-410            body: {"times": N}: the next N watch requests answered 410 Expired
                             at the HTTP level (a Status body, no stream), as a server does for a
                             version older than it keeps before it starts streaming
  POST /watch-error          body: {"code": C, "times": N}: the next N watch streams send an
                             ERROR event whose Status has code C, and end
  POST /objects              body: a resource.k8s.io/v1 object (ResourceSlice, DeviceClass,
                             ResourceClaim with its status, ResourceClaimTemplate): added or
                             replaced as it is, unchecked (uid kept or set, resourceVersion set)
  GET /objects/RES           every object of RES (e.g. resourceslices), as a JSON list
  GET|DELETE /objects/RES/[NS/]NAME   one object (NS for the namespaced ones)
  POST /deny                 body: {"verb": "list"|"watch"|"get"|"create"|"update"|"delete"|
                             "deletecollection", "resource": "pods"|"events"|"resourceslices"|
                             "resourceclaims"|"resourceclaims/status"|...}: refused with 403
                             from now on (with "code": 500-599, answered that error instead: an
                             API server that cannot answer); {"clear": true} ends it
  POST /ignore-selector      body: {"on": true|false}: field selectors ignored (every pod sent)
  POST /page-max             body: {"max": N}: a page of a pod list holds at most N pods even
                             where limit asks more, with a continue token for the rest (as the
                             real server's pages may: limit is a most, not a promise); 0: off
  POST /race                 body: {"object": a resource.k8s.io/v1 object, "times": N,
                             "gone": true|false}: another writer's race. The next N GETs of that
                             object that find none answer 404 and then make it (as another
                             client would just after); with "gone", after the next create of it
                             answered 409 AlreadyExists it is deleted again
  GET /events                the events written to it, as a JSON list
  GET /stats                 {"lists": N, "watches": N, "open_watches": N, "resourceVersion": RV,
                             "watch_rvs": the resourceVersion each watch asked for, the last 50}

usage: apiserver.py --port-file F [--control-port-file F] [--tls CERT KEY] [--token T]
                    [--history N]
"""
import argparse
import copy
import json
import os
import random
import ssl
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import schema  # noqa: E402  (tests/k8s/schema.py: the checks behind the 422s)

DRA_VERBS = ["create", "delete", "deletecollection", "get", "list", "update"]

RESOURCES = {
    "v1": [("namespaces", "Namespace", False, ["create", "delete", "get", "list", "watch"]),
           ("pods", "Pod", True, ["create", "delete", "get", "list", "patch", "watch"]),
           ("events", "Event", True, ["create", "get", "list", "patch", "watch"]),
           ("configmaps", "ConfigMap", True, ["create", "delete", "get", "list", "patch"]),
           ("serviceaccounts", "ServiceAccount", True, ["create", "delete", "get", "list"]),
           ("services", "Service", True, ["create", "delete", "get", "list", "patch"]),
           ("secrets", "Secret", True, ["create", "delete", "get", "list", "patch"])],
    "apps/v1": [("daemonsets", "DaemonSet", True, ["create", "delete", "get", "list", "patch"]),
                ("deployments", "Deployment", True, ["create", "delete", "get", "list", "patch"])],
    "rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False, ["create", "delete", "get", "list", "patch"]),
        ("clusterrolebindings", "ClusterRoleBinding", False,
         ["create", "delete", "get", "list", "patch"]),
        ("roles", "Role", True, ["create", "delete", "get", "list", "patch"]),
        ("rolebindings", "RoleBinding", True, ["create", "delete", "get", "list", "patch"])],
    "events.k8s.io/v1": [("events", "Event", True, ["create", "get", "list", "patch"])],
    "admissionregistration.k8s.io/v1": [
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False,
         ["create", "delete", "get", "list", "patch"])],
    "resource.k8s.io/v1": [
        ("deviceclasses", "DeviceClass", False, DRA_VERBS),
        ("resourceclaims", "ResourceClaim", True, DRA_VERBS),
        ("resourceclaims/status", "ResourceClaim", True, ["get", "update"]),
        ("resourceclaimtemplates", "ResourceClaimTemplate", True, DRA_VERBS),
        ("resourceslices", "ResourceSlice", False, DRA_VERBS)],
}

# resource.k8s.io/v1 as served here: resource -> (kind, namespaced, the check of a client's
# object (schema.py), the field selectors it takes besides metadata.name/namespace).
DRA_GROUP = "resource.k8s.io"
DRA_GV = DRA_GROUP + "/v1"
DRA = {
    "deviceclasses": ("DeviceClass", False, schema.check_deviceclass, ()),
    "resourceclaims": ("ResourceClaim", True, schema.check_claim, ()),
    "resourceclaimtemplates": ("ResourceClaimTemplate", True, schema.check_claimtemplate, ()),
    "resourceslices": ("ResourceSlice", False, schema.check_resourceslice,
                       ("spec.nodeName", "spec.driver", "spec.pool.name")),
}
DRA_KINDS = {v[0]: k for k, v in DRA.items()}
# A ResourceSlice's fields an update may not change (validateResourceSliceSpec).
SLICE_IMMUTABLE = (("spec", "driver"), ("spec", "pool", "name"), ("spec", "nodeName"))


def status(code, reason, message, details=None):
    st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
          "message": message, "reason": reason, "code": code}
    if details:
        st["details"] = details
    return st


CAUSE = {"Required": "FieldValueRequired", "Invalid": "FieldValueInvalid",
         "TooLong": "FieldValueTooLong", "TooMany": "FieldValueTooMany",
         "Forbidden": "FieldValueForbidden", "Duplicate": "FieldValueDuplicate",
         "NotSupported": "FieldValueNotSupported"}


def invalid(kind, name, problems):
    """422 Invalid as the real server words it: the kind, the name, each field's problem."""
    lines = [f"{path}: {msg}" for _, path, msg in problems]
    joined = lines[0] if len(lines) == 1 else "[" + ", ".join(lines) + "]"
    return status(422, "Invalid", f'{kind}.{DRA_GROUP} "{name}" is invalid: {joined}', {
        "name": name, "group": DRA_GROUP, "kind": kind,
        "causes": [{"reason": CAUSE.get(k, "FieldValueInvalid"), "message": msg, "field": path}
                   for k, path, msg in problems]})


def parse_labels(s):
    """A label selector (k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k) as predicates."""
    reqs, depth, cur = [], 0, ""
    for ch in s or "":
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            reqs.append(cur)
            cur = ""
        else:
            cur += ch
    reqs.append(cur)
    out = []
    for r in (r.strip() for r in reqs):
        if not r:
            continue
        words = r.split(None, 1)
        if len(words) == 2 and words[1].split(None, 1)[0] in ("in", "notin"):
            op, rest = words[1].split(None, 1)
            rest = rest.strip()
            if not (rest.startswith("(") and rest.endswith(")")):
                raise ValueError(r)
            vals = {v.strip() for v in rest[1:-1].split(",")}
            out.append((words[0], op, vals))
        elif "!=" in r:
            k, v = r.split("!=", 1)
            out.append((k.strip(), "!=", v.strip()))
        elif "=" in r:
            k, v = r.split("=", 1)
            out.append((k.strip(), "=", v.lstrip("=").strip()))
        elif r.startswith("!"):
            out.append((r[1:].strip(), "!", None))
        else:
            out.append((r, "exists", None))
    return out


def labels_match(obj, reqs):
    labels = obj.get("metadata", {}).get("labels") or {}
    for k, op, v in reqs:
        have = labels.get(k)
        if (op == "=" and have != v or op == "!=" and have == v or
                op == "in" and have not in v or op == "notin" and have in v or
                op == "exists" and k not in labels or op == "!" and k in labels):
            return False
    return True


def field_value(obj, path):
    for k in path.split("."):
        obj = obj.get(k) if isinstance(obj, dict) else None
    return obj


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Store:
    """Pods, their history of events, the open watches and the tests' knobs."""

    def __init__(self, history):
        self.cv = threading.Condition()
        self.rv = 100
        self.pods = {}          # (ns, name) -> pod
        self.log = []           # (rv, type, pod) after the oldest kept
        self.oldest = 100       # a watch from before this resourceVersion gets 410
        self.history = history
        self.events = []
        self.deny = {}          # (verb, resource) -> the status answered (403, or 5xx)
        self.ignore_selector = False
        self.drop_gen = 0
        self.bookmark_gen = 0
        self.watch_410 = 0      # watch requests still to answer 410 at the HTTP level
        self.watch_error = (0, 0)  # (code, watches still to end with an ERROR of that code)
        self.watch_rvs = []     # the resourceVersion each watch request asked for ("" none)
        self.lists = self.watches = self.open_watches = 0
        self.objs = {}          # resource.k8s.io: (resource, ns or "", name) -> object
        self.page_max = 0       # pods in a list's page at most (0: as limit asks)
        self.races = {}         # (resource, ns or "", name) -> [object, GETs left, gone]

    def put_obj(self, obj, keep_status=True):
        """A resource.k8s.io object added or replaced as given (the tests' control listener):
        uid kept or assigned, a new resourceVersion. The resource, or None for an unknown kind."""
        res = DRA_KINDS.get(obj.get("kind"))
        if res is None:
            return None
        with self.cv:
            md = obj.setdefault("metadata", {})
            if DRA[res][1]:
                md.setdefault("namespace", "default")
            else:
                md.pop("namespace", None)
            key = (res, md.get("namespace", ""), md["name"])
            old = self.objs.get(key)
            md["uid"] = md.get("uid") or (old["metadata"]["uid"] if old else str(uuid.uuid4()))
            md.setdefault("creationTimestamp", now())
            md.setdefault("generation", 1)
            self.rv += 1
            md["resourceVersion"] = str(self.rv)
            obj.setdefault("apiVersion", DRA_GV)
            self.objs[key] = obj
            return obj

    def put(self, pod):
        with self.cv:
            md = pod.setdefault("metadata", {})
            md.setdefault("namespace", "default")
            key = (md["namespace"], md["name"])
            old = self.pods.get(key)
            md["uid"] = md.get("uid") or (old["metadata"]["uid"] if old else str(uuid.uuid4()))
            md.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            self.rv += 1
            md["resourceVersion"] = str(self.rv)
            pod.setdefault("apiVersion", "v1")
            pod.setdefault("kind", "Pod")
            self.pods[key] = pod
            self.record("MODIFIED" if old else "ADDED", pod)
            return pod

    def delete(self, ns, name):
        with self.cv:
            pod = self.pods.pop((ns, name), None)
            if pod is None:
                return None
            pod = copy.deepcopy(pod)
            self.rv += 1
            pod["metadata"]["resourceVersion"] = str(self.rv)
            self.record("DELETED", pod)
            return pod

    def record(self, typ, pod):
        self.log.append((self.rv, typ, copy.deepcopy(pod)))
        if len(self.log) > self.history:
            drop = self.log[:len(self.log) - self.history]
            self.oldest = drop[-1][0]
            self.log = self.log[len(drop):]
        self.cv.notify_all()

    def compact(self):
        with self.cv:
            self.oldest = self.rv
            self.log = []
            self.cv.notify_all()


def selected(pod, selectors):
    for k, v in selectors:
        if k == "spec.nodeName" and pod.get("spec", {}).get("nodeName") != v:
            return False
        if k == "metadata.name" and pod["metadata"]["name"] != v:
            return False
        if k == "metadata.namespace" and pod["metadata"]["namespace"] != v:
            return False
    return True


def parse_selector(s):
    out = []
    for part in filter(None, (s or "").split(",")):
        if "!=" in part or "=" not in part:
            raise ValueError(part)
        k, v = part.split("=", 1)
        k = k.rstrip("=")
        if k not in ("spec.nodeName", "metadata.name", "metadata.namespace"):
            raise ValueError(part)
        out.append((k, v))
    return out


def make_handler(store, args, control):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *a):
            pass

        def send_json(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(n) or b"null") if n else None

        # ---- the tests' control listener ----
        def control_get(self, path):
            if path.startswith("/objects/"):
                return self.control_objects("GET", path.split("/")[2:])
            with store.cv:
                if path == "/events":
                    return self.send_json(200, store.events)
                if path == "/stats":
                    return self.send_json(200, {"lists": store.lists, "watches": store.watches,
                                                "open_watches": store.open_watches,
                                                "resourceVersion": str(store.rv),
                                                "watch_rvs": store.watch_rvs[-50:]})
            self.send_json(404, status(404, "NotFound", path))

        def control_post(self, path):
            b = self.body()
            if path == "/pods":
                return self.send_json(201, store.put(b))
            if path == "/objects":
                if not isinstance(b, dict) or not (b.get("metadata") or {}).get("name"):
                    return self.send_json(400, status(400, "BadRequest", "an object with metadata.name"))
                obj = store.put_obj(b)
                if obj is None:
                    return self.send_json(400, status(400, "BadRequest", f"kind {b.get('kind')!r} is "
                                                      f"not one of {sorted(DRA_KINDS)}"))
                return self.send_json(201, obj)
            if path == "/compact":
                store.compact()
            elif path == "/drop":
                with store.cv:
                    store.drop_gen += 1
                    store.cv.notify_all()
            elif path == "/bookmark":
                with store.cv:
                    store.bookmark_gen += 1
                    store.cv.notify_all()
            elif path == "/watch-410":
                if not isinstance(b, dict) or not isinstance(b.get("times"), int) or b["times"] < 0:
                    return self.send_json(400, status(400, "BadRequest", 'body: {"times": N >= 0}'))
                with store.cv:
                    store.watch_410 = b["times"]
            elif path == "/watch-error":
                if (not isinstance(b, dict) or not isinstance(b.get("code"), int) or
                        not isinstance(b.get("times"), int) or b["times"] < 0):
                    return self.send_json(400, status(400, "BadRequest",
                                                      'body: {"code": C, "times": N >= 0}'))
                with store.cv:
                    store.watch_error = (b["code"], b["times"])
            elif path == "/ignore-selector":
                with store.cv:
                    store.ignore_selector = bool(b and b.get("on"))
            elif path == "/page-max":
                if not isinstance(b, dict) or not isinstance(b.get("max"), int) or b["max"] < 0:
                    return self.send_json(400, status(400, "BadRequest", 'body: {"max": N >= 0}'))
                with store.cv:
                    store.page_max = b["max"]
            elif path == "/race":
                o = b.get("object") if isinstance(b, dict) else None
                res = DRA_KINDS.get(o.get("kind")) if isinstance(o, dict) else None
                if (res is None or not (o.get("metadata") or {}).get("name") or
                        not isinstance(b.get("times"), int) or b["times"] < 1):
                    return self.send_json(400, status(400, "BadRequest", 'body: {"object": a '
                                                      'resource.k8s.io/v1 object, "times": N >= 1, '
                                                      '"gone": bool}'))
                ns = o["metadata"].get("namespace", "default") if DRA[res][1] else ""
                with store.cv:
                    store.races[(res, ns, o["metadata"]["name"])] = [o, b["times"], bool(b.get("gone"))]
            elif path == "/deny":
                with store.cv:
                    if b.get("clear"):
                        store.deny.clear()
                    else:
                        code = b.get("code", 403)
                        if code != 403 and not (isinstance(code, int) and 500 <= code <= 599):
                            return self.send_json(400, status(400, "BadRequest",
                                                              "deny: code is 403 or 500-599"))
                        store.deny[(b["verb"], b["resource"])] = code
            else:
                return self.send_json(404, status(404, "NotFound", path))
            self.send_json(200, {"ok": True})

        # ---- the API ----
        def authorized(self):
            # A path with repeated slashes is found by no route of kube-apiserver: 404
            # (kubernetes/kubernetes#70942, #112760: "//api/v1/..." resp=404). Python's server
            # squashes a leading "//" in self.path, so the request line as sent is read.
            raw = self.requestline.split(" ")[1] if self.requestline.count(" ") >= 2 else ""
            if "//" in raw.split("?")[0]:
                self.send_json(404, status(404, "NotFound", "the server could not find the "
                                           "requested resource"))
                return False
            if args.token and self.headers.get("Authorization") != "Bearer " + args.token:
                self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
                return False
            return True

        def denied(self, verb, resource, ns=None, group=""):
            with store.cv:
                code = store.deny.get((verb, resource))
                if code is not None and code != 403:
                    self.send_json(code, status(code, "ServiceUnavailable" if code == 503 else
                                                "InternalError", "the stand-in answers %d" % code))
                    return True
                if code is not None:
                    scope = f'in the namespace "{ns}"' if ns else "at the cluster scope"
                    full = f"{resource}.{group}" if group else resource
                    self.send_json(403, status(
                        403, "Forbidden",
                        f'{full} is forbidden: User "system:serviceaccount:gpuslice-system:'
                        f'gpusliced" cannot {verb} resource "{resource}" in API group "{group}" '
                        f'{scope}', {"group": group, "kind": resource}))
                    return True
            return False

        def do_GET(self):
            u = urllib.parse.urlsplit(self.path)
            path, q = u.path.rstrip("/"), dict(urllib.parse.parse_qsl(u.query))
            if control:
                return self.control_get(path)
            if not self.authorized():
                return
            if path == "/api":
                return self.send_json(200, {"kind": "APIVersions", "versions": ["v1"],
                                            "serverAddressByClientCIDRs": []})
            if path == "/apis":
                groups = []
                for gv in RESOURCES:
                    if "/" in gv:
                        g, v = gv.split("/")
                        ver = {"groupVersion": gv, "version": v}
                        groups.append({"name": g, "versions": [ver], "preferredVersion": ver})
                return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                            "groups": groups})
            if path.startswith("/apis/") and path.count("/") == 2:
                g = path[len("/apis/"):]
                vers = [{"groupVersion": gv, "version": gv.split("/")[1]}
                        for gv in RESOURCES if gv.startswith(g + "/")]
                if vers:
                    return self.send_json(200, {"kind": "APIGroup", "apiVersion": "v1", "name": g,
                                                "versions": vers, "preferredVersion": vers[0]})
            if path.startswith(f"/apis/{DRA_GV}/"):
                return self.dra("GET", path, q)
            gv = "v1" if path == "/api/v1" else path[len("/apis/"):] if path.startswith("/apis/") else None
            if gv in RESOURCES:
                return self.send_json(200, {
                    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
                    "resources": [{"name": n, "singularName": k.lower(), "namespaced": ns,
                                   "kind": k, "verbs": v} for n, k, ns, v in RESOURCES[gv]]})
            if path == "/version":
                return self.send_json(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0"})
            parts = path.split("/")
            if path == "/api/v1/pods":
                return self.pods(q)
            if len(parts) == 7 and parts[:4] == ["", "api", "v1", "namespaces"] and parts[5] == "pods":
                if self.denied("get", "pods"):
                    return
                with store.cv:
                    pod = store.pods.get((parts[4], parts[6]))
                if pod is None:
                    return self.send_json(404, status(404, "NotFound", f'pods "{parts[6]}" not found'))
                return self.send_json(200, pod)
            self.send_json(404, status(404, "NotFound", f"{path} not found"))

        def pods(self, q):
            watch = q.get("watch") in ("true", "1")
            if self.denied("watch" if watch else "list", "pods"):
                return
            try:
                sel = parse_selector(q.get("fieldSelector"))
                if store.ignore_selector:
                    sel = []  # as a server or proxy that drops the selector would
            except ValueError as e:
                return self.send_json(400, status(400, "BadRequest",
                                                  f'unable to parse requirement: "{e}"'))
            if watch:
                return self.watch(q, sel)
            with store.cv:
                store.lists += 1
                items = sorted((p for p in store.pods.values() if selected(p, sel)),
                               key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]))
                rv = str(store.rv)
            start = 0
            if q.get("continue"):
                try:
                    tok = json.loads(urllib.parse.unquote(q["continue"]))
                    start, rv = int(tok["start"]), tok["rv"]
                except (ValueError, KeyError, TypeError):
                    return self.send_json(400, status(400, "BadRequest", "invalid continue token"))
                if int(rv) < store.oldest:
                    return self.send_json(410, status(
                        410, "Expired", "The provided continue parameter is too old to display a "
                        "consistent list result. You can start a new list without the continue "
                        "parameter."))
            limit = int(q.get("limit") or 0)
            if store.page_max and (not limit or limit > store.page_max):
                limit = store.page_max
            page = items[start:start + limit] if limit else items[start:]
            meta = {"resourceVersion": rv}
            if limit and start + limit < len(items):
                meta["continue"] = json.dumps({"start": start + limit, "rv": rv})
                meta["remainingItemCount"] = len(items) - start - limit
            self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                                 "items": page})

        def chunk(self, data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def watch(self, q, sel):
            bookmarks = q.get("allowWatchBookmarks") in ("true", "1")
            timeout = float(q.get("timeoutSeconds") or 1800)
            with store.cv:
                store.watch_rvs.append(q.get("resourceVersion") or "")
                refuse = store.watch_410 > 0
                if refuse:
                    store.watch_410 -= 1
            if refuse:
                return self.send_json(410, status(
                    410, "Expired", f"too old resource version: {q.get('resourceVersion')} "
                    f"({store.oldest})"))
            rv = int(q.get("resourceVersion") or 0)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            end = time.monotonic() + timeout
            with store.cv:
                store.watches += 1
                store.open_watches += 1
                if rv == 0:
                    rv = store.rv  # "from now" (the real server sends the current state first)
                    pending = [(store.rv, "ADDED", copy.deepcopy(p)) for p in store.pods.values()]
                elif rv < store.oldest:
                    pending = None
                else:
                    pending = []
                drop_gen, bm_gen = store.drop_gen, store.bookmark_gen
                err = store.watch_error[0] if store.watch_error[1] > 0 else 0
                if err:
                    store.watch_error = (err, store.watch_error[1] - 1)
            try:
                if err:
                    self.chunk(json.dumps({"type": "ERROR", "object": status(
                        err, "InternalError", "an error of the tests' making")}).encode() + b"\n")
                    return self.finish_chunks()
                if pending is None:
                    self.chunk(json.dumps({"type": "ERROR", "object": status(
                        410, "Expired", f"too old resource version: {rv} ({store.oldest})")}).encode() + b"\n")
                    return self.finish_chunks()
                for _, typ, pod in pending:
                    if selected(pod, sel):
                        self.chunk(json.dumps({"type": typ, "object": pod}).encode() + b"\n")
                while True:
                    with store.cv:
                        store.cv.wait_for(lambda: store.rv > rv or store.drop_gen != drop_gen or
                                          store.bookmark_gen != bm_gen or
                                          time.monotonic() >= end or store.oldest > rv,
                                          timeout=max(0.0, min(1.0, end - time.monotonic())))
                        if store.drop_gen != drop_gen:
                            drop = True
                        else:
                            drop = False
                        # Behind what the history keeps: events were lost, so 410.
                        expired = store.oldest > rv
                        new = [e for e in store.log if e[0] > rv]
                        bm = bookmarks and store.bookmark_gen != bm_gen
                        bm_gen = store.bookmark_gen
                        cur = store.rv
                    if drop:
                        # Half an event's line, then the connection closed mid-stream.
                        self.chunk(b'{"type":"MODIFIED","object":{"kind":"Pod","metad')
                        self.close_connection = True
                        return
                    if expired:
                        self.chunk(json.dumps({"type": "ERROR", "object": status(
                            410, "Expired", f"too old resource version: {rv}")}).encode() + b"\n")
                        return self.finish_chunks()
                    for erv, typ, pod in new:
                        if selected(pod, sel):
                            self.chunk(json.dumps({"type": typ, "object": pod}).encode() + b"\n")
                        rv = erv
                    # Changes of other kinds advance the resourceVersion too: none missed.
                    rv = max(rv, cur)
                    if bm:
                        self.chunk(json.dumps({"type": "BOOKMARK", "object": {
                            "kind": "Pod", "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(cur), "annotations": {
                                "k8s.io/initial-events-end": "true"}}}}).encode() + b"\n")
                        rv = max(rv, cur)
                    if time.monotonic() >= end:
                        return self.finish_chunks()
            # A client gone (a daemon stopped while it watched; over TLS an SSLEOFError).
            except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
                self.close_connection = True
            finally:
                with store.cv:
                    store.open_watches -= 1

        def finish_chunks(self):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def do_POST(self):
            u = urllib.parse.urlsplit(self.path)
            path = u.path.rstrip("/")
            if control:
                return self.control_post(path)
            if not self.authorized():
                return
            if path.startswith(f"/apis/{DRA_GV}/"):
                return self.dra("POST", path, dict(urllib.parse.parse_qsl(u.query)))
            parts = path.split("/")
            core = len(parts) == 6 and parts[:4] == ["", "api", "v1", "namespaces"] and parts[5] == "events"
            new = (len(parts) == 7 and parts[:5] == ["", "apis", "events.k8s.io", "v1", "namespaces"]
                   and parts[6] == "events")
            if core or new:
                if self.denied("create", "events"):
                    return
                try:
                    ev = self.body()
                except ValueError:
                    return self.send_json(400, status(400, "BadRequest", "the body is not JSON"))
                if not isinstance(ev, dict) or "involvedObject" not in ev and "regarding" not in ev:
                    return self.send_json(422, status(422, "Invalid",
                                                      "Event is invalid: involvedObject: Required value"))
                md = ev.setdefault("metadata", {})
                md["namespace"] = parts[4]
                md.setdefault("name", md.get("generateName", "event.") + uuid.uuid4().hex[:10])
                with store.cv:
                    store.rv += 1
                    md["resourceVersion"] = str(store.rv)
                    store.events.append(ev)
                return self.send_json(201, ev)
            self.send_json(404, status(404, "NotFound", f"{path} not found"))

        def do_DELETE(self):
            u = urllib.parse.urlsplit(self.path)
            path = u.path.rstrip("/")
            if control and path.startswith("/pods/") and path.count("/") == 3:
                _, _, ns, name = path.split("/")
                pod = store.delete(ns, name)
                return self.send_json(200 if pod else 404, pod or status(404, "NotFound", name))
            if control and path.startswith("/objects/"):
                return self.control_objects("DELETE", path.split("/")[2:])
            if not control and path.startswith(f"/apis/{DRA_GV}/"):
                if not self.authorized():
                    return
                return self.dra("DELETE", path, dict(urllib.parse.parse_qsl(u.query)))
            self.send_json(405, status(405, "MethodNotAllowed", "DELETE is not served here"))

        def do_PUT(self):
            u = urllib.parse.urlsplit(self.path)
            path = u.path.rstrip("/")
            if not control and path.startswith(f"/apis/{DRA_GV}/"):
                if not self.authorized():
                    return
                return self.dra("PUT", path, dict(urllib.parse.parse_qsl(u.query)))
            self.send_json(405, status(405, "MethodNotAllowed", "PUT is not served here"))

        # ---- resource.k8s.io/v1 ----
        def control_objects(self, method, parts):
            """GET /objects/RES (every one, a JSON list), GET or DELETE /objects/RES/[NS/]NAME."""
            if not parts or parts[0] not in DRA:
                return self.send_json(404, status(404, "NotFound", f"resources: {sorted(DRA)}"))
            res, ns_ok = parts[0], DRA[parts[0]][1]
            with store.cv:
                if len(parts) == 1 and method == "GET":
                    items = [o for (r, _, _), o in sorted(store.objs.items()) if r == res]
                    return self.send_json(200, items)
                if len(parts) != (3 if ns_ok else 2):
                    return self.send_json(404, status(404, "NotFound", "/objects/RES/[NS/]NAME"))
                key = (res, parts[1] if ns_ok else "", parts[-1])
                obj = store.objs.pop(key, None) if method == "DELETE" else store.objs.get(key)
                if obj is not None and method == "DELETE":
                    store.rv += 1
            if obj is None:
                return self.send_json(404, status(404, "NotFound", f'{res} "{parts[-1]}" not found'))
            self.send_json(200, obj)

        def dra_route(self, path):
            """(resource, namespace or None, name or None, subresource or None) of a path under
            /apis/resource.k8s.io/v1, or None."""
            parts = path[len(f"/apis/{DRA_GV}/"):].split("/")
            ns = None
            if parts[0] == "namespaces" and len(parts) >= 3:
                ns, parts = parts[1], parts[2:]
            if parts[0] not in DRA or len(parts) > 3:
                return None
            namespaced = DRA[parts[0]][1]
            if ns is not None and not namespaced or ns is None and namespaced and len(parts) > 1:
                return None
            sub = parts[2] if len(parts) == 3 else None
            if sub is not None and (sub != "status" or parts[0] != "resourceclaims"):
                return None
            return parts[0], ns, parts[1] if len(parts) > 1 else None, sub

        def dra(self, method, path, q):
            route = self.dra_route(path)
            if route is None:
                return self.send_json(404, status(404, "NotFound", f"{path} not found"))
            res, ns, name, sub = route
            kind, namespaced = DRA[res][0], DRA[res][1]
            rname = res + ("/" + sub if sub else "")
            if name is None:
                if method == "GET":
                    if q.get("watch") in ("true", "1"):
                        if self.denied("watch", res, ns, DRA_GROUP):
                            return
                        return self.send_json(405, status(405, "MethodNotAllowed",
                                                          f"watch of {res} is not served by the stand-in"))
                    return self.dra_list(res, ns, q)
                one_scope = ns is not None or not namespaced  # across namespaces: a list only
                if method == "POST" and one_scope:
                    return self.dra_create(res, ns)
                if method == "DELETE" and one_scope:
                    return self.dra_list(res, ns, q, delete=True)
                return self.send_json(405, status(405, "MethodNotAllowed", f"{method} {path}"))
            verb = {"GET": "get", "PUT": "update", "DELETE": "delete"}.get(method)
            if verb is None or sub and verb == "delete":
                return self.send_json(405, status(405, "MethodNotAllowed", f"{method} {path}"))
            if self.denied(verb, rname, ns, DRA_GROUP):
                return
            key = (res, ns or "", name)
            notfound = status(404, "NotFound", f'{res}.{DRA_GROUP} "{name}" not found',
                              {"name": name, "group": DRA_GROUP, "kind": res})
            if method == "GET":
                with store.cv:
                    obj = store.objs.get(key)
                    race = store.races.get(key) if obj is None else None
                if obj:
                    return self.send_json(200, obj)
                if race and race[1] > 0:
                    # Another writer makes it just after this 404 was decided (made before
                    # it is sent: a create on another connection must find it).
                    race[1] -= 1
                    store.put_obj(copy.deepcopy(race[0]))
                return self.send_json(404, notfound)
            if method == "DELETE":
                with store.cv:
                    obj = store.objs.pop(key, None)
                    if obj is not None:
                        store.rv += 1
                return self.send_json(200, obj) if obj else self.send_json(404, notfound)
            return self.dra_update(res, kind, key, sub, notfound)

        def read_object(self, kind):
            """The request's body as an object of kind (400 answered and None otherwise)."""
            try:
                obj = self.body()
            except ValueError:
                obj = None
            if not isinstance(obj, dict):
                self.send_json(400, status(400, "BadRequest", "the body is not a JSON object"))
                return None
            if obj.get("kind", kind) != kind or obj.get("apiVersion", DRA_GV) != DRA_GV:
                self.send_json(400, status(400, "BadRequest", f"the object is not a {DRA_GV} {kind}: "
                                           f"{obj.get('apiVersion')} {obj.get('kind')}"))
                return None
            obj["kind"], obj["apiVersion"] = kind, DRA_GV
            md = obj.get("metadata")
            if md is not None and not isinstance(md, dict):
                self.send_json(400, status(400, "BadRequest", "metadata is not an object"))
                return None
            obj.setdefault("metadata", {})
            return obj

        def check(self, res, kind, obj):
            """The object's problems as schema.py finds them."""
            return DRA[res][2](obj)

        def dra_create(self, res, ns):
            kind, namespaced = DRA[res][0], DRA[res][1]
            if self.denied("create", res, ns, DRA_GROUP):
                return
            obj = self.read_object(kind)
            if obj is None:
                return
            md = obj["metadata"]
            if namespaced:
                if md.get("namespace", ns) != ns:
                    return self.send_json(400, status(400, "BadRequest", "the namespace of the provided "
                                                      "object does not match the namespace sent on the request"))
                md["namespace"] = ns
            else:
                md.pop("namespace", None)
            for k in ("uid", "resourceVersion", "creationTimestamp", "generation"):
                md.pop(k, None)
            if res == "resourceclaims":
                obj.pop("status", None)  # a claim's status is written through /status only
            with store.cv:
                if not md.get("name") and md.get("generateName"):
                    while True:
                        md["name"] = md["generateName"] + "".join(
                            random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
                        if (res, ns or "", md["name"]) not in store.objs:
                            break
                problems = self.check(res, kind, obj)
                if problems:
                    return self.send_json(422, invalid(kind, md.get("name", ""), problems))
                key = (res, ns or "", md["name"])
                if key in store.objs:
                    race = store.races.get(key)
                    if race and race[2]:
                        store.objs.pop(key)  # the other writer's, deleted again
                        store.rv += 1
                        if race[1] == 0:
                            del store.races[key]
                    return self.send_json(409, status(
                        409, "AlreadyExists", f'{res}.{DRA_GROUP} "{md["name"]}" already exists',
                        {"name": md["name"], "group": DRA_GROUP, "kind": res}))
                store.rv += 1
                md.update(uid=str(uuid.uuid4()), resourceVersion=str(store.rv),
                          creationTimestamp=now(), generation=1)
                store.objs[key] = obj
            self.send_json(201, obj)

        def dra_update(self, res, kind, key, sub, notfound):
            obj = self.read_object(kind)
            if obj is None:
                return
            md, name = obj["metadata"], key[2]
            if md.get("name", name) != name:
                return self.send_json(400, status(400, "BadRequest", f"the name of the object "
                                                  f"({md.get('name')}) does not match the name on the URL ({name})"))
            with store.cv:
                old = store.objs.get(key)
                if old is None:
                    return self.send_json(404, notfound)
                omd = old["metadata"]
                if md.get("resourceVersion") and md["resourceVersion"] != omd["resourceVersion"]:
                    return self.send_json(409, status(
                        409, "Conflict", f'Operation cannot be fulfilled on {res}.{DRA_GROUP} "{name}": '
                        "the object has been modified; please apply your changes to the latest version "
                        "and try again", {"name": name, "group": DRA_GROUP, "kind": res}))
                if sub == "status":
                    new = copy.deepcopy(old)
                    new["status"] = obj.get("status")
                    if new["status"] is None:
                        new.pop("status")
                else:
                    new = obj
                    if "status" in old:
                        new["status"] = old["status"]  # the main resource leaves the status alone
                    else:
                        new.pop("status", None)
                    for k in ("uid", "creationTimestamp", "generation"):
                        md[k] = omd.get(k)
                    if key[1]:
                        md["namespace"] = key[1]
                    md["name"] = name
                    problems = self.check(res, kind, new)
                    spec_fixed = res in ("resourceclaims", "resourceclaimtemplates")
                    if spec_fixed and new.get("spec") != old.get("spec"):
                        problems.append(("Invalid", "spec", "Invalid value: ...: field is immutable"))
                    if res == "resourceslices":
                        for path in SLICE_IMMUTABLE:
                            a, b = field_value(new, ".".join(path)), field_value(old, ".".join(path))
                            if a != b:
                                problems.append(("Invalid", ".".join(path),
                                                 f"Invalid value: {json.dumps(a)}: field is immutable"))
                    if problems:
                        return self.send_json(422, invalid(kind, name, problems))
                    if new.get("spec") != old.get("spec"):
                        md["generation"] = (omd.get("generation") or 1) + 1
                store.rv += 1
                new["metadata"]["resourceVersion"] = str(store.rv)
                store.objs[key] = new
            self.send_json(200, new)

        def dra_list(self, res, ns, q, delete=False):
            kind = DRA[res][0]
            if self.denied("deletecollection" if delete else "list", res, ns, DRA_GROUP):
                return
            try:
                labels = parse_labels(q.get("labelSelector"))
                fields = []
                for part in filter(None, (q.get("fieldSelector") or "").split(",")):
                    neg = "!=" in part
                    k, v = part.split("!=" if neg else "=", 1)
                    k, v = k.strip(), v.lstrip("=").strip()
                    if k not in ("metadata.name", "metadata.namespace") + DRA[res][3]:
                        raise ValueError(f'field label not supported: {k}')
                    fields.append((k, neg, v))
            except ValueError as e:
                return self.send_json(400, status(400, "BadRequest", f"unable to parse selector: {e}"))
            with store.cv:
                keys = [k for k, o in sorted(store.objs.items())
                        if k[0] == res and (ns is None or k[1] == ns) and labels_match(o, labels) and
                        all((field_value(o, f) == v) != neg for f, neg, v in fields)]
                items = [store.objs.pop(k) if delete else store.objs[k] for k in keys]
                if delete and items:
                    store.rv += 1
                rv = str(store.rv)
            self.send_json(200, {"kind": kind + "List", "apiVersion": DRA_GV,
                                 "metadata": {"resourceVersion": rv}, "items": items})

    return Handler


def serve(srv):
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def write_port(path, port):
    with open(path + ".tmp", "w") as f:
        f.write(str(port))
    os.rename(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--control-port-file")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    ap.add_argument("--token")
    ap.add_argument("--history", type=int, default=1000)
    a = ap.parse_args()
    store = Store(a.history)
    api = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(store, a, False))
    api.daemon_threads = True
    if a.tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*a.tls)
        api.socket = ctx.wrap_socket(api.socket, server_side=True)
    serve(api)
    if a.control_port_file:
        ctl = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(store, a, True))
        ctl.daemon_threads = True
        serve(ctl)
        write_port(a.control_port_file, ctl.server_address[1])
    write_port(a.port_file, api.server_address[1])
    threading.Event().wait()


if __name__ == "__main__":
    main()
