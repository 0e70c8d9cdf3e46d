#!/bin/sh
# The Kubernetes manifests (deploy/kubernetes): kustomize renders them; kubectl maps and
# checks every object offline (apply --dry-run=client against the stand-in API server's
# discovery, tests/k8s/apiserver.py); and what they grant and mount is what the README says:
# RBAC to read pods and write events only, the DaemonSet on the node's PIDs with its three
# host directories, the image of this version. A broken kustomization fails (the check can).
# usage: manifests.sh SRC
set -u
SRC=$1
T=$(mktemp -d)
. "$SRC/tests/k8s/lib.sh"
APISERVER=
trap 'kill $APISERVER 2>/dev/null; rm -rf "$T"' EXIT
command -v kubectl >/dev/null || { echo "FAIL: kubectl is not installed (Debian: apt-get install kubectl; scripts/install-deps does)"; exit 1; }

if kubectl kustomize "$SRC/deploy/kubernetes" >"$T/all.yaml" 2>"$T/err"; then ok "kubectl kustomize renders"; else bad "kustomize: $(cat "$T/err")"; fi

start_apiserver || bad "the stand-in API server did not start"
S="--server=$KA --request-timeout=10s"
# shellcheck disable=SC2086
if kubectl $S apply --dry-run=client --validate=false -k "$SRC/deploy/kubernetes" >"$T/apply" 2>"$T/err" &&
   [ "$(grep -c 'created (dry run)' "$T/apply")" -eq 6 ]; then
    ok "kubectl apply --dry-run=client maps all 6 objects"
else bad "apply --dry-run=client: $(cat "$T/apply" "$T/err")"; fi
# shellcheck disable=SC2086
kubectl $S apply --dry-run=client --validate=false -o json -k "$SRC/deploy/kubernetes" >"$T/all.json" 2>"$T/err" || bad "apply -o json: $(cat "$T/err")"

VERSION=$(sed -n 's/^project(gpuslice VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")
if python3 - "$T/all.json" "$VERSION" <<'PY'; then ok "RBAC, DaemonSet and image as documented"; else bad "the manifests grant or mount something else"; fi
import json, sys
doc = json.load(open(sys.argv[1]))
items = doc["items"] if doc.get("kind") == "List" else [doc]
by = {(o["kind"], o["metadata"]["name"]): o for o in items}
errs = []
role = by.get(("ClusterRole", "gpuslice-gpusliced"))
want = {("", "pods"): {"get", "list", "watch"}, ("", "events"): {"create", "patch"},
        ("events.k8s.io", "events"): {"create", "patch"}}
got = {}
for r in (role or {}).get("rules", []):
    for g in r["apiGroups"]:
        for res in r["resources"]:
            got.setdefault((g, res), set()).update(r["verbs"])
if got != want:
    errs.append(f"ClusterRole rules {got}, want {want}")
for kind in ("Role", "RoleBinding"):
    if any(k == kind for k, _ in by):
        errs.append(f"an unexpected {kind}")
ds = by.get(("DaemonSet", "gpusliced"))
if not ds:
    errs.append("no DaemonSet gpusliced")
else:
    spec = ds["spec"]["template"]["spec"]
    c = spec["containers"][0]
    if not spec.get("hostPID"):
        errs.append("hostPID is not set (processes are tied to tenants by host PID)")
    if spec.get("serviceAccountName") != "gpusliced":
        errs.append("not the gpusliced service account")
    paths = sorted(v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v)
    if paths != ["/dev/shm", "/run/gpuslice", "/var/lib/gpuslice"]:
        errs.append(f"host paths {paths}")
    sc = c.get("securityContext", {})
    if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True):
        errs.append("privileged, or privilege escalation allowed")
    if c["image"] != f"gpuslice/gpusliced:{sys.argv[2]}":
        errs.append(f"image {c['image']}, want gpuslice/gpusliced:{sys.argv[2]}")
    env = {e["name"]: e for e in c.get("env", [])}
    if env.get("NODE_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") != "spec.nodeName":
        errs.append("NODE_NAME is not the pod's spec.nodeName")
    if ds["metadata"].get("namespace") != "gpuslice-system":
        errs.append("not in gpuslice-system")
for e in errs:
    print("  " + e)
sys.exit(1 if errs else 0)
PY

# The check can fail: a kustomization naming a file that is not there.
cp -r "$SRC/deploy/kubernetes" "$T/broken"
sed -i 's/^resources:$/resources:\n  - missing.yaml/' "$T/broken/kustomization.yaml"
if kubectl kustomize "$T/broken" >/dev/null 2>&1; then bad "a broken kustomization rendered"; else ok "a broken kustomization is refused"; fi
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
