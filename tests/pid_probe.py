#!/usr/bin/env python3
"""Act on another process by one system call, from inside a tool.

    pid_probe.py CALL PID

Exits 0 when the call succeeded, 10 when it was refused (with the error on
stderr), 11 when this kernel lacks the call (a broken probe exits 1, as
Python does, which the test takes for neither). Each call leaves PID as it was:
it sets what it reads (its limit, nice value, CPUs, scheduling, I/O
priority) or moves nothing, so the unconfined run that shows the probe works
changes nothing either. tests/test_e2e_escape.c runs it.
"""
import ctypes
import errno
import os
import resource
import struct
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

# x86_64 and aarch64 system call numbers.
NR = {
    "x86_64": {"sched_setattr": 314, "ioprio_set": 251, "ioprio_get": 252,
               "migrate_pages": 256, "move_pages": 279,
               "pidfd_open": 434, "process_madvise": 440},
    "aarch64": {"sched_setattr": 274, "ioprio_set": 30, "ioprio_get": 31,
                "migrate_pages": 238, "move_pages": 239,
                "pidfd_open": 434, "process_madvise": 440},
}[os.uname().machine]


def syscall(name, *args):
    ret = libc.syscall(ctypes.c_long(NR[name]),
                       *[ctypes.c_long(a) if isinstance(a, int) else a
                         for a in args])
    if ret == -1:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return ret


def prlimit(pid):
    now = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, now)


def setpriority(pid):
    os.setpriority(os.PRIO_PROCESS, pid,
                   os.getpriority(os.PRIO_PROCESS, pid))


def sched_setaffinity(pid):
    os.sched_setaffinity(pid, os.sched_getaffinity(pid))


def sched_setscheduler(pid):
    os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))


def sched_setparam(pid):
    os.sched_setparam(pid, os.sched_param(0))


def sched_setattr(pid):
    nice = os.getpriority(os.PRIO_PROCESS, pid)
    attr = ctypes.create_string_buffer(
        struct.pack("=IIQiIQQQ", 48, os.SCHED_OTHER, 0, nice, 0, 0, 0, 0))
    syscall("sched_setattr", pid, attr, 0)


def ioprio_set(pid):
    who_process = 1
    prio = syscall("ioprio_get", who_process, pid)
    syscall("ioprio_set", who_process, pid, prio)


def migrate_pages(pid):
    # From node 0 to node 0: nothing moves.
    mask = ctypes.c_ulong(1)
    syscall("migrate_pages", pid, 64, ctypes.byref(mask), ctypes.byref(mask))


def move_pages(pid):
    syscall("move_pages", pid, 0, 0, 0, 0, 0)


def process_madvise(pid):
    fd = syscall("pidfd_open", pid, 0)
    try:
        # No range at all: only the permission is tried.
        syscall("process_madvise", fd, 0, 0, 20, 0)  # MADV_COLD
    finally:
        os.close(fd)


def fsetown(pid):
    # SIGIO of this pipe would go to pid; nothing here sends it.
    import fcntl
    r, w = os.pipe()
    try:
        fcntl.fcntl(r, fcntl.F_SETOWN, pid)
    finally:
        os.close(r)
        os.close(w)


def main():
    call, pid = sys.argv[1], int(sys.argv[2])
    try:
        globals()[call](pid)
    except OSError as e:
        print(f"{call}: {e.strerror}", file=sys.stderr)
        sys.exit(11 if e.errno == errno.ENOSYS else 10)
    print(f"{call}: done")


main()
