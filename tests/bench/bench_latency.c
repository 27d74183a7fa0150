/*
 * latency: the cost the daemon adds to one tool call. One session, one
 * subscribed connection, tools added one at a time: each is a no-op
 * ToolDef {"name":"cat","command":["/bin/cat"]} (the input JSON goes to
 * stdin and cat echoes it), timed from writing its addTool to reading its
 * tool_result. Per repetition the median over N tools (one turn, drained
 * at the end); reported: median, min and max of those medians.
 *
 * Limit: the same /bin/cat spawned directly with posix_spawn, pipes for
 * stdin and stdout, the same stdin bytes written, stdout read to EOF,
 * waitpid. Each iteration makes one call of every kind (the limit, each
 * tool, each floor below) in an order drawn anew (bench_shuffle), so that
 * drift on a busy machine, and what one call leaves the kernel to do
 * during the next, hit all alike. (In a fixed order, with the cat right
 * after the bare spawn, the cat was 83..90 us over the contract's floor;
 * with the contract's floor in that place instead, 21..25 us under it.)
 *
 * The same cat in the read-only and the workspace-write sandbox, tool by
 * tool beside the others, gives two more rows, judged against the
 * unsandboxed daemon's figure: a sandbox may add at most 100 us.
 *
 * Floors (bench_floor.h) say what bounds those figures on this machine.
 * The least any daemon adds to the bare spawn (one request over a Unix
 * socket, its reply, the result) is a call to a minimal daemon in the same
 * iterations: the cat's figure is judged against it call by call (the
 * median of cat minus floor), so that the drift between rounds, which
 * moves either figure by tens of microseconds from run to run, cancels.
 * The daemon may add at most LAT_FLOOR_TARGET_US to what the floor adds.
 * What the kernel charges for each profile's confinement, with no daemon
 * around it, is measured in rounds of its own, alternating with the same
 * spawn unconfined. A confined process leaves work behind that the
 * kernel's workers do after its exit (its mount namespace, filter and
 * Landlock domain are freed), which would slow whatever ran next: in those
 * rounds each call waits LAT_SETTLE_US first.
 *
 * The least a daemon that keeps the contract adds (bench_floor.h: the
 * same addTool and the same lines back, the tool's four pipes, cwd and
 * variables; no journal, cgroup or checks) is a call to that daemon in
 * the same iterations: two more rows, call by call, without a target:
 * the contract's floor over the minimal floor (what the contract itself
 * costs) and the cat over the contract's floor (what the daemon adds
 * beyond the contract).
 *
 * Those calls come back to back, as a message's tools do. An agent's next
 * message comes after the model's turn, to a machine at rest: one more
 * row, without a target, makes a quarter as many calls of the cat and
 * both floors, each after LAT_SETTLE_US idle, and gives the cat over the
 * floor, call by call, with the contract's floor beside it; and another,
 * the daemon's CPU time per cat in those calls (the minimal floor's per
 * call beside it), to set beside the CPU rows of the back-to-back calls.
 *
 * A `true` ToolDef (no stdin read, no output) beside the cat gives one
 * more row, judged like the cat's against the same limit.
 *
 * The daemon's CPU time per tool over those rounds (its process CPU
 * clock, user + system) is one more row, without a target: a cut in the
 * daemon's own work shows there to a tenth of a microsecond, where the
 * round trip's noise would hide it; the floor daemon's CPU per call is
 * beside it.
 *
 * STEXEC_BENCH_N: tools per repetition (default 1000). STEXEC_BENCH_PLAIN=1:
 * only the unsandboxed tools and their limit, no floors (tests/bench/ab,
 * which compares two daemons, not a daemon with its floors).
 */
#include "bench.h"
#include "bench_floor.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The tool input; the daemon writes it compact, as here, to stdin. */
#define LAT_INPUT "{\"ping\":1}"
/* What a no-op tool gives back: its input, as the result line has it. */
#define LAT_OUTPUT "\"{\\\"ping\\\":1}\""
/* Target: what the daemon may add on top of a bare spawn, per tool. */
#define LAT_TARGET_US 60.0
/* Target: what the daemon may add on top of the floor of any daemon. */
#define LAT_FLOOR_TARGET_US 30.0
/* Target: what a sandbox may add on top of the unsandboxed tool. */
#define LAT_SANDBOX_TARGET_US 100.0
/* The daemon's own spawn outside it: bare, then in each profile. */
#define LAT_NSPAWNS 3
static const enum sandbox_profile lat_profiles[LAT_NSPAWNS] = {
	SANDBOX_NONE, SANDBOX_READ_ONLY, SANDBOX_WORKSPACE_WRITE,
};
/* Between calls of the confinement rounds (lat_settle). */
#define LAT_SETTLE_US 1000
/* The tools: unsandboxed, then each profile, then `true`. */
static const char *const lat_tools[] = { "cat", "cat-ro", "cat-ww", "true" };
#define LAT_NTOOLS 4
#define LAT_TRUE 3
/* What each tool gives back. */
static const char *const lat_outputs[] = {
	LAT_OUTPUT, LAT_OUTPUT, LAT_OUTPUT, "\"\"",
};

/*
 * One iteration's calls, in an order drawn anew each time: the tools (their
 * index in lat_tools), the bare spawn, the floor and the contract's floor.
 */
#define LAT_CALL_LIMIT LAT_NTOOLS
#define LAT_CALL_FLOOR (LAT_NTOOLS + 1)
#define LAT_CALL_CFLOOR (LAT_NTOOLS + 2)
#define LAT_NCALLS (LAT_NTOOLS + 3)

static double	lat_limit_one(void);
static double	lat_median(double *, int);

/* The same process, input and output without the daemon. */
static double
lat_limit_one(void)
{
	char *argv[] = { "/bin/cat", NULL };
	char buf[4096];
	int64_t t0, t1;
	size_t total = 0;
	ssize_t n;
	int in, out, status;
	pid_t pid;

	t0 = bench_now_ns();
	pid = bench_spawn_piped(argv, &in, &out);
	bench_write(in, LAT_INPUT, strlen(LAT_INPUT));
	close(in);
	while ((n = read(out, buf, sizeof buf)) > 0)
		total += (size_t)n;
	close(out);
	waitpid(pid, &status, 0);
	t1 = bench_now_ns();
	if (total != strlen(LAT_INPUT) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		bench_fail("bare cat: %zu bytes, status %#x", total, status);
	return (double)(t1 - t0) / 1e3;
}

static double
lat_median(double *v, int n)
{
	struct bench_sum s;

	bench_summarize(v, n, &s);
	return s.med;
}

/* A confinement round's call starts when the last one's teardown is done. */
static void
lat_settle(void)
{
	struct timespec ts = { 0, LAT_SETTLE_US * 1000L };

	nanosleep(&ts, NULL);
}

/* A floor's row: what it adds to what it is the floor of; no target. */
static void
lat_floor_report(const char *name, const struct bench_sum *s,
    const char *of, double base, const char *what)
{
	printf("%-12s median %.1f us  min %.1f  max %.1f | %s %.1f us | "
	    "%+.1f us: %s\n", name, s->med, s->min, s->max, of, base,
	    s->med - base, what);
	fflush(stdout);
}

/* The medians of one repetition's samples, kept for the summary. */
struct lat_row {
	double *samp;
	double *med;
	bool can;        /* this kernel can measure it */
};

static void
lat_row_init(struct lat_row *row, int n, int reps, bool can)
{
	row->samp = bench_alloc((size_t)n * sizeof *row->samp);
	row->med = bench_alloc((size_t)reps * sizeof *row->med);
	row->can = can;
}

static void
lat_row_free(struct lat_row *row)
{
	free(row->samp);
	free(row->med);
}

int
main(void)
{
	int reps = bench_reps(), n = (int)bench_n(1000, 1, 10000), r, i, t, k;
	int order[LAT_NCALLS], nrest = n / 4 > 0 ? n / 4 : 1;
	uint64_t rng = BENCH_SEED;
	bool plain = bench_env_long("STEXEC_BENCH_PLAIN", 0, 0, 1) != 0;
	/* The daemon's rounds: its limit, then each tool. */
	struct lat_row lim, tool[LAT_NTOOLS];
	/* The floor daemon, the cat over it call by call; the spawns. */
	struct lat_row fdaemon, over, spawn[LAT_NSPAWNS];
	/* The contract's floor: over the floor, and the cat over it. */
	struct lat_row cfloor, cover, dover;
	struct bench_sum ls, ds[LAT_NTOOLS], fds, os, ss[LAT_NSPAWNS], cs;
	struct bench_sum cfs, cos, dos;
	/* From rest: the cat over the floor, and as above beside it. */
	struct lat_row rover, rcover, rdover;
	struct bench_sum ros, rcos, rdos;
	double *rcat, *rfloor, *rcfloor;
	/* The daemon's CPU per tool, a round's worth (its tools only). */
	double *cpu = bench_alloc((size_t)reps * sizeof *cpu), cpu0, fcpu0;
	double *fcpu = bench_alloc((size_t)reps * sizeof *fcpu);
	/* The same from rest: the daemon's per cat, the floor's per call. */
	double *rcpu = bench_alloc((size_t)reps * sizeof *rcpu);
	double *rfcpu = bench_alloc((size_t)reps * sizeof *rfcpu);
	struct bench_sum rcs, rfcs;
	struct bench_sum fcs;
	int ntools = 0;
	struct bench_daemon d;
	struct floor_daemon fd;
	struct bench_conn *c, *cc = NULL;
	pid_t cpid = 0;
	int cfd;
	char params[256], limit[128], cmp[128], name[64];
	const char *sid;
	json_t *res;

	floor_spawn_init();
	lat_row_init(&lim, n, reps, true);
	lat_row_init(&fdaemon, n, reps, !plain);
	lat_row_init(&over, n, reps, !plain);
	lat_row_init(&cfloor, n, reps, !plain);
	lat_row_init(&cover, n, reps, !plain);
	lat_row_init(&dover, n, reps, !plain);
	lat_row_init(&rover, n, reps, !plain);
	lat_row_init(&rcover, n, reps, !plain);
	lat_row_init(&rdover, n, reps, !plain);
	rcat = bench_alloc((size_t)n * sizeof *rcat);
	rfloor = bench_alloc((size_t)n * sizeof *rfloor);
	rcfloor = bench_alloc((size_t)n * sizeof *rcfloor);
	for (t = 0; t < LAT_NTOOLS; t++)
		lat_row_init(&tool[t], n, reps, !plain || t == 0 ||
		    t == LAT_TRUE);
	for (t = 0; t < LAT_NSPAWNS; t++)
		lat_row_init(&spawn[t], n, reps, !plain && floor_spawn_can(
		    lat_profiles[t]));
	if (!plain) {
		floor_daemon_start(&fd, LAT_INPUT);
		cpid = floor_contract_start("/bin/cat", "s-floor", &cfd);
		cc = bench_conn_adopt(cfd);
	}
	bench_daemon_start(&d, NULL);
	c = bench_conn_open(d.sock);
	res = bench_call(c, "createSession",
	    "{\"tools\":[{\"name\":\"cat\",\"command\":[\"/bin/cat\"]},"
	    "{\"name\":\"cat-ro\",\"command\":[\"/bin/cat\"],"
	    "\"sandbox\":\"read-only\"},{\"name\":\"cat-ww\",\"command\":"
	    "[\"/bin/cat\"],\"sandbox\":\"workspace-write\"},"
	    "{\"name\":\"true\",\"command\":[\"/bin/true\"]}]}");
	sid = json_string_value(json_object_get(res, "sessionId"));
	if (sid == NULL)
		bench_fail("createSession: no sessionId");
	snprintf(params, sizeof params, "{\"sessionId\":\"%s\"}", sid);
	json_decref(bench_call(c, "subscribe", params));

	/* Warm up: page cache, the daemon's allocator, the CPU clocks. */
	for (i = 0; i < 50; i++) {
		lat_limit_one();
		if (!plain) {
			floor_daemon_one(&fd);
			bench_tool_us(cc, "s-floor", "cat", LAT_INPUT,
			    LAT_OUTPUT, i);
		}
		for (t = 0; t < LAT_NSPAWNS; t++)
			if (spawn[t].can)
				floor_spawn_one(lat_profiles[t], LAT_INPUT);
		for (t = 0; t < LAT_NTOOLS; t++)
			if (tool[t].can)
				bench_tool_us(c, sid, lat_tools[t], LAT_INPUT,
				    lat_outputs[t], i * LAT_NTOOLS + t);
	}
	json_decref(bench_call(c, "drain", params));

	for (t = 0; t < LAT_NTOOLS; t++)
		ntools += tool[t].can;
	for (r = 0; r < reps; r++) {
		cpu0 = bench_cpu_us(d.pid);
		fcpu0 = plain ? 0 : bench_cpu_us(fd.pid);
		for (i = 0; i < n; i++) {
			bench_shuffle(order, LAT_NCALLS, &rng);
			for (k = 0; k < LAT_NCALLS; k++) {
				t = order[k];
				if (t == LAT_CALL_LIMIT)
					lim.samp[i] = lat_limit_one();
				else if (t < LAT_NTOOLS && tool[t].can)
					tool[t].samp[i] = bench_tool_us(c, sid,
					    lat_tools[t], LAT_INPUT,
					    lat_outputs[t], i * LAT_NTOOLS + t);
				else if (t == LAT_CALL_FLOOR && !plain)
					fdaemon.samp[i] = floor_daemon_one(&fd);
				else if (t == LAT_CALL_CFLOOR && !plain)
					cfloor.samp[i] = bench_tool_us(cc,
					    "s-floor", "cat", LAT_INPUT,
					    LAT_OUTPUT, i);
			}
			if (plain)
				continue;
			over.samp[i] = tool[0].samp[i] - fdaemon.samp[i];
			cover.samp[i] = cfloor.samp[i] - fdaemon.samp[i];
			dover.samp[i] = tool[0].samp[i] - cfloor.samp[i];
		}
		json_decref(bench_call(c, "drain", params));
		cpu[r] = (bench_cpu_us(d.pid) - cpu0) / (n * ntools);
		if (!plain)
			fcpu[r] = (bench_cpu_us(fd.pid) - fcpu0) / n;
		for (i = 0; i < n; i++)
			for (t = 0; t < LAT_NSPAWNS; t++)
				if (spawn[t].can) {
					lat_settle();
					spawn[t].samp[i] = floor_spawn_one(
					    lat_profiles[t], LAT_INPUT);
				}
		/* From rest: the cat and both floors, each after a pause. */
		cpu0 = bench_cpu_us(d.pid);
		fcpu0 = plain ? 0 : bench_cpu_us(fd.pid);
		for (i = 0; i < nrest && !plain; i++) {
			bench_shuffle(order, 3, &rng);
			for (k = 0; k < 3; k++) {
				lat_settle();
				if (order[k] == 0)
					rcat[i] = bench_tool_us(c, sid, "cat",
					    LAT_INPUT, LAT_OUTPUT, i);
				else if (order[k] == 1)
					rfloor[i] = floor_daemon_one(&fd);
				else
					rcfloor[i] = bench_tool_us(cc,
					    "s-floor", "cat", LAT_INPUT,
					    LAT_OUTPUT, n + i);
			}
			rover.samp[i] = rcat[i] - rfloor[i];
			rcover.samp[i] = rcfloor[i] - rfloor[i];
			rdover.samp[i] = rcat[i] - rcfloor[i];
		}
		if (!plain) {
			rcpu[r] = (bench_cpu_us(d.pid) - cpu0) / nrest;
			rfcpu[r] = (bench_cpu_us(fd.pid) - fcpu0) / nrest;
			json_decref(bench_call(c, "drain", params));
			rover.med[r] = lat_median(rover.samp, nrest);
			rcover.med[r] = lat_median(rcover.samp, nrest);
			rdover.med[r] = lat_median(rdover.samp, nrest);
		}
		lim.med[r] = lat_median(lim.samp, n);
		if (!plain) {
			fdaemon.med[r] = lat_median(fdaemon.samp, n);
			over.med[r] = lat_median(over.samp, n);
			cfloor.med[r] = lat_median(cfloor.samp, n);
			cover.med[r] = lat_median(cover.samp, n);
			dover.med[r] = lat_median(dover.samp, n);
		}
		for (t = 0; t < LAT_NTOOLS; t++)
			if (tool[t].can)
				tool[t].med[r] = lat_median(tool[t].samp, n);
		for (t = 0; t < LAT_NSPAWNS; t++)
			if (spawn[t].can)
				spawn[t].med[r] = lat_median(spawn[t].samp, n);
	}
	json_decref(res);
	bench_conn_close(c);
	bench_daemon_stop(&d);
	if (!plain) {
		floor_daemon_stop(&fd);
		bench_conn_close(cc);
		waitpid(cpid, NULL, 0);
	}
	floor_spawn_done();

	bench_summarize(lim.med, reps, &ls);
	bench_summarize(cpu, reps, &cs);
	bench_summarize(fcpu, reps, &fcs);
	bench_summarize(fdaemon.med, reps, &fds);
	bench_summarize(over.med, reps, &os);
	if (!plain) {
		bench_summarize(cfloor.med, reps, &cfs);
		bench_summarize(cover.med, reps, &cos);
		bench_summarize(dover.med, reps, &dos);
		bench_summarize(rover.med, reps, &ros);
		bench_summarize(rcover.med, reps, &rcos);
		bench_summarize(rdover.med, reps, &rdos);
		bench_summarize(rcpu, reps, &rcs);
		bench_summarize(rfcpu, reps, &rfcs);
	}
	for (t = 0; t < LAT_NTOOLS; t++)
		if (tool[t].can)
			bench_summarize(tool[t].med, reps, &ds[t]);
	for (t = 0; t < LAT_NSPAWNS; t++)
		if (spawn[t].can)
			bench_summarize(spawn[t].med, reps, &ss[t]);

	snprintf(limit, sizeof limit, "limit %.1f us", ls.med);
	snprintf(cmp, sizeof cmp, "%+.1f us (target <= +%.0f us)",
	    ds[0].med - ls.med, LAT_TARGET_US);
	bench_report("latency", "us", &ds[0], limit, cmp,
	    ds[0].med - ls.med <= LAT_TARGET_US);
	snprintf(cmp, sizeof cmp, "%+.1f us (target <= +%.0f us)",
	    ds[LAT_TRUE].med - ls.med, LAT_TARGET_US);
	bench_report("latency, true", "us", &ds[LAT_TRUE], limit, cmp,
	    ds[LAT_TRUE].med - ls.med <= LAT_TARGET_US);
	/* No target: what the daemon spends, beside what the caller waits. */
	printf("latency, daemon CPU median %.1f us  min %.1f  max %.1f | per "
	    "tool, user + system, over the rounds above\n", cs.med, cs.min,
	    cs.max);
	if (!plain) {
		lat_floor_report("latency, the floor of any daemon", &fds,
		    "limit", ls.med, "a minimal daemon over the bare spawn");
		snprintf(limit, sizeof limit, "the floor %.1f us", fds.med);
		snprintf(cmp, sizeof cmp, "target <= +%.0f us",
		    LAT_FLOOR_TARGET_US);
		bench_report("latency, cat over the floor, call by call", "us",
		    &os, limit, cmp, os.med <= LAT_FLOOR_TARGET_US);
		printf("latency, the floor's CPU median %.1f us  min %.1f  "
		    "max %.1f | per call, the minimal daemon's\n", fcs.med,
		    fcs.min, fcs.max);
		printf("latency, the contract's floor median %.1f us  min %.1f  "
		    "max %.1f | over the floor, call by call: %+.1f us (min "
		    "%+.1f, max %+.1f): what the contract itself costs\n",
		    cfs.med, cfs.min, cfs.max, cos.med, cos.min, cos.max);
		printf("latency, cat over the contract's floor, call by call "
		    "median %+.1f us  min %+.1f  max %+.1f | what the daemon "
		    "adds beyond the contract\n", dos.med, dos.min, dos.max);
		printf("latency, from rest, cat over the floor, call by call "
		    "median %+.1f us  min %+.1f  max %+.1f | each call after "
		    "%d us idle, no target; the contract's floor over the "
		    "floor %+.1f us, the cat over the contract's floor "
		    "%+.1f us\n", ros.med, ros.min, ros.max, LAT_SETTLE_US,
		    rcos.med, rdos.med);
		printf("latency, from rest, CPU median %.1f us  min %.1f  max "
		    "%.1f | the daemon's per cat; the minimal daemon's %.1f us "
		    "per call\n", rcs.med, rcs.min, rcs.max, rfcs.med);
	}
	for (t = 1; t < LAT_TRUE && !plain; t++) {
		snprintf(name, sizeof name, "latency, %s", t == 1 ?
		    "read-only" : "workspace-write");
		snprintf(limit, sizeof limit, "unsandboxed %.1f us", ds[0].med);
		snprintf(cmp, sizeof cmp, "%+.1f us (target <= +%.0f us)",
		    ds[t].med - ds[0].med, LAT_SANDBOX_TARGET_US);
		bench_report(name, "us", &ds[t], limit, cmp,
		    ds[t].med - ds[0].med <= LAT_SANDBOX_TARGET_US);
		if (!spawn[0].can || !spawn[t].can)
			continue;
		snprintf(name, sizeof name, "latency, the kernel's %s", t == 1 ?
		    "read-only" : "workspace-write");
		lat_floor_report(name, &ss[t], "bare spawn", ss[0].med,
		    "the confinement itself, no daemon");
	}
	free(cpu);
	free(fcpu);
	free(rcpu);
	free(rfcpu);
	lat_row_free(&lim);
	lat_row_free(&fdaemon);
	lat_row_free(&over);
	lat_row_free(&cfloor);
	lat_row_free(&cover);
	lat_row_free(&dover);
	lat_row_free(&rover);
	lat_row_free(&rcover);
	lat_row_free(&rdover);
	free(rcat);
	free(rfloor);
	free(rcfloor);
	for (t = 0; t < LAT_NTOOLS; t++)
		lat_row_free(&tool[t]);
	for (t = 0; t < LAT_NSPAWNS; t++)
		lat_row_free(&spawn[t]);
	return 0;
}
