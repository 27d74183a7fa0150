/*
 * Sessions and the crash journal (journal.h): what each session writes to
 * it (its creation, its notifications; an added tool is written by
 * session_add), what compaction rewrites, and the restore at start.
 */
#include <stdlib.h>
#include <string.h>

#include "core/executor.h"
#include "buf.h"
#include "handover.h"
#include "jsonrpc.h"
#include "session/journal.h"
#include "session/mcp_shared.h"
#include "log.h"
#include "session/job.h"
#include "session/session_int.h"
#include "core/tooldef.h"
#include "util.h"

/* A session being restored from the journal. */
struct restoring {
	struct session *s;
	uint64_t turn;            /* of the adds below */
	json_t *adds;             /* [[id, name]...] added in that turn */
	json_t *delivered;        /* toolUseId -> turn of its tool_result */
	uint64_t ended;           /* the turn of the last turn_end */
	json_t *live;             /* reload: toolUseId -> {result} or {input}
	                             or {running: index in runs} */
	struct handover_in *runs; /* reload: tools whose processes run on */
	char **raws;              /* their payloads */
	size_t nruns;
	json_t *flags;            /* reload: its turn's abort and error */
	struct handover_in *jobs; /* reload: its jobs (job.h) */
	char **jraws;
	size_t njobs;
	struct handover_in *mcps; /* reload: its MCP servers (mcp.h) */
	char **mraws;
	size_t nmcps;
};

bool session_journal_restoring;
static struct idmap session_restored;

static void	session_journal_elided(struct session *, const struct note *);
static void	session_journal_early(struct session *, const char *,
		    json_t *);
static void	session_restore_running(const char *, size_t);
static void	session_restore_stray(const struct handover_in *);
static void	session_restore_job(const char *, size_t);
static void	session_restore_mcp(const char *, size_t);
static bool	session_restore_keep(const char *, size_t,
		    struct handover_in *, char **, struct restoring **);
static void	session_restore_adopt(struct restoring *);
static void	session_journal_session(struct session *);
static void	session_journal_note(struct session *, const struct note *);
static struct journal_big *session_journal_note_big(struct session *,
		    const struct note *);
static void	session_journal_add(struct session *, uint64_t, const char *,
		    const char *);
static void	session_journal_contexted(struct session *);

/* Keep the createSession a restart needs to make this session again. */
static void
session_journal_created(struct session *s, struct tooldef **tools,
    size_t ntools, unsigned max_parallel, const char *cwd, const json_t *env)
{
	json_t *defs = json_array(), *rec;
	char *text;
	size_t i;

	for (i = 0; i < ntools; i++)
		json_array_append_new(defs, tooldef_json(tools[i]));
	rec = json_pack("{s:s, s:I, s:o, s:I, s:s?, s:O?, s:I, s:o?}", "id",
	    s->id, "uid", (json_int_t)s->uid, "tools", defs, "maxParallel",
	    (json_int_t)max_parallel, "cwd", cwd, "env", env,
	    "outputGraceMs", (json_int_t)s->output_grace_ms, "sandbox",
	    s->sandbox.mode != TOOLDEF_SANDBOX_UNSET ?
	    tooldef_sandbox_json(&s->sandbox) : NULL);
	json_object_set_new(rec, "shell", session_shell_json(&s->shell));
	if (session_hook_own(s) != NULL)
		json_object_set(rec, "hooks", (json_t *)session_hook_own(s));
	if (rec == NULL || (text = json_dumps(rec, JSON_COMPACT)) == NULL)
		fatal("cannot encode session %s for the journal", s->id);
	json_decref(rec);
	s->journal = text;
	session_journal_session(s);
}

static void
session_journal_session(struct session *s)
{
	if (journal_active() && !session_journal_restoring)
		journal_append(JOURNAL_SESSION, s->journal, strlen(s->journal),
		    NULL, 0);
}

static void
session_journal_note(struct session *s, const struct note *n)
{
	char head[sizeof s->id + BUF_U64_MAX + 2];
	size_t len = strlen(s->id);

	if (!journal_active() || session_stopping || session_journal_restoring)
		return;
	/* "%s %llu ", without snprintf: a record per note. */
	memcpy(head, s->id, len);
	head[len++] = ' ';
	len += buf_fmt_u64(head + len, n->seq, 10);
	head[len++] = ' ';
	journal_append(JOURNAL_NOTE, head, len, n->line, n->len);
}

/* A note too long for one pass, in slices (journal.h); NULL: none. */
static struct journal_big *
session_journal_note_big(struct session *s, const struct note *n)
{
	char head[64];
	int len;

	if (!journal_active() || session_stopping || session_journal_restoring)
		return NULL;
	len = snprintf(head, sizeof head, "%s %llu ", s->id,
	    (unsigned long long)n->seq);
	return journal_big_new(JOURNAL_NOTE, head, (size_t)len, n->line,
	    n->len);
}

/*
 * A streamOutput chunk (its text in params.data) or a job_output (in
 * params) as session_note_output and session_notify journal it, at
 * compaction.
 */
static void
session_journal_elided(struct session *s, const struct note *n)
{
	json_t *line = json_loadb(n->line, n->len, JSON_ALLOW_NUL, NULL);
	json_t *params = json_object_get(line, "params");
	json_t *data = json_object_get(params, "data") != NULL ?
	    json_object_get(params, "data") : params;
	struct note as = *n;
	char *text;

	json_object_set_new(data, "elided", json_integer((json_int_t)
	    json_string_length(json_object_get(data, "text"))));
	json_object_set_new(data, "text", json_string(""));
	if (line != NULL && (text = json_dumps(line, JSON_COMPACT)) != NULL) {
		as.len = strlen(text) + 1;
		as.line = xmalloc(as.len);
		memcpy(as.line, text, as.len - 1);
		as.line[as.len - 1] = '\n';
		session_journal_note(s, &as);
		free(as.line);
		free(text);
	}
	json_decref(line);
}

/*
 * Written straight, not through json_pack and json_dumps: one per tool, on
 * the way to its spawn; the strings are UTF-8 (they came in as JSON).
 */
static void
session_journal_add(struct session *s, uint64_t turn, const char *id,
    const char *name)
{
	struct buf rec = { 0 };
	char num[BUF_U64_MAX];

	if (!journal_active() || session_journal_restoring)
		return;
	buf_grow(&rec, 64 + strlen(s->id) + 6 * (strlen(id) + strlen(name)));
	buf_addstr(&rec, "{\"s\":");
	jsonrpc_add_string_repaired(&rec, s->id, strlen(s->id));
	buf_addstr(&rec, ",\"t\":");
	buf_add(&rec, num, buf_fmt_u64(num, turn, 10));
	buf_addstr(&rec, ",\"id\":");
	jsonrpc_add_string_repaired(&rec, id, strlen(id));
	buf_addstr(&rec, ",\"name\":");
	jsonrpc_add_string_repaired(&rec, name, strlen(name));
	buf_addstr(&rec, "}");
	journal_append(JOURNAL_ADD, rec.data, rec.len, NULL, 0);
	buf_free(&rec);
}

/* Not at shutdown: sessions outlive a restart, closeSession ends them. */
static void
session_journal_closed(struct session *s)
{
	if (!session_stopping && !session_journal_restoring && journal_active())
		journal_append(JOURNAL_CLOSE, s->id, strlen(s->id), NULL, 0);
}

static void
session_journal_idled(struct session *s)
{
	char rec[64];
	int n;

	if (!journal_active() || session_stopping || session_journal_restoring)
		return;
	n = snprintf(rec, sizeof rec, "%s %lld", s->id,
	    (long long)s->idle_since);
	journal_append(JOURNAL_IDLE, rec, (size_t)n, NULL, 0);
}

static void
session_journal_contexted(struct session *s)
{
	json_t *rec;
	char *text;

	if (!journal_active() || session_journal_restoring)
		return;
	rec = json_pack("{s:s, s:s, s:O}", "s", s->id, "cwd",
	    exec_cwd(s->ex), "env", exec_env(s->ex));
	if (rec == NULL || (text = json_dumps(rec, JSON_COMPACT)) == NULL)
		fatal("cannot encode the context of session %s", s->id);
	json_decref(rec);
	journal_append(JOURNAL_CONTEXT, text, strlen(text), NULL, 0);
	free(text);
}

static bool
session_journal_journaling(void)
{
	return journal_active() && !session_journal_restoring;
}

static const struct session_hooks session_journal_hooks = {
	session_journal_created, session_journal_note, session_journal_add,
	session_journal_closed, session_journal_idled,
	session_journal_contexted, session_journal_journaling,
	session_journal_session, session_journal_note_big,
};

void
session_journal_init(void)
{
	session_set_hooks(&session_journal_hooks);
}

void
session_journal_snapshot(bool whole)
{
	struct session *s;
	const char *id, *name;
	struct note *n;
	size_t i;

	for (s = session_list; s != NULL; s = s->next) {
		if (s->closing)
			continue;
		session_journal_session(s);
		if (exec_context_gen(s->ex) != 0)
			session_journal_contexted(s);
		if (s->idle_since != 0)
			session_journal_idled(s);
		for (i = 0; (id = exec_turn_tool(s->ex, i, &name)) != NULL;
		    i++)
			session_journal_add(s, exec_turn(s->ex), id, name);
		for (i = 0; i < s->count; i++) {
			n = &s->notes[(s->head + i) % s->cap];
			if (n->line != NULL && n->output && !whole)
				session_journal_elided(s, n);
			else if (n->line != NULL)
				session_journal_note(s, n);
		}
	}
}

/* What a client wrote to a tool's stdin before it started goes along. */
static void
session_journal_early(struct session *s, const char *id, json_t *rec)
{
	struct exec_tool *t = exec_turn_find(s->ex, id);
	const char *data;
	size_t len;
	bool eof;

	if (t == NULL || ((data = exec_tool_stdin_early(t, &len, &eof)) ==
	    NULL && !eof))
		return;
	/* Whole writeStdin strings, so UTF-8 as JSON wants it. */
	json_object_set_new(rec, "stdin", json_stringn(data != NULL ? data :
	    "", len));
	json_object_set_new(rec, "stdinEof", json_boolean(eof));
}

/* A tool whose process runs on (orphan: of a discarded turn). */
static void
session_journal_running(struct session *s, struct exec_tool *t, bool orphan)
{
	struct handover_rec r = { json_pack("{s:s, s:s, s:s, s:O, s:b, s:i, "
	    "s:O?}", "s", s->id, "id", exec_tool_id(t), "name",
	    exec_tool_name(t), "input", exec_tool_input(t), "orphan", orphan,
	    "killed", exec_tool_killed(t), "context", exec_tool_context(t)),
	    { 0 } };
	struct buf out = { 0 };

	session_tool_save(t, &r, r.json);
	handover_encode(&r, &out);
	journal_append(JOURNAL_RUNNING, out.data, out.len, NULL, 0);
	buf_free(&out);
}

/*
 * A reload's handover, after the snapshot: each tool of a current turn
 * that is neither delivered nor lost: a result held for ordering, a tool
 * whose process runs on (handed over with it), or one that never started;
 * and the running tools of discarded turns.
 */
void
session_journal_handover(void)
{
	const json_t *input, *result;
	enum exec_status st;
	struct exec_tool *t;
	struct session *s;
	const char *id;
	json_t *rec;
	char *text;
	size_t i;

	for (s = session_list; s != NULL; s = s->next) {
		if (s->closing)
			continue;
		for (i = 0; (id = exec_turn_tool_state(s->ex, i, &st, &input,
		    &result)) != NULL; i++) {
			if (st == EXEC_DELIVERED)
				continue;
			if (st == EXEC_EXECUTING &&
			    (t = exec_turn_find(s->ex, id)) != NULL &&
			    session_tool_carried(t)) {
				session_journal_running(s, t, false);
				continue;
			}
			/*
			 * An MCP server's call whose server is not carried
			 * gets daemon_restarted (S10), never a second run.
			 */
			if (st == EXEC_EXECUTING && t != NULL &&
			    tooldef_runner(exec_tool_def(t)) == TOOLDEF_RUNNER_MCP)
				continue;
			if (st == EXEC_COMPLETED && result != NULL)
				rec = json_pack("{s:s, s:s, s:O}", "s", s->id,
				    "id", id, "result", result);
			else {
				rec = json_pack("{s:s, s:s, s:O}", "s", s->id,
				    "id", id, "input", input);
				session_journal_early(s, id, rec);
			}
			if (rec == NULL ||
			    (text = json_dumps(rec, JSON_COMPACT)) == NULL)
				fatal("cannot encode the handover of %s", id);
			journal_append(st == EXEC_COMPLETED ? JOURNAL_HELD :
			    JOURNAL_REQUEUE, text, strlen(text), NULL, 0);
			free(text);
			json_decref(rec);
		}
		for (i = 0; i < s->nrunning; i++)
			if (exec_tool_discarded(s->running[i]) &&
			    session_tool_carried(s->running[i]))
				session_journal_running(s, s->running[i], true);
		job_handover(s);
		session_mcp_handover(s);
		if ((rec = exec_turn_flags(s->ex)) != NULL) {
			json_object_set_new(rec, "s", json_string(s->id));
			json_object_set_new(rec, "t", json_integer(
			    (json_int_t)exec_turn(s->ex)));
			if ((text = json_dumps(rec, JSON_COMPACT)) == NULL)
				fatal("cannot encode the turn of %s", s->id);
			journal_append(JOURNAL_TURN, text, strlen(text), NULL,
			    0);
			free(text);
			json_decref(rec);
		}
	}
}

/* A session of the journal: made again, empty, as its client made it. */
static void
session_restore_session(const json_t *rec)
{
	const json_t *defs = json_object_get(rec, "tools"), *v;
	const char *id = json_string_value(json_object_get(rec, "id"));
	struct tooldef **tools;
	struct restoring *r;
	char err[512], field[64];
	size_t i, n = 0;
	bool ok = true;

	/* A later record of a session (its MCP servers added): those. */
	if (id != NULL && (r = idmap_get(&session_restored, id)) != NULL) {
		free(r->s->journal);
		r->s->journal = json_dumps(rec, JSON_COMPACT);
		session_mcp_restore(r->s, rec);
		return;
	}
	if (id == NULL || strlen(id) >= sizeof(((struct session *)0)->id) ||
	    idmap_get(&session_map, id) != NULL) {
		log_warn("journal: a session record without a usable id was "
		    "dropped");
		return;
	}
	tools = xcalloc(json_array_size(defs) + 1, sizeof *tools);
	json_array_foreach(defs, i, v) {
		if ((tools[n] = tooldef_parse(v, err, sizeof err)) == NULL) {
			log_about(LOG_LEVEL_WARN, id, NULL, NULL, "dropped "
			    "from the journal: its tool %zu no longer "
			    "parses: %s", i, err);
			ok = false;
			break;
		}
		n++;
	}
	if (ok) {
		r = xcalloc(1, sizeof *r);
		r->s = session_new(id, (uid_t)json_integer_value(
		    json_object_get(rec, "uid")), tools, n,
		    (unsigned)json_integer_value(json_object_get(rec,
		    "maxParallel")), json_string_value(json_object_get(rec,
		    "cwd")), json_object_get(rec, "env"));
		r->s->output_grace_ms = (unsigned)json_integer_value(
		    json_object_get(rec, "outputGraceMs"));
		if (!tooldef_parse_sandbox(json_object_get(rec, "sandbox"),
		    "sandbox", &r->s->sandbox, err, sizeof err))
			log_about(LOG_LEVEL_WARN, id, NULL, NULL, "journal: "
			    "%s; its tools fall back to the daemon's sandbox",
			    err);
		session_shell_clear(&r->s->shell);
		if (!session_shell_parse(json_object_get(rec, "shell"),
		    &r->s->shell, field, sizeof field, err, sizeof err))
			log_about(LOG_LEVEL_WARN, id, NULL, NULL, "journal: "
			    "%s: %s; its shell falls back to the defaults",
			    field, err);
		/* The operator's hooks and its own, without SessionStart. */
		session_hook_attach(r->s, json_object_get(rec, "hooks"), false);
		r->s->journal = json_dumps(rec, JSON_COMPACT);
		session_mcp_restore(r->s, rec);
		r->adds = json_array();
		r->delivered = json_object();
		r->live = json_object();
		/* The session's own id outlives the record: the map's key. */
		idmap_put(&session_restored, r->s->id, r);
	}
	for (i = 0; i < n; i++)
		tooldef_unref(tools[i]);
	free(tools);
}

static void
session_restore_free(struct restoring *r)
{
	size_t i;

	for (i = 0; i < r->nruns; i++) {
		json_decref(r->runs[i].json);
		free(r->raws[i]);
	}
	free(r->runs);
	free(r->raws);
	for (i = 0; i < r->njobs; i++) {
		json_decref(r->jobs[i].json);
		free(r->jraws[i]);
	}
	free(r->jobs);
	free(r->jraws);
	for (i = 0; i < r->nmcps; i++) {
		json_decref(r->mcps[i].json);
		free(r->mraws[i]);
	}
	free(r->mcps);
	free(r->mraws);
	json_decref(r->flags);
	json_decref(r->adds);
	json_decref(r->delivered);
	json_decref(r->live);
	free(r);
}

/* A retained note, with its seq; what it says of results and turns. */
static void
session_restore_note(const char *data, size_t len)
{
	char id[64], *end;
	const char *sp;
	struct restoring *r;
	struct note *n;
	unsigned long long seq;
	json_t *line, *params;
	size_t head;
	bool result, turn_end;

	sp = memchr(data, ' ', len);
	if (sp == NULL || (size_t)(sp - data) >= sizeof id)
		return;
	memcpy(id, data, (size_t)(sp - data));
	id[sp - data] = '\0';
	if ((r = idmap_get(&session_restored, id)) == NULL)
		return;
	seq = strtoull(sp + 1, &end, 10);
	if (*end != ' ' || seq <= r->s->last_seq)
		return;
	end++;
	len -= (size_t)(end - data);
	/* The method comes first in the line the codec writes. */
	head = len < 64 ? len : 64;
	result = memmem(end, head, "\"method\":\"tool_result\"", 22) != NULL;
	turn_end = memmem(end, head, "\"method\":\"turn_end\"", 19) != NULL;
	r->s->last_seq = seq - 1;
	n = session_log_note(r->s, turn_end);
	n->line = xmalloc(len);
	memcpy(n->line, end, len);
	n->len = len;
	r->s->bytes_end += len;
	n->end = r->s->bytes_end;
	if (!result && !turn_end)
		return;
	if ((line = json_loadb(end, len, 0, NULL)) == NULL)
		return;
	params = json_object_get(line, "params");
	if (result)
		json_object_set(r->delivered, json_string_value(json_object_get(
		    params, "toolUseId")) != NULL ? json_string_value(
		    json_object_get(params, "toolUseId")) : "",
		    json_object_get(params, "turn"));
	else if ((uint64_t)json_integer_value(json_object_get(params,
	    "turn")) > r->ended)
		r->ended = (uint64_t)json_integer_value(json_object_get(params,
		    "turn"));
	json_decref(line);
}

/* "SID MS": when the session became idle (0: it was in use). */
static void
session_restore_idle(const char *data, size_t len)
{
	char id[sizeof(((struct session *)0)->id)], *end;
	const char *sp = memchr(data, ' ', len);
	struct restoring *r;
	long long ms;
	char num[24];

	if (sp == NULL || (size_t)(sp - data) >= sizeof id ||
	    len - (size_t)(sp - data) - 1 >= sizeof num)
		return;
	memcpy(id, data, (size_t)(sp - data));
	id[sp - data] = '\0';
	memcpy(num, sp + 1, len - (size_t)(sp - data) - 1);
	num[len - (size_t)(sp - data) - 1] = '\0';
	ms = strtoll(num, &end, 10);
	if (*end == '\0' && ms >= 0 && (r = idmap_get(&session_restored, id))
	    != NULL)
		r->s->idle_since = ms;
}

/*
 * A handover record kept whole (its raw payload) until its session is
 * back; false when it does not read. *r is NULL when no session of its
 * "s" was restored: a process it names then must not run unsupervised.
 */
static bool
session_restore_keep(const char *data, size_t len, struct handover_in *in,
    char **raw, struct restoring **r)
{
	const char *sid;

	*raw = xmalloc(len + 1);
	memcpy(*raw, data, len);
	if (!handover_decode(*raw, len, in)) {
		free(*raw);
		return false;
	}
	sid = json_string_value(json_object_get(in->json, "s"));
	*r = sid != NULL ? idmap_get(&session_restored, sid) : NULL;
	if (*r == NULL) {
		if (json_object_get(in->json, "proc") != NULL)
			session_restore_stray(in);
		json_decref(in->json);
		free(*raw);
	}
	return *r != NULL;
}

/* A tool whose process runs on, for session_restore_adopt. */
static void
session_restore_running(const char *data, size_t len)
{
	struct handover_in in;
	struct restoring *r;
	const char *id;
	char *raw;

	if (!session_restore_keep(data, len, &in, &raw, &r))
		return;
	if ((id = json_string_value(json_object_get(in.json, "id"))) == NULL) {
		session_restore_stray(&in);
		json_decref(in.json);
		free(raw);
		return;
	}
	r->runs = xreallocarray(r->runs, r->nruns + 1, sizeof *r->runs);
	r->raws = xreallocarray(r->raws, r->nruns + 1, sizeof *r->raws);
	r->runs[r->nruns] = in;
	r->raws[r->nruns] = raw;
	if (!json_is_true(json_object_get(in.json, "orphan")))
		json_object_set_new(r->live, id, json_pack("{s:I}", "running",
		    (json_int_t)r->nruns));
	r->nruns++;
}

/* A job handed over, for job_restore. */
static void
session_restore_job(const char *data, size_t len)
{
	struct handover_in in;
	struct restoring *r;
	char *raw;

	if (!session_restore_keep(data, len, &in, &raw, &r))
		return;
	r->jobs = xreallocarray(r->jobs, r->njobs + 1, sizeof *r->jobs);
	r->jraws = xreallocarray(r->jraws, r->njobs + 1, sizeof *r->jraws);
	r->jobs[r->njobs] = in;
	r->jraws[r->njobs++] = raw;
}

/* An MCP server handed over, for session_mcp_restored. */
static void
session_restore_mcp(const char *data, size_t len)
{
	struct handover_in in;
	struct restoring *r;
	char *raw;

	/* A shared server's (scope daemon) belongs to no session. */
	raw = xmalloc(len + 1);
	memcpy(raw, data, len);
	if (handover_decode(raw, len, &in) && json_is_true(json_object_get(
	    in.json, "shared"))) {
		mcp_shared_restore(&in, raw);
		return;
	}
	json_decref(in.json);
	free(raw);
	if (!session_restore_keep(data, len, &in, &raw, &r))
		return;
	r->mcps = xreallocarray(r->mcps, r->nmcps + 1, sizeof *r->mcps);
	r->mraws = xreallocarray(r->mraws, r->nmcps + 1, sizeof *r->mraws);
	r->mcps[r->nmcps] = in;
	r->mraws[r->nmcps++] = raw;
}

/* A process handed over that no tool takes back: killed, reaped later. */
static void
session_restore_stray(const struct handover_in *in)
{
	static const struct proc_ops none = { 0 };
	struct proc *p;

	/* Nor has an MCP call: its server cancels it (mcp_server_adopted). */
	if (json_object_get(in->json, "mcp") != NULL)
		return;
	/* A client's call has no process: its client hears nothing more. */
	if (json_object_get(in->json, "client") != NULL) {
		log_warn("a reload handed over client call %s of no session",
		    json_string_value(json_object_get(in->json, "id")) !=
		    NULL ? json_string_value(json_object_get(in->json, "id")) :
		    "?");
		return;
	}
	p = proc_adopt(in, json_object_get(in->json, "proc"), &none, NULL);
	proc_kill(p);
	log_warn("a reload handed over tool %s of no session; killed it",
	    json_string_value(json_object_get(in->json, "id")) != NULL ?
	    json_string_value(json_object_get(in->json, "id")) : "?");
}

/* The processes handed over go back to their tools, now restored. */
static void
session_restore_adopt(struct restoring *r)
{
	const json_t *rec;
	struct exec_tool *t;
	const char *id, *name;
	size_t i;

	for (i = 0; i < r->nruns; i++) {
		rec = r->runs[i].json;
		id = json_string_value(json_object_get(rec, "id"));
		name = json_string_value(json_object_get(rec, "name"));
		if (json_is_true(json_object_get(rec, "orphan")) && name !=
		    NULL && session_tool(r->s, name) != NULL)
			t = exec_restore_orphan(r->s->ex, id, name,
			    session_tool(r->s, name), json_object_get(rec,
			    "input"), (int)json_integer_value(json_object_get(
			    rec, "killed")));
		else
			t = exec_turn_find(r->s->ex, id);
		if (t == NULL || exec_tool_handle(t) != NULL ||
		    !exec_tool_running(t)) {
			session_restore_stray(&r->runs[i]);
			continue;
		}
		session_tool_adopt(r->s, t, &r->runs[i], rec);
		exec_tool_set_context(t, json_object_get(rec, "context"));
	}
}

void
session_restore(char kind, const char *data, size_t len)
{
	struct restoring *r;
	json_t *rec;
	uint64_t turn;

	session_journal_restoring = true;
	if (kind == JOURNAL_NOTE) {
		session_restore_note(data, len);
		return;
	}
	if (kind == JOURNAL_IDLE) {
		session_restore_idle(data, len);
		return;
	}
	if (kind == JOURNAL_CLOSE) {
		if ((r = idmap_del(&session_restored, data)) != NULL) {
			session_free(r->s);
			session_restore_free(r);
		}
		return;
	}
	if (kind == JOURNAL_RUNNING) {
		session_restore_running(data, len);
		return;
	}
	if (kind == JOURNAL_JOB) {
		session_restore_job(data, len);
		return;
	}
	if (kind == JOURNAL_MCP) {
		session_restore_mcp(data, len);
		return;
	}
	/* A requeued tool's early stdin may hold NUL bytes. */
	if ((rec = json_loadb(data, len, JSON_ALLOW_NUL, NULL)) == NULL)
		return;
	if (kind == JOURNAL_SESSION)
		session_restore_session(rec);
	else if (kind == JOURNAL_CONTEXT && (r = idmap_get(&session_restored,
	    json_string_value(json_object_get(rec, "s")) != NULL ?
	    json_string_value(json_object_get(rec, "s")) : "")) != NULL)
		exec_restore_context(r->s->ex, json_string_value(
		    json_object_get(rec, "cwd")), json_object_get(rec, "env"));
	else if (kind == JOURNAL_TURN && (r = idmap_get(&session_restored,
	    json_string_value(json_object_get(rec, "s")) != NULL ?
	    json_string_value(json_object_get(rec, "s")) : "")) != NULL) {
		json_decref(r->flags);
		r->flags = json_incref(rec);
	}
	else if ((kind == JOURNAL_HELD || kind == JOURNAL_REQUEUE) &&
	    (r = idmap_get(&session_restored, json_string_value(
	    json_object_get(rec, "s")) != NULL ? json_string_value(
	    json_object_get(rec, "s")) : "")) != NULL &&
	    json_string_value(json_object_get(rec, "id")) != NULL)
		json_object_set(r->live, json_string_value(json_object_get(rec,
		    "id")), rec);
	else if (kind == JOURNAL_ADD && (r = idmap_get(&session_restored,
	    json_string_value(json_object_get(rec, "s")) != NULL ?
	    json_string_value(json_object_get(rec, "s")) : "")) != NULL) {
		turn = (uint64_t)json_integer_value(json_object_get(rec, "t"));
		if (turn > r->turn) {
			json_array_clear(r->adds);
			r->turn = turn;
		}
		if (turn == r->turn)
			json_array_append_new(r->adds, json_pack("[O, O]",
			    json_object_get(rec, "id"),
			    json_object_get(rec, "name")));
	}
	json_decref(rec);
}

/*
 * Every session is back with its log: each resumes at its current turn,
 * where the tools whose results were not delivered get daemon_restarted.
 */
unsigned
session_restore_done(void)
{
	struct exec_restored *tools;
	struct restoring *r;
	const json_t *add, *got, *early;
	unsigned count = 0, lost;
	uint64_t turn;
	size_t i, k, n;

	session_journal_restoring = false;
	/* Shared servers first: every session's calls find them. */
	mcp_shared_adopt();
	for (i = 0; i < session_restored.cap; i++) {
		if (session_restored.slots[i].key == NULL ||
		    (r = session_restored.slots[i].value) == NULL)
			continue;
		/* Its servers first: a call in flight finds its ToolDef. */
		session_mcp_restored(r->s, r->mcps, r->nmcps);
		turn = r->ended + 1 > r->turn ? r->ended + 1 : r->turn;
		n = turn == r->turn ? json_array_size(r->adds) : 0;
		tools = xcalloc(n + 1, sizeof *tools);
		lost = 0;
		json_array_foreach(turn == r->turn ? r->adds : NULL, k, add) {
			tools[k].id = json_string_value(json_array_get(add, 0));
			tools[k].name = json_string_value(json_array_get(add,
			    1));
			got = json_object_get(r->delivered, tools[k].id);
			tools[k].delivered = got != NULL &&
			    (uint64_t)json_integer_value(got) == turn;
			/* A reload hands over what a crash loses. */
			got = json_object_get(r->live, tools[k].id);
			tools[k].result = json_object_get(got, "result");
			if ((tools[k].input = json_object_get(got, "input")) !=
			    NULL && tools[k].name != NULL) {
				tools[k].requeue = true;
				tools[k].def = session_tool(r->s,
				    tools[k].name);
				early = json_object_get(got, "stdin");
				tools[k].stdin_early = json_string_value(early);
				tools[k].stdin_early_len = json_string_length(
				    early);
				tools[k].stdin_early_eof = json_is_true(
				    json_object_get(got, "stdinEof"));
			}
			tools[k].killed_for = -1;
			if (json_object_get(got, "running") != NULL &&
			    tools[k].name != NULL && (tools[k].def =
			    session_tool(r->s, tools[k].name)) != NULL) {
				tools[k].running = true;
				tools[k].input = json_object_get(r->runs[
				    json_integer_value(json_object_get(got,
				    "running"))].json, "input");
				tools[k].killed_for = (int)json_integer_value(
				    json_object_get(r->runs[json_integer_value(
				    json_object_get(got, "running"))].json,
				    "killed"));
			}
			lost += !tools[k].delivered && got == NULL;
		}
		for (k = 0; k < n; k++)
			if (tools[k].id == NULL || tools[k].name == NULL)
				tools[k].id = tools[k].name = "";
		/* The state belongs to the turn it was saved in. */
		if (r->flags != NULL && turn == (uint64_t)json_integer_value(
		    json_object_get(r->flags, "t")))
			exec_restore_flags(r->s->ex, r->flags);
		/*
		 * Jobs first: a requeued bash_session call finds its shell
		 * (shell.h), which is a job.
		 */
		for (k = 0; k < r->njobs; k++)
			job_restore(r->s, &r->jobs[k]);
		exec_restore(r->s->ex, turn, tools, n);
		free(tools);
		session_restore_adopt(r);
		session_mcp_adopted(r->s);
		session_trim(r->s);
		session_idle_update(r->s);
		/* One line per session only where a result was lost. */
		if (lost > 0)
			log_about(LOG_LEVEL_INFO, r->s->id, NULL, NULL,
			    "restored at turn %llu, seq %llu; %u result(s) "
			    "lost to the restart", (unsigned long long)turn,
			    (unsigned long long)r->s->last_seq, lost);
		session_restore_free(r);
		count++;
	}
	idmap_free(&session_restored);
	mcp_shared_adopted();
	return count;
}
