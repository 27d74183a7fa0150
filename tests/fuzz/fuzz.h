/* What every fuzz target shares: libFuzzer's entry points and a check. */
#ifndef STEXEC_FUZZ_H
#define STEXEC_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);
int	LLVMFuzzerInitialize(int *, char ***);

/* A broken invariant is a finding: say which, and abort for libFuzzer. */
#define FUZZ_CHECK(cond, what) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s: %s\n", __FILE__, (what)); \
		abort(); \
	} \
} while (0)

#endif
