/*
 * stexecd: options, setup, the event loop, and an orderly shutdown
 * (doc/design.md §5).
 */
#include <errno.h>
#include <fcntl.h>
#include <event2/event.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "core/netpolicy.h"
#include "handover.h"
#include "net/conn.h"
#include "net/proxy.h"
#include "hooks/hooks.h"
#include "supervisor/cgroup.h"
#include "mcp/mcp.h"
#include "session/mcp_shared.h"
#include "session/journal.h"
#include "log.h"
#include "metrics.h"
#include "rpc/carry.h"
#include "rpc/methods.h"
#include "rpc/probe.h"
#include "notify.h"
#include "session/outdir.h"
#include "supervisor/proc.h"
#include "supervisor/netns.h"
#include "supervisor/reaper.h"
#include "session/registry.h"
#include "supervisor/sandbox.h"
#include "net/server.h"
#include "session/job.h"
#include "session/session.h"
#include "stexec/protocol.h"
#include "utf8.h"
#include "core/tooldef.h"
#include "supervisor/toolcg.h"
#include "util.h"

#ifndef STEXEC_LIBEXECDIR
#define STEXEC_LIBEXECDIR "/usr/local/libexec"
#endif

extern char **environ;

struct options {
	const char *socket;
	mode_t socket_mode;
	const char **tools_dirs;
	size_t ntools_dirs;
	const char **shell_allow;  /* --shell-allow-dir */
	size_t nshell_allow;
	const char *shell_env_file;
	const char *mcp_config;    /* --mcp-config */
	int64_t mcp_start_timeout_ms; /* --mcp-start-timeout-ms */
	int max_procs;
	const char *output_dir;
	size_t max_message;
	int kill_grace_ms;
	int client_grace_ms;
	const char *interrupt_message;
	size_t retention_bytes;
	unsigned max_sessions;
	unsigned max_tools_per_turn;
	int idle_exit_s;
	bool no_cgroup;
	bool measure_memory;
	unsigned max_conns;
	unsigned max_conns_per_uid;
	unsigned session_idle_s;
	uint64_t output_budget;
	bool other_uids;
	size_t max_result_bytes;
	bool safe_read_only;
	enum tooldef_sandbox_mode default_sandbox, min_sandbox;
	int pattern_deadline_ms;
	struct job_config jobs;
	struct tooldef_limits limits;
	const char *state_dir;    /* NULL: the default; "": no journal */
	const char *network_hosts;          /* --network-hosts */
	struct netpolicy *network_deny;     /* --network-deny rules */
	struct netpolicy *network_allow_max; /* --network-allow-max rules */
	struct hooks *hooks;                /* --hooks files, added up */
	int64_t hook_timeout_ms;            /* --hook-timeout-ms; 0: 600 s */
};

/* Long options without a letter (past every char getopt returns). */
#define MAIN_OPT_HOOKS 0x100
#define MAIN_OPT_HOOK_TIMEOUT 0x101
#define MAIN_OPT_MCP_START_TIMEOUT 0x102
#define MAIN_OPT_MEASURE_MEMORY 0x103

/* Descriptors the daemon holds besides connections and tools. */
#define MAIN_FDS_BASE 32
/* How long the new binary may take to say whether it reads the handover. */
#define MAIN_CHECK_MS 5000
/*
 * How long a reload waits for a tool to get past its exec (microseconds
 * of the child's own steps; more only for one stopped or starved there).
 */
#define MAIN_EXEC_WAIT_MS 100

static struct event_base *main_base;
/* Reload (SIGHUP): what to execute again, and how far it is. */
static char **main_argv;
static char main_exe[PATH_MAX];
static struct event *main_reload_ev;
static bool main_reloading;
static bool main_activated;
/* The new binary's answer to --check-handover, while it is asked. */
static pid_t main_check_pid;
static int main_check_fd = -1;
static struct event *main_check_timer;
/* This image's own id (initialize's server.instance). */
static char main_instance[33];

static void	usage(FILE *, int) __attribute__((noreturn));
static long	parse_number(const char *, const char *, long, long);
static void	parse_options(int, char **, struct options *);
static void	parse_network_rule(struct netpolicy **, bool, const char *);
static char	*find_tool_binary(void);
static json_t	*base_environment(void);
static char	*default_output_dir(void);
static int	make_dirs(const char *);
static void	main_share_outdir(const char *);
static void	on_signal(evutil_socket_t, short, void *);
static int	activated_socket(void);
static int	connection_cap(unsigned, unsigned *, unsigned *);
static json_t	*main_enforcement(const struct options *);
static char	*default_state_dir(void);
static void	main_journal(const char *, int, const char *);
static void	main_mcp_shared(const struct options *,
		    const struct session_config *, const char *, bool);
static const char *main_socket_id(int, const char *, char *, size_t);
static int	main_take_fd(const char *);
static void	main_reload(void);
static void	main_reload_cb(evutil_socket_t, short, void *);
static const char *main_instance_id(void);
static void	main_check(void);
static void	main_check_done(pid_t, int, void *);
static void	main_check_timeout(evutil_socket_t, short, void *);
static void	main_check_answer(int);
static void	main_reexec(void);
static void	main_signals(int);
static void	main_restore(char, const char *, size_t, void *);
static void	main_snapshot(void);
static void	main_snapshot_as(bool);
static void	main_instance_record(void);

static void
usage(FILE *f, int status)
{
	fprintf(f,
"usage: stexecd [options]\n"
"Run LLM agents' tools for clients speaking JSON-RPC over a Unix socket.\n"
"\n"
"  --socket PATH            listen here (default: $STEXEC_SOCKET, else\n"
"                           $XDG_RUNTIME_DIR/stexec/stexecd.sock, else\n"
"                           /run/stexec/stexecd.sock)\n"
"  --socket-mode MODE       socket permissions, octal (default 0600)\n"
"  --tools-dir DIR          load ToolDef *.json files from DIR (repeatable;\n"
"                           default: the built-in tools)\n"
"  --max-procs N            tool processes at once, all sessions (default 64)\n"
"  --output-dir DIR         where large outputs are saved whole\n"
"  --max-message BYTES      longest request line (default %u)\n"
"  --kill-grace-ms MS       SIGTERM to SIGKILL delay (default 2000)\n"
"  --mcp-config FILE        MCP servers every session runs (.mcp.json);\n"
"                           scope \"daemon\": one process all share\n"
"  --mcp-start-timeout-ms MS  how long a call waits for its MCP server to\n"
"                           be ready (default 30000; a server's\n"
"                           startTimeoutMs wins)\n"
"  --client-tool-grace-ms MS  how long a client-run call waits for a\n"
"                           connection to serve its name (default 30000;\n"
"                           0: until the call's own timeout)\n"
"  --interrupt-message TEXT result content of interrupted tools\n"
"  --retention-bytes BYTES  notification log budget per session\n"
"                           (default 4194304)\n"
"  --max-sessions N         open sessions at once (default 100000)\n"
"  --max-tools-per-turn N   tools one turn may hold (default 10000)\n"
"  --max-result-bytes BYTES largest maxResultBytes a tool may ask for\n"
"                           (default 16777216)\n"
"  --idle-exit SECONDS      when socket-activated, exit after this long\n"
"                           with no session and no client (default: never)\n"
"  --no-cgroup              keep tools out of a cgroup v2 subtree; the\n"
"                           sentinel alone kills them if the daemon dies\n"
"  --max-connections N      clients connected at once (default 4096; 0: no\n"
"                           cap but the descriptor limit)\n"
"  --max-connections-per-uid N\n"
"                           clients of one uid at once (default 1024; 0: no\n"
"                           cap)\n"
"  --session-idle-timeout SECONDS\n"
"                           close a session with no client, no subscriber\n"
"                           and no tool running after this long (default\n"
"                           3600; 0: never)\n"
"  --output-budget BYTES    bytes of whole-output files kept in the output\n"
"                           directory, oldest removed first (default\n"
"                           1073741824; 0: no budget)\n"
"  --allow-other-uids       a root daemon serves users other than root:\n"
"                           each user's tools run as that user (default:\n"
"                           refused, -32003)\n"
"  --state-dir DIR          keep the crash journal here, restore sessions\n"
"                           from it at start (default: $STATE_DIRECTORY\n"
"                           under systemd, /var/lib/stexec for root,\n"
"                           ~/.local/state/stexec; '': no journal)\n"
"  --safe-read-only         run every tool that is concurrency-safe for its\n"
"                           input and has no \"sandbox\" field read-only\n"
"                           (Landlock): recommended\n"
"  --default-sandbox MODE   read-only, workspace-write or none (default):\n"
"                           the profile of tools whose ToolDef and session\n"
"                           give none\n"
"  --pattern-deadline-ms MS a client's concurrencySafe pattern is first\n"
"                           compiled aside; one that takes longer is\n"
"                           refused (default 50)\n",
	    STEXEC_MAX_MESSAGE_DEFAULT);
	/* Two strings: C11 promises no more than 4095 bytes in one. */
	fputs(
"  --max-jobs-per-session N jobs (background tools) a session may run at\n"
"                           once (default 64)\n"
"  --job-output-bytes N     the last N bytes of a job's output are kept for\n"
"                           readJob (default 4194304)\n"
"  --min-sandbox MODE       the floor: no session or ToolDef may ask for\n"
"                           less; the daemon's own tools run at it\n"
"                           (default none)\n"
"  --memory-limit BYTES     per tool, for ToolDefs without limits.memoryBytes\n"
"  --max-processes N        per tool, for ToolDefs without\n"
"                           limits.maxProcesses\n"
"  --cpu-percent N          per tool (100: one CPU), for ToolDefs without\n"
"                           limits.cpuPercent (default: none of the three)\n"
"  --measure-memory         where cgroup v1 holds the memory controller, or\n"
"                           v2 on a kernel before 6.12, measure every\n"
"                           tool's peak memory, not only those with a\n"
"                           memory limit (costs each spawn a cgroup move\n"
"                           that holds up forks and exits on v1, a new\n"
"                           cgroup on v2)\n"
"  --network-deny RULE      no tool with network rules reaches RULE's\n"
"                           hosts, and sessions may not ask for network:\n"
"                           true (repeatable; a host, *.domain, address\n"
"                           or CIDR, :port or :lo-hi; see sandbox.network)\n"
"  --network-allow-max RULE each allow rule of a session or ToolDef (a\n"
"                           --tools-dir one too) must lie inside one of\n"
"                           these, and network: true is refused (repeatable)\n"
"  --network-hosts FILE     hosts(5) entries the network proxy reads\n"
"                           before DNS\n"
"  --shell-allow-dir DIR    the built-in bash's cwd may also stay in DIR\n"
"                           (repeatable; else it goes back to the\n"
"                           session's cwd)\n"
"  --shell-env-file FILE    sourced before each built-in bash command of\n"
"                           sessions that name no shell.envFile\n"
"  --hooks FILE             Claude Code hooks (a settings.json's \"hooks\")\n"
"                           every session runs; a session cannot remove\n"
"                           them (repeatable: they add up)\n"
"  --hook-timeout-ms N      a hook's timeout when it gives none (default\n"
"                           600000, Claude Code's)\n"
"  --log-level LEVEL        error, warn, info or debug (default info)\n"
"  --check-handover N       say whether this build reads a reload's\n"
"                           handover of format N (exit 0: yes), and exit\n"
"  --version, --help\n", f);
	exit(status);
}

/* One --network-deny or --network-allow-max RULE, added to *p. */
static void
parse_network_rule(struct netpolicy **p, bool deny, const char *rule)
{
	char err[512];

	if (*p == NULL)
		*p = netpolicy_new();
	if (!netpolicy_add(*p, deny, rule, err, sizeof err)) {
		fprintf(stderr, "stexecd: --network-%s: %s\n", deny ? "deny" :
		    "allow-max", err);
		exit(2);
	}
}

static long
parse_number(const char *opt, const char *s, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || *s == '\0' || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "stexecd: %s: expected a number from %ld to "
		    "%ld, got \"%s\"\n", opt, min, max, s);
		exit(2);
	}
	return v;
}

static void
parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "socket-mode", required_argument, NULL, 'm' },
		{ "tools-dir", required_argument, NULL, 't' },
		{ "max-procs", required_argument, NULL, 'p' },
		{ "output-dir", required_argument, NULL, 'o' },
		{ "max-message", required_argument, NULL, 'M' },
		{ "kill-grace-ms", required_argument, NULL, 'g' },
		{ "client-tool-grace-ms", required_argument, NULL, 'K' },
		{ "interrupt-message", required_argument, NULL, 'i' },
		{ "retention-bytes", required_argument, NULL, 'r' },
		{ "max-sessions", required_argument, NULL, 'S' },
		{ "max-tools-per-turn", required_argument, NULL, 'T' },
		{ "idle-exit", required_argument, NULL, 'I' },
		{ "no-cgroup", no_argument, NULL, 'G' },
		{ "measure-memory", no_argument, NULL,
		    MAIN_OPT_MEASURE_MEMORY },
		{ "max-connections", required_argument, NULL, 'C' },
		{ "max-connections-per-uid", required_argument, NULL, 'U' },
		{ "session-idle-timeout", required_argument, NULL, 'E' },
		{ "output-budget", required_argument, NULL, 'B' },
		{ "allow-other-uids", no_argument, NULL, 'A' },
		{ "max-result-bytes", required_argument, NULL, 'R' },
		{ "safe-read-only", no_argument, NULL, 'O' },
		{ "default-sandbox", required_argument, NULL, 'x' },
		{ "pattern-deadline-ms", required_argument, NULL, 'k' },
		{ "min-sandbox", required_argument, NULL, 'n' },
		{ "max-jobs-per-session", required_argument, NULL, 'J' },
		{ "job-output-bytes", required_argument, NULL, 'j' },
		{ "state-dir", required_argument, NULL, 'D' },
		{ "memory-limit", required_argument, NULL, 'L' },
		{ "max-processes", required_argument, NULL, 'P' },
		{ "cpu-percent", required_argument, NULL, 'c' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "network-deny", required_argument, NULL, 'y' },
		{ "network-allow-max", required_argument, NULL, 'Y' },
		{ "network-hosts", required_argument, NULL, 'N' },
		{ "shell-allow-dir", required_argument, NULL, 'W' },
		{ "shell-env-file", required_argument, NULL, 'F' },
		{ "hooks", required_argument, NULL, MAIN_OPT_HOOKS },
		{ "hook-timeout-ms", required_argument, NULL,
		    MAIN_OPT_HOOK_TIMEOUT },
		{ "mcp-config", required_argument, NULL, 'Q' },
		{ "mcp-start-timeout-ms", required_argument, NULL,
		    MAIN_OPT_MCP_START_TIMEOUT },
		{ "check-handover", required_argument, NULL, 'H' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char *end, herr[1024];
	long mode;
	int c, level;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket = optarg;
			break;
		case 'm':
			errno = 0;
			mode = strtol(optarg, &end, 8);
			if (errno != 0 || *end != '\0' || mode < 0 ||
			    mode > 0777 || (mode & 0600) != 0600) {
				fprintf(stderr, "stexecd: --socket-mode: "
				    "expected an octal mode with owner read "
				    "and write, like 0600 or 0660, got \"%s\"\n",
				    optarg);
				exit(2);
			}
			o->socket_mode = (mode_t)mode;
			break;
		case 't':
			o->tools_dirs = xreallocarray(o->tools_dirs,
			    o->ntools_dirs + 1, sizeof *o->tools_dirs);
			o->tools_dirs[o->ntools_dirs++] = optarg;
			break;
		case 'W':
			if (optarg[0] != '/' || o->nshell_allow >=
			    SESSION_SHELL_MAX_ALLOW) {
				fprintf(stderr, "stexecd: --shell-allow-dir: "
				    "expected an absolute path (at most %d of "
				    "them), got \"%s\"\n",
				    SESSION_SHELL_MAX_ALLOW, optarg);
				exit(2);
			}
			o->shell_allow = xreallocarray(o->shell_allow,
			    o->nshell_allow + 1, sizeof *o->shell_allow);
			o->shell_allow[o->nshell_allow++] = optarg;
			break;
		case MAIN_OPT_HOOKS:
			/* Policy: a file that does not parse stops the start. */
			if (o->hooks == NULL)
				o->hooks = hooks_new();
			if (hooks_add_file(o->hooks, optarg, herr,
			    sizeof herr) == -1) {
				fprintf(stderr, "stexecd: --hooks: %s\n", herr);
				exit(2);
			}
			break;
		case MAIN_OPT_HOOK_TIMEOUT:
			o->hook_timeout_ms = parse_number("--hook-timeout-ms",
			    optarg, 1, 86400000);
			break;
		case 'Q':
			o->mcp_config = optarg;
			break;
		case MAIN_OPT_MEASURE_MEMORY:
			o->measure_memory = true;
			break;
		case MAIN_OPT_MCP_START_TIMEOUT:
			o->mcp_start_timeout_ms = parse_number(
			    "--mcp-start-timeout-ms", optarg, 1,
			    MCP_START_TIMEOUT_MAX);
			break;
		case 'F':
			if (optarg[0] != '/') {
				fprintf(stderr, "stexecd: --shell-env-file: "
				    "expected an absolute path, got \"%s\"\n",
				    optarg);
				exit(2);
			}
			o->shell_env_file = optarg;
			break;
		case 'p':
			o->max_procs = (int)parse_number("--max-procs", optarg,
			    1, 100000);
			break;
		case 'o':
			o->output_dir = optarg;
			break;
		case 'M':
			o->max_message = (size_t)parse_number("--max-message",
			    optarg, 1024, 1L << 30);
			break;
		case 'g':
			o->kill_grace_ms = (int)parse_number("--kill-grace-ms",
			    optarg, 0, 600000);
			break;
		case 'K':
			o->client_grace_ms = (int)parse_number(
			    "--client-tool-grace-ms", optarg, 0, 86400000);
			break;
		case 'i':
			o->interrupt_message = optarg;
			break;
		case 'r':
			o->retention_bytes = (size_t)parse_number(
			    "--retention-bytes", optarg, 4096, 1L << 34);
			break;
		case 'S':
			o->max_sessions = (unsigned)parse_number(
			    "--max-sessions", optarg, 1, 10000000);
			break;
		case 'T':
			o->max_tools_per_turn = (unsigned)parse_number(
			    "--max-tools-per-turn", optarg, 1, 10000000);
			break;
		case 'I':
			o->idle_exit_s = (int)parse_number("--idle-exit", optarg,
			    1, 86400 * 365);
			break;
		case 'G':
			o->no_cgroup = true;
			break;
		case 'C':
			o->max_conns = (unsigned)parse_number(
			    "--max-connections", optarg, 0, 10000000);
			break;
		case 'U':
			o->max_conns_per_uid = (unsigned)parse_number(
			    "--max-connections-per-uid", optarg, 0, 10000000);
			break;
		case 'E':
			o->session_idle_s = (unsigned)parse_number(
			    "--session-idle-timeout", optarg, 0, 86400 * 365);
			break;
		case 'B':
			o->output_budget = (uint64_t)parse_number(
			    "--output-budget", optarg, 0, LONG_MAX);
			break;
		case 'A':
			o->other_uids = true;
			break;
		case 'R':
			o->max_result_bytes = (size_t)parse_number(
			    "--max-result-bytes", optarg, 1024, 2147483647);
			break;
		case 'O':
			o->safe_read_only = true;
			break;
		case 'J':
			o->jobs.max_per_session = (unsigned)parse_number(
			    "--max-jobs-per-session", optarg, 1, 100000);
			break;
		case 'j':
			o->jobs.output_bytes = (size_t)parse_number(
			    "--job-output-bytes", optarg, 4096, 1073741824);
			break;
		case 'k':
			o->pattern_deadline_ms = (int)parse_number(
			    "--pattern-deadline-ms", optarg, 0, 10000);
			break;
		case 'x':
		case 'n':
			if (tooldef_sandbox_mode(optarg) == TOOLDEF_SANDBOX_UNSET) {
				fprintf(stderr, "stexecd: --%s: expected "
				    "read-only, workspace-write or none, got "
				    "\"%s\"\n", c == 'x' ? "default-sandbox" :
				    "min-sandbox", optarg);
				exit(2);
			}
			*(c == 'x' ? &o->default_sandbox : &o->min_sandbox) =
			    tooldef_sandbox_mode(optarg);
			break;
		case 'D':
			o->state_dir = optarg;
			break;
		case 'y':
		case 'Y':
			parse_network_rule(c == 'y' ? &o->network_deny :
			    &o->network_allow_max, c == 'y', optarg);
			break;
		case 'N':
			o->network_hosts = optarg;
			break;
		case 'L':
			o->limits.memory_bytes = (uint64_t)parse_number(
			    "--memory-limit", optarg, TOOLDEF_MEMORY_MIN,
			    (long)TOOLDEF_MEMORY_MAX);
			break;
		case 'P':
			o->limits.max_processes = (uint64_t)parse_number(
			    "--max-processes", optarg, 1, TOOLDEF_PROCESSES_MAX);
			break;
		case 'c':
			o->limits.cpu_percent = (uint64_t)parse_number(
			    "--cpu-percent", optarg, 1, TOOLDEF_CPU_PERCENT_MAX);
			break;
		case 'l':
			if ((level = log_parse_level(optarg)) < 0) {
				fprintf(stderr, "stexecd: --log-level: expected "
				    "error, warn, info or debug, got \"%s\"\n",
				    optarg);
				exit(2);
			}
			log_set_level((enum log_level)level);
			break;
		case 'H':
			/* Asked by a reloading image before it executes us. */
			if (strtol(optarg, &end, 10) == HANDOVER_VERSION &&
			    *end == '\0' && *optarg != '\0') {
				printf("yes: stexecd %s reads handover format "
				    "%d\n", STEXEC_VERSION, HANDOVER_VERSION);
				exit(0);
			}
			printf("no: stexecd %s reads handover format %d only, "
			    "not \"%s\"\n", STEXEC_VERSION, HANDOVER_VERSION,
			    optarg);
			exit(1);
		case 'V':
			printf("stexecd %s (protocol %d)\n", STEXEC_VERSION,
			    STEXEC_PROTOCOL_VERSION);
			exit(0);
		case 'h':
			usage(stdout, 0);
		default:
			usage(stderr, 2);
		}
	}
	if (optind != argc) {
		fprintf(stderr, "stexecd: unexpected argument \"%s\"\n",
		    argv[optind]);
		usage(stderr, 2);
	}
}

/*
 * The built-in tools' executable: beside this one (the build tree, or an
 * install with both in one directory), else in libexecdir.
 */
static char *
find_tool_binary(void)
{
	char self[PATH_MAX], *dir, *path;
	ssize_t n;

	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) > 0) {
		self[n] = '\0';
		dir = dirname(self);
		xasprintf(&path, "%s/builtin/stexec-tool", dir);
		if (access(path, X_OK) == 0)
			return path;
		free(path);
		xasprintf(&path, "%s/stexec-tool", dir);
		if (access(path, X_OK) == 0)
			return path;
		free(path);
	}
	return xstrdup(STEXEC_LIBEXECDIR "/stexec-tool");
}

/* The daemon's environment, less what systemd gave the daemon itself. */
static json_t *
base_environment(void)
{
	static const char *drop[] = { "NOTIFY_SOCKET", "LISTEN_PID",
		"LISTEN_FDS", "LISTEN_FDNAMES", "WATCHDOG_PID", "WATCHDOG_USEC",
		"INVOCATION_ID", "JOURNAL_STREAM", "MANAGERPID",
		"SYSTEMD_EXEC_PID", "MONITOR_SERVICE_RESULT", "TRIGGER_UNIT" };
	json_t *env = json_object();
	char **e, *key;
	const char *eq;
	size_t i;

	for (e = environ; *e != NULL; e++) {
		if ((eq = strchr(*e, '=')) == NULL)
			continue;
		key = xstrndup(*e, (size_t)(eq - *e));
		for (i = 0; i < nitems(drop); i++)
			if (strcmp(key, drop[i]) == 0)
				break;
		if (i == nitems(drop))
			json_object_set_new(env, key, json_string(eq + 1));
		free(key);
	}
	return env;
}

/*
 * What initialize reports is enforced (extension): the sandbox profiles,
 * supervision and limits, as this host and these options have them.
 */
static json_t *
main_enforcement(const struct options *o)
{
	static const enum sandbox_profile profiles[] = {
		SANDBOX_READ_ONLY, SANDBOX_WORKSPACE_WRITE,
	};
	static const char *const names[] = {
		[SANDBOX_READ_ONLY] = "read-only",
		[SANDBOX_WORKSPACE_WRITE] = "workspace-write",
	};
	json_t *e = toolcg_capabilities(), *sb, *can = json_array();
	json_t *why = json_object();
	size_t i;

	for (i = 0; i < nitems(profiles); i++) {
		if (sandbox_can(profiles[i])) {
			json_array_append_new(can, json_string(names[profiles[i]]));
			continue;
		}
		json_object_set_new(why, names[profiles[i]],
		    json_string(sandbox_error(profiles[i])));
		log_warn("no %s sandbox: %s; such tools will be refused",
		    names[profiles[i]], sandbox_error(profiles[i]));
	}
	sb = json_pack("{s:o, s:s, s:s, s:b, s:i, s:b, s:b, s:b}",
	    "profiles", can,
	    "default", tooldef_sandbox_name(o->default_sandbox),
	    "floor", tooldef_sandbox_name(o->min_sandbox),
	    "safeReadOnly", o->safe_read_only,
	    "landlockAbi", sandbox_abi(),
	    "scopedSignals", sandbox_abi() >= 6,
	    "seccomp", sandbox_seccomp(),
	    "mountNamespace", sandbox_mount_ns());
	/* Network rules: namespaces, and a profile to hold the tool in. */
	json_object_set_new(sb, "networkRules", json_boolean(
	    netns_available() && json_array_size(can) > 0));
	if (!netns_available() || json_array_size(can) == 0) {
		json_object_set_new(why, "networkRules", json_string(
		    !netns_available() ? netns_error() : "no sandbox profile "
		    "can hold a tool here"));
		log_warn("no network rules: %s; tools with an allow-list will "
		    "be refused", !netns_available() ? netns_error() :
		    "no sandbox profile");
	}
	/* Older clients read readOnly: "landlock" or null and why. */
	json_object_set_new(sb, "readOnly", sandbox_can(SANDBOX_READ_ONLY) ?
	    json_string("landlock") : json_null());
	if (json_object_size(why) > 0) {
		json_object_set(sb, "whyNot", why);
		json_object_set_new(sb, "why", json_string(
		    sandbox_error(json_array_size(can) == 0 ?
		    SANDBOX_READ_ONLY : SANDBOX_WORKSPACE_WRITE)));
	}
	json_decref(why);
	json_object_set_new(e, "sandbox", sb);
	log_info("sandbox: %zu of 2 profiles (Landlock ABI %d), default %s, "
	    "floor %s", json_array_size(can), sandbox_abi(),
	    tooldef_sandbox_name(o->default_sandbox),
	    tooldef_sandbox_name(o->min_sandbox));
	return e;
}

/* Where the crash journal lives by default (README, Restarts). */
static char *
default_state_dir(void)
{
	const char *state = getenv("STATE_DIRECTORY");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char *dir;

	/* systemd may pass several, colon-separated: the first is ours. */
	if (state != NULL && *state == '/')
		dir = xstrndup(state, strcspn(state, ":"));
	else if (geteuid() == 0)
		dir = xstrdup("/var/lib/stexec");
	else if (xdg != NULL && *xdg == '/')
		xasprintf(&dir, "%s/stexec", xdg);
	else if (home != NULL && *home == '/')
		xasprintf(&dir, "%s/.local/state/stexec", home);
	else
		dir = NULL;
	return dir;
}

/* The earlier daemons the journal names, whose leftovers must die. */
static json_t *main_instances;

static void
main_restore(char kind, const char *data, size_t len, void *arg)
{
	json_t *rec;

	(void)arg;
	if (kind == JOURNAL_CONN) {
		carry_restore(data, len);
		return;
	}
	if (kind != JOURNAL_INSTANCE) {
		session_restore(kind, data, len);
		return;
	}
	if ((rec = json_loadb(data, len, 0, NULL)) != NULL)
		json_array_append_new(main_instances, rec);
}

/* Compaction: this daemon, then every session. */
static void
main_snapshot(void)
{
	main_snapshot_as(false);
}

/* whole: a reload's handover, streamed chunks with their text. */
static void
main_snapshot_as(bool whole)
{
	main_instance_record();
	session_journal_snapshot(whole);
}

/* This daemon: what a later one kills if it dies with tools running. */
static void
main_instance_record(void)
{
	json_t *rec = json_pack("{s:s, s:s?, s:I}", "token",
	    proc_instance_token(), "cgroup", cgroup_path(), "pid",
	    (json_int_t)getpid());
	char *text = json_dumps(rec, JSON_COMPACT);

	journal_append(JOURNAL_INSTANCE, text, strlen(text), NULL, 0);
	free(text);
	json_decref(rec);
}

/*
 * Open the journal, kill what the daemons it names left, restore their
 * sessions (from the handover of a reload when there is one, which is
 * newer than the journal), and start a fresh file with this daemon in it.
 */
/*
 * The path of the socket the daemon serves, as its journal knows it: the
 * one it will bind, else the one it was given (fd), as the kernel says.
 */
static const char *
main_socket_id(int fd, const char *path, char *buf, size_t len)
{
	struct sockaddr_un sa;
	socklen_t salen = sizeof sa;

	memset(&sa, 0, sizeof sa);
	if (path == NULL && fd != -1 && getsockname(fd, (struct sockaddr *)&sa,
	    &salen) == 0 && sa.sun_family == AF_UNIX && sa.sun_path[0] != '\0')
		path = sa.sun_path;
	snprintf(buf, len, "%s", path != NULL ? path : "");
	return buf;
}

/*
 * The journal of this socket; a journal of the layout before there was
 * one per socket ("journal") becomes the default socket's.
 */
static bool
main_journal_open(const char *dir, const char *socket)
{
	char name[32], old[PATH_MAX], new[PATH_MAX], deflt[PATH_MAX];
	char err[1024];
	struct stat st;

	journal_name(socket, name);
	snprintf(old, sizeof old, "%s/journal", dir);
	snprintf(new, sizeof new, "%s/%s", dir, name);
	if (server_default_path(NULL, deflt, sizeof deflt) != NULL &&
	    strcmp(deflt, socket) == 0 && stat(new, &st) != 0 &&
	    stat(old, &st) == 0 && rename(old, new) == 0)
		log_info("journal: %s is now %s, the journal of %s", old, new,
		    socket);
	if (journal_open(main_base, dir, name, err, sizeof err) != 0) {
		log_warn("no crash journal: %s", err);
		return false;
	}
	log_debug("journal: %s for %s", new, socket);
	return true;
}

static void
main_journal(const char *dir, int handover, const char *socket)
{
	struct journal_loaded got;
	const json_t *inst;
	unsigned restored, killed = 0, unclaimed;
	int64_t started = util_wall_ms();
	bool open_ok = false;
	size_t i;

	session_journal_init();
	if (dir != NULL && *dir != '\0')
		open_ok = main_journal_open(dir, socket);
	if (!open_ok && handover == -1)
		return;
	main_instances = json_array();
	if (handover != -1)
		journal_load_fd(handover, main_restore, NULL, &got);
	else
		journal_load(main_restore, NULL, &got);
	json_array_foreach(main_instances, i, inst)
		killed += proc_kill_instance(json_string_value(json_object_get(
		    inst, "token")) != NULL ? json_string_value(json_object_get(
		    inst, "token")) : "", json_string_value(json_object_get(
		    inst, "cgroup")), (long)json_integer_value(json_object_get(
		    inst, "pid")));
	if (handover == -1 && json_array_size(main_instances) > 0)
		metrics_count(METRICS_RESTARTS);
	json_decref(main_instances);
	restored = session_restore_done();
	carry_adopt();
	if ((unclaimed = handover_close_unclaimed()) > 0)
		log_warn("the reload's handover named %u descriptor(s) that no "
		    "record claimed: closed", unclaimed);
	if (got.dropped > 0 || got.torn)
		log_warn("%s: %u records read, %u corrupt stretch(es) "
		    "skipped%s", handover != -1 ? "the reload's handover" :
		    "the journal", got.records, got.dropped,
		    got.torn ? ", the last record cut short" : "");
	if (restored > 0 || killed > 0)
		log_info("restored %u session(s) from %s in %lld ms; killed %u "
		    "process(es) an earlier daemon left", restored, handover !=
		    -1 ? "the reload's handover" : dir, (long long)
		    (util_wall_ms() - started), killed);
	/*
	 * This daemon's token goes in now (a crash from here on must find its
	 * tools); the rewrite without what is closed waits for the loop, so
	 * that a large journal does not hold up serving.
	 */
	if (open_ok) {
		journal_set_snapshot(main_snapshot);
		main_instance_record();
		journal_compact_soon();
	}
}

/* A descriptor a reloading image passed in NAME, taken out of the env. */
static int
main_take_fd(const char *name)
{
	const char *v = getenv(name);
	char *end;
	long fd;

	if (v == NULL)
		return -1;
	fd = strtol(v, &end, 10);
	unsetenv(name);
	if (*end != '\0' || fd < 0 || fd > INT_MAX ||
	    fcntl((int)fd, F_SETFD, FD_CLOEXEC) != 0)
		return -1;
	return (int)fd;
}

/* New at every start and every reload: a client sees the image change. */
static const char *
main_instance_id(void)
{
	unsigned char r[16];
	struct timespec ts;
	size_t i;

	if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(r, &ts, sizeof r < sizeof ts ? sizeof r : sizeof ts);
	}
	for (i = 0; i < sizeof r; i++)
		snprintf(main_instance + 2 * i, 3, "%02x", r[i]);
	return main_instance;
}

/* The operator's MCP servers of scope "daemon", started once. */
static void
main_mcp_shared(const struct options *o, const struct session_config *scfg,
    const char *statedir, bool reload)
{
	struct mcp_shared_config c = {
		.base = main_base,
		.default_sandbox = scfg->default_sandbox,
		.min_sandbox = scfg->min_sandbox,
		.network_deny = scfg->network_deny,
		.base_env = scfg->base_env,
		.state_dir = statedir,
		.start_timeout_ms = o->mcp_start_timeout_ms,
		.kill_grace_ms = o->kill_grace_ms,
		/* A reload's handover may hold them: read it first. */
		.deferred = reload,
	};

	mcp_shared_start(session_mcp_operator_config(), &c);
}

/*
 * SIGHUP: execute the daemon's binary again (the installed one: an
 * upgrade takes effect) in this process (doc/design.md §7, Reload). The
 * binary is asked first whether it reads this image's handover
 * (main_check); only a yes goes on.
 */
static void
main_reload(void)
{
	if (main_reloading || main_check_pid != 0)
		return;
	if (main_exe[0] == '\0' || access(main_exe, X_OK) != 0) {
		log_error("SIGHUP: cannot reload: %s is not executable",
		    main_exe[0] != '\0' ? main_exe : "the daemon's binary");
		return;
	}
	main_check();
}

/*
 * Run the new binary with --check-handover, off the loop: its answer comes
 * through the reaper, and a binary that does not answer within
 * MAIN_CHECK_MS is killed and refused.
 */
static void
main_check(void)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none;
	char version[16], *argv[4];
	struct timeval tv = { MAIN_CHECK_MS / 1000, 0 };
	int fds[2], error;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0) {
		log_error("SIGHUP: cannot reload: pipe: %s", strerror(errno));
		return;
	}
	snprintf(version, sizeof version, "%d", HANDOVER_VERSION);
	argv[0] = main_exe;
	argv[1] = (char *)"--check-handover";
	argv[2] = version;
	argv[3] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	/* Not our blocked SIGCHLD (reaper.h): it starts as any program. */
	sigemptyset(&none);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	error = posix_spawn(&pid, main_exe, &fa, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (error != 0) {
		log_error("SIGHUP: reload refused: cannot run %s "
		    "--check-handover: %s; still serving", main_exe,
		    strerror(error));
		close(fds[0]);
		return;
	}
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	main_check_pid = pid;
	main_check_fd = fds[0];
	reaper_add(pid, main_check_done, NULL);
	evtimer_add(main_check_timer, &tv);
	log_info("SIGHUP: asking %s whether it reads handover format %d",
	    main_exe, HANDOVER_VERSION);
}

static void
main_check_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	/* Its end comes through the reaper, as a refusal. */
	if (main_check_pid != 0)
		kill(main_check_pid, SIGKILL);
}

static void
main_check_done(pid_t pid, int status, void *arg)
{
	(void)pid;
	(void)arg;
	evtimer_del(main_check_timer);
	main_check_pid = 0;
	main_check_answer(status);
}

static void
main_check_answer(int status)
{
	char answer[512];
	ssize_t n;

	n = read(main_check_fd, answer, sizeof answer - 1);
	close(main_check_fd);
	main_check_fd = -1;
	answer[n > 0 ? n : 0] = '\0';
	answer[strcspn(answer, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		log_error("SIGHUP: reload refused: %s cannot restore this "
		    "daemon's handover (format %d): %s; still serving",
		    main_exe, HANDOVER_VERSION, WIFSIGNALED(status) ?
		    "it did not answer in time" : answer[0] != '\0' ? answer :
		    "it does not know --check-handover");
		return;
	}
	main_reloading = true;
	log_info("SIGHUP: reloading %s (%s)", main_exe, answer);
	sd_notify(0, "RELOADING=1");
	event_active(main_reload_ev, EV_TIMEOUT, 1);
}

/*
 * The reload does not wait for tools: it waits only for what takes a
 * moment and has no state worth carrying, a tool between its main's end
 * and its result, a large result being encoded, a session being closed.
 */
static void
main_reload_cb(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tick = { 0, 2000 };

	(void)fd;
	(void)what;
	(void)arg;
	if (!proc_settled() || session_encoding() || session_closing()) {
		evtimer_add(main_reload_ev, &tick);
		return;
	}
	/* A call becomes a job once its exec happened (proc.h): known now. */
	proc_await_execs(MAIN_EXEC_WAIT_MS);
	session_jobs_yield_now();
	main_reexec();
}

/*
 * The signals the daemon handles: blocked across execve. SIGCHLD stays
 * blocked for good: the reaper reads it from a signalfd (reaper.h).
 */
static void
main_signals(int how)
{
	sigset_t set;

	sigemptyset(&set);
	if (how == SIG_BLOCK)
		sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(how, &set, NULL);
}

/*
 * The handover (doc/design.md §7, Reload): every session as it is now,
 * each running tool with its process (pipes, cgroup, output files kept
 * open), the sentinel and the cgroup subtree; then execve. Signals stay
 * blocked until the next image has taken all of it back, so a tool that
 * ends meanwhile is reaped by it, with its real result.
 */
static void
main_reexec(void)
{
	const char *path;
	char num[32], *sup;
	int mfd, old, lfd;
	struct stat st;

	main_signals(SIG_BLOCK);
	if ((mfd = memfd_create("stexec-handover", 0)) == -1) {
		log_error("cannot reload: memfd_create: %s", strerror(errno));
		main_reloading = false;
		main_signals(SIG_UNBLOCK);
		return;
	}
	/*
	 * A tool started a moment ago (by a yield above) may still be before
	 * its exec, whose failure only this image's memory would hold.
	 */
	proc_await_execs(MAIN_EXEC_WAIT_MS);
	hooks_run_kill_all();
	old = journal_redirect(mfd);
	main_snapshot_as(true);
	session_journal_handover();
	mcp_shared_handover();
	carry_save();
	journal_redirect_end(old);
	if (fstat(mfd, &st) != 0 || lseek(mfd, 0, SEEK_SET) != 0) {
		log_error("cannot reload: the handover could not be written");
		close(mfd);
		main_reloading = false;
		main_signals(SIG_UNBLOCK);
		return;
	}
	snprintf(num, sizeof num, "%d", mfd);
	setenv("STEXEC_HANDOVER_FD", num, 1);
	if ((lfd = server_socket(&path)) != -1 &&
	    fcntl(lfd, F_SETFD, 0) == 0) {
		snprintf(num, sizeof num, "%d", lfd);
		setenv("STEXEC_LISTEN_FD", num, 1);
		if (path != NULL)
			setenv("STEXEC_LISTEN_PATH", path, 1);
		if (main_activated)
			setenv("STEXEC_LISTEN_ACTIVATED", "1", 1);
	}
	sup = proc_handover_env();
	setenv("STEXEC_HANDOVER_SUPERVISOR", sup, 1);
	free(sup);
	setenv("STEXEC_HANDOVER_KEEP", handover_kept(), 1);
	log_info("reloading: %lld bytes handed over", (long long)st.st_size);
	/* What the clients were sent last (a drain's reply...) goes out. */
	conn_shutdown();
	journal_close();
	metrics_save_env();
	execv(main_exe, main_argv);
	log_error("cannot execute %s: %s; exiting: the next start restores "
	    "the sessions from the journal", main_exe, strerror(errno));
	_exit(1);
}

/* Disk, not tmpfs: whole outputs can be large. */
static char *
default_output_dir(void)
{
	const char *state = getenv("STATE_DIRECTORY");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	char *dir;

	if (state != NULL && *state == '/')
		xasprintf(&dir, "%s/output", state);
	else if (geteuid() == 0)
		dir = xstrdup("/var/lib/stexec/output");
	else if (xdg != NULL && *xdg == '/')
		xasprintf(&dir, "%s/stexec/output", xdg);
	else if (home != NULL && *home == '/')
		xasprintf(&dir, "%s/.local/state/stexec/output", home);
	else
		xasprintf(&dir, "/var/tmp/stexec-%u/output",
		    (unsigned)geteuid());
	return dir;
}

/*
 * Serving other users, whose tools run as them: they must reach their own
 * TMPDIR and whole-output files (0700 and 0600, theirs) in the output
 * directory, without listing it: 0711. Say so if a parent stops them.
 */
static void
main_share_outdir(const char *dir)
{
	char *p = xstrdup(dir), *slash;
	struct stat st;

	if (chmod(dir, 0711) != 0)
		log_warn("cannot let other users reach %s: %s", dir,
		    strerror(errno));
	while ((slash = strrchr(p, '/')) != NULL && slash != p) {
		*slash = '\0';
		if (stat(p, &st) == 0 && !(st.st_mode & S_IXOTH)) {
			log_warn("%s is not searchable by other users: their "
			    "tools cannot reach their TMPDIR in %s", p, dir);
			break;
		}
	}
	free(p);
}

/* Create dir and its missing parents (0700). */
static int
make_dirs(const char *dir)
{
	char *p = xstrdup(dir), *s;
	int rc = 0;

	for (s = p + 1; rc == 0 && (s = strchr(s, '/')) != NULL; s++) {
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			rc = -1;
		*s = '/';
	}
	if (rc == 0 && mkdir(p, 0700) != 0 && errno != EEXIST)
		rc = -1;
	free(p);
	return rc;
}

/*
 * The socket systemd passed us (Accept=no), or -1. It must be a listening
 * Unix stream socket; anything else is refused and we bind our own.
 */
static int
activated_socket(void)
{
	int n = sd_listen_fds(1), fd;

	if (n < 0) {
		log_error("socket activation: %s", strerror(-n));
		return -1;
	}
	if (n == 0)
		return -1;
	for (fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n; fd++) {
		if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
			if (n > 1)
				log_warn("socket activation: %d sockets "
				    "passed, using fd %d", n, fd);
			return fd;
		}
		log_error("socket activation: fd %d is not a listening Unix "
		    "stream socket; ignoring it", fd);
	}
	return -1;
}

/*
 * Raise the descriptor limit to the hard one, and cap connections so that
 * what the tools may need always stays free: idle clients can never make a
 * spawn fail. The cap, or -1 when the limit leaves no room at all.
 */
static int
connection_cap(unsigned wanted, unsigned *cap, unsigned *fds_room)
{
	struct rlimit rl;
	rlim_t reserve = proc_fds_needed() + MAIN_FDS_BASE, room;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		fatal("getrlimit: %s", strerror(errno));
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			log_warn("cannot raise the descriptor limit to %llu: %s",
			    (unsigned long long)rl.rlim_max, strerror(errno));
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= reserve) {
		log_error("the descriptor limit (%llu) leaves no room for "
		    "clients: --max-procs needs %llu; raise RLIMIT_NOFILE or "
		    "lower --max-procs", (unsigned long long)rl.rlim_cur,
		    (unsigned long long)reserve);
		return -1;
	}
	room = rl.rlim_cur == RLIM_INFINITY ? UINT_MAX : rl.rlim_cur - reserve;
	if (room > UINT_MAX)
		room = UINT_MAX;
	*fds_room = (unsigned)room;
	*cap = wanted;
	if (wanted == 0 || wanted > room) {
		*cap = (unsigned)room;
		if (wanted != 0)
			log_warn("--max-connections %u lowered to %u: the "
			    "descriptor limit is %llu and tools may need %llu",
			    wanted, *cap, (unsigned long long)rl.rlim_cur,
			    (unsigned long long)reserve);
	}
	return 0;
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	if (sig == SIGHUP) {
		main_reload();
		return;
	}
	log_info("%s: shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	event_base_loopbreak(main_base);
}

int
main(int argc, char **argv)
{
	struct options o = {
		.socket_mode = 0600,
		.max_procs = 64,
		.max_message = STEXEC_MAX_MESSAGE_DEFAULT,
		.kill_grace_ms = 2000,
		.client_grace_ms = 30000,
		.retention_bytes = 4 * 1024 * 1024,
		.max_sessions = 100000,
		.max_tools_per_turn = 10000,
		.max_conns = 4096,
		.max_conns_per_uid = 1024,
		.session_idle_s = 3600,
		.output_budget = 1024 * 1024 * 1024,
		.max_result_bytes = TOOLDEF_RESULT_CEILING_DEFAULT,
		.default_sandbox = TOOLDEF_SANDBOX_NONE,
		.pattern_deadline_ms = PROBE_DEADLINE_MS,
		.min_sandbox = TOOLDEF_SANDBOX_NONE,
	};
	struct proc_config pcfg = { 0 };
	struct session_config scfg = { 0 };
	struct mcp_config *mcp;
	struct methods_config mcfg = { 0 };
	struct proxy_config xcfg = { 0 };
	struct event *sigs[3];
	char err[1024], pathbuf[4096], *tool, *outdir, cwd[PATH_MAX];
	char *statedir, *listen_path = NULL, sockid[sizeof(struct sockaddr_un)];
	int handover, listen_fd, keep[3] = { -1, -1, -1 };
	char *supervisor = NULL;
	const char *path;
	bool activated;
	unsigned max_conns, fds_room;
	size_t i;
	int fd = -1;

	/*
	 * Blocks of 1 MiB or more mapped on their own at any time, not only
	 * until one is freed (glibc's threshold then grows to its size): a
	 * large result's buffers then grow without copies and go back to the
	 * kernel when freed, instead of staying resident as holes in the heap.
	 * The heap's top is trimmed past twice that, as glibc would.
	 */
	mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
	mallopt(M_TRIM_THRESHOLD, 2 * 1024 * 1024);
	parse_options(argc, argv, &o);
	signal(SIGPIPE, SIG_IGN);
	/* What a reload executes and hands over (main_reexec). */
	main_argv = argv;
	if (realpath("/proc/self/exe", main_exe) == NULL)
		main_exe[0] = '\0';
	/*
	 * Not dumpable: no process of our uid (an unsandboxed tool of a
	 * daemon that is not root) may ptrace us, read our memory, environ or
	 * descriptors through /proc, or get a core of them. Every execve
	 * (a reload's too) resets it, so it is set on each start.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == -1)
		log_warn("cannot make the daemon non-dumpable: %s",
		    strerror(errno));
	handover = main_take_fd("STEXEC_HANDOVER_FD");
	listen_fd = main_take_fd("STEXEC_LISTEN_FD");
	if (handover != -1) {
		/* Only what the image before named crosses; the rest goes. */
		keep[0] = handover;
		keep[1] = listen_fd;
		handover_close_others(getenv("STEXEC_HANDOVER_KEEP"), keep);
		if ((path = getenv("STEXEC_HANDOVER_SUPERVISOR")) != NULL)
			supervisor = xstrdup(path);
	}
	unsetenv("STEXEC_HANDOVER_KEEP");
	unsetenv("STEXEC_HANDOVER_SUPERVISOR");
	/* The counters go on across a reload (metrics.h). */
	metrics_load_env();
	if (handover != -1)
		metrics_count(METRICS_RELOADS);
	if ((path = getenv("STEXEC_LISTEN_PATH")) != NULL)
		listen_path = xstrdup(path);
	main_activated = getenv("STEXEC_LISTEN_ACTIVATED") != NULL;
	unsetenv("STEXEC_LISTEN_PATH");
	unsetenv("STEXEC_LISTEN_ACTIVATED");
	if ((main_base = event_base_new()) == NULL)
		fatal("cannot create the event loop");

	outdir = o.output_dir != NULL ? xstrdup(o.output_dir) :
	    default_output_dir();
	/* Both reach clients in results, which must be valid UTF-8. */
	if (!utf8_valid(outdir, strlen(outdir)) ||
	    (o.interrupt_message != NULL && !utf8_valid(o.interrupt_message,
	    strlen(o.interrupt_message)))) {
		log_error("the output directory and --interrupt-message must "
		    "be valid UTF-8: results show them to clients");
		free(outdir);
		return 1;
	}
	if (make_dirs(outdir) != 0) {
		log_error("cannot create output directory %s: %s", outdir,
		    strerror(errno));
		free(outdir);
		return 1;
	}
	if (o.other_uids && geteuid() == 0)
		main_share_outdir(outdir);
	pcfg.kill_grace_ms = o.kill_grace_ms;
	pcfg.leftover_grace_ms = 100;
	pcfg.max_procs = o.max_procs;
	pcfg.output_dir = outdir;
	pcfg.guard = true;
	pcfg.no_cgroup = o.no_cgroup;
	pcfg.measure_memory = o.measure_memory;
	pcfg.output_file_max = o.output_budget;
	pcfg.handover = supervisor;
	outdir_init(main_base, outdir, o.output_budget);
	if (proc_init(main_base, &pcfg, err, sizeof err) != 0) {
		log_error("%s", err);
		return 1;
	}
	if (connection_cap(o.max_conns, &max_conns, &fds_room) != 0)
		return 1;

	tooldef_set_result_ceiling(o.max_result_bytes);
	if (o.ntools_dirs == 0) {
		tool = find_tool_binary();
		if (registry_load_builtin(tool, err, sizeof err) != 0)
			fatal("%s", err);
		log_debug("built-in tools use %s", tool);
		free(tool);
	}
	for (i = 0; i < o.ntools_dirs; i++)
		if (registry_load_dir(o.tools_dirs[i], err, sizeof err) != 0) {
			log_error("%s", err);
			return 1;
		}

	scfg.retention_bytes = o.retention_bytes;
	scfg.max_sessions = o.max_sessions;
	scfg.max_tools_per_turn = o.max_tools_per_turn;
	scfg.interrupt_message = o.interrupt_message;
	scfg.base_env = base_environment();
	scfg.base_cwd = getcwd(cwd, sizeof cwd) != NULL ? cwd : "/";
	scfg.other_uids = o.other_uids;
	scfg.base = main_base;
	scfg.idle_timeout_s = o.session_idle_s;
	scfg.safe_read_only = o.safe_read_only;
	scfg.default_sandbox = o.default_sandbox;
	scfg.min_sandbox = o.min_sandbox;
	scfg.limits = o.limits;
	scfg.network_deny = o.network_deny;
	scfg.network_allow_max = o.network_allow_max;
	scfg.shell.def = o.ntools_dirs == 0 ? registry_find("bash") : NULL;
	scfg.shell.allow = o.shell_allow;
	scfg.shell.nallow = o.nshell_allow;
	scfg.shell.env_file = o.shell_env_file;
	scfg.kill_grace_ms = o.kill_grace_ms;
	scfg.client_grace_ms = o.client_grace_ms;
	scfg.output_dir = outdir;
	scfg.mcp_start_timeout_ms = o.mcp_start_timeout_ms;
	session_init(&scfg);
	session_hook_config(o.hooks, o.hook_timeout_ms, outdir);
	if (o.mcp_config != NULL) {
		/* Every session runs the operator's MCP servers. */
		if ((mcp = mcp_config_load(o.mcp_config, err, sizeof err)) ==
		    NULL) {
			log_error("--mcp-config: %s", err);
			return 1;
		}
		session_mcp_set_operator(mcp);
	}
	/* The operator's own tools stay within the operator's network rules. */
	for (i = 0; i < registry_count(); i++)
		if (!session_network_allowed(tooldef_sandbox(registry_get(i)),
		    err, sizeof err)) {
			log_error("tool %s: %s", tooldef_name(registry_get(i)),
			    err);
			return 1;
		}
	xcfg.base = main_base;
	xcfg.hosts_file = o.network_hosts;
	/* Clients and proxied connections draw on the same descriptors: the
	 * proxy may hold half of them, clients all (a client takes one). */
	xcfg.max_conns_daemon = fds_room / 2 / PROXY_CONN_FDS;
	if (!proxy_init(&xcfg, err, sizeof err)) {
		log_error("%s", err);
		return 1;
	}
	conn_init(main_base, o.max_message, &methods_conn_ops);
	conn_set_limits(max_conns, o.max_conns_per_uid);
	mcfg.max_message = o.max_message;
	mcfg.enforcement = main_enforcement(&o);
	mcfg.instance = main_instance_id();
	conn_set_peer_check(proc_sandboxed_peer);
	conn_set_before_write(journal_flush);
	probe_set_deadline(o.pattern_deadline_ms);
	job_init(main_base, &o.jobs);
	methods_init(&mcfg);

	/*
	 * Which socket this daemon serves, before it listens: its journal is
	 * that socket's, and every session in it is restored (and what an
	 * earlier daemon left is killed) before a client can connect.
	 */
	if (listen_fd != -1)
		/* A reload: the socket never closed. */
		activated = main_activated;
	else if ((activated = (fd = activated_socket()) >= 0))
		main_activated = true;
	else if ((path = server_default_path(o.socket, pathbuf,
	    sizeof pathbuf)) == NULL) {
		log_error("the default socket path is too long: give --socket");
		return 1;
	}
	statedir = o.state_dir != NULL ? xstrdup(o.state_dir) :
	    default_state_dir();
	/* Shared MCP servers start with the daemon, before its sessions. */
	main_mcp_shared(&o, &scfg, statedir, handover != -1);
	main_journal(statedir, handover, main_socket_id(listen_fd != -1 ?
	    listen_fd : fd, listen_fd != -1 ? listen_path : path, sockid,
	    sizeof sockid));
	/* Any the handover did not bring (session_restore_done adopts). */
	mcp_shared_adopt();
	if (handover != -1) {
		close(handover);
		/* What ended during the exec is reaped now, as if it were
		 * just now. */
		proc_adopted();
	}
	/*
	 * Once the socket takes connections a client may stop us at once:
	 * a SIGTERM before its event exists waits, and then ends us cleanly.
	 */
	main_signals(SIG_BLOCK);
	if (listen_fd != -1) {
		path = listen_path != NULL ? listen_path : "the inherited socket";
		server_start(main_base, listen_fd, listen_path);
	} else if (activated) {
		path = "the socket systemd passed";
		server_start(main_base, fd, NULL);
	} else {
		fd = server_listen(path, o.socket_mode, err, sizeof err);
		if (fd < 0) {
			log_error("%s", err);
			return 1;
		}
		server_start(main_base, fd, path);
	}
	notify_init(main_base, activated, o.idle_exit_s);

	sigs[0] = evsignal_new(main_base, SIGTERM, on_signal, NULL);
	sigs[1] = evsignal_new(main_base, SIGINT, on_signal, NULL);
	sigs[2] = evsignal_new(main_base, SIGHUP, on_signal, NULL);
	main_reload_ev = evtimer_new(main_base, main_reload_cb, NULL);
	main_check_timer = evtimer_new(main_base, main_check_timeout, NULL);
	for (i = 0; i < nitems(sigs); i++)
		event_add(sigs[i], NULL);
	/* A reload blocked them across execve; all is taken back now. */
	main_signals(SIG_UNBLOCK);

	log_info("serving %zu tools on %s", registry_count(), path);
	notify_ready();
	event_base_dispatch(main_base);

	/* Stop accepting, kill every tool, tell the clients, flush, exit. */
	notify_stopping();
	notify_free();
	server_stop();
	mcp_shared_stop();
	session_shutdown();
	session_mcp_set_operator(NULL);
	proxy_shutdown();
	netpolicy_free(o.network_deny);
	netpolicy_free(o.network_allow_max);
	journal_close();
	free(statedir);
	outdir_shutdown();
	conn_shutdown();
	for (i = 0; i < nitems(sigs); i++)
		event_free(sigs[i]);
	registry_free();
	json_decref(scfg.base_env);
	json_decref(mcfg.enforcement);
	event_free(main_reload_ev);
	event_free(main_check_timer);
	free(listen_path);
	free(supervisor);
	free(o.tools_dirs);
	free(o.shell_allow);
	free(outdir);
	event_base_free(main_base);
	log_info("stopped");
	return 0;
}
