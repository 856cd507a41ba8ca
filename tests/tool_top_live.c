/* `stepring top` against a live pool: this process creates a pool with a
 * ring name and steps it from a thread; top, another process, follows it
 * and must exit 0 by itself once the pool is destroyed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "helpers.h"

#define CLI SR_BINARY_DIR "/stepring"

struct live {
	sr_pool *pool;
	char name[64];
	pthread_t thr;
	int run; /* atomic: the stepping thread polls it */
	int err;
};

static void *stepper(void *arg)
{
	struct live *l = arg;
	uint32_t n = t_pool_info(l->pool).num_envs;
	int32_t *act = calloc(n, sizeof(*act));
	const sr_batch *b;
	uint64_t i = 0;

	l->err = sr_pool_reset(l->pool, &b);
	while (__atomic_load_n(&l->run, __ATOMIC_RELAXED) && !l->err) {
		for (uint32_t k = 0; k < n; k++)
			act[k] = (int32_t)((i + k) & 1);
		l->err = sr_pool_step(l->pool, act, &b);
		i++;
	}
	free(act);
	return NULL;
}

static void live_start(struct live *l, uint32_t threads)
{
	sr_pool_opts o;
	int err;

	memset(l, 0, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "srtest-toplive-%d", (int)getpid());
	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 64;
	o.num_threads = threads;
	o.bind = SR_BIND_NONE; /* other tests share these cores */
	o.flags |= SR_POOL_F_RING_NAME;
	o.ring_name = l->name;
	err = sr_pool_create(&o, &l->pool);
	if (err) {
		fprintf(stderr, "sr_pool_create: %s\n", sr_last_error());
		fail();
	}
	__atomic_store_n(&l->run, 1, __ATOMIC_RELAXED);
	assert_int_equal(pthread_create(&l->thr, NULL, stepper, l), 0);
}

static void live_stop(struct live *l)
{
	__atomic_store_n(&l->run, 0, __ATOMIC_RELAXED);
	pthread_join(l->thr, NULL);
	assert_int_equal(l->err, 0);
	sr_pool_destroy(l->pool);
	l->pool = NULL;
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

static void test_follow_live_pool(void **st)
{
	struct live l;
	char cmd[256], line[2048];
	unsigned long long steps, last = 0;
	double sps;
	FILE *p;
	int lines = 0, moving = 0, ended = 0, status;

	(void)st;
	live_start(&l, 2);
	snprintf(cmd, sizeof(cmd), CLI " top %s --interval 0.1 --plain 2>&1", l.name);
	p = popen(cmd, "r");
	assert_non_null(p);
	while (fgets(line, sizeof(line), p)) {
		const char *s = strstr(line, " steps=");

		lines++;
		if (s && sscanf(s, " steps=%llu steps/s=%lf", &steps, &sps) == 2) {
			assert_true(steps >= last); /* monotonic, never torn */
			if (lines > 1 && steps > last && sps > 0)
				moving++;
			last = steps;
			/* Two workers, each with a utilisation figure. */
			assert_non_null(strstr(line, "workers="));
			assert_non_null(strchr(strstr(line, "workers="), ','));
		}
		if (strstr(line, "the pool ended") || strstr(line, "segment is gone"))
			ended = 1;
		if (lines == 8)
			live_stop(&l);
		assert_true(lines < 400);
	}
	status = pclose(p);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_true(moving >= 2);
	assert_true(ended);
	if (l.pool)
		live_stop(&l);
}

static void test_once_screen_live(void **st)
{
	struct live l;
	char cmd[256], out[8192];
	FILE *p;
	size_t n;
	int status;

	(void)st;
	live_start(&l, 1);
	usleep(200 * 1000);
	snprintf(cmd, sizeof(cmd), CLI " top %s --once 2>&1", l.name);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	status = pclose(p);
	live_stop(&l);
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_non_null(strstr(out, "env CartPole-v1"));
	assert_non_null(strstr(out, "64 envs, 1 threads, batch 64, sync"));
	assert_non_null(strstr(out, "checkpoint  idle"));
	assert_non_null(strstr(out, "worker   cpu    steps/s  util"));
	/* After destroy the segment is gone: top refuses it as unknown. */
	snprintf(cmd, sizeof(cmd), CLI " top %s --once >/dev/null 2>&1", l.name);
	status = system(cmd);
	assert_int_equal(WEXITSTATUS(status), 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_follow_live_pool),
		cmocka_unit_test(test_once_screen_live),
	};
	return cmocka_run_group_tests(tests, setup, NULL);
}
