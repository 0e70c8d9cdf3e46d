#!/bin/sh
# The Kubernetes manifests (deploy/kubernetes): kustomize renders them; kubectl maps and
# checks every object offline (apply --dry-run=client against the stand-in API server's
# discovery, tests/k8s/apiserver.py); and what they grant and mount is what docs/reference.md says:
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
        ("events.k8s.io", "events"): {"create", "patch"},
        ("resource.k8s.io", "resourceclaims"): {"get", "list"},
        ("resource.k8s.io", "resourceslices"): {"get", "list"}}
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
    if paths != ["/dev/shm", "/run/gpuslice", "/sys/fs/cgroup", "/var/lib/gpuslice"]:
        errs.append(f"host paths {paths}")
    # The host's cgroup tree, read-only, where host-cgroup-root names it (issue 28).
    cg = [v["name"] for v in spec["volumes"] if v.get("hostPath", {}).get("path") == "/sys/fs/cgroup"]
    m = [m for m in c.get("volumeMounts", []) if cg and m["name"] == cg[0]]
    conf = by.get(("ConfigMap", "gpusliced-config"), {}).get("data", {}).get("gpusliced.conf", "")
    if not m or not m[0].get("readOnly") or m[0]["mountPath"] != "/host/sys/fs/cgroup" or \
            "host-cgroup-root = /host/sys/fs/cgroup" not in conf:
        errs.append(f"the host's cgroup tree is not mounted read-only where host-cgroup-root says: {m}")
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

# The webhook overlay: its certificate made as docs/reference.md says, in a copy of the tree.
cp -r "$SRC/deploy/kubernetes" "$T/k8s"
rm -rf "$T/k8s/webhook/certs"
if sh "$T/k8s/webhook/make-cert.sh" >"$T/cert.out" 2>&1; then ok "make-cert.sh: a CA and the Service's certificate"; else bad "make-cert.sh: $(cat "$T/cert.out")"; fi
expect_bad_days=$(sh "$T/k8s/webhook/make-cert.sh" 1x 2>&1); rc=$?
[ $rc = 2 ] && echo "$expect_bad_days" | grep -q 'DAYS "1x"' && ok "make-cert.sh 1x: refused, naming it" || bad "make-cert.sh 1x: $rc $expect_bad_days"
openssl verify -CAfile "$T/k8s/webhook/certs/ca.crt" -purpose sslserver "$T/k8s/webhook/certs/tls.crt" >/dev/null 2>&1 &&
    openssl x509 -in "$T/k8s/webhook/certs/tls.crt" -noout -ext subjectAltName 2>/dev/null | grep -q "DNS:gpuslice-webhook.gpuslice-system.svc" &&
    ok "the certificate verifies for gpuslice-webhook.gpuslice-system.svc" || bad "the webhook certificate"
if kubectl kustomize "$T/k8s/webhook" >"$T/hook.yaml" 2>"$T/err"; then ok "the webhook overlay renders"; else bad "webhook kustomize: $(cat "$T/err")"; fi
# shellcheck disable=SC2086
if kubectl $S apply --dry-run=client --validate=false -k "$T/k8s/webhook" >"$T/apply" 2>"$T/err" &&
   [ "$(grep -c 'created (dry run)' "$T/apply")" -eq 10 ]; then
    ok "kubectl apply --dry-run=client maps the overlay's 10 objects"
else bad "overlay apply --dry-run=client: $(cat "$T/apply" "$T/err")"; fi
# shellcheck disable=SC2086
kubectl $S apply --dry-run=client --validate=false -o json -k "$T/k8s/webhook" >"$T/hook.json" 2>"$T/err" || bad "overlay -o json: $(cat "$T/err")"
if python3 - "$T/hook.json" "$T/k8s/webhook/certs/ca.crt" <<'PY'; then ok "webhook: a Deployment of its own (--webhook-only, not root, no host path, no token), the Service to its port, TLS Secret at 0400, opt-in namespaces, failurePolicy Fail, the CA, the interposer and run directory where the DaemonSet puts them"; else bad "the webhook overlay"; fi
import base64, json, sys
doc = json.load(open(sys.argv[1]))
items = doc["items"] if doc.get("kind") == "List" else [doc]
by = {(o["kind"], o["metadata"]["name"]): o for o in items}
errs = []
ds, svc = by[("DaemonSet", "gpusliced")], by[("Service", "gpuslice-webhook")]
dep = by.get(("Deployment", "gpuslice-webhook"))
mwc = by[("MutatingWebhookConfiguration", "gpuslice-inject")]
dspec = ds["spec"]["template"]["spec"]
if any(a.startswith("--webhook") for c in dspec["containers"] for a in c.get("args", [])):
    errs.append("the DaemonSet serves the webhook: its failure would take the node daemon down")
if dep is None:
    errs.append("no Deployment gpuslice-webhook")
    dep = {"spec": {"template": {"metadata": {"labels": {}}, "spec": {"containers": [{"args": []}], "volumes": []}}}}
spec = dep["spec"]["template"]["spec"]
c = spec["containers"][0]
args = c["args"]
opt = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--webhook") or args[i].startswith("--inject")}
if "--webhook-only" not in args:
    errs.append("the Deployment does not run --webhook-only")
if dep["spec"].get("replicas", 1) < 2:
    errs.append("one replica: a restart fails pod creation (failurePolicy Fail)")
sc = dict(spec.get("securityContext", {}), **c.get("securityContext", {}))
if not sc.get("runAsNonRoot") or not sc.get("runAsUser") or sc.get("fsGroup") != sc.get("runAsGroup"):
    errs.append(f"the webhook runs as root, or without its fsGroup as its group: {sc}")
if sc.get("allowPrivilegeEscalation", True) or sc.get("capabilities", {}).get("drop") != ["ALL"] or not sc.get("readOnlyRootFilesystem"):
    errs.append(f"the webhook's privileges: {sc}")
if spec.get("automountServiceAccountToken", True) or spec.get("hostPID") or any("hostPath" in v for v in spec["volumes"]):
    errs.append("the webhook reaches the node or the API (a host path, hostPID, a token)")
if "memory" not in c.get("resources", {}).get("limits", {}) or "--request-memory" not in args:
    errs.append("the webhook's memory is not bounded (a limit and --request-memory)")
port = int(opt.get("--webhook-listen", ":0").rsplit(":", 1)[1])
if not all(dep["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()) or \
        all(dspec and ds["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in svc["spec"]["selector"].items()):
    errs.append("the Service does not select the webhook Deployment's pods (only)")
if svc["spec"]["ports"][0]["targetPort"] != port or not any(p["containerPort"] == port for p in c.get("ports", [])):
    errs.append(f"Service targetPort {svc['spec']['ports'][0]['targetPort']}, webhook port {port}")
probes = [c.get(p, {}).get("httpGet", {}) for p in ("readinessProbe", "livenessProbe")]
if any(p.get("port") != port or p.get("scheme") != "HTTPS" or p.get("path") != "/healthz" for p in probes):
    errs.append(f"probes {probes}")
vols = {v["name"]: v for v in spec["volumes"]}
mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
tls = [v for v in vols.values() if v.get("secret", {}).get("secretName") == "gpuslice-webhook-tls"]
if not tls or tls[0]["secret"].get("defaultMode") != 0o400:
    errs.append("the TLS Secret is not mounted at mode 0400 (gpusliced refuses a key others may read)")
d = [p for p, n in mounts.items() if tls and n == tls[0]["name"]]
if not d or opt.get("--webhook-cert") != d[0] + "/tls.crt" or opt.get("--webhook-key") != d[0] + "/tls.key":
    errs.append(f"cert and key options {opt} not in the Secret's mount {d}")
if ("Secret", "gpuslice-webhook-tls") not in by or by[("Secret", "gpuslice-webhook-tls")]["type"] != "kubernetes.io/tls":
    errs.append("no TLS Secret gpuslice-webhook-tls")
w = mwc["webhooks"][0]
cc = w["clientConfig"]
if cc["service"] != {"namespace": "gpuslice-system", "name": "gpuslice-webhook", "path": "/mutate", "port": 443}:
    errs.append(f"clientConfig {cc['service']}")
if base64.b64decode(cc["caBundle"]) != open(sys.argv[2], "rb").read():
    errs.append("caBundle is not make-cert.sh's CA")
if w["failurePolicy"] != "Fail" or w["sideEffects"] != "None" or w["admissionReviewVersions"] != ["v1"]:
    errs.append("failurePolicy, sideEffects or versions")
if w["namespaceSelector"] != {"matchLabels": {"gpuslice.io/inject": "enabled"}}:
    errs.append(f"namespaceSelector {w['namespaceSelector']}")
if w["rules"] != [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"], "scope": "Namespaced"}]:
    errs.append(f"rules {w['rules']}")
init = " ".join(dspec["initContainers"][0]["command"])
if opt.get("--inject-lib-dir") != "/var/lib/gpuslice/lib" or "/host/var/lib/gpuslice/lib/libgpuslice.so" not in init or \
        "echo /usr/local/gpuslice/libgpuslice.so > /host/var/lib/gpuslice/lib/ld.so.preload" not in init:
    errs.append("the init container does not install the interposer where --inject-lib-dir and the patch's mount say")
dvols = {v["name"]: v for v in dspec["volumes"]}
if opt.get("--inject-run-dir") != "/run/gpuslice" or dvols["run"]["hostPath"]["path"] != "/run/gpuslice":
    errs.append("--inject-run-dir is not the daemon's host run directory")
for e in errs:
    print("  " + e)
sys.exit(1 if errs else 0)
PY

# The hami component (HAMi's contract): from an overlay as docs/kubernetes.md shows, the
# DaemonSet also installs libgpuslice.so as the node's /usr/local/vgpu/libvgpu.so, in an init
# container of its own (the daemon's image, whatever its tag), and nothing else changes.
mkdir -p "$T/hami-overlay"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../k8s\ncomponents:\n  - ../k8s/hami\n' >"$T/hami-overlay/kustomization.yaml"
if kubectl kustomize "$T/hami-overlay" >"$T/hami.yaml" 2>"$T/err"; then ok "the hami component renders"; else bad "hami kustomize: $(cat "$T/err")"; fi
# shellcheck disable=SC2086
kubectl $S apply --dry-run=client --validate=false -o json -k "$T/hami-overlay" >"$T/hami.json" 2>"$T/err" || bad "hami -o json: $(cat "$T/err")"
if python3 - "$T/hami.json" "$T/all.json" <<'PY'; then ok "hami: libgpuslice.so installed as /usr/local/vgpu/libvgpu.so (by rename), ld.so.preload where missing, the daemon's image, nothing else changed"; else bad "the hami component"; fi
import json, sys
def load(p):
    doc = json.load(open(p))
    items = doc["items"] if doc.get("kind") == "List" else [doc]
    return {(o["kind"], o["metadata"]["name"]): o for o in items}
got, base = load(sys.argv[1]), load(sys.argv[2])
errs = []
if sorted(got) != sorted(base):
    errs.append(f"objects {sorted(got)}, want the base's {sorted(base)}")
ds, bds = got[("DaemonSet", "gpusliced")], base[("DaemonSet", "gpusliced")]
spec, bspec = ds["spec"]["template"]["spec"], bds["spec"]["template"]["spec"]
if spec["containers"] != bspec["containers"]:
    errs.append("the daemon's container changed")
inits = {c["name"]: c for c in spec["initContainers"]}
if [c for c in spec["initContainers"] if c["name"] != "install-hami-libvgpu"] != bspec["initContainers"]:
    errs.append("the base's init containers changed")
c = inits.get("install-hami-libvgpu")
vols = {v["name"]: v for v in spec["volumes"]}
added = {n: v for n, v in vols.items() if n not in {v["name"] for v in bspec["volumes"]}}
if c is None:
    errs.append("no init container install-hami-libvgpu")
else:
    cmd = " ".join(c["command"])
    for want in ("cp /usr/local/lib/libgpuslice.so /host/usr/local/vgpu/.libvgpu.so.gpuslice",
                 "mv /host/usr/local/vgpu/.libvgpu.so.gpuslice /host/usr/local/vgpu/libvgpu.so",
                 "[ -s /host/usr/local/vgpu/ld.so.preload ] || echo /usr/local/vgpu/libvgpu.so > /host/usr/local/vgpu/ld.so.preload"):
        if want not in cmd:
            errs.append(f"its command lacks: {want}")
    if c["image"] != spec["containers"][0]["image"]:
        errs.append(f"its image {c['image']}, the daemon's {spec['containers'][0]['image']}")
    sc = c.get("securityContext", {})
    if sc.get("privileged") or sc.get("allowPrivilegeEscalation", True) or sc.get("capabilities", {}).get("drop") != ["ALL"]:
        errs.append(f"its privileges: {sc}")
    m = c.get("volumeMounts", [])
    if len(m) != 1 or m[0]["mountPath"] != "/host/usr/local/vgpu" or m[0]["name"] not in added:
        errs.append(f"its mounts {m}")
if [v.get("hostPath") for v in added.values()] != [{"path": "/usr/local/vgpu", "type": "DirectoryOrCreate"}]:
    errs.append(f"added volumes {added}")
for e in errs:
    print("  " + e)
sys.exit(1 if errs else 0)
PY

# The DRA overlay, and the DRA driver with the webhook in webhook-claims mode (pods keep the
# form they know): the webhook's Deployment gets --webhook-claims, a service account of its
# own with its token, allowed only to get and create ResourceClaimTemplates, and sideEffects
# NoneOnDryRun; the DaemonSet --dra; the webhook overlay alone stays as it was (no token).
if kubectl kustomize "$SRC/deploy/kubernetes/dra" >"$T/dra.yaml" 2>"$T/err"; then ok "the dra overlay renders"; else bad "dra kustomize: $(cat "$T/err")"; fi
if kubectl kustomize "$T/k8s/dra/webhook" >"$T/draw.yaml" 2>"$T/err"; then ok "the dra/webhook overlay renders"; else bad "dra/webhook kustomize: $(cat "$T/err")"; fi
# shellcheck disable=SC2086
if kubectl $S apply --dry-run=client --validate=false -o json -k "$T/k8s/dra/webhook" >"$T/draw.json" 2>"$T/err"; then ok "kubectl apply --dry-run=client maps the dra/webhook overlay"; else bad "dra/webhook -o json: $(cat "$T/err")"; fi
if python3 - "$T/draw.json" "$T/hook.json" <<'PY'; then ok "dra/webhook: --webhook-claims on the webhook's Deployment with its own service account (get/create resourceclaimtemplates only) and token, sideEffects NoneOnDryRun, the DaemonSet --dra, the DeviceClass"; else bad "the dra/webhook overlay"; fi
import json, sys
def load(p):
    doc = json.load(open(p))
    items = doc["items"] if doc.get("kind") == "List" else [doc]
    return {(o["kind"], o["metadata"]["name"]): o for o in items}
got, hook = load(sys.argv[1]), load(sys.argv[2])
errs = []
want = set(hook) | {("DeviceClass", "gpuslice.io"), ("ClusterRole", "gpuslice-gpusliced-dra"),
                    ("ClusterRoleBinding", "gpuslice-gpusliced-dra"),
                    ("ServiceAccount", "gpuslice-webhook"),
                    ("ClusterRole", "gpuslice-webhook-claims"),
                    ("ClusterRoleBinding", "gpuslice-webhook-claims")}
if set(got) != want:
    errs.append(f"objects {sorted(set(got) ^ want)} differ from the webhook overlay's and the driver's")
dep = got.get(("Deployment", "gpuslice-webhook"), {})
spec = dep.get("spec", {}).get("template", {}).get("spec", {})
args = spec.get("containers", [{}])[0].get("args", [])
if "--webhook-only" not in args or "--webhook-claims" not in args:
    errs.append(f"webhook args {args}")
if spec.get("serviceAccountName") != "gpuslice-webhook" or spec.get("automountServiceAccountToken") is not True:
    errs.append("the webhook has not its own service account and token")
role = got.get(("ClusterRole", "gpuslice-webhook-claims"), {})
rules = {(g, r): set(x["verbs"]) for x in role.get("rules", []) for g in x["apiGroups"] for r in x["resources"]}
if rules != {("resource.k8s.io", "resourceclaimtemplates"): {"get", "create"}}:
    errs.append(f"the webhook's rules {rules}")
b = got.get(("ClusterRoleBinding", "gpuslice-webhook-claims"), {})
if b.get("subjects") != [{"kind": "ServiceAccount", "name": "gpuslice-webhook", "namespace": "gpuslice-system"}] or \
        b.get("roleRef", {}).get("name") != "gpuslice-webhook-claims":
    errs.append(f"the webhook's binding {b}")
w = got.get(("MutatingWebhookConfiguration", "gpuslice-inject"), {}).get("webhooks", [{}])[0]
if w.get("sideEffects") != "NoneOnDryRun" or w.get("failurePolicy") != "Fail":
    errs.append(f"sideEffects {w.get('sideEffects')}, failurePolicy {w.get('failurePolicy')}")
ds = got.get(("DaemonSet", "gpusliced"), {})
if "--dra" not in ds.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [{}])[0].get("args", []):
    errs.append("the DaemonSet is not the DRA driver")
hspec = hook[("Deployment", "gpuslice-webhook")]["spec"]["template"]["spec"]
if hspec.get("automountServiceAccountToken", True) or "--webhook-claims" in hspec["containers"][0]["args"]:
    errs.append("the webhook overlay alone changed")
for e in errs:
    print("  " + e)
sys.exit(1 if errs else 0)
PY

# The check can fail: a kustomization naming a file that is not there.
cp -r "$SRC/deploy/kubernetes" "$T/broken"
sed -i 's/^resources:$/resources:\n  - missing.yaml/' "$T/broken/base/kustomization.yaml"
if kubectl kustomize "$T/broken" >/dev/null 2>&1; then bad "a broken kustomization rendered"; else ok "a broken kustomization is refused"; fi
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
