/*
 * Claude Code's hooks, the pure half: configuration and its errors,
 * matchers, `if` rules and the shell tokenizer under them, and how the
 * decisions of several hooks merge. Tables, no processes.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hooks/hooks.h"

static char err[1024];

static struct hooks *
load(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);
	struct hooks *hk = hooks_new();

	cr_assert_not_null(j, "%s: %s", text, jerr.text);
	err[0] = '\0';
	if (hooks_add_json(hk, j, err, sizeof err) == -1) {
		hooks_free(hk);
		hk = NULL;
	}
	json_decref(j);
	return hk;
}

static void
refused(const char *text, const char *want)
{
	struct hooks *hk = load(text);

	cr_expect_null(hk, "accepted: %s", text);
	hooks_free(hk);
	cr_expect(strstr(err, want) != NULL, "%s\n  said: %s\n  want: %s",
	    text, err, want);
}

Test(config, errors_name_the_place)
{
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"a\"},{\"type\":\"command\",\"command\":\"b\","
	    "\"timeout\":0}]}]}}",
	    "hooks.PreToolUse[0].hooks[1].timeout: must be a positive number");
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"b\",\"timeout\":\"5\"}]}]}}",
	    "hooks.PreToolUse[0].hooks[0].timeout: must be a positive number");
	refused("{\"hooks\":{\"PostToolUse\":[{\"matcher\":\"Edit\",\"hooks\":"
	    "[{\"type\":\"command\"}]}]}}",
	    "hooks.PostToolUse[0].hooks[0].command: must be a non-empty string");
	refused("{\"hooks\":{\"PreToolUse\":[{\"matcher\":\"(\",\"hooks\":[]}]}}",
	    "hooks.PreToolUse[0].matcher: not a regular expression");
	refused("{\"hooks\":{\"PreToolUse\":[{\"matcher\":5,\"hooks\":[]}]}}",
	    "hooks.PreToolUse[0].matcher: must be a string");
	refused("{\"hooks\":{\"PreToolUse\":[{}]}}",
	    "hooks.PreToolUse[0].hooks: must be an array");
	refused("{\"hooks\":{\"PreToolUse\":{}}}",
	    "hooks.PreToolUse: must be an array");
	refused("{\"hooks\":[]}", "hooks: must be an object");
	refused("{\"hooks\":{\"PreToolUze\":[]}}",
	    "hooks.PreToolUze: unknown event");
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"x\",\"if\":\"rm -rf\"}]}]}}",
	    "hooks.PreToolUse[0].hooks[0].if: \"rm -rf\" is not a permission "
	    "rule");
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"x\",\"shell\":\"powershell\"}]}]}}",
	    "hooks.PreToolUse[0].hooks[0].shell: only \"bash\"");
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"x\",\"async\":true}]}]}}",
	    "async hooks are not supported");
}

Test(config, other_kinds_refused_saying_so)
{
	static const char *const kinds[] = { "prompt", "agent", "mcp_tool",
		"http" };
	char text[300], want[200];
	size_t i;

	for (i = 0; i < 4; i++) {
		snprintf(text, sizeof text, "{\"hooks\":{\"Stop\":[],"
		    "\"PostToolUse\":[{\"hooks\":[{\"type\":\"%s\","
		    "\"prompt\":\"p\",\"url\":\"http://x\"}]}]}}", kinds[i]);
		snprintf(want, sizeof want, "hooks.PostToolUse[0].hooks[0].type: "
		    "\"%s\" hooks are not supported by stexec: only \"command\" "
		    "hooks run", kinds[i]);
		refused(text, want);
	}
	refused("{\"hooks\":{\"PreToolUse\":[{\"hooks\":[{\"type\":\"shell\"}]}]}}",
	    "unknown hook type \"shell\"");
}

Test(config, whole_settings_and_sources_add_up)
{
	struct hooks *a = load("{\"permissions\":{\"allow\":[\"Bash\"]},"
	    "\"model\":\"x\",\"hooks\":{\"PreToolUse\":[{\"matcher\":\"Bash\","
	    "\"hooks\":[{\"type\":\"command\",\"command\":\"guard\","
	    "\"timeout\":5}]}],\"Stop\":[{\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"s\"}]}]}}");
	struct hooks *b = load("{\"hooks\":{\"PreToolUse\":[{\"hooks\":["
	    "{\"type\":\"command\",\"command\":\"log\"}]}],\"PostToolUse\":"
	    "[{\"matcher\":\"Write|Edit\",\"hooks\":[{\"type\":\"command\","
	    "\"command\":\"fmt\"}]}]}}");
	struct hooks *none = load("{\"env\":{}}");
	const struct hooks_handler *h[8];
	struct hooks_subject bash = { .name = "bash", .alias = "Bash" };

	cr_assert_not_null(a, "%s", err);
	cr_assert_not_null(b, "%s", err);
	cr_assert_not_null(none, "%s", err);
	cr_assert_eq(hooks_count(none, HOOKS_PRE_TOOL_USE), 0);
	cr_assert_eq(hooks_merge(a, b, err, sizeof err), 0);
	hooks_free(b);
	cr_assert_eq(hooks_count(a, HOOKS_PRE_TOOL_USE), 2);
	cr_assert_eq(hooks_count(a, HOOKS_POST_TOOL_USE), 1);
	cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &bash, h, 8), 2);
	cr_assert_str_eq(hooks_handler_command(h[0]), "guard");
	cr_assert_eq(hooks_handler_timeout_ms(h[0]), 5000);
	cr_assert_str_eq(hooks_handler_command(h[1]), "log");
	cr_assert_eq(hooks_handler_timeout_ms(h[1]), 0);
	cr_assert_eq(hooks_select(a, HOOKS_POST_TOOL_USE, &bash, h, 8), 0);
	hooks_free(a);
	hooks_free(none);
}

Test(config, a_handler_defined_twice_runs_once)
{
	struct hooks *a = load("{\"hooks\":{\"PreToolUse\":[{\"matcher\":\"*\","
	    "\"hooks\":[{\"type\":\"command\",\"command\":\"g\"},{\"type\":"
	    "\"command\",\"command\":\"g\",\"if\":\"Bash(rm *)\"}]},"
	    "{\"matcher\":\"Bash\",\"hooks\":[{\"type\":\"command\",\"command\":"
	    "\"g\",\"timeout\":3},{\"type\":\"command\",\"command\":\"g\","
	    "\"shell\":\"bash\"}]}]}}");
	const struct hooks_handler *h[8];
	json_t *in = json_pack("{s:s}", "command", "rm -rf /tmp/x");
	struct hooks_subject bash = { .name = "bash", .alias = "Bash",
		.input = in };

	cr_assert_not_null(a, "%s", err);
	/* "g" and "g if Bash(rm *)" differ; the rest are the first again. */
	cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &bash, h, 8), 2);
	json_decref(in);
	hooks_free(a);
}

Test(match, as_documented)
{
	static const struct {
		const char *matcher, *name, *alias;
		bool want;
	} rows[] = {
		{ NULL, "bash", "Bash", true },
		{ "", "anything", NULL, true },
		{ "*", "mcp__x__y", NULL, true },
		{ "Bash", "bash", "Bash", true },
		{ "bash", "bash", "Bash", true },
		{ "Bash", "read_file", "Read", false },
		{ "Bas", "bash", "Bash", false },
		{ "Edit|Write", "write_file", "Write", true },
		{ "Edit|Write", "edit_file", "Edit", true },
		{ "Edit|Write", "multi_edit", "MultiEdit", false },
		{ "Edit, Write", "write_file", "Write", true },
		{ "my-tool", "my-tool", NULL, true },
		{ "my-tool", "my-tool2", NULL, false },
		/* Anything else is an unanchored JavaScript regex. */
		{ "Edit.*", "edit_file", "Edit", true },
		{ "Edit.*", "multi_edit", "MultiEdit", true },
		{ "^Edit.*", "multi_edit", "MultiEdit", false },
		{ "mcp__.*", "mcp__github__create_issue", NULL, true },
		{ "mcp__.*", "bash", "Bash", false },
		{ "mcp__memory__.*", "mcp__github__x", NULL, false },
		{ "Notebook.*", "edit_file", "Edit", false },
		{ "^(Read|Grep)$", "grep", "Grep", true },
		{ "^(Read|Grep)$", "glob", "Glob", false },
		{ "\\u0042ash", "bash", "Bash", true },
		{ "[^]", "x", NULL, true },
		{ "x[]", "x", NULL, false },
		{ "^Bash$", "Bash\n", NULL, false },
		{ "(a)|\\1b", "b", NULL, true },
	};
	struct hooks_matcher *m;
	size_t i;

	for (i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		m = hooks_matcher_compile(rows[i].matcher, err, sizeof err);
		cr_assert_not_null(m, "%s: %s", rows[i].matcher, err);
		cr_expect_eq(hooks_matcher_match(m, rows[i].name, rows[i].alias),
		    rows[i].want, "%s on %s/%s", rows[i].matcher, rows[i].name,
		    rows[i].alias != NULL ? rows[i].alias : "-");
		hooks_matcher_free(m);
	}
}

Test(match, claude_code_names)
{
	cr_assert_str_eq(hooks_tool_alias("bash"), "Bash");
	cr_assert_str_eq(hooks_tool_alias("read_file"), "Read");
	cr_assert_str_eq(hooks_tool_alias("write_file"), "Write");
	cr_assert_str_eq(hooks_tool_alias("edit_file"), "Edit");
	cr_assert_str_eq(hooks_tool_alias("multi_edit"), "MultiEdit");
	cr_assert_str_eq(hooks_tool_alias("glob"), "Glob");
	cr_assert_str_eq(hooks_tool_alias("grep"), "Grep");
	cr_assert_str_eq(hooks_tool_alias("list_dir"), "LS");
	cr_assert_str_eq(hooks_tool_alias("bash_output"), "BashOutput");
	cr_assert_str_eq(hooks_tool_alias("kill_shell"), "KillShell");
	cr_assert_null(hooks_tool_alias("deploy"));
}

/* A catastrophic pattern is stopped by the match limit, fast, and runs the hook. */
Test(match, bounded)
{
	char name[200], big[HOOKS_PATTERN_MAX + 2];
	struct hooks_matcher *m;
	struct timespec t0, t1;
	double ms;

	memset(name, 'a', 60);
	strcpy(name + 60, "!");
	m = hooks_matcher_compile("^(a+)+$", err, sizeof err);
	cr_assert_not_null(m, "%s", err);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cr_assert(hooks_matcher_match(m, name, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	cr_expect_lt(ms, 1000.0, "the limit took %.0f ms", ms);
	hooks_matcher_free(m);
	memset(big, 'x', sizeof big - 1);
	big[0] = '(';
	big[sizeof big - 1] = '\0';
	cr_assert_null(hooks_matcher_compile(big, err, sizeof err));
	cr_assert(strstr(err, "longer than 1024") != NULL, "%s", err);
}

static void
split_is(const char *line, const char *const *want, size_t nwant)
{
	char **cmds;
	size_t n, i;

	cr_assert_eq(hooks_shell_split(line, &cmds, &n), 0, "%s", line);
	cr_expect_eq(n, nwant, "%s: %zu commands", line, n);
	for (i = 0; i < n && i < nwant; i++)
		cr_expect_str_eq(cmds[i], want[i], "%s: [%zu]", line, i);
	hooks_split_free(cmds, n);
}

#define SPLIT(line, ...) do { \
	static const char *const w_[] = { __VA_ARGS__ }; \
	split_is(line, w_, sizeof w_ / sizeof w_[0]); \
} while (0)

Test(shell, subcommands)
{
	SPLIT("ls", "ls");
	SPLIT("npm test && git push origin", "npm test", "git push origin");
	SPLIT("a || b; c | d & e", "a", "b", "c", "d", "e");
	SPLIT("a |& b\nc", "a", "b", "c");
	SPLIT("echo 'x && y' \"a;b\"", "echo x && y a;b");
	SPLIT("echo a\\;b", "echo a;b");
	SPLIT("echo $(rm -rf /tmp/x)", "rm -rf /tmp/x", "echo $(rm -rf /tmp/x)");
	SPLIT("echo \"$(git push)\"", "git push", "echo $(git push)");
	SPLIT("x=`git  push`", "git push");
	SPLIT("(cd /tmp && rm -rf x)", "cd /tmp", "rm -rf x");
	SPLIT("FOO=1 BAR=2 git push", "git push");
	SPLIT("rm -rf x > /dev/null 2>&1", "rm -rf x");
	SPLIT("cat < in.txt >> out", "cat");
	SPLIT("diff <(ls a) b", "ls a", "diff <(ls a) b");
	SPLIT("if true; then rm -rf x; fi", "true", "rm -rf x");
	SPLIT("ls # && rm -rf /", "ls");
	SPLIT("echo $(echo $(git push))", "git push", "echo $(git push)",
	    "echo $(echo $(git push))");
}

Test(shell, cannot_be_parsed)
{
	static const char *const bad[] = { "echo 'open", "echo \"open",
		"echo $(open", "echo `open", "a )", "cat <<EOF\nx\nEOF",
		"echo \\" };
	char **cmds;
	size_t n, i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		cr_expect_eq(hooks_shell_split(bad[i], &cmds, &n), -1, "%s",
		    bad[i]);
}

static bool
rule(const char *text, const char *name, const char *alias, const char *key,
    const char *value)
{
	struct hooks_rule *r = hooks_rule_parse(text, err, sizeof err);
	json_t *in = json_pack("{s:s}", key, value);
	struct hooks_subject s = { .name = name, .alias = alias, .input = in,
		.root = "/work/proj" };
	bool m;

	cr_assert_not_null(r, "%s: %s", text, err);
	m = hooks_rule_match(r, &s);
	/* Twice: the cached expression gives the same answer. */
	cr_assert_eq(hooks_rule_match(r, &s), m);
	hooks_rule_free(r);
	json_decref(in);
	return m;
}

Test(rule, bash)
{
	cr_expect(rule("Bash(git push *)", "bash", "Bash", "command",
	    "npm test && git push origin"));
	cr_expect(!rule("Bash(git push *)", "bash", "Bash", "command",
	    "git status"));
	cr_expect(rule("Bash(git push *)", "bash", "Bash", "command",
	    "git push"));
	cr_expect(rule("Bash(rm *)", "bash", "Bash", "command",
	    "echo ok; rm -rf /tmp/x"));
	cr_expect(rule("Bash(rm *)", "bash", "Bash", "command",
	    "echo $(rm -rf /tmp/x)"));
	cr_expect(rule("Bash(rm *)", "bash", "Bash", "command",
	    "ls `rm -rf /tmp/x`"));
	cr_expect(!rule("Bash(rm *)", "bash", "Bash", "command", "rmdir x"));
	cr_expect(!rule("Bash(rm *)", "bash", "Bash", "command",
	    "echo 'rm -rf /'"));
	cr_expect(rule("Bash(npm run test:*)", "bash", "Bash", "command",
	    "npm run test --watch"));
	cr_expect(rule("Bash(git * main)", "bash", "Bash", "command",
	    "git push origin main"));
	cr_expect(!rule("Bash(git * main)", "bash", "Bash", "command",
	    "git push origin dev"));
	/* Cannot be parsed: the hook runs. */
	cr_expect(rule("Bash(git push *)", "bash", "Bash", "command",
	    "echo 'unclosed"));
	/* Another tool: no. */
	cr_expect(!rule("Bash(rm *)", "write_file", "Write", "file_path",
	    "/x"));
	cr_expect(rule("Bash", "bash", "Bash", "command", "anything"));
}

Test(rule, paths)
{
	cr_expect(rule("Edit(src/**)", "edit_file", "Edit", "file_path",
	    "/work/proj/src/a/b.c"));
	cr_expect(!rule("Edit(src/**)", "edit_file", "Edit", "file_path",
	    "/work/proj/lib/a.c"));
	cr_expect(!rule("Edit(src/**)", "write_file", "Write", "file_path",
	    "/work/proj/src/a.c"));
	cr_expect(rule("Edit(src/**)", "edit_file", "Edit", "file_path",
	    "src/x.c"));
	cr_expect(rule("Write(.env)", "write_file", "Write", "file_path",
	    "/work/proj/sub/.env"));
	cr_expect(rule("Write(*.lock)", "write_file", "Write", "file_path",
	    "/work/proj/Cargo.lock"));
	cr_expect(!rule("Write(*.lock)", "write_file", "Write", "file_path",
	    "/work/proj/lock.txt"));
	cr_expect(rule("Read(//etc/**)", "read_file", "Read", "file_path",
	    "/etc/passwd"));
	cr_expect(rule("Edit(/src/*.c)", "edit_file", "Edit", "file_path",
	    "/work/proj/src/x.c"));
	cr_expect(!rule("Edit(/src/*.c)", "edit_file", "Edit", "file_path",
	    "/work/proj/src/y/x.c"));
	cr_expect(rule("mcp__db__query", "mcp__db__query", NULL, "sql", "x"));
	cr_assert_null(hooks_rule_parse("Bash(rm *", err, sizeof err));
	cr_assert_null(hooks_rule_parse("", err, sizeof err));
}

static void
outcome(struct hooks_decision *d, int status, const char *out,
    const char *errtext)
{
	struct hooks_outcome o = { .command = "h", .end = HOOKS_END_EXITED,
		.status = status, .out = out, .out_len = strlen(out),
		.err = errtext, .err_len = strlen(errtext), .duration_ms = 3 };

	hooks_decide(d, &o);
}

Test(decide, exit_codes)
{
	struct hooks_decision d;

	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	outcome(&d, 0, "plain text is only logged\n", "");
	cr_assert_eq(d.perm, HOOKS_PERM_NONE);
	outcome(&d, 2, "", "Blocked: rm -rf is not allowed\n");
	cr_assert_eq(d.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(d.reason, "Blocked: rm -rf is not allowed");
	cr_assert_eq(d.errors, 0);
	hooks_decision_clear(&d);

	/* Exit 2 blocks even when its JSON allows; the JSON's reason wins. */
	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	outcome(&d, 2, "{\"hookSpecificOutput\":{\"hookEventName\":"
	    "\"PreToolUse\",\"permissionDecision\":\"allow\","
	    "\"permissionDecisionReason\":\"json says\"}}", "stderr says");
	cr_assert_eq(d.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(d.reason, "json says");
	hooks_decision_clear(&d);

	/* Other codes do not block, but valid JSON is honoured. */
	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	outcome(&d, 1, "{\"hookSpecificOutput\":{\"permissionDecision\":"
	    "\"ask\",\"permissionDecisionReason\":\"sure?\"}}", "oops");
	cr_assert_eq(d.perm, HOOKS_PERM_ASK);
	cr_assert_str_eq(d.reason, "sure?");
	cr_assert_eq(d.errors, 1);
	outcome(&d, 127, "", "bash: nope: command not found");
	cr_assert_eq(d.missing, 1);
	cr_assert_eq(d.errors, 2);
	outcome(&d, 0, "{not json", "");
	cr_assert_eq(d.errors, 3);
	cr_assert_eq(json_array_size(d.runs), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    d.runs, 1), "outcome")), "error");
	hooks_decision_clear(&d);
}

Test(decide, precedence_and_rewrites)
{
	struct hooks_decision d;

	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	outcome(&d, 0, "{\"hookSpecificOutput\":{\"permissionDecision\":"
	    "\"allow\",\"updatedInput\":{\"command\":\"first\"},"
	    "\"additionalContext\":\"one\"}}", "");
	outcome(&d, 0, "{\"hookSpecificOutput\":{\"permissionDecision\":"
	    "\"ask\",\"permissionDecisionReason\":\"ask why\","
	    "\"updatedInput\":{\"command\":\"second\"},"
	    "\"additionalContext\":\"two\"}}", "");
	cr_assert_eq(d.perm, HOOKS_PERM_ASK);
	cr_assert_str_eq(d.reason, "ask why");
	cr_assert_str_eq(json_string_value(json_object_get(d.updated_input,
	    "command")), "first");
	cr_assert_str_eq(d.context, "one\ntwo");
	outcome(&d, 0, "{\"hookSpecificOutput\":{\"permissionDecision\":"
	    "\"defer\"}}", "");
	cr_assert_eq(d.perm, HOOKS_PERM_DEFER);
	outcome(&d, 0, "{\"decision\":\"block\",\"reason\":\"old style\"}", "");
	cr_assert_eq(d.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(d.reason, "old style");
	outcome(&d, 0, "{\"hookSpecificOutput\":{\"permissionDecision\":"
	    "\"allow\"}}", "");
	cr_assert_eq(d.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(d.reason, "old style");
	outcome(&d, 0, "{\"continue\":false,\"stopReason\":\"enough\","
	    "\"systemMessage\":\"for you\"}", "");
	cr_assert(d.stop);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    d.runs, json_array_size(d.runs) - 1), "systemMessage")),
	    "for you");
	cr_assert_str_eq(d.stop_reason, "enough");
	hooks_decision_clear(&d);
}

Test(decide, post_and_permission_request)
{
	struct hooks_decision d;

	hooks_decision_init(&d, HOOKS_POST_TOOL_USE);
	outcome(&d, 0, "{\"decision\":\"block\",\"reason\":\"lint failed\","
	    "\"hookSpecificOutput\":{\"hookEventName\":\"PostToolUse\","
	    "\"additionalContext\":\"formatted\",\"updatedToolOutput\":\"new\"}}",
	    "");
	outcome(&d, 2, "", "tests failed");
	cr_assert(d.blocked);
	cr_assert_str_eq(d.reason, "lint failed\ntests failed");
	cr_assert_str_eq(d.context, "formatted");
	cr_assert_str_eq(json_string_value(d.updated_output), "new");
	hooks_decision_clear(&d);

	hooks_decision_init(&d, HOOKS_PERMISSION_REQUEST);
	outcome(&d, 0, "{\"hookSpecificOutput\":{\"hookEventName\":"
	    "\"PermissionRequest\",\"decision\":{\"behavior\":\"deny\","
	    "\"message\":\"no deploys on friday\"}}}", "");
	cr_assert_eq(d.perm, HOOKS_PERM_DENY);
	cr_assert_str_eq(d.reason, "no deploys on friday");
	hooks_decision_clear(&d);

	hooks_decision_init(&d, HOOKS_SESSION_START);
	outcome(&d, 0, "branch main, 3 files changed\n", "");
	cr_assert_str_eq(d.context, "branch main, 3 files changed");
	hooks_decision_clear(&d);
}

Test(decide, timed_out_and_killed_decide_nothing)
{
	struct hooks_decision d;
	struct hooks_outcome o = { .command = "slow", .end =
		HOOKS_END_TIMED_OUT, .out = "{\"decision\":\"block\"}",
		.out_len = 20, .err = "", .duration_ms = 1000 };

	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	hooks_decide(&d, &o);
	o.end = HOOKS_END_KILLED;
	hooks_decide(&d, &o);
	cr_assert_eq(d.perm, HOOKS_PERM_NONE);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    d.runs, 0), "outcome")), "timedOut");
	hooks_decision_clear(&d);
}

static char *
spill(void *arg, const char *text, size_t len)
{
	size_t *seen = arg;

	*seen = len;
	return strdup("/tmp/spilled.txt");
}

Test(decide, text_capped)
{
	struct hooks_decision d;
	size_t n = HOOKS_TEXT_MAX + 500, seen = 0;
	char *big = malloc(n + 1), *json;

	memset(big, 'r', n);
	big[n] = '\0';
	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	d.spill = spill;
	d.spill_arg = &seen;
	outcome(&d, 2, "", big);
	cr_assert_eq(seen, n);
	cr_assert_eq(strspn(d.reason, "r"), HOOKS_TEXT_MAX);
	cr_assert(strstr(d.reason, "/tmp/spilled.txt") != NULL);
	hooks_decision_clear(&d);
	/* Characters, not bytes: 10,000 two-byte letters stay whole. */
	json = malloc(2 * HOOKS_TEXT_MAX + 1);
	for (n = 0; n < HOOKS_TEXT_MAX; n++)
		memcpy(json + 2 * n, "\xc3\xa9", 2);
	json[2 * HOOKS_TEXT_MAX] = '\0';
	hooks_decision_init(&d, HOOKS_PRE_TOOL_USE);
	outcome(&d, 2, "", json);
	cr_assert_str_eq(d.reason, json);
	hooks_decision_clear(&d);
	free(json);
	free(big);
}

/* What the matchers said of a name is remembered; `if` is asked each time. */
Test(config, remembered_matching_still_asks_if)
{
	struct hooks *a = load("{\"hooks\":{\"PreToolUse\":[{\"matcher\":"
	    "\"Bash\",\"hooks\":[{\"type\":\"command\",\"command\":\"g\","
	    "\"if\":\"Bash(rm *)\"}]},{\"matcher\":\"mcp__.*\",\"hooks\":"
	    "[{\"type\":\"command\",\"command\":\"m\"}]}]}}");
	const struct hooks_handler *h[4];
	json_t *rm = json_pack("{s:s}", "command", "rm -rf x");
	json_t *ls = json_pack("{s:s}", "command", "ls");
	struct hooks_subject s = { .name = "bash", .alias = "Bash" };
	int i;

	cr_assert_not_null(a, "%s", err);
	for (i = 0; i < 3; i++) {
		s.name = "bash";
		s.alias = "Bash";
		s.input = rm;
		cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &s, h, 4), 1);
		s.input = ls;
		cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &s, h, 4), 0);
		s.name = "grep";
		s.alias = "Grep";
		cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &s, h, 4), 0);
		s.name = "mcp__x__y";
		s.alias = NULL;
		cr_assert_eq(hooks_select(a, HOOKS_PRE_TOOL_USE, &s, h, 4), 1);
		cr_assert_eq(hooks_select(a, HOOKS_POST_TOOL_USE, &s, h, 4), 0);
	}
	json_decref(rm);
	json_decref(ls);
	hooks_free(a);
}

/* A relative path in the input is the cwd's; the rule's are the root's. */
Test(rule, relative_paths_against_the_cwd)
{
	struct hooks_rule *r = hooks_rule_parse("Edit(src/**)", err,
	    sizeof err);
	json_t *in = json_pack("{s:s}", "file_path", "a.c");
	struct hooks_subject s = { .name = "edit_file", .alias = "Edit",
		.input = in, .root = "/p", .cwd = "/p/src" };

	cr_assert_not_null(r, "%s", err);
	cr_assert(hooks_rule_match(r, &s));
	s.cwd = "/p/lib";
	cr_assert(!hooks_rule_match(r, &s));
	json_decref(in);
	hooks_rule_free(r);
}
