"""A claim of the DRA driver gpu.gpuslice.io on a real GPU (run as
`python3 dra.py ROOT GPUSLICED LIB WORKDIR`): gpusliced --dra on the real NVML publishes the
GPU to the stand-in API server (tests/k8s/apiserver.py, over TLS); the test allocator
(tests/k8s/allocator.py, KEP-5075's rules) allocates a claim of 8Gi and 50 cores on it,
reserved for a pod; the kubelet's NodePrepareResources call (h2call.py: gRPC over HTTP/2 on the
driver's socket) prepares it; then a "container" is set up from the claim's CDI spec as a
runtime applies one (its mounts bind-mounted read-only in a mount namespace of its own, its
environment set; the GPU device itself is the machine's, as NVIDIA's spec would give it), its
process in the pod's cgroup. Checked:
- the slice: one device per GPU with the GPU's memory and 100 cores, its UUID;
- Prepare answers the claim's CDI ID and nvidia.com/gpu=<UUID>, and the spec is on disk;
- nvidia-smi in the container shows the claim's 8 GiB; PyTorch sees 8 GiB, gets 6 GiB, is
  refused 9 GiB with torch.cuda.OutOfMemoryError;
- a GEMM loop in the container is held to its 50 cores: NVML's utilisation of the GPU (the
  only work on it) within 2 points of 50 %;
- Unprepare removes the tenant and the spec.
Needs root, a writable cgroup hierarchy, unshare and openssl (else it is skipped).
Output follows gpucheck.py.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request

import gpucheck as gc
from gpucheck import GiB

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from daemon import api  # noqa: E402
from k8s_pod import daemon_env, stand_in_start, wait_file  # noqa: E402

ROOT, GSD, LIB, WORK = sys.argv[1:5]
sys.path.insert(0, os.path.join(ROOT, "bench"))
import gpumeasure as gm  # noqa: E402

POD_UID = "cccccccc-1111-4222-8333-444444444444"
CLAIM_UID = "dddddddd-1111-4222-8333-444444444444"
CID = "c1" + "0" * 62
NODE = "gpu-node"


def kc_post(kc, path, obj):
    req = urllib.request.Request(kc + path, data=json.dumps(obj).encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=10).read() or b"{}")


def kc_get(kc, path):
    return json.loads(urllib.request.urlopen(kc + path, timeout=10).read() or b"[]")


def in_container(cg, spec, argv, timeout=180):
    """argv as a process of the claim's container: the pod's cgroup, new PID and mount
    namespaces, the CDI spec's container edits applied (mounts, then environment)."""
    edits = spec["devices"][0]["containerEdits"]
    os.makedirs(cg, exist_ok=True)
    mounts = []
    for m in edits.get("mounts", []):
        ro = "ro" in m.get("options", [])
        mounts.append('mount --bind "%s" "%s"' % (m["hostPath"], m["containerPath"]))
        if ro:
            mounts.append('mount -o remount,bind,ro "%s"' % m["containerPath"])
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_") and
           k not in ("LD_PRELOAD", "GPU_DEPS_LIB")}
    for kv in edits.get("env", []):
        k, _, v = kv.partition("=")
        env[k] = v
    inner = " && ".join(mounts + ['exec "$@"'])
    outer = ('echo $$ >"$0/cgroup.procs" && exec unshare --pid --fork --mount --mount-proc '
             'sh -c \'%s\' sh "$@"' % inner)
    return subprocess.run(["sh", "-c", outer, cg] + argv, capture_output=True, text=True,
                          timeout=timeout, env=env)


def main():
    base, ca, kport, cport, log, stand_in = stand_in_start(ROOT, WORK)
    made = []  # paths this test made on the host, removed after
    daemon = None
    cg = os.path.join(base, "kubepods.slice", "kubepods-burstable.slice",
                      "kubepods-burstable-pod%s.slice" % POD_UID.replace("-", "_"),
                      "cri-containerd-%s.scope" % CID)
    try:
        if not (wait_file(kport) and wait_file(cport)):
            gc.check(False, "the stand-in API server started")
            return
        ka = "https://127.0.0.1:%s" % open(kport).read().strip()
        kc = "http://127.0.0.1:%s" % open(cport).read().strip()
        run_dir = os.path.join(WORK, "drun")
        state = os.path.join(WORK, "state")
        reg, plug, cdi, nvcdi, libdir = (os.path.join(WORK, x) for x in
                                         ("registry", "plugin", "cdi", "nvcdi", "lib"))
        for d in (reg, cdi, nvcdi, libdir, state):
            os.makedirs(d, exist_ok=True)
        shutil.copy(LIB, os.path.join(libdir, "libgpuslice.so"))
        open(os.path.join(libdir, "ld.so.preload"), "w").write(
            "/usr/local/gpuslice/libgpuslice.so\n")
        # NVIDIA's spec as nvidia-ctk writes it (no toolkit on this machine): the GPU by UUID.
        uuid = subprocess.run(["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i",
                               "0"], capture_output=True, text=True).stdout.strip()
        json.dump({"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [
            {"name": uuid, "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia0"}]}}],
            "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}]}},
            open(os.path.join(nvcdi, "nvidia.json"), "w"))
        daemon = subprocess.Popen([GSD, "--foreground", "--config", "/dev/null", "--run-dir",
                                   run_dir, "--state-dir", state, "--kube-api", ka,
                                   "--kube-ca-file", ca, "--kube-token-file",
                                   os.path.join(WORK, "token"), "--node-name", NODE, "--dra",
                                   "--kubelet-plugin-dir", plug, "--kubelet-registry-dir", reg,
                                   "--cdi-dir", cdi, "--nvidia-cdi-dirs", nvcdi,
                                   "--inject-lib-dir", libdir], stdout=log,
                                  stderr=subprocess.STDOUT, env=daemon_env())
        slices, t0 = [], time.monotonic()
        while time.monotonic() - t0 < 20 and not slices:
            try:
                slices = kc_get(kc, "/objects/resourceslices")
            except OSError:
                pass
            time.sleep(0.2)
        if not gc.check(len(slices) == 1, "the daemon published one ResourceSlice"):
            return
        dev = slices[0]["spec"]["devices"][0]
        mem = int(dev["capacity"]["memory"]["value"])
        gc.num("slice_memory_bytes", mem)
        gc.check(dev["attributes"]["uuid"]["string"] == uuid and
                 dev["capacity"]["cores"]["value"] == "100" and mem > 70 * GiB and
                 dev.get("allowMultipleAllocations") is True,
                 "the slice's device: the GPU's UUID %s, %d MiB, 100 cores, shared" %
                 (uuid, mem >> 20))
        gc.note("slice device: " + json.dumps(dev)[:600])
        gc.check(dev["attributes"].get("multiprocessors", {}).get("int") == 132 or
                 dev["attributes"]["productName"]["string"] != "NVIDIA H100 80GB HBM3",
                 "the slice's multiprocessors: %s" % dev["attributes"].get("multiprocessors"))
        kc_post(kc, "/objects", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                 "metadata": {"name": "gpuslice.io"},
                                 "spec": {"selectors": [{"cel": {
                                     "expression": 'device.driver == "gpu.gpuslice.io"'}}]}})
        claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "train-gpu", "namespace": "ml", "uid": CLAIM_UID},
                 "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                     "deviceClassName": "gpuslice.io",
                     "capacity": {"requests": {"memory": "8Gi", "cores": "50"}}}}]}}}
        kc_post(kc, "/objects", claim)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tests/k8s/allocator.py"),
                            "--control", kc, "allocate", "--claim", "ml/train-gpu", "--pod",
                            "train/" + POD_UID, "--node", NODE], capture_output=True, text=True)
        if not gc.check(r.returncode == 0, "the allocator allocated 8Gi/50 cores (%s)" %
                        (r.stdout + r.stderr).strip()[:300]):
            return
        sock = os.path.join(plug, "dra.sock")
        r = subprocess.run([sys.executable, os.path.join(HERE, "h2call.py"), "prepare", sock,
                            "v1", "ml/train-gpu/" + CLAIM_UID], capture_output=True, text=True,
                           timeout=60)
        ans = json.loads(r.stdout or "{}").get("claims", {}).get(CLAIM_UID, {})
        ids = [i for d in ans.get("devices", []) for i in d["cdi_device_ids"]]
        gc.check(not ans.get("error") and "gpuslice.io/claim=" + CLAIM_UID in ids and
                 "nvidia.com/gpu=" + uuid in ids,
                 "Prepare answered the claim's CDI ID and NVIDIA's (%s %s)" %
                 (ids, ans.get("error", r.stderr.strip()[:200])))
        spec_path = os.path.join(cdi, "gpuslice.io-claim_%s.json" % CLAIM_UID)
        if not gc.check(os.path.exists(spec_path), "its CDI spec %s" % spec_path):
            return
        spec = json.load(open(spec_path))
        gc.note("CDI spec: " + json.dumps(spec)[:800])
        # The spec's mount points, made where the host lacks them (removed after).
        for m in spec["devices"][0]["containerEdits"].get("mounts", []):
            p = m["containerPath"]
            if not os.path.exists(p):
                if os.path.isdir(m["hostPath"]):
                    os.makedirs(p)
                else:
                    os.makedirs(os.path.dirname(p), exist_ok=True)
                    open(p, "w").close()
                made.append(p)
        r = in_container(cg, spec, ["nvidia-smi", "--query-gpu=memory.total",
                                    "--format=csv,noheader,nounits", "-i", "0"])
        total = float(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else -1
        gc.key("claim_nvidia_smi_total_mib", total)
        gc.check(total == 8192, "nvidia-smi in the container: memory.total %s MiB, the claim's "
                 "8 GiB (stderr: %s)" % (total, r.stderr.strip()[:300]))
        prog = ("import torch\n"
                "free, total = torch.cuda.mem_get_info()\n"
                "print('total', total)\n"
                "a = torch.empty(6 << 30, dtype=torch.uint8, device='cuda')\n"
                "print('six ok')\n"
                "try:\n"
                "    b = torch.empty(9 << 30, dtype=torch.uint8, device='cuda')\n"
                "    print('nine ok')\n"
                "except torch.cuda.OutOfMemoryError:\n"
                "    print('nine OutOfMemoryError')\n")
        r = in_container(cg, spec, [sys.executable, "-c", prog])
        tot = [int(x.split()[1]) for x in r.stdout.splitlines() if x.startswith("total ")]
        gc.num("claim_torch_total_gib", tot[0] / GiB if tot else -1)
        gc.check(tot and tot[0] == 8 * GiB, "PyTorch in the container: mem_get_info total %s" %
                 (tot[0] if tot else r.stderr.strip()[-300:]))
        gc.check("six ok" in r.stdout, "PyTorch in the container gets 6 GiB")
        gc.check("nine OutOfMemoryError" in r.stdout,
                 "PyTorch in the container is refused 9 GiB with torch.cuda.OutOfMemoryError")
        # 50 cores: a GEMM loop for 12 s, its share of the GPU's time as NVML measures it.
        marks = os.path.join(WORK, "marks")
        gemm = ("import torch, time, sys\n"
                "a = torch.randn(8192, 8192, device='cuda', dtype=torch.float16)\n"
                "b = torch.randn(8192, 8192, device='cuda', dtype=torch.float16)\n"
                "torch.cuda.synchronize()\n"
                "t0 = time.monotonic(); n = 0\n"
                "while time.monotonic() - t0 < 12:\n"
                "    c = a @ b; n += 1\n"
                "    if n % 4 == 0: torch.cuda.synchronize()\n"
                "torch.cuda.synchronize()\n"
                "open(sys.argv[1], 'w').write('%f %f %d' % (t0, time.monotonic(), n))\n")
        sampler = gm.NvmlSampler()
        r = in_container(cg, spec, [sys.executable, "-c", gemm, marks])
        sampler.stop()
        if gc.check(r.returncode == 0 and os.path.exists(marks), "the GEMM loop ran (%s)" %
                    r.stderr.strip()[-300:]):
            t0, t1, n = open(marks).read().split()
            t0, t1 = float(t0), float(t1)
            got = sampler.util_mean(t0 + 3, t1 - 0.5)
            util = got["pct"] if got else None
            gc.key("claim_50_cores_nvml_util_pct", util if util is not None else -1)
            gc.note("NVML's utilisation over the loop's steady part: %s" % got)
            gc.num("claim_gemm_per_s", int(n) / (t1 - t0))
            gc.check(util is not None and abs(util - 50) <= 2,
                     "50 cores: the container's GPU time %s %% as NVML measures it, within 2 "
                     "points of 50 (%s)" % (util, sampler.error or sampler.method))
        r = subprocess.run([sys.executable, os.path.join(HERE, "h2call.py"), "unprepare", sock,
                            "v1", "ml/train-gpu/" + CLAIM_UID], capture_output=True, text=True,
                           timeout=60)
        ans = json.loads(r.stdout or "{}").get("claims", {}).get(CLAIM_UID, {"error": "none"})
        st, _ = api(os.path.join(run_dir, "gpusliced.sock"), "GET", "/v1/tenants/claim-" +
                    CLAIM_UID)
        gc.check(not ans.get("error") and not os.path.exists(spec_path) and st == 404,
                 "Unprepare ended the tenant (%s) and removed the spec (%s)" %
                 (st, ans.get("error")))
    finally:
        if daemon:
            daemon.terminate()
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
        stand_in.terminate()
        stand_in.wait(timeout=10)
        for p in reversed(made):
            try:
                os.rmdir(p) if os.path.isdir(p) else os.unlink(p)
            except OSError:
                pass
        for dirpath, _, _ in os.walk(os.path.join(base, "kubepods.slice"), topdown=False):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
        log.close()
        sys.stdout.write(open(os.path.join(WORK, "log")).read()[-2500:] if gc._failures else "")
    gc.done()


if __name__ == "__main__":
    main()
