/*
 * no-landlock COMMAND [ARG...]: run COMMAND as on a kernel without Landlock.
 * A seccomp filter makes the three Landlock system calls fail with ENOSYS,
 * which is what such a kernel answers, for COMMAND and all it starts.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>

#define NO_LANDLOCK_DENY(nr) \
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS)

int
main(int argc, char **argv)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		NO_LANDLOCK_DENY(SYS_landlock_create_ruleset),
		NO_LANDLOCK_DENY(SYS_landlock_add_rule),
		NO_LANDLOCK_DENY(SYS_landlock_restrict_self),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof code / sizeof code[0], code };

	if (argc < 2) {
		fprintf(stderr, "usage: no-landlock COMMAND [ARG...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror("no-landlock: seccomp");
		return 1;
	}
	execvp(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
