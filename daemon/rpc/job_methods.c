/* listJobs, readJob, writeJob, signalJob, resizeJob and writeStdin. */
#include "rpc/call.h"

#include <string.h>

#include "core/executor.h"
#include "net/conn.h"
#include "session/job.h"
#include "session/session.h"
#include "stexec/protocol.h"

/* The session and its job named by jobId; NULL once the error is sent. */
static struct job *
job_methods_job(struct call *call)
{
	struct session *s;
	const char *id;
	struct job *j;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "jobId", true, &id))
		return NULL;
	if ((j = job_find(s, id)) == NULL)
		methods_bad_param(call, "jobId", "no job %s in this session",
		    id);
	return j;
}

/* data and eof of writeJob and writeStdin; false once the error is sent. */
static bool
job_methods_data(struct call *call, const char **data, size_t *len,
    bool *eof)
{
	const json_t *v = json_object_get(call->params, "data"),
	    *e = json_object_get(call->params, "eof");

	if (!json_is_string(v)) {
		methods_bad_param(call, "data", v == NULL ? "required" :
		    "must be a string");
		return false;
	}
	if (e != NULL && !json_is_null(e) && !json_is_boolean(e)) {
		methods_bad_param(call, "eof", "must be a boolean");
		return false;
	}
	*data = json_string_value(v);
	*len = json_string_length(v);
	*eof = json_is_true(e);
	return true;
}

void
job_methods_list(struct call *call)
{
	struct session *s;

	if ((s = methods_param_session(call)) != NULL)
		conn_reply(call->c, call->id, json_pack("{s:o}", "jobs",
		    job_list_json(s)));
}

void
job_methods_read(struct call *call)
{
	uint64_t since = 0, max = JOB_READ_DEFAULT, wait = 0;
	const json_t *v = json_object_get(call->params, "since");
	const char *filter;
	char err[256];
	struct job *j;

	if ((j = job_methods_job(call)) == NULL ||
	    !methods_param_uint(call, "since", 0, INT64_MAX, false, &since) ||
	    !methods_param_uint(call, "maxBytes", 1, JOB_READ_MAX, false,
	    &max) ||
	    !methods_param_uint(call, "waitMs", 0, JOB_WAIT_MAX_MS, false,
	    &wait) ||
	    !methods_param_string(call, "filter", false, &filter))
		return;
	if (job_read(j, v == NULL || json_is_null(v) ? -1 : (int64_t)since,
	    (size_t)max, (int)wait, filter, conn_ticket(call->c, call->id),
	    err, sizeof err) != 0)
		methods_bad_param(call, "filter", "%s", err);
}

void
job_methods_write(struct call *call)
{
	const char *data, *why;
	struct job *j;
	size_t len;
	bool eof;

	if ((j = job_methods_job(call)) == NULL ||
	    !job_methods_data(call, &data, &len, &eof))
		return;
	if (job_write(j, data, len, eof, &why) != 0)
		conn_error(call->c, call->id, STEXEC_ERR_STATE, NULL,
		    "State conflict: %s", why);
	else
		conn_reply(call->c, call->id, json_pack("{s:I}", "written",
		    (json_int_t)len));
}

void
job_methods_signal(struct call *call)
{
	const char *how, *id;
	struct job *j;

	if ((j = job_methods_job(call)) == NULL ||
	    !methods_param_string(call, "signal", true, &how))
		return;
	if (strcmp(how, "interrupt") != 0 && strcmp(how, "terminate") != 0 &&
	    strcmp(how, "kill") != 0) {
		methods_bad_param(call, "signal", "must be \"interrupt\", "
		    "\"terminate\" or \"kill\"");
		return;
	}
	methods_param_string(call, "jobId", true, &id);
	if (job_signal(j, how) != 0)
		conn_error(call->c, call->id, STEXEC_ERR_STATE, NULL,
		    "State conflict: job %s has ended", id);
	else
		conn_reply(call->c, call->id, json_object());
}

void
job_methods_resize(struct call *call)
{
	uint64_t cols, rows;
	const char *why;
	struct job *j;

	if ((j = job_methods_job(call)) == NULL ||
	    !methods_param_uint(call, "cols", 1, 1000, true, &cols) ||
	    !methods_param_uint(call, "rows", 1, 1000, true, &rows))
		return;
	if (job_resize(j, (unsigned)cols, (unsigned)rows, &why) != 0)
		conn_error(call->c, call->id, STEXEC_ERR_STATE, NULL,
		    "State conflict: %s", why);
	else
		conn_reply(call->c, call->id, json_object());
}

void
job_methods_write_stdin(struct call *call)
{
	const char *id, *data, *why;
	struct exec_tool *t;
	struct session *s;
	size_t len;
	bool eof;

	if ((s = methods_param_session(call)) == NULL ||
	    !methods_param_string(call, "toolUseId", true, &id) ||
	    !job_methods_data(call, &data, &len, &eof))
		return;
	if ((t = exec_find(session_exec(s), id)) == NULL) {
		methods_bad_param(call, "toolUseId", "no tool %s in the "
		    "current turn", id);
		return;
	}
	if (session_tool_write(t, data, len, eof, &why) != 0)
		conn_error(call->c, call->id, STEXEC_ERR_STATE, NULL,
		    "State conflict: tool %s: %s", id, why);
	else
		conn_reply(call->c, call->id, json_pack("{s:I}", "written",
		    (json_int_t)len));
}
