/*
 * The metrics answer (PROTOCOL.md, metrics): metrics.c's counters and
 * histograms, the gauges read from their owners now, the build and the
 * enforcement as _info metrics, and the figures of the caller's own
 * sessions. One pass over the sessions, O(1) each: nothing here may hold
 * the loop up (doc/design.md §6, G6).
 */
#include "rpc/gauges.h"

#include <stdio.h>
#include <string.h>

#include "hooks/hooks.h"
#include "metrics.h"
#include "net/conn.h"
#include "session/journal.h"
#include "session/outdir.h"
#include "session/session.h"
#include "stexec/protocol.h"
#include "util.h"

/* What one pass over the sessions adds up, and the caller's rows. */
struct gauges_pass {
	uid_t uid;
	uint64_t queued, retained, processes;
	json_t *mine[5];          /* per-session families, below */
};

static struct gauges_pass gauges_now;

static uint64_t	gauges_sessions(void);
static uint64_t	gauges_connections(void);
static uint64_t	gauges_running(void);
static uint64_t	gauges_waiting_slot(void);
static uint64_t	gauges_queued(void);
static uint64_t	gauges_retained(void);
static uint64_t	gauges_output(void);
static uint64_t	gauges_journal(void);
static uint64_t	gauges_jobs(void);
static uint64_t	gauges_hooks(void);

/*
 * A gauge is a row: its name (stexec_, base units), what it means, and a
 * function that reads it in O(1) (or from gauges_now, the pass over the
 * sessions made before the rows are read).
 */
static const struct {
	const char *name;
	const char *help;
	uint64_t (*value)(void);
} gauges[] = {
	{ "stexec_sessions", "Open sessions.", gauges_sessions },
	{ "stexec_connections", "Open client connections.",
	    gauges_connections },
	{ "stexec_tools_running", "Tool processes running.", gauges_running },
	{ "stexec_tools_waiting_slot", "Tools whose turn to start came, "
	    "waiting for a --max-procs slot.", gauges_waiting_slot },
	{ "stexec_tools_queued", "Tools of the current turns waiting for "
	    "their turn to start (S3, S4).", gauges_queued },
	{ "stexec_retained_log_bytes", "Bytes of notifications the sessions "
	    "retain for replay (--retention-bytes each).", gauges_retained },
	{ "stexec_output_files_bytes", "Bytes of whole-output files kept "
	    "(--output-budget).", gauges_output },
	{ "stexec_journal_bytes", "Size of the crash journal in bytes (0: "
	    "none).", gauges_journal },
	{ "stexec_jobs_running", "Jobs (tools that run on after their "
	    "result), and background calls that may still become one.",
	    gauges_jobs },
	{ "stexec_hooks_running", "Hook processes running (README, Hooks).",
	    gauges_hooks },
};

/* The caller's sessions, a family each figure. */
static const struct {
	const char *name;
	const char *help;
} gauges_mine[] = {
	{ "stexec_session_turn", "The session's current turn." },
	{ "stexec_session_tools_running", "The session's tools with a "
	    "process (or waiting for a --max-procs slot)." },
	{ "stexec_session_tools_queued", "The session's tools waiting for "
	    "their turn to start." },
	{ "stexec_session_clients", "Open connections referring to the "
	    "session." },
	{ "stexec_session_retained_log_bytes", "Bytes of notifications the "
	    "session retains." },
};

static uint64_t
gauges_sessions(void)
{
	return session_count();
}

static uint64_t
gauges_connections(void)
{
	return conn_count();
}

static uint64_t
gauges_running(void)
{
	return session_tools_running();
}

/* O(sessions + their running tools): the pass the caller's rows make. */
static uint64_t
gauges_hooks(void)
{
	return hooks_running();
}

static uint64_t
gauges_jobs(void)
{
	return session_jobs_running();
}

/* Asked for and not yet ended, less those whose process runs. */
static uint64_t
gauges_waiting_slot(void)
{
	uint64_t asked = gauges_now.processes;

	return asked > session_tools_running() ? asked -
	    session_tools_running() : 0;
}

static uint64_t
gauges_queued(void)
{
	return gauges_now.queued;
}

static uint64_t
gauges_retained(void)
{
	return gauges_now.retained;
}

static uint64_t
gauges_output(void)
{
	return outdir_bytes();
}

static uint64_t
gauges_journal(void)
{
	return journal_bytes();
}

static json_t *
gauges_family(const char *name, const char *help)
{
	return json_pack("{s:s, s:s, s:s, s:[]}", "name", name, "type",
	    "gauge", "help", help, "samples");
}

static void
gauges_session(const struct session_figures *f, void *arg)
{
	struct gauges_pass *p = arg;
	const uint64_t v[nitems(gauges_mine)] = { f->turn, f->processes,
	    f->queued, f->clients, f->retained_bytes };
	size_t i;

	p->queued += f->queued;
	p->retained += f->retained_bytes;
	p->processes += f->processes;
	if (f->uid != p->uid)
		return;
	for (i = 0; i < nitems(gauges_mine); i++)
		json_array_append_new(json_object_get(p->mine[i], "samples"),
		    json_pack("{s:{s:s}, s:I}", "labels", "session", f->id,
		    "value", (json_int_t)v[i]));
}

/* A label value from the enforcement object: strings as they are. */
static void
gauges_label(json_t *labels, const char *name, const json_t *v)
{
	char num[32];

	if (json_is_string(v))
		json_object_set_new(labels, name, json_string(
		    json_string_value(v)));
	else if (json_is_integer(v)) {
		snprintf(num, sizeof num, "%lld", (long long)
		    json_integer_value(v));
		json_object_set_new(labels, name, json_string(num));
	} else if (json_is_boolean(v))
		json_object_set_new(labels, name, json_string(json_is_true(v) ?
		    "true" : "false"));
	else
		json_object_set_new(labels, name, json_string("none"));
}

static json_t *
gauges_info(const json_t *e)
{
	const json_t *limits = json_object_get(e, "limits");
	const json_t *sb = json_object_get(e, "sandbox"), *v;
	json_t *labels = json_object();
	char profiles[64] = "";
	size_t i;

	gauges_label(labels, "supervision", json_object_get(e, "supervision"));
	gauges_label(labels, "memory_limit", json_object_get(limits,
	    "memoryBytes"));
	gauges_label(labels, "process_limit", json_object_get(limits,
	    "maxProcesses"));
	gauges_label(labels, "cpu_limit", json_object_get(limits,
	    "cpuPercent"));
	gauges_label(labels, "peak_memory", json_object_get(e, "peakMemory"));
	json_array_foreach(json_object_get(sb, "profiles"), i, v)
		snprintf(profiles + strlen(profiles), sizeof profiles -
		    strlen(profiles), "%s%s", i > 0 ? "," : "",
		    json_string_value(v));
	json_object_set_new(labels, "sandbox_profiles", json_string(profiles));
	gauges_label(labels, "sandbox_default", json_object_get(sb,
	    "default"));
	gauges_label(labels, "sandbox_floor", json_object_get(sb, "floor"));
	gauges_label(labels, "safe_read_only", json_object_get(sb,
	    "safeReadOnly"));
	gauges_label(labels, "landlock_abi", json_object_get(sb,
	    "landlockAbi"));
	gauges_label(labels, "seccomp", json_object_get(sb, "seccomp"));
	return json_pack("{s:s, s:s, s:s, s:[{s:o, s:i}]}", "name",
	    "stexec_enforcement_info", "type", "gauge", "help", "What this "
	    "daemon enforces on this host (initialize's "
	    "capabilities.enforcement); always 1.", "samples", "labels",
	    labels, "value", 1);
}

json_t *
gauges_json(uid_t uid, const json_t *enforcement, uint64_t uptime_ms)
{
	json_t *families = json_array(), *f;
	char protocol[16];
	size_t i;

	snprintf(protocol, sizeof protocol, "%d", STEXEC_PROTOCOL_VERSION);
	memset(&gauges_now, 0, sizeof gauges_now);
	gauges_now.uid = uid;
	for (i = 0; i < nitems(gauges_mine); i++)
		gauges_now.mine[i] = gauges_family(gauges_mine[i].name,
		    gauges_mine[i].help);
	session_figures(gauges_session, &gauges_now);

	json_array_append_new(families, json_pack("{s:s, s:s, s:s, "
	    "s:[{s:{s:s, s:s}, s:i}]}", "name", "stexec_build_info", "type",
	    "gauge", "help", "The daemon's version and protocol; always 1.",
	    "samples", "labels", "version", STEXEC_VERSION, "protocol",
	    protocol, "value", 1));
	json_array_append_new(families, gauges_info(enforcement));
	f = gauges_family("stexec_start_time_seconds", "When this daemon's "
	    "image started (a reload starts a new one), in seconds since the "
	    "epoch.");
	json_array_append_new(json_object_get(f, "samples"), json_pack(
	    "{s:f}", "value", (double)(util_wall_ms() - (int64_t)uptime_ms) /
	    1000));
	json_array_append_new(families, f);
	metrics_families(families);
	for (i = 0; i < nitems(gauges); i++) {
		f = gauges_family(gauges[i].name, gauges[i].help);
		json_array_append_new(json_object_get(f, "samples"),
		    json_pack("{s:I}", "value", (json_int_t)gauges[i].value()));
		json_array_append_new(families, f);
	}
	for (i = 0; i < nitems(gauges_mine); i++)
		json_array_append_new(families, gauges_now.mine[i]);
	session_mcp_metrics(uid, families);
	return json_pack("{s:o}", "metrics", families);
}
