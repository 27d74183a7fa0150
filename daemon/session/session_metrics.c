/*
 * What the metrics method reads of each session (session.h,
 * session_figures): O(1) a session, from what the session keeps anyway.
 */
#include "session/session.h"

#include "session/session_int.h"

void
session_figures(void (*cb)(const struct session_figures *, void *),
    void *arg)
{
	struct session_figures f;
	struct session *s;

	for (s = session_list; s != NULL; s = s->next) {
		if (s->closing)
			continue;
		f.id = s->id;
		f.uid = s->uid;
		f.turn = exec_turn(s->ex);
		f.processes = (unsigned)s->nrunning;
		f.queued = exec_queued(s->ex);
		f.unfinished = exec_unfinished(s->ex);
		f.clients = s->refs;
		/* From the oldest note kept to the newest, as session_lag. */
		f.retained_bytes = s->count == 0 ? 0 : s->bytes_end -
		    (s->notes[s->head].end - s->notes[s->head].len);
		cb(&f, arg);
	}
}
