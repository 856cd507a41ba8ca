/* `stepring top` from another process against statistics blocks published
 * by this test exactly as the contract in stepring/stats.h says (a fake
 * pool: a thread updating the block under its seqlock), and against a
 * live pool when the pool is in the build (tests/tool_top_live.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring/checkpoint.h" /* SR_CKPT_STATE_* */
#include "stepring/stats.h"

#define CLI SR_BINARY_DIR "/stepring"

struct fake {
	char name[64], seg[80];
	sr_stats_shm *s;
	pthread_t thr;
	int fd; /* holds the creator lock while the fake pool "lives" */
	int run; /* atomic: the stepping thread polls it */
	int started;
};

/* Writer side of the seqlock: odd seq, release fence, update, release
 * store of the next even seq (pairs with top's acquire load). */
static void fake_update(struct fake *f, uint64_t steps)
{
	sr_stats_shm *s = f->s;
	uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_RELAXED);

	__atomic_store_n(&s->seq, seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	s->steps = steps;
	s->batches = steps / s->batch_size;
	s->episodes = steps / 20;
	s->now_ns = s->start_ns + steps * 1000; /* 1M steps/s on the block's clock */
	s->ring_head = steps;
	s->ring_cursor = steps - 16;
	__atomic_store_n(&s->seq, seq + 2, __ATOMIC_RELEASE);
	for (uint32_t i = 0; i < s->num_threads; i++) {
		__atomic_store_n(&s->workers[i].steps, steps / s->num_threads, __ATOMIC_RELAXED);
		__atomic_store_n(&s->workers[i].ns_busy, steps * 750 / s->num_threads,
				 __ATOMIC_RELAXED);
		__atomic_store_n(&s->workers[i].ns_idle, steps * 250 / s->num_threads,
				 __ATOMIC_RELAXED);
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	uint64_t steps = 1000;

	while (__atomic_load_n(&f->run, __ATOMIC_RELAXED)) {
		struct timespec ts = {0, 5 * 1000 * 1000};

		steps += 5000;
		fake_update(f, steps);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void fake_create(struct fake *f, int64_t pid, bool thread)
{
	static int counter;
	sr_stats_shm *s;
	int fd;

	memset(f, 0, sizeof(*f));
	snprintf(f->name, sizeof(f->name), "srtest-top-%d-%d", (int)getpid(), counter++);
	snprintf(f->seg, sizeof(f->seg), "/%s.stats", f->name);
	fd = shm_open(f->seg, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, sizeof(sr_stats_shm)), 0);
	s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	assert_true(s != MAP_FAILED);
	/* The contract's liveness signal: a live pool holds flock(LOCK_EX) on
	 * its block; a fake of a dead pool (another pid) holds nothing. */
	if (pid == getpid()) {
		assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
		f->fd = fd;
	} else {
		close(fd);
		f->fd = -1;
	}
	f->s = s;
	s->version = SR_STATS_VERSION;
	s->state = SR_STATS_STATE_RUNNING;
	s->pid = pid;
	snprintf(s->env_id, sizeof(s->env_id), "CartPole-v1");
	s->num_envs = 64;
	s->num_threads = 2;
	s->batch_size = 64;
	s->start_ns = 1000000000ull;
	s->now_ns = s->start_ns;
	s->p50_us = 42.5;
	s->p99_us = 99.5;
	s->mean_return = 21.5;
	s->mean_length = 21.5;
	s->ring_capacity = 1024;
	s->ckpt_state = SR_CKPT_STATE_WRITING;
	s->ckpt_count = 3;
	s->ckpt_bytes = 3 << 20;
	s->workers[0].cpu = 0;
	s->workers[1].cpu = UINT64_MAX;
	fake_update(f, 1000);
	/* Magic last, with release: a reader that sees it sees the rest. */
	__atomic_store_n(&s->magic, SR_STATS_MAGIC, __ATOMIC_RELEASE);
	if (thread) {
		__atomic_store_n(&f->run, 1, __ATOMIC_RELAXED);
		assert_int_equal(pthread_create(&f->thr, NULL, fake_main, f), 0);
		f->started = 1;
	}
}

static void fake_end(struct fake *f, bool unlink_it)
{
	if (f->started) {
		__atomic_store_n(&f->run, 0, __ATOMIC_RELAXED);
		pthread_join(f->thr, NULL);
		f->started = 0;
	}
	if (f->s) {
		__atomic_store_n(&f->s->state, SR_STATS_STATE_ENDED, __ATOMIC_RELEASE);
		munmap(f->s, sizeof(*f->s));
		f->s = NULL;
	}
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (unlink_it)
		shm_unlink(f->seg);
}

/* Run the CLI with a shell command line; collect stdout+stderr and the
 * exit status. */
static int run(char *out, size_t len, const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	FILE *p;
	size_t n = 0, k;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (n + 1 < len && (k = fread(out + n, 1, len - 1 - n, p)) > 0)
		n += k;
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int setup(void **st)
{
	(void)st;
	if (access(CLI, X_OK) != 0) {
		fprintf(stderr, "no %s: skipping\n", CLI);
		exit(77);
	}
	return 0;
}

static void test_once_plain(void **st)
{
	struct fake f;
	char out[4096];
	int rc;

	(void)st;
	fake_create(&f, getpid(), false);
	rc = run(out, sizeof(out), CLI " top %s --once --plain 2>&1", f.name);
	assert_int_equal(rc, 0);
	/* One line, with the fields and values the block holds. */
	assert_non_null(strstr(out, "top "));
	assert_non_null(strstr(out, " steps=1000 "));
	assert_non_null(strstr(out, " p50_us=42.5 p99_us=99.5 "));
	assert_non_null(strstr(out, " util=75% "));
	assert_non_null(strstr(out, " ckpt=writing/3 "));
	assert_non_null(strstr(out, "workers=75%,75%\n"));
	assert_null(strstr(out, "faults=")); /* thread workers: no process fields */
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
	/* "NAME.stats" and "/NAME" name the same pool. */
	rc = run(out, sizeof(out), CLI " top /%s.stats --once --plain 2>&1", f.name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, " steps=1000 "));
	fake_end(&f, true);
}

static void test_once_screen(void **st)
{
	struct fake f;
	char out[8192];
	int rc;

	(void)st;
	fake_create(&f, getpid(), false);
	rc = run(out, sizeof(out), CLI " top %s --once 2>&1", f.name);
	assert_int_equal(rc, 0);
	assert_null(strstr(out, "\033[")); /* not a terminal: no escapes */
	assert_non_null(strstr(out, "env CartPole-v1"));
	assert_non_null(strstr(out, "64 envs, 2 threads, batch 64, sync"));
	assert_non_null(strstr(out, "p50 42.5 us   p99 99.5 us"));
	assert_non_null(strstr(out, "ring  capacity 1024   pending 16 (2%)"));
	assert_non_null(strstr(out, "checkpoint  writing   completed 3   last 3.0 MiB"));
	assert_non_null(strstr(out, "worker   cpu    steps/s  util"));
	assert_non_null(strstr(out, "     1     -"));
	assert_null(strstr(out, "fault rows"));
	fake_end(&f, true);
}

/* Process workers: their kind, faults, restarts and fault rows. */
static void test_procs_faults(void **st)
{
	struct fake f;
	char out[8192];
	int rc;

	(void)st;
	fake_create(&f, getpid(), false);
	f.s->worker_kind = SR_STATS_WORKERS_PROCS_INLINE;
	f.s->faults = 4;
	f.s->restarts = 3;
	f.s->fault_rows = 96;
	rc = run(out, sizeof(out), CLI " top %s --once --plain 2>&1", f.name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, " procs=inline faults=4 restarts=3 fault_rows=96 workers="));
	rc = run(out, sizeof(out), CLI " top %s --once 2>&1", f.name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "64 envs, 2 worker processes, batch 64"));
	assert_non_null(strstr(out, "processes   inline   faults 4   restarts 3   fault rows 96"));
	fake_end(&f, true);
}

/* top follows a changing block, then exits 0 when the pool says ENDED. */
static void test_follow_until_ended(void **st)
{
	struct fake f;
	char cmd[256], line[1024];
	FILE *p;
	int lines = 0, st_, saw_rate = 0, saw_end = 0;

	(void)st;
	fake_create(&f, getpid(), true);
	snprintf(cmd, sizeof(cmd), CLI " top %s --interval 0.05 2>&1", f.name);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		lines++;
		/* The fake advances 1M steps/s on its own clock. */
		if (lines >= 2 && strstr(line, "steps/s=1000000 "))
			saw_rate = 1;
		if (strstr(line, "the pool ended"))
			saw_end = 1;
		if (lines == 4)
			fake_end(&f, false);
		assert_true(lines < 200);
	}
	st_ = pclose(p);
	assert_true(WIFEXITED(st_));
	assert_int_equal(WEXITSTATUS(st_), 0);
	assert_true(saw_rate);
	assert_true(saw_end);
	shm_unlink(f.seg);
}

static void test_segment_gone(void **st)
{
	struct fake f;
	char cmd[256], line[1024];
	FILE *p;
	int lines = 0, st_, saw = 0;

	(void)st;
	fake_create(&f, getpid(), true);
	snprintf(cmd, sizeof(cmd), CLI " top %s --interval 0.05 2>&1", f.name);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		if (++lines == 2)
			shm_unlink(f.seg); /* the pool crashed and someone cleaned up */
		if (strstr(line, "segment is gone"))
			saw = 1;
		assert_true(lines < 200);
	}
	st_ = pclose(p);
	assert_int_equal(WEXITSTATUS(st_), 0);
	assert_true(saw);
	__atomic_store_n(&f.run, 0, __ATOMIC_RELAXED);
	pthread_join(f.thr, NULL);
	munmap(f.s, sizeof(*f.s));
}

static void test_owner_dead(void **st)
{
	struct fake f;
	char out[4096];
	pid_t child = fork();
	int rc;

	(void)st;
	if (child == 0)
		_exit(0);
	assert_true(child > 0);
	waitpid(child, NULL, 0); /* a pid that no longer exists */
	fake_create(&f, child, false);
	rc = run(out, sizeof(out), CLI " top %s --interval 0.05 --plain 2>&1", f.name);
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "process is gone"));
	fake_end(&f, true);
}

static void test_bad_segment_and_args(void **st)
{
	char out[4096], seg[80];
	int fd, rc;
	uint64_t junk = 0x1234;

	(void)st;
	snprintf(seg, sizeof(seg), "/srtest-top-%d-junk.stats", (int)getpid());
	fd = shm_open(seg, O_CREAT | O_EXCL | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 * sizeof(sr_stats_shm)), 0);
	assert_int_equal(write(fd, &junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	rc = run(out, sizeof(out), CLI " top %s --once 2>&1", seg + 1);
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "bad magic"));
	assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
	shm_unlink(seg);

	rc = run(out, sizeof(out), CLI " top srtest-top-none-%d 2>&1", (int)getpid());
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "no such segment"));
	rc = run(out, sizeof(out), CLI " top --interval 0 x 2>&1");
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "--interval"));
	rc = run(out, sizeof(out), CLI " top a b 2>&1");
	assert_int_equal(rc, 2);
	rc = run(out, sizeof(out), CLI " top --frobnicate 2>&1");
	assert_int_equal(rc, 2);
	assert_non_null(strstr(out, "unknown option '--frobnicate'"));
	rc = run(out, sizeof(out), CLI " top --help 2>&1");
	assert_int_equal(rc, 0);
	assert_non_null(strstr(out, "usage: stepring top"));
}

/* Without a name, top finds the running pool by itself; other tests on
 * this machine may run pools too, in which case it must say so. */
static void test_autofind(void **st)
{
	struct fake f;
	char out[4096];
	int rc;

	(void)st;
	fake_create(&f, getpid(), false);
	rc = run(out, sizeof(out), CLI " top --once --plain 2>&1");
	if (rc == 0) {
		assert_non_null(strstr(out, f.name)); /* the only live pool is ours */
	} else {
		assert_int_equal(rc, 2);
		assert_non_null(strstr(out, "pools are running"));
	}
	fake_end(&f, true);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_once_plain),
		cmocka_unit_test(test_once_screen),
		cmocka_unit_test(test_procs_faults),
		cmocka_unit_test(test_follow_until_ended),
		cmocka_unit_test(test_segment_gone),
		cmocka_unit_test(test_owner_dead),
		cmocka_unit_test(test_bad_segment_and_args),
		cmocka_unit_test(test_autofind),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
