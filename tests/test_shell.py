#!/usr/bin/env python3
"""
The built-in bash as a session's shell, against the real stexecd
(doc/design.md §7, Shell; PROTOCOL.md, createSession `shell`): its cwd
carries from call to call (and to the session's other tools), goes back to
the session's cwd outside the allowed directories or once removed, holds in
the sandboxed profiles, after `exit 3` and across a reload, and not after a
timeout, through a sourced file, an eval, BASH_ENV and an exported
function; a command that cannot move it runs its program in the shell's
place; an env file is sourced before each command; keepEnv carries what a
command exports and unsets. Raw JSON-RPC, so that it tests the daemon.

  STEXEC_DAEMON=build/daemon/stexecd python3 tests/test_shell.py
"""
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pydaemon  # noqa: E402
from pydaemon import Checks, Conn  # noqa: E402

T = Checks()
# Made before the daemon starts: its --shell-allow-dir and --shell-env-file.
AREA = tempfile.mkdtemp(prefix="stexec-shell-")
ALLOWED = os.path.join(AREA, "allowed")
ENV_FILE = os.path.join(AREA, "daemon.env")


def turn(c, sid, *uses):
    """[(content, meta)] of the tool uses, one turn."""
    return [(r["content"], m) for r, m in pydaemon.turn(c, sid, *uses)]


def sh(c, sid, command, **more):
    """One bash call: (content, reason)."""
    more["command"] = command
    (content, meta), = turn(c, sid, ("bash", more))
    return content, meta["reason"]


def root_of(name):
    """A fresh session directory with a sub/ in it."""
    d = os.path.join(AREA, name)
    os.makedirs(os.path.join(d, "sub"))
    return d


def keeps_cwd(d, tag=""):
    c = Conn(d.sock)
    root = root_of("keep" + tag)
    sid = c.ok("createSession", cwd=root)["sessionId"]
    T.eq(sh(c, sid, "cd sub"), ("", "ok"), "cd sub")
    T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
         "the next call starts in sub")
    T.eq(sh(c, sid, "echo made > here.txt"), ("", "ok"),
         "a relative path in the next call")
    T.check(os.path.exists(os.path.join(root, "sub", "here.txt")),
            "here.txt was written in sub")
    (content, meta), = turn(c, sid, ("read_file", {"file_path": "here.txt"}))
    T.eq((content, meta["reason"]), ("     1\tmade\n", "ok"),
         "the session's other tools start in sub too")
    T.eq(sh(c, sid, "cd /"), ("Shell cwd was reset to %s" % root, "ok"),
         "cd / goes back to the session's cwd, and says so")
    T.eq(sh(c, sid, "pwd"), (root + "\n", "ok"), "pwd after the reset")
    # A symlink inside that leads outside is outside.
    os.symlink("/", os.path.join(root, "out"))
    T.eq(sh(c, sid, "cd out"), ("Shell cwd was reset to %s" % root, "ok"),
         "a symlink out of the root goes back too")
    T.eq(sh(c, sid, "cd %s" % ALLOWED), ("", "ok"),
         "a --shell-allow-dir is allowed")
    T.eq(sh(c, sid, "pwd"), (ALLOWED + "\n", "ok"), "pwd in it")
    T.eq(sh(c, sid, "cd %s/sub; exit 3" % root), ("Exit code 3", "exit"),
         "cd sub then exit 3")
    T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
         "exit 3 still moved the cwd")
    T.eq(sh(c, sid, "set -e; cd ..; false; cd sub"), ("Exit code 1", "exit"),
         "a command failing under set -e")
    T.eq(sh(c, sid, "pwd"), (root + "\n", "ok"),
         "the failure still moved the cwd")
    # The command may close or reuse fd 3.
    T.eq(sh(c, sid, "exec 3>&-; cd sub"), ("", "ok"), "fd 3 closed")
    T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
         "the cwd carried with fd 3 closed")
    content, reason = sh(c, sid, "cd ..; sleep 30",
                         timeout=int(pydaemon.scaled(300)))
    T.eq(reason, "timeout", "a call that times out")
    T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
         "a timed-out call does not move the cwd")
    c.ok("closeSession", sessionId=sid)
    c.close()


def odd_cwd(d, tag=""):
    """A cwd whose name JSON must escape (a quote, a backslash, a tab, a
    newline) or that is not ASCII carries like any other; so does staying
    where the call started, which the shell does not report."""
    c = Conn(d.sock)
    root = root_of("odd" + tag)
    sid = c.ok("createSession", cwd=root)["sessionId"]
    for name in ('q"b\\s', "t\tn\nx", "\u00e9t\u00e9", "plain"):
        os.mkdir(os.path.join(root, name))
        T.eq(sh(c, sid, "cd %s" % shlex.quote(name)), ("", "ok"),
             "cd %r" % name)
        T.eq(sh(c, sid, "pwd"), (os.path.join(root, name) + "\n", "ok"),
             "the next call starts in %r" % name)
        T.eq(sh(c, sid, "true"), ("", "ok"), "a call that stays")
        T.eq(sh(c, sid, "pwd"), (os.path.join(root, name) + "\n", "ok"),
             "still in %r" % name)
        T.eq(sh(c, sid, "cd .."), ("", "ok"), "back up")
    c.ok("closeSession", sessionId=sid)
    c.close()


def removed_cwd(d):
    """A cwd removed since it became the session's: back to the root, said
    by the next call, whatever its tool."""
    c = Conn(d.sock)
    root = root_of("removed")
    os.mkdir(os.path.join(root, "gone"))
    sid = c.ok("createSession", cwd=root)["sessionId"]
    T.eq(sh(c, sid, "cd gone"), ("", "ok"), "cd gone")
    os.rmdir(os.path.join(root, "gone"))
    T.eq(sh(c, sid, "pwd"), (root + "\nShell cwd was reset to %s" % root,
                             "ok"), "a removed cwd falls back")
    T.eq(sh(c, sid, "cd sub"), ("", "ok"), "cd sub")
    os.rmdir(os.path.join(root, "sub"))
    (content, meta), = turn(c, sid, ("list_dir", {"path": "."}))
    T.eq(meta["reason"], "ok", "another tool in a removed cwd still runs")
    T.check(content.endswith("Shell cwd was reset to %s" % root),
            "...and says where it ran: %r" % content)
    c.ok("closeSession", sessionId=sid)
    c.close()


def hidden_moves(d):
    """A command that names no cd runs its last program in place of its
    shell (no EXIT trap to fork for), and one that moves the cwd through
    code not in its text still carries: a file it sources (. or source),
    a string it evals, BASH_ENV and a function from the session's env."""
    c = Conn(d.sock)
    root = root_of("hidden")
    with open(os.path.join(root, "go.sh"), "w") as f:
        f.write("cd sub\n")
    sid = c.ok("createSession", cwd=root)["sessionId"]
    T.eq(sh(c, sid, "sh -c 'echo $PPID'"), ("%d\n" % d.proc.pid, "ok"),
         "a command without cd: its program is the shell's exec, a child "
         "of the daemon")
    content, reason = sh(c, sid, "cd .; sh -c 'echo $PPID'")
    T.check(reason == "ok" and content != "%d\n" % d.proc.pid,
            "with a cd, the shell stays to report the cwd: %r" % content)
    for how in (". ./go.sh", "source go.sh", 'eval "$(cat go.sh)"'):
        T.eq(sh(c, sid, how), ("", "ok"), how)
        T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
             "the cwd carries after %r" % how)
        T.eq(sh(c, sid, "cd .."), ("", "ok"), "back up")
    c.ok("closeSession", sessionId=sid)
    for env, command in (({"BASH_ENV": os.path.join(root, "go.sh")}, "true"),
                         ({"BASH_FUNC_go%%": "() { cd sub; }"}, "go")):
        sid = c.ok("createSession", cwd=root, env=env)["sessionId"]
        T.eq(sh(c, sid, command), ("", "ok"), "%s with %r" % (command, env))
        T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
             "the cwd carries after %s with %r" % (command, env))
        c.ok("closeSession", sessionId=sid)
    c.close()


def keep_cwd_false(d):
    c = Conn(d.sock)
    root = root_of("nokeep")
    sid = c.ok("createSession", cwd=root,
               shell={"keepCwd": False})["sessionId"]
    T.eq(sh(c, sid, "cd sub"), ("", "ok"), "cd sub (keepCwd false)")
    T.eq(sh(c, sid, "pwd"), (root + "\n", "ok"),
         "keepCwd false: each call starts in the session's cwd")
    T.eq(sh(c, sid, "cd /"), ("", "ok"), "keepCwd false: no reset note")
    c.ok("closeSession", sessionId=sid)
    c.close()


def sandboxed(d):
    """Both sandboxed profiles keep the cwd; a profile this kernel cannot
    enforce is refused, and the result says so."""
    c = Conn(d.sock)
    profiles = c.ok("initialize")["capabilities"]["enforcement"][
        "sandbox"]["profiles"]
    for mode in ("read-only", "workspace-write"):
        root = root_of("sb-" + mode)
        extra = os.path.join(AREA, "extra-" + mode)
        os.mkdir(extra)
        sandbox = {"mode": mode}
        # A read-only tool writes nothing: it has no writable roots.
        if mode == "workspace-write":
            sandbox["writableRoots"] = [extra]
        sid = c.ok("createSession", cwd=root,
                   sandbox=sandbox)["sessionId"]
        if mode not in profiles:
            content, reason = sh(c, sid, "cd sub")
            T.eq(reason, "spawn_failed", "%s is not available: "
                 "refused" % mode)
            T.check(mode in content, "...saying why: %r" % content)
            c.ok("closeSession", sessionId=sid)
            continue
        T.eq(sh(c, sid, "cd sub"), ("", "ok"), "%s: cd sub" % mode)
        T.eq(sh(c, sid, "pwd"), (root + "/sub\n", "ok"),
             "%s: the cwd carried over" % mode)
        if mode == "workspace-write":
            T.eq(sh(c, sid, "cd %s" % extra), ("", "ok"),
                 "%s: cd to a writable root" % mode)
            T.eq(sh(c, sid, "pwd"), (extra + "\n", "ok"),
                 "%s: a writable root is allowed" % mode)
        else:
            T.eq(sh(c, sid, "cd %s" % extra),
                 ("Shell cwd was reset to %s" % root, "ok"),
                 "%s: no writable roots: another dir goes back" % mode)
        T.eq(sh(c, sid, "cd /"), ("Shell cwd was reset to %s" % root,
                                  "ok"), "%s: cd / goes back" % mode)
        c.ok("closeSession", sessionId=sid)
    c.close()


def env_file(d):
    c = Conn(d.sock)
    root = root_of("envfile")
    own = os.path.join(AREA, "own.env")
    with open(own, "w") as f:
        f.write("export FROM_FILE=first\n")
    sid = c.ok("createSession", cwd=root, env={"FROM_SESSION": "s"},
               shell={"envFile": own})["sessionId"]
    T.eq(sh(c, sid, "echo $FROM_FILE $FROM_SESSION ${FROM_DAEMON-none}"),
         ("first s none\n", "ok"), "the session's env file is sourced")
    with open(own, "w") as f:
        f.write("export FROM_FILE=second FROM_SESSION=over\n")
    T.eq(sh(c, sid, "echo $FROM_FILE $FROM_SESSION"), ("second over\n", "ok"),
         "sourced again before each call, on top of the session's env")
    T.eq(sh(c, sid, "export GONE=1"), ("", "ok"), "an export")
    T.eq(sh(c, sid, "echo ${GONE-unset}"), ("unset\n", "ok"),
         "without keepEnv an export does not carry over")
    c.ok("closeSession", sessionId=sid)
    # What the file sets for bash's parser holds on the command's first
    # line; a path that needs quoting for the shell is sourced too.
    odd = os.path.join(AREA, "it's \"odd\" $HOME.env")
    with open(odd, "w") as f:
        f.write("shopt -s extglob\nexport FROM_ODD=yes\n")
    sid = c.ok("createSession", cwd=root, shell={"envFile": odd})["sessionId"]
    T.eq(sh(c, sid, "case ab in @(ab|cd)) echo $FROM_ODD;; esac"),
         ("yes\n", "ok"), "extglob from the env file, on the first line")
    T.eq(sh(c, sid, "echo $LINENO\necho $LINENO"), ("2\n3\n", "ok"),
         "with an env file the command starts on the script's line 2")
    c.ok("closeSession", sessionId=sid)
    # The daemon's --shell-env-file, for sessions that name none.
    sid = c.ok("createSession", cwd=root)["sessionId"]
    T.eq(sh(c, sid, "echo ${FROM_DAEMON-none}"), ("daemon\n", "ok"),
         "the daemon's env file is sourced")
    c.ok("closeSession", sessionId=sid)
    c.close()


def keep_env(d):
    c = Conn(d.sock)
    root = root_of("keepenv")
    sid = c.ok("createSession", cwd=root, env={"DROP_ME": "x"},
               shell={"keepEnv": True})["sessionId"]
    T.eq(sh(c, sid, "export KEEP='a \"b\" c\\d\n\te'; unset DROP_ME; "
                    "PLAIN=1; cd sub"), ("", "ok"), "export, unset, cd")
    T.eq(sh(c, sid, "printf '%s|' \"$KEEP\" \"${DROP_ME-unset}\" "
                    "\"${PLAIN-unset}\" \"$PWD\""),
         ("a \"b\" c\\d\n\te|unset|unset|%s/sub|" % root, "ok"),
         "keepEnv carries an export and an unset, not a shell variable")
    (content, meta), = turn(c, sid, ("grep", {"pattern": "x",
                                              "path": "."}))
    T.eq(meta["reason"], "ok", "another tool after keepEnv")
    c.ok("closeSession", sessionId=sid)
    c.close()


def reload_keeps(d):
    """A reload (SIGHUP) keeps the cwd and carried env of a session."""
    c = Conn(d.sock)
    root = root_of("reload")
    sid = c.ok("createSession", cwd=root,
               shell={"keepEnv": True})["sessionId"]
    T.eq(sh(c, sid, "cd sub; export KEPT=yes"), ("", "ok"), "before reload")
    before = c.ok("initialize")["server"].get("instance")
    d.proc.send_signal(signal.SIGHUP)
    # The event is the new image; the guard only stops a hang.
    guard = time.monotonic() + pydaemon.scaled(120)
    while c.ok("initialize")["server"].get("instance") == before:
        if time.monotonic() > guard:
            raise AssertionError("no new image")
        time.sleep(0.05)
    T.eq(sh(c, sid, "pwd; echo $KEPT"), (root + "/sub\nyes\n", "ok"),
         "the cwd and env survive a reload")
    T.eq(sh(c, sid, "cd /"), ("Shell cwd was reset to %s" % root, "ok"),
         "the session's root survives a reload")
    c.ok("closeSession", sessionId=sid)
    c.close()


def bad_params(d):
    c = Conn(d.sock)
    for shell, field in ((5, "shell"), ({"keepCwd": "yes"}, "shell.keepCwd"),
                         ({"keepEnv": 1}, "shell.keepEnv"),
                         ({"envFile": 3}, "shell.envFile"),
                         ({"envFile": "rel.env"}, "shell.envFile"),
                         ({"keepcwd": True}, "shell"),
                         ({"é" * 300: True}, "shell")):
        e = c.call("createSession", shell=shell)
        err = e.get("error", {})
        T.eq((err.get("code"), err.get("data")), (-32602, {"field": field}),
             "createSession shell=%.40r" % (shell,))
        T.check(err.get("message", "").startswith(
            "Invalid params: %s: " % field), "message: %.80r"
            % err.get("message"))
    c.close()


def plain_body(d):
    """A daemon without an env file: the wrapper is on the command's own
    first line, so line numbers are plain bash's."""
    guard = time.monotonic() + pydaemon.scaled(120)
    while not os.path.exists(d.sock) and time.monotonic() < guard:
        time.sleep(0.05)
    keeps_cwd(d, "-plain")
    odd_cwd(d, "-plain")
    hidden_moves(d)
    c = Conn(d.sock)
    sid = c.ok("createSession", cwd=root_of("lines"))["sessionId"]
    T.eq(sh(c, sid, "echo $LINENO\necho $LINENO $#"),
         ("1\n2 0\n", "ok"), "line numbers and $# as bash -c gives them")
    c.ok("closeSession", sessionId=sid)
    c.close()


def body(d):
    guard = time.monotonic() + pydaemon.scaled(120)
    while not os.path.exists(d.sock) and time.monotonic() < guard:
        time.sleep(0.05)
    keeps_cwd(d)
    odd_cwd(d)
    removed_cwd(d)
    keep_cwd_false(d)
    sandboxed(d)
    env_file(d)
    keep_env(d)
    bad_params(d)
    reload_keeps(d)


if __name__ == "__main__":
    os.mkdir(ALLOWED)
    with open(ENV_FILE, "w") as f:
        f.write("export FROM_DAEMON=daemon\n")
    try:
        rc = pydaemon.run(T, plain_body, ["--shell-allow-dir", ALLOWED])
        if rc == 0:
            rc = pydaemon.run(T, body, ["--shell-allow-dir", ALLOWED,
                                        "--shell-env-file", ENV_FILE])
    finally:
        shutil.rmtree(AREA, ignore_errors=True)
    sys.exit(rc)
