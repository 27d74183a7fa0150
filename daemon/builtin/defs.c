/*
 * The built-in ToolDefs. A description is all an agent knows of a tool, so
 * each states the input, the output format and every cap.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "defs.h"

#define DEFS_TOOL "\"command\": [\"" BUILTIN_DEFS_PLACEHOLDER "\", "
/* Safe, and held to it: they run in the read-only sandbox (Landlock). */
#define DEFS_READ_ONLY \
	"\"concurrencySafe\": true, \"interruptBehavior\": \"cancel\", " \
	"\"abortSiblingsOnError\": false, \"requiresPermission\": false, " \
	"\"sandbox\": \"read-only\""

static const char defs_bash[] = "{"
    "\"name\": \"bash\", "
    "\"description\": \"Run a command with bash -c (/bin/bash; /bin/sh on "
    "a machine without bash) in the session's "
    "working directory and return its stdout, then its stderr. A non-zero "
    "exit status makes the result an error, and then cancels this turn's "
    "other tool calls that are still running. `timeout` is in milliseconds "
    "(default 120000, at most 600000); a command that runs longer is killed "
    "with its whole process group. Processes the command leaves running in "
    "the background are killed when it exits. The working directory "
    "persists between calls (unless the session turned that off): where a "
    "command ends (`cd`, even before `exit` or a failing command) is where "
    "the next call and the session's other tools start; a call killed, "
    "timed out or run in the background leaves it unchanged, "
    "and a directory outside the session's directory and the allowed ones "
    "(or one removed since) sends it back to the session's directory, "
    "with a line \\\"Shell cwd was reset to DIR\\\" after the output. "
    "Each call is a new shell: shell variables, functions and aliases "
    "never carry over, and exported variables only where the session asks "
    "for it (keepEnv) or sets them in an env file sourced before each "
    "command; for one live shell that keeps everything, use bash_session. "
    "Stdin is not a "
    "terminal (it carries this call's JSON input: redirect </dev/null for "
    "commands that would read it). Output beyond 100000 bytes is saved to a "
    "file and shown as its head and tail. Prefer read_file, write_file, "
    "glob, grep and list_dir to cat, echo >, find, grep and ls: they are "
    "quicker and the read-only ones run in parallel. With "
    "`run_in_background` the command runs on as a job (a dev server, a "
    "watcher, a long build): the result comes at once (or after `yield_ms` "
    "with the output so far) with the job's id; read its new output with "
    "bash_output and end it with kill_shell.\", "
    "\"command\": [\"" BUILTIN_DEFS_SHELL "\", \"-c\", \"{command}\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"command\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The shell command to run\"}, "
    "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"Timeout in milliseconds (default 120000, at most "
    "600000)\"}, "
    "\"run_in_background\": {\"type\": \"boolean\", "
    "\"description\": \"Run on as a background job; read it with "
    "bash_output\"}, "
    "\"yield_ms\": {\"type\": \"integer\", \"minimum\": 0, "
    "\"description\": \"With run_in_background: wait this long (at most "
    "600000) and return the output so far\"}}, "
    "\"required\": [\"command\"], \"additionalProperties\": false}, "
    "\"concurrencySafe\": false, \"interruptBehavior\": \"cancel\", "
    "\"abortSiblingsOnError\": true, \"requiresPermission\": false, "
    "\"timeoutMs\": 120000, \"maxTimeoutMs\": 600000, "
    "\"timeoutFromInput\": \"timeout\", "
    "\"backgroundFromInput\": \"run_in_background\", "
    "\"yieldFromInput\": \"yield_ms\""
    "}";

static const char defs_read_file[] = "{"
    "\"name\": \"read_file\", "
    "\"description\": \"Read a text file or an image. Each line comes numbered like "
    "`cat -n`: its 1-based line number right-aligned in 6 columns, a tab, "
    "then the text. Returns at most `limit` lines (default 2000) from line "
    "`offset` on (default 1); when lines remain, the last output line is "
    "\\\"… N more lines (use offset/limit to read them)\\\": call again with "
    "`offset` set to the next line number. Lines longer than 2000 "
    "characters are cut and end with \\\"… [line truncated]\\\"; the output "
    "also stops at a whole line once it reaches about 96 KiB. An empty file "
    "gives \\\"(empty file)\\\". A PNG, JPEG, GIF or WebP image (known by "
    "its first bytes, not its name) comes back as an image block that you "
    "can see, up to 8000 pixels on a side and about 3.75 MB. Directories "
    "(use list_dir) and other binary files "
    "(a NUL byte in the first 8 KiB) are refused with an error. A relative "
    "path is resolved against the session's working directory.\", "
    DEFS_TOOL "\"read_file\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"file_path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The file to read\"}, "
    "\"offset\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"The first line to return, 1-based (default 1)\"}, "
    "\"limit\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"The most lines to return (default 2000)\"}}, "
    "\"required\": [\"file_path\"], \"additionalProperties\": false}, "
    DEFS_READ_ONLY
    "}";

static const char defs_write_file[] = "{"
    "\"name\": \"write_file\", "
    "\"description\": \"Write `content` to a file, replacing all of it if it "
    "exists. Missing parent directories are created. The write is atomic: "
    "the content goes to a temporary file in the same directory that is then "
    "renamed over the target, so no reader ever sees half a file. An "
    "existing file keeps its permissions, and a symlink is written through "
    "to its target. Prints \\\"Wrote N bytes to PATH\\\". A relative path is "
    "resolved against the session's working directory.\", "
    DEFS_TOOL "\"write_file\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"file_path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The file to write\"}, "
    "\"content\": {\"type\": \"string\", "
    "\"description\": \"The complete new content of the file\"}}, "
    "\"required\": [\"file_path\", \"content\"], "
    "\"additionalProperties\": false}, "
    "\"concurrencySafe\": false, \"interruptBehavior\": \"block\", "
    "\"abortSiblingsOnError\": false, \"requiresPermission\": false"
    "}";

static const char defs_edit_file[] = "{"
    "\"name\": \"edit_file\", "
    "\"description\": \"Replace text in a file: `old_string` must occur in "
    "it exactly once (or, with `replace_all`, at least once; each occurrence "
    "is replaced), matching the file's text exactly, whitespace and "
    "indentation included; give enough surrounding lines to make it unique. "
    "It must differ from `new_string`. An error says whether `old_string` "
    "was not found or occurs N times, and then nothing is changed. The file "
    "is written back atomically and keeps its permissions; a symlink is "
    "edited through to its target; CRLF line endings and a missing final "
    "newline are kept (an `old_string` with plain newlines matches CRLF "
    "lines). Text files of up to 16 MiB. Prints \\\"Edited PATH: N "
    "replacement(s)\\\". A relative path is resolved against the session's "
    "working directory.\", "
    DEFS_TOOL "\"edit_file\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"file_path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The file to edit\"}, "
    "\"old_string\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The exact text to replace\"}, "
    "\"new_string\": {\"type\": \"string\", "
    "\"description\": \"The text to put in its place\"}, "
    "\"replace_all\": {\"type\": \"boolean\", "
    "\"description\": \"Replace every occurrence (default false)\"}}, "
    "\"required\": [\"file_path\", \"old_string\", \"new_string\"], "
    "\"additionalProperties\": false}, "
    "\"concurrencySafe\": false, \"interruptBehavior\": \"block\", "
    "\"abortSiblingsOnError\": false, \"requiresPermission\": false"
    "}";

static const char defs_multi_edit[] = "{"
    "\"name\": \"multi_edit\", "
    "\"description\": \"Make several edit_file edits to one file, in "
    "order, each on the result of the ones before: all of them or none (an "
    "edit that fails leaves the file unchanged, and the error names it as "
    "edits[N]). Each edit is {old_string, new_string, replace_all?} with "
    "edit_file's rules.\", "
    DEFS_TOOL "\"multi_edit\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"file_path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The file to edit\"}, "
    "\"edits\": {\"type\": \"array\", \"items\": {\"type\": "
    "\"object\", \"properties\": {"
    "\"old_string\": {\"type\": \"string\", \"minLength\": 1}, "
    "\"new_string\": {\"type\": \"string\"}, "
    "\"replace_all\": {\"type\": \"boolean\"}}, "
    "\"required\": [\"old_string\", \"new_string\"], "
    "\"additionalProperties\": false}, "
    "\"description\": \"The edits, applied in order\"}}, "
    "\"required\": [\"file_path\", \"edits\"], "
    "\"additionalProperties\": false}, "
    "\"concurrencySafe\": false, \"interruptBehavior\": \"block\", "
    "\"abortSiblingsOnError\": false, \"requiresPermission\": false"
    "}";

static const char defs_glob[] = "{"
    "\"name\": \"glob\", "
    "\"description\": \"Find files by path pattern. `pattern` is matched "
    "against paths relative to `path` (default: the session's working "
    "directory): `*` and `?` match within one path component, `[abc]` is a "
    "character class, `{a,b}` are alternatives, and `**` matches any number "
    "of directories (\\\"**/*.c\\\": every .c file at any depth; "
    "\\\"src/**/test_*.py\\\": test files anywhere under src). Prints one "
    "path per line, sorted, ready for read_file: prefixed with `path` when "
    "one is given, absolute for an absolute pattern. Matches files and "
    "symlinks; end the pattern with / to match directories instead. Hidden "
    "files are included, .git directories skipped, symlinked directories "
    "not followed. At most 1000 paths, then \\\"… N more matches\\\"; "
    "\\\"No files match PATTERN\\\" when nothing does.\", "
    DEFS_TOOL "\"glob\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"pattern\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The pattern, e.g. \\\"**/*.c\\\"\"}, "
    "\"path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The directory to search (default: the working "
    "directory)\"}}, "
    "\"required\": [\"pattern\"], \"additionalProperties\": false}, "
    DEFS_READ_ONLY
    "}";

static const char defs_grep[] = "{"
    "\"name\": \"grep\", "
    "\"description\": \"Search file contents for a POSIX extended regular "
    "expression, as grep -E does: `|`, `+`, `?`, `{n,m}`, `( )`, "
    "`[[:space:]]`, also `\\\\w`, `\\\\s` and `\\\\b`; no `\\\\d` (use "
    "[0-9]); case-sensitive. Searches `path`, a file or a directory "
    "(recursively; default: the session's working directory), skipping .git "
    "directories and binary files (a NUL byte in the first 8 KiB). `glob` "
    "limits the files searched: a pattern without / such as \\\"*.c\\\" or "
    "\\\"*.{ts,tsx}\\\" is matched against file names, one with / such as "
    "\\\"src/**/*.h\\\" against paths relative to `path`. Prints "
    "\\\"file:line:text\\\" for each matching line, files in sorted order; "
    "text longer than 500 characters is cut and ends with \\\"…\\\". At most "
    "500 matches, then \\\"… N more matches\\\"; \\\"No matches for "
    "PATTERN\\\" when there are none, which is not an error.\", "
    DEFS_TOOL "\"grep\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"pattern\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The regular expression (POSIX extended)\"}, "
    "\"path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The file or directory to search (default: the "
    "working directory)\"}, "
    "\"glob\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"Only search files matching this, e.g. \\\"*.c\\\" or "
    "\\\"src/**/*.h\\\"\"}}, "
    "\"required\": [\"pattern\"], \"additionalProperties\": false}, "
    DEFS_READ_ONLY
    "}";

static const char defs_list_dir[] = "{"
    "\"name\": \"list_dir\", "
    "\"description\": \"List a directory: its entries sorted by name, one "
    "per line, hidden ones included; a directory ends with /, a symlink "
    "shows as \\\"name -> target\\\". At most 1000 entries, then \\\"… N "
    "more\\\"; an empty directory gives \\\"(empty directory)\\\". A relative "
    "path is resolved against the session's working directory. To find "
    "files at any depth, use glob.\", "
    DEFS_TOOL "\"list_dir\"], "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"path\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The directory to list\"}}, "
    "\"required\": [\"path\"], \"additionalProperties\": false}, "
    DEFS_READ_ONLY
    "}";

/* Answered by the daemon itself (doc/design.md §7, Jobs): no process. */
static const char defs_bash_output[] = "{"
    "\"name\": \"bash_output\", "
    "\"description\": \"The new output of a background bash job "
    "(run_in_background) since the last time it was read, and whether it "
    "still runs. `filter` (a POSIX extended regular expression) keeps only "
    "the lines that match. It answers at once, with nothing new when the "
    "job has said nothing since.\", "
    "\"internal\": \"job_output\", "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"bash_id\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The job id, like j-1\"}, "
    "\"filter\": {\"type\": \"string\", "
    "\"description\": \"Only lines matching this regular expression\"}}, "
    "\"required\": [\"bash_id\"], \"additionalProperties\": false}, "
    "\"concurrencySafe\": true"
    "}";

static const char defs_kill_shell[] = "{"
    "\"name\": \"kill_shell\", "
    "\"description\": \"End a background bash job and everything it "
    "started (TERM, then KILL after a grace), and answer once every process "
    "of it is dead. An id of a job that has already ended is an error; "
    "listJobs and bash_output still show how it ended.\", "
    "\"internal\": \"job_kill\", "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"shell_id\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The job id, like j-1\"}}, "
    "\"required\": [\"shell_id\"], \"additionalProperties\": false}"
    "}";

/* Answered by the daemon with its session's shell (doc/design.md §7). */
static const char defs_bash_session[] = "{"
    "\"name\": \"bash_session\", "
    "\"description\": \"Run a command in this session's own bash, a "
    "persistent shell (bash --noprofile --norc) started by the first call in "
    "the session's working directory and environment of that time, and "
    "reused by every later call: everything persists from one call to the "
    "next, the working directory (cd), variables and exports, functions, "
    "aliases, shell options, traps, background processes, and of course "
    "files, until the shell ends or is restarted, or the session closes. "
    "Returns the command's output (stdout and stderr together, as a "
    "terminal shows them; TERM=dumb, PAGER=cat) and, when its status is not "
    "0, \\\"Exit code N\\\" after it, which makes the result an error. "
    "Stdin is /dev/null. `timeout` is in milliseconds (default 120000, at "
    "most 600000): a command that runs longer is interrupted (SIGINT to its "
    "process group, then SIGKILL after 1 s), and the result says it timed "
    "out, with the output so far, while the shell lives on with its state. "
    "Output beyond 100000 bytes is shown as its first and last 50000 bytes. "
    "If the shell itself ends (the command ran exit) or does not come back "
    "after an interrupt, the result says so, and every later call is an "
    "error until one passes `restart`: true, which starts a new, empty "
    "shell (with `command`, runs it there; alone, just restarts). The shell "
    "runs in the session's sandbox, like bash.\", "
    "\"internal\": \"shell\", "
    "\"inputSchema\": {\"type\": \"object\", \"properties\": {"
    "\"command\": {\"type\": \"string\", \"minLength\": 1, "
    "\"description\": \"The command to run in the session's shell\"}, "
    "\"restart\": {\"type\": \"boolean\", "
    "\"description\": \"Start a new shell first (the old one is killed "
    "and its state lost); alone, only that\"}, "
    "\"timeout\": {\"type\": \"integer\", \"minimum\": 1, "
    "\"description\": \"Timeout in milliseconds (default 120000, at most "
    "600000)\"}}, "
    "\"required\": [], \"additionalProperties\": false}, "
    "\"concurrencySafe\": false, \"interruptBehavior\": \"cancel\", "
    "\"abortSiblingsOnError\": false, \"requiresPermission\": false, "
    "\"timeoutMs\": 120000, \"maxTimeoutMs\": 600000, "
    "\"timeoutFromInput\": \"timeout\""
    "}";

const char *const builtin_defs[] = {
	defs_bash,
	defs_read_file,
	defs_write_file,
	defs_glob,
	defs_grep,
	defs_list_dir,
	defs_edit_file,
	defs_multi_edit,
	defs_bash_output,
	defs_kill_shell,
	defs_bash_session,
	NULL,
};

const char *
builtin_defs_shell(void)
{
	return access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
}

/* Parse first, then replace whole strings: a path needs no escaping. */
json_t *
builtin_defs_load(size_t i, const char *tool_path, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *j, *cmd, *v;
	const char *s;
	size_t k;

	if ((j = json_loads(builtin_defs[i], 0, &jerr)) == NULL) {
		snprintf(err, errlen, "built-in tool %zu: %s", i, jerr.text);
		return NULL;
	}
	cmd = json_object_get(j, "command");
	json_array_foreach(cmd, k, v) {
		s = json_string_value(v);
		if (s != NULL && strcmp(s, BUILTIN_DEFS_PLACEHOLDER) == 0)
			json_array_set_new(cmd, k, json_string(tool_path));
		else if (s != NULL && strcmp(s, BUILTIN_DEFS_SHELL) == 0)
			json_array_set_new(cmd, k, json_string(
			    builtin_defs_shell()));
	}
	return j;
}
