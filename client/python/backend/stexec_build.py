"""The PEP 517 build backend of the stexec package, standard library only.

pip builds a package in an isolated environment where it first installs
the backend the package names; on a machine without access to an index
(or with only Debian's Python packages) that install fails. This backend
needs nothing, so ``pip install ./client/python`` works anywhere pip does.
It builds a pure-Python wheel of the ``stexec`` directory, an sdist, and
an editable wheel (PEP 660: a .pth file naming this directory).
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

PACKAGE = "stexec"
TAG = "py3-none-any"
EPOCH = (1980, 1, 1, 0, 0, 0)   # zip timestamps: reproducible wheels


def _project():
    """The [project] table of pyproject.toml (tomllib from Python 3.11; the
    few one-line string keys this file uses before that)."""
    with open("pyproject.toml", "rb") as f:
        text = f.read()
    try:
        import tomllib
        return tomllib.loads(text.decode("utf-8"))["project"]
    except ImportError:
        pass
    table, out = None, {}
    for line in text.decode("utf-8").splitlines():
        m = re.match(r"\s*\[([^\]]+)\]", line)
        if m:
            table = m.group(1).strip()
            continue
        m = re.match(r'\s*([\w-]+)\s*=\s*"([^"]*)"', line)
        if m and table == "project":
            out[m.group(1)] = m.group(2)
    return out


def _metadata(project):
    lines = ["Metadata-Version: 2.1",
             "Name: " + project["name"],
             "Version: " + project["version"],
             "Summary: " + project.get("description", ""),
             "Requires-Python: " + project.get("requires-python", ">=3")]
    lic = project.get("license")
    if isinstance(lic, dict) and "text" in lic:
        lines.append("License: " + lic["text"])
    body = ""
    if project.get("readme"):
        lines.append("Description-Content-Type: text/markdown")
        with open(project["readme"], encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _sources():
    """The package's files, relative paths, sorted."""
    out = []
    for root, dirs, files in os.walk(PACKAGE):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        out += [os.path.join(root, f) for f in sorted(files)
                if f.endswith((".py", ".typed"))]
    return out


def _wheel(wheel_directory, files):
    """Write a wheel holding ``files`` ({archive name: bytes}) and its
    dist-info; return its file name."""
    project = _project()
    name, version = project["name"], project["version"]
    info = "%s-%s.dist-info" % (name, version)
    files = dict(files)
    files[info + "/METADATA"] = _metadata(project).encode("utf-8")
    files[info + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: stexec_build\n"
                              "Root-Is-Purelib: true\nTag: %s\n"
                              % TAG).encode()
    record = []
    for arc, data in files.items():
        digest = base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (arc, digest, len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    whl = "%s-%s-%s.whl" % (name, version, TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            zi = zipfile.ZipInfo(arc, EPOCH)
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return whl


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    return _wheel(wheel_directory,
                  {p.replace(os.sep, "/"): _read(p) for p in _sources()})


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    return _wheel(wheel_directory, {
        "__editable__.%s.pth" % PACKAGE:
            (os.path.abspath(".") + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (project["name"], project["version"])
    paths = ["pyproject.toml", "README.md", "backend/stexec_build.py"]
    paths += _sources()
    tgz = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, tgz), "w:gz",
                      format=tarfile.PAX_FORMAT) as t:
        entries = [(p.replace(os.sep, "/"), _read(p)) for p in paths]
        entries.append(("PKG-INFO", _metadata(project).encode("utf-8")))
        for arc, data in entries:
            ti = tarfile.TarInfo(base + "/" + arc)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            t.addfile(ti, io.BytesIO(data))
    return tgz


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
