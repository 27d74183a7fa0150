/* The sandbox's seccomp programs: one linear list of checks per profile. */
#include "supervisor/seccomp.h"

#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <sched.h>
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

#define SECCOMP_NS_FLAGS (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | \
    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | 0x80)
    /* 0x80: CLONE_NEWTIME */
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

/* ioctls refused: typing into the terminal, and (read-only) inode flags. */
static const uint32_t seccomp_ioctls[] = { TIOCSTI, TIOCLINUX };
static const uint32_t seccomp_ioctls_metadata[] = {
	FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR,
};
#endif

static struct sock_filter seccomp_code[SECCOMP_NKINDS][SECCOMP_MAX];
static struct sock_fprog seccomp_progs[SECCOMP_NKINDS];
static bool seccomp_built;

#ifdef SECCOMP_ARCH
/*
 * A program under construction; the refused calls share one return.
 */
struct seccomp_prog {
	struct sock_filter *f;
	size_t n;
	size_t to_deny[SECCOMP_MAX]; /* jumps to point at the final EPERM */
	bool deny_jt[SECCOMP_MAX];   /* that jump is jt, else jf */
	size_t nto_deny;
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

/* A conditional jump whose true (or false) branch is the final EPERM. */
static void
seccomp_jump_deny(struct seccomp_prog *p, uint16_t op, uint32_t k, bool jt)
{
	p->to_deny[p->nto_deny] = p->n;
	p->deny_jt[p->nto_deny++] = jt;
	seccomp_emit(p, BPF_JMP | op | BPF_K, k, 0, 0);
}

/*
 * if (nr == sys) { A = arg; if (A is one of vals) return hit; return
 * miss; } — each block returns, so the nr in A is never needed after it.
 */
static void
seccomp_args(struct seccomp_prog *p, int sys, int arg, const uint32_t *vals,
    size_t n, uint32_t hit, uint32_t miss)
{
	size_t i;

	seccomp_emit(p, BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)sys, 0,
	    (uint8_t)(n + 3));
	seccomp_emit(p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)SECCOMP_ARG(arg),
	    0, 0);
	for (i = 0; i < n; i++)
		seccomp_emit(p, BPF_JMP | BPF_JEQ | BPF_K, vals[i],
		    (uint8_t)(n - i), 0);
	seccomp_ret(p, miss);
	seccomp_ret(p, hit);
}

static int
seccomp_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* Add n numbers to the refused list. */
static size_t
seccomp_add(int *list, size_t len, const int *nrs, size_t n)
{
	memcpy(list + len, nrs, n * sizeof *nrs);
	return len + n;
}

/* A run of refused numbers. */
struct seccomp_range {
	uint32_t lo, hi;
};

/*
 * if (nr in ranges) goto EPERM; else return ALLOW: a binary search, so
 * that a number passes few instructions. That is what an attach costs:
 * the kernel runs the program once for every system call number to find
 * those it may allow without running it (its action cache), and a linear
 * list made that 0.1 ms per spawn.
 */
static void
seccomp_search(struct seccomp_prog *p, const struct seccomp_range *r,
    size_t n)
{
	size_t i, mid, at;

	if (n <= 2) {
		for (i = 0; i < n; i++) {
			if (r[i].lo == r[i].hi) {
				seccomp_jump_deny(p, BPF_JEQ, r[i].lo, true);
				continue;
			}
			/* nr >= lo && !(nr > hi) */
			seccomp_emit(p, BPF_JMP | BPF_JGE | BPF_K, r[i].lo, 0,
			    1);
			seccomp_jump_deny(p, BPF_JGT, r[i].hi, false);
		}
		seccomp_ret(p, SECCOMP_RET_ALLOW);
		return;
	}
	mid = n / 2;
	at = p->n;
	seccomp_emit(p, BPF_JMP | BPF_JGE | BPF_K, r[mid].lo, 0, 0);
	seccomp_search(p, r, mid);
	if (p->n - at - 1 > 255)
		fatal("seccomp: a jump of %zu instructions", p->n - at - 1);
	p->f[at].jt = (uint8_t)(p->n - at - 1);
	seccomp_search(p, r + mid, n - mid);
}

/* The refused numbers as sorted, merged ranges; how many. */
static size_t
seccomp_ranges(int *list, size_t n, struct seccomp_range *r)
{
	size_t i, nr = 0;

	qsort(list, n, sizeof *list, seccomp_cmp);
	for (i = 0; i < n; i++) {
		if (nr > 0 && (uint32_t)list[i] <= r[nr - 1].hi + 1) {
			if ((uint32_t)list[i] > r[nr - 1].hi)
				r[nr - 1].hi = (uint32_t)list[i];
			continue;
		}
		r[nr].lo = r[nr].hi = (uint32_t)list[i];
		nr++;
	}
	return nr;
}

static void
seccomp_build(int variant)
{
	static const uint32_t inet[] = { AF_INET, AF_INET6 }, self[] = { 0 };
	static const int socket_nr[] = { __NR_socket };
	struct seccomp_prog p = { .f = seccomp_code[variant] };
	int kind = variant & ~SECCOMP_SIGNALS;
	int list[nitems(seccomp_denied) + nitems(seccomp_metadata) +
	    nitems(seccomp_signals) + 1];
	struct seccomp_range ranges[nitems(list)];
	uint32_t ioctls[nitems(seccomp_ioctls) +
	    nitems(seccomp_ioctls_metadata)];
	size_t nioctls = 0, nlist = 0, i, deny, off;

	seccomp_emit(&p, BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, arch), 0, 0);
	seccomp_jump_deny(&p, BPF_JEQ, SECCOMP_ARCH, false);
	seccomp_emit(&p, BPF_LD | BPF_W | BPF_ABS,
	    offsetof(struct seccomp_data, nr), 0, 0);
#ifdef SECCOMP_X32
	seccomp_jump_deny(&p, BPF_JGE, SECCOMP_X32, true);
#endif
	seccomp_emit(&p, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 0, 1);
	seccomp_ret(&p, SECCOMP_RET_ERRNO | ENOSYS);

	/* The blocks that load an argument; each returns. */
	if (kind == SECCOMP_WORKSPACE_NET)
		seccomp_args(&p, __NR_socket, 0, inet, nitems(inet),
		    SECCOMP_RET_ALLOW, SECCOMP_DENY);
	if (variant & SECCOMP_SIGNALS)
		seccomp_args(&p, __NR_kill, 0, self, nitems(self),
		    SECCOMP_RET_ALLOW, SECCOMP_DENY);
	/* clone: any namespace flag refused, the rest allowed. */
	seccomp_emit(&p, BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
	seccomp_emit(&p, BPF_LD | BPF_W | BPF_ABS, (uint32_t)SECCOMP_ARG(0),
	    0, 0);
	seccomp_emit(&p, BPF_JMP | BPF_JSET | BPF_K, SECCOMP_NS_FLAGS, 0, 1);
	seccomp_ret(&p, SECCOMP_DENY);
	seccomp_ret(&p, SECCOMP_RET_ALLOW);
	for (i = 0; i < nitems(seccomp_ioctls); i++)
		ioctls[nioctls++] = seccomp_ioctls[i];
	for (i = 0; kind == SECCOMP_READ_ONLY &&
	    i < nitems(seccomp_ioctls_metadata); i++)
		ioctls[nioctls++] = seccomp_ioctls_metadata[i];
	seccomp_args(&p, __NR_ioctl, 1, ioctls, nioctls, SECCOMP_DENY,
	    SECCOMP_RET_ALLOW);

	nlist = seccomp_add(list, nlist, seccomp_denied,
	    nitems(seccomp_denied));
	if (kind == SECCOMP_READ_ONLY)
		nlist = seccomp_add(list, nlist, seccomp_metadata,
		    nitems(seccomp_metadata));
	if (variant & SECCOMP_SIGNALS)
		nlist = seccomp_add(list, nlist, seccomp_signals,
		    nitems(seccomp_signals));
	if (kind != SECCOMP_WORKSPACE_NET)
		nlist = seccomp_add(list, nlist, socket_nr, 1);
	seccomp_search(&p, ranges, seccomp_ranges(list, nlist, ranges));
	deny = p.n;
	seccomp_ret(&p, SECCOMP_DENY);

	for (i = 0; i < p.nto_deny; i++) {
		off = deny - p.to_deny[i] - 1;
		if (off > 255)
			fatal("seccomp: a jump of %zu instructions", off);
		if (p.deny_jt[i])
			p.f[p.to_deny[i]].jt = (uint8_t)off;
		else
			p.f[p.to_deny[i]].jf = (uint8_t)off;
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
