/*
 * Resource limits that refuse a thread, a process or a mapping: the error
 * names the limit (RLIMIT_NPROC, RLIMIT_AS) and what failed, never a bare
 * "try again". Each case runs in a forked child under a limit set there
 * (setrlimit), so the machine is never exhausted: RLIMIT_NPROC 1 for an
 * unprivileged uid (root ignores that limit: the child becomes nobody
 * when it runs as root), RLIMIT_AS a few MiB above what the child maps.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "stepring.h"
#include "stepring/checkpoint.h"

#define NOBODY 65534

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SR_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SR_SANITIZED 1
#endif
#endif

/* Run @fn in a child; its exit status (0 ok, 77 skip, else the check
 * that failed); the child's message on stderr. */
static int in_child(int (*fn)(void), const char *name)
{
	int st;
	pid_t c;

	fflush(NULL);
	c = fork();
	assert_true(c >= 0);
	if (c == 0)
		_exit(fn()); /* _exit: no atexit handlers (nor a leak check) in the child */
	assert_int_equal(waitpid(c, &st, 0), c);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 77) {
		fprintf(stderr, "%s: skipped (see above)\n", name);
		return 77;
	}
	return WEXITSTATUS(st);
}

/* The message names @limit and @what, and does not send people to retry. */
static int says(const char *limit, const char *what)
{
	const char *m = sr_last_error();

	fprintf(stderr, "  message: %s\n", m);
	return strstr(m, limit) && strstr(m, what) && !strstr(m, "try again") &&
	       !strstr(m, "nothing ready");
}

static sr_pool *mk(uint32_t flags, uint32_t threads, int *err)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.flags = flags;
	o.env = "CartPole-v1";
	o.num_envs = 4;
	o.num_threads = threads;
	o.bind = SR_BIND_NONE;
	*err = sr_pool_create(&o, &p);
	return p;
}

/* Become an unprivileged user whose process count RLIMIT_NPROC 1 already
 * exceeds (this child), so that any new thread or process is refused. */
static int nproc_1(void)
{
	struct rlimit rl = {1, 1};

	if (geteuid() == 0 && (setgid(NOBODY) || setuid(NOBODY))) {
		fprintf(stderr, "cannot become uid %d\n", NOBODY);
		return 77;
	}
	if (setrlimit(RLIMIT_NPROC, &rl))
		return 2;
	return 0;
}

static int child_nproc_threads(void)
{
	int err, rc = nproc_1();

	if (rc)
		return rc;
	if (mk(0, 2, &err) || err != -EAGAIN)
		return 3;
	return says("RLIMIT_NPROC", "cannot start worker thread 1 of 2") ? 0 : 4;
}

static int child_nproc_ckpt_writer(void)
{
	char path[64];
	int err, rc;
	sr_pool *p = mk(0, 1, &err); /* the calling thread steps: no thread */
	const sr_batch *b;

	if (!p)
		return 2;
	if (sr_pool_reset(p, &b))
		return 3;
	rc = nproc_1();
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "/tmp/sr-test-limits-%d.ckpt", (int)getpid());
	err = sr_pool_checkpoint(p, path, NULL);
	unlink(path);
	if (err == -EACCES || err == -EPERM) {
		fprintf(stderr, "uid %d cannot write %s\n", NOBODY, path);
		return 77;
	}
	if (err != -EAGAIN)
		return 4;
	return says("RLIMIT_NPROC", "writer thread") ? 0 : 5;
}

static int child_nproc_spawn(void)
{
	int err, rc = nproc_1();

	if (rc)
		return rc;
	if (mk(SR_POOL_F_PROCS, 2, &err) || err != -EAGAIN)
		return 3;
	return says("RLIMIT_NPROC", "process workers: cannot start") ? 0 : 4;
}

static void nproc_threads(void **st)
{
	int rc = in_child(child_nproc_threads, "nproc_threads");

	(void)st;
	assert_true(rc == 0 || rc == 77);
}

static void nproc_ckpt_writer(void **st)
{
	int rc = in_child(child_nproc_ckpt_writer, "nproc_ckpt_writer");

	(void)st;
	assert_true(rc == 0 || rc == 77);
}

static void nproc_spawn(void **st)
{
	int rc = in_child(child_nproc_spawn, "nproc_spawn");

	(void)st;
	assert_true(rc == 0 || rc == 77);
}

/* RLIMIT_AS a little above what the child maps now. */
static int as_limit(uint64_t headroom)
{
	char line[256];
	unsigned long long vm = 0;
	struct rlimit rl;
	FILE *f = fopen("/proc/self/status", "r");

#ifdef SR_SANITIZED
	/* ASan and TSan reserve terabytes of shadow: no RLIMIT_AS there. */
	(void)headroom;
	(void)line;
	(void)rl;
	if (f)
		fclose(f);
	fprintf(stderr, "no RLIMIT_AS under a sanitizer\n");
	return 77;
#else
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "VmSize: %llu kB", &vm);
	if (f)
		fclose(f);
	if (!vm)
		return 2;
	rl.rlim_cur = rl.rlim_max = (rlim_t)(vm * 1024 + headroom);
	return setrlimit(RLIMIT_AS, &rl) ? 2 : 0;
#endif
}

static int child_as_threads(void)
{
	pthread_attr_t a;
	size_t stack = 0;
	int err, rc;
	sr_pool *p = mk(0, 1, &err); /* load what a pool loads (hwloc, the env) once */

	if (!p)
		return 2;
	sr_pool_destroy(p);
	/* Room for the pool but not for a thread's stack (8 MiB by default). */
	if (pthread_getattr_default_np(&a) || pthread_attr_getstacksize(&a, &stack))
		return 2;
	pthread_attr_destroy(&a);
	if (stack < (4u << 20)) {
		fprintf(stderr, "thread stacks of %zu bytes: too small to tell\n", stack);
		return 77;
	}
	rc = as_limit(stack / 2);
	if (rc)
		return rc;
	if (mk(0, 2, &err) || err != -ENOMEM) {
		fprintf(stderr, "  err %d: %s\n", err, sr_last_error());
		return 3;
	}
	return says("RLIMIT_AS", "cannot start worker thread 1 of 2: no address space") ? 0 : 4;
}

static int child_as_ring(void)
{
	sr_ring_opts o = {.obs_dim = 64, .act_size = 4, .capacity = 1u << 18}; /* ~70 MiB */
	sr_ring *r = NULL;
	int err, rc = as_limit(16u << 20);

	if (rc)
		return rc;
	err = sr_ring_create(&o, &r);
	if (r || err != -ENOMEM)
		return 3;
	return says("RLIMIT_AS", "cannot map") ? 0 : 4;
}

static void as_threads(void **st)
{
	int rc = in_child(child_as_threads, "as_threads");

	(void)st;
	assert_true(rc == 0 || rc == 77);
}

static void as_ring(void **st)
{
	int rc = in_child(child_as_ring, "as_ring");

	(void)st;
	assert_true(rc == 0 || rc == 77);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(nproc_threads),
		cmocka_unit_test(nproc_ckpt_writer),
		cmocka_unit_test(nproc_spawn),
		cmocka_unit_test(as_threads),
		cmocka_unit_test(as_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
