/*
 * The JSON Schema subset of DESIGN.md §4: type, properties, required,
 * additionalProperties, items, enum, minimum/maximum, minLength/maxLength.
 * Unknown keywords are ignored. Pure: no I/O.
 */
#ifndef STEXEC_SCHEMA_H
#define STEXEC_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/*
 * Is this a schema we can apply? False with err naming the bad keyword
 * (e.g. "properties.path.type: unknown type \"strin\"").
 */
bool schema_check(const json_t *schema, char *err, size_t errlen);

/*
 * Validate instance against schema. False with a readable detail in err,
 * e.g. "The required parameter `file_path` is missing" or
 * "The parameter `offset` type is expected as `integer` but provided as `string`".
 */
bool schema_validate(const json_t *schema, const json_t *instance, char *err,
    size_t errlen);

#endif
