/*
 * Resource limits in error messages. A thread, a process or a mapping the
 * system refuses gets EAGAIN or ENOMEM, whose usual words ("try again",
 * "out of memory") send people the wrong way when the cause is a limit of
 * their own: RLIMIT_NPROC (ulimit -u: processes and threads of the user),
 * RLIMIT_AS (ulimit -v: this process's address space, which every
 * thread's stack and every mapping takes from). These helpers say which
 * one it was, with its value and what the process holds.
 *
 * glibc's pthread_create returns EAGAIN both when the kernel refuses the
 * thread (RLIMIT_NPROC, kernel.threads-max) and when the mmap of its
 * stack fails (RLIMIT_AS): the address space is looked at first, since
 * it can be told from here (VmSize against the limit); the other is
 * -EAGAIN with the thread limits named.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "sr_base.h"

#define MIB (1024.0 * 1024.0)

/* A field of /proc/self/status ("VmSize:", "Threads:"), or 0. */
static uint64_t status_field(const char *key)
{
	char line[256];
	size_t k = strlen(key);
	uint64_t v = 0;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, k)) {
			v = strtoull(line + k, NULL, 10);
			break;
		}
	fclose(f);
	return v;
}

static uint64_t file_u64(const char *path)
{
	char buf[64];
	uint64_t v = 0;
	FILE *f = fopen(path, "re");

	if (f && fgets(buf, sizeof(buf), f))
		v = strtoull(buf, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* The limit as words: "unlimited" or the number. */
static const char *lim_str(char *buf, size_t n, rlim_t v, bool mib)
{
	if (v == RLIM_INFINITY)
		snprintf(buf, n, "unlimited");
	else if (mib)
		snprintf(buf, n, "%.0f MiB", (double)v / MIB);
	else
		snprintf(buf, n, "%" PRIu64, (uint64_t)v);
	return buf;
}

bool sr__as_note(char *buf, size_t n, uint64_t want)
{
	struct rlimit as;
	uint64_t vm;

	buf[0] = '\0';
	if (getrlimit(RLIMIT_AS, &as) || as.rlim_cur == RLIM_INFINITY)
		return false;
	vm = status_field("VmSize:") * 1024;
	if (vm + want <= (uint64_t)as.rlim_cur)
		return false;
	snprintf(buf, n,
		 "the address-space limit RLIMIT_AS (ulimit -v) is %.0f MiB, %.0f MiB of it are "
		 "mapped and %.1f MiB more were asked for",
		 (double)as.rlim_cur / MIB, (double)vm / MIB, (double)want / MIB);
	return true;
}

/* The size of a new thread's stack (glibc: RLIMIT_STACK as it was at
 * the program's start, unless changed). */
static uint64_t stack_size(void)
{
	pthread_attr_t a;
	size_t sz = 0;

	if (pthread_getattr_default_np(&a) == 0) {
		pthread_attr_getstacksize(&a, &sz);
		pthread_attr_destroy(&a);
	}
	return sz ? (uint64_t)sz : 2u << 20;
}

/* The thread limits, for an EAGAIN that is not the address space. */
static void nproc_note(char *buf, size_t n)
{
	struct rlimit np;
	char l[32] = "?";

	if (getrlimit(RLIMIT_NPROC, &np) == 0)
		lim_str(l, sizeof(l), np.rlim_cur, false);
	snprintf(buf, n,
		 "the limit on processes and threads is reached: RLIMIT_NPROC (ulimit -u) is %s "
		 "for uid %u, counted over all of that user's processes and threads (this "
		 "process has %" PRIu64 " threads); kernel.threads-max is %" PRIu64,
		 l, (unsigned)getuid(), status_field("Threads:"),
		 file_u64("/proc/sys/kernel/threads-max"));
}

int sr__thread_errorf(int err, const char *what)
{
	char note[400];

	if (err < 0)
		err = -err;
	if (err == EAGAIN && sr__as_note(note, sizeof(note), stack_size()))
		return sr__errorf(-ENOMEM, "%s: no address space for its stack: %s", what, note);
	if (err == EAGAIN) {
		nproc_note(note, sizeof(note));
		return sr__errorf(-EAGAIN, "%s: the system refused a new thread: %s", what, note);
	}
	return sr__errorf(-err, "%s: pthread_create: %s", what, strerror(err));
}

int sr__spawn_errorf(int err, const char *what)
{
	char note[400];

	if (err < 0)
		err = -err;
	if (err == EAGAIN) {
		nproc_note(note, sizeof(note));
		return sr__errorf(-EAGAIN, "%s: the system refused a new process: %s", what, note);
	}
	if (err == ENOMEM && sr__as_note(note, sizeof(note), 0))
		return sr__errorf(-ENOMEM, "%s: out of address space: %s", what, note);
	return sr__errorf(-err, "%s: %s", what, strerror(err));
}
