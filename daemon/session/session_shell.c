/*
 * The built-in bash as a session's shell (doc/design.md §7, Shell): its
 * cwd carries from call to call, an env file is sourced before each
 * command, and with keepEnv what a command exports carries over too. A
 * small wrapper runs the command and, on its way out, writes what it left
 * as context modifiers (S14) on a copy of fd 3; the cwd it leaves must lie
 * in the session's root, its writable roots or a --shell-allow-dir.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "core/executor.h"
#include "session/session.h"
#include "session/session_int.h"
#include "utf8.h"
#include "util.h"

/* The variables bash sets itself, or the daemon per call: never carried. */
#define SHELL_VOLATILE \
	"PWD|OLDPWD|SHLVL|_|BASHOPTS|SHELLOPTS|BASH_ENV|STEXEC_SESSION_ID|" \
	"STEXEC_TOOL_USE_ID|STEXEC_PROGRESS_FD"

/*
 * The wrapper is a prefix on the command's own first line, in the one
 * `bash -c` string (so that the command's line numbers and syntax errors
 * are bash's own): bash lexes every byte it runs, some 250 instructions a
 * byte, so the prefix is short and the rest comes as $1, parsed only when
 * needed. It copies fd 3 to 63 (9 in a sh without bash: the command may
 * close or reuse 3), sources the env file, and sets an EXIT trap, which
 * runs after `exit`, a failure under `set -e` and the end alike (`exec` or
 * a trap of the command's own replaces it, and then nothing carries over;
 * the shell's exit status is the command's either way).
 *
 * keepCwd alone: the trap reports the cwd only when it moved, running $1,
 * which escapes it for JSON where it must (bash; a sh reports only a cwd
 * that needs no escapes). keepEnv: $1 is session_shell_lib, run before the
 * command for its snapshot of the environment and by the trap for the
 * differences and the cwd.
 */
#define SHELL_CWD_PUT(fd) \
	"printf '{\"context\":{\"cwd\":\"%s\"}}\\n' \"$__stexec_j\" " \
	"2>/dev/null >&" fd
static const char shell_cwd_bash[] =
    "case $PWD in *[\\\"\\\\]*|*[![:print:]]*) "
    "__stexec_j=${PWD//\\\\/\\\\\\\\}; "
    "__stexec_j=${__stexec_j//\\\"/\\\\\\\"}; "
    "case $__stexec_j in *[[:cntrl:]]*) "
    "for __stexec_i in {1..31} 127; do "
    "printf -v __stexec_c \"\\\\$(printf %03o $__stexec_i)\"; "
    "__stexec_j=${__stexec_j//$__stexec_c/$(printf '\\\\u%04x' "
    "$__stexec_i)}; done;; esac;; "
    "*) __stexec_j=$PWD;; esac; " SHELL_CWD_PUT("63");
static const char shell_cwd_sh[] =
    "case $PWD in *[\\\"\\\\]*|*[![:print:]]*) ;; "
    "*) __stexec_j=$PWD; " SHELL_CWD_PUT("9") ";; esac";
static const char shell_trap_bash[] =
    "trap '[[ $PWD == \"$__stexec_d\" ]]||eval \"$__stexec_q\"' EXIT;";
static const char shell_trap_sh[] =
    "trap '[ \"$PWD\" = \"$__stexec_d\" ]||eval \"$__stexec_q\"' EXIT;";

/* keepEnv's part: JSON escapes, the snapshot, the differences. */
static const char session_shell_lib[] =
    "__stexec_exit() {\n"
    "\tset +eu\n"
    "\tIFS=' \t\n'\n"
    "\tcase $__stexec_k in *c*) __stexec_put '\"cwd\":' \"$PWD\" ;; esac\n"
    "\tcase $__stexec_k in *e*) [ -n \"$BASH_VERSION\" ] && __stexec_env "
    ";; esac\n"
    "}\n"
    "__stexec_put() {\n"
    "\t__stexec_j=$2\n"
    "\tif [ -n \"$BASH_VERSION\" ]; then\n"
    "\t\t__stexec_q\n"
    "\telse\n"
    "\t\tcase $2 in *[\\\"\\\\]*|*[![:print:]]*) return ;; esac\n"
    "\tfi\n"
    "\teval 'printf \"{\\\"context\\\":{%s\\\"%s\\\"%s}}\\n\" \"$1\" "
    "\"$__stexec_j\" \"$3\" >&'$__stexec_o\n"
    "} 2>/dev/null\n"
    "__stexec_q() {\n"
    "\tlocal i c\n"
    "\t__stexec_j=${__stexec_j//\\\\/\\\\\\\\}\n"
    "\t__stexec_j=${__stexec_j//\\\"/\\\\\\\"}\n"
    "\tcase $__stexec_j in *[[:cntrl:]]*) ;; *) return ;; esac\n"
    "\tfor i in {1..31} 127; do\n"
    "\t\tprintf -v c \"\\\\$(printf %03o $i)\"\n"
    "\t\t__stexec_j=${__stexec_j//$c/$(printf '\\\\u%04x' $i)}\n"
    "\tdone\n"
    "}\n"
    "__stexec_env() {\n"
    "\tlocal n\n"
    "\tfor n in $(compgen -e); do\n"
    "\t\tcase $n in " SHELL_VOLATILE ") continue ;; esac\n"
    "\t\tif [[ ! -v __stexec_e0[$n] || ${__stexec_e0[$n]} != \"${!n}\" ]]"
    "; then\n"
    "\t\t\t__stexec_put \"\\\"env\\\":{\\\"$n\\\":\" \"${!n}\" \"}\"\n"
    "\t\tfi\n"
    "\t\tunset \"__stexec_e0[$n]\"\n"
    "\tdone\n"
    "\tfor n in \"${!__stexec_e0[@]}\"; do\n"
    "\t\tcase $n in " SHELL_VOLATILE ") continue ;; esac\n"
    "\t\teval 'printf \"{\\\"context\\\":{\\\"env\\\":{\\\"%s\\\":null}}}"
    "\\n\" \"$n\" >&'$__stexec_o\n"
    "\tdone 2>/dev/null\n"
    "}\n"
    "if [ -n \"$BASH_VERSION\" ]; then\n"
    "\tdeclare -A __stexec_e0\n"
    "\tfor __stexec_n in $(compgen -e); do "
    "__stexec_e0[$__stexec_n]=${!__stexec_n}; done\n"
    "\tunset __stexec_n\n"
    "fi\n";

static struct session_shell_config shell_cfg;

static bool	session_shell_bool(const json_t *, const char *, bool *,
		    char *, size_t, char *, size_t);
static bool	session_shell_wraps(const struct session *,
		    const struct exec_tool *);
static bool	session_shell_may_cd(const char *, char *const *);
static bool	session_shell_under(const char *, const char *);
static bool	session_shell_allowed(const struct session *, const char *);
static void	session_shell_quote(struct buf *, const char *);

void
session_shell_init(const struct session_shell_config *cfg)
{
	shell_cfg = *cfg;
}

static bool
session_shell_bool(const json_t *obj, const char *key, bool *out,
    char *field, size_t fieldlen, char *err, size_t errlen)
{
	const json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
		return true;
	if (!json_is_boolean(v)) {
		snprintf(field, fieldlen, "shell.%s", key);
		snprintf(err, errlen, "must be a boolean");
		return false;
	}
	*out = json_is_true(v);
	return true;
}

bool
session_shell_parse(const json_t *v, struct session_shell *out, char *field,
    size_t fieldlen, char *err, size_t errlen)
{
	const json_t *f;
	const char *key;
	json_t *m;

	out->keep_cwd = true;
	out->keep_env = false;
	out->env_file = NULL;
	if (v == NULL || json_is_null(v))
		return true;
	snprintf(field, fieldlen, "shell");
	if (!json_is_object(v)) {
		snprintf(err, errlen, "must be an object");
		return false;
	}
	json_object_foreach((json_t *)v, key, m)
		if (strcmp(key, "keepCwd") != 0 && strcmp(key, "keepEnv") !=
		    0 && strcmp(key, "envFile") != 0) {
			utf8_snprintf(err, errlen, "unknown member \"%s\" "
			    "(keepCwd, keepEnv and envFile are known)", key);
			return false;
		}
	if (!session_shell_bool(v, "keepCwd", &out->keep_cwd, field,
	    fieldlen, err, errlen) || !session_shell_bool(v, "keepEnv",
	    &out->keep_env, field, fieldlen, err, errlen))
		return false;
	f = json_object_get(v, "envFile");
	if (f == NULL || json_is_null(f))
		return true;
	snprintf(field, fieldlen, "shell.envFile");
	if (!json_is_string(f)) {
		snprintf(err, errlen, "must be a string");
		return false;
	}
	if (strlen(json_string_value(f)) != json_string_length(f)) {
		snprintf(err, errlen, "must not contain NUL characters");
		return false;
	}
	if (json_string_value(f)[0] != '/') {
		utf8_snprintf(err, errlen, "must be an absolute path, not "
		    "\"%s\"", json_string_value(f));
		return false;
	}
	out->env_file = xstrdup(json_string_value(f));
	return true;
}

void
session_shell_clear(struct session_shell *sh)
{
	free(sh->env_file);
	sh->env_file = NULL;
}

json_t *
session_shell_json(const struct session_shell *sh)
{
	return json_pack("{s:b, s:b, s:s?}", "keepCwd", sh->keep_cwd,
	    "keepEnv", sh->keep_env, "envFile", sh->env_file);
}

/* The daemon's own bash (a session's ToolDef of that name is another). */
static bool
session_shell_wraps(const struct session *s, const struct exec_tool *t)
{
	(void)s;
	return shell_cfg.def != NULL && exec_tool_def(t) == shell_cfg.def;
}

/*
 * Whether the command may leave its shell in another directory. Only the
 * shell itself can move its cwd, by cd, pushd or popd, or by code it runs
 * that is not in the command's text: a file it sources, a string it
 * evals, a function or BASH_ENV from its environment. A command that
 * names none of them cannot move, and then needs no EXIT trap, which
 * costs more than the rest of the wrapper together: with a trap set, bash
 * must fork its last command instead of exec'ing it (+0.7 ms, 1.35x, for
 * `bash -c /bin/true` on the 2-core VM). Bytes are matched, not words, so
 * "abcd" counts too: a false yes only costs the trap. Missed: a command
 * name that is a variable's value ("$c" /tmp with c=cd).
 */
static bool
session_shell_may_cd(const char *cmd, char *const *envp)
{
	static const char *const names[] = { "cd", "pushd", "popd", "source",
	    "eval" };
	const char *p;
	size_t i;

	for (i = 0; i < nitems(names); i++)
		if (strstr(cmd, names[i]) != NULL)
			return true;
	/* The dot command: "." as a word of its own. */
	for (p = strchr(cmd, '.'); p != NULL; p = strchr(p + 1, '.'))
		if ((p == cmd || strchr(" \t\n;&|(){}!`", p[-1]) != NULL) &&
		    (p[1] == ' ' || p[1] == '\t'))
			return true;
	for (i = 0; envp != NULL && envp[i] != NULL; i++)
		if (strncmp(envp[i], "BASH_ENV=", 9) == 0 ||
		    strncmp(envp[i], "BASH_FUNC_", 10) == 0)
			return true;
	return false;
}

char **
session_shell_argv(struct session *s, struct exec_tool *t,
    const struct exec_spawn *req, char *const *envp)
{
	const char *file = s->shell.env_file != NULL ? s->shell.env_file :
	    shell_cfg.env_file, *sh, *arg = NULL;
	bool bash, cwd, env;
	struct buf b = { 0 };
	char **argv;
	size_t head;

	if (!session_shell_wraps(s, t) || req->argv[0] == NULL ||
	    req->argv[1] == NULL || req->argv[2] == NULL)
		return NULL;
	/*
	 * A job's context is never applied: it only sources the file. After
	 * an env file, which runs code, the cwd may have moved whatever the
	 * command says.
	 */
	cwd = s->shell.keep_cwd && !req->job->background && (file != NULL ||
	    session_shell_may_cd(req->argv[2], envp));
	env = s->shell.keep_env && !req->job->background;
	if (!cwd && !env && file == NULL)
		return NULL;
	sh = strrchr(req->argv[0], '/') != NULL ? strrchr(req->argv[0], '/') +
	    1 : req->argv[0];
	bash = strncmp(sh, "bash", 4) == 0;
	if (env) {
		arg = session_shell_lib;
		buf_printf(&b, "__stexec_q=$1 __stexec_k=%s __stexec_o=%s;"
		    "set --;exec %s>&3;", cwd ? "ce" : "e", bash ? "63" : "9",
		    bash ? "63" : "9");
	} else if (cwd) {
		arg = bash ? shell_cwd_bash : shell_cwd_sh;
		buf_printf(&b, "__stexec_q=$1 __stexec_d=$PWD;set --;"
		    "exec %s>&3;", bash ? "63" : "9");
	}
	if (file != NULL) {
		buf_addstr(&b, "if [ -r ");
		session_shell_quote(&b, file);
		buf_addstr(&b, " ]; then . ");
		session_shell_quote(&b, file);
		buf_addstr(&b, "; fi;");
	}
	if (env)
		buf_addstr(&b, "eval \"$__stexec_q\";trap __stexec_exit EXIT;");
	else if (cwd)
		buf_addstr(&b, bash ? shell_trap_bash : shell_trap_sh);
	/*
	 * Bash parses a whole line before it runs it: what the env file sets
	 * for the parser (extglob, aliases) must be in force for the
	 * command's first line, which then is the script's second.
	 */
	if (file != NULL)
		buf_addstr(&b, "\n");
	buf_addstr(&b, req->argv[2]);
	/* One allocation, freed as the array: the pointers, then the text. */
	head = 6 * sizeof *argv;
	argv = xcalloc(1, head + b.len + 1);
	memcpy((char *)argv + head, b.data, b.len);
	argv[0] = req->argv[0];
	argv[1] = "-c";
	argv[2] = (char *)argv + head;
	argv[3] = req->argv[0];
	argv[4] = (char *)arg;
	buf_free(&b);
	return argv;
}

/* s in single quotes for the shell: each ' as '\''. */
static void
session_shell_quote(struct buf *b, const char *s)
{
	buf_addstr(b, "'");
	for (; *s != '\0'; s++)
		if (*s == '\'')
			buf_addstr(b, "'\\''");
		else
			buf_add(b, s, 1);
	buf_addstr(b, "'");
}

/* Whether path is dir or lies below it. */
static bool
session_shell_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (n == 1 && dir[0] == '/')
		return true;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' ||
	    path[n] == '/');
}

/* Resolved, so that neither a symlink nor ".." leads out unseen. */
static bool
session_shell_allowed(const struct session *s, const char *cwd)
{
	char real[PATH_MAX], dir[PATH_MAX];
	const char *roots[2 + SESSION_SHELL_MAX_ALLOW];
	const json_t *v;
	size_t i, n = 0;

	if (realpath(cwd, real) == NULL)
		return false;
	roots[n++] = s->root;
	for (i = 0; i < shell_cfg.nallow && n < nitems(roots); i++)
		roots[n++] = shell_cfg.allow[i];
	for (i = 0; i < n; i++)
		if (session_shell_under(real, realpath(roots[i], dir) != NULL ?
		    dir : roots[i]))
			return true;
	json_array_foreach(s->sandbox.roots, i, v)
		if (session_shell_under(real, realpath(json_string_value(v),
		    dir) != NULL ? dir : json_string_value(v)))
			return true;
	return false;
}

/* The executor's cwd_check: a gone cwd, or a shell's outside, go back. */
const char *
session_shell_cwd_check(void *arg, struct exec_tool *t, const char *cwd,
    bool moved)
{
	struct session *s = arg;
	struct stat st;

	if (moved)
		return session_shell_wraps(s, t) && s->shell.keep_cwd &&
		    !session_shell_allowed(s, cwd) ? s->root : NULL;
	if (strcmp(cwd, s->root) == 0 || (stat(cwd, &st) == 0 &&
	    S_ISDIR(st.st_mode)))
		return NULL;
	return s->root;
}

const char *
session_shell_env_file(const struct session *s)
{
	return s->shell.env_file != NULL ? s->shell.env_file :
	    shell_cfg.env_file;
}
