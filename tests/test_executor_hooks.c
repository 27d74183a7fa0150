/*
 * The executor's hook phases (README, "Hooks"): hooks run inside the tool's
 * slot, after safety was decided and before permission and the call; an
 * interrupt, a sibling's error or a discard stops them; results stay in
 * order; PostToolUse holds the result until the hooks have spoken.
 */
#include <criterion/criterion.h>

#include <string.h>

#include "exec_harness.h"
#include "util.h"

#define PRE (1U << EXEC_HOOK_PRE)
#define PERMISSION (1U << EXEC_HOOK_PERMISSION)
#define POST (1U << EXEC_HOOK_POST)

static struct harness *h;

static void
setup(void)
{
	h = h_new(10, NULL);
}

static void
teardown(void)
{
	h_free(h);
}

TestSuite(hooks, .init = setup, .fini = teardown);

static void
done(const char *id, enum exec_hook_decision decision, const char *reason,
    const char *input)
{
	json_t *in = input != NULL ? json_loads(input, 0, NULL) : NULL;
	json_t *runs = json_pack("[{s:s, s:s, s:i, s:s}]", "event", "x",
	    "command", "h", "durationMs", 1, "outcome", "ok");
	struct exec_hooks_done d = { .decision = decision, .reason = reason,
		.updated_input = in, .runs = runs, .name = "Tool" };

	exec_hooks_done(exec_find(h->ex, id), &d);
	json_decref(in);
	json_decref(runs);
}

Test(hooks, an_unsafe_tool_holds_its_exclusive_slot_through_its_hooks)
{
	h->hook_phases = PRE;
	h_add(h, "a", "write", "{\"file_path\":\"/a\"}");
	h_expect(h, "hooks a pre", "state 0 [a]", NULL);
	cr_assert_str_eq(exec_status_name(EXEC_HOOKS), "hooks");
	/* A safe tool after it waits: the slot is a's. */
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_expect(h, NULL);
	done("a", EXEC_HOOK_NONE, NULL, NULL);
	h_expect(h, "spawn a", "status a executing", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A", "hooks b pre",
	    "state 0 [b]", NULL);
	done("b", EXEC_HOOK_NONE, NULL, NULL);
	h_expect(h, "spawn b", "status b executing", NULL);
	h_exit(h, h_find(h, "b"), 0, "B");
	h_expect(h, "status b completed", "result b ok B", "state 0 []", NULL);
	cr_assert_not_null(json_object_get(json_object_get(h->last_result,
	    "meta"), "hooks"), "meta.hooks");
}

Test(hooks, safe_tools_run_their_hooks_side_by_side)
{
	h->hook_phases = PRE;
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_expect(h, "hooks a pre", "state 0 [a]", "hooks b pre",
	    "state 0 [a,b]", NULL);
	done("b", EXEC_HOOK_NONE, NULL, NULL);
	h_expect(h, "spawn b", "status b executing", NULL);
	h_exit(h, h_find(h, "b"), 0, "B");
	/* b's result waits for a's: results in order (S5). */
	h_expect(h, "status b completed", "state 0 [a]", NULL);
	done("a", EXEC_HOOK_DENY, "no", NULL);
	h_expect(h, "status a completed",
	    "result a permission_denied <tool_use_error>Hook PreToolUse:Tool "
	    "denied this tool: no</tool_use_error>", "result b ok B",
	    "state 0 []", NULL);
}

Test(hooks, deny_does_not_cascade_or_abort)
{
	h->hook_phases = PRE;
	h_add(h, "a", "bash", "{\"command\":\"rm -rf /\"}");
	h_skip(h);
	done("a", EXEC_HOOK_DENY, "Blocked", NULL);
	h_skip(h);
	h_add(h, "b", "bash", "{\"command\":\"ls\"}");
	h_expect(h, "hooks b pre", "state 1 [b]", NULL);
}

Test(hooks, an_interrupt_kills_the_hooks_as_it_kills_the_tool)
{
	h->hook_phases = PRE;
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "write", "{\"file_path\":\"/b\"}");
	h_skip(h);
	exec_abort(h->ex, false);
	cr_assert(h_logged(h, "hooks-cancel a"));
	cr_assert(h_logged(h, "result a interrupted <tool_use_error>"
	    "Interrupted by user</tool_use_error>"));
	cr_assert(h_logged(h, "result b interrupted <tool_use_error>"
	    "Interrupted by user</tool_use_error>"));
}

Test(hooks, a_siblings_error_cancels_hooks)
{
	h->hook_phases = PRE;
	h_add(h, "f", "fetch", "{\"url\":\"x\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	done("f", EXEC_HOOK_NONE, NULL, NULL);
	h_exit(h, h_find(h, "f"), 1, "down");
	cr_assert(h_logged(h, "hooks-cancel r"));
	cr_assert(h_logged(h, "result r sibling_error <tool_use_error>"
	    "Cancelled: parallel tool call fetch errored</tool_use_error>"));
}

Test(hooks, a_discard_cancels_hooks)
{
	h->hook_phases = PRE;
	h_add(h, "a", "write", "{\"file_path\":\"/a\"}");
	h_skip(h);
	exec_discard(h->ex);
	cr_assert(h_logged(h, "hooks-cancel a"));
	/* The slot is free again. */
	h_skip(h);
	h->hook_phases = 0;
	h_add(h, "b", "write", "{\"file_path\":\"/b\"}");
	cr_assert(h_logged(h, "spawn b"));
}

Test(hooks, updated_input_is_checked_again_and_what_runs)
{
	h->hook_phases = PRE;
	h_add(h, "a", "bash", "{\"command\":\"echo old\"}");
	h_skip(h);
	done("a", EXEC_HOOK_ALLOW, NULL, "{\"command\":\"echo new\"}");
	h_skip(h);
	cr_assert_str_eq(json_string_value(json_object_get(exec_tool_input(
	    exec_find(h->ex, "a")), "command")), "echo new");
	h_exit(h, h_find(h, "a"), 0, "new");
	h_skip(h);
	h_add(h, "b", "bash", "{\"command\":\"x\"}");
	h_skip(h);
	done("b", EXEC_HOOK_NONE, NULL, "{\"command\":5}");
	cr_assert(strstr(json_string_value(json_object_get(json_object_get(
	    h->last_result, "result"), "content")), "InputValidationError: a "
	    "hook's updatedInput: ") != NULL);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    h->last_result, "meta"), "reason")), "invalid_input");
}

Test(hooks, ask_becomes_a_permission_request_and_allow_skips_it)
{
	h->hook_phases = PRE;
	h_add(h, "a", "write", "{\"file_path\":\"/a\"}");
	h_skip(h);
	done("a", EXEC_HOOK_ASK, "sure?", NULL);
	h_expect(h, "permission a", NULL);
	cr_assert_eq(exec_permission(h->ex, "a", true, NULL), 0);
	h_expect(h, "spawn a", "status a executing", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_skip(h);
	/* allow on a requiresPermission tool: no permission_request. */
	h_add(h, "d", "deploy", NULL);
	h_skip(h);
	done("d", EXEC_HOOK_ALLOW, NULL, NULL);
	h_expect(h, "spawn d", "status d executing", NULL);
}

Test(hooks, permission_request_hooks_answer_for_the_client)
{
	h->hook_phases = PERMISSION;
	h_add(h, "d", "deploy", NULL);
	h_expect(h, "hooks d permission", "state 0 [d]", NULL);
	done("d", EXEC_HOOK_ALLOW, NULL, NULL);
	h_expect(h, "spawn d", "status d executing", NULL);
	h_exit(h, h_find(h, "d"), 0, "D");
	h_skip(h);
	h_add(h, "e", "deploy", NULL);
	h_skip(h);
	done("e", EXEC_HOOK_NONE, NULL, NULL);
	h_expect(h, "permission e", NULL);
	cr_assert_eq(exec_permission(h->ex, "e", false, "no"), 0);
	h_skip(h);
	h_add(h, "f", "deploy", NULL);
	/* The turn was hard-aborted by e's deny: f never starts. */
	cr_assert(h_logged(h, "result f interrupted <tool_use_error>"
	    "Interrupted by user</tool_use_error>"));
}

Test(hooks, post_holds_the_result_and_adds_what_the_model_reads)
{
	json_t *runs = json_array();
	struct exec_hooks_done d = { .context = "formatted", .blocked = true,
		.reason = "lint failed", .runs = runs, .name = "Write" };
	const char *content;

	h->hook_phases = POST;
	h_add(h, "a", "write", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_skip(h);
	h_exit(h, h_find(h, "a"), 0, "A");
	/* The slot is still a's: b waits. */
	h_expect(h, "hooks a post", NULL);
	exec_hooks_done(exec_find(h->ex, "a"), &d);
	json_decref(runs);
	content = json_string_value(json_object_get(json_object_get(
	    h->last_result, "result"), "content"));
	cr_assert_str_eq(content, "A\n<system-reminder>\nPostToolUse:Write "
	    "hook blocking error: lint failed\nPostToolUse:Write hook "
	    "additional context: formatted\n</system-reminder>");
	cr_assert(h_logged(h, "spawn b"));
}

Test(hooks, an_interrupt_during_post_keeps_the_real_result)
{
	h->hook_phases = POST;
	h_add(h, "a", "bash", "{\"command\":\"ls\"}");
	h_skip(h);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "hooks a post", NULL);
	exec_abort(h->ex, false);
	cr_assert(h_logged(h, "hooks-cancel a"));
	cr_assert(h_logged(h, "result a ok A"));
}

Test(hooks, pre_and_post_context_reach_the_model_in_one_reminder)
{
	json_t *runs = json_array();
	struct exec_hooks_done pre = { .context = "branch main", .runs = runs,
		.name = "Bash" };
	struct exec_hooks_done post = { .context = "took 3 ms", .runs = runs,
		.name = "Bash" };

	h->hook_phases = PRE | POST;
	h_add(h, "a", "bash", "{\"command\":\"ls\"}");
	h_skip(h);
	exec_hooks_done(exec_find(h->ex, "a"), &pre);
	h_exit(h, h_find(h, "a"), 0, "A");
	exec_hooks_done(exec_find(h->ex, "a"), &post);
	json_decref(runs);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    h->last_result, "result"), "content")), "A\n<system-reminder>\n"
	    "PreToolUse:Bash hook additional context: branch main\n"
	    "PostToolUse:Bash hook additional context: took 3 ms\n"
	    "</system-reminder>");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    json_object_get(h->last_result, "meta"), "hooks"),
	    "additionalContext")), "branch main\ntook 3 ms");
}
