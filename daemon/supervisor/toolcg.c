/* A cgroup per tool: supervision on v2, limits on v2, v1 or rlimits. */
#include "supervisor/toolcg.h"

#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "supervisor/cgroup.h"
#include "handover.h"
#include "log.h"
#include "supervisor/spawn.h"
#include "util.h"

enum toolcg_ctl {
	CTL_MEMORY,
	CTL_PIDS,
	CTL_CPU,
	CTL_N,
};

enum toolcg_via {
	VIA_NONE,
	VIA_V2,
	VIA_V1,
	VIA_RLIMIT,
};

/* A measuring v1 memory group's files, kept open while it is pooled. */
enum toolcg_meter_file {
	METER_PROCS,
	METER_PEAK,
	METER_USAGE,
	METER_N,
};

static const char *const toolcg_ctl_names[CTL_N] = { "memory", "pids", "cpu" };
static const char *const toolcg_via_names[] = {
	NULL, "cgroup2", "cgroup1", "rlimit",
};

struct toolcg {
	struct toolcg_limits limits;
	char *v2;             /* its own v2 group, when supervising */
	int v2fd;
	int eventsfd;         /* its cgroup.events and cpu.stat, kept open */
	int cpufd;            /* once read (-1: not yet) */
	int procsfd;          /* its cgroup.procs, held (toolcg_pin) */
	bool v2_limited;      /* limits written in it: not reusable */
	uint64_t cpu_base;    /* cpu.stat usage_usec before it (reused) */
	uint64_t cpu_last;    /* and at the last reading */
	bool cpu_read;
	bool empty;           /* seen unpopulated once its main was reaped:
	                         nothing can enter it again */
	bool killed;          /* cgroup.kill was written: not reusable (a
	                         process cloned into a group killed before is
	                         killed at birth by some kernels: 6.18 here) */
	char *v1[CTL_N];      /* its v1 groups, one per limit set there, and
	                         memory's always where v1 holds it */
	int joins;            /* join fds it put in the spawn request */
	bool v1_move;         /* its v1 memory group only measures: the
	                         child is moved in, not joined */
	int meterfd[METER_N]; /* that group's files, kept open (-1: not) */
	uint64_t meter_base;  /* its usage when it was taken from the pool */
	bool reused;          /* a spare v2 group, not made for it */
	int peakfd;           /* a reused v2 group's memory.peak, reset through
	                         this descriptor (-1: not reset) */
	uint64_t peak_base;   /* its usage at that reset */
};

/*
 * Empty v1 memory groups that only measured, kept for the next tools: a
 * v1 memory group's mkdir and rmdir cost the daemon more than the rest of
 * a short tool's bookkeeping. Reused, its peak is reset and what it still
 * holds (page cache) is subtracted.
 */
struct toolcg_meter {
	char *dir;
	int fd[METER_N];
	uint64_t base;
};
static struct toolcg_meter toolcg_meters[64];
static size_t toolcg_nmeters;

/*
 * Empty v2 groups kept for the next tools: a fresh cgroup's first process
 * costs the kernel about 100 us more to fork into than a used one's, and a
 * removed memory group lingers in the kernel until its pages are reclaimed.
 * A group's memory.peak is its own since its creation, the largest of every
 * tool it served, unless it can be reset (toolcg_peak_resets, Linux 6.12):
 * where it cannot, a reused group's tool has no peak, and --measure-memory
 * gives every tool a new group instead.
 */
#define TOOLCG_SPARES 64
struct toolcg_spare {
	char *dir;
	int fd;
	int eventsfd;
	int cpufd;
	int procsfd;
	int peakfd;
	uint64_t cpu_base;
	uint64_t peak_base;
};

static char *toolcg_v2_dir;          /* the daemon's v2 subtree */
static int toolcg_v2_procs = -1;     /* its cgroup.procs, held (toolcg_pin) */
static struct toolcg_spare toolcg_spares[TOOLCG_SPARES];
static size_t toolcg_nspares;
static enum toolcg_via toolcg_via[CTL_N];
static char *toolcg_v1_dir[CTL_N];   /* <hierarchy>/<ours>/stexecd-PID */
static bool toolcg_memsw;            /* v1 memory.memsw.* exists */
/*
 * A v1 memory group for every tool, not only those with a limit
 * (--measure-memory). Off by default: joining a v1 group is a write to its
 * cgroup.procs, which takes the kernel's cgroup lock and its thread-group
 * semaphore for writing, so every fork and exit on the host waits for it;
 * with 10 tools in flight on a hybrid host it cost 10-15% of throughput.
 * On v2 the group a tool is born into measures it for free.
 */
static bool toolcg_meter_all;
static bool toolcg_peak_resets;      /* v2's memory.peak takes a reset */

static char *toolcg_v1_find(const char *);
static bool toolcg_meter_take(struct toolcg *, struct spawn_req *);
static bool toolcg_meter_put(struct toolcg *);
static void toolcg_meter_close(int *);
static bool toolcg_read_num(int, uint64_t *);
static int toolcg_write(const char *, const char *, const char *);
static int toolcg_writeat(int, const char *, const char *);
static bool toolcg_field_kept(int, int *, const char *, const char *,
    uint64_t *);
static bool toolcg_value_of(const char *, const char *, uint64_t *);
static int toolcg_pin(int, const char *);
static void toolcg_spare_close(struct toolcg_spare *);
static bool toolcg_field(int, const char *, const char *, const char *,
    uint64_t *);
static void toolcg_v2_enable(void);

/* Where our v1 cgroup of this controller is, or NULL. */
static char *
toolcg_v1_find(const char *ctl)
{
	char line[4096], root[4096], mnt[4096], opts[4096], *sep, *own = NULL;
	char *tok, *save, *dir = NULL;
	size_t clen = strlen(ctl), len;
	bool found = false;
	FILE *f;

	if ((f = fopen("/proc/self/mountinfo", "re")) == NULL)
		return NULL;
	while (!found && fgets(line, sizeof line, f) != NULL) {
		sep = strstr(line, " - cgroup ");
		if (sep == NULL || sscanf(line, "%*s %*s %*s %4095s %4095s",
		    root, mnt) != 2 || sscanf(sep + 10, "%*s %4095s",
		    opts) != 1 || strchr(mnt, '\\') != NULL)
			continue;
		for (tok = strtok_r(opts, ",", &save); tok != NULL;
		    tok = strtok_r(NULL, ",", &save))
			if (strcmp(tok, ctl) == 0)
				found = true;
	}
	fclose(f);
	if (!found || (f = fopen("/proc/self/cgroup", "re")) == NULL)
		return NULL;
	/* "N:cpu,cpuacct:/path": the controller among the names. */
	while (own == NULL && fgets(line, sizeof line, f) != NULL) {
		if ((tok = strchr(line, ':')) == NULL ||
		    (sep = strchr(tok + 1, ':')) == NULL)
			continue;
		for (tok++; tok < sep; tok += len + 1) {
			len = strcspn(tok, ",:");
			if (len == clen && strncmp(tok, ctl, clen) == 0) {
				own = xstrndup(sep + 1, strcspn(sep + 1,
				    "\n"));
				break;
			}
		}
	}
	fclose(f);
	if (own == NULL)
		return NULL;
	len = strcmp(root, "/") == 0 ? 0 : strlen(root);
	if (strncmp(own, root, len) == 0 && (own[len] == '/' ||
	    own[len] == '\0'))
		xasprintf(&dir, "%s%s/stexecd-%ld", mnt, own + len,
		    (long)getpid());
	free(own);
	return dir;
}

static int
toolcg_write(const char *dir, const char *file, const char *text)
{
	char *path;
	int fd, rc;

	xasprintf(&path, "%s/%s", dir, file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	free(path);
	if (fd == -1)
		return -1;
	rc = toolcg_writeat(fd, NULL, text);
	close(fd);
	return rc;
}

/* Write text to file under dirfd (file NULL: to dirfd itself). */
static int
toolcg_writeat(int dirfd, const char *file, const char *text)
{
	ssize_t n;
	int fd = file != NULL ? openat(dirfd, file, O_WRONLY | O_CLOEXEC) :
	    dirfd, error;

	if (fd == -1)
		return -1;
	n = write(fd, text, strlen(text));
	error = errno;
	if (file != NULL)
		close(fd);
	errno = error;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/*
 * The number in file under dirfd (-1: under dir): the whole file when key
 * is NULL, else the value of its "key N" line.
 */
static bool
toolcg_field(int dirfd, const char *dir, const char *file, const char *key,
    uint64_t *out)
{
	char buf[1024], *path;
	ssize_t n;
	int fd;

	if (dirfd != -1)
		fd = openat(dirfd, file, O_RDONLY | O_CLOEXEC);
	else {
		xasprintf(&path, "%s/%s", dir, file);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		free(path);
	}
	if (fd == -1)
		return false;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return toolcg_value_of(buf, key, out);
}

/*
 * The number in text (a cgroup file's, NUL-ended) after "key " at the start
 * of a line; with no key, the one it starts with. By hand, not sscanf: at
 * every tool's end.
 */
static bool
toolcg_value_of(const char *text, const char *key, uint64_t *out)
{
	size_t klen = key != NULL ? strlen(key) : 0;
	const char *line = text;

	for (;;) {
		if (key == NULL || (strncmp(line, key, klen) == 0 &&
		    line[klen] == ' ')) {
			line += key != NULL ? klen + 1 : 0;
			if (*line < '0' || *line > '9')
				return false;
			*out = strtoull(line, NULL, 10);
			return true;
		}
		if ((line = strchr(line, '\n')) == NULL)
			return false;
		line++;
	}
}

/*
 * The same for a file of dirfd read at every tool's end: opened once and
 * kept in *kept, then read again from its start (a cgroup file is made
 * anew at each read from offset 0): two system calls fewer a reading.
 */
static bool
toolcg_field_kept(int dirfd, int *kept, const char *file, const char *key,
    uint64_t *out)
{
	char buf[1024];
	ssize_t n;

	if (*kept == -1 &&
	    (*kept = openat(dirfd, file, O_RDONLY | O_CLOEXEC)) == -1)
		return false;
	if ((n = pread(*kept, buf, sizeof buf - 1, 0)) <= 0)
		return false;
	buf[n] = '\0';
	return toolcg_value_of(buf, key, out);
}

/*
 * Hold a group's cgroup.procs: cloning into a group (CLONE_INTO_CGROUP)
 * checks write access to the target's cgroup.procs and to that of the
 * common ancestor with ours, and the kernel makes each one's inode afresh
 * when nothing holds it (2.5% of the daemon's CPU in bench_latency, some
 * 7 us of every spawn). -1 if it cannot.
 */
static int
toolcg_pin(int dirfd, const char *dir)
{
	char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof path, "%s/cgroup.procs", dir) >=
	    sizeof path)
		return -1;
	return openat(dirfd, path, O_PATH | O_CLOEXEC);
}

static void
toolcg_spare_close(struct toolcg_spare *sp)
{
	close(sp->fd);
	if (sp->eventsfd != -1)
		close(sp->eventsfd);
	if (sp->cpufd != -1)
		close(sp->cpufd);
	if (sp->procsfd != -1)
		close(sp->procsfd);
	if (sp->peakfd != -1)
		close(sp->peakfd);
	rmdir(sp->dir);
	free(sp->dir);
}

/* Turn on in our subtree the controllers its parent delegates to us. */
static void
toolcg_v2_enable(void)
{
	char *path, line[512], *tok, *save, op[16];
	enum toolcg_ctl c;
	FILE *f;

	xasprintf(&path, "%s/cgroup.controllers", toolcg_v2_dir);
	f = fopen(path, "re");
	free(path);
	if (f == NULL)
		return;
	if (fgets(line, sizeof line, f) == NULL)
		line[0] = '\0';
	fclose(f);
	line[strcspn(line, "\n")] = '\0';
	for (tok = strtok_r(line, " ", &save); tok != NULL;
	    tok = strtok_r(NULL, " ", &save)) {
		for (c = 0; c < CTL_N; c++) {
			if (strcmp(tok, toolcg_ctl_names[c]) != 0)
				continue;
			snprintf(op, sizeof op, "+%s", tok);
			if (toolcg_write(toolcg_v2_dir,
			    "cgroup.subtree_control", op) == 0)
				toolcg_via[c] = VIA_V2;
		}
	}
}

void
toolcg_init(bool meter_all)
{
	enum toolcg_ctl c;
	char *dir, *path;

	toolcg_meter_all = meter_all;
	if (cgroup_path() != NULL) {
		toolcg_v2_dir = xstrdup(cgroup_path());
		toolcg_v2_enable();
		toolcg_v2_procs = toolcg_pin(AT_FDCWD, toolcg_v2_dir);
	}
	if (toolcg_via[CTL_MEMORY] == VIA_V2) {
		struct stat st;

		xasprintf(&path, "%s/memory.peak", toolcg_v2_dir);
		toolcg_peak_resets = stat(path, &st) == 0 &&
		    (st.st_mode & S_IWUSR) != 0;
		free(path);
	}
	for (c = 0; c < CTL_N; c++) {
		if (toolcg_via[c] == VIA_V2)
			continue;
		toolcg_via[c] = c == CTL_CPU ? VIA_NONE : VIA_RLIMIT;
		if ((dir = toolcg_v1_find(toolcg_ctl_names[c])) == NULL)
			continue;
		/*
		 * A daemon of this pid died without removing it; or this is
		 * a reload, and the tools handed over are in it still.
		 */
		rmdir(dir);
		/*
		 * One left by an earlier daemon of this pid, of another uid,
		 * exists but is not ours: only one we may write is used.
		 */
		if ((mkdir(dir, 0755) == 0 || errno == EEXIST) &&
		    access(dir, W_OK | X_OK) == 0) {
			toolcg_v1_dir[c] = dir;
			toolcg_via[c] = VIA_V1;
		} else {
			log_info("cannot use %s: %s", dir, strerror(errno));
			free(dir);
		}
	}
	if (toolcg_v1_dir[CTL_MEMORY] != NULL) {
		xasprintf(&path, "%s/memory.memsw.limit_in_bytes",
		    toolcg_v1_dir[CTL_MEMORY]);
		toolcg_memsw = access(path, W_OK) == 0;
		free(path);
	}
	log_info("tools: supervised by %s; memory limits by %s, process "
	    "limits by %s, cpu limits %s%s", toolcg_v2_dir != NULL ?
	    "cgroup" : "process group", toolcg_via_names[toolcg_via[CTL_MEMORY]],
	    toolcg_via_names[toolcg_via[CTL_PIDS]],
	    toolcg_via[CTL_CPU] == VIA_NONE ? "not enforced" : "by ",
	    toolcg_via[CTL_CPU] == VIA_NONE ? "" :
	    toolcg_via_names[toolcg_via[CTL_CPU]]);
}

void
toolcg_shutdown(void)
{
	enum toolcg_ctl c;

	toolcg_handover();
	for (c = 0; c < CTL_N; c++) {
		if (toolcg_v1_dir[c] != NULL && rmdir(toolcg_v1_dir[c]) != 0)
			log_warn("cannot remove %s: %s", toolcg_v1_dir[c],
			    strerror(errno));
		free(toolcg_v1_dir[c]);
		toolcg_v1_dir[c] = NULL;
		toolcg_via[c] = VIA_NONE;
	}
	free(toolcg_v2_dir);
	toolcg_v2_dir = NULL;
	if (toolcg_v2_procs != -1)
		close(toolcg_v2_procs);
	toolcg_v2_procs = -1;
}

void
toolcg_remove_stale(long pid)
{
	enum toolcg_ctl c;
	struct dirent *de;
	char *dir, *sub, *slash;
	DIR *d;

	for (c = 0; c < CTL_N; c++) {
		if (toolcg_v1_dir[c] == NULL ||
		    (slash = strrchr(toolcg_v1_dir[c], '/')) == NULL)
			continue;
		xasprintf(&dir, "%.*s/stexecd-%ld", (int)(slash -
		    toolcg_v1_dir[c]), toolcg_v1_dir[c], pid);
		if ((d = opendir(dir)) != NULL) {
			while ((de = readdir(d)) != NULL) {
				if (strncmp(de->d_name, "tool-", 5) != 0)
					continue;
				xasprintf(&sub, "%s/%s", dir, de->d_name);
				rmdir(sub);
				free(sub);
			}
			closedir(d);
			if (rmdir(dir) != 0)
				log_warn("cannot remove %s: %s", dir,
				    strerror(errno));
		}
		free(dir);
	}
}

json_t *
toolcg_capabilities(void)
{
	const char *via[CTL_N], *peak = NULL;
	enum toolcg_ctl c;

	for (c = 0; c < CTL_N; c++)
		via[c] = toolcg_via_names[toolcg_via[c]];
	/* Whose peak memory a memory group accounts: every tool's, or only
	 * those with a memory limit's (each in a group of its own). */
	if ((toolcg_via[CTL_MEMORY] == VIA_V2 && toolcg_peak_resets) ||
	    (toolcg_via[CTL_MEMORY] != VIA_RLIMIT && toolcg_meter_all))
		peak = "all";
	else if (toolcg_via[CTL_MEMORY] != VIA_RLIMIT)
		peak = "limited";
	return json_pack("{s:s, s:{s:s?, s:s?, s:s?}, s:s?}", "supervision",
	    toolcg_v2_dir != NULL ? "cgroup" : "process-group", "limits",
	    "memoryBytes", via[CTL_MEMORY], "maxProcesses", via[CTL_PIDS],
	    "cpuPercent", via[CTL_CPU], "peakMemory", peak);
}

bool
toolcg_supervises(void)
{
	return toolcg_v2_dir != NULL;
}

/* The limit of a controller as its file wants it; false: none set. */
static bool
toolcg_value(const struct toolcg_limits *l, enum toolcg_ctl c, bool v2,
    char *out, size_t len)
{
	switch (c) {
	case CTL_MEMORY:
		if (l->memory_bytes == 0)
			return false;
		snprintf(out, len, "%" PRIu64, l->memory_bytes);
		return true;
	case CTL_PIDS:
		if (l->max_processes == 0)
			return false;
		snprintf(out, len, "%" PRIu64, l->max_processes);
		return true;
	default:
		if (l->cpu_percent == 0)
			return false;
		/* Of a 100 ms period: 1% is 1 ms. */
		if (v2)
			snprintf(out, len, "%" PRIu64 " 100000",
			    l->cpu_percent * 1000);
		else
			snprintf(out, len, "%" PRIu64, l->cpu_percent * 1000);
		return true;
	}
}

/*
 * The v1 group of one controller, its limit set (value NULL: a memory
 * group that only measures), joined by the child. move: a measuring group
 * for a launched child, whose join descriptor outlives the spawn.
 */
static int
toolcg_v1_new(struct toolcg *cg, enum toolcg_ctl c, const char *name,
    const char *value, bool move, struct spawn_req *req)
{
	static const char *const files[CTL_N] = {
		"memory.limit_in_bytes", "pids.max", "cpu.cfs_quota_us",
	};
	char *dir, *procs;
	int fd;

	xasprintf(&dir, "%s/%s", toolcg_v1_dir[c], name);
	if (mkdir(dir, 0755) != 0) {
		free(dir);
		return -1;
	}
	cg->v1[c] = dir;
	if (c == CTL_CPU && value != NULL && toolcg_write(dir,
	    "cpu.cfs_period_us", "100000") != 0)
		return -1;
	if (value != NULL && toolcg_write(dir, files[c], value) != 0)
		return -1;
	/* No swap beyond the limit either, where swap is accounted. */
	if (c == CTL_MEMORY && value != NULL && toolcg_memsw &&
	    toolcg_write(dir, "memory.memsw.limit_in_bytes", value) != 0)
		return -1;
	xasprintf(&procs, "%s/cgroup.procs", dir);
	/*
	 * Only measuring, for a launched child: its cgroup.procs is kept
	 * open with the group (as a pooled one's is), so the child joins it
	 * itself; moved in by toolcg_started only when that cannot be.
	 */
	if (move) {
		if (req->njoin == 0 && (cg->meterfd[METER_PROCS] = open(procs,
		    O_RDWR | O_CLOEXEC)) != -1) {
			req->join[req->njoin++] = cg->meterfd[METER_PROCS];
			req->joins_kept = true;
		} else
			cg->v1_move = true;
		free(procs);
		return 0;
	}
	fd = open(procs, O_WRONLY | O_CLOEXEC);
	free(procs);
	if (fd == -1 || req->njoin == SPAWN_MAX_JOIN) {
		if (fd != -1)
			close(fd);
		return -1;
	}
	req->join[req->njoin++] = fd;
	/* Closed once the spawn returns: not for a launched child. */
	req->joins_kept = false;
	cg->joins++;
	return 0;
}

struct toolcg *
toolcg_new(uint64_t token, const struct toolcg_limits *l, bool launch,
    struct spawn_req *req, char **msg)
{
	static const char *const v2files[CTL_N] = {
		"memory.max", "pids.max", "cpu.max",
	};
	struct toolcg *cg;
	enum toolcg_ctl c;
	int i;
	char name[64], value[64];
	bool any = false;

	*msg = NULL;
	for (c = 0; c < CTL_N; c++)
		any |= toolcg_value(l, c, false, value, sizeof value);
	/* Where v1 holds the memory controller, it may measure every tool. */
	any |= toolcg_via[CTL_MEMORY] == VIA_V1 && toolcg_meter_all;
	if (toolcg_v2_dir == NULL && !any)
		return NULL;
	cg = xcalloc(1, sizeof *cg);
	cg->limits = *l;
	cg->v2fd = cg->eventsfd = cg->cpufd = cg->procsfd = cg->peakfd = -1;
	for (i = 0; i < METER_N; i++)
		cg->meterfd[i] = -1;
	snprintf(name, sizeof name, "tool-%" PRIu64, token);
	for (c = 0; c < CTL_N; c++)
		if (toolcg_via[c] == VIA_V2 && toolcg_value(l, c, true, value,
		    sizeof value))
			cg->v2_limited = true;
	if (toolcg_v2_dir != NULL && !cg->v2_limited && toolcg_nspares > 0) {
		toolcg_nspares--;
		cg->v2 = toolcg_spares[toolcg_nspares].dir;
		cg->v2fd = toolcg_spares[toolcg_nspares].fd;
		cg->eventsfd = toolcg_spares[toolcg_nspares].eventsfd;
		cg->cpufd = toolcg_spares[toolcg_nspares].cpufd;
		cg->procsfd = toolcg_spares[toolcg_nspares].procsfd;
		cg->cpu_base = toolcg_spares[toolcg_nspares].cpu_base;
		cg->reused = true;
		cg->peakfd = toolcg_spares[toolcg_nspares].peakfd;
		cg->peak_base = toolcg_spares[toolcg_nspares].peak_base;
		req->cgroup_fd = cg->v2fd;
	} else if (toolcg_v2_dir != NULL) {
		xasprintf(&cg->v2, "%s/%s", toolcg_v2_dir, name);
		if (mkdir(cg->v2, 0755) != 0 || (cg->v2fd = open(cg->v2,
		    O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1) {
			xasprintf(msg, "cannot create the cgroup %s: %s",
			    cg->v2, strerror(errno));
			goto fail;
		}
		cg->procsfd = toolcg_pin(cg->v2fd, ".");
		req->cgroup_fd = cg->v2fd;
	}
	for (c = 0; c < CTL_N; c++) {
		if (!toolcg_value(l, c, toolcg_via[c] == VIA_V2, value,
		    sizeof value)) {
			/*
			 * No limit: a v1 memory group only to measure it; a
			 * tool that cannot have one runs unmeasured.
			 */
			if (c == CTL_MEMORY && toolcg_via[c] == VIA_V1 &&
			    toolcg_meter_all && !toolcg_meter_take(cg, req) &&
			    toolcg_v1_new(cg, c, name, NULL, launch, req) != 0 &&
			    cg->v1[c] != NULL) {
				rmdir(cg->v1[c]);
				free(cg->v1[c]);
				cg->v1[c] = NULL;
				cg->v1_move = false;
			}
			continue;
		}
		switch (toolcg_via[c]) {
		case VIA_V2:
			if (toolcg_writeat(cg->v2fd, v2files[c], value) != 0)
				goto fail_limit;
			if (c == CTL_MEMORY)
				toolcg_writeat(cg->v2fd, "memory.swap.max", "0");
			break;
		case VIA_V1:
			if (toolcg_v1_new(cg, c, name, value, false, req) != 0)
				goto fail_limit;
			break;
		case VIA_RLIMIT:
			if (req->nrlimits == SPAWN_MAX_RLIMITS)
				goto fail_limit;
			req->rlimits[req->nrlimits].resource = c ==
			    CTL_MEMORY ? RLIMIT_AS : RLIMIT_NPROC;
			req->rlimits[req->nrlimits++].value =
			    c == CTL_MEMORY ? l->memory_bytes :
			    l->max_processes;
			break;
		default:
			break;
		}
	}
	return cg;

fail_limit:
	xasprintf(msg, "cannot set the tool's %s limit: %s",
	    toolcg_ctl_names[c], strerror(errno));
fail:
	toolcg_spawned(cg, req);
	if (req->cgroup_fd == cg->v2fd)
		req->cgroup_fd = -1;
	toolcg_free(cg);
	return NULL;
}

void
toolcg_spawned(struct toolcg *cg, struct spawn_req *req)
{
	while (cg != NULL && cg->joins > 0) {
		close(req->join[--req->njoin]);
		cg->joins--;
	}
}

void
toolcg_started(struct toolcg *cg, pid_t pid)
{
	char text[32];

	if (cg == NULL || !cg->v1_move)
		return;
	snprintf(text, sizeof text, "%ld", (long)pid);
	if (cg->meterfd[METER_PROCS] != -1 ? toolcg_writeat(
	    cg->meterfd[METER_PROCS], NULL, text) != 0 :
	    toolcg_write(cg->v1[CTL_MEMORY], "cgroup.procs", text) != 0)
		log_debug("cannot move %ld into %s: %s", (long)pid,
		    cg->v1[CTL_MEMORY], strerror(errno));
}

bool
toolcg_watched(const struct toolcg *cg)
{
	return cg != NULL && ((cg->limits.memory_bytes > 0 &&
	    toolcg_via[CTL_MEMORY] != VIA_RLIMIT) ||
	    (cg->limits.max_processes > 0 &&
	    toolcg_via[CTL_PIDS] != VIA_RLIMIT));
}

enum toolcg_hit
toolcg_hit(const struct toolcg *cg, uint64_t *limit)
{
	uint64_t n = 0;

	if (cg == NULL)
		return TOOLCG_HIT_NONE;
	if (cg->limits.memory_bytes > 0 &&
	    ((cg->v1[CTL_MEMORY] != NULL && toolcg_field(-1,
	    cg->v1[CTL_MEMORY], "memory.oom_control", "oom_kill", &n) && n > 0) ||
	    (toolcg_via[CTL_MEMORY] == VIA_V2 && toolcg_field(cg->v2fd,
	    NULL, "memory.events", "oom_kill", &n) && n > 0))) {
		*limit = cg->limits.memory_bytes;
		return TOOLCG_HIT_MEMORY;
	}
	if (cg->limits.max_processes > 0 &&
	    ((cg->v1[CTL_PIDS] != NULL && toolcg_field(-1,
	    cg->v1[CTL_PIDS], "pids.events", "max", &n) && n > 0) ||
	    (toolcg_via[CTL_PIDS] == VIA_V2 && toolcg_field(cg->v2fd,
	    NULL, "pids.events", "max", &n) && n > 0))) {
		*limit = cg->limits.max_processes;
		return TOOLCG_HIT_PROCESSES;
	}
	return TOOLCG_HIT_NONE;
}

bool
toolcg_kill(struct toolcg *cg)
{
	if (cg == NULL || cg->v2fd == -1)
		return false;
	cg->killed = true;
	toolcg_writeat(cg->v2fd, "cgroup.kill", "1");
	return true;
}

int
toolcg_populated(struct toolcg *cg)
{
	uint64_t n;

	if (cg == NULL || cg->v2fd == -1)
		return -1;
	if (cg->empty)
		return 0;
	if (!toolcg_field_kept(cg->v2fd, &cg->eventsfd, "cgroup.events",
	    "populated", &n))
		return -1;
	return (cg->empty = n == 0) ? 0 : 1;
}

/*
 * Whether a group may serve the next tool: where v2 measures memory, once
 * its memory.peak starts again for it (a write resets it for the
 * descriptor written), or, where the kernel cannot reset it, when not every
 * tool's peak is asked for.
 */
static bool
toolcg_peak_reset(struct toolcg *cg)
{
	if (toolcg_via[CTL_MEMORY] != VIA_V2)
		return true;
	if (!toolcg_peak_resets)
		return !toolcg_meter_all;
	if (cg->peakfd == -1 && (cg->peakfd = openat(cg->v2fd, "memory.peak",
	    O_RDWR | O_CLOEXEC)) == -1)
		return false;
	return toolcg_writeat(cg->peakfd, NULL, "reset") == 0 &&
	    toolcg_read_num(cg->peakfd, &cg->peak_base);
}

void
toolcg_usage(struct toolcg *cg, bool *has_peak, uint64_t *peak,
    bool *has_cpu, uint64_t *cpu_ms)
{
	uint64_t n;

	*peak = 0;
	*has_peak = *has_cpu = false;
	if (cg == NULL)
		return;
	if (cg->v1[CTL_MEMORY] != NULL) {
		*has_peak = cg->meterfd[METER_PEAK] != -1 ?
		    toolcg_read_num(cg->meterfd[METER_PEAK], peak) :
		    toolcg_field(-1, cg->v1[CTL_MEMORY],
		    "memory.max_usage_in_bytes", NULL, peak);
		/*
		 * A pooled group's count less what it held when pooled. v1
		 * counts in the kernel's per-CPU charge batches (64 pages),
		 * so a tool that used less than a batch may count 0 here:
		 * measured, and said, as 0.
		 */
		*peak = *peak > cg->meter_base ? *peak - cg->meter_base : 0;
	} else if (toolcg_via[CTL_MEMORY] == VIA_V2 && cg->peakfd != -1) {
		/* What the group still held at the reset is not the tool's. */
		*has_peak = toolcg_read_num(cg->peakfd, peak);
		*peak = *peak > cg->peak_base ? *peak - cg->peak_base : 0;
	} else if (toolcg_via[CTL_MEMORY] == VIA_V2 && !cg->reused &&
	    (toolcg_peak_resets || toolcg_meter_all ||
	    cg->limits.memory_bytes > 0))
		/* A new group's; only whose toolcg_capabilities promises. */
		*has_peak = toolcg_field(cg->v2fd, NULL, "memory.peak", NULL,
		    peak);
	/* cpu.stat's usage is there without the cpu controller. */
	if (cg->v2fd != -1 && toolcg_field_kept(cg->v2fd, &cg->cpufd,
	    "cpu.stat", "usage_usec", &n) && n >= cg->cpu_base) {
		cg->cpu_last = n;
		cg->cpu_read = true;
		*has_cpu = true;
		*cpu_ms = (n - cg->cpu_base) / 1000;
	}
}

void
toolcg_free(struct toolcg *cg)
{
	enum toolcg_ctl c;
	uint64_t n;
	bool b;

	if (cg == NULL)
		return;
	/* An empty group without limits serves the next tool. */
	if (cg->v2fd != -1 && !cg->v2_limited && !cg->killed &&
	    toolcg_nspares < TOOLCG_SPARES && toolcg_populated(cg) == 0 &&
	    toolcg_peak_reset(cg)) {
		if (!cg->cpu_read)
			toolcg_usage(cg, &b, &n, &b, &n);
		toolcg_spares[toolcg_nspares].dir = cg->v2;
		toolcg_spares[toolcg_nspares].fd = cg->v2fd;
		toolcg_spares[toolcg_nspares].eventsfd = cg->eventsfd;
		toolcg_spares[toolcg_nspares].cpufd = cg->cpufd;
		toolcg_spares[toolcg_nspares].procsfd = cg->procsfd;
		toolcg_spares[toolcg_nspares].peakfd = cg->peakfd;
		toolcg_spares[toolcg_nspares].peak_base = cg->peak_base;
		toolcg_spares[toolcg_nspares++].cpu_base = cg->cpu_last;
		cg->v2 = NULL;
		cg->v2fd = cg->eventsfd = cg->cpufd = cg->procsfd = -1;
		cg->peakfd = -1;
	}
	if (cg->v2fd != -1)
		close(cg->v2fd);
	if (cg->eventsfd != -1)
		close(cg->eventsfd);
	if (cg->cpufd != -1)
		close(cg->cpufd);
	if (cg->procsfd != -1)
		close(cg->procsfd);
	if (cg->peakfd != -1)
		close(cg->peakfd);
	/* Not empty at shutdown: cgroup_destroy takes the whole subtree. */
	if (cg->v2 != NULL)
		rmdir(cg->v2);
	free(cg->v2);
	/* A group that only measured serves the next tool. */
	if (cg->v1[CTL_MEMORY] != NULL && cg->limits.memory_bytes == 0 &&
	    toolcg_meter_put(cg))
		cg->v1[CTL_MEMORY] = NULL;
	toolcg_meter_close(cg->meterfd);
	for (c = 0; c < CTL_N; c++) {
		if (cg->v1[c] != NULL && rmdir(cg->v1[c]) != 0 &&
		    errno != ENOENT)
			log_warn("cannot remove %s: %s", cg->v1[c],
			    strerror(errno));
		free(cg->v1[c]);
	}
	free(cg);
}

void
toolcg_handover(void)
{
	while (toolcg_nspares > 0)
		toolcg_spare_close(&toolcg_spares[--toolcg_nspares]);
	while (toolcg_nmeters > 0) {
		toolcg_nmeters--;
		toolcg_meter_close(toolcg_meters[toolcg_nmeters].fd);
		rmdir(toolcg_meters[toolcg_nmeters].dir);
		free(toolcg_meters[toolcg_nmeters].dir);
	}
}

json_t *
toolcg_save(struct toolcg *cg)
{
	json_t *o, *v1 = json_array();
	enum toolcg_ctl c;

	if (cg == NULL)
		return json_null();
	for (c = 0; c < CTL_N; c++)
		json_array_append_new(v1, cg->v1[c] != NULL ?
		    json_string(cg->v1[c]) : json_null());
	o = json_pack("{s:I, s:I, s:I, s:s?, s:i, s:b, s:I, s:I, s:b, s:b, "
	    "s:b, s:o, s:I}", "memory", (json_int_t)cg->limits.memory_bytes,
	    "processes", (json_int_t)cg->limits.max_processes, "cpu",
	    (json_int_t)cg->limits.cpu_percent, "v2", cg->v2, "v2fd",
	    cg->v2fd, "limited", cg->v2_limited, "cpuBase",
	    (json_int_t)cg->cpu_base, "cpuLast", (json_int_t)cg->cpu_last,
	    "cpuRead", cg->cpu_read, "empty", cg->empty, "killed", cg->killed,
	    "v1", v1, "v1base", (json_int_t)cg->meter_base);
	if (cg->reused)
		json_object_set_new(o, "reused", json_true());
	/* The reset peak is the descriptor's, so the next image needs it. */
	if (cg->peakfd != -1) {
		json_object_set_new(o, "peakfd", json_integer(cg->peakfd));
		json_object_set_new(o, "peakBase", json_integer(
		    (json_int_t)cg->peak_base));
		handover_keep_fd(cg->peakfd);
	}
	handover_keep_fd(cg->v2fd);
	return o;
}

struct toolcg *
toolcg_load(const json_t *o)
{
	struct toolcg *cg;
	enum toolcg_ctl c;
	const char *s;
	int fd, i;

	if (!json_is_object(o))
		return NULL;
	cg = xcalloc(1, sizeof *cg);
	cg->limits.memory_bytes = (uint64_t)json_integer_value(
	    json_object_get(o, "memory"));
	cg->limits.max_processes = (uint64_t)json_integer_value(
	    json_object_get(o, "processes"));
	cg->limits.cpu_percent = (uint64_t)json_integer_value(
	    json_object_get(o, "cpu"));
	if ((s = json_string_value(json_object_get(o, "v2"))) != NULL)
		cg->v2 = xstrdup(s);
	fd = (int)json_integer_value(json_object_get(o, "v2fd"));
	cg->v2fd = fd >= 0 && handover_claim_fd(fd) ? fd : -1;
	cg->eventsfd = cg->cpufd = cg->procsfd = -1;
	fd = (int)json_integer_value(json_object_get(o, "peakfd"));
	cg->peakfd = json_object_get(o, "peakfd") != NULL && fd >= 0 &&
	    handover_claim_fd(fd) ? fd : -1;
	cg->peak_base = (uint64_t)json_integer_value(json_object_get(o,
	    "peakBase"));
	cg->reused = json_is_true(json_object_get(o, "reused"));
	for (i = 0; i < METER_N; i++)
		cg->meterfd[i] = -1;
	cg->meter_base = (uint64_t)json_integer_value(json_object_get(o,
	    "v1base"));
	cg->v2_limited = json_is_true(json_object_get(o, "limited"));
	cg->cpu_base = (uint64_t)json_integer_value(json_object_get(o,
	    "cpuBase"));
	cg->cpu_last = (uint64_t)json_integer_value(json_object_get(o,
	    "cpuLast"));
	cg->cpu_read = json_is_true(json_object_get(o, "cpuRead"));
	cg->empty = json_is_true(json_object_get(o, "empty"));
	cg->killed = json_is_true(json_object_get(o, "killed"));
	for (c = 0; c < CTL_N; c++)
		if ((s = json_string_value(json_array_get(json_object_get(o,
		    "v1"), c))) != NULL)
			cg->v1[c] = xstrdup(s);
	return cg;
}

/* A pooled measuring group for a tool without a memory limit, if any. */
static bool
toolcg_meter_take(struct toolcg *cg, struct spawn_req *req)
{
	struct toolcg_meter *m;

	if (toolcg_nmeters == 0)
		return false;
	m = &toolcg_meters[--toolcg_nmeters];
	cg->v1[CTL_MEMORY] = m->dir;
	memcpy(cg->meterfd, m->fd, sizeof cg->meterfd);
	cg->meter_base = m->base;
	/*
	 * Joined by the child, even a launched one: the pool's descriptor
	 * stays open with cg, past the child's exec, so the child pays for
	 * the move and the loop does not (a v1 migration waits for an RCU
	 * grace period). It is not counted in joins, which toolcg_spawned
	 * closes from the end, and it comes before them (the memory group is
	 * the first a tool gets); a later join that closes makes the spawn
	 * a waited one.
	 */
	if (req->njoin == 0) {
		req->join[req->njoin++] = m->fd[METER_PROCS];
		req->joins_kept = true;
	} else
		cg->v1_move = true;
	return true;
}

/*
 * Keep cg's measuring group for the next tool: only when it is empty and
 * its peak could be reset. Its files stay open with it.
 */
static bool
toolcg_meter_put(struct toolcg *cg)
{
	static const char *const files[METER_N] = {
		"cgroup.procs", "memory.max_usage_in_bytes",
		"memory.usage_in_bytes",
	};
	struct toolcg_meter *m;
	char *path, c;
	int i;

	if (toolcg_nmeters == sizeof toolcg_meters / sizeof toolcg_meters[0])
		return false;
	for (i = 0; i < METER_N; i++) {
		if (cg->meterfd[i] != -1)
			continue;
		xasprintf(&path, "%s/%s", cg->v1[CTL_MEMORY], files[i]);
		cg->meterfd[i] = open(path, (i == METER_USAGE ? O_RDONLY :
		    O_RDWR) | O_CLOEXEC);
		free(path);
		if (cg->meterfd[i] == -1)
			return false;
	}
	/* A process left in it (an escapee of a process group) would count. */
	if (pread(cg->meterfd[METER_PROCS], &c, 1, 0) != 0 ||
	    toolcg_writeat(cg->meterfd[METER_PEAK], NULL, "0") != 0)
		return false;
	m = &toolcg_meters[toolcg_nmeters];
	if (!toolcg_read_num(cg->meterfd[METER_USAGE], &m->base))
		return false;
	toolcg_nmeters++;
	m->dir = cg->v1[CTL_MEMORY];
	memcpy(m->fd, cg->meterfd, sizeof m->fd);
	for (i = 0; i < METER_N; i++)
		cg->meterfd[i] = -1;
	return true;
}

static void
toolcg_meter_close(int *fd)
{
	int i;

	for (i = 0; i < METER_N; i++)
		if (fd[i] != -1) {
			close(fd[i]);
			fd[i] = -1;
		}
}

/* The number a kept cgroup file holds, read again from its start. */
static bool
toolcg_read_num(int fd, uint64_t *out)
{
	char buf[64];
	ssize_t n;

	if ((n = pread(fd, buf, sizeof buf - 1, 0)) <= 0)
		return false;
	buf[n] = '\0';
	return toolcg_value_of(buf, NULL, out);
}
