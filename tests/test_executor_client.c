/*
 * The rules of doc/design.md §2 for tools without a process of their own
 * (runner "client"), and content blocks in results: the same state machine,
 * ended by exec_finish instead of a process's exit.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "exec_harness.h"
#include "util.h"

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

TestSuite(client, .init = setup, .fini = teardown);
TestSuite(blocks, .init = setup, .fini = teardown);

Test(client, an_unsafe_client_tool_holds_the_next_tool_until_it_completes)
{
	h_add(h, "a", "write", "{\"file_path\":\"/a\"}");
	h_add(h, "t", "todo", "{}");
	h_add(h, "b", "write", "{\"file_path\":\"/b\"}");
	h_expect(h, "spawn a", "status a executing", "state 0 [a]", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A", "spawn t",
	    "status t executing", "state 0 [t]", NULL);
	h_finish(h, h_find(h, "t"), "\"updated\"", false);
	h_expect(h, "status t completed", "result t ok updated", "spawn b",
	    "status b executing", "state 0 [b]", NULL);
	cr_assert(json_is_null(json_object_get(json_object_get(
	    h->last_result, "meta"), "exitCode")));
}

Test(client, safe_client_tools_run_beside_reads_and_deliver_in_order)
{
	h_add(h, "r1", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "t1", "task", "{}");
	h_add(h, "t2", "task", "{}");
	h_add(h, "r2", "read", "{\"file_path\":\"/b\"}");
	cr_assert(h_is_running(h, h_find(h, "r1")));
	cr_assert(h_is_running(h, h_find(h, "t1")));
	cr_assert(h_is_running(h, h_find(h, "t2")));
	cr_assert(h_is_running(h, h_find(h, "r2")));
	h_skip(h);
	h_finish(h, h_find(h, "t2"), "\"two\"", false);
	h_exit(h, h_find(h, "r2"), 0, "B");
	h_finish(h, h_find(h, "t1"), "\"one\"", false);
	h_expect(h, "status t2 completed", "state 0 [r1,t1,r2]",
	    "status r2 completed", "state 0 [r1,t1]", "status t1 completed",
	    "state 0 [r1]", NULL);
	h_exit(h, h_find(h, "r1"), 0, "A");
	h_expect(h, "status r1 completed", "result r1 ok A", "result t1 ok one",
	    "result t2 ok two", "result r2 ok B", "state 0 []", NULL);
}

Test(client, an_error_result_cascades_when_its_definition_asks)
{
	h_add(h, "t", "task", "{}");
	h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	h_skip(h);
	h_finish(h, h_find(h, "t"), "\"subagent failed\"", true);
	h_expect(h, "status t completed", "kill s",
	    "result t error subagent failed", "state 1 [s]", NULL);
	h_killed(h, h_find(h, "s"));
	h_expect(h, "status s completed", "result s sibling_error "
	    "<tool_use_error>Cancelled: parallel tool call task errored"
	    "</tool_use_error>", "state 0 []", NULL);
}

Test(client, an_interrupt_cancels_a_cancel_client_tool_and_its_late_answer_counts_for_nothing)
{
	h_add(h, "t", "task", "{}");
	h_skip(h);
	exec_abort(h->ex, false);
	h_expect(h, "kill t", NULL);
	/* The session answers a cancel tool at once, as killed. */
	h_killed(h, h_find(h, "t"));
	h_expect(h, "status t completed", "result t interrupted "
	    "<tool_use_error>Interrupted by user</tool_use_error>",
	    "state 0 []", NULL);
}

Test(client, an_interrupt_lets_a_block_client_tool_finish)
{
	h_add(h, "t", "todo", "{}");
	h_skip(h);
	exec_abort(h->ex, false);
	cr_assert(!h_logged(h, "kill t"));
	h_finish(h, h_find(h, "t"), "\"saved\"", false);
	h_expect(h, "status t completed", "result t ok saved", "state 0 []",
	    NULL);
}

Test(client, a_hard_abort_of_a_block_tool_gives_the_killed_words_even_when_it_answers)
{
	h_add(h, "t", "todo", "{}");
	h_skip(h);
	exec_abort(h->ex, true);
	h_expect(h, "kill t", NULL);
	/* Within the kill grace the client still answered. */
	h_finish(h, h_find(h, "t"), "\"saved\"", false);
	h_expect(h, "status t completed", "result t interrupted "
	    "<tool_use_error>Interrupted by user</tool_use_error>",
	    "state 0 []", NULL);
}

Test(client, a_timeout_gives_the_timeout_result)
{
	h_add(h, "t", "todo", "{}");
	h_skip(h);
	h_timeout(h, h_find(h, "t"), "");
	h_expect(h, "status t completed", "result t timeout Error: timed out "
	    "after 120000 ms", "state 0 []", NULL);
}

Test(client, a_discarded_client_tool_finishes_silently)
{
	h_add(h, "t", "todo", "{}");
	h_skip(h);
	exec_discard(h->ex);
	h_skip(h);
	h_finish(h, h_find(h, "t") != NULL ? h_find(h, "t") :
	    h->running[0], "\"late\"", false);
	cr_assert(!h_logged(h, "result t ok late"));
	cr_assert(!exec_busy(h->ex));
}

Test(client, progress_is_a_progress_notification)
{
	json_t *data = json_pack("{s:i}", "done", 3);

	h_add(h, "t", "todo", "{}");
	h_skip(h);
	exec_progress(h_find(h, "t"), data);
	json_decref(data);
	h_expect(h, "progress t {\"done\":3}", NULL);
	h_finish(h, h_find(h, "t"), "\"ok\"", false);
}

Test(blocks, a_client_result_of_blocks_arrives_whole)
{
	const char *blocks = "[{\"type\":\"text\",\"text\":\"a plot\"},"
	    "{\"type\":\"image\",\"source\":{\"type\":\"base64\","
	    "\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}}]";
	char want[512];

	h_add(h, "t", "todo", "{}");
	h_skip(h);
	h_finish(h, h_find(h, "t"), blocks, false);
	snprintf(want, sizeof want, "result t ok %s", blocks);
	h_expect(h, "status t completed", want, "state 0 []", NULL);
}

Test(blocks, a_tools_fd3_content_follows_its_output_as_blocks)
{
	const char *line = "{\"content\":[{\"type\":\"image\",\"source\":"
	    "{\"type\":\"base64\",\"media_type\":\"image/gif\",\"data\":"
	    "\"R0lGODlh\"}}]}";

	h_add(h, "a", "bash", "{\"command\":\"plot\"}");
	h_skip(h);
	exec_progress_line(h_find(h, "a"), line, strlen(line));
	h_exit(h, h_find(h, "a"), 0, "drew it");
	h_expect(h, "status a completed", "result a ok "
	    "[{\"type\":\"text\",\"text\":\"drew it\"},{\"type\":\"image\","
	    "\"source\":{\"type\":\"base64\",\"media_type\":\"image/gif\","
	    "\"data\":\"R0lGODlh\"}}]", "state 0 []", NULL);
}

Test(blocks, bad_fd3_content_is_a_warning_and_the_output_stays_text)
{
	const char *line = "{\"content\":[{\"type\":\"video\"}]}";
	json_t *w;

	h_add(h, "a", "bash", "{\"command\":\"plot\"}");
	h_skip(h);
	exec_progress_line(h_find(h, "a"), line, strlen(line));
	h_exit(h, h_find(h, "a"), 0, "out");
	h_expect(h, "status a completed", "result a ok out", "state 0 []",
	    NULL);
	w = json_object_get(json_object_get(h->last_result, "meta"),
	    "warnings");
	cr_assert_eq(json_array_size(w), 1);
	cr_assert(strstr(json_string_value(json_array_get(w, 0)),
	    "content[0].type") != NULL);
}

Test(blocks, a_killed_tools_blocks_are_not_its_result)
{
	const char *line = "{\"content\":[{\"type\":\"text\",\"text\":\"x\"}]}";

	h_add(h, "a", "bash", "{\"command\":\"plot\"}");
	h_skip(h);
	exec_progress_line(h_find(h, "a"), line, strlen(line));
	exec_abort(h->ex, false);
	h_killed(h, h_find(h, "a"));
	h_expect(h, "kill a", "status a completed", "result a interrupted "
	    "<tool_use_error>Interrupted by user</tool_use_error>",
	    "state 0 []", NULL);
}

Test(blocks, fd3_blocks_past_the_result_ceiling_are_refused_in_a_warning)
{
	size_t big = tooldef_result_ceiling() / 2 + 1;
	char *text = xmalloc(big + 1);
	json_t *line = NULL;
	char *s;
	int i;

	memset(text, 'x', big);
	text[big] = '\0';
	h_add(h, "a", "bash", "{\"command\":\"plot\"}");
	h_skip(h);
	for (i = 0; i < 2; i++) {
		line = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text",
		    "text", text);
		s = json_dumps(line, JSON_COMPACT);
		exec_progress_line(h_find(h, "a"), s, strlen(s));
		free(s);
		json_decref(line);
	}
	h_exit(h, h_find(h, "a"), 0, "");
	h_skip(h);
	cr_assert_eq(json_array_size(json_object_get(json_object_get(
	    h->last_result, "result"), "content")), 1);
	cr_assert(strstr(json_string_value(json_array_get(json_object_get(
	    json_object_get(h->last_result, "meta"), "warnings"), 0)),
	    "--max-result-bytes") != NULL);
	free(text);
}
