/* What a reload carries besides records: kept descriptors, raw bytes. */
#include "handover.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

static struct buf handover_fds;
static int *handover_named;
static size_t handover_nnamed;

void
handover_keep_fd(int fd)
{
	if (fd < 0 || fcntl(fd, F_SETFD, 0) != 0)
		return;
	buf_printf(&handover_fds, "%s%d", handover_fds.len > 0 ? "," : "",
	    fd);
}

const char *
handover_kept(void)
{
	return handover_fds.data != NULL ? handover_fds.data : "";
}

static bool
handover_in_list(int fd, const int *extra)
{
	size_t i;

	for (i = 0; i < handover_nnamed; i++)
		if (handover_named[i] == fd)
			return true;
	for (i = 0; extra != NULL && extra[i] != -1; i++)
		if (extra[i] == fd)
			return true;
	return false;
}

void
handover_close_others(const char *list, const int *extra)
{
	const char *p = list;
	struct dirent *de;
	char *end;
	long fd;
	DIR *d;
	int dfd, *close_fds = NULL;
	size_t nclose = 0, i;

	while (p != NULL && *p != '\0') {
		fd = strtol(p, &end, 10);
		if (end == p)
			break;
		handover_named = xreallocarray(handover_named,
		    handover_nnamed + 1, sizeof *handover_named);
		handover_named[handover_nnamed++] = (int)fd;
		fcntl((int)fd, F_SETFD, FD_CLOEXEC);
		p = *end == ',' ? end + 1 : end;
	}
	if ((d = opendir("/proc/self/fd")) == NULL)
		return;
	dfd = dirfd(d);
	while ((de = readdir(d)) != NULL) {
		fd = strtol(de->d_name, &end, 10);
		if (*end != '\0' || end == de->d_name || fd <= 2 || fd == dfd ||
		    handover_in_list((int)fd, extra))
			continue;
		close_fds = xreallocarray(close_fds, nclose + 1,
		    sizeof *close_fds);
		close_fds[nclose++] = (int)fd;
	}
	closedir(d);
	for (i = 0; i < nclose; i++)
		close(close_fds[i]);
	free(close_fds);
}

bool
handover_claim_fd(int fd)
{
	size_t i;

	for (i = 0; i < handover_nnamed; i++)
		if (handover_named[i] == fd && fd >= 0) {
			handover_named[i] = -1;
			return true;
		}
	return false;
}

int
handover_take_fd(const json_t *v)
{
	int fd = (int)json_integer_value(v);

	if (!json_is_integer(v) || fd < 0 || !handover_claim_fd(fd))
		return -1;
	return fd;
}

unsigned
handover_close_unclaimed(void)
{
	unsigned n = 0;
	size_t i;

	for (i = 0; i < handover_nnamed; i++)
		if (handover_named[i] >= 0) {
			close(handover_named[i]);
			n++;
		}
	free(handover_named);
	handover_named = NULL;
	handover_nnamed = 0;
	return n;
}

void
handover_put(struct handover_rec *r, json_t *obj, const char *key,
    const void *data, size_t len)
{
	json_object_set_new(obj, key, json_pack("[I, I]",
	    (json_int_t)r->bytes.len, (json_int_t)len));
	if (len > 0)
		buf_add(&r->bytes, data, len);
}

void
handover_encode(struct handover_rec *r, struct buf *out)
{
	char *text = json_dumps(r->json, JSON_COMPACT);

	if (text == NULL)
		fatal("cannot encode a record of the handover");
	buf_reset(out);
	buf_add(out, text, strlen(text) + 1);
	if (r->bytes.len > 0)
		buf_add(out, r->bytes.data, r->bytes.len);
	free(text);
	json_decref(r->json);
	r->json = NULL;
	buf_free(&r->bytes);
}

bool
handover_decode(const char *data, size_t len, struct handover_in *in)
{
	const char *nul = memchr(data, '\0', len);

	memset(in, 0, sizeof *in);
	if (nul == NULL ||
	    (in->json = json_loadb(data, (size_t)(nul - data), 0, NULL)) ==
	    NULL)
		return false;
	in->bytes = nul + 1;
	in->len = len - (size_t)(nul - data) - 1;
	return true;
}

const char *
handover_get(const struct handover_in *in, const json_t *obj,
    const char *key, size_t *len)
{
	const json_t *v = json_object_get(obj, key);
	json_int_t off = json_integer_value(json_array_get(v, 0));
	json_int_t n = json_integer_value(json_array_get(v, 1));

	*len = 0;
	if (v == NULL || off < 0 || n <= 0 || (size_t)off > in->len ||
	    (size_t)n > in->len - (size_t)off)
		return "";
	*len = (size_t)n;
	return in->bytes + off;
}
