/* The daemon-wide tools: from --tools-dir files, or the built-in set. */
#ifndef STEXEC_REGISTRY_H
#define STEXEC_REGISTRY_H

#include <jansson.h>
#include <stddef.h>

#include "core/tooldef.h"

/* Load every *.json file of dir (one ToolDef each). -1 with err. */
int registry_load_dir(const char *dir, char *err, size_t errlen);
/* Load the built-in set; tool_path is the stexec-tool executable. */
int registry_load_builtin(const char *tool_path, char *err, size_t errlen);
struct tooldef *registry_find(const char *name);
size_t registry_count(void);
struct tooldef *registry_get(size_t);
void registry_free(void);

#endif
