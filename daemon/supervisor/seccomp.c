/* The sandbox's seccomp programs: one search tree per profile. */
#include "supervisor/seccomp.h"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/ioprio.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <sched.h>
#include <sys/resource.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#if defined(__x86_64__)
#define SECCOMP_ARCH AUDIT_ARCH_X86_64
#define SECCOMP_X32 0x40000000U /* x32 numbers: refused whole */
#elif defined(__aarch64__)
#define SECCOMP_ARCH AUDIT_ARCH_AARCH64
#endif

/* Newer than the build's headers (x86_64 and aarch64 share these). */
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#ifndef IOPRIO_WHO_PROCESS
#define IOPRIO_WHO_PROCESS 1
#define IOPRIO_WHO_PGRP 2
#endif

/* Namespaces, and a child of the tool's parent (the daemon's). */
#define SECCOMP_CLONE_FLAGS (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | \
    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | 0x80 | \
    CLONE_PARENT) /* 0x80: CLONE_NEWTIME */
#define SECCOMP_DENY (SECCOMP_RET_ERRNO | EPERM)
#define SECCOMP_ARG(n) (offsetof(struct seccomp_data, args) + \
    (n) * sizeof(uint64_t)) /* its low 32 bits, little-endian */
#define SECCOMP_MAX 256

#ifdef SECCOMP_ARCH
/* Refused in every profile. */
static const int seccomp_denied[] = {
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
	__NR_shmget, __NR_shmat, __NR_shmctl, __NR_semget, __NR_semctl,
	__NR_semop, __NR_semtimedop, __NR_msgget, __NR_msgsnd, __NR_msgrcv,
	__NR_msgctl, __NR_mq_open, __NR_mq_unlink,
	__NR_keyctl, __NR_add_key, __NR_request_key,
	__NR_bpf, __NR_userfaultfd, __NR_perf_event_open,
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
	__NR_move_mount, __NR_open_tree, __NR_fsopen, __NR_fsconfig,
	__NR_fsmount, __NR_fspick, __NR_mount_setattr,
	__NR_unshare, __NR_setns,
	__NR_kexec_load, __NR_init_module, __NR_finit_module,
	__NR_delete_module, __NR_reboot, __NR_swapon, __NR_swapoff,
	__NR_acct, __NR_quotactl, __NR_sethostname, __NR_setdomainname,
	__NR_settimeofday, __NR_clock_settime, __NR_clock_adjtime,
	__NR_syslog, __NR_vhangup, __NR_open_by_handle_at,
	__NR_process_madvise, __NR_process_mrelease,
#ifdef __x86_64__
	__NR_iopl, __NR_ioperm,
#endif
};

/* Changes of file metadata, refused read-only (Landlock has no right). */
static const int seccomp_metadata[] = {
	__NR_fchmod, __NR_fchmodat, __NR_fchmodat2, __NR_fchown,
	__NR_fchownat, __NR_utimensat, __NR_setxattr, __NR_lsetxattr,
	__NR_fsetxattr, __NR_removexattr, __NR_lremovexattr,
	__NR_fremovexattr, __NR_setxattrat, __NR_removexattrat,
#ifdef __x86_64__
	__NR_chmod, __NR_chown, __NR_lchown, __NR_utime, __NR_utimes,
	__NR_futimesat,
#endif
};

/* Signals to others: refused where Landlock cannot scope them. */
static const int seccomp_signals[] = {
	__NR_tkill, __NR_tgkill, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo,
	__NR_pidfd_send_signal,
};

/*
 * Calls that change a process named by its first argument: its limits,
 * scheduling, CPUs and memory placement. Landlock scopes neither (only
 * signals and ptrace), so they take pid 0, the caller, alone.
 */
static const int seccomp_self[] = {
	__NR_prlimit64, __NR_sched_setaffinity, __NR_sched_setscheduler,
	__NR_sched_setparam, __NR_sched_setattr, __NR_migrate_pages,
	__NR_move_pages,
};

/* ioctls refused: typing into the terminal, and (read-only) inode flags. */
static const uint32_t seccomp_ioctls[] = { TIOCSTI, TIOCLINUX };
static const uint32_t seccomp_ioctls_metadata[] = {
	FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR,
};
/* Where signals are the filter's: SIGIO sent to a process of our choice. */
static const uint32_t seccomp_ioctls_signals[] = { FIOSETOWN, SIOCSPGRP };
static const uint32_t seccomp_fcntls_signals[] = { F_SETOWN, F_SETOWN_EX };
#endif

static struct sock_filter seccomp_code[SECCOMP_NKINDS][SECCOMP_MAX];
static struct sock_fprog seccomp_progs[SECCOMP_NKINDS];
static bool seccomp_built;

#ifdef SECCOMP_ARCH
/*
 * What a run of system call numbers gets: a return, or (one number) a
 * block that looks at an argument.
 */
enum seccomp_leaf {
	SECCOMP_LEAF_ALLOW,
	SECCOMP_LEAF_DENY,
	SECCOMP_LEAF_ENOSYS,
	SECCOMP_LEAF_SOCKET,  /* AF_INET, AF_INET6 allowed */
	SECCOMP_LEAF_KILL,    /* kill(0, ...) allowed */
	SECCOMP_LEAF_CLONE,   /* any namespace flag refused */
	SECCOMP_LEAF_IOCTL,   /* some requests refused */
	SECCOMP_LEAF_FCNTL,   /* F_SETOWN refused */
	SECCOMP_LEAF_SELF,    /* pid 0 allowed */
	SECCOMP_LEAF_PRIO,    /* setpriority of self or own group */
	SECCOMP_LEAF_IOPRIO,  /* ioprio_set of self or own group */
};

struct seccomp_range {
	uint32_t lo, hi;
	enum seccomp_leaf leaf;
};

/* Every number from 0 to UINT32_MAX in order: a few hundred at most. */
#define SECCOMP_MAX_RANGES (2 * SECCOMP_MAX)

/*
 * A program under construction. The many branches that end in ALLOW or
 * EPERM jump to one shared return of each, at the end.
 */
struct seccomp_prog {
	struct sock_filter *f;
	size_t n;
	size_t fix[SECCOMP_MAX];          /* jumps to a shared return */
	bool fix_jt[SECCOMP_MAX];         /* that jump is jt, else jf */
	enum seccomp_leaf fix_to[SECCOMP_MAX];
	size_t nfix;
	const uint32_t *ioctls;           /* the refused ioctl requests */
	size_t nioctls;
};

static void
seccomp_emit(struct seccomp_prog *p, uint16_t code, uint32_t k, uint8_t jt,
    uint8_t jf)
{
	if (p->n == SECCOMP_MAX)
		fatal("seccomp: the program outgrew %d instructions",
		    SECCOMP_MAX);
	p->f[p->n++] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
}

static void
seccomp_ret(struct seccomp_prog *p, uint32_t action)
{
	seccomp_emit(p, BPF_RET | BPF_K, action, 0, 0);
}

/* Point a branch of the last instruction at a shared return. */
static void
seccomp_fix(struct seccomp_prog *p, bool jt, enum seccomp_leaf to)
{
	p->fix[p->nfix] = p->n - 1;
	p->fix_jt[p->nfix] = jt;
	p->fix_to[p->nfix++] = to;
}

/* Whether a leaf is a shared return, reached by a jump, no code of its own. */
static bool
seccomp_shared(enum seccomp_leaf leaf)
{
	return leaf == SECCOMP_LEAF_ALLOW || leaf == SECCOMP_LEAF_DENY;
}

/* A = argument n, then: if (A is one of vals) goto hit; goto miss. */
static void
seccomp_arg_block(struct seccomp_prog *p, int arg, const uint32_t *vals,
    size_t n, enum seccomp_leaf hit, enum seccomp_leaf miss)
{
	size_t i;

	seccomp_emit(p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)SECCOMP_ARG(arg),
	    0, 0);
	for (i = 0; i < n; i++) {
		seccomp_emit(p, BPF_JMP | BPF_JEQ | BPF_K, vals[i], 0, 0);
		seccomp_fix(p, true, hit);
	}
	seccomp_emit(p, BPF_JMP | BPF_JA, 0, 0, 0);
	seccomp_fix(p, true, miss);
}

/* The code of a leaf that has some. */
static void
seccomp_leaf(struct seccomp_prog *p, enum seccomp_leaf leaf)
{
	static const uint32_t inet[] = { AF_INET, AF_INET6 }, self[] = { 0 },
	    prio[] = { PRIO_PROCESS, PRIO_PGRP }, ioprio[] =
	    { IOPRIO_WHO_PROCESS, IOPRIO_WHO_PGRP };

	switch (leaf) {
	case SECCOMP_LEAF_ENOSYS:
		seccomp_ret(p, SECCOMP_RET_ERRNO | ENOSYS);
		break;
	case SECCOMP_LEAF_SOCKET:
		seccomp_arg_block(p, 0, inet, nitems(inet), SECCOMP_LEAF_ALLOW,
		    SECCOMP_LEAF_DENY);
		break;
	case SECCOMP_LEAF_KILL:
		seccomp_arg_block(p, 0, self, nitems(self), SECCOMP_LEAF_ALLOW,
		    SECCOMP_LEAF_DENY);
		break;
	case SECCOMP_LEAF_CLONE:
		seccomp_emit(p, BPF_LD | BPF_W | BPF_ABS,
		    (uint32_t)SECCOMP_ARG(0), 0, 0);
		seccomp_emit(p, BPF_JMP | BPF_JSET | BPF_K, SECCOMP_CLONE_FLAGS,
		    0, 0);
		seccomp_fix(p, true, SECCOMP_LEAF_DENY);
		seccomp_fix(p, false, SECCOMP_LEAF_ALLOW);
		break;
	case SECCOMP_LEAF_IOCTL:
		seccomp_arg_block(p, 1, p->ioctls, p->nioctls,
		    SECCOMP_LEAF_DENY, SECCOMP_LEAF_ALLOW);
		break;
	case SECCOMP_LEAF_FCNTL:
		seccomp_arg_block(p, 1, seccomp_fcntls_signals,
		    nitems(seccomp_fcntls_signals), SECCOMP_LEAF_DENY,
		    SECCOMP_LEAF_ALLOW);
		break;
	case SECCOMP_LEAF_SELF:
		seccomp_arg_block(p, 0, self, nitems(self), SECCOMP_LEAF_ALLOW,
		    SECCOMP_LEAF_DENY);
		break;
	case SECCOMP_LEAF_PRIO:
	case SECCOMP_LEAF_IOPRIO:
		/* who (argument 1) must be 0: this process or its group. */
		seccomp_emit(p, BPF_LD | BPF_W | BPF_ABS,
		    (uint32_t)SECCOMP_ARG(1), 0, 0);
		seccomp_emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0);
		seccomp_fix(p, false, SECCOMP_LEAF_DENY);
		if (leaf == SECCOMP_LEAF_PRIO)
			seccomp_arg_block(p, 0, prio, nitems(prio),
			    SECCOMP_LEAF_ALLOW, SECCOMP_LEAF_DENY);
		else
			seccomp_arg_block(p, 0, ioprio, nitems(ioprio),
			    SECCOMP_LEAF_ALLOW, SECCOMP_LEAF_DENY);
		break;
	default:
		fatal("seccomp: leaf %d has no code", (int)leaf);
	}
}

/*
 * A binary search over the ranges, each node one compare: the kernel runs
 * the program once for every system call number when it attaches it (to
 * find those it may allow without running it), so what an attach costs is
 * the length of a number's path. A list of compares made that 0.3 ms per
 * spawn; checks made before the search, a quarter more than this.
 */
static void
seccomp_search(struct seccomp_prog *p, const struct seccomp_range *r,
    size_t n)
{
	size_t mid = n / 2, at, off;
	bool right_shared = n - mid == 1 && seccomp_shared(r[mid].leaf);

	if (n == 1) {
		seccomp_leaf(p, r[0].leaf);
		return;
	}
	at = p->n;
	seccomp_emit(p, BPF_JMP | BPF_JGE | BPF_K, r[mid].lo, 0, 0);
	if (right_shared)
		seccomp_fix(p, true, r[mid].leaf);
	if (mid == 1 && seccomp_shared(r[0].leaf))
		seccomp_fix(p, false, r[0].leaf);
	else
		seccomp_search(p, r, mid);
	if (right_shared)
		return;
	off = p->n - at - 1;
	if (off > 255)
		fatal("seccomp: a jump of %zu instructions", off);
	p->f[at].jt = (uint8_t)off;
	seccomp_search(p, r + mid, n - mid);
}

static int
seccomp_cmp(const void *a, const void *b)
{
	const struct seccomp_range *x = a, *y = b;

	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Each number of nrs gets leaf. */
static size_t
seccomp_add(struct seccomp_range *r, size_t len, const int *nrs, size_t n,
    enum seccomp_leaf leaf)
{
	size_t i;

	for (i = 0; i < n; i++)
		r[len++] = (struct seccomp_range){ (uint32_t)nrs[i],
		    (uint32_t)nrs[i], leaf };
	return len;
}

/*
 * The special numbers sorted, runs of refused ones merged, and the gaps
 * between them allowed: ranges from 0 to UINT32_MAX. How many.
 */
static size_t
seccomp_cover(struct seccomp_range *special, size_t n,
    struct seccomp_range *r)
{
	size_t i, nr = 0;
	uint32_t next = 0;

	qsort(special, n, sizeof *special, seccomp_cmp);
	for (i = 0; i < n; i++) {
		if (i > 0 && special[i].lo <= special[i - 1].hi)
			fatal("seccomp: number %u listed twice", special[i].lo);
		if (special[i].lo > next)
			r[nr++] = (struct seccomp_range){ next,
			    special[i].lo - 1, SECCOMP_LEAF_ALLOW };
		if (nr > 0 && r[nr - 1].leaf == SECCOMP_LEAF_DENY &&
		    special[i].leaf == SECCOMP_LEAF_DENY &&
		    r[nr - 1].hi + 1 == special[i].lo)
			r[nr - 1].hi = special[i].hi;
		else
			r[nr++] = special[i];
		next = special[i].hi + 1;
	}
	if (n == 0 || special[n - 1].hi != UINT32_MAX)
		r[nr++] = (struct seccomp_range){ next, UINT32_MAX,
		    SECCOMP_LEAF_ALLOW };
	return nr;
}

/* The read-only kinds refuse every change of metadata. */
static bool
seccomp_read_only(int kind)
{
	return kind == SECCOMP_READ_ONLY || kind == SECCOMP_READ_ONLY_NET;
}

static void
seccomp_build(int variant)
{
	static const int clone3_nr[] = { __NR_clone3 }, socket_nr[] =
	    { __NR_socket }, kill_nr[] = { __NR_kill }, clone_nr[] =
	    { __NR_clone }, ioctl_nr[] = { __NR_ioctl }, fcntl_nr[] =
	    { __NR_fcntl }, prio_nr[] = { __NR_setpriority }, ioprio_nr[] =
	    { __NR_ioprio_set };
	struct seccomp_prog p = { .f = seccomp_code[variant] };
	int kind = variant & ~SECCOMP_SIGNALS;
	struct seccomp_range special[SECCOMP_MAX], ranges[SECCOMP_MAX_RANGES];
	uint32_t ioctls[nitems(seccomp_ioctls) +
	    nitems(seccomp_ioctls_metadata) + nitems(seccomp_ioctls_signals)];
	size_t nioctls = 0, n = 0, i, off, allow, deny;

	for (i = 0; i < nitems(seccomp_ioctls); i++)
		ioctls[nioctls++] = seccomp_ioctls[i];
	for (i = 0; seccomp_read_only(kind) &&
	    i < nitems(seccomp_ioctls_metadata); i++)
		ioctls[nioctls++] = seccomp_ioctls_metadata[i];
	for (i = 0; (variant & SECCOMP_SIGNALS) &&
	    i < nitems(seccomp_ioctls_signals); i++)
		ioctls[nioctls++] = seccomp_ioctls_signals[i];
	p.ioctls = ioctls;
	p.nioctls = nioctls;

	n = seccomp_add(special, n, seccomp_denied, nitems(seccomp_denied),
	    SECCOMP_LEAF_DENY);
	if (seccomp_read_only(kind))
		n = seccomp_add(special, n, seccomp_metadata,
		    nitems(seccomp_metadata), SECCOMP_LEAF_DENY);
	if (variant & SECCOMP_SIGNALS) {
		n = seccomp_add(special, n, seccomp_signals,
		    nitems(seccomp_signals), SECCOMP_LEAF_DENY);
		n = seccomp_add(special, n, kill_nr, 1, SECCOMP_LEAF_KILL);
		n = seccomp_add(special, n, fcntl_nr, 1, SECCOMP_LEAF_FCNTL);
	}
	n = seccomp_add(special, n, seccomp_self, nitems(seccomp_self),
	    SECCOMP_LEAF_SELF);
	n = seccomp_add(special, n, prio_nr, 1, SECCOMP_LEAF_PRIO);
	n = seccomp_add(special, n, ioprio_nr, 1, SECCOMP_LEAF_IOPRIO);
	/*
	 * clone3's flags are in memory the filter cannot read: ENOSYS, so
	 * that libc falls back to clone, whose flags it can.
	 */
	n = seccomp_add(special, n, clone3_nr, 1, SECCOMP_LEAF_ENOSYS);
	n = seccomp_add(special, n, clone_nr, 1, SECCOMP_LEAF_CLONE);
	n = seccomp_add(special, n, ioctl_nr, 1, SECCOMP_LEAF_IOCTL);
	n = seccomp_add(special, n, socket_nr, 1, kind ==
	    SECCOMP_WORKSPACE_NET || kind == SECCOMP_READ_ONLY_NET ?
	    SECCOMP_LEAF_SOCKET : SECCOMP_LEAF_DENY);
#ifdef SECCOMP_X32
	special[n++] = (struct seccomp_range){ SECCOMP_X32, UINT32_MAX,
	    SECCOMP_LEAF_DENY };
#endif

	seccomp_emit(&p, BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, arch), 0, 0);
	seccomp_emit(&p, BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_ARCH, 0, 0);
	seccomp_fix(&p, false, SECCOMP_LEAF_DENY);
	seccomp_emit(&p, BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, nr), 0, 0);
	seccomp_search(&p, ranges, seccomp_cover(special, n, ranges));
	allow = p.n;
	seccomp_ret(&p, SECCOMP_RET_ALLOW);
	deny = p.n;
	seccomp_ret(&p, SECCOMP_DENY);

	for (i = 0; i < p.nfix; i++) {
		off = (p.fix_to[i] == SECCOMP_LEAF_ALLOW ? allow : deny) -
		    p.fix[i] - 1;
		if (off > 255)
			fatal("seccomp: a jump of %zu instructions", off);
		if (BPF_OP(p.f[p.fix[i]].code) == BPF_JA)
			p.f[p.fix[i]].k = (uint32_t)off;
		else if (p.fix_jt[i])
			p.f[p.fix[i]].jt = (uint8_t)off;
		else
			p.f[p.fix[i]].jf = (uint8_t)off;
	}
	seccomp_progs[variant].filter = p.f;
	seccomp_progs[variant].len = (unsigned short)p.n;
}
#endif

bool
seccomp_init(void)
{
#ifdef SECCOMP_ARCH
	int k;

	for (k = 0; k < SECCOMP_NKINDS; k++)
		if ((k & ~SECCOMP_SIGNALS) < SECCOMP_NPROFILES)
			seccomp_build(k);
	seccomp_built = true;
#endif
	return seccomp_built;
}

const struct sock_fprog *
seccomp_program(int kind)
{
	return seccomp_built ? &seccomp_progs[kind] : NULL;
}
