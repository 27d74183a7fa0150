/* Counters and fixed-bucket histograms for operators. See metrics.h. */
#include "metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "util.h"

#define MS 1000000ULL
#define S (1000 * MS)

/* The environment variable that carries the counters into a reload. */
#define METRICS_ENV "STEXEC_METRICS"

struct metrics_counter_def {
	const char *key;   /* in the reload's handover */
	const char *name;
	const char *help;
};

static const struct metrics_counter_def metrics_counter_defs[] = {
	{ "tools_started", "stexec_tools_started_total",
	    "Tool processes started." },
	{ "conn_accepted", "stexec_connections_accepted_total",
	    "Client connections accepted." },
	{ "conn_refused", "stexec_connections_refused_total",
	    "Client connections refused: over --max-connections or "
	    "--max-connections-per-uid, or from a sandboxed tool." },
	{ "restarts", "stexec_restarts_total",
	    "Starts that found the crash journal of an earlier daemon and "
	    "restored from it (after a crash or a stop)." },
	{ "reloads", "stexec_reloads_total",
	    "Reloads (SIGHUP: the daemon's binary executed again in place)." },
	{ "net_allowed", "stexec_network_connections_allowed_total",
	    "Connections the network proxy made for a tool with an "
	    "allow-list." },
	{ "net_refused", "stexec_network_connections_refused_total",
	    "Connections of tools the network proxy refused: no rule allows "
	    "them, a deny rule or an address class refuses them, or a "
	    "connection bound was reached." },
	{ "net_failed", "stexec_network_connections_failed_total",
	    "Connections the network proxy allowed but could not make: the "
	    "name did not resolve, or the connect failed." },
};

/* meta.reason, PROTOCOL.md §5: every value, so each series exists at 0. */
static const char *metrics_reasons[] = {
	"ok", "exit", "signal", "timeout", "unknown_tool", "invalid_input",
	"sibling_error", "interrupted", "permission_denied", "spawn_failed",
	"memory_limit", "process_limit", "daemon_restarted", "background",
	"error",
};

/* Upper bounds in ns, ascending; a last bucket (+Inf) follows. */
static const uint64_t metrics_short_bounds[] = {
	MS / 10, MS / 4, MS / 2, MS, 5 * MS / 2, 5 * MS, 10 * MS, 25 * MS,
	50 * MS, 100 * MS, 250 * MS, 500 * MS, S, 5 * S / 2, 5 * S, 10 * S,
	30 * S, 60 * S,
};
static const uint64_t metrics_run_bounds[] = {
	MS, 5 * MS, 10 * MS, 50 * MS, 100 * MS, 500 * MS, S, 5 * S, 10 * S,
	30 * S, 60 * S, 120 * S, 300 * S, 600 * S, 1800 * S, 3600 * S,
};
#define METRICS_MAX_BUCKETS 19

struct metrics_hist_def {
	const char *key;
	const char *name;
	const char *help;
	const uint64_t *bounds;
	size_t nbounds;
};

static const struct metrics_hist_def metrics_hist_defs[] = {
	{ "start_delay", "stexec_tool_start_delay_seconds",
	    "From addTool to the start of the tool's process: the wait for "
	    "its turn (S3, S4), permission and a --max-procs slot, and the "
	    "spawn.", metrics_short_bounds, nitems(metrics_short_bounds) },
	{ "run", "stexec_tool_run_seconds",
	    "From the start of a tool's process to the end of every process "
	    "of it.", metrics_run_bounds, nitems(metrics_run_bounds) },
	{ "delivery", "stexec_tool_result_delay_seconds",
	    "From the end of a tool's processes to its tool_result being "
	    "sent: held for ordering (S5), and the result's making.",
	    metrics_short_bounds, nitems(metrics_short_bounds) },
};

struct metrics_buckets {
	uint64_t counts[METRICS_MAX_BUCKETS]; /* per bucket, not cumulative */
	uint64_t sum_ns;
};

static uint64_t metrics_counters[METRICS_NCOUNTERS];
static uint64_t metrics_finished_n[nitems(metrics_reasons)];
static struct metrics_buckets metrics_hists[METRICS_NHISTS];

uint64_t
metrics_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return metrics_stamp(&ts);
}

uint64_t
metrics_stamp(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * S + (uint64_t)ts->tv_nsec + 1;
}

void
metrics_count(enum metrics_counter which)
{
	metrics_counters[which]++;
}

void
metrics_finished(const char *reason)
{
	size_t i;

	for (i = 0; reason != NULL && i < nitems(metrics_reasons); i++)
		if (strcmp(reason, metrics_reasons[i]) == 0) {
			metrics_finished_n[i]++;
			return;
		}
}

void
metrics_observe(enum metrics_hist which, uint64_t since)
{
	if (since != 0)
		metrics_observe_until(which, since, metrics_now());
}

void
metrics_observe_until(enum metrics_hist which, uint64_t since, uint64_t until)
{
	const struct metrics_hist_def *d = &metrics_hist_defs[which];
	struct metrics_buckets *h = &metrics_hists[which];
	uint64_t ns;
	size_t i;

	if (since == 0)
		return;
	ns = until > since ? until - since : 0;
	for (i = 0; i < d->nbounds && ns > d->bounds[i]; i++)
		;
	h->counts[i]++;
	h->sum_ns += ns;
}

static json_t *
metrics_family(const char *name, const char *type, const char *help)
{
	return json_pack("{s:s, s:s, s:s, s:[]}", "name", name, "type", type,
	    "help", help, "samples");
}

void
metrics_families(json_t *families)
{
	const struct metrics_hist_def *d;
	struct metrics_buckets *h;
	json_t *f, *buckets;
	uint64_t cum;
	size_t i, j;

	for (i = 0; i < METRICS_NCOUNTERS; i++) {
		f = metrics_family(metrics_counter_defs[i].name, "counter",
		    metrics_counter_defs[i].help);
		json_array_append_new(json_object_get(f, "samples"),
		    json_pack("{s:I}", "value",
		    (json_int_t)metrics_counters[i]));
		json_array_append_new(families, f);
	}
	f = metrics_family("stexec_tools_finished_total", "counter",
	    "Tools whose tool_result was sent, by its meta.reason (tools of "
	    "a discarded turn get none and are not counted).");
	for (i = 0; i < nitems(metrics_reasons); i++)
		json_array_append_new(json_object_get(f, "samples"),
		    json_pack("{s:{s:s}, s:I}", "labels", "reason",
		    metrics_reasons[i], "value",
		    (json_int_t)metrics_finished_n[i]));
	json_array_append_new(families, f);

	for (i = 0; i < METRICS_NHISTS; i++) {
		d = &metrics_hist_defs[i];
		h = &metrics_hists[i];
		buckets = json_array();
		for (j = cum = 0; j < d->nbounds; j++) {
			cum += h->counts[j];
			json_array_append_new(buckets, json_pack("{s:f, s:I}",
			    "le", (double)d->bounds[j] / S, "count",
			    (json_int_t)cum));
		}
		cum += h->counts[d->nbounds];
		json_array_append_new(families, json_pack("{s:s, s:s, s:s, "
		    "s:o, s:f, s:I}", "name", d->name, "type", "histogram",
		    "help", d->help, "buckets", buckets, "sum",
		    (double)h->sum_ns / S, "count", (json_int_t)cum));
	}
}

/*
 * "key=value" words: counters by key, meta.reasons as finished.REASON,
 * histograms as KEY.BOUND (ns; "inf" for the last bucket) and KEY.sum.
 * Keys this image does not know are dropped, so a reload into another
 * build keeps what both count.
 */
void
metrics_save_env(void)
{
	const struct metrics_hist_def *d;
	struct buf b = { 0 };
	size_t i, j;

	for (i = 0; i < METRICS_NCOUNTERS; i++)
		buf_printf(&b, "%s=%" PRIu64 " ", metrics_counter_defs[i].key,
		    metrics_counters[i]);
	for (i = 0; i < nitems(metrics_reasons); i++)
		buf_printf(&b, "finished.%s=%" PRIu64 " ", metrics_reasons[i],
		    metrics_finished_n[i]);
	for (i = 0; i < METRICS_NHISTS; i++) {
		d = &metrics_hist_defs[i];
		for (j = 0; j < d->nbounds; j++)
			buf_printf(&b, "%s.%" PRIu64 "=%" PRIu64 " ", d->key,
			    d->bounds[j], metrics_hists[i].counts[j]);
		buf_printf(&b, "%s.inf=%" PRIu64 " %s.sum=%" PRIu64 " ",
		    d->key, metrics_hists[i].counts[j], d->key,
		    metrics_hists[i].sum_ns);
	}
	buf_add(&b, "", 1);
	setenv(METRICS_ENV, b.data, 1);
	buf_free(&b);
}

/* The counter key names, or NULL. */
static uint64_t *
metrics_slot(const char *key, size_t klen)
{
	const struct metrics_hist_def *d;
	char word[64];
	size_t i, j, n;

	if (klen >= sizeof word)
		return NULL;
	memcpy(word, key, klen);
	word[klen] = '\0';
	for (i = 0; i < METRICS_NCOUNTERS; i++)
		if (strcmp(word, metrics_counter_defs[i].key) == 0)
			return &metrics_counters[i];
	for (i = 0; i < nitems(metrics_reasons); i++)
		if (strncmp(word, "finished.", 9) == 0 &&
		    strcmp(word + 9, metrics_reasons[i]) == 0)
			return &metrics_finished_n[i];
	for (i = 0; i < METRICS_NHISTS; i++) {
		d = &metrics_hist_defs[i];
		n = strlen(d->key);
		if (strncmp(word, d->key, n) != 0 || word[n] != '.')
			continue;
		if (strcmp(word + n + 1, "sum") == 0)
			return &metrics_hists[i].sum_ns;
		if (strcmp(word + n + 1, "inf") == 0)
			return &metrics_hists[i].counts[d->nbounds];
		for (j = 0; j < d->nbounds; j++)
			if (strtoull(word + n + 1, NULL, 10) == d->bounds[j])
				return &metrics_hists[i].counts[j];
	}
	return NULL;
}

void
metrics_load_env(void)
{
	const char *s = getenv(METRICS_ENV), *eq, *end;
	uint64_t *slot;

	for (; s != NULL && *s != '\0'; s = *end != '\0' ? end + 1 : end) {
		end = s + strcspn(s, " ");
		eq = memchr(s, '=', (size_t)(end - s));
		if (eq != NULL && (slot = metrics_slot(s, (size_t)(eq - s))) !=
		    NULL)
			*slot = strtoull(eq + 1, NULL, 10);
	}
	unsetenv(METRICS_ENV);
}
