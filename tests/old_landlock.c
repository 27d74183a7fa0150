/*
 * old-landlock ABI COMMAND [ARG...]: run COMMAND as on a kernel whose
 * Landlock is of that (older) ABI. A seccomp filter hands COMMAND's first
 * Landlock version query to a listener process that answers ABI, or the
 * kernel's own answer where that is older still or there is no Landlock
 * (no shim can add what the kernel lacks); every other Landlock call goes
 * to the real kernel, which enforces whatever the daemon asks of it. The
 * daemon asks once, at start, so the listener answers once and exits.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>

int
main(int argc, char **argv)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_landlock_create_ruleset,
		    0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
		    LANDLOCK_CREATE_RULESET_VERSION, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { sizeof code / sizeof code[0], code };
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int fd, abi, err;
	long real;

	if (argc < 3 || (abi = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: old-landlock ABI COMMAND [ARG...]\n");
		return 2;
	}
	real = syscall(SYS_landlock_create_ruleset, NULL, 0,
	    LANDLOCK_CREATE_RULESET_VERSION);
	err = errno;
	if (real >= 0 && real < abi)
		abi = (int)real;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    (fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
	    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog)) == -1) {
		perror("old-landlock: seccomp");
		return 1;
	}
	switch (fork()) {
	case -1:
		perror("old-landlock: fork");
		return 1;
	case 0:
		memset(&req, 0, sizeof req);
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) != 0)
			_exit(1);
		memset(&resp, 0, sizeof resp);
		resp.id = req.id;
		/* No Landlock at all: the kernel's own answer. */
		if (real < 0)
			resp.error = -err;
		else
			resp.val = abi;
		_exit(ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0);
	}
	close(fd);
	execvp(argv[2], argv + 2);
	perror(argv[2]);
	return 127;
}
