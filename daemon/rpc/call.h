/*
 * One request being answered, and the parameter checks every method file
 * shares (methods.c): each sends the -32602 naming the field and returns
 * false (NULL) when the parameter is wrong.
 */
#ifndef STEXEC_CALL_H
#define STEXEC_CALL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct conn;
struct session;

struct call {
	struct conn *c;
	const json_t *id;
	const json_t *params; /* an object (possibly empty) */
};

void	methods_bad_param(struct call *, const char *, const char *, ...)
	    __attribute__((format(printf, 3, 4)));
bool	methods_param_string(struct call *, const char *, bool required,
	    const char **);
bool	methods_param_uint(struct call *, const char *, uint64_t min,
	    uint64_t max, bool required, uint64_t *);
struct session *methods_param_session(struct call *);

/* The job methods (job_methods.c; doc/design.md §7, Jobs). */
void	job_methods_list(struct call *);
void	job_methods_read(struct call *);
void	job_methods_write(struct call *);
void	job_methods_signal(struct call *);
void	job_methods_resize(struct call *);
void	job_methods_write_stdin(struct call *);

#endif
