/* The daemon-wide tools: ToolDef files from --tools-dir, or the built-ins. */
#include "session/registry.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builtin/defs.h"
#include "idmap.h"
#include "util.h"

/* A ToolDef file larger than this is surely not one. */
#define REGISTRY_FILE_MAX (1024 * 1024)

static struct tooldef **registry_tools;
static size_t registry_n;
static struct idmap registry_map;

static int	registry_add(const json_t *, const char *, char *, size_t);
static int	registry_json_file(const struct dirent *);

/* Add one definition; where names it in errors. */
static int
registry_add(const json_t *j, const char *where, char *err, size_t errlen)
{
	struct tooldef *d;
	char why[512];

	if ((d = tooldef_parse(j, why, sizeof why)) == NULL) {
		snprintf(err, errlen, "%s: %s", where, why);
		return -1;
	}
	if (idmap_get(&registry_map, tooldef_name(d)) != NULL) {
		snprintf(err, errlen, "%s: a tool named \"%s\" is already "
		    "defined", where, tooldef_name(d));
		tooldef_unref(d);
		return -1;
	}
	registry_tools = xreallocarray(registry_tools, registry_n + 1,
	    sizeof *registry_tools);
	registry_tools[registry_n++] = d;
	idmap_put(&registry_map, tooldef_name(d), d);
	return 0;
}

static int
registry_json_file(const struct dirent *de)
{
	size_t n = strlen(de->d_name);

	return de->d_name[0] != '.' && n > 5 &&
	    strcmp(de->d_name + n - 5, ".json") == 0;
}

int
registry_load_dir(const char *dir, char *err, size_t errlen)
{
	struct dirent **names;
	json_error_t jerr;
	json_t *j;
	char *path, where[1024];
	int i, n, rc = 0;
	size_t k;

	if ((n = scandir(dir, &names, registry_json_file, alphasort)) < 0) {
		snprintf(err, errlen, "cannot read tools directory %s: %s", dir,
		    strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		xasprintf(&path, "%s/%s", dir, names[i]->d_name);
		if (rc == 0) {
			j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
			if (j == NULL) {
				snprintf(err, errlen, "%s:%d: %s", path,
				    jerr.line, jerr.text);
				rc = -1;
			} else if (json_is_array(j)) {
				/* A file may hold one ToolDef or an array. */
				for (k = 0; k < json_array_size(j) && rc == 0;
				    k++) {
					snprintf(where, sizeof where, "%s[%zu]",
					    path, k);
					rc = registry_add(json_array_get(j, k),
					    where, err, errlen);
				}
			} else
				rc = registry_add(j, path, err, errlen);
			json_decref(j);
		}
		free(path);
		free(names[i]);
	}
	free(names);
	return rc;
}

int
registry_load_builtin(const char *tool_path, char *err, size_t errlen)
{
	json_t *j;
	size_t i;
	char where[64], why[256];

	for (i = 0; builtin_defs[i] != NULL; i++) {
		if ((j = builtin_defs_load(i, tool_path, why,
		    sizeof why)) == NULL)
			fatal("%s", why);
		snprintf(where, sizeof where, "built-in tool %zu", i);
		if (registry_add(j, where, err, errlen) != 0) {
			json_decref(j);
			return -1;
		}
		json_decref(j);
	}
	return 0;
}

struct tooldef *
registry_find(const char *name)
{
	return idmap_get(&registry_map, name);
}

size_t
registry_count(void)
{
	return registry_n;
}

struct tooldef *
registry_get(size_t i)
{
	return registry_tools[i];
}

void
registry_free(void)
{
	size_t i;

	for (i = 0; i < registry_n; i++)
		tooldef_unref(registry_tools[i]);
	free(registry_tools);
	registry_tools = NULL;
	registry_n = 0;
	idmap_free(&registry_map);
}
