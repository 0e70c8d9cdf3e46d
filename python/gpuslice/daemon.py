"""gpusliced's API from Python (docs/openapi.json): the daemon's tenants, their limits, and
its events, over its unix socket (only the standard library)."""
import http.client
import json
import os
import socket
from typing import Any, Dict, Iterator, List, Optional

from .errors import DaemonError, GpusliceError


def socket_path() -> str:
    """The daemon's socket: $GPUSLICE_DAEMON_DIR/gpusliced.sock, else /run/gpuslice's. A
    relative $GPUSLICE_DAEMON_DIR is refused (GpusliceError), as the daemon and the CLI refuse it."""
    d = os.environ.get("GPUSLICE_DAEMON_DIR") or "/run/gpuslice"
    if not d.startswith("/"):
        raise GpusliceError('GPUSLICE_DAEMON_DIR="%s" is not an absolute path: give the daemon\'s '
                            "run directory as one, or unset it" % d)
    return os.path.join(d, "gpusliced.sock")


class _Conn(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("gpusliced", timeout=timeout)
        self._path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def request(method: str, path: str, body: Optional[dict] = None, *, sock: Optional[str] = None,
            timeout: float = 10.0) -> Any:
    """One API call: the decoded JSON answer (None for 204). Raises DaemonError with the
    daemon's code and message, GpusliceError when it cannot be reached."""
    where = sock or socket_path()
    c = _Conn(where, timeout)
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data,
                  headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        raw = r.read()
    except OSError as e:
        raise GpusliceError(f"gpusliced on {where} cannot be reached: {e}") from e
    finally:
        c.close()
    doc = json.loads(raw) if raw else None
    if r.status >= 400:
        err = (doc or {}).get("error", {}) if isinstance(doc, dict) else {}
        raise DaemonError(r.status, err.get("code", "error"), err.get("message", raw.decode()))
    return doc


class Tenant:
    """A tenant of the daemon's, as GET /v1/tenants/{id} shows it (`data`), with what may be
    done to it. Tenant.create() makes one; Tenant.list() lists them."""

    def __init__(self, data: Dict[str, Any], sock: Optional[str] = None):
        self.data = data
        self._sock = sock

    id = property(lambda self: self.data["id"])
    name = property(lambda self: self.data["name"])
    limits = property(lambda self: self.data["limits"])
    priority = property(lambda self: self.data.get("priority"))
    weight = property(lambda self: self.data.get("weight"))

    def __repr__(self):
        return f"Tenant(id={self.id!r}, name={self.name!r}, limits={self.limits!r})"

    @classmethod
    def list(cls, *, sock: Optional[str] = None) -> List["Tenant"]:
        return [cls(t, sock) for t in request("GET", "/v1/tenants", sock=sock)["tenants"]]

    @classmethod
    def get(cls, key: str, *, sock: Optional[str] = None) -> "Tenant":
        return cls(request("GET", "/v1/tenants/" + key, sock=sock), sock)

    @classmethod
    def create(cls, name: str, *, memory: Optional[str] = None, compute: Any = None,
               priority: Optional[str] = None, weight: Optional[int] = None,
               owner: Optional[int] = None, sock: Optional[str] = None) -> "Tenant":
        """A managed tenant (POST /v1/tenants): memory as the CLI's --memory ("8G",
        "0:8G,1:4G"), compute as --compute, priority latency|normal|background, weight 1..100."""
        body = {"name": name}
        for k, v in (("memory", memory), ("compute", compute), ("priority", priority),
                     ("weight", weight), ("owner", owner)):
            if v is not None:
                body[k] = v
        return cls(request("POST", "/v1/tenants", body, sock=sock), sock)

    def refresh(self) -> "Tenant":
        self.data = request("GET", "/v1/tenants/" + self.id, sock=self._sock)
        return self

    def update(self, **changes) -> "Tenant":
        """PATCH: memory, compute, priority, weight (raising one takes an admin)."""
        self.data = request("PATCH", "/v1/tenants/" + self.id, changes, sock=self._sock) or self.data
        return self

    def delete(self) -> None:
        request("DELETE", "/v1/tenants/" + self.id, sock=self._sock)

    def processes(self) -> List[Dict[str, Any]]:
        return request("GET", f"/v1/tenants/{self.id}/processes", sock=self._sock)["processes"]


def events(*, sock: Optional[str] = None, last_event_id: Optional[int] = None,
           timeout: float = 30.0) -> Iterator[Dict[str, Any]]:
    """The daemon's server-sent events (GET /v1/events) as dicts {id, event, data}, from
    `last_event_id` on; ends when the daemon closes the stream or after `timeout` idle."""
    where = sock or socket_path()
    c = _Conn(where, timeout)
    try:
        c.request("GET", "/v1/events",
                  headers={"Last-Event-ID": str(last_event_id)} if last_event_id is not None
                  else {})
        r = c.getresponse()
        if r.status >= 400:
            raise DaemonError(r.status, "error", r.read().decode(errors="replace"))
        ev: Dict[str, Any] = {}
        for raw in r:
            line = raw.decode(errors="replace").rstrip("\n")
            if not line:
                if "data" in ev:
                    try:
                        ev["data"] = json.loads(ev["data"])
                    except ValueError:
                        pass
                    yield ev
                ev = {}
            elif line.startswith(":"):
                continue
            else:
                k, _, v = line.partition(":")
                ev[k] = v[1:] if v.startswith(" ") else v
    except (OSError, socket.timeout) as e:
        if not isinstance(e, socket.timeout):
            raise GpusliceError(f"gpusliced on {where} cannot be reached: {e}") from e
    finally:
        c.close()
