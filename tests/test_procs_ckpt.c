/*
 * Checkpoints of process pools (SR_POOL_F_PROCS): the workers hand their
 * envs' states over (SAVE) and take them back (LOAD, COMMIT). The file is
 * a thread pool's, section for section; a pool restored from it, of
 * threads or of processes (every worker a process, or worker 0 inline),
 * with another worker count, returns the same batches as the pool that
 * went on without interruption, in every autoreset mode and for plain
 * (CartPole, the faulty plugin) and opaque (Box2D) envs; async pools with
 * nothing in flight. A worker that
 * dies during a save or a restore: a clear error, no file, the pool
 * usable.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "stepring.h"
#include "stepring/checkpoint.h"
#include "stepring/proc.h"
#include "helpers.h"

#define FAULTY SR_PLUGIN_FAULTY

enum { K_THREADS = 0, K_PROCS = 1, K_INLINE = 2 };
static const char *const kname[] = {"threads", "processes", "inline"};

static char dir[256];

static sr_pool *mk(const sr_env_spec *spec, const char *env, uint32_t n, uint32_t t, int kind,
		   uint32_t autoreset)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	int err;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | (kind ? SR_POOL_F_PROCS : 0) |
		  (kind == K_INLINE ? SR_POOL_F_PROC_INLINE : 0);
	o.seed = 777;
	o.num_envs = n;
	o.num_threads = t;
	o.bind = SR_BIND_NONE;
	o.spec = spec;
	o.env = env;
	o.autoreset = autoreset;
	o.ring_capacity = 1u << 10;
	err = sr_pool_create(&o, &p);
	if (err)
		fprintf(stderr, "pool: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	return p;
}

/* Actions from the step number alone: both runs send the same ones. */
static void acts(const sr_env_spec *sp, uint64_t step, void *a, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t x = step * 7919 + i;

		if (sp->act_kind == SR_SPACE_DISCRETE) {
			((int32_t *)a)[i] = (int32_t)((sr_splitmix64(&x) >> 33) % sp->act_n);
			continue;
		}
		for (uint32_t d = 0; d < sp->act_dim; d++) {
			double u = (double)(sr_splitmix64(&x) >> 11) * 0x1.0p-53;

			((float *)a)[i * sp->act_dim + d] =
				(float)(sp->act_low[d] + (sp->act_high[d] - sp->act_low[d]) * u);
		}
	}
}

/* A batch's hash: obs, rewards, flags, env ids, ring sequences, final obs. */
static uint64_t bhash(const sr_batch *b)
{
	uint64_t h = t_hash_batch(T_FNV_INIT, b);

	h = t_fnv(h, &b->first_seq, sizeof(b->first_seq));
	if (b->final_obs)
		for (uint32_t i = 0; i < b->n; i++)
			if (b->terminated[i] || b->truncated[i])
				h = t_fnv(h, b->final_obs + (size_t)i * b->obs_dim,
					  b->obs_dim * sizeof(float));
	return h;
}

/* Step @p @m times from step number @k; each batch's hash into @h. */
static void run(sr_pool *p, uint64_t k, uint64_t m, uint64_t *h)
{
	const sr_env_spec *sp = t_pool_info(p).spec;
	uint32_t n = t_pool_info(p).num_envs;
	void *a = malloc((size_t)n * sr_env_action_size(sp));
	const sr_batch *b;

	for (uint64_t s = 0; s < m; s++) {
		acts(sp, k + s, a, n);
		assert_int_equal(sr_pool_step(p, a, &b), 0);
		if (h)
			h[s] = bhash(b);
	}
	free(a);
}

static void ckpt_sync(sr_pool *p, const char *path)
{
	sr_ckpt_opts o;
	int err;

	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_BACKEND;
	o.backend = SR_CKPT_BACKEND_SYNC;
	err = sr_pool_checkpoint(p, path, &o);
	if (err)
		fprintf(stderr, "checkpoint: %s\n", sr_last_error());
	assert_int_equal(err, 0);
}

static void stats_eq(sr_pool *a, sr_pool *b)
{
	sr_pool_stats x, y;

	assert_int_equal(sr_pool_stats_get(a, &x), 0);
	assert_int_equal(sr_pool_stats_get(b, &y), 0);
	assert_int_equal(x.steps, y.steps);
	assert_int_equal(x.episodes, y.episodes);
	assert_true(x.mean_return == y.mean_return);
	assert_true(x.mean_length == y.mean_length);
}

/* The sections every kind writes alike, by CRC (the pool section differs
 * by its thread count only when the counts differ). */
static void same_sections(const char *a, const char *b)
{
	sr_ckpt_info x, y;
	const uint32_t types[] = {SR_CKPT_SECT_POOL, SR_CKPT_SECT_ENV_STATES,
				  SR_CKPT_SECT_ENV_COUNTERS, SR_CKPT_SECT_STATS,
				  SR_CKPT_SECT_RUNTIME};

	assert_int_equal(sr_checkpoint_verify(a, &x), 0);
	assert_int_equal(sr_checkpoint_verify(b, &y), 0);
	assert_int_equal(x.n_sections, y.n_sections);
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		int i = -1, j = -1;

		for (uint32_t k = 0; k < x.n_sections; k++) {
			if (x.sections[k].type == types[t])
				i = (int)k;
			if (y.sections[k].type == types[t])
				j = (int)k;
		}
		assert_true(i >= 0 && j >= 0);
		assert_int_equal(x.sections[i].length, y.sections[j].length);
		assert_int_equal(x.sections[i].crc, y.sections[j].crc);
	}
}

/*
 * A pool of kind @ka (@ta workers) runs K steps, is checkpointed, runs M
 * more; a pool of kind @kb with @tb workers, stepped elsewhere first,
 * restores the file and runs the same M steps: the same batches and
 * statistics. With @twin, a thread pool run in step with the first saves
 * at the same step: the same sections, byte for byte.
 */
static void cross(const sr_env_spec *spec, const char *env, uint32_t mode, int ka, uint32_t ta,
		  int kb, uint32_t tb, bool twin)
{
	const uint32_t N = 13, K = 90, M = 120;
	uint64_t ha[120], hb[120];
	char path[300], tpath[300];
	const sr_batch *b;
	sr_pool *a = mk(spec, env, N, ta, ka, mode), *q;

	snprintf(path, sizeof(path), "%s/x-%d-%d.ckpt", dir, ka, kb);
	snprintf(tpath, sizeof(tpath), "%s/twin.ckpt", dir);
	assert_int_equal(sr_pool_reset(a, &b), 0);
	run(a, 0, K, NULL);
	ckpt_sync(a, path);
	if (twin) {
		sr_pool *t = mk(spec, env, N, ta, K_THREADS, mode);

		assert_int_equal(sr_pool_reset(t, &b), 0);
		run(t, 0, K, NULL);
		ckpt_sync(t, tpath);
		same_sections(path, tpath);
		sr_pool_destroy(t);
	}
	run(a, K, M, ha);

	q = mk(spec, env, N, tb, kb, mode);
	assert_int_equal(sr_pool_reset(q, &b), 0);
	run(q, 5000, 17, NULL); /* somewhere else entirely */
	if (sr_pool_restore(q, path))
		fail_msg("restore (%s -> %s): %s", kname[ka], kname[kb], sr_last_error());
	run(q, K, M, hb);
	for (uint32_t s = 0; s < M; s++)
		if (ha[s] != hb[s])
			fail_msg("%s mode %u: %s (%u) -> %s (%u): step %u after the restore differs",
				 env ? env : spec->id, mode, kname[ka], ta, kname[kb], tb, s);
	stats_eq(a, q);
	sr_pool_destroy(q);
	sr_pool_destroy(a);
}

static void test_cross(void **state)
{
	sr_env_spec fs;

	(void)state;
	assert_int_equal(sr_env_load_plugin(FAULTY, &fs), 0);
	fs.params[0] = 0; /* no fault */
	for (uint32_t mode = 0; mode < 3; mode++) {
		/* processes -> threads, threads -> processes, processes ->
		 * processes (other counts, with and without worker 0 inline;
		 * at most 2 workers: one per CPU of a 2-CPU machine) */
		cross(NULL, "CartPole-v1", mode, K_PROCS, 2, K_THREADS, 1, true);
		cross(NULL, "CartPole-v1", mode, K_THREADS, 1, K_PROCS, 2, false);
		cross(NULL, "CartPole-v1", mode, K_INLINE, 2, K_PROCS, 1, true);
		cross(NULL, "CartPole-v1", mode, K_PROCS, 1, K_INLINE, 2, false);
	}
	cross(&fs, NULL, SR_AUTORESET_NEXT_STEP, K_PROCS, 2, K_THREADS, 1, true);
	cross(&fs, NULL, SR_AUTORESET_NEXT_STEP, K_THREADS, 1, K_INLINE, 2, false);
	cross(NULL, "Acrobot-v1", SR_AUTORESET_SAME_STEP, K_INLINE, 2, K_PROCS, 1, true);
}

/* Opaque envs (Box2D: a world per instance, saved by its save()). */
static void test_opaque(void **state)
{
	sr_env_spec s;

	(void)state;
	if (sr_env_find("LunarLander-v3", &s)) {
		print_message("built without Box2D: skipped\n");
		return;
	}
	cross(NULL, "LunarLander-v3", SR_AUTORESET_NEXT_STEP, K_PROCS, 2, K_THREADS, 1, true);
	cross(NULL, "BipedalWalker-v3", SR_AUTORESET_NEXT_STEP, K_THREADS, 1, K_INLINE, 2, false);
}

static sr_pool *mk_async(int kind, uint32_t t)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | (kind ? SR_POOL_F_PROCS : 0) |
		  (kind == K_INLINE ? SR_POOL_F_PROC_INLINE : 0);
	o.seed = 31;
	o.env = "CartPole-v1";
	o.num_envs = 8;
	o.batch_size = 4;
	o.num_threads = t;
	o.bind = SR_BIND_NONE;
	o.ring_capacity = 1u << 10;
	if (sr_pool_create(&o, &p))
		fail_msg("pool: %s", sr_last_error());
	return p;
}

/* Rounds of an async pool: every env sent, both batches received; each
 * env's obs, reward and flags into @out[round][env]. */
static void async_rounds(sr_pool *p, uint64_t k, uint32_t m, float (*out)[8][6])
{
	const uint32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	const sr_env_spec *sp = t_pool_info(p).spec;
	const sr_batch *b;
	int32_t act[8];

	for (uint32_t r = 0; r < m; r++) {
		acts(sp, k + r, act, 8);
		assert_int_equal(sr_pool_send(p, act, ids, 8), 0);
		for (int h = 0; h < 2; h++) {
			assert_int_equal(sr_pool_recv(p, &b), 0);
			for (uint32_t i = 0; out && i < b->n; i++) {
				float *o = out[r][b->env_id[i]];

				memcpy(o, b->obs + (size_t)i * 4, 4 * sizeof(float));
				o[4] = b->reward[i];
				o[5] = (float)(b->terminated[i] + 2 * b->truncated[i]);
			}
		}
	}
}

/* Async process pools: checkpointed with nothing in flight (-EBUSY with
 * sends out), restored into async pools of processes and of threads. */
static void test_async(void **state)
{
	static float want[60][8][6], got[60][8][6];
	char path[300];
	const uint32_t ids[4] = {0, 1, 2, 3};
	const sr_batch *b;
	int32_t act[8] = {0};
	sr_pool *a = mk_async(K_PROCS, 2), *q;

	(void)state;
	snprintf(path, sizeof(path), "%s/async.ckpt", dir);
	assert_int_equal(sr_pool_reset(a, NULL), 0);
	assert_int_equal(sr_pool_recv(a, &b), 0);
	assert_int_equal(sr_pool_recv(a, &b), 0);
	async_rounds(a, 0, 40, NULL);
	assert_int_equal(sr_pool_send(a, act, ids, 4), 0);
	assert_int_equal(sr_pool_checkpoint(a, path, NULL), -EBUSY);
	assert_int_equal(sr_pool_recv(a, &b), 0);
	ckpt_sync(a, path);
	async_rounds(a, 40, 60, want);
	for (int k = 0; k < 2; k++) {
		q = k ? mk_async(K_THREADS, 2) : mk_async(K_PROCS, 1);
		assert_int_equal(sr_pool_reset(q, NULL), 0);
		assert_int_equal(sr_pool_recv(q, &b), 0);
		assert_int_equal(sr_pool_recv(q, &b), 0);
		if (sr_pool_restore(q, path))
			fail_msg("restore: %s", sr_last_error());
		async_rounds(q, 40, 60, got);
		assert_memory_equal(want, got, sizeof(want));
		sr_pool_destroy(q);
	}
	sr_pool_destroy(a);
}

static pid_t worker_pid(sr_pool *p, uint32_t w)
{
	sr_pool_worker_stats ws;

	assert_int_equal(sr_pool_worker_stats_get(p, w, &ws), 0);
	assert_true(ws.pid > 0);
	return ws.pid;
}

/* Kill worker @w and wait until it is gone (a zombie of this process). */
static void kill_worker(sr_pool *p, uint32_t w)
{
	pid_t pid = worker_pid(p, w);
	siginfo_t si;

	assert_int_equal(kill(pid, SIGKILL), 0);
	memset(&si, 0, sizeof(si));
	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
}

/*
 * A worker that dies during a save: the checkpoint fails and says which
 * worker and why, the file of the last checkpoint stays as it was (no
 * temporary left), the worker is restarted and the pool steps on (the
 * other worker's envs as if nothing happened). During a restore: it fails,
 * the live workers' envs are untouched (the staged states dropped).
 */
static void test_worker_dies(void **state)
{
	const uint32_t N = 8;
	char path[300];
	uint64_t ha[40], hb[40];
	struct stat st0, st1;
	const sr_batch *b;
	sr_pool_faults f;
	sr_pool *a, *t;
	int err;

	(void)state;
	snprintf(path, sizeof(path), "%s/dies.ckpt", dir);
	a = mk(NULL, "CartPole-v1", N, 2, K_PROCS, SR_AUTORESET_NEXT_STEP);
	t = mk(NULL, "CartPole-v1", N, 2, K_THREADS, SR_AUTORESET_NEXT_STEP);
	assert_int_equal(sr_pool_reset(a, &b), 0);
	assert_int_equal(sr_pool_reset(t, &b), 0);
	run(a, 0, 30, NULL);
	run(t, 0, 30, NULL);
	ckpt_sync(a, path);
	assert_int_equal(stat(path, &st0), 0);

	kill_worker(a, 1);
	err = sr_pool_checkpoint(a, path, NULL);
	assert_int_equal(err, -ECHILD);
	assert_non_null(strstr(sr_last_error(), "worker 1 (envs 4-7) ended"));
	assert_non_null(strstr(sr_last_error(), "killed by signal 9"));
	assert_int_equal(sr_pool_checkpoint_wait(a, NULL), 0); /* nothing in flight */
	assert_int_equal(stat(path, &st1), 0);
	assert_int_equal(st0.st_ino, st1.st_ino); /* the last checkpoint, as it was */
	assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
	assert_int_equal(sr_pool_faults_get(a, &f), 0);
	assert_int_equal(f.faults, 1);
	assert_int_equal(f.restarts, 1);
	assert_int_equal(f.fault_rows, 0); /* a save has no rows */

	/* The pool steps on: worker 0's envs as the twin's, worker 1's start
	 * over with a reset row. */
	{
		int32_t act[8];
		const sr_batch *bt;

		acts(t_pool_info(a).spec, 30, act, N);
		assert_int_equal(sr_pool_step(a, act, &b), 0);
		assert_int_equal(sr_pool_step(t, act, &bt), 0);
		assert_memory_equal(b->obs, bt->obs, 4 * 4 * sizeof(float));
		for (uint32_t i = 4; i < N; i++) {
			const uint8_t *fl = sr_ring_flags_col(t_pool_info(a).ring);
			uint64_t m = sr_ring_capacity(t_pool_info(a).ring) - 1;

			assert_int_equal(fl[(b->first_seq + i) & m], SR_SLOT_FIRST);
		}
	}
	/* A checkpoint works again, and so does its restore. */
	ckpt_sync(a, path);
	run(a, 31, 40, ha);
	assert_int_equal(sr_pool_restore(t, path), 0);
	run(t, 31, 40, hb);
	assert_memory_equal(ha, hb, sizeof(ha));

	/* A worker that dies before its restore: refused, the other worker's
	 * envs untouched (they go on as the twin's that was not restored). */
	{
		sr_pool *u = mk(NULL, "CartPole-v1", N, 2, K_THREADS, SR_AUTORESET_NEXT_STEP);
		int32_t act[8];
		const sr_batch *bu;

		assert_int_equal(sr_pool_restore(u, path), 0);
		run(u, 31, 40, NULL); /* u is where a is now */
		kill_worker(a, 0);
		err = sr_pool_restore(a, path);
		assert_int_equal(err, -ECHILD);
		assert_non_null(strstr(sr_last_error(), "restore: worker 0 (envs 0-3) ended"));
		acts(t_pool_info(a).spec, 71, act, N);
		assert_int_equal(sr_pool_step(a, act, &b), 0);
		assert_int_equal(sr_pool_step(u, act, &bu), 0);
		assert_memory_equal(b->obs + 4 * 4, bu->obs + 4 * 4, 4 * 4 * sizeof(float));
		assert_memory_equal(b->reward + 4, bu->reward + 4, 4 * sizeof(float));
		sr_pool_destroy(u);
	}
	sr_pool_destroy(t);
	sr_pool_destroy(a);
}

/* An inline function that knows no checkpoints (it returns 0 and writes
 * nothing for SAVE): the checkpoint is refused, and says so. */
static int noop_inline(void *arg, sr_proc_worker *w, const sr_proc_info *in, const sr_proc_cmd *c)
{
	(void)arg;
	(void)w;
	if (c->kind != SR_PROC_CMD_STEP && c->kind != SR_PROC_CMD_RESET)
		return 0;
	for (uint32_t i = 0; i < in->n_envs; i++) {
		uint64_t m = sr_ring_capacity(in->ring) - 1, s = (c->seq + in->first_env + i) & m;

		memset(sr_ring_obs_col(in->ring) + s * in->obs_dim, 0, in->obs_dim * sizeof(float));
		sr_ring_reward_col(in->ring)[s] = 0;
		sr_ring_terminated_col(in->ring)[s] = 0;
		sr_ring_truncated_col(in->ring)[s] = 0;
		sr_ring_flags_col(in->ring)[s] = SR_SLOT_FIRST;
		sr_ring_env_id_col(in->ring)[s] = in->first_env + i;
		sr_ring_prev_col(in->ring)[s] = SR_RING_NO_PREV;
	}
	sr_ring_publish(in->ring, c->seq + in->first_env, in->n_envs);
	return 0;
}

static void test_refusals(void **state)
{
	sr_pool_opts o;
	sr_pool *p = NULL, *q;
	const sr_batch *b;
	char path[300];

	(void)state;
	snprintf(path, sizeof(path), "%s/refuse.ckpt", dir);
	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE;
	o.env = "CartPole-v1";
	o.num_envs = 4;
	o.num_threads = 2;
	o.bind = SR_BIND_NONE;
	o.proc_inline = noop_inline;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(sr_pool_checkpoint(p, path, NULL), -ENOTSUP);
	assert_non_null(strstr(sr_last_error(), "worker 0's program does not support"));
	assert_int_equal(access(path, F_OK), -1);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	sr_pool_destroy(p);

	/* An env that lives in worker programs needs them. */
	{
		sr_env_spec fs;

		assert_int_equal(sr_env_find("CartPole-v1", &fs), 0);
		fs.flags |= SR_ENV_F_FOREIGN;
		o.flags = 0;
		o.spec = &fs;
		o.proc_inline = NULL;
		q = NULL;
		assert_int_equal(sr_pool_create(&o, &q), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "SR_ENV_F_FOREIGN"));
		assert_null(q);
	}

	/* Another env's checkpoint, or another count of envs: refused before
	 * any worker is asked. Re-sharding is for thread pools. */
	p = mk(NULL, "CartPole-v1", 6, 2, K_PROCS, 0);
	q = mk(NULL, "Acrobot-v1", 6, 2, K_PROCS, 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	ckpt_sync(p, path);
	assert_int_equal(sr_pool_restore(q, path), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "env differs"));
	assert_int_equal(sr_pool_restore_envs(p, path), -ENOTSUP);
	sr_pool_destroy(q);
	q = mk(NULL, "CartPole-v1", 7, 2, K_PROCS, 0);
	assert_int_equal(sr_pool_restore(q, path), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "num_envs differs"));
	sr_pool_destroy(q);
	sr_pool_destroy(p);
}

static int setup(void **st)
{
	(void)st;
	return t_mkdtemp(dir, sizeof(dir), "sr-pckpt");
}

static int teardown(void **st)
{
	(void)st;
	return t_rmtree(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cross),
		cmocka_unit_test(test_opaque),
		cmocka_unit_test(test_async),
		cmocka_unit_test(test_worker_dies),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
