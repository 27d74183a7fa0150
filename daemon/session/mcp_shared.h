/*
 * MCP servers of scope "daemon" (doc/design.md §7, Shared MCP servers): one
 * process per server of the operator's --mcp-config, started with the
 * daemon and shared by every session. Its sandbox is its config's (never
 * below --min-sandbox), its cwd its config's or a directory of its own
 * under the state directory, its roots that cwd. It knows nothing of
 * sessions: what they must hear (state, tools, a server's request) goes
 * up through hooks session_mcp.c registers.
 */
#ifndef STEXEC_MCP_SHARED_H
#define STEXEC_MCP_SHARED_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/tooldef.h"

struct event_base;
struct handover_in;
struct mcp_config;
struct mcp_server;
struct netpolicy;

struct mcp_shared_hooks {
	/* Its state or its tools changed: every session is told. */
	void (*state)(struct mcp_server *);
	void (*tools)(struct mcp_server *);
	/* sampling/createMessage or elicitation/create: route or refuse. */
	void (*request)(struct mcp_server *, const json_t *id,
	    const char *method, const json_t *params);
	/* Daemon exit, before it closes: the sessions let go of its calls. */
	void (*release)(struct mcp_server *);
};

struct mcp_shared_config {
	struct event_base *base;
	enum tooldef_sandbox_mode default_sandbox; /* --default-sandbox */
	enum tooldef_sandbox_mode min_sandbox;     /* --min-sandbox */
	const struct netpolicy *network_deny;      /* --network-deny */
	const json_t *base_env;  /* the daemon's environment */
	const char *state_dir;   /* a server without cwd runs in mcp-NAME */
	int64_t start_timeout_ms; /* --mcp-start-timeout-ms; 0: default */
	int64_t kill_grace_ms;   /* TERM to KILL, for the wait at exit */
	bool deferred;           /* a reload: started by mcp_shared_adopt */
};

void mcp_shared_set_hooks(const struct mcp_shared_hooks *);
/* Start the servers of scope "daemon" of c (borrowed: it outlives them). */
void mcp_shared_start(const struct mcp_config *c,
    const struct mcp_shared_config *);
/* The shared server of that name, or NULL (none, or the daemon stops). */
struct mcp_server *mcp_shared_find(const char *name);
size_t mcp_shared_count(void);
struct mcp_server *mcp_shared_get(size_t);
/*
 * Daemon exit (S18): each server's calls released, its stdin closed, then
 * TERM, then KILL to its group; the loop runs until they are gone (bounded
 * by the grace periods), then they are freed.
 */
void mcp_shared_stop(void);
/*
 * A reload, just before the exec, into the handover (JOURNAL_MCP): each
 * server carriable as it is (mcp_server_carriable) with its proxy; the
 * others' process groups are killed, to start afresh in the next image.
 */
void mcp_shared_handover(void);
/*
 * The next image, started with deferred: a record read back (kept until
 * mcp_shared_adopt; one naming no server of the config is killed); then
 * every server adopted or started, before the sessions take their calls
 * back; then the calls no session took cancelled.
 */
void mcp_shared_restore(const struct handover_in *, char *raw);
void mcp_shared_adopt(void);
void mcp_shared_adopted(void);

#endif
