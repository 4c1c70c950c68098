"""The query processes' backstop against outbound connections: a seccomp filter no query text gets around.

pyoxigraph's evaluator fetches `SERVICE <url>` itself. `semreg.sparql.scan` refuses such queries, but
a reading of the text is only as good as its agreement with pyoxigraph's parser. So the query
processes also give up the means: after `apply()`, the kernel answers EACCES to `socket()` for any
family but AF_UNIX (no TCP, UDP, DNS lookup, raw or netlink socket can be made) and EPERM to
`io_uring_setup` (which could create sockets without the `socket` call). What the process already holds
keeps working: its AF_UNIX channel to the server, the connections handed to it, and `socketpair`.

The filter is a classic BPF program, installed with `prctl(PR_SET_SECCOMP)` after
`prctl(PR_SET_NO_NEW_PRIVS)`; it is inherited by every fork and cannot be removed. It knows x86-64
(where it also refuses the x32 system-call numbers) and AArch64; a call made through another
architecture's calling convention (i386's `int 0x80`) is refused outright. Elsewhere, or where the
kernel refuses the filter, `apply()` returns False and the caller logs that the backstop is missing.
"""
from __future__ import annotations

import ctypes
import errno
import platform
import socket
import struct

_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_X32_SYSCALL_BIT = 0x40000000
# Offsets in `struct seccomp_data`: nr, arch, then args[0] (its low 32 bits first: both are little-endian).
_NR, _ARCH, _ARG0 = 0, 4, 16


class _Arch:
    def __init__(self, audit_arch: int, socket_nr: int, io_uring_setup_nr: int, seccomp_nr: int) -> None:
        self.audit_arch = audit_arch
        self.socket_nr = socket_nr
        self.io_uring_setup_nr = io_uring_setup_nr
        self.seccomp_nr = seccomp_nr


ARCHES = {
    "x86_64": _Arch(0xC000003E, 41, 425, 317),
    "aarch64": _Arch(0xC00000B7, 198, 425, 277),
}
# seccomp(2) rather than prctl: with SECCOMP_FILTER_FLAG_SPEC_ALLOW the kernel does not also turn on its
# speculative-store-bypass mitigation for the process, which a filter set by prctl forces on x86 and which
# cost a query process a quarter of its throughput (the filter itself costs nanoseconds a call)
_SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW = 1, 4


def program(arch: _Arch) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jump if true, jump if false, k); jumps count the instructions skipped."""
    deny = _RET_ERRNO | errno.EACCES  # the last instruction
    return [
        (_LD_ABS_W, 0, 0, _ARCH),
        (_JEQ, 0, 9, arch.audit_arch),  # another calling convention: refuse every call it makes
        (_LD_ABS_W, 0, 0, _NR),
        (_JGE, 7, 0, _X32_SYSCALL_BIT),
        (_JEQ, 0, 1, arch.io_uring_setup_nr),
        (_RET, 0, 0, _RET_ERRNO | errno.EPERM),
        (_JEQ, 1, 0, arch.socket_nr),
        (_RET, 0, 0, _RET_ALLOW),
        (_LD_ABS_W, 0, 0, _ARG0),
        (_JEQ, 0, 1, socket.AF_UNIX),
        (_RET, 0, 0, _RET_ALLOW),
        (_RET, 0, 0, deny),
    ]


def apply() -> bool:
    """Forbid this process and its future forks to make any socket but AF_UNIX; False if it could not."""
    arch = ARCHES.get(platform.machine())
    if arch is None or platform.system() != "Linux":
        return False
    code = b"".join(struct.pack("=HBBI", *instruction) for instruction in program(arch))
    filters = ctypes.create_string_buffer(code, len(code))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = _Program(len(code) // 8, ctypes.addressof(filters))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        if libc.syscall(arch.seccomp_nr, _SECCOMP_SET_MODE_FILTER, _SECCOMP_FILTER_FLAG_SPEC_ALLOW,
                        ctypes.byref(prog)) == 0:
            return True
        # a kernel without the flag (before 4.17): the filter all the same, mitigation and all
        return bool(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0)
    except (OSError, AttributeError):
        return False
