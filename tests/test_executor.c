/*
 * doc/design.md §2, rule by rule: each suite is named after its row and drives
 * the executor core with scripted events, asserting every effect in order.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "exec_harness.h"
#include "stexec/protocol.h"
#include "util.h"

#define CANCELLED(desc) \
	"<tool_use_error>Cancelled: parallel tool call " desc \
	" errored</tool_use_error>"
#define INTERRUPTED "<tool_use_error>Interrupted by user</tool_use_error>"

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

TestSuite(S1, .init = setup, .fini = teardown);
TestSuite(S2, .init = setup, .fini = teardown);
TestSuite(S3, .init = setup, .fini = teardown);
TestSuite(S4, .init = setup, .fini = teardown);
TestSuite(S5, .init = setup, .fini = teardown);
TestSuite(S6, .init = setup, .fini = teardown);
TestSuite(S7, .init = setup, .fini = teardown);
TestSuite(S8, .init = setup, .fini = teardown);
TestSuite(S9, .init = setup, .fini = teardown);
TestSuite(S10, .init = setup, .fini = teardown);
TestSuite(restore, .init = setup, .fini = teardown);
TestSuite(S11, .init = setup, .fini = teardown);
TestSuite(S12, .init = setup, .fini = teardown);
TestSuite(S13, .init = setup, .fini = teardown);
TestSuite(S14, .init = setup, .fini = teardown);
TestSuite(S15, .init = setup, .fini = teardown);
TestSuite(S16, .init = setup, .fini = teardown);
TestSuite(S17, .init = setup, .fini = teardown);
TestSuite(results, .init = setup, .fini = teardown);
TestSuite(early_stdin, .init = setup, .fini = teardown);

Test(S1, unknown_tool_completes_at_once_and_keeps_its_place)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_expect(h, "spawn a", "status a executing", "state 0 [a]", NULL);
	h_add(h, "x", "nope", "{}");
	h_expect(h, "status x completed", NULL);
	/* It blocks nobody: a later tool starts beside a. */
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_expect(h, "spawn b", "status b executing", "state 0 [a,b]", NULL);
	h_exit(h, h_find(h, "b"), 0, "B");
	h_expect(h, "status b completed", "state 0 [a]", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A",
	    "result x unknown_tool <tool_use_error>Error: No such tool "
	    "available: nope</tool_use_error>",
	    "result b ok B", "state 0 []", NULL);
}

Test(S1, unknown_tool_alone_is_delivered_at_once)
{
	h_add(h, "x", "Bash", NULL);
	h_expect(h, "status x completed",
	    "result x unknown_tool <tool_use_error>Error: No such tool "
	    "available: Bash</tool_use_error>", NULL);
}

Test(S2, safety_is_decided_once_from_the_input)
{
	struct exec_tool *a, *b;
	json_t *st;

	a = h_add(h, "a", "sh", "{\"command\":\"ls -la\"}");
	b = h_add(h, "b", "sh", "{\"command\":\"cat x\"}");
	cr_assert(exec_tool_safe(a) && exec_tool_safe(b));
	h_add(h, "c", "sh", "{\"command\":\"rm -rf x\"}");
	/* A value the rule cannot read (not a string) means unsafe. */
	h_add(h, "d", "sh", "{\"command\":42}");
	h_expect(h, "spawn a", "status a executing", "state 1 [a]",
	    "spawn b", "status b executing", "state 1 [a,b]", NULL);
	st = exec_status_json(h->ex, NULL);
	cr_assert(json_is_false(json_object_get(json_array_get(
	    json_object_get(st, "tools"), 2), "concurrencySafe")));
	cr_assert(json_is_false(json_object_get(json_array_get(
	    json_object_get(st, "tools"), 3), "concurrencySafe")));
	json_decref(st);
	h_exit(h, a, 0, "");
	h_exit(h, b, 0, "");
	h_expect(h, "status a completed", "result a ok ", "state 1 [b]",
	    "status b completed", "result b ok ", "spawn c",
	    "status c executing", "state 1 [c]", NULL);
	h_exit(h, h_find(h, "c"), 0, "");
	h_expect(h, "status c completed", "result c ok ", "spawn d",
	    "status d executing", "state 1 [d]", NULL);
}

Test(S2, invalid_input_is_unsafe_and_never_spawns)
{
	struct exec_tool *a;

	a = h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	/* Would be safe, but invalid input makes it unsafe: it waits. */
	h_add(h, "bad", "read", "{\"file_path\":5}");
	h_add(h, "c", "read", "{\"file_path\":\"/c\"}");
	h_expect(h, "spawn a", "status a executing", "state 0 [a]", NULL);
	h_exit(h, a, 0, "A");
	h_expect(h, "status a completed", "result a ok A",
	    "status bad completed", "spawn c", "status c executing",
	    "result bad invalid_input <tool_use_error>InputValidationError: "
	    "The parameter `file_path` type is expected as `string` but "
	    "provided as `integer`</tool_use_error>",
	    "state 0 [c]", NULL);
}

Test(S2, missing_command_field_is_an_input_validation_error)
{
	h_add(h, "a", "sh", "{}");
	h_expect(h, "status a completed",
	    "result a invalid_input <tool_use_error>InputValidationError: "
	    "The required parameter `command` is missing</tool_use_error>",
	    NULL);
}

Test(S2, input_that_is_not_an_object_is_invalid)
{
	h_add(h, "a", "read", "[\"/etc/hosts\"]");
	h_expect(h, "status a completed",
	    "result a invalid_input <tool_use_error>InputValidationError: "
	    "The input must be an object, got array</tool_use_error>", NULL);
}

Test(S3, safe_tools_run_up_to_max_parallel)
{
	struct harness *h2 = h_new(2, NULL);

	h_add(h2, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h2, "b", "read", "{\"file_path\":\"/b\"}");
	h_add(h2, "c", "read", "{\"file_path\":\"/c\"}");
	h_expect(h2, "spawn a", "status a executing", "state 0 [a]",
	    "spawn b", "status b executing", "state 0 [a,b]", NULL);
	h_exit(h2, h_find(h2, "b"), 0, "B");
	h_expect(h2, "status b completed", "spawn c", "status c executing",
	    "state 0 [a,c]", NULL);
	h_free(h2);
}

Test(S3, an_unsafe_tool_runs_alone)
{
	struct exec_tool *w;

	w = h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "w2", "write", "{\"file_path\":\"/w2\"}");
	h_expect(h, "spawn w", "status w executing", "state 0 [w]", NULL);
	h_exit(h, w, 0, "ok");
	h_expect(h, "status w completed", "result w ok ok", "spawn r",
	    "status r executing", "state 0 [r]", NULL);
	h_exit(h, h_find(h, "r"), 0, "R");
	h_expect(h, "status r completed", "result r ok R", "spawn w2",
	    "status w2 executing", "state 0 [w2]", NULL);
}

Test(S4, nothing_overtakes_an_unsafe_tool)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	/* Safe, and only safe tools run, but w is before it. */
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_expect(h, "spawn a", "status a executing", "state 0 [a]", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A", "spawn w",
	    "status w executing", "state 0 [w]", NULL);
	h_exit(h, h_find(h, "w"), 0, "W");
	h_expect(h, "status w completed", "result w ok W", "spawn b",
	    "status b executing", "state 0 [b]", NULL);
}

Test(S4, safe_tools_before_an_unsafe_one_start_together)
{
	h_add(h, "w0", "write", "{\"file_path\":\"/0\"}");
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_add(h, "c", "read", "{\"file_path\":\"/c\"}");
	h_skip(h);
	h_exit(h, h_find(h, "w0"), 0, "");
	h_expect(h, "status w0 completed", "result w0 ok ", "spawn a",
	    "status a executing", "spawn b", "status b executing",
	    "state 0 [a,b]", NULL);
}

Test(S5, results_are_delivered_in_add_order)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_add(h, "c", "read", "{\"file_path\":\"/c\"}");
	h_skip(h);
	/* differs from the reference: b may not overtake a running a. */
	h_exit(h, h_find(h, "c"), 0, "C");
	h_exit(h, h_find(h, "b"), 0, "B");
	h_expect(h, "status c completed", "state 0 [a,b]",
	    "status b completed", "state 0 [a]", NULL);
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A", "result b ok B",
	    "result c ok C", "state 0 []", NULL);
	cr_assert_eq(exec_unfinished(h->ex), 0);
}

Test(S6, progress_is_delivered_at_once)
{
	struct exec_tool *b;
	const char *json = "{\"progress\":{\"pct\":50}}";
	const char *plain = "compiling \xff foo";

	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	b = h_add(h, "b", "read", "{\"file_path\":\"/b\"}");
	h_skip(h);
	h_exit(h, b, 0, "B");
	h_skip(h);
	h_add(h, "c", "read", "{\"file_path\":\"/c\"}");
	h_skip(h);
	/* c's progress is not held behind a's missing result. */
	exec_progress_line(h_find(h, "c"), json, strlen(json));
	exec_progress_line(h_find(h, "c"), plain, strlen(plain));
	exec_progress_line(h_find(h, "c"), "{\"x\":1}", 7);
	h_expect(h, "progress c {\"pct\":50}",
	    "progress c {\"text\":\"compiling \xef\xbf\xbd foo\"}",
	    "progress c {\"text\":\"{\\\"x\\\":1}\"}", NULL);
}

Test(S6, streamed_output_is_progress_before_the_result)
{
	struct harness *h2 = h_new(10, NULL);
	json_t *def = json_pack("{s:s, s:[s], s:b}", "name", "stream",
	    "command", "yes", "streamOutput", 1);
	char err[128];
	struct tooldef *d = tooldef_parse(def, err, sizeof err);
	struct exec_added added;
	struct exec_tool *t;

	cr_assert(d != NULL, "%s", err);
	json_decref(def);
	cr_assert_eq(exec_add(h2->ex, "s", "stream", d, NULL, &added), 0);
	t = added.tool;
	h_skip(h2);
	exec_output_chunk(t, 1, "out", 3);
	exec_output_chunk(t, 2, "err", 3);
	h_exit(h2, t, 0, "out\nerr");
	h_expect(h2, "progress s {\"stream\":\"stdout\",\"text\":\"out\"}",
	    "progress s {\"stream\":\"stderr\",\"text\":\"err\"}",
	    "status s completed", "result s ok out\nerr", "state 0 []", NULL);
	tooldef_unref(d);
	h_free(h2);
}

Test(S6, a_chunk_goes_out_as_given)
{
	struct harness *h2 = h_new(10, NULL);
	json_t *def = json_pack("{s:s, s:[s], s:b}", "name", "stream",
	    "command", "yes", "streamOutput", 1);
	char err[128];
	struct tooldef *d = tooldef_parse(def, err, sizeof err);
	struct exec_added added;
	struct exec_tool *t;

	json_decref(def);
	cr_assert_eq(exec_add(h2->ex, "s", "stream", d, NULL, &added), 0);
	t = added.tool;
	h_skip(h2);
	/*
	 * The caller cuts at character boundaries (utf8_carry, tested in
	 * test_utf8.c); what it gives goes out whole, an empty chunk not at
	 * all.
	 */
	exec_output_chunk(t, 1, "a \xe2\x82\xac", 5);
	exec_output_chunk(t, 2, "", 0);
	exec_output_chunk(t, 2, "x", 1);
	h_exit(h2, t, 0, "");
	h_expect(h2, "progress s {\"stream\":\"stdout\",\"text\":\"a \xe2\x82\xac\"}",
	    "progress s {\"stream\":\"stderr\",\"text\":\"x\"}",
	    "status s completed", "result s ok ", "state 0 []", NULL);
	tooldef_unref(d);
	h_free(h2);
}

Test(S7, an_error_cancels_the_siblings)
{
	h_add(h, "f", "fetch", "{\"url\":\"http://x\"}");
	h_add(h, "s", "search", "{\"pattern\":\"foo\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_skip(h);
	h_exit(h, h_find(h, "f"), 7, "boom");
	/* The failing tool gets its own result; cancel tools are killed,
	 * queued ones cancelled, block tools run on. */
	h_expect(h, "status f completed", "kill s", "status w completed",
	    "result f exit boom\nExit code 7", "state 0 [s,r]", NULL);
	h_killed(h, h_find(h, "s"));
	h_expect(h, "status s completed",
	    "result s sibling_error " CANCELLED("fetch"), "state 0 [r]",
	    NULL);
	/* Tools added later in this turn never start. */
	h_add(h, "x", "read", "{\"file_path\":\"/x\"}");
	h_expect(h, "status x completed", NULL);
	/* differs: a block tool delivers its real result. */
	h_exit(h, h_find(h, "r"), 0, "R");
	h_expect(h, "status r completed", "result r ok R",
	    "result w sibling_error " CANCELLED("fetch"),
	    "result x sibling_error " CANCELLED("fetch"), "state 0 []", NULL);
}

Test(S7, desc_is_the_name_and_40_characters_of_the_command)
{
	h_add(h, "b", "bash", "{\"command\":\"make -C /src/project all "
	    "install DESTDIR=/tmp/x\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	h_exit(h, h_find(h, "b"), 2, "make: *** [all] Error 2\n");
	h_expect(h, "status b completed", "status r completed",
	    "result b exit make: *** [all] Error 2\nExit code 2",
	    "result r sibling_error "
	    CANCELLED("bash(make -C /src/project all install DESTDIR\xe2\x80\xa6)"),
	    "state 0 []", NULL);
}

Test(S7, short_summaries_are_not_cut_and_file_path_counts)
{
	struct harness *h2 = h_new(10, NULL);
	json_t *def = json_pack("{s:s, s:[s,s], s:b}", "name", "edit",
	    "command", "ed", "{file_path}", "abortSiblingsOnError", 1);
	char err[128];
	struct tooldef *d = tooldef_parse(def, err, sizeof err);
	json_t *in = json_pack("{s:s, s:s}", "command", "", "file_path",
	    "/etc/hosts");
	struct exec_added added;
	struct exec_tool *t;

	json_decref(def);
	cr_assert_eq(exec_add(h2->ex, "e", "edit", d, in, &added), 0);
	t = added.tool;
	h_add(h2, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h2);
	h_signal(h2, t, SIGKILL);
	h_expect(h2, "status e completed", "status r completed",
	    "result e signal Killed by signal 9 (SIGKILL)",
	    "result r sibling_error " CANCELLED("edit(/etc/hosts)"),
	    "state 0 []", NULL);
	json_decref(in);
	tooldef_unref(d);
	h_free(h2);
}

Test(S7, errors_of_tools_without_the_flag_affect_nobody)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_skip(h);
	h_exit(h, h_find(h, "a"), 1, "no such file");
	h_expect(h, "status a completed",
	    "result a exit no such file\nExit code 1", "state 1 [s]", NULL);
	h_exit(h, h_find(h, "s"), 0, "S");
	h_expect(h, "status s completed", "result s ok S", "spawn w",
	    "status w executing", "state 0 [w]", NULL);
}

Test(S7, invalid_input_and_spawn_failure_cascade)
{
	h_add(h, "b", "bash", "{\"command\":7}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_expect(h, "status b completed",
	    "result b invalid_input <tool_use_error>InputValidationError: "
	    "The parameter `command` type is expected as `string` but "
	    "provided as `integer`</tool_use_error>",
	    "status r completed",
	    "result r sibling_error " CANCELLED("bash"), NULL);
	exec_drain(h->ex, NULL);
	h_skip(h);
	h_add(h, "c", "bash", "{\"command\":\"nosuch\"}");
	h_add(h, "r2", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	h_spawn_failed(h, h_find(h, "c"), "cannot run nosuch: No such file");
	h_expect(h, "status c completed", "status r2 completed",
	    "result c spawn_failed <tool_use_error>Error: cannot run nosuch: "
	    "No such file</tool_use_error>",
	    "result r2 sibling_error " CANCELLED("bash(nosuch)"),
	    "state 0 []", NULL);
}

Test(S8, interrupt_cancels_queued_and_cancel_tools)
{
	h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_skip(h);
	exec_abort(h->ex, false);
	h_expect(h, "kill s", "status w completed", NULL);
	h_add(h, "x", "read", "{\"file_path\":\"/x\"}");
	h_expect(h, "status x completed", NULL);
	h_killed(h, h_find(h, "s"));
	h_expect(h, "status s completed", "result s interrupted " INTERRUPTED,
	    "state 0 [r]", NULL);
	h_exit(h, h_find(h, "r"), 0, "R");
	h_expect(h, "status r completed", "result r ok R",
	    "result w interrupted " INTERRUPTED,
	    "result x interrupted " INTERRUPTED, "state 0 []", NULL);
}

Test(S8, the_interrupt_message_is_configurable)
{
	struct harness *h2 = h_new(10, "[Request interrupted by user]");

	h_add(h2, "b", "bash", "{\"command\":\"sleep 9\"}");
	h_skip(h2);
	exec_abort(h2->ex, false);
	h_killed(h2, h_find(h2, "b"));
	h_expect(h2, "kill b", "status b completed",
	    "result b interrupted [Request interrupted by user]", "state 0 []",
	    NULL);
	h_free(h2);
}

Test(S9, cancel_kills_block_tools_too)
{
	h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_skip(h);
	exec_abort(h->ex, true);
	h_expect(h, "kill s", "kill r", "status w completed", NULL);
	h_add(h, "x", "nope", NULL);
	h_add(h, "y", "read", "{\"file_path\":\"/y\"}");
	h_expect(h, "status x completed", "status y completed", NULL);
	h_killed(h, h_find(h, "r"));
	h_killed(h, h_find(h, "s"));
	h_expect(h, "status r completed", "state 1 [s]", "status s completed",
	    "result s interrupted " INTERRUPTED,
	    "result r interrupted " INTERRUPTED,
	    "result w interrupted " INTERRUPTED,
	    "result x unknown_tool <tool_use_error>Error: No such tool "
	    "available: nope</tool_use_error>",
	    "result y interrupted " INTERRUPTED, "state 0 []", NULL);
}

Test(S9, interrupt_then_cancel_escalates)
{
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	exec_abort(h->ex, false);
	h_expect(h, NULL);
	exec_abort(h->ex, true);
	h_expect(h, "kill r", NULL);
	exec_abort(h->ex, true);
	h_expect(h, NULL);
}

/* A text that is not UTF-8 (a bug elsewhere) is repaired, not lost. */
Test(S10, a_result_with_text_that_is_not_utf8_keeps_its_result)
{
	h_add(h, "c", "bash", "{\"command\":\"nosuch\"}");
	h_skip(h);
	h_spawn_failed(h, h_find(h, "c"), "cannot run \xe2\x82: cut");
	h_expect(h, "status c completed", "result c spawn_failed "
	    "<tool_use_error>Error: cannot run \xef\xbf\xbd\xef\xbf\xbd: "
	    "cut</tool_use_error>", "state 0 []", NULL);
}

Test(S10, every_tool_gets_exactly_one_result)
{
	static const char *ids[] = { "a", "b", "c", "d", "e", "f", "g" };
	size_t i, j, n;

	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_add(h, "b", "nope", NULL);
	h_add(h, "c", "search", "{\"pattern\":\"p\"}");
	h_add(h, "d", "write", "{\"file_path\":5}");
	h_add(h, "e", "bash", "{\"command\":\"false\"}");
	h_add(h, "f", "deploy", NULL);
	h_exit(h, h_find(h, "c"), 0, "");
	exec_abort(h->ex, false);
	h_add(h, "g", "read", "{\"file_path\":\"/g\"}");
	h_exit(h, h_find(h, "a"), 0, "");
	exec_drain(h->ex, NULL);
	for (i = 0; i < nitems(ids); i++) {
		char want[64];

		snprintf(want, sizeof want, "result %s ", ids[i]);
		for (n = 0, j = 0; j < h->nlog; j++)
			n += strncmp(h->log[j], want, strlen(want)) == 0;
		cr_assert_eq(n, 1, "%s got %zu results", ids[i], n);
	}
	cr_assert(h_logged(h, "drain 1 results=7"));
}

Test(S11, discard_delivers_nothing_more)
{
	struct exec_tool *r;
	const char *line = "{\"progress\":1}";

	h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	r = h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_skip(h);
	exec_drain(h->ex, (void *)1);
	cr_assert_eq(exec_discard(h->ex), 1);
	h_expect(h, "kill s", "turn_end 1 discarded", "drain 1 error=-32005",
	    "state 0 []", NULL);
	cr_assert_eq(exec_turn(h->ex), 2);
	/* A block tool of the discarded turn still counts for S3. */
	h_add(h, "w2", "write", "{\"file_path\":\"/w2\"}");
	h_expect(h, NULL);
	exec_progress_line(r, line, strlen(line));
	h_killed(h, h_find(h, "s"));
	h_expect(h, NULL);
	h_exit(h, r, 0, "R");
	h_expect(h, "spawn w2", "status w2 executing", "state 0 [w2]", NULL);
}

Test(S11, discard_of_an_empty_turn_starts_the_next)
{
	cr_assert_eq(exec_discard(h->ex), 1);
	h_expect(h, "turn_end 1 discarded", NULL);
	cr_assert_eq(exec_discard(h->ex), 2);
	h_expect(h, "turn_end 2 discarded", NULL);
	/* Ids are per turn: an id of the old turn may come again. */
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_expect(h, "spawn a", "status a executing", "state 0 [a]", NULL);
	cr_assert_eq(exec_tool_turn(h_find(h, "a")), 3);
}

Test(S12, drain_of_an_empty_turn_answers_at_once)
{
	exec_drain(h->ex, (void *)1);
	h_expect(h, "turn_end 1 drained", "drain 1 results=0", NULL);
	cr_assert_eq(exec_turn(h->ex), 2);
}

Test(S12, drain_waits_for_the_last_result_and_takes_late_tools)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	h_skip(h);
	exec_drain(h->ex, (void *)1);
	exec_drain(h->ex, (void *)2);
	h_expect(h, NULL);
	h_add(h, "b", "write", "{\"file_path\":\"/b\"}");
	h_exit(h, h_find(h, "a"), 0, "A");
	h_expect(h, "status a completed", "result a ok A", "spawn b",
	    "status b executing", "state 0 [b]", NULL);
	h_exit(h, h_find(h, "b"), 0, "B");
	h_expect(h, "status b completed", "result b ok B", "state 0 []",
	    "turn_end 1 drained", "drain 1 results=2", "drain 1 results=2",
	    NULL);
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	cr_assert_eq(exec_tool_turn(h_find(h, "a")), 2);
}

Test(S13, permission_round_trip)
{
	h_add(h, "d", "deploy", NULL);
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	/* Waiting counts as executing: nothing starts beside it. */
	h_expect(h, "permission d", "state 0 [d]", NULL);
	cr_assert_eq(exec_permission(h->ex, "r", true, NULL), STEXEC_ERR_STATE);
	cr_assert_eq(exec_permission(h->ex, "zz", true, NULL),
	    STEXEC_ERR_INVALID_PARAMS);
	cr_assert_eq(exec_permission(h->ex, "d", true, NULL), 0);
	h_expect(h, "spawn d", "status d executing", NULL);
	cr_assert_eq(exec_permission(h->ex, "d", true, NULL), STEXEC_ERR_STATE);
	h_exit(h, h_find(h, "d"), 0, "deployed");
	h_expect(h, "status d completed", "result d ok deployed", "spawn r",
	    "status r executing", "state 0 [r]", NULL);
}

Test(S13, deny_bubbles_up_as_a_hard_abort)
{
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_add(h, "p", "peek", NULL);
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_expect(h, "spawn r", "status r executing", "state 0 [r]",
	    "permission p", "state 0 [r,p]", NULL);
	cr_assert_eq(exec_permission(h->ex, "p", false, "not today"), 0);
	h_expect(h, "status p completed", "kill r", "status w completed",
	    "state 0 [r]", NULL);
	h_killed(h, h_find(h, "r"));
	h_expect(h, "status r completed", "result r interrupted " INTERRUPTED,
	    "result p permission_denied not today",
	    "result w interrupted " INTERRUPTED, "state 0 []", NULL);
}

Test(S13, a_waiting_tool_is_treated_as_queued)
{
	h_add(h, "d", "deploy", NULL);
	h_skip(h);
	exec_abort(h->ex, false);
	/* No process, no kill: it simply never starts. */
	h_expect(h, "status d completed", "result d interrupted " INTERRUPTED,
	    "state 0 []", NULL);
	cr_assert_eq(exec_permission(h->ex, "d", true, NULL), STEXEC_ERR_STATE);
}

Test(S13, deny_without_message_uses_the_interrupt_message)
{
	h_add(h, "d", "deploy", NULL);
	h_skip(h);
	exec_permission(h->ex, "d", false, NULL);
	h_expect(h, "status d completed",
	    "result d permission_denied " INTERRUPTED, "state 0 []", NULL);
}

Test(S14, an_unsafe_tool_changes_cwd_and_env_when_it_ends_by_itself)
{
	struct exec_tool *w;
	const char *ctx = "{\"context\":{\"cwd\":\"sub\",\"env\":{\"FOO\":\"1\","
	    "\"PATH\":null}}}";

	w = h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	exec_progress_line(w, ctx, strlen(ctx));
	cr_assert_str_eq(exec_cwd(h->ex), "/work");
	h_exit(h, w, 1, "");
	cr_assert_str_eq(exec_cwd(h->ex), "/work/sub");
	cr_assert_str_eq(json_string_value(json_object_get(exec_env(h->ex),
	    "FOO")), "1");
	cr_assert_null(json_object_get(exec_env(h->ex), "PATH"));
	w = h_add(h, "w2", "write", "{\"file_path\":\"/w\"}");
	ctx = "{\"context\":{\"cwd\":\"/abs\"}}";
	exec_progress_line(w, ctx, strlen(ctx));
	h_exit(h, w, 0, "");
	cr_assert_str_eq(exec_cwd(h->ex), "/abs");
}

Test(S14, killed_tools_and_safe_tools_change_nothing)
{
	struct exec_tool *t;
	const char *ctx = "{\"context\":{\"cwd\":\"/elsewhere\"}}";

	t = h_add(h, "b", "bash", "{\"command\":\"cd /elsewhere\"}");
	exec_progress_line(t, ctx, strlen(ctx));
	exec_abort(h->ex, false);
	h_killed(h, t);
	cr_assert_str_eq(exec_cwd(h->ex), "/work");
	exec_drain(h->ex, NULL);

	t = h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	exec_progress_line(t, ctx, strlen(ctx));
	h_exit(h, t, 0, "");
	cr_assert_str_eq(exec_cwd(h->ex), "/work");
	cr_assert_str_eq(json_string_value(json_array_get(json_object_get(
	    json_object_get(h->last_result, "meta"), "warnings"), 0)),
	    "context modifier ignored: a concurrency-safe tool cannot change "
	    "the session context");
}

Test(S15, interruptible_when_every_executing_tool_is_cancel)
{
	h_add(h, "s", "search", "{\"pattern\":\"a\"}");
	h_expect(h, "spawn s", "status s executing", "state 1 [s]", NULL);
	h_add(h, "t", "search", "{\"pattern\":\"b\"}");
	h_expect(h, "spawn t", "status t executing", "state 1 [s,t]", NULL);
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_expect(h, "spawn r", "status r executing", "state 0 [s,t,r]", NULL);
	cr_assert(!exec_interruptible(h->ex));
	h_exit(h, h_find(h, "r"), 0, "");
	h_expect(h, "status r completed", "state 1 [s,t]", NULL);
	cr_assert(exec_interruptible(h->ex));
	h_exit(h, h_find(h, "s"), 0, "");
	h_exit(h, h_find(h, "t"), 0, "");
	h_expect(h, "status s completed", "result s ok ", "state 1 [t]",
	    "status t completed", "result t ok ", "result r ok ",
	    "state 0 []", NULL);
}

Test(S16, timeout_is_an_error_that_cascades)
{
	struct exec_tool *b;

	b = h_add(h, "b", "bash", "{\"command\":\"sleep 99\",\"timeout\":5000}");
	cr_assert_eq(exec_tool_timeout_ms(b), 5000);
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	h_timeout(h, b, "waiting...");
	h_expect(h, "status b completed", "status r completed",
	    "result b timeout waiting...\nError: timed out after 5000 ms",
	    "result r sibling_error " CANCELLED("bash(sleep 99)"),
	    "state 0 []", NULL);
}

Test(S16, timeout_from_input_is_clamped)
{
	cr_assert_eq(exec_tool_timeout_ms(h_add(h, "a", "bash",
	    "{\"command\":\"x\",\"timeout\":99999999}")), 600000);
	exec_abort(h->ex, true);
	h_killed(h, h_find(h, "a"));
	exec_drain(h->ex, NULL);
	cr_assert_eq(exec_tool_timeout_ms(h_add(h, "b", "bash",
	    "{\"command\":\"x\"}")), 120000);
}

Test(S17, large_output_becomes_head_and_tail_around_the_file)
{
	struct exec_tool *t = h_add(h, "r", "read", "{\"file_path\":\"/big\"}");
	struct exec_exit x = { .end = EXEC_END_EXITED, .status = 0 };
	json_t *meta;

	x.output.head = "HEAD";
	x.output.head_len = 4;
	x.output.tail = "TAIL";
	x.output.tail_len = 4;
	x.output.total = 123456;
	x.output.path = "/var/lib/stexec/out/r.out";
	h_skip(h);
	h_exit_with(h, t, &x);
	h_expect(h, "status r completed", "result r ok HEAD\n\n[... output "
	    "truncated: 123456 bytes in total, the whole output is in "
	    "/var/lib/stexec/out/r.out; the first 4 and the last 4 bytes are "
	    "shown ...]\n\nTAIL", "state 0 []", NULL);
	meta = json_object_get(h->last_result, "meta");
	cr_assert(json_is_true(json_object_get(meta, "truncated")));
	cr_assert_str_eq(json_string_value(json_object_get(meta,
	    "fullOutputPath")), "/var/lib/stexec/out/r.out");
}

/* Only a result that names the file keeps it (the session removes the rest). */
Test(S17, an_output_file_is_used_only_by_a_result_that_names_it)
{
	struct exec_exit x = { .end = EXEC_END_EXITED, .status = 0 };
	struct exec_exit killed = { .end = EXEC_END_KILLED };
	struct exec_exit failed = { .end = EXEC_END_SPAWN_FAILED };
	struct exec_tool *s, *r;

	x.output.path = killed.output.path = "/out/x.out";
	x.output.total = killed.output.total = 100;
	s = h_add(h, "s", "search", "{\"pattern\":\"x\"}");
	r = h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	cr_assert(exec_exit_uses_output(s, &x));
	x.end = EXEC_END_TIMED_OUT;
	cr_assert(exec_exit_uses_output(s, &x));
	x.end = EXEC_END_SIGNALED;
	cr_assert(exec_exit_uses_output(s, &x));
	x.end = EXEC_END_EXITED;
	/* Killed by the daemon going away, or never started: no reader. */
	cr_assert(!exec_exit_uses_output(s, &killed));
	cr_assert(!exec_exit_uses_output(s, &failed));
	/* Discard kills s (cancel) and leaves r running, discarded (S11). */
	exec_discard(h->ex);
	cr_assert(!exec_exit_uses_output(s, &x));
	cr_assert(!exec_exit_uses_output(r, &x));
	h_killed(h, s);
	h_exit_with(h, r, &x);
}

Test(results, duplicate_ids_are_refused)
{
	h_add(h, "a", "read", "{\"file_path\":\"/a\"}");
	cr_assert_eq(h_add_rc(h, "a", "read", "{\"file_path\":\"/a\"}"),
	    STEXEC_ERR_DUPLICATE_TOOL_USE);
}

Test(results, meta_of_an_exit)
{
	json_t *meta;

	h_exit(h, h_add(h, "a", "write", "{\"file_path\":\"/a\"}"), 3, "x\n");
	meta = json_object_get(h->last_result, "meta");
	cr_assert_eq(json_integer_value(json_object_get(meta, "exitCode")), 3);
	cr_assert(json_is_null(json_object_get(meta, "signal")));
	cr_assert_eq(json_integer_value(json_object_get(meta, "durationMs")), 5);
	cr_assert(json_is_false(json_object_get(meta, "truncated")));
	cr_assert(json_is_null(json_object_get(meta, "fullOutputPath")));
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
	    h->last_result, "result"), "content")), "x\nExit code 3");
}

Test(results, nul_bytes_in_the_output_are_kept)
{
	struct exec_exit x = { .end = EXEC_END_EXITED, .status = 0 };
	const json_t *content;

	x.output.head = "a\0b";
	x.output.head_len = 3;
	x.output.total = 3;
	h_exit_with(h, h_add(h, "a", "write", "{\"file_path\":\"/a\"}"), &x);
	content = json_object_get(json_object_get(h->last_result, "result"),
	    "content");
	cr_assert_eq(json_string_length(content), 3);
	cr_assert_eq(memcmp(json_string_value(content), "a\0b", 3), 0);
}

Test(results, meta_of_a_signal)
{
	json_t *meta;

	h_signal(h, h_add(h, "a", "write", "{\"file_path\":\"/a\"}"), SIGSEGV);
	meta = json_object_get(h->last_result, "meta");
	cr_assert(json_is_null(json_object_get(meta, "exitCode")));
	cr_assert_eq(json_integer_value(json_object_get(meta, "signal")),
	    SIGSEGV);
	cr_assert_str_eq(json_string_value(json_object_get(meta, "reason")),
	    "signal");
}

Test(results, close_kills_everything_and_answers_drains)
{
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	h_skip(h);
	exec_drain(h->ex, (void *)1);
	exec_close(h->ex);
	h_expect(h, "kill r", "drain 1 error=-32005", NULL);
	cr_assert(exec_busy(h->ex));
	h_killed(h, h_find(h, "r"));
	h_expect(h, NULL);
	cr_assert(!exec_busy(h->ex));
}

#define RESTARTED "daemon_restarted <tool_use_error>Error: the tool executor " \
    "restarted while this tool ran or waited; its result is lost and its " \
    "processes were killed</tool_use_error>"

Test(restore, lost_results_come_in_order_after_the_delivered_ones)
{
	static const struct exec_restored tools[] = {
		{ .id = "a", .name = "read", .delivered = true },
		{ .id = "b", .name = "write", .delivered = false },
		{ .id = "c", .name = "read", .delivered = false },
	};
	json_t *st;

	exec_restore(h->ex, 3, tools, 3);
	/* a was delivered before the crash: nothing of it again. */
	h_expect(h, "status b completed", "status c completed",
	    "result b " RESTARTED, "result c " RESTARTED, NULL);
	cr_assert_eq(exec_turn(h->ex), 3);
	cr_assert_eq(exec_unfinished(h->ex), 0);
	cr_assert(!exec_busy(h->ex));
	/* The turn knows its tools: an id again is a duplicate. */
	cr_assert_eq(h_add_rc(h, "a", "read", "{\"file_path\":\"/a\"}"),
	    STEXEC_ERR_DUPLICATE_TOOL_USE);
	st = exec_status_json(h->ex, NULL);
	cr_assert_str_eq(json_string_value(json_object_get(json_array_get(
	    json_object_get(st, "tools"), 0), "status")), "delivered");
	json_decref(st);
	/* A drain ends it; the next turn is 4. */
	exec_drain(h->ex, (void *)1);
	h_expect(h, "turn_end 3 drained", "drain 3 results=3", NULL);
	cr_assert_eq(exec_turn(h->ex), 4);
}

Test(restore, a_result_delivered_after_a_lost_one_cannot_be)
{
	static const struct exec_restored tools[] = {
		{ .id = "a", .name = "read", .delivered = false },
		{ .id = "b", .name = "read", .delivered = true },
	};

	/* S5: results go in order, so b was not delivered either. */
	exec_restore(h->ex, 1, tools, 2);
	h_expect(h, "status a completed", "status b completed",
	    "result a " RESTARTED, "result b " RESTARTED, NULL);
}

Test(restore, a_reload_hands_over_held_results_and_tools_not_started)
{
	json_t *held = json_pack("{s:I, s:s, s:{s:s, s:s, s:s, s:b}, s:{s:s}}",
	    "turn", (json_int_t)1, "toolUseId", "a", "result", "type",
	    "tool_result", "tool_use_id", "a", "content", "kept", "is_error",
	    0, "meta", "reason", "ok");
	json_t *input = json_pack("{s:s}", "file_path", "/b");
	struct exec_restored tools[] = {
		{ .id = "a", .name = "read", .result = held },
		{ .id = "b", .name = "read", .requeue = true,
		    .def = h_def(h, "read"), .input = input },
	};

	/* a's result waits for nothing earlier: it goes out; b starts. */
	exec_restore(h->ex, 1, tools, 2);
	h_expect(h, "result a ok kept", "spawn b", "status b executing",
	    "state 0 [b]", NULL);
	h_exit(h, h_find(h, "b"), 0, "done");
	h_expect(h, "status b completed", "result b ok done", "state 0 []",
	    NULL);
	json_decref(held);
	json_decref(input);
}

/* The one warning of the last result, or "". */
static const char *
early_warning(void)
{
	json_t *w = json_object_get(json_object_get(h->last_result, "meta"),
	    "warnings");

	return json_array_size(w) == 1 ?
	    json_string_value(json_array_get(w, 0)) : "";
}

Test(early_stdin, held_then_handed_over_at_the_spawn_in_order)
{
	struct exec_tool *f;

	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_add(h, "f", "feed", NULL);
	f = exec_find(h->ex, "f");
	h_skip(h);
	cr_assert_eq(exec_stdin_early(f, "ab", 2, false, 8), EXEC_STDIN_OK);
	cr_assert_eq(exec_stdin_early(f, "c", 1, true, 8), EXEC_STDIN_OK);
	cr_assert_eq(exec_stdin_early(f, "d", 1, false, 8),
	    EXEC_STDIN_CLOSED);
	h_exit(h, h_find(h, "w"), 0, "");
	h_expect(h, "status w completed", "result w ok ",
	    "spawn f stdin=abc+eof", "status f executing", "state 0 [f]", NULL);
	/* Started: the session writes to the process from now on. */
	cr_assert_eq(exec_stdin_early(f, "e", 1, false, 8),
	    EXEC_STDIN_NOT_QUEUED);
	h_exit(h, f, 0, "abc");
	cr_assert_str_eq(early_warning(), "");
}

Test(early_stdin, bounded_and_only_for_a_streamed_stdin)
{
	struct exec_tool *f, *r;

	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_add(h, "f", "feed", NULL);
	f = exec_find(h->ex, "f");
	h_add(h, "r", "read", "{\"file_path\":\"/r\"}");
	r = exec_find(h->ex, "r");
	cr_assert_eq(exec_stdin_early(f, "abc", 3, false, 4), EXEC_STDIN_OK);
	cr_assert_eq(exec_stdin_early(f, "de", 2, false, 4), EXEC_STDIN_FULL);
	cr_assert_eq(exec_stdin_early(f, "d", 1, false, 4), EXEC_STDIN_OK);
	cr_assert_eq(exec_stdin_early(r, "x", 1, false, 4),
	    EXEC_STDIN_NOT_STREAMED);
	cr_assert_eq(exec_stdin_early(h_find(h, "w"), "x", 1, false, 4),
	    EXEC_STDIN_NOT_QUEUED);
}

Test(early_stdin, never_started_drops_them_and_says_so)
{
	json_t *held;
	struct exec_tool *f;

	h_add(h, "w", "bash", "{\"command\":\"x\"}");
	h_add(h, "f", "feed", NULL);
	f = exec_find(h->ex, "f");
	cr_assert_eq(exec_stdin_early(f, "abcd", 4, false, 8), EXEC_STDIN_OK);
	held = exec_stdin_early_held(h->ex);
	cr_assert_eq(json_integer_value(json_object_get(held, "f")), 4);
	json_decref(held);
	/* A sibling's error cancels it before it starts. */
	h_exit(h, h_find(h, "w"), 1, "no");
	cr_assert_str_eq(early_warning(), "4 bytes of stdin queued before the "
	    "start were dropped");
	held = exec_stdin_early_held(h->ex);
	cr_assert_eq(json_object_size(held), 0);
	json_decref(held);
}

Test(early_stdin, a_denied_or_failed_start_drops_them_too)
{
	struct exec_tool *g, *f;

	h_add(h, "g", "gated", NULL);
	g = exec_find(h->ex, "g");
	cr_assert_eq(exec_stdin_early(g, "xy", 2, false, 8), EXEC_STDIN_OK);
	exec_permission(h->ex, "g", false, "no");
	cr_assert_str_eq(early_warning(), "2 bytes of stdin queued before the "
	    "start were dropped");
	exec_discard(h->ex);
	h_add(h, "w", "write", "{\"file_path\":\"/w\"}");
	h_add(h, "f", "feed", NULL);
	f = exec_find(h->ex, "f");
	cr_assert_eq(exec_stdin_early(f, "abc", 3, false, 8), EXEC_STDIN_OK);
	h_exit(h, h_find(h, "w"), 0, "");
	h_spawn_failed(h, f, "cannot run cat");
	cr_assert_str_eq(early_warning(), "3 bytes of stdin queued before the "
	    "start were dropped");
}

Test(early_stdin, a_reload_requeues_them)
{
	json_t *input = json_object();
	struct exec_restored tools[] = {
		{ .id = "f", .name = "feed", .requeue = true,
		    .def = h_def(h, "feed"), .input = input,
		    .stdin_early = "kept", .stdin_early_len = 4,
		    .stdin_early_eof = true },
	};

	exec_restore(h->ex, 1, tools, 1);
	h_expect(h, "spawn f stdin=kept+eof", "status f executing",
	    "state 0 [f]", NULL);
	json_decref(input);
}
