/* A string-keyed hash map: O(1) lookups of tools and sessions by id. */
#include "idmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* A removed entry: probing must go on past it. */
static char idmap_tombstone[1];

static uint64_t	idmap_hash(const char *);
static void	idmap_grow(struct idmap *);
static struct idmap_slot *idmap_find(const struct idmap *, const char *);

/* FNV-1a: ids are short; this is fast and spreads well enough. */
static uint64_t
idmap_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s != '\0') {
		h ^= (unsigned char)*s++;
		h *= 1099511628211ULL;
	}
	return h;
}

static struct idmap_slot *
idmap_find(const struct idmap *m, const char *key)
{
	size_t mask, i;
	struct idmap_slot *s;

	if (m->cap == 0)
		return NULL;
	mask = m->cap - 1;
	for (i = idmap_hash(key) & mask;; i = (i + 1) & mask) {
		s = &m->slots[i];
		if (s->key == NULL)
			return NULL;
		if (s->key != idmap_tombstone && strcmp(s->key, key) == 0)
			return s;
	}
}

static void
idmap_grow(struct idmap *m)
{
	struct idmap_slot *old = m->slots;
	size_t oldcap = m->cap, i, j, mask;

	/* Rehash into a table twice the live size: tombstones go away. */
	m->cap = 16;
	while (m->cap < (m->used + 1) * 4)
		m->cap *= 2;
	m->slots = xcalloc(m->cap, sizeof *m->slots);
	m->dead = 0;
	mask = m->cap - 1;
	for (i = 0; i < oldcap; i++) {
		if (old[i].key == NULL || old[i].key == idmap_tombstone)
			continue;
		for (j = idmap_hash(old[i].key) & mask; m->slots[j].key != NULL;
		    j = (j + 1) & mask)
			;
		m->slots[j] = old[i];
	}
	free(old);
}

void
idmap_put(struct idmap *m, const char *key, void *value)
{
	struct idmap_slot *s;
	size_t mask, i;

	if ((s = idmap_find(m, key)) != NULL) {
		s->key = key;
		s->value = value;
		return;
	}
	if ((m->used + m->dead + 1) * 2 > m->cap)
		idmap_grow(m);
	mask = m->cap - 1;
	for (i = idmap_hash(key) & mask; m->slots[i].key != NULL &&
	    m->slots[i].key != idmap_tombstone; i = (i + 1) & mask)
		;
	if (m->slots[i].key == idmap_tombstone)
		m->dead--;
	m->slots[i].key = key;
	m->slots[i].value = value;
	m->used++;
}

void *
idmap_get(const struct idmap *m, const char *key)
{
	struct idmap_slot *s = idmap_find(m, key);

	return s != NULL ? s->value : NULL;
}

void *
idmap_del(struct idmap *m, const char *key)
{
	struct idmap_slot *s = idmap_find(m, key);
	void *value;

	if (s == NULL)
		return NULL;
	value = s->value;
	s->key = idmap_tombstone;
	s->value = NULL;
	m->used--;
	m->dead++;
	return value;
}

void
idmap_free(struct idmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->used = m->dead = 0;
}
