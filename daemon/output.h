/*
 * A tool's captured output as the executor sees it (doc/design.md §4, S17): the
 * combined content (stdout, then stderr, with a newline between them when
 * stdout does not end with one) either whole, or as head + tail with the
 * whole written to a file.
 */
#ifndef STEXEC_OUTPUT_H
#define STEXEC_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

struct output {
	const char *head; /* the whole content when path is NULL */
	size_t head_len;
	const char *tail; /* the last bytes, when truncated */
	size_t tail_len;
	uint64_t total;   /* bytes of the whole combined content */
	const char *path; /* file holding the whole content, or NULL */
};

#endif
