/* A copy read once, front to back: see readonce.h. */
#include "session/readonce.h"

#include <sys/mman.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/*
 * Its own mapping, not malloc's: unmapping its front gives the pages back
 * at once, where freed heap memory would stay resident.
 */
struct readonce {
	char *data;      /* the copy's first byte */
	size_t len;
	size_t released; /* bytes from data already unmapped, whole pages */
	size_t size;     /* bytes mapped from data, whole pages */
};

struct readonce *
readonce_new(const char *data, size_t len)
{
	struct readonce *r = xcalloc(1, sizeof *r);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p;

	r->size = (len / page + 1) * page;
	p = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
	    MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fatal("out of memory (%zu bytes): %s", r->size,
		    strerror(errno));
	r->data = p;
	memcpy(r->data, data, len);
	r->len = len;
	return r;
}

const char *
readonce_data(const struct readonce *r)
{
	return r->data;
}

size_t
readonce_len(const struct readonce *r)
{
	return r->len;
}

void
readonce_release(struct readonce *r, size_t upto)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t cut = (upto > r->len ? r->len : upto) / page * page;

	if (cut <= r->released)
		return;
	if (munmap(r->data + r->released, cut - r->released) != 0)
		fatal("munmap: %s", strerror(errno));
	r->released = cut;
}

void
readonce_free(struct readonce *r)
{
	if (r == NULL)
		return;
	if (r->size > r->released &&
	    munmap(r->data + r->released, r->size - r->released) != 0)
		fatal("munmap: %s", strerror(errno));
	free(r);
}
