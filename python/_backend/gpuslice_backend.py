"""The build backend of the gpuslice package (PEP 517 and PEP 660), in the tree and needing
nothing but Python's standard library, so that `pip install ./python` works offline, in a fresh
venv, with or without build isolation: setuptools' backend needs the `wheel` package, which a
fresh venv lacks ("invalid command 'bdist_wheel'"), and fetches setuptools when isolated.

The package is pure Python (ctypes over libgpuslice.so): a wheel is python/gpuslice/*.py and
its metadata, taken from pyproject.toml's [project] table.
"""
import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "gpuslice"
TAG = "py3-none-any"


def _project():
    """pyproject.toml's [project] strings (name, version, description, requires-python)."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    table = text.split("[project]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^([A-Za-z-]+)\s*=\s*"([^"]*)"', table, re.M))


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    return "\n".join(lines) + "\n"


def _sources():
    d = os.path.join(ROOT, PACKAGE)
    return sorted(f for f in os.listdir(d) if f.endswith(".py"))


def _digest(data):
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "sha256=" + h


def _wheel(wheel_directory, files):
    """Writes the wheel of FILES ({archive name: bytes}) plus its dist-info; returns its name."""
    p = _project()
    dist = "%s-%s" % (p["name"].replace("-", "_"), p["version"])
    info = dist + ".dist-info"
    files = dict(files)
    files[info + "/METADATA"] = _metadata(p).encode()
    files[info + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: gpuslice_backend\n"
                              "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode()
    record = ["%s,%s,%d" % (n, _digest(b), len(b)) for n, b in files.items()]
    files[info + "/RECORD"] = ("\n".join(record + [info + "/RECORD,,"]) + "\n").encode()
    name = "%s-%s.whl" % (dist, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for n, b in files.items():
            z.writestr(zipfile.ZipInfo(n, (1980, 1, 1, 0, 0, 0)), b)
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    src = os.path.join(ROOT, PACKAGE)
    return _wheel(wheel_directory, {PACKAGE + "/" + f: open(os.path.join(src, f), "rb").read()
                                    for f in _sources()})


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e ./python: a .pth naming python/, so the sources are imported in place."""
    return _wheel(wheel_directory, {PACKAGE + "_editable.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = "%s-%s" % (p["name"], p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in (["pyproject.toml", "_backend/gpuslice_backend.py"] +
                    [PACKAGE + "/" + f for f in _sources()]):
            t.add(os.path.join(ROOT, rel), base + "/" + rel)
        meta = _metadata(p).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(meta)
        t.addfile(ti, io.BytesIO(meta))
    return name
