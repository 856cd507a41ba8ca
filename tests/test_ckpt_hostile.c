/*
 * Checkpoints from a stranger: files with valid CRCs and impossible
 * contents, made with tests/ckpt_craft.h (our own generator), against
 * sr_checkpoint_verify and sr_pool_restore. Every one must be refused by
 * both with a clear error, leave the pool as it was (it keeps stepping),
 * and allocate nothing beyond the pool's own geometry. Then a few hundred
 * random mutations (re-checksummed), each in a child with an alarm: no
 * crash, no hang, whatever restore decides.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "ckpt_craft.h"
#include "stepring.h"
#include "stepring/checkpoint.h"

/* Section layouts of docs/checkpoint.md ("What is saved"). */
struct env_rec {
	uint64_t prev_seq, ep_len;
	double ep_ret;
	uint32_t elapsed;
	uint8_t done, term, trunc, pad0;
};
struct runtime_sect {
	uint64_t ring_head, ring_cursor, spec_params[8], reserved[8];
};
struct stats_head {
	uint64_t steps, episodes, batches;
};

static char dir[256], good[300], good_replay[300], bad[300];

static sr_pool *mk(const char *env, uint32_t n)
{
	sr_pool_opts o;
	sr_pool *p;
	const sr_batch *b;

	sr_pool_opts_init(&o);
	o.env = env;
	o.num_envs = n;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.ring_capacity = 1024;
	o.flags |= SR_POOL_F_SEED;
	o.seed = 7;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	return p;
}

static void steps(sr_pool *p, int k)
{
	int32_t a[8] = {0, 1, 1, 0, 2, 1, 0, 2};
	const sr_batch *b;

	for (int i = 0; i < k; i++)
		assert_int_equal(sr_pool_step(p, a, &b), 0);
}

static void save(sr_pool *p, const char *path, bool replay)
{
	sr_ckpt_opts co;
	sr_ckpt_status st;

	sr_ckpt_opts_init(&co);
	co.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_CHUNK | (replay ? SR_CKPT_F_REPLAY : 0);
	co.backend = SR_CKPT_BACKEND_SYNC;
	co.chunk_size = 64 << 10;
	assert_int_equal(sr_pool_checkpoint(p, path, &co), 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, &st), 0);
}

static int setup(void **st)
{
	sr_pool *p;

	(void)st;
	snprintf(dir, sizeof(dir), "/tmp/sr-ckpt-hostile-%d", (int)getpid());
	mkdir(dir, 0700);
	snprintf(good, sizeof(good), "%s/good.ckpt", dir);
	snprintf(good_replay, sizeof(good_replay), "%s/good-replay.ckpt", dir);
	snprintf(bad, sizeof(bad), "%s/bad.ckpt", dir);
	p = mk("CartPole-v1", 4);
	steps(p, 300); /* several laps of the ring's episodes */
	save(p, good, false);
	save(p, good_replay, true);
	sr_pool_destroy(p);
	return 0;
}

static int teardown(void **st)
{
	char cmd[400];

	(void)st;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

typedef void (*mutate_fn)(struct craft *c, void *arg);

/* Load @src, mutate, write @bad; verify and restore must both fail with
 * -EBADMSG (or @want_restore for restore when the file is well formed but
 * does not fit: -EINVAL), the pool untouched and still stepping. */
static void expect_refused(const char *src, mutate_fn fn, void *arg, int want_verify,
			   int want_restore, const char *msg)
{
	struct craft c;
	sr_pool *p = mk("CartPole-v1", 4);
	uint64_t steps0;
	sr_pool_stats s0, s1;
	int err;

	assert_int_equal(craft_load(&c, src), 0);
	fn(&c, arg);
	assert_int_equal(craft_write(&c, bad), 0);
	craft_free(&c);
	err = sr_checkpoint_verify(bad, NULL);
	if (err != want_verify)
		fail_msg("verify: %d (%s), want %d", err, sr_last_error(), want_verify);
	steps(p, 3);
	sr_pool_stats_get(p, &s0);
	steps0 = s0.steps;
	err = sr_pool_restore(p, bad);
	if (err != want_restore)
		fail_msg("restore: %d (%s), want %d", err, sr_last_error(), want_restore);
	if (msg && !strstr(sr_last_error(), msg))
		fail_msg("restore said '%s', not '%s'", sr_last_error(), msg);
	sr_pool_stats_get(p, &s1);
	assert_int_equal(s1.steps, steps0); /* untouched */
	steps(p, 50);
	sr_pool_destroy(p);
}

static struct craft_sect *sect(struct craft *c, uint32_t type)
{
	int i = craft_find(c, type);

	assert_true(i >= 0);
	return &c->s[i];
}

/* --- container ----------------------------------------------------------- */

static void m_no_sections(struct craft *c, void *a)
{
	(void)a;
	craft_free(c);
}

static void m_zero_len_beyond_eof(struct craft *c, void *a)
{
	struct craft_sect *s = craft_add(c, SR_CKPT_SECT_USER, NULL, 0);

	(void)a;
	s->lie = true;
	s->table_offset = 1ull << 40;
	s->table_length = 0;
}

static void m_offset_2_63(struct craft *c, void *a)
{
	struct craft_sect *s = sect(c, SR_CKPT_SECT_STATS);

	(void)a;
	s->lie = true;
	s->table_offset = 1ull << 63;
	s->table_length = s->len;
}

static void m_duplicate(struct craft *c, void *a)
{
	struct craft_sect *s = sect(c, SR_CKPT_SECT_STATS);

	(void)a;
	craft_add(c, SR_CKPT_SECT_STATS, s->data, s->len);
}

static void m_drop_counters(struct craft *c, void *a)
{
	int i = craft_find(c, SR_CKPT_SECT_ENV_COUNTERS);

	(void)a;
	free(c->s[i].data);
	c->s[i] = c->s[--c->n];
}

static void test_container(void **st)
{
	(void)st;
	expect_refused(good, m_no_sections, NULL, -EBADMSG, -EBADMSG, "no sections");
	expect_refused(good, m_zero_len_beyond_eof, NULL, -EBADMSG, -EBADMSG, "outside the file");
	expect_refused(good, m_offset_2_63, NULL, -EBADMSG, -EBADMSG, "outside the file");
	expect_refused(good, m_duplicate, NULL, -EBADMSG, -EBADMSG, "twice");
	expect_refused(good, m_drop_counters, NULL, -EBADMSG, -EBADMSG, "env_counters");
}

/* --- replay window: the overflow, sizes bounded by the pool --------------- */

static void m_meta_overflow(struct craft *c, void *a)
{
	struct sr__ckpt_replay_meta *m = (void *)sect(c, SR_CKPT_SECT_REPLAY_META)->data;

	(void)a;
	/* The old check computed (nblk - 1) * block_bytes in 64 bits: with
	 * 2^63 bytes per block it wrapped to a small, "matching" size and
	 * restore copied blocks from far outside its buffer. */
	m->chunk_slots = 1;
	m->block_bytes = 1ull << 63;
}

static void m_meta_huge_window(struct craft *c, void *a)
{
	struct sr__ckpt_replay_meta *m = (void *)sect(c, SR_CKPT_SECT_REPLAY_META)->data;
	struct sr__ckpt_pool_sect *ps = (void *)sect(c, SR_CKPT_SECT_POOL)->data;
	struct craft_sect *r = sect(c, SR_CKPT_SECT_REPLAY);
	uint64_t sb = sr__ckpt_slot_bytes(m->obs_dim, m->act_size), cnt;

	(void)a;
	/* A consistent file for a ring of 2^22 slots (about 200 MiB of
	 * window) in a sparse file: the pool's ring has 1024. */
	m->capacity = ps->ring_capacity = 1ull << 22;
	m->head = m->capacity;
	m->cursor = m->head;
	m->first_seq = m->first_valid = 0;
	m->block_bytes = 256u << 20;
	m->chunk_slots = m->block_bytes / sb;
	cnt = m->head;
	r->lie = false;
	free(r->data);
	r->len = cnt * sb;
	r->data = calloc(1, (size_t)r->len); /* sparse-ish: zeros */
	((struct runtime_sect *)sect(c, SR_CKPT_SECT_RUNTIME)->data)->ring_head = m->head;
	((struct runtime_sect *)sect(c, SR_CKPT_SECT_RUNTIME)->data)->ring_cursor = m->head;
}

static void m_meta_cursor_after_head(struct craft *c, void *a)
{
	struct sr__ckpt_replay_meta *m = (void *)sect(c, SR_CKPT_SECT_REPLAY_META)->data;

	(void)a;
	m->cursor = m->head + 1;
}

static void m_replay_env_id(struct craft *c, void *a)
{
	struct sr__ckpt_replay_meta *m = (void *)sect(c, SR_CKPT_SECT_REPLAY_META)->data;
	struct craft_sect *r = sect(c, SR_CKPT_SECT_REPLAY);
	uint64_t n = m->head - m->first_seq < m->chunk_slots ? m->head - m->first_seq
							     : m->chunk_slots;
	/* env_id column of block 0: after obs, action, reward, 3 byte columns */
	uint64_t off = n * ((uint64_t)m->obs_dim * 4 + m->act_size + 4 + 3);
	uint32_t *env = (uint32_t *)(r->data + off);

	(void)a;
	env[n - 1] = 1000; /* the pool has 4 envs */
}

static void m_replay_prev_forward(struct craft *c, void *a)
{
	struct sr__ckpt_replay_meta *m = (void *)sect(c, SR_CKPT_SECT_REPLAY_META)->data;
	struct craft_sect *r = sect(c, SR_CKPT_SECT_REPLAY);
	uint64_t n = m->head - m->first_seq < m->chunk_slots ? m->head - m->first_seq
							     : m->chunk_slots;
	uint64_t off = n * ((uint64_t)m->obs_dim * 4 + m->act_size + 4 + 3 + 4);
	uint64_t *prev = (uint64_t *)(r->data + off);

	(void)a;
	prev[n - 1] = m->head + 5; /* a link into the future: sampler loops */
}

static void test_replay(void **st)
{
	struct rlimit rl;
	pid_t c;
	int status;

	(void)st;
	expect_refused(good_replay, m_meta_overflow, NULL, -EBADMSG, -EBADMSG, "impossible blocks");
	expect_refused(good_replay, m_meta_cursor_after_head, NULL, -EBADMSG, -EBADMSG, NULL);
	expect_refused(good_replay, m_replay_env_id, NULL, 0, -EBADMSG, "replay slot");
	expect_refused(good_replay, m_replay_prev_forward, NULL, 0, -EBADMSG, "replay slot");
	/* Bounded by the pool: the file declares 200 MiB of window; restore
	 * refuses it by geometry, never by running out of memory (a 128 MiB
	 * address-space headroom makes an attempt to stage it fail with
	 * -ENOMEM instead). */
	c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		sr_pool *p = mk("CartPole-v1", 4);
		struct craft cr;
		char line[256];
		unsigned long long vm = 0;
		FILE *f = fopen("/proc/self/status", "r");

		while (f && fgets(line, sizeof(line), f))
			sscanf(line, "VmSize: %llu kB", &vm);
		if (f)
			fclose(f);
		if (craft_load(&cr, good_replay))
			_exit(10);
		m_meta_huge_window(&cr, NULL);
		if (craft_write(&cr, bad))
			_exit(11);
		craft_free(&cr);
		rl.rlim_cur = rl.rlim_max = (rlim_t)(vm * 1024 + (128ull << 20));
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
		/* (ASan and TSan reserve terabytes of shadow: no limit there;
		 * the error code alone then says geometry, not memory.) */
		if (setrlimit(RLIMIT_AS, &rl))
			_exit(12);
#endif
		int err = sr_pool_restore(p, bad);
		if (err != -EINVAL || !strstr(sr_last_error(), "ring of 4194304 slots"))
			_exit(13);
		_exit(0);
	}
	assert_int_equal(waitpid(c, &status, 0), c);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* --- impossible runtime and env states ------------------------------------ */

static void m_cursor_behind(struct craft *c, void *a)
{
	struct runtime_sect *rt = (void *)sect(c, SR_CKPT_SECT_RUNTIME)->data;

	(void)a;
	rt->ring_cursor = rt->ring_head - 10; /* the consumer would wait forever */
}

static void m_head_far_ahead(struct craft *c, void *a)
{
	struct runtime_sect *rt = (void *)sect(c, SR_CKPT_SECT_RUNTIME)->data;

	(void)a;
	rt->ring_head += 1ull << 40;
}

static void m_env_rec(struct craft *c, void *a)
{
	struct env_rec *er = (void *)sect(c, SR_CKPT_SECT_ENV_COUNTERS)->data;
	int what = *(int *)a;

	if (what == 0)
		er[2].done = 2;
	else if (what == 1)
		er[1].prev_seq = ((struct runtime_sect *)sect(c, SR_CKPT_SECT_RUNTIME)->data)
					 ->ring_head + 1;
	else if (what == 2)
		er[3].elapsed = 100000; /* CartPole's TimeLimit is 500 */
	else
		er[0].pad0 = 1;
}

static void m_stats(struct craft *c, void *a)
{
	struct stats_head *s = (void *)sect(c, SR_CKPT_SECT_STATS)->data;

	(void)a;
	s->batches = s->steps + 1;
}

static void m_state_nan(struct craft *c, void *a)
{
	double *x = (double *)(sect(c, SR_CKPT_SECT_ENV_STATES)->data + 32); /* after the RNG */

	(void)a;
	x[2] = NAN; /* CartPole theta */
}

static void m_state_rng_zero(struct craft *c, void *a)
{
	(void)a;
	memset(sect(c, SR_CKPT_SECT_ENV_STATES)->data + 64, 0, 32); /* env 1's RNG */
}

static void test_impossible_states(void **st)
{
	(void)st;
	expect_refused(good, m_cursor_behind, NULL, 0, -EBADMSG, "cursor");
	expect_refused(good, m_head_far_ahead, NULL, 0, -EBADMSG, NULL);
	for (int w = 0; w < 4; w++)
		expect_refused(good, m_env_rec, &w, 0, -EBADMSG, "env ");
	expect_refused(good, m_stats, NULL, 0, -EBADMSG, "statistics");
	expect_refused(good, m_state_nan, NULL, 0, -EBADMSG, "check_state");
	expect_refused(good, m_state_rng_zero, NULL, 0, -EBADMSG, "check_state");
}

/* Acrobot with theta = 1e300: its angle wrap was a loop that never ended.
 * Refused by its check_state; and the wrap itself is bounded now. */
static void test_acrobot_huge_angle(void **st)
{
	char path[300];
	struct craft c;
	sr_pool *p = mk("Acrobot-v1", 4);

	(void)st;
	snprintf(path, sizeof(path), "%s/acro.ckpt", dir);
	steps(p, 10);
	save(p, path, false);
	assert_int_equal(craft_load(&c, path), 0);
	((double *)(sect(&c, SR_CKPT_SECT_ENV_STATES)->data + 32))[0] = 1e300;
	assert_int_equal(craft_write(&c, bad), 0);
	craft_free(&c);
	assert_int_equal(sr_pool_restore(p, bad), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "check_state"));
	steps(p, 10);
	sr_pool_destroy(p);
}

/* --- random mutations, re-checksummed ------------------------------------- */

static void test_random_mutations(void **st)
{
	struct craft base;
	unsigned seed = 12345;
	int refused = 0, restored = 0;

	(void)st;
	assert_int_equal(craft_load(&base, good_replay), 0);
	for (int it = 0; it < 300; it++) {
		pid_t c = fork();
		int status;

		assert_true(c >= 0);
		if (c == 0) {
			struct craft m;
			sr_pool *p;
			int err;

			alarm(20); /* a hang is a failure */
			srand(seed + (unsigned)it);
			memset(&m, 0, sizeof(m));
			for (uint32_t i = 0; i < base.n; i++)
				craft_add(&m, base.s[i].type, base.s[i].data, base.s[i].len);
			for (int k = 0, nm = 1 + rand() % 4; k < nm; k++) {
				struct craft_sect *s = &m.s[rand() % (int)m.n];
				uint64_t at;

				if (!s->len)
					continue;
				at = (uint64_t)rand() % s->len;
				switch (rand() % 4) {
				case 0: s->data[at] ^= (uint8_t)(1u << (rand() % 8)); break;
				case 1: s->data[at] = (uint8_t)rand(); break;
				case 2: /* a word of all ones or zeros */
					memset(s->data + (at & ~7ull), rand() % 2 ? 0xff : 0,
					       at + 8 <= s->len ? 8 : 1);
					break;
				default: s->data[at] = 0; break;
				}
			}
			if (craft_write(&m, bad))
				_exit(2);
			p = mk("CartPole-v1", 4);
			err = sr_pool_restore(p, bad);
			if (err == 0)
				steps(p, 20); /* whatever was accepted must run */
			sr_pool_destroy(p);
			_exit(err == 0 ? 0 : 1);
		}
		assert_int_equal(waitpid(c, &status, 0), c);
		if (!WIFEXITED(status))
			fail_msg("mutation %d: child killed by signal %d", it, WTERMSIG(status));
		assert_true(WEXITSTATUS(status) <= 1);
		refused += WEXITSTATUS(status) == 1;
		restored += WEXITSTATUS(status) == 0;
	}
	craft_free(&base);
	print_message("random mutations: %d refused, %d restored and stepped\n", refused,
		      restored);
	assert_true(refused > 0);
}

/* --- file size limit ------------------------------------------------------- */

static void test_fsize_limit(void **st)
{
	pid_t c;
	int status;

	(void)st;
	c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		struct rlimit rl = {8192, 8192};
		sr_pool *p = mk("CartPole-v1", 4);
		sr_ckpt_opts co;
		char path[300];

		/* SIGXFSZ keeps its default action: a write past the limit
		 * would kill the child. */
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(10);
		snprintf(path, sizeof(path), "%s/fsize.ckpt", dir);
		sr_ckpt_opts_init(&co);
		co.flags = SR_CKPT_F_BACKEND;
		co.backend = SR_CKPT_BACKEND_SYNC;
		if (sr_pool_checkpoint(p, path, &co) != -EFBIG)
			_exit(11);
		if (!strstr(sr_last_error(), "file size limit"))
			_exit(12);
		if (access(path, F_OK) == 0)
			_exit(13);
		_exit(0);
	}
	assert_int_equal(waitpid(c, &status, 0), c);
	if (!WIFEXITED(status))
		fail_msg("killed by signal %d", WTERMSIG(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* --- plugin specs ------------------------------------------------------------ */

static void test_plugin_spec_bounds(void **st)
{
	sr_env_spec s;
	char id[80];

	(void)st;
	assert_int_equal(sr_env_find("CartPole-v1", &s), 0);
	assert_int_equal(sr_env_validate(&s), 0);
	memset(id, 'x', 64);
	id[64] = '\0';
	s.id = id; /* 64 bytes: a checkpoint would cut it */
	assert_int_equal(sr_env_validate(&s), -EINVAL);
	id[63] = '\0';
	assert_int_equal(sr_env_validate(&s), 0);
	s.state_size = 1u << 31;
	assert_int_equal(sr_env_validate(&s), -EINVAL);
	assert_int_equal(sr_env_find("CartPole-v1", &s), 0);
	/* A shape whose product wraps 64 bits to 4 must not pass as 4. */
	s.obs_ndim = 4;
	s.obs_shape[0] = s.obs_shape[1] = 1u << 31;
	s.obs_shape[2] = 4;
	s.obs_shape[3] = 1;
	assert_int_equal(sr_env_validate(&s), -EINVAL);
	assert_int_equal(sr_env_find("CartPole-v1", &s), 0);
	s.n_phys = 1000;
	assert_int_equal(sr_env_validate(&s), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_container),
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_impossible_states),
		cmocka_unit_test(test_acrobot_huge_angle),
		cmocka_unit_test(test_random_mutations),
		cmocka_unit_test(test_fsize_limit),
		cmocka_unit_test(test_plugin_spec_bounds),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
