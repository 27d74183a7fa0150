/*
 * The executor state machine driven by the fuzzer: its bytes are the
 * choices of the simulated session of exec_sim.c (which event comes next,
 * which tool, how it ends) and the text of progress lines, output chunks
 * and exit output, so every schedule libFuzzer finds is checked against
 * the invariants of doc/design.md §2 after every step.
 *   text: a length byte (0..63), then that many bytes
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "exec_sim.h"

/* The fuzzer's bytes as a stream of choices. */
struct fuzz_executor {
	const uint8_t *data;
	size_t size, pos;
	char text[64];
};

static unsigned
fuzz_executor_pick(void *arg, unsigned n)
{
	struct fuzz_executor *f = arg;
	unsigned v = 0;

	/* When the bytes run out every choice is 0: the run ends. */
	if (f->pos < f->size)
		v = f->data[f->pos++];
	if (n > 256 && f->pos < f->size)
		v = v << 8 | f->data[f->pos++];
	return v;
}

static const char *
fuzz_executor_text(void *arg, size_t *len)
{
	struct fuzz_executor *f = arg;
	size_t n = fuzz_executor_pick(f, 64) % 64;

	if (n > f->size - f->pos)
		n = f->size - f->pos;
	memcpy(f->text, f->data + f->pos, n);
	f->text[n] = '\0';
	f->pos += n;
	*len = n;
	return f->text;
}

static void
fuzz_executor_fail(void *arg, const char *step, const char *what)
{
	fprintf(stderr, "fuzz_executor: step %s: %s\n", step, what);
	abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sim s;
	struct fuzz_executor f = { .data = data, .size = size };
	struct sim_ops ops = { .pick = fuzz_executor_pick,
		.text = fuzz_executor_text, .fail = fuzz_executor_fail,
		.arg = &f };

	sim_start(&s, &ops);
	s.trace = getenv("STEXEC_TRACE") != NULL;
	while (f.pos < f.size && sim_step(&s))
		continue;
	sim_finish(&s);
	return 0;
}
