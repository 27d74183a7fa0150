/*
 * The sandbox's seccomp programs (supervisor/seccomp.h), run here by a
 * small classic-BPF interpreter for every system call number, both
 * architectures' and x32's, with the arguments that matter, and checked
 * against the policy as doc/design.md §7 states it, written out again
 * below. The escape suite proves the filter from inside real tools; this
 * proves every number, which no tool could try one by one.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/fs.h>
#include <linux/seccomp.h>
#include <linux/sockios.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include "supervisor/seccomp.h"

#define nitems(a) (sizeof(a) / sizeof((a)[0]))
#define DENY (SECCOMP_RET_ERRNO | EPERM)
#define ENOSYS_RET (SECCOMP_RET_ERRNO | ENOSYS)
#define CLONE_REFUSED (CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | \
    CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | 0x80 | \
    CLONE_PARENT)

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#define OTHER_ARCH AUDIT_ARCH_I386
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#define OTHER_ARCH AUDIT_ARCH_ARM
#endif

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif

#ifdef ARCH
/* Refused in every profile. */
static const int denied[] = {
	__NR_io_uring_setup, __NR_io_uring_enter, __NR_io_uring_register,
	__NR_shmget, __NR_shmat, __NR_shmctl, __NR_semget, __NR_semctl,
	__NR_semop, __NR_semtimedop, __NR_msgget, __NR_msgsnd, __NR_msgrcv,
	__NR_msgctl, __NR_mq_open, __NR_mq_unlink, __NR_keyctl, __NR_add_key,
	__NR_request_key, __NR_bpf, __NR_userfaultfd, __NR_perf_event_open,
	__NR_mount, __NR_umount2, __NR_pivot_root, __NR_chroot,
	__NR_move_mount, __NR_open_tree, __NR_fsopen, __NR_fsconfig,
	__NR_fsmount, __NR_fspick, __NR_mount_setattr, __NR_unshare,
	__NR_setns, __NR_kexec_load, __NR_init_module, __NR_finit_module,
	__NR_delete_module, __NR_reboot, __NR_swapon, __NR_swapoff,
	__NR_acct, __NR_quotactl, __NR_sethostname, __NR_setdomainname,
	__NR_settimeofday, __NR_clock_settime, __NR_clock_adjtime,
	__NR_syslog, __NR_vhangup, __NR_open_by_handle_at,
	__NR_process_madvise, __NR_process_mrelease,
#ifdef __x86_64__
	__NR_iopl, __NR_ioperm,
#endif
};

/* Allowed on the caller alone (pid 0): they change another process. */
static const int self_only[] = {
	__NR_prlimit64, __NR_sched_setaffinity, __NR_sched_setscheduler,
	__NR_sched_setparam, __NR_sched_setattr, __NR_migrate_pages,
	__NR_move_pages,
};

/* Refused read-only: changes of file metadata. */
static const int metadata[] = {
	__NR_fchmod, __NR_fchmodat, __NR_fchmodat2, __NR_fchown,
	__NR_fchownat, __NR_utimensat, __NR_setxattr, __NR_lsetxattr,
	__NR_fsetxattr, __NR_removexattr, __NR_lremovexattr,
	__NR_fremovexattr, __NR_setxattrat, __NR_removexattrat,
#ifdef __x86_64__
	__NR_chmod, __NR_chown, __NR_lchown, __NR_utime, __NR_utimes,
	__NR_futimesat,
#endif
};

/* Refused where signals are kept in by the filter. */
static const int signals[] = {
	__NR_tkill, __NR_tgkill, __NR_rt_sigqueueinfo, __NR_rt_tgsigqueueinfo,
	__NR_pidfd_send_signal,
};

static bool
in(const int *list, size_t n, uint32_t nr)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((uint32_t)list[i] == nr)
			return true;
	return false;
}

/* What the policy says of one call. */
static uint32_t
policy(int kind, const struct seccomp_data *d)
{
	int profile = kind & ~SECCOMP_SIGNALS;
	bool sig = (kind & SECCOMP_SIGNALS) != 0;
	bool read_only = profile == SECCOMP_READ_ONLY ||
	    profile == SECCOMP_READ_ONLY_NET;
	uint32_t a0 = (uint32_t)d->args[0], a1 = (uint32_t)d->args[1];

	if (d->arch != ARCH || d->nr >= 0x40000000)
		return DENY;
	if (d->nr == __NR_clone3)
		return ENOSYS_RET;
	if (d->nr == __NR_socket)
		return (profile == SECCOMP_WORKSPACE_NET ||
		    profile == SECCOMP_READ_ONLY_NET) &&
		    (a0 == AF_INET || a0 == AF_INET6) ? SECCOMP_RET_ALLOW : DENY;
	if (d->nr == __NR_kill)
		return !sig || a0 == 0 ? SECCOMP_RET_ALLOW : DENY;
	if (d->nr == __NR_clone)
		return (a0 & CLONE_REFUSED) != 0 ? DENY : SECCOMP_RET_ALLOW;
	if (d->nr == __NR_ioctl)
		return a1 == TIOCSTI || a1 == TIOCLINUX ||
		    (read_only && (a1 == FS_IOC_SETFLAGS ||
		    a1 == FS_IOC32_SETFLAGS || a1 == FS_IOC_FSSETXATTR)) ||
		    (sig && (a1 == FIOSETOWN || a1 == SIOCSPGRP)) ?
		    DENY : SECCOMP_RET_ALLOW;
	if (d->nr == __NR_fcntl)
		return sig && (a1 == F_SETOWN || a1 == F_SETOWN_EX) ? DENY :
		    SECCOMP_RET_ALLOW;
	if (in(self_only, nitems(self_only), (uint32_t)d->nr))
		return a0 == 0 ? SECCOMP_RET_ALLOW : DENY;
	/* PRIO_PROCESS or PRIO_PGRP, who 0: itself or its own group. */
	if (d->nr == __NR_setpriority)
		return a1 == 0 && (a0 == 0 || a0 == 1) ? SECCOMP_RET_ALLOW :
		    DENY;
	/* IOPRIO_WHO_PROCESS or IOPRIO_WHO_PGRP, who 0. */
	if (d->nr == __NR_ioprio_set)
		return a1 == 0 && (a0 == 1 || a0 == 2) ? SECCOMP_RET_ALLOW :
		    DENY;
	if (in(denied, nitems(denied), (uint32_t)d->nr) ||
	    (read_only && in(metadata, nitems(metadata), (uint32_t)d->nr)) ||
	    (sig && in(signals, nitems(signals), (uint32_t)d->nr)))
		return DENY;
	return SECCOMP_RET_ALLOW;
}

/*
 * The classic BPF the kernel accepts for seccomp, as far as these programs
 * use it: loads of the data's words, jumps on constants, returns. Counts
 * the instructions it passed.
 */
static uint32_t
run(const struct sock_fprog *p, const struct seccomp_data *d, int *steps)
{
	const uint32_t *words = (const uint32_t *)(const void *)d;
	uint32_t a = 0, pc = 0;

	*steps = 0;
	while (pc < p->len) {
		const struct sock_filter *f = &p->filter[pc++];
		bool jump;

		++*steps;
		switch (f->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			cr_assert(f->k % 4 == 0 && f->k < sizeof *d,
			    "a load at %u", f->k);
			a = words[f->k / 4];
			continue;
		case BPF_RET | BPF_K:
			return f->k;
		case BPF_JMP | BPF_JA:
			pc += f->k;
			continue;
		case BPF_JMP | BPF_JEQ | BPF_K:
			jump = a == f->k;
			break;
		case BPF_JMP | BPF_JGT | BPF_K:
			jump = a > f->k;
			break;
		case BPF_JMP | BPF_JGE | BPF_K:
			jump = a >= f->k;
			break;
		case BPF_JMP | BPF_JSET | BPF_K:
			jump = (a & f->k) != 0;
			break;
		default:
			cr_assert_fail("an instruction this test cannot run: "
			    "%#x", f->code);
		}
		pc += jump ? f->jt : f->jf;
	}
	cr_assert_fail("the program ran off its end");
	return 0;
}

/* Every call worth a difference: each number, with telling arguments. */
static void
check_kind(int kind)
{
	static const uint64_t args0[] = { 0, 1, 2, 3, 4242, AF_INET,
	    AF_INET6, AF_UNIX, AF_NETLINK, CLONE_NEWUSER, CLONE_NEWNS | SIGCHLD,
	    SIGCHLD, CLONE_VM | CLONE_VFORK | SIGCHLD, CLONE_PARENT | SIGCHLD,
	    0x80, (uint64_t)-1 };
	static const uint64_t args1[] = { 0, 1, 4242, TIOCSTI, TIOCLINUX,
	    TIOCGWINSZ, FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR,
	    FS_IOC_GETFLAGS, FIONREAD, FIOSETOWN, SIOCSPGRP, F_SETOWN,
	    F_SETOWN_EX, F_GETOWN };
	static const uint32_t arches[] = { ARCH, OTHER_ARCH };
	const struct sock_fprog *p = seccomp_program(kind);
	struct seccomp_data d;
	size_t a, i, j;
	uint32_t nr;
	int steps, most = 0;
	long total = 0;

	cr_assert_not_null(p);
	for (a = 0; a < nitems(arches); a++)
		for (nr = 0; nr < 1100; nr++)
			for (i = 0; i < nitems(args0); i++)
				for (j = 0; j < nitems(args1); j++) {
					uint32_t n = nr < 1000 ? nr :
					    0x40000000U + nr - 1000;

					memset(&d, 0, sizeof d);
					d.arch = arches[a];
					d.nr = (int)n;
					d.args[0] = args0[i];
					d.args[1] = args1[j];
					cr_assert_eq(run(p, &d, &steps),
					    policy(kind, &d), "kind %d, arch %#x, "
					    "nr %u, args %#llx %#llx", kind,
					    d.arch, n, (unsigned long long)
					    args0[i], (unsigned long long)
					    args1[j]);
					if (a == 0 && n < 1000 && i == 0 &&
					    j == 0) {
						total += steps;
						most = steps > most ? steps :
						    most;
					}
				}
	/*
	 * What an attach costs: the kernel runs the program once for every
	 * number. A search keeps each number's path short (checks made
	 * before it cost 15 on average).
	 */
	cr_log_info("kind %d: %u instructions, %.1f passed per number on "
	    "average, %d at most", kind, p->len, (double)total / 1000, most);
	cr_assert_leq(total, 12 * 1000, "kind %d: %.1f instructions passed "
	    "per number", kind, (double)total / 1000);
}

Test(seccomp, every_profile_refuses_what_the_policy_refuses)
{
	int kind;

	cr_assert(seccomp_init());
	for (kind = 0; kind < SECCOMP_NKINDS; kind++)
		if ((kind & ~SECCOMP_SIGNALS) < SECCOMP_NPROFILES)
			check_kind(kind);
}
#else
Test(seccomp, no_program_on_this_architecture)
{
	cr_assert(!seccomp_init());
}
#endif
