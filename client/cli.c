/*
 * stexec-cli: the command-line client of stexecd, for a person at a
 * terminal and for scripts (--json). This file holds main, the command
 * table with every help text, option parsing and the helpers the
 * subcommands share: connecting, calls that report errors the same way,
 * JSON arguments, colour, and a wait that Ctrl-C can interrupt.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#ifndef STEXEC_VERSION
#define STEXEC_VERSION "unknown"
#endif

struct cli_cmd {
	const char *name;
	const char *synopsis;
	const char *summary;
	const char *help;     /* details, options, examples */
	const char *opts;     /* "name=" takes a value, "name" is a flag; ',' */
	int min, max;         /* positional arguments; max -1: any */
	int (*fn)(struct cli *, struct cli_args *);
};

static const struct cli_cmd cli_cmds[] = {
	{ "run", "TOOL JSON [TOOL JSON]... [--max-parallel N] [--cwd DIR] "
	  "[--tools FILE.json] [--allow] [--background]",
	  "run tools in a new session and print their results",
	  "Creates a session in the current directory (--cwd: another), adds\n"
	  "every tool call to one turn, prints each result in order as it is\n"
	  "delivered, drains the turn and closes the session. The built-in\n"
	  "bash keeps its working directory from call to call: a `cd` in one\n"
	  "bash call holds for the calls after it.\n"
	  "\n"
	  "On a terminal, stderr shows a live line per tool not yet delivered:\n"
	  "running (with its elapsed time), queued, or done and waiting for\n"
	  "the results before it; streamed output appears as it comes,\n"
	  "prefixed [ID NAME]. When stderr is not a terminal, the same\n"
	  "changes are plain lines ('[t1 bash] started', '... finished after\n"
	  "0.532s').\n"
	  "\n"
	  "Results go to stdout, headed on a terminal. Piped, one tool's\n"
	  "result is its bare content; with several, each is headed, as\n"
	  "head(1) heads files, by a line\n"
	  "  ==> ID NAME (REASON, 0.012s, N lines) <==\n"
	  "('error: REASON' for an error result) followed by exactly N lines,\n"
	  "a blank line between results. --json is the machine format: one\n"
	  "tool_result per line.\n"
	  "\n"
	  "Ctrl-C interrupts the turn (tools that can be cancelled are\n"
	  "stopped), a second Ctrl-C cancels it (every tool is killed), a\n"
	  "third gives up at once. Exit status: 0; 1 if any result is an\n"
	  "error; 130 after a Ctrl-C.\n"
	  "\n"
	  "bash_session runs each command in the session's one live shell,\n"
	  "so what one call sets (cd, exports, functions) the next sees:\n"
	  "several bash_session calls in one run share it; the shell ends\n"
	  "when run closes the session.\n"
	  "\n"
	  "  --max-parallel N  most tools executing at once (default 10)\n"
	  "  --cwd DIR         the tools' working directory (default: the\n"
	  "                    current directory, not the daemon's)\n"
	  "  --tools FILE.json session tools besides the daemon's (see new)\n"
	  "  --allow           grant every permission request (default: deny)\n"
	  "  --background      run each call as a job (PROTOCOL.md §4, Jobs),\n"
	  "                    through its ToolDef's backgroundFromInput field\n"
	  "                    (bash: run_in_background); a call still running\n"
	  "                    once its result comes prints 'SESSION JOB' on\n"
	  "                    stdout, and the session stays open for it (see\n"
	  "                    jobs, attach; close ends it)\n"
	  "  --json            print each tool_result's params, one per line\n"
	  "\n"
	  "Examples:\n"
	  "  stexec-cli run bash '{\"command\":\"ls\"}'\n"
	  "  read S J < <(stexec-cli run --background bash \\\n"
	  "      '{\"command\":\"python3 -m http.server\"}')\n"
	  "  stexec-cli run read_file '{\"file_path\":\"/etc/hostname\"}' \\\n"
	  "      bash '{\"command\":\"uname -a\"}'\n"
	  "  stexec-cli run bash_session '{\"command\":\"cd /tmp; X=1\"}' \\\n"
	  "      bash_session '{\"command\":\"pwd; echo $X\"}'\n",
	  "max-parallel=,cwd=,tools=,allow,background", 2, -1, run_main },
	{ "watch", "SESSION [--since N]",
	  "follow a session live: events, results, a timeline",
	  "Prints a line per notification as it arrives, with the time since\n"
	  "the watch began, and at the end of each turn a timeline of what\n"
	  "ran when (one row per tool, '█' while it executed). Starts with\n"
	  "what the session still retains (events from before the watch are\n"
	  "marked 'replay').\n"
	  "Ends when the session is closed, or on Ctrl-C. Colour only when\n"
	  "stdout is a terminal and NO_COLOR is not set.\n"
	  "\n"
	  "  --since N  start after notification seq N (default: the oldest\n"
	  "             retained; -1: only new ones)\n"
	  "  --json     print each notification as received, one per line\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli watch s-1f3a9c0d5e7b2a64\n",
	  "since=", 1, 1, watch_main },
	{ "bridge", "", "relay stdin/stdout to the daemon's socket",
	  "Copies stdin to the daemon's socket and what the daemon sends to\n"
	  "stdout, byte for byte, until the daemon closes the connection (end\n"
	  "of stdin closes our side of it, like a client hanging up). A\n"
	  "frontend on another host or in a container speaks the protocol\n"
	  "(protocol/PROTOCOL.md) through it. Exit status 2 when the daemon\n"
	  "cannot be reached.\n"
	  "\n"
	  "Examples:\n"
	  "  ssh build-host stexec-cli bridge\n"
	  "  kubectl exec -i POD -- stexec-cli bridge\n"
	  "  echo '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}' | "
	  "stexec-cli bridge\n",
	  "", 0, 0, bridge_main },
	{ "mcp", "[--cwd DIR] [--tools FILE.json] [--max-parallel N] [--allow]",
	  "serve a session's tools to an MCP client on stdio",
	  "An MCP server (stdio transport) backed by one new session: the\n"
	  "client lists the session's tools with tools/list and runs them with\n"
	  "tools/call. Calls made together run as one turn under the daemon's\n"
	  "rules: read-only tools in parallel, the others alone, results in\n"
	  "call order; a failing bash call cancels the calls beside it. A\n"
	  "progressToken gets notifications/progress with the tool's progress\n"
	  "and streamed output; notifications/cancelled interrupts the turn\n"
	  "the call is in (the calls beside it that can be cancelled end as\n"
	  "interrupted). The session closes when stdin ends. Nothing but MCP\n"
	  "messages is written to stdout; errors go to stderr.\n"
	  "\n"
	  "  --cwd DIR          the tools' working directory (default: this one)\n"
	  "  --tools FILE.json  session tools besides the daemon's\n"
	  "  --max-parallel N   most tools executing at once (default 10)\n"
	  "  --allow            grant permission requests (default: deny)\n"
	  "\n"
	  "Example (an MCP client's server entry):\n"
	  "  {\"command\": \"stexec-cli\", \"args\": [\"mcp\"]}\n",
	  "cwd=,tools=,max-parallel=,allow", 0, 0, mcp_main },
	{ "ping", "", "check that stexecd answers",
	  "Prints the daemon's version, its socket and the round-trip time.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli ping\n",
	  "", 0, 0, cmd_ping },
	{ "sessions", "", "list the open sessions",
	  "One line per session: its id, current turn, and how many of the\n"
	  "turn's tools have no delivered result yet.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli sessions\n",
	  "", 0, 0, cmd_sessions },
	{ "tools", "[SESSION]", "list the tools of the daemon or a session",
	  "One line per tool: its name, whether it is concurrency-safe (yes,\n"
	  "no, or 'rule' when it depends on the input), and the first line of\n"
	  "its description. With --json, the full ToolDefs.\n"
	  "\n"
	  "Examples:\n"
	  "  stexec-cli tools\n"
	  "  stexec-cli --json tools | jq '.tools[].name'\n",
	  "", 0, 1, cmd_tools },
	{ "mcp-servers", "SESSION", "show the MCP servers of a session",
	  "One line per MCP server the session runs (the operator's\n"
	  "--mcp-config and its own): its name, state (starting, ready,\n"
	  "failed, restarting), scope (session, or daemon: one process\n"
	  "every session shares), tools, calls in flight, restarts and,\n"
	  "when it failed or restarts, why (with the tail of its stderr). With\n"
	  "--json, the whole listTools result (its mcpServers).\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli mcp-servers s-0123456789abcdef\n",
	  "", 1, 1, cmd_mcp_servers },
	{ "new", "[--max-parallel N] [--cwd DIR] [--env K=V]... "
	  "[--tools FILE.json]",
	  "create a session and print its id",
	  "  --max-parallel N   most tools executing at once, 1..256 (default "
	  "10)\n"
	  "  --cwd DIR          the session's working directory (default: the\n"
	  "                     daemon's)\n"
	  "  --env K=V          set a variable for its tools; --env K unsets "
	  "it\n"
	  "  --tools FILE.json  session tools: an array of ToolDefs (or one)\n"
	  "\n"
	  "Example:\n"
	  "  S=$(stexec-cli new --cwd ~/proj --env CI=1)\n",
	  "max-parallel=,cwd=,env=,tools=", 0, 0, cmd_new },
	{ "add", "SESSION TOOL JSON [--id ID]",
	  "add a tool call to the session's current turn",
	  "JSON is the tool's input. Prints the tool-use id (generated unless\n"
	  "--id is given), the turn, its status and whether it is\n"
	  "concurrency-safe. Results go to subscribers: see watch, drain,\n"
	  "events.\n"
	  "\n"
	  "  --id ID  the tool-use id (unique in the turn)\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli add $S bash '{\"command\":\"make\"}' --id build\n",
	  "id=", 3, 3, cmd_add },
	{ "abort", "SESSION [--cancel]", "interrupt the current turn",
	  "Queued tools never start, running tools that can be cancelled are\n"
	  "killed; tools that must not be interrupted finish. With --cancel\n"
	  "(a hard abort) every unfinished tool is killed. The turn still has\n"
	  "to be drained.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli abort $S --cancel\n",
	  "cancel", 1, 1, cmd_abort },
	{ "discard", "SESSION", "throw the current turn away",
	  "Nothing more of the turn is delivered and the next turn begins.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli discard $S\n",
	  "", 1, 1, cmd_discard },
	{ "drain", "SESSION", "end the turn once every result is delivered",
	  "Waits until every tool of the current turn has delivered its\n"
	  "result, then prints the turn and how many results it delivered.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli drain $S\n",
	  "", 1, 1, cmd_drain },
	{ "status", "SESSION", "show the current turn's tools",
	  "A table of the turn's tools in add order: id, name, status\n"
	  "(queued, waiting_permission, executing, completed, delivered),\n"
	  "whether it is concurrency-safe, and the pid while it runs.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli status $S\n",
	  "", 1, 1, cmd_status },
	{ "jobs", "SESSION", "list the session's jobs",
	  "A table of the session's jobs (tool calls that run on after their\n"
	  "result, PROTOCOL.md §4, Jobs): id, status (running, exited,\n"
	  "killed), pid while it runs, exit code or signal, bytes of output,\n"
	  "when it started, whether it has a terminal, its tool and command.\n"
	  "With --json, the listJobs result.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli jobs $S\n",
	  "", 1, 1, cmd_jobs },
	{ "attach", "SESSION JOB [--since N]",
	  "follow a job's output and send it input",
	  "Prints the job's output as it comes (from byte N, default 0: all\n"
	  "the daemon still holds) until the job ends, then exits with the\n"
	  "job's exit code (128 + N for signal N).\n"
	  "\n"
	  "When stdin is a terminal it is put in raw mode: every key goes to\n"
	  "the job as typed and the job's terminal takes this one's size, now\n"
	  "and whenever it changes. For a job without a terminal, Enter sends\n"
	  "a newline, Ctrl-C interrupts the job and Ctrl-D ends its input.\n"
	  "Ctrl-] detaches and leaves the job running. When stdin is not a\n"
	  "terminal, what it has goes to the job as it comes, and its end\n"
	  "ends the job's input.\n"
	  "\n"
	  "  --since N  start at byte N of the job's output\n"
	  "\n"
	  "Examples:\n"
	  "  stexec-cli attach $S j-1\n"
	  "  echo 2+2 | stexec-cli attach $S j-2\n",
	  "since=", 2, 2, attach_main },
	{ "permit", "SESSION TOOL_USE_ID",
	  "let a tool waiting for permission run",
	  "Example:\n"
	  "  stexec-cli permit $S toolu_01\n",
	  "", 2, 2, cmd_permit },
	{ "deny", "SESSION TOOL_USE_ID [--message TEXT]",
	  "refuse a tool waiting for permission",
	  "The tool gets an error result (TEXT, or the interrupt message) and\n"
	  "the turn is cancelled.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli deny $S toolu_01 --message 'not on main'\n",
	  "message=", 2, 2, cmd_deny },
	{ "close", "SESSION", "close a session",
	  "Kills its tools and returns once they are gone.\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli close $S\n",
	  "", 1, 1, cmd_close },
	{ "stats", "", "show the daemon's counters",
	  "Example:\n"
	  "  stexec-cli stats\n",
	  "", 0, 0, cmd_stats },
	{ "metrics", "[--output FILE]",
	  "print the daemon's metrics for Prometheus",
	  "The metrics method's counters, gauges and histograms in the\n"
	  "Prometheus text exposition format 0.0.4 (names stexec_*, base\n"
	  "units, counters ending in _total); the stexec_session_* ones are\n"
	  "your own sessions'. PROTOCOL.md says what each means.\n"
	  "\n"
	  "  --output FILE  write FILE whole or not at all: a temporary file\n"
	  "                 beside it, renamed over it (for node_exporter's\n"
	  "                 textfile collector, whose files end in .prom)\n"
	  "  --json         the method's result as it came\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli metrics --output "
	  "/var/lib/prometheus/node-exporter/stexec.prom\n",
	  "output=", 0, 0, cmd_metrics },
	{ "top", "[--once] [--interval SECONDS] [--sort KEY]",
	  "a live view of every session you may see",
	  "Every session of yours, refreshed in place: each current turn's\n"
	  "tools not yet delivered, with their status, the time since their\n"
	  "process started, CPU (percent of one CPU since the last refresh,\n"
	  "and in all) and peak memory where the daemon measures them, and\n"
	  "the clients of each session; the daemon's totals on top; under\n"
	  "them a row per MCP server (its session, or daemon for a shared\n"
	  "one; name, state, pid, calls in flight and done, restarts). Keys: e\n"
	  "elapsed (the default), c cpu, m memory, s session, n name sort the\n"
	  "rows; space refreshes now; q or Ctrl-C quits.\n"
	  "\n"
	  "  --once              print one plain frame and exit (also when\n"
	  "                      stdout is not a terminal)\n"
	  "  --interval SECONDS  between refreshes, 0.1..3600 (default 1)\n"
	  "  --sort KEY          elapsed, cpu, memory, session or name\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli top --sort cpu\n",
	  "once,interval=,sort=", 0, 0, cmd_top },
	{ "events", "SESSION [--since N] [--max N]",
	  "print the notifications a session retains",
	  "  --since N  only those after seq N\n"
	  "  --max N    at most N of them\n"
	  "  --json     the raw result: {notifications, lastSeq}\n"
	  "\n"
	  "Example:\n"
	  "  stexec-cli events $S --since 10\n",
	  "since=,max=", 1, 1, cmd_events },
};

#define CLI_NCMDS (sizeof cli_cmds / sizeof cli_cmds[0])

static volatile sig_atomic_t cli_sigints;
static int cli_sigpipe[2] = { -1, -1 };

static void	cli_usage(FILE *);
static void	cli_cmd_help(FILE *, const struct cli_cmd *);
static const struct cli_cmd *cli_find(const char *);
static int	cli_parse(struct cli *, const struct cli_cmd *, int, char **,
		    struct cli_args *, bool *);
static int	cli_global(struct cli *, const char *, const char *);
static void	cli_on_sigint(int);

static void
cli_usage(FILE *f)
{
	size_t i;

	fprintf(f,
	    "usage: stexec-cli [--socket PATH] [--json] COMMAND [ARGS]...\n"
	    "\n"
	    "Talk to stexecd, the daemon that runs an LLM agent's tool calls.\n"
	    "\n"
	    "Commands:\n");
	for (i = 0; i < CLI_NCMDS; i++)
		fprintf(f, "  %-10s %s\n", cli_cmds[i].name,
		    cli_cmds[i].summary);
	fprintf(f, "  %-10s %s\n", "help", "this text, or a command's");
	fprintf(f,
	    "\n"
	    "Options (before or after the command):\n"
	    "  --socket PATH  the daemon's socket (default: $STEXEC_SOCKET,\n"
	    "                 else $XDG_RUNTIME_DIR/stexec/stexecd.sock,\n"
	    "                 else /run/stexec/stexecd.sock)\n"
	    "  --json         machine output: the raw result JSON, or one\n"
	    "                 notification per line\n"
	    "  -h, --help     help (stexec-cli COMMAND --help: a command's)\n"
	    "  --version      print the version\n"
	    "\n"
	    "Exit status: 0 ok; 1 a request failed or a tool's result is an "
	    "error;\n"
	    "2 bad usage or the daemon cannot be reached; 130 interrupted.\n"
	    "\n"
	    "Example:\n"
	    "  stexec-cli run bash '{\"command\":\"ls\"}'\n");
}

static void
cli_cmd_help(FILE *f, const struct cli_cmd *cmd)
{
	fprintf(f, "usage: stexec-cli %s%s%s\n\n%s.\n\n%s", cmd->name,
	    *cmd->synopsis != '\0' ? " " : "", cmd->synopsis, cmd->summary,
	    cmd->help);
}

static const struct cli_cmd *
cli_find(const char *name)
{
	size_t i;

	for (i = 0; i < CLI_NCMDS; i++)
		if (strcmp(cli_cmds[i].name, name) == 0)
			return &cli_cmds[i];
	return NULL;
}

/* A global option; 1 if name was one, 0 if not, -1 if its value is bad. */
static int
cli_global(struct cli *cli, const char *name, const char *value)
{
	if (strcmp(name, "json") == 0) {
		cli->json = true;
		return 1;
	}
	if (strcmp(name, "socket") == 0) {
		if (value == NULL || *value == '\0')
			return -1;
		cli->socket = value;
		return 1;
	}
	return 0;
}

/*
 * Options may come anywhere after the command ("--name VALUE" or
 * "--name=VALUE"); "--" ends them. A JSON argument never starts with
 * "--", so nothing positional is mistaken for an option.
 */
static int
cli_parse(struct cli *cli, const struct cli_cmd *cmd, int argc, char **argv,
    struct cli_args *a, bool *help)
{
	char name[64], spec[80];
	const char *value, *eq, *p, *match = NULL;
	bool takes, known, dashdash = false;
	size_t n;
	int i, g;

	a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
	if (a->pos == NULL)
		abort();
	for (i = 0; i < argc; i++) {
		if (dashdash || strncmp(argv[i], "--", 2) != 0 ||
		    argv[i][2] == '\0') {
			if (!dashdash && strcmp(argv[i], "--") == 0) {
				dashdash = true;
				continue;
			}
			if (!dashdash && strcmp(argv[i], "-h") == 0) {
				*help = true;
				continue;
			}
			a->pos[a->npos++] = argv[i];
			continue;
		}
		eq = strchr(argv[i] + 2, '=');
		n = eq != NULL ? (size_t)(eq - argv[i] - 2) :
		    strlen(argv[i] + 2);
		if (n >= sizeof name)
			n = sizeof name - 1;
		memcpy(name, argv[i] + 2, n);
		name[n] = '\0';
		value = eq != NULL ? eq + 1 : NULL;
		if (strcmp(name, "help") == 0) {
			*help = true;
			continue;
		}

		/* One of the command's options? Does it take a value? */
		known = takes = false;
		for (p = cmd->opts; *p != '\0'; p += strcspn(p, ",") +
		    (p[strcspn(p, ",")] == ',')) {
			snprintf(spec, sizeof spec, "%.*s",
			    (int)strcspn(p, ","), p);
			n = strlen(spec);
			takes = n > 0 && spec[n - 1] == '=';
			if (takes)
				spec[n - 1] = '\0';
			if (strcmp(spec, name) == 0) {
				known = true;
				match = p;
				break;
			}
		}
		if (!known)
			takes = strcmp(name, "socket") == 0;
		if (takes && value == NULL) {
			if (i + 1 >= argc) {
				cli_error(cli, "option --%s needs a value",
				    name);
				return -1;
			}
			value = argv[++i];
		} else if (!takes && value != NULL) {
			cli_error(cli, "option --%s takes no value", name);
			return -1;
		}
		if (!known) {
			if ((g = cli_global(cli, name, value)) == 1)
				continue;
			if (g < 0)
				cli_error(cli, "option --%s needs a value",
				    name);
			else
				cli_error(cli, "unknown option --%s (see "
				    "stexec-cli %s --help)", name, cmd->name);
			return -1;
		}
		if (a->nopts == CLI_MAX_OPTS) {
			cli_error(cli, "too many options");
			return -1;
		}
		/* Stored as the spec entry: "--env=K=V" is found as "env". */
		a->opts[a->nopts].name = match;
		a->opts[a->nopts].value = value;
		a->nopts++;
	}
	return 0;
}

/*
 * The value of the last --name (opts are stored pointing into the spec
 * string, so compare the spelling up to its '=' or ',').
 */
const char *
cli_opt(const struct cli_args *a, const char *name)
{
	const char *found = NULL;
	size_t n = strlen(name);
	int i;

	for (i = 0; i < a->nopts; i++)
		if (strncmp(a->opts[i].name, name, n) == 0 &&
		    (a->opts[i].name[n] == '=' || a->opts[i].name[n] == ',' ||
		    a->opts[i].name[n] == '\0'))
			found = a->opts[i].value;
	return found;
}

bool
cli_flag(const struct cli_args *a, const char *name)
{
	size_t n = strlen(name);
	int i;

	for (i = 0; i < a->nopts; i++)
		if (strncmp(a->opts[i].name, name, n) == 0 &&
		    (a->opts[i].name[n] == ',' || a->opts[i].name[n] == '\0'))
			return true;
	return false;
}

/* An integer option within [min, max]; 0 (absent leaves *v), or exit 2. */
int
cli_int_opt(struct cli *cli, const struct cli_args *a, const char *name,
    long long min, long long max, long long *v)
{
	const char *s = cli_opt(a, name);
	char *end;
	long long n;

	if (s == NULL)
		return 0;
	errno = 0;
	n = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno != 0 || n < min || n > max) {
		cli_error(cli, "--%s: '%s' is not an integer in %lld..%lld",
		    name, s, min, max);
		return CLI_EXIT_USAGE;
	}
	*v = n;
	return 0;
}

void
cli_error(struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	if (cli->cmd != NULL)
		fprintf(stderr, "stexec-cli: %s: ", cli->cmd);
	else
		fprintf(stderr, "stexec-cli: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Connect, or say why not and how to fix it. */
int
cli_connect(struct cli *cli)
{
	char err[768];

	if ((cli->c = stexec_connect(cli->socket, err, sizeof err)) == NULL) {
		cli_error(cli, "%s", err);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

/*
 * Report a failed call: "add: Invalid params: toolUse.input: must be an
 * object (-32602)". A daemon that went away is exit 2, like one that was
 * never there; an error answered by the daemon is exit 1.
 */
int
cli_rpc_error(struct cli *cli, const char *what,
    const struct stexec_error *err)
{
	if (err->code == STEXEC_CLIENT_ERR_INTR)
		return CLI_EXIT_INT;
	if (err->code > 0) {
		cli_error(cli, "%s%s%s", what != NULL ? what : "",
		    what != NULL ? ": " : "", err->message);
		return CLI_EXIT_USAGE;
	}
	cli_error(cli, "%s%s%s (%d)", what != NULL ? what : "",
	    what != NULL ? ": " : "", err->message, err->code);
	return CLI_EXIT_FAIL;
}

/* A blocking call; 0, or the exit status after reporting the error. */
int
cli_call(struct cli *cli, const char *method, json_t *params, json_t **result)
{
	struct stexec_error err = { 0 };
	int rc = 0;

	if (stexec_call(cli->c, method, params, result, &err) != 0)
		rc = cli_rpc_error(cli, NULL, &err);
	stexec_error_clear(&err);
	return rc;
}

/* Argument argno (1-based, for the message) as JSON, or exit 2. */
int
cli_parse_json(struct cli *cli, int argno, const char *text, json_t **out)
{
	json_error_t jerr;

	*out = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
	if (*out != NULL)
		return 0;
	if (jerr.line > 1)
		cli_error(cli, "argument %d is not valid JSON: %s (line %d, "
		    "column %d)", argno, jerr.text, jerr.line, jerr.column);
	else
		cli_error(cli, "argument %d is not valid JSON: %s (column %d)",
		    argno, jerr.text, jerr.column);
	return CLI_EXIT_USAGE;
}

/* --tools FILE: an array of ToolDefs, {"tools": [...]}, or one ToolDef. */
int
cli_load_tools(struct cli *cli, const char *path, json_t **out)
{
	json_error_t jerr;
	json_t *j, *inner;

	*out = NULL;
	if ((j = json_load_file(path, 0, &jerr)) == NULL) {
		if (jerr.line <= 0)
			cli_error(cli, "--tools %s: %s", path, jerr.text);
		else
			cli_error(cli, "--tools %s is not valid JSON: %s (line "
			    "%d, column %d)", path, jerr.text, jerr.line,
			    jerr.column);
		return CLI_EXIT_USAGE;
	}
	if (json_is_object(j) && json_is_array(inner = json_object_get(j,
	    "tools"))) {
		*out = json_incref(inner);
		json_decref(j);
	} else if (json_is_object(j)) {
		*out = json_array();
		json_array_append_new(*out, j);
	} else if (json_is_array(j))
		*out = j;
	else {
		json_decref(j);
		cli_error(cli, "--tools %s: expected an array of tool "
		    "definitions", path);
		return CLI_EXIT_USAGE;
	}
	return 0;
}

void
cli_print_json(const json_t *j)
{
	json_dumpf(j, stdout, JSON_COMPACT | JSON_ENCODE_ANY);
	fputc('\n', stdout);
}

/*
 * An ANSI SGR sequence, or "" when colour is off: on stdout when stdout
 * is a terminal, on stderr when stderr is (and NO_COLOR is unset either
 * way).
 */
const char *
cli_sgr(const struct cli *cli, bool on_stderr, const char *sgr)
{
	if (!(on_stderr ? cli->err_color : cli->color))
		return "";
	return sgr;
}

/* The width of the terminal on fd, else $COLUMNS, else 80. */
int
cli_term_width(int fd)
{
	struct winsize ws;
	const char *cols = getenv("COLUMNS");
	int n;

	if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		return ws.ws_col;
	if (cols != NULL && (n = atoi(cols)) > 0)
		return n;
	return 80;
}

/*
 * Write line (NUL-terminated, no newline) to f cut to width columns, "…"
 * marking the cut. SGR sequences take no column and are kept, so colours
 * still end; a UTF-8 sequence is one column (this CLI prints no wide ones).
 */
void
cli_fit(FILE *f, const char *line, size_t len, int width)
{
	size_t i = 0, n, cols = 0, total = 0;
	bool cut;

	/* line is NUL-terminated: an unended SGR stops at the end. */
	for (i = 0; i < len; i++)
		if (line[i] == '\033')
			i += strcspn(line + i, "m");
		else if (((unsigned char)line[i] & 0xc0) != 0x80)
			total++;
	cut = width > 0 && total > (size_t)width;
	for (i = 0; i < len; i += n) {
		n = 1;
		if (line[i] == '\033') {
			n = strcspn(line + i, "m") + 1;
			if (n > len - i)
				n = len - i;
			fwrite(line + i, 1, n, f);
			continue;
		}
		while (i + n < len && ((unsigned char)line[i + n] & 0xc0) ==
		    0x80)
			n++;
		if (cut && cols + 1 >= (size_t)width) {
			if (cols + 1 == (size_t)width)
				fputs("…", f);
			cols = (size_t)width;
			continue;
		}
		fwrite(line + i, 1, n, f);
		cols++;
	}
}

/*
 * What a tool does, as run's live block and top show it: its input's
 * first string, else the input as JSON; its first line, 120 columns.
 */
void
cli_input_summary(const json_t *input, char *buf, size_t buflen)
{
	const json_t *v = NULL;
	const char *key;
	char *line;

	json_object_foreach((json_t *)input, key, v)
		if (json_is_string(v))
			break;
	if (json_is_string(v)) {
		cli_first_line(json_string_value(v), json_string_length(v),
		    120, buf, buflen);
		return;
	}
	line = input != NULL ? json_dumps(input, JSON_COMPACT |
	    JSON_ENCODE_ANY) : NULL;
	cli_first_line(line != NULL ? line : "", line != NULL ? strlen(line) :
	    0, 120, buf, buflen);
	free(line);
}

/*
 * The first line of text (len bytes), at most max columns, control
 * characters blanked, "…" appended when anything was left out. Cuts only
 * between UTF-8 sequences.
 */
void
cli_first_line(const char *text, size_t len, size_t max, char *buf,
    size_t buflen)
{
	size_t i = 0, o = 0, cols = 0, n;
	bool cut = false;
	unsigned char ch;

	if (buflen < 8) {
		if (buflen > 0)
			buf[0] = '\0';
		return;
	}
	while (i < len && text[i] != '\n') {
		ch = (unsigned char)text[i];
		n = 1;
		if (ch >= 0xc0)
			while (i + n < len && n < 4 &&
			    ((unsigned char)text[i + n] & 0xc0) == 0x80)
				n++;
		if (cols == max || o + n + 4 > buflen) {
			cut = true;
			break;
		}
		if (ch < 0x20 || ch == 0x7f)
			buf[o++] = ' ';
		else {
			memcpy(buf + o, text + i, n);
			o += n;
		}
		i += n;
		cols++;
	}
	/* More lines after a first one, unless only a final newline. */
	if (i < len && text[i] == '\n' && i + 1 < len)
		cut = true;
	if (cut) {
		memcpy(buf + o, "…", 3);
		o += 3;
	}
	buf[o] = '\0';
}

double
cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Async-signal-safe: count, and wake the poll in cli_next. */
static void
cli_on_sigint(int sig)
{
	int saved = errno;

	cli_sigints++;
	if (cli_sigpipe[1] >= 0)
		(void)!write(cli_sigpipe[1], "", 1);
	errno = saved;
}

/* From now on Ctrl-C is an event cli_next reports, not the end. */
void
cli_catch_sigint(void)
{
	struct sigaction sa;

	if (cli_sigpipe[0] < 0 && pipe2(cli_sigpipe, O_CLOEXEC |
	    O_NONBLOCK) != 0)
		cli_sigpipe[0] = cli_sigpipe[1] = -1;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = cli_on_sigint;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
}

/*
 * Wait for the next message or a Ctrl-C: 1 with *msg (a reply or a
 * notification), 0 for a Ctrl-C (each counted once in cli->interrupts),
 * -1 when the connection ended. The self-pipe closes the race between
 * checking for a signal and going to sleep in poll.
 */
int
cli_next(struct cli *cli, json_t **msg)
{
	return cli_next_wait(cli, msg, -1);
}

/* cli_next, or 2 once ms (-1: never) have passed with nothing. */
int
cli_next_wait(struct cli *cli, json_t **msg, int ms)
{
	struct pollfd pfd[2];
	char drain[64];
	int n;

	*msg = NULL;
	for (;;) {
		if (cli_sigints > cli->interrupts) {
			cli->interrupts++;
			return 0;
		}
		if (stexec_pending(cli->c)) {
			*msg = stexec_next_message(cli->c, 0, NULL);
			return 1;
		}
		if (!stexec_is_open(cli->c))
			return -1;
		pfd[0].fd = stexec_fd(cli->c);
		pfd[0].events = stexec_poll_events(cli->c);
		pfd[1].fd = cli_sigpipe[0];
		pfd[1].events = POLLIN;
		pfd[0].revents = pfd[1].revents = 0;
		n = poll(pfd, cli_sigpipe[0] >= 0 ? 2 : 1, ms);
		if (n == 0)
			return 2;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (pfd[1].revents & POLLIN)
			while (read(cli_sigpipe[0], drain, sizeof drain) > 0)
				;
		if (pfd[0].revents & POLLOUT)
			stexec_flush(cli->c);
		if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR))
			stexec_read_ready(cli->c);
	}
}

int
main(int argc, char **argv)
{
	struct cli cli = { 0 };
	struct cli_args args = { 0 };
	const struct cli_cmd *cmd;
	const char *no_color = getenv("NO_COLOR"), *eq;
	bool help = false, colors;
	int i, rc, g;

	/* A closed reader must not kill us mid-output: write errors do. */
	signal(SIGPIPE, SIG_IGN);
	colors = no_color == NULL || *no_color == '\0';
	cli.out_tty = isatty(STDOUT_FILENO);
	cli.color = colors && cli.out_tty;
	cli.err_color = colors && isatty(STDERR_FILENO);

	/* Global options before the command. */
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (strcmp(argv[i], "-h") == 0 ||
		    strcmp(argv[i], "--help") == 0) {
			cli_usage(stdout);
			return CLI_EXIT_OK;
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("stexec-cli %s\n", STEXEC_VERSION);
			return CLI_EXIT_OK;
		}
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strncmp(argv[i], "--socket", 8) == 0 &&
		    (argv[i][8] == '\0' || argv[i][8] == '=')) {
			eq = argv[i][8] == '=' ? argv[i] + 9 : NULL;
			if (eq == NULL && i + 1 < argc)
				eq = argv[++i];
			g = cli_global(&cli, "socket", eq);
		} else if (strcmp(argv[i], "--json") == 0)
			g = cli_global(&cli, "json", NULL);
		else {
			cli_error(&cli, "unknown option %s", argv[i]);
			cli_usage(stderr);
			return CLI_EXIT_USAGE;
		}
		if (g != 1) {
			cli_error(&cli, "option --socket needs a path");
			return CLI_EXIT_USAGE;
		}
	}
	if (i == argc) {
		cli_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	if (strcmp(argv[i], "help") == 0) {
		if (i + 1 == argc) {
			cli_usage(stdout);
			return CLI_EXIT_OK;
		}
		if ((cmd = cli_find(argv[i + 1])) == NULL) {
			cli_error(&cli, "no command '%s'", argv[i + 1]);
			cli_usage(stderr);
			return CLI_EXIT_USAGE;
		}
		cli_cmd_help(stdout, cmd);
		return CLI_EXIT_OK;
	}
	if ((cmd = cli_find(argv[i])) == NULL) {
		cli_error(&cli, "unknown command '%s'", argv[i]);
		cli_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	cli.cmd = cmd->name;
	if (cli_parse(&cli, cmd, argc - i - 1, argv + i + 1, &args,
	    &help) != 0) {
		free(args.pos);
		return CLI_EXIT_USAGE;
	}
	if (help) {
		cli_cmd_help(stdout, cmd);
		free(args.pos);
		return CLI_EXIT_OK;
	}
	if (args.npos < cmd->min || (cmd->max >= 0 && args.npos > cmd->max)) {
		cli_error(&cli, "%s arguments", args.npos < cmd->min ?
		    "missing" : "too many");
		fprintf(stderr, "usage: stexec-cli %s %s\n", cmd->name,
		    cmd->synopsis);
		free(args.pos);
		return CLI_EXIT_USAGE;
	}
	rc = cmd->fn(&cli, &args);
	if (cli.c != NULL)
		stexec_close(cli.c);
	free(args.pos);
	if (fflush(stdout) != 0 && rc == CLI_EXIT_OK)
		rc = CLI_EXIT_FAIL;
	return rc;
}
