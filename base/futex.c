/*
 * The futex wrapper of the whole library (sr_base.h): the thread workers
 * and the pool thread sleep on process-private words, process workers and
 * their trainer on words of a shared command block.
 */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sr_base.h"

int sr__futex_wait(_Atomic uint32_t *addr, uint32_t val, uint32_t timeout_ms, bool shared)
{
	struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};

	if (syscall(SYS_futex, (uint32_t *)addr, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, val,
		    timeout_ms ? &ts : NULL, NULL, 0) == 0)
		return 0;
	return errno == EAGAIN ? 0 : -errno;
}

void sr__futex_wake(_Atomic uint32_t *addr, int n, bool shared)
{
	syscall(SYS_futex, (uint32_t *)addr, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, n, NULL,
		NULL, 0);
}
