/* Connections carried across a reload: written, read back, made again. */
#include "rpc/carry.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/executor.h"
#include "handover.h"
#include "log.h"
#include "net/conn.h"
#include "session/journal.h"
#include "session/session.h"
#include "util.h"

/* A record read back: its JSON and its bytes, owned. */
struct carry_rec {
	struct handover_in in;
	char *bytes;
};

static struct carry_rec *carry_recs;
static size_t carry_nrecs;

/* The drains of c pending in the sessions it named: [{s, id}]. */
static json_t *
carry_drains(struct conn *c, const json_t *refs)
{
	json_t *out = json_array(), *ref;
	void *const *cookies;
	struct session *s;
	size_t i, k, n;
	int code;

	json_array_foreach(refs, i, ref) {
		if ((s = session_find(json_string_value(ref), conn_uid(c),
		    &code)) == NULL)
			continue;
		n = exec_drains(session_exec(s), &cookies);
		for (k = 0; k < n; k++)
			if (conn_ticket_conn(cookies[k]) == c)
				json_array_append_new(out, json_pack("{s:O, s:O}",
				    "s", ref, "id", conn_ticket_id(cookies[k])));
	}
	return out;
}

void
carry_save(void)
{
	struct sub *const *subs;
	const char *in, *out, *sid;
	struct handover_rec r;
	struct buf b = { 0 };
	struct conn *c;
	json_t *refs, *jsubs;
	size_t inlen, outlen, n, i;
	uint64_t next;

	for (c = conn_next(NULL); c != NULL; c = conn_next(c)) {
		refs = conn_refs_json(c);
		jsubs = json_array();
		subs = conn_subs(c, &n);
		for (i = 0; i < n; i++) {
			session_sub_where(subs[i], &sid, &next);
			json_array_append_new(jsubs, json_pack("{s:s, s:I}",
			    "s", sid, "next", (json_int_t)next));
		}
		r.json = json_pack("{s:i, s:I, s:o, s:o, s:o, s:o}", "fd",
		    conn_fd(c), "uid", (json_int_t)conn_uid(c), "refs", refs,
		    "subs", jsubs, "drains", carry_drains(c, refs), "serves",
		    session_client_conn_json(c));
		memset(&r.bytes, 0, sizeof r.bytes);
		conn_pending(c, &in, &inlen, &out, &outlen);
		handover_put(&r, r.json, "in", in, inlen);
		handover_put(&r, r.json, "out", out, outlen);
		b.len = 0;
		handover_encode(&r, &b);
		journal_append(JOURNAL_CONN, b.data, b.len, NULL, 0);
		conn_carry(c);
	}
	buf_free(&b);
}

void
carry_restore(const char *data, size_t len)
{
	struct carry_rec *rec;

	carry_recs = xreallocarray(carry_recs, carry_nrecs + 1,
	    sizeof *carry_recs);
	rec = &carry_recs[carry_nrecs];
	rec->bytes = xmalloc(len + 1);
	memcpy(rec->bytes, data, len);
	if (!handover_decode(rec->bytes, len, &rec->in)) {
		log_warn("reload: a connection record that does not read");
		free(rec->bytes);
		return;
	}
	carry_nrecs++;
}

/* One connection again, with its sessions, subscriptions and drains. */
static void
carry_adopt_one(const struct carry_rec *rec)
{
	const json_t *o = rec->in.json, *v;
	uint64_t last, oldest;
	const char *in, *out;
	size_t inlen, outlen, i;
	struct session *s;
	struct sub *sub;
	struct conn *c;
	uid_t uid;
	int fd, code;

	fd = (int)json_integer_value(json_object_get(o, "fd"));
	uid = (uid_t)json_integer_value(json_object_get(o, "uid"));
	/* Only what the image before named came across. */
	if (fd < 3 || !handover_claim_fd(fd))
		return;
	in = handover_get(&rec->in, o, "in", &inlen);
	out = handover_get(&rec->in, o, "out", &outlen);
	c = conn_adopt(fd, uid, in, inlen, out, outlen);
	json_array_foreach(json_object_get(o, "refs"), i, v)
		if ((s = session_find(json_string_value(v), uid, &code)) != NULL)
			session_refer(s, c);
	json_array_foreach(json_object_get(o, "subs"), i, v) {
		if ((s = session_find(json_string_value(json_object_get(v,
		    "s")), uid, &code)) == NULL ||
		    session_subscribe(s, c, json_integer_value(
		    json_object_get(v, "next")) - 1, &sub, &last,
		    &oldest) != 0)
			continue;
		session_sub_pump(sub);
	}
	json_array_foreach(json_object_get(o, "drains"), i, v)
		if ((s = session_find(json_string_value(json_object_get(v,
		    "s")), uid, &code)) != NULL)
			exec_drain(session_exec(s), conn_ticket(c,
			    json_object_get(v, "id")));
	json_array_foreach(json_object_get(o, "serves"), i, v)
		if ((s = session_find(json_string_value(json_object_get(v,
		    "s")), uid, &code)) != NULL)
			session_client_carried(s, c, fd, json_object_get(v,
			    "names"));
	conn_resume(c);
}

void
carry_adopt(void)
{
	size_t i;

	for (i = 0; i < carry_nrecs; i++) {
		carry_adopt_one(&carry_recs[i]);
		json_decref(carry_recs[i].in.json);
		free(carry_recs[i].bytes);
	}
	session_client_carried_all();
	if (carry_nrecs > 0)
		log_info("reload: %zu client connection(s) carried over",
		    carry_nrecs);
	free(carry_recs);
	carry_recs = NULL;
	carry_nrecs = 0;
}
