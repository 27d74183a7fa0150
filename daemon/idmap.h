/* A string-keyed hash map of pointers (open addressing, linear probing). */
#ifndef STEXEC_IDMAP_H
#define STEXEC_IDMAP_H

#include <stddef.h>

struct idmap_slot {
	const char *key; /* borrowed from the value; NULL: empty */
	void *value;
};

struct idmap {
	struct idmap_slot *slots;
	size_t cap;  /* a power of two, or 0 */
	size_t used; /* live entries */
	size_t dead; /* tombstones */
};

/* The key must stay valid (and unchanged) while the entry is in the map. */
void idmap_put(struct idmap *, const char *key, void *value);
void *idmap_get(const struct idmap *, const char *key);
void *idmap_del(struct idmap *, const char *key);
void idmap_free(struct idmap *);

#endif
