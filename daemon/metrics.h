/*
 * What operators count (the metrics method): counters and histograms kept
 * by a few calls at the places things happen. An observation is O(1) and
 * allocates nothing; the daemon's hot path (a tool's spawn, exit and
 * result) pays a clock read and a few additions. Gauges are not kept here:
 * the metrics method reads them from their owners when asked
 * (rpc/gauges.c). Every layer may call this module; it calls none.
 */
#ifndef STEXEC_METRICS_H
#define STEXEC_METRICS_H

#include <jansson.h>
#include <stdint.h>
#include <time.h>

enum metrics_counter {
	METRICS_TOOLS_STARTED,  /* tool processes started */
	METRICS_CONN_ACCEPTED,
	METRICS_CONN_REFUSED,   /* over a connection cap, or a sandboxed peer */
	METRICS_RESTARTS,       /* starts that found an earlier daemon's journal */
	METRICS_RELOADS,        /* SIGHUP re-executions */
	METRICS_NET_ALLOWED,    /* proxy connections made for a tool */
	METRICS_NET_REFUSED,    /* ... refused by its policy or a bound */
	METRICS_NET_FAILED,     /* ... allowed, not resolved or connected */
	METRICS_NCOUNTERS,
};

enum metrics_hist {
	METRICS_START_DELAY,    /* addTool -> the process started */
	METRICS_RUN,            /* the process started -> all of it ended */
	METRICS_DELIVERY,       /* all of it ended -> its tool_result sent */
	METRICS_NHISTS,
};

/* A monotonic stamp in ns, never 0 (0 means "not stamped"). */
uint64_t metrics_now(void);
void metrics_count(enum metrics_counter);
/* A tool_result was sent, with this meta.reason. */
void metrics_finished(const char *reason);
/* A hook ran: its outcome as meta.hooks names it. */
void metrics_hook(const char *outcome);
/* The time from the stamp since until now; since 0 is not observed. */
void metrics_observe(enum metrics_hist, uint64_t since);
/* The same until the stamp until (not before since). */
void metrics_observe_until(enum metrics_hist, uint64_t since, uint64_t until);
/* A CLOCK_MONOTONIC time as a stamp of metrics_now's. */
uint64_t metrics_stamp(const struct timespec *);

/*
 * The counters and histograms as metric families (PROTOCOL.md, metrics),
 * appended to families.
 */
void metrics_families(json_t *families);

/*
 * Counters go on across a reload, as they do for a scraper that sees the
 * same pid: the next image finds them in the environment.
 */
void metrics_save_env(void);
void metrics_load_env(void);

#endif
