/*
 * A tool's four pipes (0: stdin, 1: stdout, 2: stderr, 3: progress), and
 * one set made ahead while the daemon is idle, so that the next tool's
 * spawn does not wait for eight descriptors to be made (proc.c).
 */
#ifndef STEXEC_PIPES_H
#define STEXEC_PIPES_H

#include <stdbool.h>

struct pipes {
	int ours[4];   /* 0: stdin's write end; 1-3 the read ends, non-blocking */
	int child[4];  /* the child's ends, all above 3 (its dup2s go there) */
};

/* fd itself if above 3, else a copy there (fd closed): -1 with errno. */
int pipes_high(int);

/* A fresh set: 0, or an errno (nothing is left open then). */
int pipes_make(struct pipes *);
/* Close whatever of a set is open, and mark it closed. */
void pipes_close(struct pipes *);

/* The set made ahead, if there is one: true and it is the caller's. */
bool pipes_take(struct pipes *);
/* Make the set ahead if there is none (failure only leaves none). */
void pipes_fill(void);
/*
 * Close the set made ahead. Before any child that runs on without exec'ing
 * at once (spawn_launch): it would hold the set's ends, and the tool that
 * takes the set would wait for its EOF until that child exec'd.
 */
void pipes_drop(void);

#endif
