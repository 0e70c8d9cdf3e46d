"""A Kubernetes pod on a real GPU, as the admission webhook sets it up (run as
`python3 k8s_pod.py ROOT GPUSLICED LIB WORKDIR`): gpusliced on the real NVML follows the pods
of the stand-in API server (tests/k8s/apiserver.py, over TLS); a pod annotated
gpuslice.io/memory: 8G becomes the tenant pod-<uid>; the pod's "container" is a process in
the pod's cgroup, in its own PID and mount namespaces, with the interposer loaded from an
/etc/ld.so.preload bind-mounted into its mount namespace (the webhook's subPath mount) and
GPUSLICE_POD=1, nothing in its environment naming a limit. Checked:
- nvidia-smi in the pod shows the pod's 8 GiB as the GPU's memory, and itself among its users;
- PyTorch in the pod sees 8 GiB in mem_get_info, gets 6 GiB and is refused 9 GiB with
  torch.cuda.OutOfMemoryError;
- the daemon shows the pod's process on its tenant and the pod's total in /metrics;
- a pod whose annotation is bad gets no CUDA in PyTorch, and says why.
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

ROOT, GSD, LIB, WORK = sys.argv[1:5]
U1 = "aaaaaaaa-1111-4222-8333-444444444444"
U2 = "bbbbbbbb-1111-4222-8333-444444444444"
CID = "c0" + "0" * 62


def cgroup_base():
    for d in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/systemd"):
        probe = os.path.join(d, "gs-probe-%d" % os.getpid())
        if os.path.exists(os.path.join(d, "cgroup.procs")):
            try:
                os.mkdir(probe)
                os.rmdir(probe)
                return d
            except OSError:
                pass
    return None


def certs():
    """The tests' CA and a server certificate for 127.0.0.1 (openssl), in WORK."""
    run = lambda *a: subprocess.run(a, capture_output=True, check=True)  # noqa: E731
    ca, key = os.path.join(WORK, "ca.crt"), os.path.join(WORK, "ca.key")
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", ca,
        "-days", "1", "-subj", "/CN=gpuslice-gpu-test")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout",
        os.path.join(WORK, "srv.key"), "-out", os.path.join(WORK, "srv.csr"), "-subj",
        "/CN=kubernetes")
    open(os.path.join(WORK, "srv.ext"), "w").write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", os.path.join(WORK, "srv.csr"), "-CA", ca, "-CAkey", key,
        "-CAcreateserial", "-out", os.path.join(WORK, "srv.crt"), "-days", "1", "-extfile",
        os.path.join(WORK, "srv.ext"))
    return ca


def daemon_env():
    """The daemon's environment: the carried libraries' directory first (GPU_DEPS_LIB)."""
    env = dict(os.environ)
    deps = env.pop("GPU_DEPS_LIB", "")
    if deps and os.path.isdir(deps):
        env["LD_LIBRARY_PATH"] = deps + (":" + env["LD_LIBRARY_PATH"]
                                         if env.get("LD_LIBRARY_PATH") else "")
    return env


def wait_file(path, timeout=10):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            return True
        time.sleep(0.05)
    return False


def post_pod(kc, name, uid, annotations):
    pod = {"metadata": {"name": name, "namespace": "ml", "uid": uid, "annotations": annotations},
           "spec": {"nodeName": "gpu-node", "containers": [
               {"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"containerStatuses": [{"name": "main",
                                             "containerID": "containerd://" + CID}]}}
    req = urllib.request.Request(kc + "/pods", data=json.dumps(pod).encode(),
                                 headers={"Content-Type": "application/json"})
    urllib.request.urlopen(req, timeout=10).read()


def in_pod(cg_base, uid, preload, argv, timeout=120):
    """argv as a process of the pod's container: its cgroup, new PID and mount namespaces, the
    interposer from /etc/ld.so.preload (bind-mounted there in its namespace only)."""
    d = os.path.join(cg_base, "kubepods.slice", "kubepods-burstable.slice",
                     "kubepods-burstable-pod%s.slice" % uid.replace("-", "_"),
                     "cri-containerd-%s.scope" % CID)
    os.makedirs(d, exist_ok=True)
    # As the webhook mounts them: ld.so.preload over /etc/ld.so.preload, the run directory
    # read-only.
    inner = ('mount --bind "$0" /etc/ld.so.preload && mount --bind "$RUN" "$RUN" && '
             'mount -o remount,bind,ro "$RUN" && exec env GPUSLICE_POD=1 "$@"')
    outer = ('echo $$ >"$0/cgroup.procs" && exec unshare --pid --fork --mount --mount-proc '
             'sh -c \'%s\' "$@"' % inner)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUSLICE_") and
           k not in ("LD_PRELOAD", "GPU_DEPS_LIB")}
    env["RUN"] = os.path.join(WORK, "drun")
    return subprocess.run(["sh", "-c", outer, d, preload] + argv, capture_output=True, text=True,
                          timeout=timeout, env=env)


def stand_in_start(root, work):
    """What a pod's check needs first: root, a cgroup hierarchy, unshare and openssl (else the
    check is skipped); the tests' CA and token in work; the stand-in API server over TLS,
    logging to work/log. (cgroup base, CA, its port files, the log, the server's process)."""
    os.makedirs(work, exist_ok=True)
    if os.geteuid() != 0:
        gc.skip("needs root (cgroups, mount namespaces)")
    base = cgroup_base()
    if base is None or shutil.which("unshare") is None or shutil.which("openssl") is None:
        gc.skip("needs a writable cgroup hierarchy, unshare and openssl")
    ca = certs()
    open(os.path.join(work, "token"), "w").write("tok-gpu\n")
    kport, cport = os.path.join(work, "kport"), os.path.join(work, "cport")
    log = open(os.path.join(work, "log"), "w")
    stand_in = subprocess.Popen([sys.executable, os.path.join(root, "tests/k8s/apiserver.py"),
                                 "--port-file", kport, "--control-port-file", cport, "--tls",
                                 os.path.join(work, "srv.crt"), os.path.join(work, "srv.key"),
                                 "--token", "tok-gpu"], stdout=log, stderr=subprocess.STDOUT)
    return base, ca, kport, cport, log, stand_in


def main():
    base, ca, kport, cport, log, stand_in = stand_in_start(ROOT, WORK)
    made_preload = False
    daemon = None
    try:
        if not (wait_file(kport) and wait_file(cport)):
            gc.check(False, "the stand-in API server started")
            return
        ka = "https://127.0.0.1:%s" % open(kport).read().strip()
        kc = "http://127.0.0.1:%s" % open(cport).read().strip()
        post_pod(kc, "train", U1, {"gpuslice.io/memory": "8G"})
        post_pod(kc, "bad", U2, {"gpuslice.io/memory": "lots"})
        run_dir = os.path.join(WORK, "drun")
        daemon = subprocess.Popen([GSD, "--foreground", "--config", "/dev/null", "--run-dir",
                                   run_dir, "--kube-api", ka, "--kube-ca-file", ca,
                                   "--kube-token-file", os.path.join(WORK, "token"),
                                   "--node-name", "gpu-node"], stdout=log,
                                  stderr=subprocess.STDOUT, env=daemon_env())
        sock = os.path.join(run_dir, "gpusliced.sock")
        t0, st = time.monotonic(), None
        while time.monotonic() - t0 < 15:
            try:
                st, t = api(sock, "GET", "/v1/tenants/pod-" + U1)
                if st == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        if not gc.check(st == 200, "the daemon made the tenant pod-%s for pod ml/train" % U1):
            return
        preload = os.path.join(WORK, "ld.so.preload")
        open(preload, "w").write(LIB + "\n")
        if not os.path.exists("/etc/ld.so.preload"):
            open("/etc/ld.so.preload", "w").close()  # an empty one to mount over (removed after)
            made_preload = True
        # The daemon's run directory is the one the pod mounts: GPUSLICE_DAEMON_DIR stands in
        # for /run/gpuslice here (the host's is not this test's to take).
        r = in_pod(base, U1, preload, ["env", "GPUSLICE_DAEMON_DIR=" + run_dir, "nvidia-smi",
                                       "--query-gpu=memory.total,memory.used",
                                       "--format=csv,noheader,nounits", "-i", "0"])
        fields = r.stdout.strip().split(",") if r.returncode == 0 else []
        total = float(fields[0]) if len(fields) == 2 else -1
        gc.num("pod_nvidia_smi_total_mib", total)
        gc.check(total == 8192, "nvidia-smi in the pod: memory.total %s MiB, the pod's 8 GiB "
                 "(stderr: %s)" % (total, r.stderr.strip()[:200]))
        r = in_pod(base, U1, preload, ["env", "GPUSLICE_DAEMON_DIR=" + run_dir, "nvidia-smi"])
        for line in r.stdout.splitlines()[:20]:
            gc.note("pod nvidia-smi: " + line)
        gc.check(r.returncode == 0 and "8192MiB" in r.stdout.replace(" ", ""),
                 "nvidia-smi's table in the pod shows 8192MiB")
        prog = ("import torch, time\n"
                "free, total = torch.cuda.mem_get_info()\n"
                "print('total', total)\n"
                "a = torch.empty(6 << 30, dtype=torch.uint8, device='cuda')\n"
                "print('six ok')\n"
                "try:\n"
                "    b = torch.empty(9 << 30, dtype=torch.uint8, device='cuda')\n"
                "    print('nine ok')\n"
                "except torch.cuda.OutOfMemoryError:\n"
                "    print('nine OutOfMemoryError')\n"
                "open(%r, 'w').write('x')\n"
                "time.sleep(1.5)\n" % os.path.join(WORK, "held"))
        r = in_pod(base, U1, preload, ["env", "GPUSLICE_DAEMON_DIR=" + run_dir, sys.executable,
                                       "-c", prog])
        out = r.stdout
        tot = [int(x.split()[1]) for x in out.splitlines() if x.startswith("total ")]
        gc.num("pod_torch_total_gib", tot[0] / GiB if tot else -1)
        gc.check(tot and tot[0] == 8 * GiB, "PyTorch in the pod: mem_get_info total %s" %
                 (tot[0] if tot else r.stderr.strip()[-300:]))
        gc.check("six ok" in out, "PyTorch in the pod gets 6 GiB")
        gc.check("nine OutOfMemoryError" in out,
                 "PyTorch in the pod is refused 9 GiB with torch.cuda.OutOfMemoryError")
        st, m = api(sock, "GET", "/metrics")
        line = [x for x in (m if isinstance(m, str) else "").splitlines()
                if x.startswith("gpuslice_pod_memory_limit_bytes{") and 'pod="train"' in x]
        gc.check(line and line[0].endswith(" %d" % (8 * GiB)),
                 "/metrics: the pod's total limit 8 GiB (%s)" % (line[0] if line else "none"))
        r = in_pod(base, U2, preload, ["env", "GPUSLICE_DAEMON_DIR=" + run_dir, sys.executable,
                                       "-c", "import torch; print('available',"
                                       " torch.cuda.is_available())"])
        gc.check("available False" in r.stdout and "gpuslice.io/memory" in r.stderr,
                 "a refused pod's PyTorch has no CUDA, and the interposer names "
                 "gpuslice.io/memory (%s)" % r.stderr.strip()[:200])
    finally:
        if daemon:
            daemon.terminate()
            daemon.wait(timeout=10)
        stand_in.terminate()
        stand_in.wait(timeout=10)
        if made_preload:
            os.unlink("/etc/ld.so.preload")
        for dirpath, dirnames, _ in os.walk(os.path.join(base, "kubepods.slice"), topdown=False):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass
        log.close()
        sys.stdout.write(open(os.path.join(WORK, "log")).read()[-1500:] if gc._failures else "")
    gc.done()


if __name__ == "__main__":
    main()
