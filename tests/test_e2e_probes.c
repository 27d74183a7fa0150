/*
 * doc/design.md §7, Sandbox, end to end: escapes. A tool under the
 * "read-only" or "workspace-write" profile tries, by every route we know,
 * to change something outside its writable areas, to signal or trace a
 * process that is not its own, to reach the network or the daemon's own
 * socket (and through stexec-cli, have an unconfined tool do what it may
 * not), to use System V IPC, keyrings, namespaces or mounts. Each probe is
 * run three times: under "none" (the control: the probe must see its
 * effect there, or it proves nothing), then under each profile, where the
 * effect must not happen and the tool must end by a normal exit (a
 * readable error, never a kill).
 *
 * Where initialize says a profile cannot be enforced here, a tool asking
 * for it must be refused (spawn_failed) and that profile's probes skip.
 * Run in both supervision modes (meson registers this suite twice).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "e2e.h"

/* Waits that only a broken daemon runs out of, even on a loaded machine. */
#define SLOW 30000

#define ERR_INVALID_PARAMS -32602

/* The modes, as bits: a probe's effect is expected under those in ok. */
#define NONE 1u
#define RO 2u
#define WW 4u
#define ALL (NONE | RO | WW)

static void	esc_fini(void);

TestSuite(escape_none, .fini = esc_fini);
TestSuite(escape_read_only, .fini = esc_fini);
TestSuite(escape_workspace_write, .fini = esc_fini);
TestSuite(escape_config, .fini = esc_fini);

/* One test's world: a daemon, a session with one sh tool "p". */
struct esc {
	struct daemon *d;
	struct client *c;
	json_t *sid;
	const char *mode;   /* "none", "read-only", "workspace-write" */
	unsigned bit;       /* NONE, RO or WW */
	pid_t dpid;         /* the daemon's pid, as stats tells it */
	char ws[64];        /* the session's cwd, a fresh directory */
	char out[64];       /* outside every writable area: targets, scripts */
	char paths[8][512]; /* esc_path's answers, in turn */
	unsigned next;
	char py[256];       /* a python3 that needs no $HOME */
	char saved[4096];   /* a probe's "before" */
};

static void	esc_control_needs(struct esc *, int, const char *);

/* This test's directories (a test is a process of its own), for esc_fini. */
static char esc_dirs[160];

struct probe {
	void (*prepare)(struct esc *);  /* before the session, or NULL */
	void (*run)(struct esc *);
};

/*
 * Python helpers, written into the outside directory (readable by every
 * profile) so that scripts need no nested quoting. An uncaught exception
 * prints e.g. "PermissionError: [Errno 1] Operation not permitted" and
 * exits 1: a readable error and a normal exit.
 */
static const char net_py[] =
    "import socket, sys\n"
    "kind, addr = sys.argv[1], sys.argv[2]\n"
    "if kind == 'tcp':\n"
    "    s = socket.create_connection(('127.0.0.1', int(addr)), 2)\n"
    "    print('connected')\n"
    "elif kind == 'udp':\n"
    "    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
    "    s.sendto(b'x', ('127.0.0.1', int(addr)))\n"
    "    print('sent')\n"
    "else:\n"
    "    # unix PATH, or unix @NAME for an abstract socket; rpc: ping it\n"
    "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "    s.settimeout(3)\n"
    "    s.connect('\\0' + addr[1:] if addr.startswith('@') else addr)\n"
    "    print('connected')\n"
    "    if kind == 'rpc':\n"
    "        s.sendall(b'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\\n')\n"
    "        reply = s.recv(65536)\n"
    "        print('answered' if b'\"result\"' in reply else 'no answer')\n";

static const char sys_py[] =
    "import ctypes, os, platform, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "what = sys.argv[1]\n"
    "if what == 'shm':\n"
    "    r = libc.shmget(0, 1024, 0o600)\n"
    "    if r >= 0:\n"
    "        libc.shmctl(r, 0, None)\n"
    "elif what == 'keyctl':\n"
    "    nr = {'x86_64': 250, 'aarch64': 219, 'riscv64': 219,\n"
    "          'i686': 288, 'armv7l': 311, 'ppc64le': 271,\n"
    "          's390x': 280}[platform.machine()]\n"
    "    r = libc.syscall(nr, 1, None)  # KEYCTL_JOIN_SESSION_KEYRING\n"
    "elif what == 'setxattr':\n"
    "    os.setxattr(sys.argv[2], 'user.stexec', b'1')\n"
    "    r = 0\n"
    "elif what == 'mem':\n"
    "    with open('/proc/%s/maps' % sys.argv[2]) as f:\n"
    "        start = int(f.readline().split('-')[0], 16)\n"
    "    with open('/proc/%s/mem' % sys.argv[2], 'rb', 0) as f:\n"
    "        f.seek(start)\n"
    "        r = len(f.read(16))\n"
    "elif what == 'environ':\n"
    "    with open('/proc/%s/environ' % sys.argv[2], 'rb') as f:\n"
    "        r = len(f.read())\n"
    "if r < 0:\n"
    "    e = ctypes.get_errno()\n"
    "    print(what, 'failed:', os.strerror(e))\n"
    "    sys.exit(1)\n"
    "print(what, 'worked', r)\n";

static bool
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static bool
have(const char *cmd)
{
	char line[256];

	snprintf(line, sizeof line, "command -v %s >/dev/null 2>&1", cmd);
	return system(line) == 0;
}

/* A path in the outside directory (valid for the next 7 calls). */
static const char *
esc_path(struct esc *e, const char *name)
{
	char *p = e->paths[e->next++ % 8];

	snprintf(p, sizeof e->paths[0], "%s/%s", e->out, name);
	return p;
}

static void
write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "we");

	cr_assert(f != NULL, "%s: %s", path, strerror(errno));
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(path, mode), 0);
}

/* A file's text, "" when absent, into buf. */
static const char *
read_text(const char *path, char *buf, size_t len)
{
	size_t n;
	char *text = e2e_read_file(path, &n);

	snprintf(buf, len, "%s", text != NULL ? text : "");
	free(text);
	return buf;
}

/* Run a shell line in the test (not the daemon); its exit status. */
static int
sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int
sh(const char *fmt, ...)
{
	char line[2048];
	va_list ap;
	int st;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	st = system(line);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* An integer a shell line prints (e.g. git rev-list --count), or -1. */
static long
sh_number(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static long
sh_number(const char *fmt, ...)
{
	char line[2048];
	long n = -1;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if ((p = popen(line, "re")) == NULL)
		return -1;
	if (fscanf(p, "%ld", &n) != 1)
		n = -1;
	pclose(p);
	return n;
}

/* The sandbox value of the probing tool under e's mode. */
static json_t *
esc_sandbox(struct esc *e)
{
	if (e->bit != WW)
		return json_string(e->mode);
	return json_pack("{s:s, s:[s]}", "mode", "workspace-write",
	    "writableRoots", esc_path(e, "root"));
}

static json_t *
sh_tool(const char *name, json_t *sandbox)
{
	json_t *t = e2e_json("{\"command\":[\"/bin/sh\",\"-c\",\"{script}\"],"
	    "\"inputSchema\":{\"type\":\"object\"},\"concurrencySafe\":false}");

	json_object_set_new(t, "name", json_string(name));
	if (sandbox != NULL)
		json_object_set_new(t, "sandbox", sandbox);
	return t;
}

/* initialize's capabilities.enforcement.sandbox (new reference). */
static json_t *
sandbox_caps(struct client *c)
{
	json_t *caps = c_call(c, "initialize", json_object()), *sb;

	sb = json_object_get(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "sandbox");
	json_incref(sb);
	json_decref(caps);
	cr_assert(json_is_object(sb), "initialize: no "
	    "capabilities.enforcement.sandbox object");
	return sb;
}

static bool
enforceable(json_t *sb, const char *mode)
{
	json_t *profiles = json_object_get(sb, "profiles"), *p;
	size_t i;

	cr_assert(json_is_array(profiles), "initialize: "
	    "capabilities.enforcement.sandbox.profiles is not an array (the "
	    "daemon predates the sandbox profiles)");
	json_array_foreach(profiles, i, p)
		if (json_is_string(p) && strcmp(json_string_value(p), mode) == 0)
			return true;
	return false;
}

/* Add one tool "p" and drain; the result comes with esc_result. */
static void
esc_submit(struct esc *e, const char *tool, const char *script)
{
	json_t *input = json_pack("{s:s}", "script", script);
	char *text = json_dumps(input, JSON_COMPACT);

	json_decref(c_add(e->c, json_string_value(e->sid), "t", tool, text));
	free(text);
	json_decref(input);
	json_decref(c_call(e->c, "drain", json_pack("{s:O}", "sessionId",
	    e->sid)));
}

static json_t *
esc_result(struct esc *e)
{
	json_t *list = c_until_only(e->c, "turn_end", "tool_result", SLOW), *r;

	cr_assert_eq(json_array_size(list), 1);
	r = json_incref(json_array_get(list, 0));
	json_decref(list);
	return r;
}

/* Run a script in tool "p": its tool_result params (new reference). */
static json_t *
esc_run(struct esc *e, const char *fmt, ...) __attribute__((format(printf,
    2, 3)));

static json_t *
esc_run(struct esc *e, const char *fmt, ...)
{
	char script[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(script, sizeof script, fmt, ap);
	va_end(ap);
	esc_submit(e, "p", script);
	return esc_result(e);
}

/*
 * The verdict on one probe. Under a mode in ok, the effect must have
 * happened and the tool succeeded. Otherwise nothing happened, and the
 * tool failed by a normal exit: a refused call is an error it can read,
 * not a kill; with eperm, that error must say EPERM or EACCES.
 */
static void
verdict_ex(struct esc *e, json_t *r, bool happened, unsigned ok,
    const char *what, bool eperm)
{
	const char *out = e2e_content(r), *reason = e2e_reason(r);

	if (out == NULL)
		out = "";
	if (reason == NULL)
		reason = "(none)";
	if ((e->bit & ok) != 0) {
		cr_assert(!e2e_is_error(r), "%s under %s failed (%s): %s", what,
		    e->mode, reason, out);
		cr_assert(happened, "%s under %s: the probe did not see its "
		    "effect, so it proves nothing: %s", what, e->mode, out);
	} else {
		cr_assert(!happened, "ESCAPE: %s under %s worked: %s", what,
		    e->mode, out);
		cr_assert(e2e_is_error(r), "%s under %s: the tool succeeded "
		    "although its effect did not happen: %s", what, e->mode, out);
		cr_assert_str_eq(reason, "exit", "%s under %s ended by %s, not "
		    "an exit: %s", what, e->mode, reason, out);
		if (eperm)
			cr_assert(strcasestr(out, "not permitted") != NULL ||
			    strcasestr(out, "permission denied") != NULL ||
			    strstr(out, "PermissionError") != NULL, "%s under "
			    "%s: refused, but with no readable EPERM/EACCES: %s",
			    what, e->mode, out);
	}
	json_decref(r);
}

static void
verdict(struct esc *e, json_t *r, bool happened, unsigned ok,
    const char *what)
{
	verdict_ex(e, r, happened, ok, what, false);
}

/*
 * Start a daemon and a session whose tool "p" asks for mode; when the
 * profile cannot be enforced here, check that the tool is refused
 * (spawn_failed) and skip.
 */
static void
esc_start(struct esc *e, const char *mode, const struct probe *p)
{
	json_t *sb, *st, *params, *r;
	const char *why;
	char reason[256];

	memset(e, 0, sizeof *e);
	e->mode = mode;
	e->bit = strcmp(mode, "none") == 0 ? NONE : strcmp(mode, "read-only") ==
	    0 ? RO : WW;
	snprintf(e->ws, sizeof e->ws, "/tmp/stexec-esc-ws-XXXXXX");
	snprintf(e->out, sizeof e->out, "/tmp/stexec-esc-out-XXXXXX");
	cr_assert(mkdtemp(e->ws) != NULL && mkdtemp(e->out) != NULL);
	snprintf(esc_dirs, sizeof esc_dirs, "'%s' '%s'", e->ws, e->out);
	/* Others must reach it: a profile may run the tool as another uid. */
	cr_assert_eq(chmod(e->out, 0755), 0);
	cr_assert_eq(mkdir(esc_path(e, "home"), 0755), 0);
	cr_assert_eq(mkdir(esc_path(e, "root"), 0755), 0);
	cr_assert_eq(mkdir(esc_path(e, "sibling"), 0755), 0);
	write_file(esc_path(e, "net.py"), net_py, 0644);
	write_file(esc_path(e, "sys.py"), sys_py, 0644);
	/* Not a pyenv shim, which wants the real $HOME. */
	snprintf(e->py, sizeof e->py, "%s", access("/usr/bin/python3", X_OK) ==
	    0 ? "/usr/bin/python3" : "python3");
	if (p != NULL && p->prepare != NULL)
		p->prepare(e);

	e->d = d_start(NULL);
	e->c = c_open(e->d);
	st = c_call(e->c, "stats", NULL);
	e->dpid = (pid_t)e2e_int(st, "pid");
	json_decref(st);
	cr_assert_eq(e->dpid, e->d->pid, "stats.pid is not the daemon's pid");

	params = json_pack("{s:s, s:{s:s}, s:[o]}", "cwd", e->ws, "env",
	    "HOME", esc_path(e, "home"), "tools", sh_tool("p",
	    esc_sandbox(e)));
	if (e->bit == NONE) {
		e->sid = c_session(e->c, params);
		return;
	}
	sb = sandbox_caps(e->c);
	if (enforceable(sb, mode)) {
		json_decref(sb);
		e->sid = c_session(e->c, params);
		return;
	}
	why = e2e_str(sb, "why");
	if (json_array_size(json_object_get(sb, "profiles")) == 0)
		cr_assert(why != NULL && why[0] != '\0', "no profiles, and "
		    "initialize does not say why");
	e->sid = c_session(e->c, params);
	r = esc_run(e, "echo ran > %s", esc_path(e, "ran"));
	cr_assert_str_eq(e2e_reason(r), "spawn_failed", "%s is not enforceable "
	    "here, yet the tool was not refused: %s", mode, e2e_content(r));
	cr_assert(!exists(esc_path(e, "ran")), "ran unconfined");
	json_decref(r);
	/* The reason outlives sb, which holds it. */
	snprintf(reason, sizeof reason, "%s", why != NULL ? why : "?");
	json_decref(sb);
	json_decref(e->sid);
	c_close(e->c);
	d_stop(e->d);
	sh("rm -rf '%s' '%s'", e->ws, e->out);
	cr_skip_test("the %s profile cannot be enforced here (%s): refused, "
	    "as it must be; probes skipped", mode, reason);
}

/*
 * After a failed assertion too: stop the daemons (e2e_fini), then remove
 * this test's directories (what the tool said is in the failure message).
 */
static void
esc_fini(void)
{
	e2e_fini();
	if (esc_dirs[0] != '\0')
		sh("rm -rf %s", esc_dirs);
	esc_dirs[0] = '\0';
}

static void
esc_finish(struct esc *e)
{
	cr_assert(d_wait_no_leftovers(e->d, 5000), "a tool process is left");
	c_ping(e->c);
	json_decref(e->sid);
	c_close(e->c);
	d_stop(e->d);
	/* The control may have left root-owned odds: git, links. */
	sh("rm -rf '%s' '%s'", e->ws, e->out);
}

/*
 * The control under "none" needs a capability the tool inherits from us
 * (a container's root lacks some): without it the control proves nothing,
 * so it skips, saying why; the profiles' runs still check the refusal.
 */
static void
esc_control_needs(struct esc *e, int cap, const char *why)
{
	if (e->bit != NONE || e2e_has_cap(cap))
		return;
	esc_finish(e);
	cr_skip_test("%s: an unconfined tool here cannot either", why);
}

static void
esc_probe(const struct probe *p, const char *mode)
{
	struct esc e;

	esc_start(&e, mode, p);
	p->run(&e);
	esc_finish(&e);
}

/* Each probe, as a test in each suite. */
#define PROBE(name, prep) \
	static void probe_##name(struct esc *); \
	static const struct probe name##_probe = { prep, probe_##name }; \
	Test(escape_none, name) { esc_probe(&name##_probe, "none"); } \
	Test(escape_read_only, name) \
	{ esc_probe(&name##_probe, "read-only"); } \
	Test(escape_workspace_write, name) \
	{ esc_probe(&name##_probe, "workspace-write"); } \
	static void probe_##name(struct esc *e)

/* ------------------------------------------------------------------ */
/* 1. Metadata of a file outside the writable areas. */

/* The target: 0644, an old mtime, known text. */
static const char *
target(struct esc *e)
{
	const char *t = esc_path(e, "target");

	if (!exists(t)) {
		write_file(t, "original\n", 0644);
		cr_assert_eq(sh("touch -d '2000-01-01 00:00:00' '%s'", t), 0);
	}
	return t;
}

static struct stat
stat_of(const char *path)
{
	struct stat st;

	cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
	return st;
}

PROBE(chmod_outside, NULL)
{
	const char *t = target(e);
	struct stat before = stat_of(t), after;
	json_t *r = esc_run(e, "chmod 600 %s", t);

	after = stat_of(t);
	verdict(e, r, after.st_mode != before.st_mode, NONE, "chmod");
}

PROBE(touch_timestamps_outside, NULL)
{
	const char *t = target(e);
	struct stat before = stat_of(t), after;
	json_t *r = esc_run(e, "touch -d '2011-11-11 11:11:11' %s", t);

	after = stat_of(t);
	verdict(e, r, after.st_mtim.tv_sec != before.st_mtim.tv_sec, NONE,
	    "touch -d");
}

PROBE(setxattr_outside, NULL)
{
	const char *t;
	char v[8];
	json_t *r;

	/* The test's own filesystem must take user.* attributes at all. */
	if (setxattr(esc_path(e, "home"), "user.probe", "1", 1, 0) != 0) {
		int err = errno;

		esc_finish(e);
		cr_skip_test("no user xattrs on /tmp here: %s", strerror(err));
	}
	t = target(e);
	r = esc_run(e, "%s %s setxattr %s", e->py, esc_path(e, "sys.py"), t);
	verdict(e, r, getxattr(t, "user.stexec", v, sizeof v) > 0, NONE,
	    "setxattr");
}

PROBE(hard_link_beside_outside, NULL)
{
	const char *t = target(e);
	char link[600];
	json_t *r;

	snprintf(link, sizeof link, "%s.link", t);
	r = esc_run(e, "ln %s %s", t, link);
	verdict(e, r, exists(link), NONE, "ln beside the target");
}

/*
 * A hard link from the outside file into a writable area, then a write
 * through it, would change the outside file.
 */
PROBE(hard_link_into_writable_area, NULL)
{
	const char *t = target(e);
	char text[64];
	json_t *r;

	r = esc_run(e, "l=\"${TMPDIR:-/tmp}/esc-link-$$\"; ln %s \"$l\" && "
	    "echo changed >> \"$l\"; rc=$?; rm -f \"$l\"; exit $rc", t);
	read_text(t, text, sizeof text);
	verdict(e, r, strcmp(text, "original\n") != 0, NONE,
	    "ln into $TMPDIR and write through it");
	cr_assert_eq(stat_of(t).st_nlink, 1);
}

/* ------------------------------------------------------------------ */
/* 2. Signals and ptrace to processes that are not the tool's. */

/* A sleep 1000 of the test's own; dies with the test. */
static pid_t
spawn_sleep(void)
{
	char path[64], comm[32];
	pid_t pid = fork();
	int i;

	cr_assert(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		execlp("sleep", "sleep", "1000", (char *)NULL);
		_exit(127);
	}
	snprintf(path, sizeof path, "/proc/%ld/comm", (long)pid);
	for (i = 0; i < e2e_ms(2000); i++) {
		read_text(path, comm, sizeof comm);
		if (strcmp(comm, "sleep\n") == 0)
			break;
		usleep(1000);
	}
	return pid;
}

/* /proc/PID/stat's state letter; 0 when there is no such process. */
static char
proc_state(pid_t pid)
{
	char path[64], text[512], *p;

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	read_text(path, text, sizeof text);
	if ((p = strrchr(text, ')')) == NULL || p[1] != ' ')
		return 0;
	return p[2];
}

static void
signal_probe(struct esc *e, const char *sig)
{
	pid_t pid = spawn_sleep();
	json_t *r;
	char state = 0;
	int i;

	r = esc_run(e, "kill -%s %ld", sig, (long)pid);
	/* Give the signal its moment to land (R while it does), scaled. */
	for (i = 0; i < e2e_ms(300); i++) {
		state = proc_state(pid);
		if (state == 'T' || state == 't' || state == 'Z' || state == 0)
			break;
		usleep(1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	verdict(e, r, state == 'T' || state == 't' || state == 'Z' ||
	    state == 0, NONE, sig);
}

PROBE(kill_stop_a_process_of_the_test, NULL)
{
	signal_probe(e, "STOP");
}

PROBE(kill_term_a_process_of_the_test, NULL)
{
	signal_probe(e, "TERM");
}

/*
 * kill -STOP the daemon. Under none it stops (and the test wakes it); under
 * a profile it never stops and answers a ping at once.
 */
PROBE(kill_stop_the_daemon, NULL)
{
	long long until, t0;
	bool stopped = false, ended = false;
	int replies = 0;
	json_t *msg, *req, *r;
	char cmd[64], *text;

	/*
	 * The tool may run before the daemon answers addTool or drain: send
	 * both raw, and read everything while watching the daemon's state.
	 */
	snprintf(cmd, sizeof cmd, "kill -STOP %ld", (long)e->dpid);
	req = json_pack("{s:s, s:i, s:s, s:{s:O, s:{s:s, s:s, s:{s:s}}}}",
	    "jsonrpc", "2.0", "id", 9001, "method", "addTool", "params",
	    "sessionId", e->sid, "toolUse", "id", "t", "name", "p", "input",
	    "script", cmd);
	text = json_dumps(req, JSON_COMPACT);
	c_send_raw(e->c, text);
	free(text);
	json_decref(req);
	req = json_pack("{s:s, s:i, s:s, s:{s:O}}", "jsonrpc", "2.0", "id",
	    9002, "method", "drain", "params", "sessionId", e->sid);
	text = json_dumps(req, JSON_COMPACT);
	c_send_raw(e->c, text);
	free(text);
	json_decref(req);
	until = e2e_now_ms() + e2e_ms(SLOW);
	while ((!ended || replies < 2) && e2e_now_ms() < until) {
		if (proc_state(e->dpid) == 'T') {
			stopped = true;
			kill(e->dpid, SIGCONT);
		}
		if ((msg = c_read(e->c, 20)) == NULL)
			continue;
		if (json_object_get(msg, "error") != NULL)
			cr_assert_fail("%s", e2e_str(json_object_get(msg,
			    "error"), "message"));
		if (e2e_str(msg, "method") == NULL) {
			json_decref(msg);   /* a response */
			replies++;
			continue;
		}
		ended = ended || strcmp(e2e_str(msg, "method"), "turn_end") ==
		    0;
		json_array_append_new(e->c->queue, msg);
	}
	cr_assert(ended && replies == 2, "no turn_end, or no replies");
	if (proc_state(e->dpid) == 'T') {
		stopped = true;
		kill(e->dpid, SIGCONT);
	}
	r = esc_result(e);
	t0 = e2e_now_ms();
	c_ping(e->c);
	cr_assert_lt(e2e_now_ms() - t0, e2e_ms(2000), "the ping took %lld ms",
	    e2e_now_ms() - t0);
	verdict(e, r, stopped, NONE, "kill -STOP the daemon");
}

PROBE(read_the_daemons_memory, NULL)
{
	json_t *r;

	esc_control_needs(e, CAP_SYS_PTRACE, "a non-dumpable daemon's memory "
	    "needs CAP_SYS_PTRACE");
	r = esc_run(e, "%s %s mem %ld", e->py, esc_path(e, "sys.py"),
	    (long)e->dpid);
	const char *out = e2e_content(r);

	verdict(e, r, out != NULL && strstr(out, "mem worked 16") != NULL,
	    NONE, "read /proc/<daemon>/mem");
}

PROBE(read_the_daemons_environ, NULL)
{
	const char *out;
	json_t *r;

	esc_control_needs(e, CAP_SYS_PTRACE, "a non-dumpable daemon's environ "
	    "needs CAP_SYS_PTRACE");
	r = esc_run(e, "%s %s environ %ld", e->py, esc_path(e, "sys.py"),
	    (long)e->dpid);
	out = e2e_content(r);

	verdict(e, r, out != NULL && strstr(out, "environ worked") != NULL &&
	    strstr(out, "environ worked 0") == NULL, NONE,
	    "read /proc/<daemon>/environ");
}

/* ------------------------------------------------------------------ */
/* 3. The network, and Unix sockets not the tool's own. */

static int
inet_socket(int type, int *port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	socklen_t len = sizeof sin;
	int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof sin), 0);
	if (type == SOCK_STREAM)
		cr_assert_eq(listen(fd, 8), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* Did a connection (a listener) or a datagram come within ms, scaled? */
static bool
came(int fd, bool listener, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[64];
	int a;

	if (poll(&p, 1, e2e_ms(ms)) <= 0)
		return false;
	if (listener) {
		if ((a = accept(fd, NULL, NULL)) >= 0)
			close(a);
	} else if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) < 0)
		return false;
	return true;
}

static void
tcp_probe(struct esc *e, const char *tool, unsigned ok, bool via_setsid)
{
	int port, fd = inet_socket(SOCK_STREAM, &port);
	char script[1024];
	json_t *r;

	snprintf(script, sizeof script, "%s%s %s tcp %d", via_setsid ?
	    "setsid -w " : "", e->py, esc_path(e, "net.py"), port);
	esc_submit(e, tool, script);
	r = esc_result(e);
	verdict_ex(e, r, came(fd, true, 500), ok, "TCP to 127.0.0.1", true);
	close(fd);
}

PROBE(tcp_to_loopback, NULL)
{
	tcp_probe(e, "p", NONE, false);
}

PROBE(udp_to_loopback, NULL)
{
	int port, fd = inet_socket(SOCK_DGRAM, &port);
	json_t *r = esc_run(e, "%s %s udp %d", e->py, esc_path(e, "net.py"),
	    port);

	verdict_ex(e, r, came(fd, false, 500), NONE, "UDP to 127.0.0.1",
	    true);
	close(fd);
}

PROBE(abstract_unix_socket, NULL)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	char name[64];
	socklen_t len;
	json_t *r;

	snprintf(name, sizeof name, "stexec-test-%ld-%lld", (long)getpid(),
	    e2e_now_ms());
	memcpy(sun.sun_path + 1, name, strlen(name));
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(name));
	cr_assert_eq(bind(fd, (struct sockaddr *)&sun, len), 0, "%s",
	    strerror(errno));
	cr_assert_eq(listen(fd, 8), 0);
	r = esc_run(e, "%s %s unix @%s", e->py, esc_path(e, "net.py"), name);
	verdict(e, r, came(fd, true, 500), NONE, "connect to an abstract "
	    "Unix socket");
	close(fd);
}

/* Connect to the daemon's socket at path (a shell word) and ping it. */
static void
daemon_socket_probe(struct esc *e, const char *path, const char *what)
{
	json_t *r = esc_run(e, "%s %s rpc %s", e->py, esc_path(e, "net.py"),
	    path);
	const char *out = e2e_content(r);

	verdict(e, r, out != NULL && strstr(out, "answered") != NULL, NONE,
	    what);
}

PROBE(daemon_socket_by_its_path, NULL)
{
	daemon_socket_probe(e, e->d->sock, "the daemon's socket");
}

PROBE(daemon_socket_through_proc_root, NULL)
{
	char path[256];

	esc_control_needs(e, CAP_SYS_PTRACE, "a non-dumpable daemon's "
	    "/proc/PID/root needs CAP_SYS_PTRACE");
	snprintf(path, sizeof path, "/proc/%ld/root%s", (long)e->dpid,
	    e->d->sock);
	daemon_socket_probe(e, path, "the daemon's socket via /proc/PID/root");
}

PROBE(daemon_socket_through_a_symlink, NULL)
{
	char script[1024];
	json_t *r;
	const char *out;

	snprintf(script, sizeof script, "l=\"${TMPDIR:-/tmp}/esc-sock-$$\"; "
	    "ln -s %s \"$l\" && %s %s rpc \"$l\"; rc=$?; rm -f \"$l\"; "
	    "exit $rc", e->d->sock, e->py, esc_path(e, "net.py"));
	r = esc_run(e, "%s", script);
	out = e2e_content(r);
	verdict(e, r, out != NULL && strstr(out, "answered") != NULL, NONE,
	    "the daemon's socket via a symlink in $TMPDIR");
}

/*
 * Another daemon where a client would look for one (its socket at
 * $XDG_RUNTIME_DIR/stexec or /run/stexec): out of reach too. One of the
 * test's own, so that the probe never depends on, nor talks to, a daemon
 * the machine happens to run.
 */
PROBE(another_daemons_socket, NULL)
{
	struct daemon *other = d_start(NULL);
	char script[2048];
	json_t *r;
	const char *out;

	snprintf(script, sizeof script, "%s %s rpc '%s'", e->py,
	    esc_path(e, "net.py"), other->sock);
	r = esc_run(e, "%s", script);
	out = e2e_content(r);
	verdict(e, r, out != NULL && strstr(out, "answered") != NULL, NONE,
	    "another daemon's socket");
	d_stop(other);
}

/* ------------------------------------------------------------------ */
/* 4. The key one: stexec-cli from inside, to run an unconfined tool. */

static void
cli_probe(struct esc *e, const char *route)
{
	const char *cli = getenv("STEXEC_CLI");
	char marker[256], script[2048], sock[256];
	json_t *r;

	cr_assert(cli != NULL, "STEXEC_CLI is not set (tests/meson.build)");
	snprintf(marker, sizeof marker, "%s", esc_path(e, "MARKER"));
	if (strcmp(route, "proc") == 0)
		snprintf(sock, sizeof sock, "/proc/%ld/root%s", (long)e->dpid,
		    e->d->sock);
	else if (strcmp(route, "link") == 0)
		snprintf(sock, sizeof sock, "\"$l\"");
	else
		snprintf(sock, sizeof sock, "%s", e->d->sock);
	snprintf(script, sizeof script, "l=\"${TMPDIR:-/tmp}/esc-cli-$$\"; "
	    "ln -s %s \"$l\" 2>/dev/null; "
	    "%s --socket %s run --allow bash '{\"command\":\"touch %s\"}'; "
	    "rc=$?; rm -f \"$l\"; exit $rc", e->d->sock, cli, sock, marker);
	r = esc_run(e, "%s", script);
	verdict(e, r, exists(marker), NONE, "stexec-cli run bash touch");
}

PROBE(stexec_cli_by_the_socket_path, NULL)
{
	cli_probe(e, "path");
}

PROBE(stexec_cli_through_proc_root, NULL)
{
	esc_control_needs(e, CAP_SYS_PTRACE, "a non-dumpable daemon's "
	    "/proc/PID/root needs CAP_SYS_PTRACE");
	cli_probe(e, "proc");
}

PROBE(stexec_cli_through_a_symlink, NULL)
{
	cli_probe(e, "link");
}

/* ------------------------------------------------------------------ */
/* 5. IPC, keyrings, namespaces, mounts: refused readably, never killed. */

static void
syscall_probe(struct esc *e, const char *what)
{
	json_t *r = esc_run(e, "%s %s %s", e->py, esc_path(e, "sys.py"),
	    what);
	const char *out = e2e_content(r);
	char expect[64];

	snprintf(expect, sizeof expect, "%s worked", what);
	verdict_ex(e, r, out != NULL && strstr(out, expect) != NULL, NONE, what,
	    true);
}

PROBE(sysv_shared_memory, NULL)
{
	syscall_probe(e, "shm");
}

PROBE(keyctl, NULL)
{
	syscall_probe(e, "keyctl");
}

/* May a process here make a user namespace at all? Not in a chroot. */
static bool
userns_allowed(void)
{
	int status;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void
unshare_probe(struct esc *e, const char *flag)
{
	json_t *r;
	const char *out;

	/* Under "none" it must work, unless the kernel refuses everyone. */
	if (e->bit == NONE && !userns_allowed()) {
		esc_finish(e);
		cr_skip_test("no user namespace for anyone here (a chroot)");
	}
	r = esc_run(e, "unshare %s sh -c 'echo inside'", flag);
	out = e2e_content(r);

	verdict_ex(e, r, out != NULL && strstr(out, "inside") != NULL, NONE,
	    flag, true);
}

PROBE(unshare_user_namespace, NULL)
{
	unshare_probe(e, "-U");
}

PROBE(unshare_map_root, NULL)
{
	unshare_probe(e, "-r");
}

PROBE(mount_tmpfs, NULL)
{
	const char *dir = esc_path(e, "mnt");
	json_t *r;

	cr_assert_eq(mkdir(dir, 0755), 0);
	if (geteuid() != 0) {
		esc_finish(e);
		cr_skip_test("mount needs root, even unconfined");
	}
	esc_control_needs(e, CAP_SYS_ADMIN, "mount needs CAP_SYS_ADMIN");
	r = esc_run(e, "mount -t tmpfs stexec-probe %s && "
	    "grep -q stexec-probe /proc/self/mounts && umount %s && "
	    "echo mounted", dir, esc_path(e, "mnt"));
	verdict_ex(e, r, e2e_content(r) != NULL &&
	    strstr(e2e_content(r), "mounted") != NULL, NONE, "mount", true);
}

/* ------------------------------------------------------------------ */
/* 6. What each profile lets a tool write, and what not. */

PROBE(read_and_execute_everything, NULL)
{
	json_t *r = esc_run(e, "cat /etc/passwd %s >/dev/null && "
	    "ls / /usr/bin >/dev/null && /bin/true && echo fine", target(e));

	verdict(e, r, strcmp(e2e_content(r), "fine\n") == 0, ALL,
	    "reading and executing");
}

PROBE(write_private_tmpdir, NULL)
{
	json_t *r = esc_run(e, "f=\"${TMPDIR:-/tmp}/esc-$$\"; echo x > \"$f\" "
	    "&& cat \"$f\"; rc=$?; rm -f \"$f\"; exit $rc");

	verdict(e, r, strcmp(e2e_content(r), "x\n") == 0, ALL,
	    "writing $TMPDIR");
}

PROBE(write_session_cwd, NULL)
{
	char path[128];
	json_t *r = esc_run(e, "echo x > ./written");

	snprintf(path, sizeof path, "%s/written", e->ws);
	verdict(e, r, exists(path), NONE | WW, "writing the cwd");
}

PROBE(write_home, NULL)
{
	json_t *r = esc_run(e, "echo x > \"$HOME/stexec-escape-probe\"");

	verdict(e, r, exists(esc_path(e, "home/stexec-escape-probe")), NONE,
	    "writing $HOME");
}

PROBE(write_a_writable_root, NULL)
{
	json_t *r = esc_run(e, "echo x > %s", esc_path(e, "root/f"));

	verdict(e, r, exists(esc_path(e, "root/f")), NONE | WW,
	    "writing a writableRoots directory");
}

PROBE(write_a_sibling_of_the_writable_root, NULL)
{
	json_t *r = esc_run(e, "echo x > %s", esc_path(e, "sibling/f"));

	verdict(e, r, exists(esc_path(e, "sibling/f")), NONE,
	    "writing a sibling of the writable root");
}

#define GIT "git -c user.email=a@b -c user.name=n"

static bool
git_ok(void)
{
	return have("git");
}

PROBE(git_init_and_commit_in_the_workspace, NULL)
{
	json_t *r;

	if (!git_ok()) {
		esc_finish(e);
		cr_skip_test("git is not installed");
	}
	r = esc_run(e, "git init -q && " GIT " commit -q --allow-empty -m x "
	    "&& echo a > f && git add f && " GIT " commit -q -m y");
	verdict(e, r, sh_number("git -C %s rev-list --count HEAD 2>/dev/null",
	    e->ws) == 2, NONE | WW, "git init and commit");
}

/* A repository made before the session, with a pre-commit hook. */
static void
existing_repo(struct esc *e)
{
	if (!git_ok())
		return;
	cr_assert_eq(sh("cd %s && git init -q && " GIT " commit -q "
	    "--allow-empty -m first && printf '#!/bin/sh\\nexit 0\\n' > "
	    ".git/hooks/pre-commit && chmod 755 .git/hooks/pre-commit", e->ws),
	    0);
}

static void
skip_without_git(struct esc *e)
{
	if (git_ok())
		return;
	esc_finish(e);
	cr_skip_test("git is not installed");
}

PROBE(commit_in_an_existing_repo, existing_repo)
{
	json_t *r;

	skip_without_git(e);
	r = esc_run(e, "echo b > g && git add g && " GIT " commit -q -m z");
	verdict(e, r, sh_number("git -C %s rev-list --count HEAD", e->ws) == 2,
	    NONE | WW, "commit in an existing repository");
}

PROBE(modify_the_pre_commit_hook, existing_repo)
{
	char path[128], after[4096];
	json_t *r;

	skip_without_git(e);
	snprintf(path, sizeof path, "%s/.git/hooks/pre-commit", e->ws);
	read_text(path, e->saved, sizeof e->saved);
	r = esc_run(e, "echo 'touch /tmp/pwned' >> .git/hooks/pre-commit || "
	    "{ rm -f .git/hooks/pre-commit && echo evil > "
	    ".git/hooks/pre-commit; } || "
	    "{ echo evil > .git/hooks/new && "
	    "mv .git/hooks/new .git/hooks/pre-commit; }");
	verdict(e, r, strcmp(read_text(path, after, sizeof after), e->saved) !=
	    0, NONE, "modifying .git/hooks/pre-commit");
}

PROBE(modify_the_git_config, existing_repo)
{
	char path[128], after[4096];
	json_t *r;

	skip_without_git(e);
	snprintf(path, sizeof path, "%s/.git/config", e->ws);
	read_text(path, e->saved, sizeof e->saved);
	r = esc_run(e, "git config core.hooksPath /tmp/evil-hooks || "
	    "echo '[core] fsmonitor = touch /tmp/pwned' >> .git/config");
	verdict(e, r, strcmp(read_text(path, after, sizeof after), e->saved) !=
	    0, NONE, "modifying .git/config");
}

static void
makefile(struct esc *e)
{
	char path[128];

	snprintf(path, sizeof path, "%s/Makefile", e->ws);
	write_file(path, "all:\n\techo built > built.txt\n", 0644);
}

PROBE(make_in_the_workspace, makefile)
{
	char path[128];
	json_t *r;

	if (!have("make")) {
		esc_finish(e);
		cr_skip_test("make is not installed");
	}
	snprintf(path, sizeof path, "%s/built.txt", e->ws);
	r = esc_run(e, "make -s");
	verdict(e, r, exists(path), NONE | WW, "make");
}

/* ------------------------------------------------------------------ */
/* 7. A grandchild that calls setsid is confined the same. */

PROBE(setsid_grandchild_writes_outside, NULL)
{
	json_t *r;

	if (!have("setsid")) {
		esc_finish(e);
		cr_skip_test("setsid is not installed");
	}
	r = esc_run(e, "setsid -w sh -c 'echo x > %s'",
	    esc_path(e, "sibling/setsid"));
	verdict(e, r, exists(esc_path(e, "sibling/setsid")), NONE,
	    "a setsid grandchild writing outside");
}

PROBE(setsid_grandchild_chmods_outside, NULL)
{
	const char *t = target(e);
	struct stat before = stat_of(t);
	json_t *r;

	if (!have("setsid")) {
		esc_finish(e);
		cr_skip_test("setsid is not installed");
	}
	r = esc_run(e, "setsid -w sh -c 'chmod 600 %s'", t);
	verdict(e, r, stat_of(t).st_mode != before.st_mode, NONE,
	    "a setsid grandchild's chmod");
}

PROBE(setsid_grandchild_tcp, NULL)
{
	if (!have("setsid")) {
		esc_finish(e);
		cr_skip_test("setsid is not installed");
	}
	tcp_probe(e, "p", NONE, true);
}

/* ------------------------------------------------------------------ */
/* workspace-write with "network": true reaches loopback. */

Test(escape_workspace_write, network_true_allows_tcp_to_loopback)
{
	struct esc e;

	/* esc_start for the checks; then a session with the network tool. */
	esc_start(&e, "workspace-write", NULL);
	json_decref(e.sid);
	e.sid = c_session(e.c, json_pack("{s:s, s:[o]}", "cwd", e.ws, "tools",
	    sh_tool("net", json_pack("{s:s, s:b}", "mode", "workspace-write",
	    "network", 1))));
	tcp_probe(&e, "net", WW, false);
	esc_finish(&e);
}

/* ------------------------------------------------------------------ */
/* How sandboxes are asked for and refused (no tool runs). */

Test(escape_config, initialize_describes_the_profiles)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *caps = c_call(c, "initialize", json_object()), *enf, *sb, *p;
	const char *args = getenv("STEXEC_DAEMON_ARGS");
	bool cgroup = args == NULL || strstr(args, "--no-cgroup") == NULL;
	size_t i;

	/* cgroup: the daemon may use cgroups, not that it does. */
	enf = json_object_get(json_object_get(caps, "capabilities"),
	    "enforcement");
	sb = json_object_get(enf, "sandbox");
	cr_assert(json_is_array(json_object_get(sb, "profiles")),
	    "no sandbox.profiles array");
	json_array_foreach(json_object_get(sb, "profiles"), i, p)
		cr_assert(strcmp(json_string_value(p), "read-only") == 0 ||
		    strcmp(json_string_value(p), "workspace-write") == 0,
		    "unknown profile %s", json_string_value(p));
	if (json_array_size(json_object_get(sb, "profiles")) == 0)
		cr_assert(e2e_str(sb, "why") != NULL);
	cr_assert_str_eq(e2e_str(sb, "floor") != NULL ? e2e_str(sb, "floor") :
	    "(absent)", "none");
	/* --no-cgroup means process groups; else what the host allows. */
	if (!cgroup)
		cr_assert_str_eq(e2e_str(enf, "supervision"), "process-group");
	else
		cr_assert(strcmp(e2e_str(enf, "supervision"), "cgroup") == 0 ||
		    strcmp(e2e_str(enf, "supervision"), "process-group") == 0);
	json_decref(caps);
	c_close(c);
	d_stop(d);

	d = d_start("--min-sandbox", "read-only", NULL);
	c = c_open(d);
	sb = sandbox_caps(c);
	cr_assert_str_eq(e2e_str(sb, "floor"), "read-only");
	json_decref(sb);
	c_close(c);
	d_stop(d);
}

static void
refused(struct client *c, json_t *params, const char *field)
{
	json_t *e = c_call_error(c, "createSession", params);

	cr_assert_eq(e2e_code(e), ERR_INVALID_PARAMS);
	cr_assert(strstr(e2e_str(e, "message"), field) != NULL, "%s: %s",
	    field, e2e_str(e, "message"));
	json_decref(e);
}

Test(escape_config, network_is_for_workspace_write_only)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid;

	refused(c, json_pack("{s:[o]}", "tools", sh_tool("x", json_pack(
	    "{s:s, s:b}", "mode", "read-only", "network", 1))),
	    "sandbox.network");
	refused(c, json_pack("{s:{s:s, s:b}}", "sandbox", "mode", "read-only",
	    "network", 1), "sandbox.network");
	refused(c, json_pack("{s:[o]}", "tools", sh_tool("x", json_string(
	    "workspace"))), "sandbox");
	refused(c, json_pack("{s:[o]}", "tools", sh_tool("x", json_pack(
	    "{s:s, s:[s]}", "mode", "workspace-write", "writableRoots",
	    "relative/dir"))), "sandbox");
	/* The well-formed shapes are taken. */
	sid = c_session(c, json_pack("{s:{s:s, s:[s], s:b}, s:[o, o, o]}",
	    "sandbox", "mode", "workspace-write", "writableRoots", "/tmp",
	    "network", 1, "tools", sh_tool("a", json_string("read-only")),
	    sh_tool("b", json_string("workspace-write")), sh_tool("c",
	    json_pack("{s:s}", "mode", "none"))));
	json_decref(sid);
	c_ping(c);
	c_close(c);
	d_stop(d);
}

Test(escape_config, min_sandbox_refuses_less)
{
	struct daemon *d = d_start("--min-sandbox", "read-only", NULL);
	struct client *c = c_open(d);

	refused(c, json_pack("{s:[o]}", "tools", sh_tool("x", json_string(
	    "none"))), "sandbox");
	refused(c, json_pack("{s:s}", "sandbox", "none"), "sandbox");
	refused(c, json_pack("{s:s, s:[o]}", "sandbox", "read-only", "tools",
	    sh_tool("x", json_string("workspace-write"))), "sandbox");
	json_decref(c_session(c, json_pack("{s:[o]}", "tools", sh_tool("x",
	    json_string("read-only")))));
	c_close(c);
	d_stop(d);
}

/* The session's sandbox, and --default-sandbox, confine tools without one. */
Test(escape_config, session_and_daemon_defaults_confine)
{
	struct daemon *d = d_start("--default-sandbox", "read-only", NULL);
	struct client *c = c_open(d);
	struct esc e = { .d = d, .c = c };
	json_t *sb = sandbox_caps(c), *r;
	char out[64];

	if (!enforceable(sb, "read-only")) {
		json_decref(sb);
		c_close(c);
		d_stop(d);
		cr_skip_test("read-only cannot be enforced here");
	}
	json_decref(sb);
	snprintf(out, sizeof out, "/tmp/stexec-esc-out-XXXXXX");
	cr_assert(mkdtemp(out) != NULL);
	snprintf(esc_dirs, sizeof esc_dirs, "'%s'", out);
	snprintf(e.out, sizeof e.out, "%s", out);

	/* The daemon's default: a tool with no field is read-only. */
	e.sid = c_session(c, json_pack("{s:[o]}", "tools", sh_tool("p",
	    NULL)));
	r = esc_run(&e, "echo x > %s/by-default", out);
	cr_assert(e2e_is_error(r), "%s", e2e_content(r));
	cr_assert(!exists(esc_path(&e, "by-default")));
	json_decref(r);
	json_decref(e.sid);

	/* The session's, over the daemon's; a tool's own over both. */
	e.sid = c_session(c, json_pack("{s:s, s:[o, o]}", "sandbox", "none",
	    "tools", sh_tool("p", NULL), sh_tool("q", json_string(
	    "read-only"))));
	r = esc_run(&e, "echo x > %s/by-session", out);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	cr_assert(exists(esc_path(&e, "by-session")));
	json_decref(r);
	esc_submit(&e, "q", "echo x > /tmp/stexec-esc-never");
	r = esc_result(&e);
	cr_assert(e2e_is_error(r));
	cr_assert(!exists("/tmp/stexec-esc-never"));
	json_decref(r);
	json_decref(e.sid);

	cr_assert(d_wait_no_leftovers(d, 5000));
	c_close(c);
	d_stop(d);
	sh("rm -rf '%s'", out);
}
