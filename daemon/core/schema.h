/*
 * The JSON Schema subset of doc/design.md §4: type, properties, required,
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

/*
 * The shortest decimal text that reads back as the same number: 0.1, not
 * 0.10000000000000001; whole numbers as digits (2 for 2.0, 1500 for 1.5e3).
 * NULL if v is not a number; free() it.
 */
char *schema_number_text(const json_t *v);

#endif
