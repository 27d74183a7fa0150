/* The JSON-RPC methods of doc/design.md §3: params checked, then carried out. */
#ifndef STEXEC_METHODS_H
#define STEXEC_METHODS_H

#include <jansson.h>
#include <stdint.h>

struct conn;

struct methods_config {
	size_t max_message;
	uint64_t start_ms;  /* CLOCK_MONOTONIC at startup */
	json_t *enforcement; /* initialize's capabilities.enforcement */
	const char *instance; /* initialize's server.instance: this image's
	                         own, new at every start and reload */
};

void methods_init(const struct methods_config *);
/* One request (id set) or client notification (id NULL). */
void methods_call(struct conn *, const char *method, const json_t *id,
    const json_t *params);
/* What connections call upward: methods_call and the session's hooks. */
extern const struct conn_ops methods_conn_ops;

#endif
