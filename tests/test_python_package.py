#!/usr/bin/env python3
"""
The Python client as a package: `pip install ./client/python` into a fresh
virtual environment with no package index (as on a machine that reaches
none), from the directory, from an sdist and editable; the installed
package imports from outside the tree; and the asyncio example of the
top-level README, run as written by the installed package, drives a real
stexecd on a private socket.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_python_package.py

Exit 0 when every check passed, 1 otherwise, 77 (skipped) when
STEXEC_DAEMON is unset. Ends with "N passed, M failed".
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
PKG = os.path.join(TOP, "client", "python")

import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

T = Checks()


def clean_env(**extra):
    """No PYTHONPATH (the tree must not leak in), no index whatsoever."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    env.update(PIP_NO_INDEX="1", PIP_NO_CACHE_DIR="1",
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra)
    return env


def run(argv, cwd, **extra):
    p = subprocess.run(argv, cwd=cwd, env=clean_env(**extra),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=pydaemon.scaled(120))
    out = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        print("$ %s\n%s" % (" ".join(argv), out), file=sys.stderr)
    return p.returncode, out


def where(py, cwd):
    """Where the venv's python finds stexec and stexec.aio, and the
    version."""
    rc, out = run([py, "-c", "import stexec, stexec.aio; "
                   "print(stexec.__file__); print(stexec.__version__)"], cwd)
    lines = out.splitlines()
    return (lines[0], lines[1]) if rc == 0 and len(lines) == 2 else (out, "")


def readme_example():
    """The fenced python block after the marker in README.md."""
    with open(os.path.join(TOP, "README.md"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- asyncio example[^>]*-->\s*```python\n(.*?)```",
                  text, re.S)
    return m.group(1) if m else None


def install(tmp):
    venv = os.path.join(tmp, "venv")
    rc, _ = run([sys.executable, "-m", "venv", venv], tmp)
    if not T.eq(rc, 0, "python3 -m venv (Debian: python3-venv)"):
        return None
    py = os.path.join(venv, "bin", "python")
    site = os.path.join(venv, "lib")

    # Editable: the venv imports the tree itself.
    rc, _ = run([py, "-m", "pip", "install", "-e", PKG], tmp)
    T.eq(rc, 0, "pip install -e ./client/python with no index")
    T.eq(where(py, tmp)[0], os.path.join(PKG, "stexec", "__init__.py"),
         "the editable install imports the tree")
    # An sdist built by the backend installs too (no index either).
    rc, out = run([py, "-c", "import sys; sys.path.insert(0, 'backend'); "
                   "import stexec_build as b; "
                   "print(b.build_sdist(sys.argv[1]))", tmp], PKG)
    sdist = os.path.join(tmp, out.strip())
    T.check(rc == 0 and os.path.isfile(sdist), "build_sdist: %s" % out)
    rc, _ = run([py, "-m", "pip", "install", "--force-reinstall", sdist],
                tmp)
    T.eq(rc, 0, "pip install the sdist with no index")
    T.check(where(py, tmp)[0].startswith(site + os.sep),
            "the sdist's package imports")

    # Last, the command the README gives (forced over the sdist's
    # install): the example runs with this one.
    rc, _ = run([py, "-m", "pip", "install", "--force-reinstall", PKG],
                tmp)
    T.eq(rc, 0, "pip install ./client/python with no index")
    path, version = where(py, tmp)
    T.check(path.startswith(site + os.sep) and
            path.endswith(os.path.join("stexec", "__init__.py")),
            "imported from the venv: %s" % path)
    T.eq(version, "0.1.0", "stexec.__version__")
    T.check(os.path.isfile(os.path.join(os.path.dirname(path), "aio.py")),
            "stexec/aio.py installed beside it")
    return py


def example(py, tmp, d):
    code = readme_example()
    if not T.check(code is not None, "README.md has the asyncio example"):
        return
    T.check(len(code.strip().splitlines()) <= 14,
            "the example is about ten lines")
    script = os.path.join(tmp, "example.py")
    with open(script, "w") as f:
        f.write(code)
    rc, out = 1, ""
    # The daemon may still be starting (the one guard, scaled).
    for _ in range(int(pydaemon.scaled(100))):
        if os.path.exists(d.sock):
            break
        time.sleep(0.1)
    rc, out = run([py, script], tmp, STEXEC_SOCKET=d.sock)
    T.eq(rc, 0, "the README's asyncio example runs")
    lines = out.splitlines()
    try:
        results = json.loads(lines[-1])
    except (ValueError, IndexError):
        results = None
    T.check(isinstance(results, list) and
            [r.get("tool_use_id") for r in results] ==
            ["toolu_01", "toolu_02"] and
            results[0]["content"] == "hello from bash\n" and
            not results[1]["is_error"],
            "the example's results, in order: %r" % (lines[-1:],))
    T.check(len(lines) > 1 and lines[-2].split() == ["turn_end"],
            "the example printed notifications up to turn_end: %r"
            % lines[:-1])


def main():
    tmp = tempfile.mkdtemp(prefix="stexec-pkg-")

    def install_and_run(d):
        py = install(tmp)
        if py:
            example(py, tmp, d)
    try:
        return pydaemon.run(T, install_and_run)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
