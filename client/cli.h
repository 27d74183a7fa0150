/*
 * stexec-cli internals, shared by its files: cli.c (main, options, output
 * helpers), cli_cmd.c (one subcommand per method), cli_run.c (run) and
 * cli_watch.c (watch, and the event lines events prints), cli_jobs.c
 * (jobs, attach).
 */
#ifndef STEXEC_CLI_H
#define STEXEC_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stexec/client.h"

/* Exit statuses, as the usage text states them. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1   /* a request failed, or a tool's result is an error */
#define CLI_EXIT_USAGE 2  /* bad usage or arguments, daemon not reachable */
#define CLI_EXIT_INT 130  /* given up on Ctrl-C */

#define CLI_MAX_OPTS 64

/* A subcommand's arguments: positional ones and options, in order. */
struct cli_args {
	char **pos;
	int npos;
	struct {
		const char *name; /* without the leading "--" */
		const char *value; /* NULL for a flag */
	} opts[CLI_MAX_OPTS];
	int nopts;
};

struct cli {
	const char *cmd;     /* the subcommand, for messages */
	const char *socket;  /* --socket, or NULL for the default */
	bool json;           /* --json */
	bool out_tty;        /* stdout is a terminal */
	bool color;          /* ANSI colours on stdout */
	bool err_color;      /* ANSI colours on stderr */
	struct stexec *c;
	int interrupts;      /* Ctrl-C seen and handled by cli_next */
};

/* cli.c */
void	 cli_error(struct cli *, const char *, ...)
	     __attribute__((format(printf, 2, 3)));
int	 cli_connect(struct cli *);
int	 cli_call(struct cli *, const char *, json_t *, json_t **);
int	 cli_rpc_error(struct cli *, const char *, const struct stexec_error *);
int	 cli_parse_json(struct cli *, int, const char *, json_t **);
int	 cli_load_tools(struct cli *, const char *, json_t **);
const char *cli_opt(const struct cli_args *, const char *);
bool	 cli_flag(const struct cli_args *, const char *);
int	 cli_int_opt(struct cli *, const struct cli_args *, const char *,
	     long long, long long, long long *);
void	 cli_print_json(const json_t *);
const char *cli_sgr(const struct cli *, bool, const char *);
int	 cli_term_width(int);
void	 cli_fit(FILE *, const char *, size_t, int);
void	 cli_first_line(const char *, size_t, size_t, char *, size_t);
void	 cli_input_summary(const json_t *, char *, size_t);
void	 cli_catch_sigint(void);
int	 cli_next(struct cli *, json_t **);
int	 cli_next_wait(struct cli *, json_t **, int);
double	 cli_now(void);

/* cli_metrics.c, cli_top.c */
int	 cmd_metrics(struct cli *, struct cli_args *);
int	 cmd_top(struct cli *, struct cli_args *);

/* cli_cmd.c: 0, or an exit status. */
int	 cmd_ping(struct cli *, struct cli_args *);
int	 cmd_sessions(struct cli *, struct cli_args *);
int	 cmd_tools(struct cli *, struct cli_args *);
int	 cmd_mcp_servers(struct cli *, struct cli_args *);
int	 cmd_new(struct cli *, struct cli_args *);
int	 cmd_add(struct cli *, struct cli_args *);
int	 cmd_abort(struct cli *, struct cli_args *);
int	 cmd_discard(struct cli *, struct cli_args *);
int	 cmd_drain(struct cli *, struct cli_args *);
int	 cmd_status(struct cli *, struct cli_args *);
int	 cmd_permit(struct cli *, struct cli_args *);
int	 cmd_deny(struct cli *, struct cli_args *);
int	 cmd_close(struct cli *, struct cli_args *);
int	 cmd_stats(struct cli *, struct cli_args *);
int	 cmd_events(struct cli *, struct cli_args *);

/* cli_jobs.c */
int	 cmd_jobs(struct cli *, struct cli_args *);
int	 attach_main(struct cli *, struct cli_args *);

/* cli_run.c */
int	 run_main(struct cli *, struct cli_args *);

/* cli_bridge.c */
int	 bridge_main(struct cli *, struct cli_args *);

/* cli_mcp.c */
int	 mcp_main(struct cli *, struct cli_args *);

/* cli_watch.c */
int	 watch_main(struct cli *, struct cli_args *);
void	 watch_describe(const struct cli *, FILE *, const json_t *,
	     const char *);

#endif
