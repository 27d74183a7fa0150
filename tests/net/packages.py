"""
The packages the test's servers hand out: a wheel built by hand (a zip with
its dist-info) for a PEP 503 simple index, an npm tarball made by `npm pack`
from nettest-pkg/ with its packument, a bare git repository.
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "nettest-pkg"
WHEEL = "nettest_pkg-1.0-py3-none-any.whl"
TGZ = "nettest-pkg-1.0.0.tgz"
README = "nettest repository on git.test\n"


def _b64(digest):
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel(tmp):
    """The wheel's bytes."""
    files = {
        "nettest_pkg/__init__.py": b"VALUE = 'nettest from pypi.test'\n",
        "nettest_pkg-1.0.dist-info/METADATA":
            b"Metadata-Version: 2.1\nName: nettest-pkg\nVersion: 1.0\n"
            b"Summary: served by tests/test_network.py\n",
        "nettest_pkg-1.0.dist-info/WHEEL":
            b"Wheel-Version: 1.0\nGenerator: tests/net\n"
            b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join("%s,sha256=%s,%d\n" % (
        p, _b64(hashlib.sha256(b).digest()), len(b))
        for p, b in files.items())
    record += "nettest_pkg-1.0.dist-info/RECORD,,\n"
    files["nettest_pkg-1.0.dist-info/RECORD"] = record.encode()
    path = os.path.join(tmp, WHEEL)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for p, b in files.items():
            z.writestr(p, b)
    with open(path, "rb") as f:
        return f.read()


def simple_index(wheel_bytes):
    """PEP 503 pages: path → HTML."""
    sha = hashlib.sha256(wheel_bytes).hexdigest()
    return {
        "/simple/": '<!DOCTYPE html><html><body><a href="%s/">%s</a>'
                    '</body></html>\n' % (NAME, NAME),
        "/simple/%s/" % NAME:
            '<!DOCTYPE html><html><body><a href="../../files/%s#sha256=%s">'
            '%s</a></body></html>\n' % (WHEEL, sha, WHEEL),
    }


def npm_tarball(tmp, env):
    """The tarball's bytes from `npm pack`, or None without npm."""
    npm = shutil.which("npm")
    if not npm:
        return None
    src = os.path.join(tmp, "npm-src")
    shutil.copytree(os.path.join(HERE, "nettest-pkg"), src)
    subprocess.run([npm, "pack", "--silent", "--pack-destination", tmp],
                   cwd=src, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(tmp, TGZ), "rb") as f:
        return f.read()


def packument(tgz, base):
    """The registry document of NAME, its tarball under base
    (e.g. https://registry.test)."""
    with open(os.path.join(HERE, "nettest-pkg", "package.json")) as f:
        manifest = json.load(f)
    manifest["_id"] = NAME + "@1.0.0"
    manifest["dist"] = {
        "tarball": "%s/%s/-/%s" % (base, NAME, TGZ),
        "shasum": hashlib.sha1(tgz).hexdigest(),
        "integrity": "sha512-" + base64.b64encode(
            hashlib.sha512(tgz).digest()).decode(),
    }
    return {"_id": NAME, "name": NAME, "dist-tags": {"latest": "1.0.0"},
            "versions": {"1.0.0": manifest},
            "time": {"1.0.0": "2024-01-01T00:00:00.000Z"}}


def git_repo(tmp, env):
    """A bare repository tmp/git/repo.git with one commit; returns
    tmp/git (the project root of git http-backend)."""
    root = os.path.join(tmp, "git")
    work = os.path.join(tmp, "git-work")
    os.makedirs(work)

    def git(*args, cwd=work):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t",
                        "-c", "init.defaultBranch=main"] + list(args),
                       cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    git("init", "-q")
    with open(os.path.join(work, "README"), "w") as f:
        f.write(README)
    git("add", "README")
    git("commit", "-q", "-m", "init")
    os.makedirs(root)
    git("clone", "-q", "--bare", work, os.path.join(root, "repo.git"))
    shutil.rmtree(work)
    return root
