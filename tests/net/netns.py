"""
A private network namespace for the network tests: the program re-executes
itself under `unshare --net --mount` (root only), then puts the test
addresses on `lo` and a hosts file over /etc/hosts (a bind mount private to
the namespace), so that real clients, the daemon and its tools see the same
small world and nothing outside it.
"""
import os
import shutil
import subprocess
import sys

INSIDE = "STEXEC_NET_NAMESPACE"
SKIP = 77

# 198.18.0.0/15 (benchmarking) counts as public for the policy.
SITES = {
    "registry.test": "198.18.0.10",
    "pypi.test": "198.18.0.11",
    "git.test": "198.18.0.12",
    "www.test": "198.18.0.13",
    "evil.test": "198.18.0.20",
}
METADATA = "169.254.169.254"
# Names with no server of their own: a sub-domain and a look-alike for the
# wildcard rules, a name rebound to loopback, one to the metadata service.
ALIASES = {
    "sub.www.test": SITES["www.test"],
    "evilwww.test": SITES["evil.test"],
    "rebind.test": "127.0.0.1",
    "meta.test": METADATA,
}


def hosts_text():
    """hosts(5) lines for every test name (wrong.test has none)."""
    lines = ["127.0.0.1 localhost", "::1 localhost"]
    lines += ["%s %s" % (a, n) for n, a in SITES.items()]
    lines += ["%s %s" % (a, n) for n, a in ALIASES.items()]
    return "\n".join(lines) + "\n"


def skip(why):
    print("not run: " + why)
    print("0 passed, 0 failed")
    sys.exit(SKIP)


def enter(argv):
    """Re-execute argv under a private network and mount namespace unless
    already inside one; exits 77 when none can be made."""
    if os.environ.get(INSIDE) == "1":
        return
    if os.geteuid() != 0:
        skip("a private network namespace needs root")
    unshare = shutil.which("unshare")
    if not unshare or not shutil.which("ip"):
        skip("unshare or ip (iproute2) is missing")
    probe = subprocess.run([unshare, "--net", "--mount", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        skip("unshare --net --mount: " + probe.stderr.strip())
    env = dict(os.environ)
    env[INSIDE] = "1"
    # Proxy settings of the machine would steer the direct clients.
    for k in list(env):
        if k.lower() in ("http_proxy", "https_proxy", "all_proxy",
                         "no_proxy"):
            del env[k]
    sys.stdout.flush()
    os.execve(unshare, [unshare, "--net", "--mount", "--", sys.executable]
              + argv, env)


def setup(tmp):
    """Addresses on lo, /etc/hosts for the test names; returns the hosts
    file's path (for --network-hosts)."""
    def ip(*args):
        subprocess.run(["ip"] + list(args), check=True)
    ip("link", "set", "lo", "up")
    for a in list(SITES.values()) + [METADATA]:
        ip("addr", "add", a + "/32", "dev", "lo")
    # ICMP datagram sockets for every group: the raw-socket row's effect.
    with open("/proc/sys/net/ipv4/ping_group_range", "w") as f:
        f.write("0 2147483647\n")
    path = os.path.join(tmp, "hosts")
    with open(path, "w") as f:
        f.write(hosts_text())
    subprocess.run(["mount", "--bind", path, "/etc/hosts"], check=True)
    return path
