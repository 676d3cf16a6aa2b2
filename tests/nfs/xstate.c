/*
 * Preloaded into linux.uml (tests/nfs.rs): the User-Mode Linux 6.1 kernel
 * saves and restores its processes' extended register state with
 * ptrace(PTRACE_GETREGSET / PTRACE_SETREGSET, NT_X86_XSTATE) in a buffer
 * sized for the AVX-512 state, but a host kernel whose CPU has AMX takes a
 * PTRACE_SETREGSET of that state only at its full size (EFAULT otherwise),
 * so the guest's first process dies. Here each call is made with a buffer
 * of the host's size: a get hands UML its part, a set writes UML's part over
 * the process's current state. Nothing in the guest uses AMX (it has no
 * permission to), so the part UML does not know stays as it was. On a host
 * without AMX the two sizes are equal and this changes nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

#define NT_X86_XSTATE 0x202

static long (*real_ptrace)(int, pid_t, void *, void *);
static unsigned char full_state[1 << 16] __attribute__((aligned(64)));

long ptrace(enum __ptrace_request request, ...)
{
	va_list ap;
	va_start(ap, request);
	pid_t pid = va_arg(ap, pid_t);
	void *addr = va_arg(ap, void *);
	void *data = va_arg(ap, void *);
	va_end(ap);
	if (!real_ptrace)
		real_ptrace = (long (*)(int, pid_t, void *, void *))dlsym(RTLD_NEXT, "ptrace");
	if ((request != PTRACE_GETREGSET && request != PTRACE_SETREGSET) ||
	    (unsigned long)addr != NT_X86_XSTATE)
		return real_ptrace(request, pid, addr, data);
	struct iovec *part = data;
	struct iovec full = { full_state, sizeof full_state };
	long r = real_ptrace(PTRACE_GETREGSET, pid, addr, &full);
	if (r < 0)
		return r;
	size_t n = part->iov_len < full.iov_len ? part->iov_len : full.iov_len;
	if (request == PTRACE_GETREGSET) {
		memcpy(part->iov_base, full_state, n);
		part->iov_len = n;
		return 0;
	}
	memcpy(full_state, part->iov_base, n);
	return real_ptrace(PTRACE_SETREGSET, pid, addr, &full);
}
