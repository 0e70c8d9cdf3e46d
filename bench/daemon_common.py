"""Shared by the daemon's benchmarks (daemon_load.py, daemon_soak.py): starting gpusliced on the
simulated GPU in a directory of its own, an HTTP/1.1 client over its unix socket, and what
/proc says about the daemon's CPU time and memory."""
import http.client
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class UnixConnection(http.client.HTTPConnection):
    """A keep-alive HTTP/1.1 connection to the daemon's unix socket."""

    def __init__(self, path, timeout=10):
        super().__init__("gpusliced", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def request(conn, method, path, body=None):
    """(status, parsed JSON or text) of one request on conn."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers=headers)
    r = conn.getresponse()
    data = r.read()
    try:
        return r.status, json.loads(data)
    except ValueError:
        return r.status, data.decode(errors="replace")


class Daemon:
    """gpusliced --foreground --simulated in a temporary run directory, stopped on exit; with
    session=True in a session of its own, as systemd or a container starts it (where the kernel
    groups tasks by session, its nice then counts against other sessions' tasks)."""

    def __init__(self, build, extra=(), session=False):
        self.build = build
        self.dir = tempfile.mkdtemp(prefix="gs-bench-")
        self.run_dir = os.path.join(self.dir, "run")
        self.sock = os.path.join(self.run_dir, "gpusliced.sock")
        self.env = dict(os.environ)
        self.env.update(GPUSLICE_SIM_STATE=os.path.join(self.dir, "sim.state"),
                        GPUSLICE_RUN_DIR=os.path.join(self.dir, "shm"),
                        GPUSLICE_DAEMON_DIR=self.run_dir,
                        LD_LIBRARY_PATH=os.path.join(build, "lib", "sim"))
        os.makedirs(self.env["GPUSLICE_RUN_DIR"])
        denv = {k: v for k, v in self.env.items() if k != "LD_LIBRARY_PATH"}
        # On a GPU machine the daemon's libraries may be carried ones (tests/gpu/README.md).
        if os.environ.get("GPU_DEPS_LIB"):
            denv["LD_LIBRARY_PATH"] = os.environ["GPU_DEPS_LIB"]
        self.log = open(os.path.join(self.dir, "daemon.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(build, "bin", "gpusliced"), "--foreground", "--simulated", "--config",
             "/dev/null", "--run-dir", self.run_dir, *extra],
            env=denv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=session)
        for _ in range(200):
            try:
                c = UnixConnection(self.sock, timeout=1)
                if request(c, "GET", "/readyz")[0] == 200:
                    c.close()
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("gpusliced did not become ready; see " + self.log.name)

    def alive(self):
        return self.proc.poll() is None

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.proc.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def threads(self):
        return len(os.listdir("/proc/%d/task" % self.proc.pid))

    def stop(self):
        """SIGTERM; its exit status (None if it had to be killed), and its log's text."""
        rc = None
        if self.alive():
            self.proc.terminate()
            try:
                rc = self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        else:
            rc = self.proc.returncode
        self.log.close()
        with open(self.log.name) as f:
            text = f.read()
        if os.environ.get("GS_BENCH_KEEP") != "1":
            shutil.rmtree(self.dir, ignore_errors=True)
        return rc, text


def percentile(sorted_values, q):
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[k]
