/*
 * The daemon end to end: start it, run a turn through the wire, stop it,
 * and check that nothing is left behind.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "e2e.h"

/* A failed assertion stops the daemons it left running (e2e.h). */
TestSuite(e2e_basic, .fini = e2e_fini);

Test(e2e_basic, a_turn_over_the_wire)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, NULL), *r, *list;
	const char *s = json_string_value(sid);
	char *got;

	r = c_add(c, s, "a", "bash", "{\"command\":\"echo hi\"}");
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")),
	    "executing");
	json_decref(r);
	json_decref(c_add(c, s, "b", "nope", NULL));
	r = c_call(c, "drain", json_pack("{s:s}", "sessionId", s));
	cr_assert_eq(json_integer_value(json_object_get(r, "results")), 2);
	json_decref(r);
	list = c_until(c, "turn_end", 5000);
	got = e2e_results(list);
	cr_assert_str_eq(got, "a:ok,b:unknown_tool");
	free(got);
	json_decref(list);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}

Test(e2e_basic, builtin_tools_are_listed)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *r = c_call(c, "listTools", NULL), *t;
	const char *want[] = { "bash", "read_file", "write_file", "glob",
		"grep", "list_dir" };
	size_t i, j;

	for (i = 0; i < sizeof want / sizeof *want; i++) {
		json_array_foreach(json_object_get(r, "tools"), j, t)
			if (strcmp(json_string_value(json_object_get(t, "name")),
			    want[i]) == 0)
				break;
		cr_assert(j < json_array_size(json_object_get(r, "tools")),
		    "no built-in tool %s", want[i]);
	}
	json_decref(r);
	c_close(c);
	d_stop(d);
}

/* §4: the session's env, the ToolDef's env on top (null unsets), and
 * STEXEC_SESSION_ID, STEXEC_TOOL_USE_ID, STEXEC_PROGRESS_FD, once each. */
Test(e2e_basic, tool_environment)
{
	struct daemon *d = d_start(NULL);
	struct client *c = c_open(d);
	json_t *sid = c_session(c, e2e_json("{\"env\":{\"FOO\":\"session\","
	    "\"BAR\":\"b\",\"GONE\":\"x\",\"STEXEC_TOOL_USE_ID\":\"fake\"},"
	    "\"tools\":[{\"name\":\"env\",\"command\":[\"/usr/bin/env\"],"
	    "\"env\":{\"FOO\":\"tool\",\"GONE\":null,\"NEW\":\"n\"}}]}"));
	const char *s = json_string_value(sid), *out;
	json_t *list, *res;
	char want[128];

	json_decref(c_add(c, s, "e1", "env", NULL));
	json_decref(c_call(c, "drain", json_pack("{s:s}", "sessionId", s)));
	list = c_until(c, "turn_end", 5000);
	res = e2e_filter(list, "tool_result");
	out = json_string_value(json_object_get(json_object_get(
	    json_array_get(res, 0), "result"), "content"));
	cr_assert(strstr(out, "\nFOO=tool\n") != NULL || strncmp(out,
	    "FOO=tool\n", 9) == 0, "FOO is not the tool's: %s", out);
	cr_assert(strstr(out, "FOO=session") == NULL);
	cr_assert(strstr(out, "BAR=b\n") != NULL);
	cr_assert(strstr(out, "NEW=n\n") != NULL);
	cr_assert(strstr(out, "GONE=") == NULL, "GONE was not unset");
	snprintf(want, sizeof want, "STEXEC_SESSION_ID=%s\n", s);
	cr_assert(strstr(out, want) != NULL);
	cr_assert(strstr(out, "STEXEC_TOOL_USE_ID=e1\n") != NULL);
	cr_assert(strstr(out, "STEXEC_TOOL_USE_ID=fake") == NULL);
	cr_assert(strstr(out, "STEXEC_PROGRESS_FD=3\n") != NULL);
	json_decref(res);
	json_decref(list);
	json_decref(sid);
	c_close(c);
	d_stop(d);
}
