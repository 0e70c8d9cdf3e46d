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
- a bearer token (401 without it), RBAC refusals (403, a Status naming the verb and
  resource), TLS with the tests' own CA (--tls CERT KEY).

The tests drive it through a second listener, plain HTTP on 127.0.0.1 (--control-port-file):
  POST /pods                 body: a Pod; added or replaced (uid and resourceVersion set)
  DELETE /pods/NS/NAME       the pod deleted
  POST /compact              the history so far dropped: a watch from before it gets 410
  POST /drop                 every open watch closed in the middle of an event's line
  POST /bookmark             a BOOKMARK to every watch that asked for them
  POST /deny                 body: {"verb": "list"|"watch"|"get"|"create", "resource": "pods"|
                             "events"}: refused with 403 from now on; {"clear": true} ends it
  POST /ignore-selector      body: {"on": true|false}: field selectors ignored (every pod sent)
  GET /events                the events written to it, as a JSON list
  GET /stats                 {"lists": N, "watches": N, "open_watches": N, "resourceVersion": RV}

usage: apiserver.py --port-file F [--control-port-file F] [--tls CERT KEY] [--token T]
                    [--history N]
"""
import argparse
import copy
import json
import os
import ssl
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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
}


def status(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


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
        self.deny = set()       # (verb, resource)
        self.ignore_selector = False
        self.drop_gen = 0
        self.bookmark_gen = 0
        self.lists = self.watches = self.open_watches = 0

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
            with store.cv:
                if path == "/events":
                    return self.send_json(200, store.events)
                if path == "/stats":
                    return self.send_json(200, {"lists": store.lists, "watches": store.watches,
                                                "open_watches": store.open_watches,
                                                "resourceVersion": str(store.rv)})
            self.send_json(404, status(404, "NotFound", path))

        def control_post(self, path):
            b = self.body()
            if path == "/pods":
                return self.send_json(201, store.put(b))
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
            elif path == "/ignore-selector":
                with store.cv:
                    store.ignore_selector = bool(b and b.get("on"))
            elif path == "/deny":
                with store.cv:
                    if b.get("clear"):
                        store.deny.clear()
                    else:
                        store.deny.add((b["verb"], b["resource"]))
            else:
                return self.send_json(404, status(404, "NotFound", path))
            self.send_json(200, {"ok": True})

        # ---- the API ----
        def authorized(self):
            if args.token and self.headers.get("Authorization") != "Bearer " + args.token:
                self.send_json(401, status(401, "Unauthorized", "Unauthorized"))
                return False
            return True

        def denied(self, verb, resource):
            with store.cv:
                if (verb, resource) in store.deny:
                    self.send_json(403, status(
                        403, "Forbidden",
                        f'{resource} is forbidden: User "system:serviceaccount:gpuslice-system:'
                        f'gpusliced" cannot {verb} resource "{resource}" in API group "" at the '
                        f'cluster scope'))
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
            try:
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
                    if bm:
                        self.chunk(json.dumps({"type": "BOOKMARK", "object": {
                            "kind": "Pod", "apiVersion": "v1",
                            "metadata": {"resourceVersion": str(cur), "annotations": {
                                "k8s.io/initial-events-end": "true"}}}}).encode() + b"\n")
                        rv = max(rv, cur)
                    if time.monotonic() >= end:
                        return self.finish_chunks()
            except (BrokenPipeError, ConnectionResetError):
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
            path = urllib.parse.urlsplit(self.path).path.rstrip("/")
            if control and path.startswith("/pods/") and path.count("/") == 3:
                _, _, ns, name = path.split("/")
                pod = store.delete(ns, name)
                return self.send_json(200 if pod else 404, pod or status(404, "NotFound", name))
            self.send_json(405, status(405, "MethodNotAllowed", "DELETE is not served here"))

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
