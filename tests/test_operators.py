#!/usr/bin/env python3
"""
What an operator sees of a real stexecd: `stexec-cli metrics` read by a real
Prometheus parser (Debian's python3-prometheus-client), its names against
the conventions and its counters as tools run, `--output` as the textfile
collector wants it; `stexec-cli top` on a pseudo-terminal of a fixed size,
where a running tool shows with its elapsed time within a second, and
`--once`; and the daemon's lines about sessions and tools, with their ids
in the text outside journald and as journal fields under it (a private
journald socket in a mount namespace, as root).
"""
import json
import os
import pty
import re
import select
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pydaemon  # noqa: E402
from pydaemon import Checks  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    # Debian's package, when the python3 found first is another one.
    sys.path.append("/usr/lib/python3/dist-packages")
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        print("python3-prometheus-client is missing (.ci/install-deps "
              "installs it)", file=sys.stderr)
        sys.exit(1)

CLI = os.environ.get("STEXEC_CLI")
T = Checks()
UNITS = ("_seconds", "_bytes", "_total", "_info")


class Rpc:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.f = self.s.makefile("rwb")
        self.id = 0

    def call(self, method, **params):
        self.id += 1
        self.f.write((json.dumps({"jsonrpc": "2.0", "id": self.id,
                                  "method": method, "params": params})
                      + "\n").encode())
        self.f.flush()
        while True:
            m = json.loads(self.f.readline())
            if m.get("id") == self.id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]

    def close(self):
        self.f.close()
        self.s.close()


def cli(d, *args, check=True):
    p = subprocess.run([CLI, "--socket", d.sock] + list(args),
                       capture_output=True, text=True,
                       timeout=pydaemon.scaled(60))
    if check:
        T.check(p.returncode == 0, "stexec-cli %s: exit %d: %s" %
                (" ".join(args), p.returncode, p.stderr))
    return p


def scrape(d):
    """{(sample name, sorted labels): value}, and the families."""
    text = cli(d, "metrics").stdout
    fams = list(text_string_to_metric_families(text))
    samples = {}
    for f in fams:
        for s in f.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples, fams, text


def conventions(fams, text):
    T.check(len(fams) >= 20, "families: %d" % len(fams))
    for f in fams:
        T.check(f.name.startswith("stexec_"), "prefix: %s" % f.name)
        T.check(f.documentation != "", "HELP of %s" % f.name)
        T.check(f.type in ("counter", "gauge", "histogram"),
                "type of %s: %s" % (f.name, f.type))
        names = {s.name for s in f.samples}
        if f.type == "counter":
            T.check(names == {f.name + "_total"}, "counter %s: %s" %
                    (f.name, names))
        elif f.type == "histogram":
            T.check(f.name.endswith("_seconds"), "unit of %s" % f.name)
            T.check(names == {f.name + "_bucket", f.name + "_sum",
                              f.name + "_count"}, "histogram %s: %s" %
                    (f.name, names))
            les = [s.labels["le"] for s in f.samples
                   if s.name.endswith("_bucket")]
            T.check(les[-1] == "+Inf" and all(
                float(a) < float(b) for a, b in zip(les, les[1:])),
                "buckets of %s: %s" % (f.name, les))
        if "bytes" in f.name or "seconds" in f.name or "time" in f.name:
            T.check(f.name.endswith(UNITS), "base unit last: %s" % f.name)
        T.check(not re.search(r"_(ms|milliseconds|kb|mb|kib)(_|$)", f.name),
                "base units only: %s" % f.name)
    # The text itself: one TYPE per family, before its samples.
    typed = re.findall(r"^# TYPE (\S+) ", text, re.M)
    T.eq(len(typed), len(set(typed)), "one TYPE line per family")


def delta(a, b, name, **labels):
    key = (name, tuple(sorted(labels.items())))
    return b.get(key, 0) - a.get(key, 0)


def metrics(d):
    before, fams, text = scrape(d)
    conventions(fams, text)
    info = [dict(k[1]) for k in before if k[0] == "stexec_build_info"]
    T.check(len(info) == 1 and info[0].get("protocol") == "1" and
            info[0].get("version", "") != "", "stexec_build_info: %s" % info)
    T.check(any(k[0] == "stexec_enforcement_info" and
                dict(k[1]).get("supervision") in ("cgroup", "process-group")
                for k in before), "stexec_enforcement_info")

    # Three tools: two succeed, one fails.
    p = cli(d, "run", "bash", '{"command":"echo a"}', "bash",
            '{"command":"exit 3"}', "read_file",
            '{"file_path":"/etc/hostname"}', check=False)
    T.eq(p.returncode, 1, "run with a failing tool: exit status")
    after, fams, text = scrape(d)
    conventions(fams, text)
    # The failing bash aborts its sibling (S7): it never starts.
    T.eq(delta(before, after, "stexec_tools_started_total"), 2,
         "tools started")
    T.eq(delta(before, after, "stexec_tools_finished_total", reason="ok"),
         1, "finished ok")
    T.eq(delta(before, after, "stexec_tools_finished_total", reason="exit"),
         1, "finished exit")
    T.eq(delta(before, after, "stexec_tools_finished_total",
               reason="sibling_error"), 1, "finished sibling_error")
    for h, n in (("stexec_tool_start_delay_seconds", 2),
                 ("stexec_tool_run_seconds", 2),
                 ("stexec_tool_result_delay_seconds", 2)):
        T.eq(delta(before, after, h + "_count"), n, h + "_count")
        T.eq(delta(before, after, h + "_bucket", le="+Inf"), n,
             h + " +Inf bucket")
        T.check(delta(before, after, h + "_sum") > 0, h + "_sum grew")
    T.check(delta(before, after, "stexec_connections_accepted_total") >= 1,
            "connections accepted")
    T.check(after[("stexec_journal_bytes", ())] > 0, "journal bytes")

    # A session of ours shows by its id; a running tool counts.
    r = Rpc(d.sock)
    sid = r.call("createSession")["sessionId"]
    r.call("addTool", sessionId=sid, toolUse={
        "id": "m1", "name": "bash", "input": {"command": "sleep 30"}})
    r.call("addTool", sessionId=sid, toolUse={
        "id": "m2", "name": "bash", "input": {"command": "true"}})
    now, fams, text = scrape(d)
    T.eq(now.get(("stexec_session_tools_running", (("session", sid),))), 1,
         "its session's running tools")
    T.eq(now.get(("stexec_session_tools_queued", (("session", sid),))), 1,
         "its session's queued tools")
    T.eq(now.get(("stexec_tools_running", ())), 1, "tools running")
    T.eq(now.get(("stexec_tools_queued", ())), 1, "tools queued")
    T.check(now.get(("stexec_session_clients", (("session", sid),))) >= 1,
            "its session's clients")
    r.call("closeSession", sessionId=sid)
    r.close()

    # --output: whole, readable by another user, nothing left beside it.
    out = os.path.join(d.tmp, "textfile")
    os.mkdir(out)
    path = os.path.join(out, "stexec.prom")
    for _ in range(2):
        cli(d, "metrics", "--output", path)
    T.eq(os.listdir(out), ["stexec.prom"], "only the .prom file is left")
    T.eq(stat.S_IMODE(os.stat(path).st_mode), 0o644, "its mode")
    with open(path) as f:
        conventions(list(text_string_to_metric_families(f.read())), text)
    p = cli(d, "metrics", "--output", "/nonexistent/dir/x.prom", check=False)
    T.check(p.returncode != 0 and "/nonexistent/dir" in p.stderr,
            "--output into a missing directory: %d %s" %
            (p.returncode, p.stderr))


def started(d):
    """stats' toolsStarted and stexec_tools_started_total count the same
    starts: a process whose execve happened. A tool whose exec fails is
    none, whether its spawn waited for the exec (nothing else ran) or not
    (started beside a running tool); one started beside a running tool
    that exec'd counts before it writes or ends anything."""
    bad = os.path.join(d.tmp, "not-a-program")
    with open(bad, "w") as f:
        f.write("no magic, no #!\n")
    os.chmod(bad, 0o755)
    r = Rpc(d.sock)
    hold = r.call("createSession")["sessionId"]
    sid = r.call("createSession", tools=[
        {"name": "bad", "command": [bad]},
        {"name": "quiet", "command": ["/bin/sleep", "30"]}])["sessionId"]

    def counts():
        m, _, _ = scrape(d)
        return (r.call("stats")["toolsStarted"],
                m.get(("stexec_tools_started_total", ()), 0))

    seen = [0]

    def reason(tool):
        """Its result's reason, read from where the last read ended."""
        got = r.call("events", sessionId=sid, since=seen[0])
        seen[0] = got["lastSeq"]
        for n in got["notifications"]:
            p = n["params"]
            if n["method"] == "tool_result" and p["toolUseId"] == tool:
                return p["meta"]["reason"]
        return None

    s0, m0 = counts()
    r.call("addTool", sessionId=sid, toolUse={
        "id": "w1", "name": "bad", "input": {}})
    r.call("drain", sessionId=sid)
    T.eq(reason("w1"), "spawn_failed", "a waited spawn whose exec fails")
    r.call("addTool", sessionId=hold, toolUse={
        "id": "h1", "name": "bash", "input": {"command": "sleep 30"}})
    r.call("addTool", sessionId=sid, toolUse={
        "id": "l1", "name": "bad", "input": {}})
    r.call("drain", sessionId=sid)
    T.eq(reason("l1"), "spawn_failed", "a launched spawn whose exec fails")
    s1, m1 = counts()
    T.eq((s1 - s0, m1 - m0), (1, 1),
         "started (stats, metric): only the running tool, no failed exec")
    r.call("addTool", sessionId=sid, toolUse={
        "id": "l2", "name": "quiet", "input": {}})
    deadline = time.time() + pydaemon.scaled(10)
    while counts()[0] == s1 and time.time() < deadline:
        time.sleep(0.01)
    s2, m2 = counts()
    T.eq((s2 - s0, m2 - m0), (2, 2),
         "started (stats, metric): a launched tool once it exec'd")
    r.call("closeSession", sessionId=sid)
    r.call("closeSession", sessionId=hold)
    r.close()


def screen_rows(data):
    """The lines of the frames, escape sequences taken out."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", data)
    return [ln for ln in text.replace("\r", "").split("\n") if ln]


def top(d):
    pid, fd = pty.fork()
    if pid == 0:
        import fcntl
        import termios
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 132, 0, 0))
        os.environ.pop("COLUMNS", None)
        os.execv(CLI, [CLI, "--socket", d.sock, "top", "--interval", "0.2"])
    data = ""

    def read(until):
        nonlocal data
        while time.time() < until:
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    data += os.read(fd, 65536).decode("utf-8", "replace")
                except OSError:
                    return

    try:
        read(time.time() + pydaemon.scaled(1))
        T.check("\x1b[?1049h" in data, "top enters the alternate screen")
        T.check("\x1b[H" in data and "\x1b[K" in data,
                "frames: cursor home, each line cleared to its end")
        r = Rpc(d.sock)
        sid = r.call("createSession")["sessionId"]
        mark = len(data)
        # Long enough for top's frames, scaled (tests/README.md).
        nap = "sleep %d" % pydaemon.scaled(5)
        r.call("addTool", sessionId=sid, toolUse={
            "id": "top1", "name": "bash",
            "input": {"command": nap}})
        # Queued behind it: what it runs, cut to the terminal's width.
        r.call("addTool", sessionId=sid, toolUse={
            "id": "top2", "name": "bash",
            "input": {"command": "echo " + "x" * 300}})
        # Until a frame shows both (one may have been fetched between the
        # two addTools); a generous bound, for a loaded machine.
        t0 = time.time()
        seen = None
        queued = []
        while (time.time() < t0 + pydaemon.scaled(20) and
               (seen is None or not queued)):
            read(time.time() + 0.05)
            for ln in screen_rows(data[mark:]):
                m = re.search(r"top1\s+bash\s+executing\s+(\d+\.\d)s\s+"
                              r"(\S+)\s+(\S+)\s+(\S+)\s+" + nap + "$", ln)
                if m and sid in ln:
                    seen = (time.time() - t0, m.groups(), ln)
            queued = [ln for ln in screen_rows(data[mark:]) if "top2" in ln]
        T.check(seen is not None, "top shows the running tool with its "
                "elapsed time: %r" % screen_rows(data[mark:])[-8:])
        T.check(queued != [] and re.search(r"queued\s.*\secho x+…$",
                                           queued[-1]) is not None and
                len(queued[-1]) <= 132, "top shows a queued tool's input "
                "cut to the terminal's width: %r" % queued[-1:])
        st = r.call("status", sessionId=sid)["tools"][0]
        T.eq(st.get("input"), {"command": nap}, "status: the input")
        # Measured wherever a memory controller is, v1 (hybrid, with
        # --measure-memory) or v2.
        how = r.call("initialize")["capabilities"]["enforcement"]
        T.eq(how.get("peakMemory"), "all" if how["limits"]["memoryBytes"] in
             ("cgroup1", "cgroup2") else None, "with --measure-memory, "
             "every tool's peak memory where a memory controller is")
        if how.get("peakMemory") == "all":
            T.check("peakMemoryBytes" in st, "status: peak memory with "
                    "the memory controller on %s, no limit: %r" % (
                        how["limits"]["memoryBytes"], st))
        if seen is not None and "peakMemoryBytes" in st:
            T.check(re.match(r"\d+(\.\d)?[BKMGT]$", seen[1][3]) is not None,
                    "top shows its peak memory: %r" % (seen[2],))
        if seen is not None and "cpuMs" in st:
            T.check(seen[1][2] != "-", "top shows its CPU time: %r" %
                    (seen[2],))
        # A key sorts; q leaves, the shell's screen comes back.
        os.write(fd, b"n")
        read(time.time() + 0.5)
        T.check("sort: name" in data, "the n key sorts by name")
        once = cli(d, "top", "--once").stdout
        T.check("\x1b" not in once and re.search(
            r"top1\s+bash\s+executing\s+\d+\.\ds", once) is not None,
            "top --once: a plain frame with the tool: %r" % once)
        os.write(fd, b"q")
        read(time.time() + pydaemon.scaled(2))
        _, status = os.waitpid(pid, 0)
        pid = 0
        T.eq(os.waitstatus_to_exitcode(status), 0, "top's exit status")
        T.check(data.rstrip().endswith("\x1b[?1049l"),
                "top leaves the alternate screen: %r" % data[-40:])
        r.call("closeSession", sessionId=sid)
        r.close()
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def logs_text(d):
    """Outside journald the ids lead the text."""
    r = Rpc(d.sock)
    sid = r.call("createSession")["sessionId"]
    r.call("addTool", sessionId=sid, toolUse={
        "id": "lg1", "name": "bash", "input": {"command": "exit 4"}})
    r.call("drain", sessionId=sid)
    r.call("closeSession", sessionId=sid)
    r.close()
    # The log lines are the event: wait for the result's, with a guard.
    deadline = time.time() + pydaemon.scaled(10)
    while ("tool lg1 (bash): result" not in d.log_tail(400) and
           time.time() < deadline):
        time.sleep(0.05)
    log = d.log_tail(400)
    T.check(re.search(r"^stexecd: info: session %s: created for uid \d+" %
                      sid, log, re.M) is not None, "created, in the text")
    T.check(re.search(r"^stexecd: info: session %s: tool lg1 \(bash\): "
                      r"result exit after \d+ ms" % sid, log, re.M)
            is not None, "a failed result, in the text: %s" % log[-800:])
    T.check(re.search(r"^stexecd: info: session %s: closing" % sid, log,
                      re.M) is not None, "closing, in the text")


def reload(d):
    """A reload (SIGHUP) keeps the counters and counts itself."""
    before, _, _ = scrape(d)
    os.kill(d.proc.pid, signal.SIGHUP)
    after, deadline = {}, time.time() + pydaemon.scaled(15)
    while time.time() < deadline:
        p = subprocess.run([CLI, "--socket", d.sock, "metrics"],
                           capture_output=True, text=True,
                           timeout=pydaemon.scaled(30))
        if p.returncode == 0:
            after = {(s.name, tuple(sorted(s.labels.items()))): s.value
                     for f in text_string_to_metric_families(p.stdout)
                     for s in f.samples}
            if after.get(("stexec_reloads_total", ()), 0) >= 1:
                break
        time.sleep(0.1)
    T.eq(delta(before, after, "stexec_reloads_total"), 1, "reloads counted")
    for name, labels in (("stexec_tools_started_total", {}),
                         ("stexec_tools_finished_total", {"reason": "ok"}),
                         ("stexec_tools_finished_total", {"reason": "exit"}),
                         ("stexec_tool_run_seconds_count", {}),
                         ("stexec_tool_run_seconds_bucket", {"le": "+Inf"}),
                         ("stexec_tool_run_seconds_sum", {})):
        T.check(delta(before, after, name, **labels) == 0 and
                after.get((name, tuple(sorted(labels.items()))), 0) > 0,
                "%s%s kept across the reload" % (name, labels))


def journal_fields():
    """Under journald, through a journald socket of the test's own."""
    if os.geteuid() != 0 or not os.path.exists("/usr/bin/unshare"):
        print("journal fields: skipped (needs root and unshare)")
        return
    # Root without CAP_SYS_ADMIN (a container's, by default) makes no mounts.
    if subprocess.run(["unshare", "--mount", "true"],
                      stderr=subprocess.DEVNULL).returncode != 0:
        print("journal fields: skipped (no mount namespace here: "
              "CAP_SYS_ADMIN)")
        return
    tmp = tempfile.mkdtemp(prefix="stexec-journal-")
    jdir = os.path.join(tmp, "journal")
    os.mkdir(jdir)
    js = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    js.bind(os.path.join(jdir, "socket"))
    js.setblocking(False)
    log = open(os.path.join(tmp, "stream.log"), "wb")
    st = os.fstat(log.fileno())
    env = {k: v for k, v in os.environ.items() if k not in (
        "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "STEXEC_SOCKET")}
    env["JOURNAL_STREAM"] = "%d:%d" % (st.st_dev, st.st_ino)
    sock = os.path.join(tmp, "s.sock")
    # A private /run in which /run/systemd/journal is the test's. The new
    # namespace's mounts are made private before anything is mounted, so
    # that nothing reaches the machine's: all of them from /, or, in a
    # chroot (whose / is no mount point, which unshare's own "--propagation
    # private" refuses), the chroot's own /run.
    setup = ('if ! mount --make-rprivate / 2>/dev/null; then '
             'mountpoint -q /run || { echo "neither / nor /run is a mount '
             'point: no private /run" >&2; exit 97; }; '
             'mount --make-rprivate /run || exit 97; fi && '
             'mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/journal && '
             'mount --bind "$0" /run/systemd/journal && exec "$@"')
    p = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "unchanged", "sh", "-c", setup,
         jdir, os.environ["STEXEC_DAEMON"], "--socket", sock, "--state-dir=",
         "--output-dir", os.path.join(tmp, "out")],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    try:
        deadline = time.time() + pydaemon.scaled(10)
        while (not os.path.exists(sock) and time.time() < deadline
               and p.poll() is None):
            time.sleep(0.02)
        if p.poll() is not None:
            log.flush()
            with open(os.path.join(tmp, "stream.log"), "rb") as f:
                T.check(False, "the journald daemon did not start: %r" %
                        f.read().decode("utf-8", "replace")[-500:])
            return
        r = Rpc(sock)
        sid = r.call("createSession")["sessionId"]
        r.call("addTool", sessionId=sid, toolUse={
            "id": "jr1", "name": "bash", "input": {"command": "exit 5"}})
        r.call("drain", sessionId=sid)
        r.call("closeSession", sessionId=sid)
        r.close()
        entries = []
        deadline = time.time() + pydaemon.scaled(3)
        while time.time() < deadline:
            try:
                msg = js.recv(65536).decode("utf-8", "replace")
            except BlockingIOError:
                if any("closing" in e.get("MESSAGE", "") for e in entries):
                    break
                time.sleep(0.05)
                continue
            entries.append(dict(ln.split("=", 1) for ln in msg.splitlines()
                                if "=" in ln))
        mine = [e for e in entries if e.get("SESSION_ID") == sid]
        T.check(any("created for uid" in e.get("MESSAGE", "") and
                    e.get("PRIORITY") == "6" and
                    e.get("SYSLOG_IDENTIFIER") == "stexecd" for e in mine),
                "journal: the session's creation with SESSION_ID: %s" %
                entries)
        T.check(any(e.get("TOOL_USE_ID") == "jr1" and
                    e.get("TOOL_NAME") == "bash" and
                    "result exit" in e.get("MESSAGE", "") for e in mine),
                "journal: the tool's result with TOOL_USE_ID, TOOL_NAME: %s"
                % mine)
        T.check(any("closing" in e.get("MESSAGE", "") for e in mine),
                "journal: closing with SESSION_ID")
    finally:
        p.send_signal(signal.SIGTERM)
        T.eq(p.wait(timeout=pydaemon.scaled(15)), 0,
             "the journald daemon's exit status")
        log.close()
        with open(os.path.join(tmp, "stream.log"), "rb") as f:
            text = f.read().decode("utf-8", "replace")
        # Lines about no session stay on the stream, with priorities.
        T.check(re.search(r"^<6>", text, re.M) is not None,
                "other lines on the stream with their priority: %r" %
                text[:300])
        js.close()
        subprocess.run(["rm", "-rf", tmp])


def main():
    if not CLI:
        print("STEXEC_CLI is not set: skipped")
        return 77

    def body(d):
        deadline = time.time() + pydaemon.scaled(10)
        while not os.path.exists(d.sock) and time.time() < deadline:
            time.sleep(0.02)
        metrics(d)
        started(d)
        top(d)
        logs_text(d)
        reload(d)

    # No --memory-limit: memory is measured without a limit too.
    rc = pydaemon.run(T, body, ["--measure-memory"])
    if rc != 0:
        return rc
    journal_fields()
    print("%d passed, %d failed" % (T.passed, T.failed))
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
