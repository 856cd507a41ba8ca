/*
 * Shared memory against careless and hostile use: rings larger than the
 * machine or /dev/shm, file size limits, crash leftovers (a creator killed
 * while allocating, a pool that died with its statistics block), liveness
 * across PID namespaces, segments planted or truncated by another user,
 * names made of terminal escapes, a consumer that consumes too much.
 *
 * Nothing here exhausts the real machine: sizes above what the machine can
 * give are refused before a byte is allocated (and each such test runs in
 * a child under an RLIMIT_FSIZE safety net, so a broken check fails with
 * EFBIG instead of allocating); /dev/shm exhaustion happens in a 1 MiB
 * tmpfs mounted over /dev/shm in a private mount namespace of a child.
 * Tests that need root (mounts, a second user, PID namespaces) skip
 * without it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "ring_internal.h"
#include "stepring.h"
#include "stepring/stats.h"

#define CLI SR_BINARY_DIR "/stepring"

static char name_buf[128];

static const char *uname_(const char *tag)
{
	snprintf(name_buf, sizeof(name_buf), "sr-hostile-%d-%s", (int)getpid(), tag);
	return name_buf;
}

static bool seg_exists(const char *name)
{
	char p[256];

	snprintf(p, sizeof(p), "/dev/shm/%s", name[0] == '/' ? name + 1 : name);
	return access(p, F_OK) == 0;
}

/* Run @fn in a child; returns its exit status, or 128 + signal. */
static int in_child(int (*fn)(void *), void *arg)
{
	int st;
	pid_t c = fork();

	assert_true(c >= 0);
	if (c == 0)
		_exit(fn(arg));
	assert_int_equal(waitpid(c, &st, 0), c);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Run a shell command; stdout+stderr into @out; exit status. */
static int run(char *out, size_t len, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	size_t n = 0;
	FILE *f;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (n + 1 < len && fgets(out + n, (int)(len - n), f))
		n += strlen(out + n);
	out[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* --- sizes vs the machine ------------------------------------------------ */

static uint64_t mem_total(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);

	return (uint64_t)pages * (uint64_t)psz;
}

static int child_huge_ring(void *arg)
{
	struct rlimit rl = {64u << 20, 64u << 20};
	sr_ring_opts o = {.obs_dim = 4, .act_size = 4};
	sr_ring *r = NULL;
	int err;

	(void)arg;
	/* Safety net: if the memory check were missing, the segment's
	 * ftruncate would fail with EFBIG here instead of allocating. */
	signal(SIGXFSZ, SIG_IGN);
	if (setrlimit(RLIMIT_FSIZE, &rl))
		return 10;
	/* A power of two whose segment is at least twice the machine. */
	o.capacity = 1024;
	while (sr_ring_memsize(&o) && sr_ring_memsize(&o) < 2 * mem_total())
		o.capacity *= 2;
	if (!sr_ring_memsize(&o))
		return 11;
	err = sr_ring_create(&o, &r);
	if (err != -ENOMEM || r)
		return 12;
	/* The message names what was asked and what the machine can give. */
	if (!strstr(sr_last_error(), "bytes of shared memory needed") ||
	    !strstr(sr_last_error(), "can give"))
		return 13;
	o.flags = SR_RING_SHM;
	o.name = uname_("huge");
	err = sr_ring_create(&o, &r);
	if (err != -ENOMEM || seg_exists(o.name))
		return 14;
	return 0;
}

static void test_ring_larger_than_memory(void **st)
{
	(void)st;
	assert_int_equal(in_child(child_huge_ring, NULL), 0);
}

static int child_fsize(void *arg)
{
	struct rlimit rl = {1u << 20, 1u << 20};
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 64, .act_size = 4,
			  .capacity = 4096};
	sr_ring *r = NULL;
	int err;

	(void)arg;
	/* SIGXFSZ keeps its default action: a missing check kills us. */
	if (setrlimit(RLIMIT_FSIZE, &rl))
		return 10;
	o.name = uname_("fsize");
	err = sr_ring_create(&o, &r);
	if (err != -EFBIG || r)
		return 11;
	if (!strstr(sr_last_error(), "file size limit"))
		return 12;
	if (seg_exists(o.name))
		return 13;
	o.flags = 0;
	if (sr_ring_create(&o, &r) != -EFBIG)
		return 14;
	return 0;
}

static void test_fsize_limit_ring(void **st)
{
	(void)st;
	assert_int_equal(in_child(child_fsize, NULL), 0);
}

/* Mount a 1 MiB tmpfs over /dev/shm in a private mount namespace. 0, or
 * 77 when this process may not. */
static int small_shm(void)
{
	if (unshare(CLONE_NEWNS))
		return 77;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
		return 77;
	if (mount("sr-test", "/dev/shm", "tmpfs", 0, "size=1m,mode=1777"))
		return 77;
	return 0;
}

static int child_small_shm(void *arg)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4,
			  .capacity = 1u << 16};
	sr_pool_opts po;
	sr_pool *p = NULL;
	struct statvfs v0, v1;
	sr_ring *r = NULL;
	char path[256];
	int err, fd;

	(void)arg;
	if ((err = small_shm()))
		return err;
	/* A ring larger than the tmpfs: refused before allocating, the
	 * message names both sizes and the directory. */
	o.name = uname_("big");
	err = sr_ring_create(&o, &r);
	if (err != -ENOSPC || !strstr(sr_last_error(), "/dev/shm has"))
		return 20;
	if (seg_exists(o.name))
		return 21;
	/* A pool whose ring fits but whose statistics block does not: a
	 * clean error and no segment left, never SIGBUS. Measure what the
	 * pool takes, then leave only its ring's worth free. */
	sr_pool_opts_init(&po);
	po.flags |= SR_POOL_F_RING_NAME;
	po.env = "CartPole-v1";
	po.num_envs = 4;
	po.num_threads = 1;
	po.ring_capacity = 256;
	po.ring_name = uname_("pool");
	if (statvfs("/dev/shm", &v0) || sr_pool_create(&po, &p))
		return 22;
	statvfs("/dev/shm", &v1);
	sr_pool_destroy(p);
	p = NULL;
	{
		uint64_t used = (v0.f_bfree - v1.f_bfree) * v0.f_frsize;
		uint64_t stats_b = (sizeof(sr_stats_shm) + 4095) & ~4095ull;
		uint64_t fill = v0.f_bfree * v0.f_frsize - (used - stats_b);

		snprintf(path, sizeof(path), "/dev/shm/filler");
		fd = open(path, O_CREAT | O_RDWR, 0600);
		if (fd < 0 || posix_fallocate(fd, 0, (off_t)fill))
			return 23;
		close(fd);
	}
	err = sr_pool_create(&po, &p);
	if (err != -ENOSPC || p)
		return 24;
	if (seg_exists(po.ring_name))
		return 25;
	snprintf(path, sizeof(path), "%s.stats", po.ring_name);
	if (seg_exists(path))
		return 26;
	return 0;
}

static void test_small_dev_shm(void **st)
{
	int rc;

	(void)st;
	rc = in_child(child_small_shm, NULL);
	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
}

/* --- crash leftovers and liveness ---------------------------------------- */

static int child_pool_dies(void *arg)
{
	sr_pool_opts po;
	sr_pool *p;

	sr_pool_opts_init(&po);
	po.flags |= SR_POOL_F_RING_NAME;
	po.env = "CartPole-v1";
	po.num_envs = 4;
	po.num_threads = 1;
	po.ring_name = arg;
	if (sr_pool_create(&po, &p))
		return 1;
	_exit(0); /* a crash: nothing is destroyed */
}

static void test_dead_pool_leftovers(void **st)
{
	char name[128], stats[160], out[8192];
	sr_pool_opts po;
	sr_pool *p = NULL;
	int rc;

	(void)st;
	snprintf(name, sizeof(name), "%s", uname_("dead"));
	snprintf(stats, sizeof(stats), "%s.stats", name);
	assert_int_equal(in_child(child_pool_dies, name), 0);
	assert_true(seg_exists(name));
	assert_true(seg_exists(stats));
	/* ls: dead, not alive (nobody holds the lock). */
	rc = run(out, sizeof(out), CLI " ring ls 2>&1 | grep -F -- '%s '", name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, name));
	assert_non_null(strstr(out, "dead (stale"));
	/* rm --stale removes the ring and its statistics block together. */
	rc = run(out, sizeof(out), CLI " ring rm --stale %s 2>&1", name);
	assert_int_equal(rc, 0);
	assert_false(seg_exists(name));
	assert_false(seg_exists(stats));
	/* A new pool of that name starts. */
	sr_pool_opts_init(&po);
	po.flags |= SR_POOL_F_RING_NAME;
	po.env = "CartPole-v1";
	po.num_envs = 4;
	po.num_threads = 1;
	po.ring_name = name;
	assert_int_equal(sr_pool_create(&po, &p), 0);
	sr_pool_destroy(p);
	/* A dead pool whose ring alone was removed: its statistics block is
	 * replaced by the next pool of that name, not an error. */
	assert_int_equal(in_child(child_pool_dies, name), 0);
	assert_int_equal(sr_ring_unlink(name), 0);
	assert_true(seg_exists(stats));
	assert_int_equal(sr_pool_create(&po, &p), 0);
	/* ... but the block of a live pool is never taken over. */
	{
		sr_pool *q = NULL;
		char other[128];

		assert_int_equal(sr_ring_unlink(name), 0); /* ring name free again */
		snprintf(other, sizeof(other), "%s", name);
		po.ring_name = other;
		assert_int_equal(sr_pool_create(&po, &q), -EEXIST);
		assert_null(q);
	}
	sr_pool_destroy(p);
	assert_false(seg_exists(stats));
}

static int child_alloc_and_die(void *arg)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 256, .act_size = 4,
			  .capacity = 1u << 16};
	sr_ring *r;

	o.name = arg;
	if (sr_ring_create(&o, &r))
		return 1;
	pause(); /* killed by the parent */
	return 0;
}

/* A creator killed at any moment of its allocation leaves either nothing
 * or a complete ring, never a half-made segment that ls hides. */
static void test_killed_while_allocating(void **st)
{
	char name[128], out[8192];

	(void)st;
	snprintf(name, sizeof(name), "%s", uname_("killed"));
	for (int i = 0; i < 8; i++) {
		struct timespec ts = {0, (long)i * 2500000}; /* 0 .. 17.5 ms */
		pid_t c = fork();
		sr_ring *r = NULL;
		int err;

		assert_true(c >= 0);
		if (c == 0)
			_exit(child_alloc_and_die(name));
		nanosleep(&ts, NULL);
		kill(c, SIGKILL);
		waitpid(c, NULL, 0);
		if (!seg_exists(name))
			continue;
		err = sr_ring_attach(name, 0, &r);
		assert_int_equal(err, 0);
		sr_ring_destroy(r);
		assert_int_equal(run(out, sizeof(out), CLI " ring rm --stale %s 2>&1", name), 0);
		assert_false(seg_exists(name));
	}
}

/* A ring header that never became ready: retry only while its creator
 * holds the lock; a dead creator's or a corrupt one is -EBADMSG. */
static void test_incomplete_header(void **st)
{
	struct sr__ring_hdr h;
	char path[256], out[8192];
	sr_ring *r = NULL;
	int fd, lk;

	(void)st;
	memset(&h, 0, sizeof(h));
	h.magic = SR_RING_MAGIC;
	h.version = SR_RING_FORMAT_VERSION;
	snprintf(path, sizeof(path), "/dev/shm/%s", uname_("half"));
	fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	assert_int_equal(sr_ring_attach(uname_("half"), 0, &r), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "creator died"));
	lk = open(path, O_RDONLY);
	assert_int_equal(flock(lk, LOCK_EX), 0);
	assert_int_equal(sr_ring_attach(uname_("half"), 0, &r), -EAGAIN);
	/* ls shows it as being created; rm --stale keeps it. */
	assert_int_equal(run(out, sizeof(out), CLI " ring rm --stale %s 2>&1", uname_("half")), 0);
	assert_true(seg_exists(uname_("half")));
	close(lk);
	h.ready = 7;
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	assert_int_equal(sr_ring_attach(uname_("half"), 0, &r), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "corrupt header"));
	h.ready = 0;
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	assert_int_equal(run(out, sizeof(out), CLI " ring ls 2>&1 | grep -F -- %s", uname_("half")),
			 0);
	assert_non_null(strstr(out, "incomplete, creator gone"));
	assert_int_equal(run(out, sizeof(out), CLI " ring rm --stale %s 2>&1", uname_("half")), 0);
	assert_false(seg_exists(uname_("half")));
}

/* A live ring seen from another PID namespace is alive (the old pid check
 * said dead there, and rm --stale deleted it). */
static void test_liveness_across_pid_ns(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4, .capacity = 64};
	char out[8192];
	sr_ring *r;
	int rc;

	(void)st;
	rc = run(out, sizeof(out), "unshare --pid --fork true 2>&1");
	if (rc != 0)
		skip();
	o.name = uname_("pidns");
	assert_int_equal(sr_ring_create(&o, &r), 0);
	rc = run(out, sizeof(out), "unshare --pid --fork " CLI " ring ls 2>&1 | grep -F -- %s",
		 o.name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, o.name));
	assert_non_null(strstr(out, " alive"));
	assert_null(strstr(out, "dead (stale"));
	rc = run(out, sizeof(out), "unshare --pid --fork " CLI " ring rm --stale %s 2>&1", o.name);
	assert_int_equal(rc, 0);
	assert_true(seg_exists(o.name));
	sr_ring_destroy(r);
	assert_false(seg_exists(o.name));
}

/* --- another user's segments --------------------------------------------- */

#define NOBODY 65534

static int child_plant(void *arg)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4, .capacity = 64};
	sr_stats_shm blk;
	const char *base = arg;
	char stats[200];
	sr_ring *r;
	int fd;

	if (setgid(NOBODY) || setuid(NOBODY))
		return 77;
	/* A ring (left behind) and a plausible statistics block of a
	 * "running" pool, readable by all. */
	o.name = base;
	if (sr_ring_create(&o, &r))
		return 1;
	r->owner = false;
	sr_ring_destroy(r);
	snprintf(stats, sizeof(stats), "/%s.stats", base);
	fd = shm_open(stats, O_CREAT | O_EXCL | O_RDWR, 0644);
	if (fd < 0)
		return 2;
	memset(&blk, 0, sizeof(blk));
	blk.magic = SR_STATS_MAGIC;
	blk.version = SR_STATS_VERSION;
	blk.state = SR_STATS_STATE_RUNNING;
	blk.pid = 1;
	if (pwrite(fd, &blk, sizeof(blk), 0) != (ssize_t)sizeof(blk))
		return 3;
	/* Keep the planted block "alive" for the duration of the test. */
	flock(fd, LOCK_EX);
	pause();
	return 0;
}

static void test_other_users_segments(void **st)
{
	char name[128], stats[160], out[8192];
	sr_ring *r = NULL;
	pid_t c;
	int rc;

	(void)st;
	if (geteuid() != 0)
		skip();
	snprintf(name, sizeof(name), "%s", uname_("planted"));
	snprintf(stats, sizeof(stats), "%s.stats", name);
	c = fork();
	assert_true(c >= 0);
	if (c == 0)
		_exit(child_plant(name));
	for (int i = 0; i < 200 && !seg_exists(stats); i++)
		usleep(10000);
	if (!seg_exists(stats)) {
		int s;

		kill(c, SIGKILL);
		waitpid(c, &s, 0);
		if (WIFEXITED(s) && WEXITSTATUS(s) == 77)
			skip();
		fail_msg("the second user could not plant its segments");
	}
	usleep(50000);
	/* root does not map a segment of another user. */
	assert_int_equal(sr_ring_attach(name, 0, &r), -EPERM);
	assert_non_null(strstr(sr_last_error(), "uid 65534"));
	/* top without NAME does not pick the planted block; with it, refuses. */
	rc = run(out, sizeof(out), CLI " top --once 2>&1");
	assert_null(strstr(out, name));
	rc = run(out, sizeof(out), CLI " top %s --once 2>&1", name);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(out, "another user"));
	/* Truncated by its owner under a reader: nothing of ours maps it. */
	{
		char path[256];

		snprintf(path, sizeof(path), "/dev/shm/%s", stats);
		assert_int_equal(truncate(path, 16), 0);
		rc = run(out, sizeof(out), CLI " ring ls --all 2>&1");
		assert_int_equal(rc, 0);
	}
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	sr_ring_unlink(name);
	sr_ring_unlink(stats);
}

static int child_ls_as_nobody(void *arg)
{
	char out[8192];
	int rc;

	if (setgid(NOBODY) || setuid(NOBODY))
		return 77;
	/* LeakSanitizer cannot trace a process whose uid changed. */
	setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
	rc = run(out, sizeof(out), CLI " ring ls 2>&1");
	if (rc != 0 || !strstr(out, "permission denied"))
		return 1;
	rc = run(out, sizeof(out), CLI " ring rm %s 2>&1", (const char *)arg);
	if (rc == 0 || !strstr(out, "permission denied") || strstr(out, "no segment named"))
		return 2;
	return 0;
}

static void test_permission_denied_is_said(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4, .capacity = 64};
	sr_ring *r;
	int rc;

	(void)st;
	if (geteuid() != 0)
		skip();
	o.name = uname_("rootonly");
	assert_int_equal(sr_ring_create(&o, &r), 0);
	rc = in_child(child_ls_as_nobody, (void *)o.name);
	sr_ring_destroy(r);
	if (rc == 77)
		skip();
	assert_int_equal(rc, 0);
}

static void test_escaped_names(void **st)
{
	char name[160], out[8192];
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4, .capacity = 64};
	sr_ring *r;

	(void)st;
	snprintf(name, sizeof(name), "sr-hostile-%d-\x1b[31mred\x07", (int)getpid());
	o.name = name;
	assert_int_equal(sr_ring_create(&o, &r), 0);
	assert_int_equal(run(out, sizeof(out), CLI " ring ls 2>&1"), 0);
	assert_null(strchr(out, '\x1b'));
	assert_null(strchr(out, '\x07'));
	assert_non_null(strstr(out, "\\x1b[31mred\\x07"));
	assert_int_equal(run(out, sizeof(out), CLI " ring ls --json 2>&1"), 0);
	assert_null(strchr(out, '\x1b'));
	sr_ring_destroy(r);
}

/* --- the consumer -------------------------------------------------------- */

static void test_consume_past_published(void **st)
{
	sr_ring_opts o = {.obs_dim = 1, .act_size = 1, .capacity = 16};
	uint64_t q, first;
	sr_ring *r;

	(void)st;
	assert_int_equal(sr_ring_create(&o, &r), 0);
	assert_int_equal(sr_ring_reserve(r, 4, 0, &q), 0);
	sr_ring_publish(r, q, 3); /* the fourth stays unpublished */
	assert_int_equal(sr_ring_consume(r, 5), -EINVAL); /* past head */
	assert_int_equal(sr_ring_consume(r, 4), -EINVAL); /* past published */
	assert_int_equal(sr_ring_consume(r, 1u << 20), -EINVAL);
	assert_int_equal(sr_ring_cursor(r), 0);
	assert_int_equal(sr_ring_peek(r, 100, &first), 3);
	assert_int_equal(sr_ring_consume(r, 3), 0);
	sr_ring_publish(r, q + 3, 1);
	assert_int_equal(sr_ring_peek(r, 100, &first), 1);
	assert_int_equal(sr_ring_consume(r, 1), 0);
	/* The ring still runs: a full lap after the refused calls. */
	for (int i = 0; i < 40; i++) {
		assert_int_equal(sr_ring_reserve(r, 1, 0, &q), 0);
		sr_ring_publish(r, q, 1);
		assert_int_equal(sr_ring_consume(r, sr_ring_peek(r, 100, &first)), 0);
	}
	assert_int_equal(sr_ring_cursor(r), 44);
	/* try_reserve's -EAGAIN says why (not an older, unrelated message). */
	for (int i = 0; i < 16; i++)
		assert_int_equal(sr_ring_reserve(r, 1, 0, &q), 0);
	sr__errorf(-EIO, "an older error");
	assert_int_equal(sr_ring_try_reserve(r, 1, 0, &q), -EAGAIN);
	assert_non_null(strstr(sr_last_error(), "no room"));
	sr_ring_destroy(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ring_larger_than_memory),
		cmocka_unit_test(test_fsize_limit_ring),
		cmocka_unit_test(test_small_dev_shm),
		cmocka_unit_test(test_dead_pool_leftovers),
		cmocka_unit_test(test_killed_while_allocating),
		cmocka_unit_test(test_incomplete_header),
		cmocka_unit_test(test_liveness_across_pid_ns),
		cmocka_unit_test(test_other_users_segments),
		cmocka_unit_test(test_permission_denied_is_said),
		cmocka_unit_test(test_escaped_names),
		cmocka_unit_test(test_consume_past_published),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
