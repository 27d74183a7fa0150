/*
 * stexec-tool: the built-in tools of doc/design.md §4, one subcommand each. The
 * daemon writes the input object on stdin; the result goes to stdout, errors
 * to stderr; exit 0 on success, 1 on error, 2 on invalid input.
 */
#ifndef STEXEC_BUILTIN_H
#define STEXEC_BUILTIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define BUILTIN_OK 0
#define BUILTIN_ERROR 1
#define BUILTIN_INVALID 2

/* A file with a NUL byte this close to its start is binary. */
#define BUILTIN_PROBE 8192

/* input.c */
#define INPUT_REQUIRED 0x1
#define INPUT_NONEMPTY 0x2
#define INPUT_ALLOW_NUL 0x4

int input_string(const json_t *, const char *, int, const char **,
    size_t *);
int input_integer(const json_t *, const char *, json_int_t, json_int_t,
    json_int_t *);

/* out.c */
/*
 * Bytes of stdout a tool uses before it summarises the rest: under the
 * daemon's default maxResultBytes (100000) with room for the summary line.
 */
#define OUT_BUDGET 98304

bool out_fits(size_t);
void out_add(const void *, size_t);
void out_printf(const char *, ...) __attribute__((format(printf, 1, 2)));
int out_error(const char *, ...) __attribute__((format(printf, 1, 2)));
int out_invalid(const char *, ...) __attribute__((format(printf, 1, 2)));
int out_errno(int, const char *, const char *);
size_t out_cut(const char *, size_t, size_t);
/* Newlines in s[0..len): lines passed over, for line numbers. */
size_t out_count_lines(const char *, size_t);
int out_finish(int);
int out_fd3_line(const char *);

/* image.c */
struct stat;
/* The media type of a file that starts with probe, or NULL. */
const char *image_kind(const char *probe, size_t);
int image_read(int fd, const char *path, const struct stat *,
    const char *media, const char *probe, size_t len);

/* glob.c */
struct glob_pattern;

/* What a walk callback tells the walker about a directory. */
enum glob_visit {
	GLOB_DESCEND,
	GLOB_SKIP,
};

/*
 * Called for every entry below the root, in sorted order: path is the root
 * joined with rel (or rel alone when the root is the cwd), type the S_IFMT
 * bits of lstat (a symlink is never followed).
 */
typedef enum glob_visit (*glob_walk_cb)(const char *path, const char *rel,
    mode_t type, void *arg);

struct glob_pattern *glob_compile(const char *, char *, size_t);
void glob_free(struct glob_pattern *);
bool glob_match(const struct glob_pattern *, const char *);
bool glob_match_prefix(const struct glob_pattern *, const char *);
int glob_walk(const char *, glob_walk_cb, void *);
char *glob_join(const char *, const char *);
int glob_run(const json_t *);

/* grep.c */
int grep_run(const json_t *);

/* list_dir.c */
int list_dir_run(const json_t *);

/* read_file.c */
int read_file_run(const json_t *);

/* write_file.c */
int write_file_run(const json_t *);
/*
 * The file a write through path lands in (symlinks followed, even to a
 * target that does not exist yet); NULL with errno.
 */
char *write_file_resolve(const char *);
/*
 * Replace target (path as the user gave it, for messages) with content:
 * a temporary file in its directory, renamed over it, keeping its mode and
 * owner; BUILTIN_OK, or an error already printed.
 */
int write_file_commit(const char *path, const char *target,
    const char *content, size_t len);

/* edit_file.c: edit_file, and multi_edit (several edits, all or none). */
/* The largest file the edit tools read whole. */
#define EDIT_FILE_MAX (16 * 1024 * 1024)
int edit_file_run(const json_t *);
int multi_edit_run(const json_t *);

#endif
