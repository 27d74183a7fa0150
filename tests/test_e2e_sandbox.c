/*
 * doc/design.md §7, Sandbox, end to end: the read-only sandbox (Landlock, by the kernel),
 * per-tool limits (the host's cgroups), and what initialize says of them.
 * Run in both supervision modes (meson registers this suite twice).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "e2e.h"

#define SLOW 30000

TestSuite(sandbox, .fini = e2e_fini);
TestSuite(limits, .fini = e2e_fini);

/* A sh tool: safe or not, with an optional extra ToolDef text. */
static json_t *
sh_tool(const char *name, bool safe, const char *extra)
{
	char def[1024];

	snprintf(def, sizeof def, "{\"name\":\"%s\",\"command\":[\"/bin/sh\","
	    "\"-c\",\"{script}\"],\"inputSchema\":{\"type\":\"object\"},"
	    "\"concurrencySafe\":%s%s%s}", name, safe ? "true" : "false",
	    extra != NULL ? "," : "", extra != NULL ? extra : "");
	return e2e_json(def);
}

static json_t *
session(struct client *c)
{
	json_t *tools = json_array();

	json_array_append_new(tools, sh_tool("ro", true,
	    "\"sandbox\":\"read-only\""));
	json_array_append_new(tools, sh_tool("ww", false,
	    "\"sandbox\":\"workspace-write\""));
	json_array_append_new(tools, sh_tool("unsafe", false, NULL));
	json_array_append_new(tools, sh_tool("safe", true, NULL));
	json_array_append_new(tools, sh_tool("none", true,
	    "\"sandbox\":\"none\""));
	json_array_append_new(tools, sh_tool("mem", false,
	    "\"limits\":{\"memoryBytes\":134217728}"));
	json_array_append_new(tools, sh_tool("procs", false,
	    "\"limits\":{\"maxProcesses\":8}"));
	json_array_append_new(tools, sh_tool("many", false,
	    "\"limits\":{\"maxProcesses\":64}"));
	return c_session(c, json_pack("{s:o}", "tools", tools));
}

/* Run one tool alone: its tool_result params (new reference). */
static json_t *
run(struct client *c, json_t *sid, const char *tool, const char *script)
{
	json_t *input = json_pack("{s:s}", "script", script), *list, *r;
	char *text = json_dumps(input, JSON_COMPACT);

	json_decref(c_add(c, json_string_value(sid), "t", tool, text));
	free(text);
	json_decref(input);
	json_decref(c_call(c, "drain", json_pack("{s:O}", "sessionId", sid)));
	list = c_until_only(c, "turn_end", "tool_result", SLOW);
	cr_assert_eq(json_array_size(list), 1);
	r = json_incref(json_array_get(list, 0));
	json_decref(list);
	return r;
}

static bool
exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0;
}

/* How the daemon enforces a limit: "cgroup2", "cgroup1", "rlimit"... */
static char *
limit_via(struct client *c, const char *limit)
{
	json_t *caps = c_call(c, "initialize", json_object());
	const char *via = e2e_str(json_object_get(json_object_get(
	    json_object_get(caps, "capabilities"), "enforcement"), "limits"),
	    limit);
	char *copy = strdup(via != NULL ? via : "none");

	json_decref(caps);
	return copy;
}

/*
 * RLIMIT_NPROC binds no root: where there is no pids cgroup, nothing
 * would stop a test's 40 sleeps. Skip it then, saying so.
 */
static void
skip_without_pids(struct daemon *d, struct client *c, json_t *sid)
{
	char *via = limit_via(c, "maxProcesses");
	bool none = strncmp(via, "cgroup", 6) != 0 && geteuid() == 0;

	free(via);
	if (!none)
		return;
	json_decref(sid);
	c_close(c);
	d_stop(d);
	cr_skip_test("no pids cgroup here, and RLIMIT_NPROC does not bind "
	    "root");
}

/*
 * Whether the daemon chose cgroup supervision: asked, not inferred from
 * its options, since a host without a cgroup fs (a container) falls back.
 */
static bool
cgroup_mode(struct client *c)
{
	json_t *caps = c_call(c, "initialize", json_object());
	const char *how = e2e_str(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "supervision");
	bool cgroup = how != NULL && strcmp(how, "cgroup") == 0;

	json_decref(caps);
	return cgroup;
}

Test(sandbox, a_read_only_tool_cannot_write_outside_its_tmpdir)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r;
	char script[512];
	const char *target = d_path(d, "written");

	snprintf(script, sizeof script, "echo x > %s", target);
	r = run(c, sid, "ro", script);
	cr_assert(e2e_is_error(r));
	cr_assert_str_eq(e2e_reason(r), "exit");
	cr_assert(strstr(e2e_content(r), "Permission denied") != NULL, "%s",
	    e2e_content(r));
	cr_assert(!exists(target), "the read-only tool wrote %s", target);
	json_decref(r);

	/* Removing, renaming, making a directory: all refused too. */
	snprintf(script, sizeof script, "mkdir %s.d || touch %s.t || "
	    "rm -f /etc/hostname", target, target);
	r = run(c, sid, "ro", script);
	cr_assert(e2e_is_error(r));
	cr_assert(!exists(d_path(d, "written.d")));
	cr_assert(exists("/etc/hostname"));
	json_decref(r);

	/* The same command, unsafe (no sandbox field): it writes. */
	snprintf(script, sizeof script, "echo x > %s", target);
	r = run(c, sid, "unsafe", script);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	cr_assert(exists(target));
	json_decref(r);

	/* Reading stays allowed, and so are /dev/null and friends. */
	snprintf(script, sizeof script, "cat %s && echo y > /dev/null && "
	    "head -c 4 /dev/urandom | wc -c", target);
	r = run(c, sid, "ro", script);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	cr_assert_str_eq(e2e_content(r), "x\n4\n");
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

/* Gone soon (the one guard): a worker thread removes it, off the loop. */
static bool
removed_soon(const char *path)
{
	int i;

	for (i = 0; i < e2e_ms(10000) / 10 && exists(path); i++)
		usleep(10000);
	return !exists(path);
}

Test(sandbox, a_read_only_tool_has_a_private_tmpdir_removed_at_its_end)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r;
	char dir[512];
	const char *out;
	size_t len;
	bool ww;
	int i;

	r = run(c, sid, "ro", "echo hi > \"$TMPDIR/f\" && mkdir \"$TMPDIR/d\" "
	    "&& cat \"$TMPDIR/f\" && printf %s \"$TMPDIR\"");
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	out = e2e_content(r);
	cr_assert(strncmp(out, "hi\n", 3) == 0, "%s", out);
	len = strlen(out + 3);
	cr_assert(len > 0 && len < sizeof dir);
	memcpy(dir, out + 3, len + 1);
	cr_assert_neq(strcmp(dir, "/tmp"), 0);
	cr_assert(removed_soon(dir), "%s is left after the tool ended", dir);
	json_decref(r);

	/*
	 * A directory left empty is reused, but as new: a tool that opened
	 * its TMPDIR to everyone leaves nothing of that to the next ones,
	 * and none ever sees what another wrote. Only workspace-write may
	 * chmod its TMPDIR, where the daemon can enforce it.
	 */
	if ((ww = c_can(c, "workspace-write"))) {
		r = run(c, sid, "ww", "chmod 777 \"$TMPDIR\" && "
		    "stat -c %a \"$TMPDIR\"");
		cr_assert_str_eq(e2e_content(r), "777\n");
		json_decref(r);
	}
	for (i = 0; i < 20; i++) {
		r = run(c, sid, i % 2 && ww ? "ww" : "ro",
		    "stat -c %a \"$TMPDIR\" && ls -A \"$TMPDIR\" && "
		    "echo x > \"$TMPDIR/f\"");
		cr_assert_str_eq(e2e_content(r), "700\n");
		json_decref(r);
		r = run(c, sid, "ro", "stat -c %a \"$TMPDIR\"; ls -A \"$TMPDIR\"");
		cr_assert_str_eq(e2e_content(r), "700\n");
		json_decref(r);
	}

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(sandbox, safe_read_only_confines_safe_tools_without_the_field)
{
	struct daemon *plain = d_start(NULL);
	struct daemon *d = d_start("--safe-read-only", NULL);
	struct client *c = c_open(d), *pc = c_open(plain);
	json_t *sid = session(c), *psid = session(pc), *r, *caps;
	char script[512];

	caps = c_call(c, "initialize", json_object());
	cr_assert(json_is_true(json_object_get(json_object_get(json_object_get(
	    json_object_get(caps, "capabilities"), "enforcement"), "sandbox"),
	    "safeReadOnly")));
	json_decref(caps);

	snprintf(script, sizeof script, "echo x > %s", d_path(d, "s"));
	r = run(c, sid, "safe", script);
	cr_assert(e2e_is_error(r), "a safe tool wrote under --safe-read-only");
	cr_assert(!exists(d_path(d, "s")));
	json_decref(r);

	/* sandbox "none" opts out; unsafe tools are never confined. */
	snprintf(script, sizeof script, "echo x > %s", d_path(d, "n"));
	r = run(c, sid, "none", script);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	json_decref(r);
	snprintf(script, sizeof script, "echo x > %s", d_path(d, "u"));
	r = run(c, sid, "unsafe", script);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	json_decref(r);

	/* Without the option, a safe tool without the field is as before. */
	snprintf(script, sizeof script, "echo x > %s", d_path(plain, "s"));
	r = run(pc, psid, "safe", script);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	cr_assert(exists(d_path(plain, "s")));
	json_decref(r);

	json_decref(sid);
	json_decref(psid);
	c_close(c);
	c_close(pc);
	d_stop(d);
	d_stop(plain);
}

Test(sandbox, the_built_in_safe_tools_are_read_only)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *tools, *t, *r, *list;
	size_t i;
	int n = 0;

	tools = c_call(c, "listTools", json_pack("{s:O}", "sessionId", sid));
	json_array_foreach(json_object_get(tools, "tools"), i, t) {
		const char *name = e2e_str(t, "name");
		bool ro = name != NULL && (strcmp(name, "read_file") == 0 ||
		    strcmp(name, "glob") == 0 || strcmp(name, "grep") == 0 ||
		    strcmp(name, "list_dir") == 0);

		if (ro) {
			cr_assert_str_eq(e2e_str(t, "sandbox"), "read-only",
			    "%s", name);
			n++;
		}
	}
	cr_assert_eq(n, 4);
	json_decref(tools);

	json_decref(c_add(c, json_string_value(sid), "r", "read_file",
	    "{\"file_path\":\"/etc/hostname\"}"));
	json_decref(c_call(c, "drain", json_pack("{s:O}", "sessionId", sid)));
	list = c_until_only(c, "turn_end", "tool_result", SLOW);
	r = json_array_get(list, 0);
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	json_decref(list);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(sandbox, without_landlock_read_only_tools_are_refused_not_run)
{
	const char *wrap[] = { getenv("STEXEC_NO_LANDLOCK"), NULL };
	struct daemon *d;
	struct client *c;
	json_t *sid, *r, *caps, *sb;
	char script[512];

	cr_assert(wrap[0] != NULL, "STEXEC_NO_LANDLOCK is not set");
	d = d_start_wrapped(wrap, NULL);
	c = c_open(d);
	sid = session(c);

	caps = c_call(c, "initialize", json_object());
	sb = json_object_get(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "sandbox");
	cr_assert(json_is_null(json_object_get(sb, "readOnly")));
	cr_assert(strstr(e2e_str(sb, "why"), "Landlock") != NULL);
	json_decref(caps);

	snprintf(script, sizeof script, "echo x > %s", d_path(d, "w"));
	r = run(c, sid, "ro", script);
	cr_assert(e2e_is_error(r));
	cr_assert_str_eq(e2e_reason(r), "spawn_failed");
	cr_assert(strstr(e2e_content(r), "read-only") != NULL &&
	    strstr(e2e_content(r), "Landlock") != NULL, "%s", e2e_content(r));
	cr_assert(!exists(d_path(d, "w")), "ran unconfined");
	json_decref(r);

	r = run(c, sid, "unsafe", "echo fine");
	cr_assert_str_eq(e2e_content(r), "fine\n");
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(sandbox, bad_sandbox_and_limits_fields_are_refused_by_name)
{
	static const struct {
		const char *extra, *msg;
	} bad[] = {
		{ "\"sandbox\":\"readonly\"", "sandbox: must be" },
		{ "\"sandbox\":true", "sandbox: must be" },
		{ "\"limits\":[]", "limits: must be an object" },
		{ "\"limits\":{\"memoryBytes\":1000}", "limits.memoryBytes: "
		    "must be an integer from 1048576" },
		{ "\"limits\":{\"maxProcesses\":0}", "limits.maxProcesses" },
		{ "\"limits\":{\"cpuPercent\":1.5}", "limits.cpuPercent" },
		{ "\"limits\":{\"memory\":1}", "limits.memory: unknown field" },
	};
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *e, *tools;
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tools = json_pack("[o]", sh_tool("x", false, bad[i].extra));
		e = c_call_error(c, "createSession", json_pack("{s:o}",
		    "tools", tools));
		cr_assert_eq(e2e_code(e), -32602);
		cr_assert(strstr(e2e_str(e, "message"), bad[i].msg) != NULL,
		    "%s: %s", bad[i].extra, e2e_str(e, "message"));
		json_decref(e);
	}
	c_ping(c);
	c_close(c);
	d_stop(d);
}

Test(limits, initialize_reports_what_is_enforced)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *caps = c_call(c, "initialize", json_object()), *enf, *lim;

	enf = json_object_get(json_object_get(caps, "capabilities"),
	    "enforcement");
	/* --no-cgroup means process groups; without it, what the host has. */
	if (getenv("STEXEC_DAEMON_ARGS") != NULL &&
	    strstr(getenv("STEXEC_DAEMON_ARGS"), "--no-cgroup") != NULL)
		cr_assert_str_eq(e2e_str(enf, "supervision"), "process-group");
	else
		cr_assert(strcmp(e2e_str(enf, "supervision"), "cgroup") == 0 ||
		    strcmp(e2e_str(enf, "supervision"), "process-group") == 0);
	lim = json_object_get(enf, "limits");
	cr_assert(e2e_str(lim, "memoryBytes") != NULL);
	cr_assert(e2e_str(lim, "maxProcesses") != NULL);
	cr_assert_str_eq(e2e_str(json_object_get(enf, "sandbox"), "readOnly"),
	    "landlock");
	json_decref(caps);
	c_close(c);
	d_stop(d);
}

/* enforcement.peakMemory, or "none" when it is null. */
static char *
peak_memory(struct client *c)
{
	json_t *caps = c_call(c, "initialize", json_object());
	const char *who = e2e_str(json_object_get(json_object_get(caps,
	    "capabilities"), "enforcement"), "peakMemory");
	char *copy = strdup(who != NULL ? who : "none");

	json_decref(caps);
	return copy;
}

/* Whether a tool touching 16 MiB got a peak of at least that. */
static bool
peak_reported(struct client *c, json_t *sid, const char *tool)
{
	json_t *r = run(c, sid, tool, "exec python3 -c 'b = bytearray(16 << "
	    "20); print(len(b))'"), *meta = json_object_get(r, "meta");
	bool has = json_object_get(meta, "peakMemoryBytes") != NULL;

	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	if (has)
		cr_assert_geq(e2e_int(meta, "peakMemoryBytes"), 16LL << 20);
	json_decref(r);
	return has;
}

/*
 * Whose peak memory is measured is what initialize says: every tool's with
 * --measure-memory, and on cgroup v2 from Linux 6.12 (whose memory.peak a
 * reused group can reset); else only a tool's with a memory limit. And a
 * tool's peak is its own: a small tool after a large one, in the group the
 * large one left (groups are reused), does not report the large peak.
 */
Test(limits, peak_memory_is_reported_as_initialize_says)
{
	const char *flags[] = { NULL, "--measure-memory" };
	struct daemon *d;
	struct client *c;
	json_t *sid, *r, *meta;
	char *who, *via;
	size_t i;
	bool all;
	int k;

	for (i = 0; i < sizeof flags / sizeof flags[0]; i++) {
		d = d_start(flags[i], NULL);
		c = c_open(d);
		sid = session(c);
		who = peak_memory(c);
		via = limit_via(c, "memoryBytes");
		all = strcmp(who, "all") == 0;
		if (strcmp(via, "cgroup1") == 0)
			cr_assert_str_eq(who, i == 0 ? "limited" : "all");
		else if (strcmp(via, "cgroup2") == 0)
			cr_assert(all || (i == 0 && strcmp(who, "limited") ==
			    0), "%s", who);
		else
			cr_assert_str_eq(who, "none");
		cr_assert_eq(peak_reported(c, sid, "mem"),
		    strcmp(who, "none") != 0, "a memory limit, %s: %s",
		    flags[i] != NULL ? flags[i] : "no flag", who);
		for (k = 0; k < 3; k++) {
			cr_assert_eq(peak_reported(c, sid, "unsafe"), all,
			    "no limit, %s: %s", flags[i] != NULL ? flags[i] :
			    "no flag", who);
			r = run(c, sid, "unsafe", "exec true");
			meta = json_object_get(r, "meta");
			cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
			cr_assert_eq(json_object_get(meta, "peakMemoryBytes") !=
			    NULL, all, "%s", who);
			if (all)
				cr_assert_lt(e2e_int(meta, "peakMemoryBytes"),
				    8LL << 20, "round %d: true's peak is the "
				    "16 MiB tool's before it", k);
			json_decref(r);
		}
		free(who);
		free(via);
		json_decref(sid);
		c_close(c);
		d_stop(d);
	}
}

Test(limits, a_tool_over_its_memory_limit_is_killed_and_says_so)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r, *meta;
	char *via = limit_via(c, "memoryBytes");

	/* 768 MiB, touched, under a 128 MiB limit. */
	r = run(c, sid, "mem", "exec python3 -c 'b = bytearray(768 << 20); "
	    "print(len(b))'");
	cr_assert(e2e_is_error(r));
	if (strncmp(via, "cgroup", 6) != 0) {
		/* RLIMIT_AS: the allocation fails; the tool says so itself. */
		cr_assert(strstr(e2e_content(r), "MemoryError") != NULL, "%s",
		    e2e_content(r));
		json_decref(r);
		free(via);
		json_decref(sid);
		c_close(c);
		d_stop(d);
		return;
	}
	free(via);
	cr_assert_str_eq(e2e_reason(r), "memory_limit", "%s: %s",
	    e2e_reason(r), e2e_content(r));
	cr_assert(strstr(e2e_content(r), "memory limit of 134217728 bytes") !=
	    NULL, "%s", e2e_content(r));
	meta = json_object_get(r, "meta");
	if (json_object_get(meta, "peakMemoryBytes") != NULL)
		cr_assert(e2e_int(meta, "peakMemoryBytes") <= 134217728LL +
		    (1 << 20));
	cr_assert(d_wait_no_leftovers(d, 5000));
	json_decref(r);

	/* Under the limit, the same tool runs. */
	r = run(c, sid, "mem", "exec python3 -c 'b = bytearray(16 << 20); "
	    "print(len(b))'");
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(limits, a_tool_over_its_process_limit_is_killed_and_nothing_is_left)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r;

	skip_without_pids(d, c, sid);

	/* Sleeps of an hour: a result at all, within run's guard, is one
	 * that was not left to them. */
	r = run(c, sid, "procs", "for i in $(seq 40); do sleep 3600 & done; "
	    "wait");
	cr_assert(e2e_is_error(r));
	cr_assert_str_eq(e2e_reason(r), "process_limit", "%s: %s",
	    e2e_reason(r), e2e_content(r));
	cr_assert(strstr(e2e_content(r), "limit of 8 processes") != NULL,
	    "%s", e2e_content(r));
	cr_assert(d_wait_no_leftovers(d, 5000));
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(limits, the_daemon_default_applies_to_tools_without_limits)
{
	struct daemon *d = d_start("--max-processes", "8", NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r;

	skip_without_pids(d, c, sid);

	r = run(c, sid, "unsafe", "for i in $(seq 40); do sleep 60 & done; "
	    "wait");
	cr_assert_str_eq(e2e_reason(r), "process_limit", "%s: %s",
	    e2e_reason(r), e2e_content(r));
	cr_assert(d_wait_no_leftovers(d, 5000));
	json_decref(r);

	/* A tool's own limit wins over the default. */
	r = run(c, sid, "many", "for i in $(seq 12); do sleep 0.2 & done; "
	    "wait; echo done");
	cr_assert(!e2e_is_error(r), "%s", e2e_content(r));
	json_decref(r);

	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(limits, usage_is_reported_where_a_cgroup_measures_it)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = session(c), *r, *meta;

	json_t *st, *tool;
	char script[256];
	FILE *f;

	/* While it runs (until the test lets it end), status shows its
	 * usage so far. */
	snprintf(script, sizeof script, "{\"script\":\"while [ ! -e %s ]; "
	    "do sleep 0.05; done\"}", d_path(d, "go"));
	json_decref(c_add(c, json_string_value(sid), "s", "unsafe", script));
	json_decref(c_wait(c, "tool_status", SLOW));
	st = c_call(c, "status", json_pack("{s:O}", "sessionId", sid));
	tool = json_array_get(json_object_get(st, "tools"), 0);
	cr_assert(json_is_integer(json_object_get(tool, "pid")));
	cr_assert_eq(json_is_integer(json_object_get(tool, "cpuMs")),
	    cgroup_mode(c));
	json_decref(st);
	cr_assert((f = fopen(d_path(d, "go"), "w")) != NULL);
	fclose(f);
	json_decref(c_call(c, "drain", json_pack("{s:O}", "sessionId", sid)));
	json_decref(c_until(c, "turn_end", SLOW));

	r = run(c, sid, "unsafe", "i=0; while [ $i -lt 200000 ]; do "
	    "i=$((i+1)); done");
	meta = json_object_get(r, "meta");
	if (cgroup_mode(c)) {
		cr_assert(json_is_integer(json_object_get(meta, "cpuMs")),
		    "no cpuMs in cgroup mode");
		cr_assert_gt(e2e_int(meta, "cpuMs"), 0);
	} else
		cr_assert_null(json_object_get(meta, "cpuMs"));
	json_decref(r);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}
