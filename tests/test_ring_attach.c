/* Cross-process attach: a forked child attaches by name, reads and samples
 * what the parent writes (read-only, and a write faults), produces into the
 * ring read-write; bad attaches (another format version, wrong size, not a
 * ring, missing name) get clear errors; a crashed owner's segment can be
 * attached and removed; a segment larger than /dev/shm fails at create. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/replay.h"

#define D 4
#define E 3

static char name[64];

static void mkname(const char *what)
{
	snprintf(name, sizeof(name), "sr-test-%s-%d", what, (int)getpid());
	sr_ring_unlink(name); /* leftovers of an earlier crashed run */
}

static float val(uint64_t q, uint32_t k)
{
	return (float)((q * 7 + k) % 100003);
}

/* Slot q belongs to env q % E; prev = q - E. */
static void put(sr_ring *r, uint64_t q)
{
	uint64_t s = q & (sr_ring_capacity(r) - 1);
	uint32_t a = (uint32_t)q;

	for (uint32_t k = 0; k < D; k++)
		sr_ring_obs_col(r)[s * D + k] = val(q, k);
	memcpy(sr_ring_action_col(r) + s * 4, &a, 4);
	sr_ring_reward_col(r)[s] = (float)(q % 977);
	sr_ring_terminated_col(r)[s] = 0;
	sr_ring_truncated_col(r)[s] = 0;
	sr_ring_flags_col(r)[s] = q < E ? SR_SLOT_FIRST : 0;
	sr_ring_env_id_col(r)[s] = (uint32_t)(q % E);
	sr_ring_prev_col(r)[s] = q < E ? SR_RING_NO_PREV : q - E;
}

static void produce(sr_ring *r, uint64_t n)
{
	uint64_t q, first;

	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(sr_ring_reserve(r, 1, 0, &q), 0);
		put(r, q);
		sr_ring_publish(r, q, 1);
		sr_ring_consume(r, sr_ring_peek(r, UINT32_MAX, &first));
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Child: sample the parent's ring for @ms while the parent writes; exit
 * code says what failed (0 ok). */
static int child_sample(unsigned ms)
{
	sr_ring *r;
	sr_replay *rp;
	float obs[16 * D], nobs[16 * D];
	uint32_t act[16], env[16];
	uint64_t seq[16], rows = 0, t0 = now_ms();
	sr_replay_batch b = {.obs = obs, .next_obs = nobs, .action = act, .env_id = env,
			     .seq = seq};

	if (sr_ring_attach(name, 0, &r))
		return 10;
	sr_ring_info info = {.size = sizeof(info)};

	if (sr_ring_info_get(r, &info) || !(info.flags & SR_RING_INFO_READ_ONLY) ||
	    sr_ring_obs_dim(r) != D || sr_ring_capacity(r) != 256)
		return 11;
	if (sr_replay_create(r, NULL, &rp))
		return 12;
	while (now_ms() - t0 < ms) {
		int n = sr_replay_sample(rp, 16, &b);

		if (n == -EAGAIN)
			continue;
		if (n != 16)
			return 13;
		for (int j = 0; j < n; j++) {
			if (act[j] != (uint32_t)seq[j] || env[j] != seq[j] % E)
				return 14;
			for (uint32_t k = 0; k < D; k++)
				if (nobs[j * D + k] != val(seq[j], k) ||
				    obs[j * D + k] != val(seq[j] - E, k))
					return 15;
		}
		rows += (uint64_t)n;
	}
	sr_replay_destroy(rp);
	sr_ring_destroy(r);
	return rows > 0 ? 0 : 16;
}

static int wait_child(pid_t pid)
{
	int status;

	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (WIFSIGNALED(status))
		return 1000 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static void test_fork_sample(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = D, .act_size = 4, .capacity = 256};
	sr_ring *r;
	pid_t pid;
	uint64_t t0;

	(void)st;
	mkname("fork");
	o.name = name;
	assert_int_equal(sr_ring_create(&o, &r), 0);
	produce(r, 1000);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(child_sample(300));
	/* Keep lapping the ring while the child samples it. */
	t0 = now_ms();
	while (now_ms() - t0 < 400)
		produce(r, 64);
	assert_int_equal(wait_child(pid), 0);
	sr_ring_destroy(r);
}

static void test_fork_readonly_and_rdwr(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = D, .act_size = 4, .capacity = 64};
	sr_ring *r;
	pid_t pid;
	uint64_t first;
	uint32_t n;

	(void)st;
	mkname("rw");
	o.name = name;
	assert_int_equal(sr_ring_create(&o, &r), 0);
	produce(r, 10);
	/* A read-only attach cannot write: the store faults. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sr_ring *a;
		uint64_t q;

		if (sr_ring_attach(name, 0, &a))
			_exit(10);
		if (sr_ring_reserve(a, 1, 0, &q) != -EPERM)
			_exit(11);
		signal(SIGSEGV, SIG_DFL);
		((volatile float *)sr_ring_obs_col(a))[0] = 1.0f;
		_exit(12); /* not reached */
	}
	assert_int_equal(wait_child(pid), 1000 + SIGSEGV);
	/* A read-write attach produces; the parent consumes. */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sr_ring *a;
		uint64_t q;

		if (sr_ring_attach(name, SR_RING_RDWR, &a))
			_exit(20);
		for (int i = 0; i < 40; i++) {
			if (sr_ring_reserve(a, 1, 0, &q))
				_exit(21);
			put(a, q);
			sr_ring_publish(a, q, 1);
		}
		sr_ring_destroy(a); /* not the owner: does not unlink */
		_exit(0);
	}
	assert_int_equal(wait_child(pid), 0);
	n = sr_ring_peek(r, 100, &first);
	assert_int_equal(first, 10);
	assert_int_equal(n, 40);
	for (uint64_t q = first; q < first + n; q++)
		assert_true(sr_ring_obs_col(r)[(q & 63) * D + 2] == val(q, 2));
	sr_ring_consume(r, n);
	sr_ring *again;
	assert_int_equal(sr_ring_attach(name, 0, &again), 0);
	sr_ring_destroy(again);
	sr_ring_destroy(r);
}

/* Patch the header of a named ring through a raw mapping. */
static void *raw_map(size_t *len)
{
	struct stat sb;
	char n[80];
	int fd;
	void *p;

	snprintf(n, sizeof(n), "/%s", name);
	fd = shm_open(n, O_RDWR, 0);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	*len = (size_t)sb.st_size;
	p = mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(p != MAP_FAILED);
	close(fd);
	return p;
}

static void test_bad_attach(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = D, .act_size = 4, .capacity = 64};
	sr_ring *r, *a = NULL;
	size_t len;
	uint64_t *hdr;
	char n[80];
	int fd;

	(void)st;
	mkname("bad");
	o.name = name;
	/* Missing. */
	assert_int_equal(sr_ring_attach(name, 0, &a), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "no segment"));
	assert_null(a);
	assert_int_equal(sr_ring_create(&o, &r), 0);
	hdr = raw_map(&len);
	/* Another format version: -EPROTO naming both versions. */
	uint32_t *ver = (uint32_t *)(hdr + 1);
	assert_int_equal(*ver, SR_RING_FORMAT_VERSION);
	*ver = 99;
	assert_int_equal(sr_ring_attach(name, 0, &a), -EPROTO);
	print_message("%s\n", sr_last_error());
	assert_non_null(strstr(sr_last_error(), "version 99"));
	{
		char want[32];

		snprintf(want, sizeof(want), "reads version %u", SR_RING_FORMAT_VERSION);
		assert_non_null(strstr(sr_last_error(), want));
	}
	*ver = SR_RING_FORMAT_VERSION;
	/* Not a ring. */
	hdr[0] ^= 1;
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "not a stepring ring"));
	hdr[0] ^= 1;
	/* A geometry that does not fit the segment: capacity patched. */
	uint64_t *capw = hdr + 2;
	*capw = 4096;
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "needs"));
	*capw = 3; /* not a power of two */
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	*capw = 64;
	assert_int_equal(sr_ring_attach(name, 0, &a), 0);
	sr_ring_destroy(a);
	munmap(hdr, len);
	/* Wrong size: the segment grew under the header. */
	snprintf(n, sizeof(n), "/%s", name);
	fd = shm_open(n, O_RDWR, 0);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)len + 4096), 0);
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "the segment has"));
	/* Too small for a header. */
	assert_int_equal(ftruncate(fd, 100), 0);
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	close(fd);
	sr_ring_destroy(r); /* unlinks */
	/* A file that is not a ring at all. */
	fd = shm_open(n, O_RDWR | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 65536), 0);
	close(fd);
	assert_int_equal(sr_ring_attach(name, 0, &a), -EBADMSG);
	assert_int_equal(sr_ring_unlink(name), 0);
	assert_int_equal(sr_ring_attach(name, 0, &a), -ENOENT);
}

static void test_crashed_owner(void **st)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = D, .act_size = 4, .capacity = 32};
	sr_ring *a;
	pid_t pid;

	(void)st;
	mkname("crash");
	o.name = name;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		sr_ring *r;

		if (sr_ring_create(&o, &r))
			_exit(1);
		produce(r, 5);
		_exit(0); /* no destroy: the segment stays */
	}
	assert_int_equal(wait_child(pid), 0);
	assert_int_equal(sr_ring_attach(name, 0, &a), 0);
	assert_int_equal(sr_ring_head(a), 5);
	assert_true(sr_ring_slot_valid(a, 4));
	sr_ring_destroy(a);
	assert_int_equal(sr_ring_unlink(name), 0);
	assert_int_equal(sr_ring_attach(name, 0, &a), -ENOENT);
}

static void test_too_big_for_shm(void **st)
{
	struct statvfs vs;
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 1024, .act_size = 4};
	sr_ring *r = NULL;
	uint64_t fs_bytes;
	int err;

	(void)st;
	if (statvfs("/dev/shm", &vs))
		skip();
	fs_bytes = (uint64_t)vs.f_blocks * vs.f_frsize;
	/* Larger than the whole tmpfs: the kernel refuses the fallocate at
	 * once, without touching memory. Skip for huge or unlimited mounts. */
	if (fs_bytes == 0 || fs_bytes > (1ull << 40))
		skip();
	o.capacity = 1;
	while (o.capacity * 4096ull <= fs_bytes)
		o.capacity *= 2;
	o.capacity *= 2;
	mkname("big");
	o.name = name;
	err = sr_ring_create(&o, &r);
	print_message("%llu-slot ring (%zu bytes) on a %llu-byte /dev/shm: %s\n",
		      (unsigned long long)o.capacity, sr_ring_memsize(&o),
		      (unsigned long long)fs_bytes, sr_last_error());
	assert_true(err == -ENOSPC || err == -ENOMEM);
	assert_null(r);
	/* Nothing left behind. */
	assert_int_equal(sr_ring_unlink(name), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fork_sample),    cmocka_unit_test(test_fork_readonly_and_rdwr),
		cmocka_unit_test(test_bad_attach),     cmocka_unit_test(test_crashed_owner),
		cmocka_unit_test(test_too_big_for_shm),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
