/*
 * Process workers (SR_POOL_F_PROCS): the same rows as thread workers;
 * faults (SIGSEGV, exit, hang, abort) at a chosen step give fault rows,
 * keep the replay intact and restart deterministically; the restart
 * budget; a long run with many faults; closing and a killed trainer leave
 * no process and no shared memory behind.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "stepring.h"
#include "stepring/proc.h"
#include "helpers.h"

#define FAULTY SR_PLUGIN_FAULTY

enum { M_SEGV = 1, M_EXIT = 2, M_HANG = 3, M_ABORT = 4 };

/* Worker kinds of mk(): thread workers, processes, processes with worker
 * 0 inline (SR_POOL_F_PROC_INLINE). */
enum { K_THREADS = 0, K_PROCS = 1, K_INLINE = 2 };

/* @batch < @n: an async pool. */
static sr_pool *mka(const sr_env_spec *spec, const char *env, uint32_t n, uint32_t t, int kind,
		    uint32_t autoreset, uint32_t timeout_ms, uint32_t budget, uint32_t batch)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	int err;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | (kind ? SR_POOL_F_PROCS : 0) |
		  (kind == K_INLINE ? SR_POOL_F_PROC_INLINE : 0);
	o.seed = 12345;
	o.num_envs = n;
	o.num_threads = t;
	o.bind = SR_BIND_NONE;
	o.spec = spec;
	o.env = env;
	o.autoreset = autoreset;
	o.step_timeout_ms = timeout_ms;
	o.max_restarts = budget;
	o.batch_size = batch;
	err = sr_pool_create(&o, &p);
	if (err)
		fprintf(stderr, "pool: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	return p;
}

static sr_pool *mk(const sr_env_spec *spec, const char *env, uint32_t n, uint32_t t, int kind,
		   uint32_t autoreset, uint32_t timeout_ms, uint32_t budget)
{
	return mka(spec, env, n, t, kind, autoreset, timeout_ms, budget, 0);
}

static sr_env_spec faulty(uint64_t mode)
{
	sr_env_spec s;

	assert_int_equal(sr_env_load_plugin(FAULTY, &s), 0);
	s.params[0] = mode;
	return s;
}

/* Actions 0/1 from a fixed generator. */
static void acts(uint64_t *st, int32_t *a, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		a[i] = (int32_t)(sr_splitmix64(st) & 1);
}

static uint64_t batch_hash(uint64_t h, const sr_batch *b)
{
	h = t_fnv(h, b->obs, (size_t)b->n * b->obs_dim * sizeof(float));
	h = t_fnv(h, b->reward, b->n * sizeof(float));
	h = t_fnv(h, b->terminated, b->n);
	h = t_fnv(h, b->truncated, b->n);
	h = t_fnv(h, b->env_id, b->n * sizeof(uint32_t));
	return h;
}

static void cmp_batches(const sr_batch *a, const sr_batch *b, bool final)
{
	assert_int_equal(a->n, b->n);
	assert_memory_equal(a->obs, b->obs, (size_t)a->n * a->obs_dim * sizeof(float));
	assert_memory_equal(a->reward, b->reward, a->n * sizeof(float));
	assert_memory_equal(a->terminated, b->terminated, a->n);
	assert_memory_equal(a->truncated, b->truncated, a->n);
	assert_memory_equal(a->env_id, b->env_id, a->n * sizeof(uint32_t));
	if (final) {
		assert_non_null(a->final_obs);
		assert_non_null(b->final_obs);
		for (uint32_t i = 0; i < a->n; i++)
			if (a->terminated[i] || a->truncated[i])
				assert_memory_equal(a->final_obs + (size_t)i * a->obs_dim,
						    b->final_obs + (size_t)i * a->obs_dim,
						    a->obs_dim * sizeof(float));
	}
}

/* Thread workers and process workers (@kind: every worker a process, or
 * worker 0 inline): the same batches, every mode. */
static void run_same(const sr_env_spec *spec, const char *env, uint32_t mode, int kind)
{
	const uint32_t N = 13, K = 300;
	sr_pool *a = mk(spec, env, N, 2, K_THREADS, mode, 0, 0);
	sr_pool *b = mk(spec, env, N, 2, kind, mode, 0, 0);
	const sr_batch *ba, *bb;
	int32_t act[13];
	uint8_t mask[13];
	uint64_t st = 7;
	sr_pool_stats sa, sb;

	assert_int_equal(sr_pool_reset(a, &ba), 0);
	assert_int_equal(sr_pool_reset(b, &bb), 0);
	cmp_batches(ba, bb, false);
	for (uint32_t k = 0; k < K; k++) {
		acts(&st, act, N);
		assert_int_equal(sr_pool_step(a, act, &ba), 0);
		assert_int_equal(sr_pool_step(b, act, &bb), 0);
		cmp_batches(ba, bb, mode == SR_AUTORESET_SAME_STEP);
		if (mode == SR_AUTORESET_DISABLED && k % 7 == 6) {
			bool any = false;

			for (uint32_t i = 0; i < N; i++) {
				mask[i] = ba->terminated[i] | ba->truncated[i];
				any |= mask[i];
			}
			if (any) {
				assert_int_equal(sr_pool_reset_mask(a, mask, &ba), 0);
				assert_int_equal(sr_pool_reset_mask(b, mask, &bb), 0);
				cmp_batches(ba, bb, false);
			}
		}
	}
	assert_int_equal(sr_pool_stats_get(a, &sa), 0);
	assert_int_equal(sr_pool_stats_get(b, &sb), 0);
	assert_int_equal(sa.steps, sb.steps);
	assert_int_equal(sa.episodes, sb.episodes);
	assert_true(sa.mean_return == sb.mean_return);
	sr_pool_destroy(a);
	sr_pool_destroy(b);
}

static void test_same_as_threads(void **state)
{
	sr_env_spec f = faulty(0), c;
	const uint32_t modes[] = {SR_AUTORESET_NEXT_STEP, SR_AUTORESET_SAME_STEP,
				  SR_AUTORESET_DISABLED};

	assert_int_equal(sr_env_load_plugin(SR_PLUGIN_GOOD, &c), 0);
	for (size_t m = 0; m < 3; m++)
		for (int k = K_PROCS; k <= K_INLINE; k++) {
			run_same(NULL, "CartPole-v1", modes[m], k);
			run_same(NULL, "spin:obs_dim=5,ep_len=17", modes[m], k);
			run_same(&c, NULL, modes[m], k);
			run_same(&f, NULL, modes[m], k);
		}
}

/* sr_pool_reset_ex with seeds (one, a list with a mask), reset options and
 * a reset mask on a process pool: carried to the workers in the command
 * block, the same rows as a thread pool's, and no worker restarted. */
static void run_reset_ex(const char *env, const char *options, int kind)
{
	const uint32_t N = 9;
	sr_pool *a = mk(NULL, env, N, 2, K_THREADS, SR_AUTORESET_NEXT_STEP, 0, 0);
	sr_pool *b = mk(NULL, env, N, 2, kind, SR_AUTORESET_NEXT_STEP, 0, 0);
	const sr_batch *ba, *bb;
	sr_pool_reset_opts ro;
	sr_pool_worker_stats w0, w1;
	sr_pool_faults fs;
	uint64_t seeds[9], st = 3;
	uint8_t mask[9], smask[9];
	int32_t act[9];

	assert_int_equal(sr_pool_worker_stats_get(b, 1, &w0), 0);
	assert_int_equal(sr_pool_reset(a, &ba), 0);
	assert_int_equal(sr_pool_reset(b, &bb), 0);
	for (int round = 0; round < 5; round++) {
		for (uint32_t k = 0; k < 25; k++) {
			acts(&st, act, N);
			assert_int_equal(sr_pool_step(a, act, &ba), 0);
			assert_int_equal(sr_pool_step(b, act, &bb), 0);
			cmp_batches(ba, bb, false);
		}
		sr_pool_reset_opts_init(&ro);
		for (uint32_t i = 0; i < N; i++) {
			mask[i] = (uint8_t)((i + (uint32_t)round) % 3 != 0);
			smask[i] = (uint8_t)(i % 2);
			seeds[i] = 1000u + i / 2; /* equal seeds: equal envs */
		}
		switch (round) {
		case 0: /* one seed: env i from (seed, i), as a fresh pool */
			ro.flags = SR_RESET_F_SEED;
			ro.seed = 777;
			break;
		case 1: /* a seed per env, some left alone; a mask */
			ro.flags = SR_RESET_F_SEEDS | SR_RESET_F_MASK;
			ro.seeds = seeds;
			ro.seed_mask = smask;
			ro.mask = mask;
			break;
		case 2: /* reset options */
			ro.flags = SR_RESET_F_OPTIONS;
			ro.options = options;
			break;
		case 3: /* all of them */
			ro.flags = SR_RESET_F_SEED | SR_RESET_F_OPTIONS | SR_RESET_F_MASK;
			ro.seed = 5;
			ro.options = options;
			ro.mask = mask;
			break;
		default: /* a plain reset after them: nothing carried over */
			break;
		}
		assert_int_equal(sr_pool_reset_ex(a, &ro, &ba), 0);
		assert_int_equal(sr_pool_reset_ex(b, &ro, &bb), 0);
		cmp_batches(ba, bb, false);
	}
	/* Not a restart: the same worker process, no fault. */
	assert_int_equal(sr_pool_worker_stats_get(b, 1, &w1), 0);
	assert_int_equal(w0.pid, w1.pid);
	assert_int_equal(w1.restarts, 0);
	assert_int_equal(sr_pool_faults_get(b, &fs), 0);
	assert_int_equal(fs.faults, 0);
	/* A payload: process pools only, at most SR_PROC_RESET_PAYLOAD_MAX. */
	sr_pool_reset_opts_init(&ro);
	ro.flags = SR_RESET_F_PAYLOAD;
	ro.payload = "x";
	ro.payload_len = 1;
	assert_int_equal(sr_pool_reset_ex(a, &ro, &ba), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "process workers"));
	ro.payload_len = SR_PROC_RESET_PAYLOAD_MAX + 1;
	assert_int_equal(sr_pool_reset_ex(b, &ro, &bb), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "too long"));
	ro.payload_len = 1;
	assert_int_equal(sr_pool_reset_ex(b, &ro, &bb), 0); /* C workers ignore it */
	sr_pool_destroy(a);
	sr_pool_destroy(b);
}

static void test_reset_ex_same_as_threads(void **state)
{
	(void)state;
	for (int k = K_PROCS; k <= K_INLINE; k++) {
		run_reset_ex("CartPole-v1", "low=-0.2,high=0.1", k);
		run_reset_ex("Acrobot-v1", "low=-0.3,high=0.3", k);
		run_reset_ex("MountainCar-v0", "low=-0.9,high=-0.1", k);
	}
}

/* Every transition in the ring's window links to the previous slot of the
 * same env, and Faulty's step counter (obs[1]) grew by one along it. */
static uint64_t check_replay(sr_pool *p)
{
	sr_ring *r = t_pool_info(p).ring;
	sr_ring_info ri = {.size = sizeof(ri)};
	uint64_t head, lo, mask;
	const float *obs = sr_ring_obs_col(r);
	const uint8_t *fl = sr_ring_flags_col(r), *tr = sr_ring_truncated_col(r);
	const uint32_t *env = sr_ring_env_id_col(r);
	const uint64_t *prev = sr_ring_prev_col(r);
	uint64_t n = 0;

	assert_int_equal(sr_ring_info_get(r, &ri), 0);
	/* Up to the consumer's cursor: an async pool has slots in flight
	 * after it (a sync pool consumed everything). */
	head = ri.cursor;
	lo = ri.oldest;
	mask = ri.capacity - 1;

	for (uint64_t q = lo; q < head; q++) {
		uint64_t s = q & mask, pq, ps;

		assert_true(sr_ring_slot_valid(r, q));
		if (fl[s] & SR_SLOT_FAULT) {
			assert_int_equal(tr[s], 1);
			assert_true(prev[s] == SR_RING_NO_PREV);
			continue;
		}
		if (fl[s] & (SR_SLOT_PAD | SR_SLOT_FIRST))
			continue;
		pq = prev[s];
		assert_true(pq != SR_RING_NO_PREV && pq < q);
		if (pq < lo)
			continue;
		ps = pq & mask;
		assert_int_equal(env[ps], env[s]);
		assert_false(fl[ps] & (SR_SLOT_FAULT | SR_SLOT_PAD));
		assert_true(obs[s * 3 + 1] == obs[ps * 3 + 1] + 1.0f);
		n++;
	}
	return n;
}

/* One fault of @mode at step @at of env 6 (worker 1 holds envs 4..7). */
static uint64_t fault_run(uint64_t mode, uint32_t timeout_ms, int kind)
{
	sr_env_spec f = faulty(mode);
	sr_pool *p = mk(&f, NULL, 8, 2, kind, SR_AUTORESET_NEXT_STEP, timeout_ms, 10);
	sr_ring *r = t_pool_info(p).ring;
	const sr_batch *b;
	sr_pool_faults fs;
	sr_pool_worker_stats ws;
	int32_t act[8];
	uint64_t st = 99, h = 0, before_seq = 0;
	float before_obs[8 * 3];
	int32_t pid0;

	assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
	pid0 = ws.pid;
	assert_true(pid0 > 0 && pid0 != getpid());
	assert_int_equal(sr_pool_worker_stats_get(p, 0, &ws), 0);
	/* Worker 0 inline: this process. */
	assert_true(kind == K_INLINE ? ws.pid == getpid() : ws.pid != getpid());
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t k = 0; k < 60; k++) {
		acts(&st, act, 8);
		if (k == 20)
			act[6] = 2;
		assert_int_equal(sr_pool_step(p, act, &b), 0);
		h = batch_hash(h, b);
		if (k == 19) {
			before_seq = b->first_seq;
			memcpy(before_obs, b->obs, sizeof(before_obs));
		}
		if (k == 20) {
			const uint8_t *fl = sr_ring_flags_col(r);
			uint64_t m = sr_ring_capacity(r) - 1;

			for (uint32_t i = 0; i < 8; i++) {
				bool in = i >= 4;

				assert_int_equal(b->truncated[i], in ? 1 : b->truncated[i]);
				assert_int_equal(!!(fl[(b->first_seq + i) & m] & SR_SLOT_FAULT), in);
				assert_int_equal(b->env_id[i], i);
			}
			/* The step before the fault is still in the ring, intact. */
			for (uint32_t i = 0; i < 8; i++)
				assert_true(sr_ring_slot_valid(r, before_seq + i));
			assert_memory_equal(sr_ring_obs_col(r) + (before_seq & m) * 3, before_obs,
					    sizeof(before_obs));
		}
		if (k == 21) {
			/* Restarted: envs 4..7 begin a new episode, seeded from
			 * (seed, env, 1 restart). */
			sr_env_spec s = faulty(0);
			unsigned char stt[64];
			float o[3];

			assert_true(s.state_size <= sizeof(stt));
			for (uint32_t i = 4; i < 8; i++) {
				/* A fresh instance, as the worker's (calloc): seed
				 * sets only the RNG and the id. */
				memset(stt, 0, sizeof(stt));
				s.seed(&s, stt, 1, sr_proc_seed(12345, i, 1), i);
				s.reset(&s, stt, 1, o);
				assert_memory_equal(b->obs + i * 3, o, sizeof(o));
				assert_int_equal(b->truncated[i], 0);
				assert_true(b->reward[i] == 0.0f);
			}
		}
	}
	assert_true(check_replay(p) > 100);
	assert_int_equal(sr_pool_faults_get(p, &fs), 0);
	assert_int_equal(fs.faults, 1);
	assert_int_equal(fs.restarts, 1);
	assert_int_equal(fs.fault_rows, 4);
	assert_non_null(strstr(fs.last, "envs 4-7, worker 1"));
	switch (mode) {
	case M_SEGV:
		assert_non_null(strstr(fs.last, "signal 11"));
		break;
	case M_EXIT:
		assert_non_null(strstr(fs.last, "exited with code 3"));
		break;
	case M_HANG:
		assert_non_null(strstr(fs.last, "step timeout"));
		break;
	case M_ABORT:
		assert_non_null(strstr(fs.last, "signal 6"));
		break;
	}
	assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
	assert_int_equal(ws.restarts, 1);
	assert_true(ws.pid > 0 && ws.pid != pid0);
	sr_pool_destroy(p);
	/* The old process is gone (reaped by the pool). */
	assert_int_equal(kill(pid0, 0), -1);
	return h;
}

static void test_faults(void **state)
{
	const uint64_t modes[] = {M_SEGV, M_EXIT, M_HANG, M_ABORT};

	for (size_t m = 0; m < 4; m++) {
		uint32_t to = modes[m] == M_HANG ? 300 : 0;
		uint64_t h1 = fault_run(modes[m], to, K_PROCS), h2 = fault_run(modes[m], to, K_PROCS);

		/* The same faults at the same steps: the same rows, whether
		 * worker 0 (which does not fault) is a process or inline. */
		assert_true(h1 == h2);
		assert_true(fault_run(modes[m], to, K_INLINE) == h1);
	}
}

static void test_budget(void **state)
{
	sr_env_spec f = faulty(M_SEGV);
	sr_pool *p = mk(&f, NULL, 8, 2, K_PROCS, SR_AUTORESET_NEXT_STEP, 0, 1);
	const sr_batch *b;
	int32_t act[8] = {0};

	assert_int_equal(sr_pool_reset(p, &b), 0);
	act[1] = 2;
	assert_int_equal(sr_pool_step(p, act, &b), 0); /* the one restart allowed */
	act[1] = 0;
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	act[5] = 2;
	assert_int_equal(sr_pool_step(p, act, &b), -EOWNERDEAD);
	assert_non_null(strstr(sr_last_error(), "restart budget of 1"));
	assert_non_null(strstr(sr_last_error(), "envs 4-7, worker 1"));
	assert_non_null(strstr(sr_last_error(), "signal 11"));
	act[5] = 0;
	assert_int_equal(sr_pool_step(p, act, &b), -EOWNERDEAD);
	sr_pool_destroy(p);
}

/* 10 000 steps, a fault every 150 to 400 steps: only the interrupted rows
 * are lost, and they are counted. */
static void test_long_run(void **state)
{
	sr_env_spec f = faulty(M_SEGV);
	const uint32_t N = 16, K = 10000;
	sr_pool *p = mk(&f, NULL, N, 2, K_PROCS, SR_AUTORESET_NEXT_STEP, 0, 1000);
	sr_ring *r = t_pool_info(p).ring;
	const uint8_t *fl = sr_ring_flags_col(r);
	const uint64_t m = sr_ring_capacity(r) - 1;
	const sr_batch *b;
	sr_pool_faults fs;
	int32_t act[16];
	uint64_t st = 5, rows = 0, frows = 0, ok = 0, next = 200, nf = 0;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t k = 0; k < K; k++) {
		acts(&st, act, N);
		if (k >= next) {
			uint32_t e = (uint32_t)(sr_splitmix64(&st) % N);

			/* An env whose episode just ended is reset, not stepped:
			 * its action is not used. */
			if (!b->terminated[e] && !b->truncated[e]) {
				act[e] = 2;
				next = k + 150 + sr_splitmix64(&st) % 250;
				nf++;
			}
		}
		assert_int_equal(sr_pool_step(p, act, &b), 0);
		for (uint32_t i = 0; i < N; i++) {
			rows++;
			if (fl[(b->first_seq + i) & m] & SR_SLOT_FAULT)
				frows++;
			else
				ok++;
		}
		if (k % 500 == 499)
			check_replay(p);
	}
	assert_int_equal(sr_pool_faults_get(p, &fs), 0);
	assert_int_equal(fs.faults, nf);
	assert_int_equal(fs.fault_rows, frows);
	/* Each fault interrupts its worker's 8 envs, nothing else. */
	assert_int_equal(frows, nf * (N / 2));
	assert_int_equal(ok + frows, (uint64_t)N * K);
	printf("long run: %u steps x %u envs, %llu faults, %llu rows lost (fault rows) of %llu\n",
	       K, N, (unsigned long long)nf, (unsigned long long)frows,
	       (unsigned long long)rows);
	sr_pool_destroy(p);
}

static bool gone(pid_t pid)
{
	char path[64], buf[512], *c;
	FILE *f;
	bool z = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fgets(buf, sizeof(buf), f) && (c = strrchr(buf, ')')) && c[1] == ' ')
		z = c[2] == 'Z' || c[2] == 'X';
	fclose(f);
	return z;
}

/* The inode of the memfd named @name that process @pid maps, or 0. */
static unsigned long maps_ino(pid_t pid, const char *name)
{
	char path[64], line[512];
	unsigned long ino = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	while (f && !ino && fgets(line, sizeof(line), f)) {
		unsigned long i;

		if (strstr(line, name) && sscanf(line, "%*s %*s %*s %*s %lu", &i) == 1)
			ino = i;
	}
	if (f)
		fclose(f);
	return ino;
}

/* Does any process still map or hold memfd inode @ino? */
static bool ino_held(unsigned long ino)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	char path[300], line[512], key[64];
	bool held = false;

	snprintf(key, sizeof(key), " %lu ", ino);
	while (d && !held && (e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/maps", e->d_name);
		f = fopen(path, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "memfd:stepring") && strstr(line, key))
				held = true;
		if (f)
			fclose(f);
	}
	if (d)
		closedir(d);
	return held;
}

/* A trainer killed with SIGKILL takes its workers with it, and with them the
 * last holders of its shared memory. */
static void test_trainer_killed(void **state)
{
	int fds[2];
	pid_t child, pids[2];
	unsigned long ring, block;
	bool held, alive;

	assert_int_equal(pipe(fds), 0);
	child = fork(); /* this test process runs no threads here */
	assert_true(child >= 0);
	if (child == 0) {
		sr_pool *p = mk(NULL, "CartPole-v1", 6, 2, K_PROCS, 0, 0, 0);
		const sr_batch *b;
		int32_t a[6] = {0};

		sr_pool_reset(p, &b);
		sr_pool_step(p, a, &b);
		for (uint32_t w = 0; w < 2; w++) {
			sr_pool_worker_stats ws;

			sr_pool_worker_stats_get(p, w, &ws);
			pids[w] = ws.pid;
		}
		if (write(fds[1], pids, sizeof(pids)) != sizeof(pids))
			_exit(1);
		for (;;)
			sr_pool_step(p, a, &b);
	}
	close(fds[1]);
	assert_int_equal(read(fds[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
	close(fds[0]);
	/* The shared memory: the ring's and the command block's memfds. */
	ring = maps_ino(pids[0], "memfd:stepring-shm");
	block = maps_ino(pids[0], "memfd:stepring-procs");
	held = ring && block && ino_held(ring) && ino_held(block);
	alive = !gone(pids[0]) && !gone(pids[1]);
	kill(child, SIGKILL); /* first: a failed check must not leave it running */
	waitpid(child, NULL, 0);
	assert_true(held);
	assert_true(alive);
	for (int t = 0; t < 400; t++) {
		bool all = true;

		for (uint32_t w = 0; w < 2; w++)
			all &= gone(pids[w]);
		if (all)
			break;
		usleep(10000);
	}
	for (uint32_t w = 0; w < 2; w++)
		assert_true(gone(pids[w]));
	/* Nobody maps them any more: the kernel has freed them (memfds have no
	 * name in /dev/shm to leave behind). */
	assert_false(ino_held(ring));
	assert_false(ino_held(block));
}

/* A process pool with a named ring (and so a statistics block). */
static sr_pool *mk_named(const sr_env_spec *spec, const char *name, uint32_t flags)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	int err;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | SR_POOL_F_PROCS | SR_POOL_F_RING_NAME | flags;
	o.seed = 12345;
	o.num_envs = 8;
	o.num_threads = 2;
	o.bind = SR_BIND_NONE;
	o.spec = spec;
	o.env = "CartPole-v1";
	o.ring_name = name;
	o.max_restarts = 10;
	err = sr_pool_create(&o, &p);
	if (err)
		fprintf(stderr, "pool: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	return p;
}

static bool shm_exists(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return access(path, F_OK) == 0;
}

/* Faults reach the statistics block at once (what `stepring top` reads). */
static void test_stats_block(void **state)
{
	sr_env_spec f = faulty(M_EXIT);
	char name[64], stats[80];
	const sr_batch *b;
	int32_t act[8] = {0};
	sr_stats_shm *s;
	sr_pool *p;
	int fd;

	snprintf(name, sizeof(name), "sr-test-procs-stats-%d", (int)getpid());
	snprintf(stats, sizeof(stats), "/%s.stats", name);
	for (int inl = 0; inl < 2; inl++) {
		p = mk_named(&f, name, inl ? SR_POOL_F_PROC_INLINE : 0);
		fd = shm_open(stats, O_RDONLY, 0);
		assert_true(fd >= 0);
		s = mmap(NULL, sizeof(*s), PROT_READ, MAP_SHARED, fd, 0);
		close(fd);
		assert_true(s != MAP_FAILED);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		assert_int_equal(sr_pool_step(p, act, &b), 0);
		act[6] = 2; /* worker 1 (a process either way) exits */
		assert_int_equal(sr_pool_step(p, act, &b), 0);
		act[6] = 0;
		assert_int_equal(__atomic_load_n(&s->faults, __ATOMIC_ACQUIRE), 1);
		assert_int_equal(s->restarts, 1);
		assert_int_equal(s->fault_rows, 4);
		assert_int_equal(s->worker_kind,
				 inl ? SR_STATS_WORKERS_PROCS_INLINE : SR_STATS_WORKERS_PROCS);
		munmap(s, sizeof(*s));
		sr_pool_destroy(p);
		/* Closed: the pool removed its names. */
		assert_false(shm_exists(name));
		assert_false(shm_exists(stats + 1));
	}
}

/* A trainer with a named ring, killed outright: its guard removes the
 * ring's and the statistics block's names once the workers are gone. */
static void test_trainer_killed_named(void **state)
{
	char name[64], stats[80];
	int fds[2];
	pid_t child, pids[2];
	bool had;

	snprintf(name, sizeof(name), "sr-test-procs-kill-%d", (int)getpid());
	snprintf(stats, sizeof(stats), "%s.stats", name);
	for (int inl = 0; inl < 2; inl++) {
		assert_int_equal(pipe(fds), 0);
		child = fork(); /* this test process runs no threads here */
		assert_true(child >= 0);
		if (child == 0) {
			sr_pool *p = mk_named(NULL, name, inl ? SR_POOL_F_PROC_INLINE : 0);
			const sr_batch *b;
			int32_t a[8] = {0};

			sr_pool_reset(p, &b);
			sr_pool_step(p, a, &b);
			for (uint32_t w = 0; w < 2; w++) {
				sr_pool_worker_stats ws;

				sr_pool_worker_stats_get(p, w, &ws);
				pids[w] = ws.pid;
			}
			if (write(fds[1], pids, sizeof(pids)) != sizeof(pids))
				_exit(1);
			for (;;)
				sr_pool_step(p, a, &b);
		}
		close(fds[1]);
		assert_int_equal(read(fds[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
		close(fds[0]);
		had = shm_exists(name) && shm_exists(stats);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		assert_true(had);
		for (int t = 0; t < 500 && (shm_exists(name) || shm_exists(stats)); t++)
			usleep(10000);
		assert_false(shm_exists(name));
		assert_false(shm_exists(stats));
		assert_true(gone(pids[1]));
	}
}

/* Closing the pool stops and reaps every worker. */
static uint32_t p_batch(sr_pool *p)
{
	return t_pool_info(p).batch_size;
}

/* Async: the rows each env gets back (per-env streams: obs, reward,
 * flags), hashed per env in env order, and every batch hashed in order. */
struct astream {
	uint64_t h[64], all;
	uint32_t got[64];
};

/*
 * @rounds recvs of a pool of @n envs, each batch sent back with actions
 * from a per-env generator (as `stepring rollout` does); with @ragged the
 * envs go back in two sends of the batch's halves in reverse order (never
 * a whole group). The per-env streams do not depend on the worker kind;
 * the batch order does only for ragged thread pools.
 */
static void arun(sr_pool *p, uint32_t n, uint32_t rounds, bool ragged, bool final,
		 struct astream *out)
{
	const sr_batch *b;
	int32_t act[64];
	uint32_t ids[64];
	uint64_t rng[64];

	memset(out, 0, sizeof(*out));
	for (uint32_t e = 0; e < n; e++)
		rng[e] = 1000 + e;
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_null(b);
	for (uint32_t k = 0; k < rounds; k++) {
		int err = sr_pool_recv(p, &b);

		if (err)
			fprintf(stderr, "recv: %s\n", sr_last_error());
		assert_int_equal(err, 0);
		out->all = batch_hash(out->all, b);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];

			assert_true(e < n);
			out->got[e]++;
			out->h[e] = t_fnv(out->h[e], b->obs + (size_t)i * b->obs_dim,
					  b->obs_dim * sizeof(float));
			out->h[e] = t_fnv(out->h[e], &b->reward[i], sizeof(float));
			out->h[e] = t_fnv(out->h[e], &b->terminated[i], 1);
			out->h[e] = t_fnv(out->h[e], &b->truncated[i], 1);
			if (final && (b->terminated[i] || b->truncated[i]))
				out->h[e] = t_fnv(out->h[e], b->final_obs + (size_t)i * b->obs_dim,
						  b->obs_dim * sizeof(float));
			ids[i] = e;
			act[i] = (int32_t)(sr_splitmix64(&rng[e]) & 1);
		}
		if (!ragged) {
			assert_int_equal(sr_pool_send(p, act, NULL, b->n), 0);
		} else {
			uint32_t h = b->n / 2;

			assert_int_equal(sr_pool_send(p, act + h, ids + h, b->n - h), 0);
			assert_int_equal(sr_pool_send(p, act, ids, h), 0);
		}
	}
	/* Batch groups: the groups in flight back too (not hashed), so that
	 * nothing is in flight and the statistics are complete. */
	if (!ragged && n % p_batch(p) == 0)
		for (uint32_t g = 0; g < n / p_batch(p); g++)
			assert_int_equal(sr_pool_recv(p, &b), 0);
}

/* Async: thread workers and process workers (every worker a process, and
 * worker 0 inline) give every env the same rows; with batch groups (the
 * batches tile the envs, sent back whole) the same batches. */
static void test_async_same_as_threads(void **state)
{
	const uint32_t modes[] = {SR_AUTORESET_NEXT_STEP, SR_AUTORESET_SAME_STEP};
	/* envs, batch, ragged: groups; groups left for ragged sends; per-env
	 * queues only (13 envs, batch 5). */
	const struct {
		uint32_t n, batch;
		bool ragged;
	} cfg[] = {{16, 8, false}, {16, 8, true}, {13, 5, false}};
	static struct astream a, b;

	for (size_t m = 0; m < 2; m++)
		for (size_t c = 0; c < 3; c++) {
			const bool fin = modes[m] == SR_AUTORESET_SAME_STEP;
			sr_pool *pa = mka(NULL, "CartPole-v1", cfg[c].n, 2, K_THREADS, modes[m], 0, 0,
					  cfg[c].batch);
			sr_pool_stats sa, sb;
			uint64_t procs_all = 0;

			arun(pa, cfg[c].n, 400, cfg[c].ragged, fin, &a);
			assert_int_equal(sr_pool_stats_get(pa, &sa), 0);
			sr_pool_destroy(pa);
			for (int k = K_PROCS; k <= K_INLINE; k++) {
				sr_pool *pb = mka(NULL, "CartPole-v1", cfg[c].n, 2, k, modes[m], 0, 0,
						  cfg[c].batch);

				arun(pb, cfg[c].n, 400, cfg[c].ragged, fin, &b);
				/* Every env keeps coming back: the process pool
				 * returns rows in send order (a thread pool's
				 * inline worker 0 may fill the batches with its own
				 * envs for a while). */
				for (uint32_t e = 0; e < cfg[c].n; e++)
					assert_true(b.got[e] > 100);
				if (!cfg[c].ragged && cfg[c].n % cfg[c].batch == 0) {
					/* Batch groups: the same batches, in order. */
					assert_true(a.all == b.all);
					assert_memory_equal(a.h, b.h, sizeof(a.h));
				}
				/* Ragged process pools are deterministic: the rows
				 * go to the ring in send order, worker after worker,
				 * inline or not. */
				if (k == K_PROCS)
					procs_all = b.all;
				else
					assert_true(b.all == procs_all);
				assert_int_equal(sr_pool_stats_get(pb, &sb), 0);
				if (!cfg[c].ragged && cfg[c].n % cfg[c].batch == 0) {
					/* (The last-100 window's mean depends on the
					 * order in which the workers' episodes were
					 * merged, which follows the timing.) */
					assert_int_equal(sa.steps, sb.steps);
					assert_int_equal(sa.episodes, sb.episodes);
				}
				sr_pool_destroy(pb);
			}
		}
}

/* Per-env streams: every env's rows, whatever the batches were, equal a
 * thread pool's for the same per-env actions: run each env @steps steps. */
static void per_env_streams(sr_pool *p, uint32_t n, uint32_t steps, uint64_t *h)
{
	const sr_batch *b;
	int32_t act[64];
	uint32_t ids[64], cnt[64] = {0}, left = n;
	uint64_t rng[64];

	for (uint32_t e = 0; e < n; e++) {
		rng[e] = 77 + e;
		h[e] = 0;
	}
	assert_int_equal(sr_pool_reset(p, &b), 0);
	while (left) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];

			if (cnt[e] <= steps) {
				h[e] = t_fnv(h[e], b->obs + (size_t)i * b->obs_dim,
					     b->obs_dim * sizeof(float));
				h[e] = t_fnv(h[e], &b->reward[i], sizeof(float));
				h[e] = t_fnv(h[e], &b->terminated[i], 1);
				h[e] = t_fnv(h[e], &b->truncated[i], 1);
				if (++cnt[e] == steps + 1)
					left--;
			}
			ids[i] = e;
			act[i] = (int32_t)(sr_splitmix64(&rng[e]) & 1);
		}
		/* Back in reverse order: a ragged send. */
		for (uint32_t i = 0; i < b->n / 2; i++) {
			uint32_t t = ids[i];
			int32_t u = act[i];

			ids[i] = ids[b->n - 1 - i];
			ids[b->n - 1 - i] = t;
			act[i] = act[b->n - 1 - i];
			act[b->n - 1 - i] = u;
		}
		assert_int_equal(sr_pool_send(p, act, ids, b->n), 0);
	}
}

static void test_async_streams(void **state)
{
	uint64_t ha[64], hb[64];

	for (uint32_t ar = 0; ar < 2; ar++) {
		sr_pool *a = mka(NULL, "Acrobot-v1", 24, 2, K_THREADS, ar, 0, 0, 7);

		per_env_streams(a, 24, 300, ha);
		sr_pool_destroy(a);
		for (int k = K_PROCS; k <= K_INLINE; k++) {
			sr_pool *b = mka(NULL, "Acrobot-v1", 24, 2, k, ar, 0, 0, 7);

			per_env_streams(b, 24, 300, hb);
			assert_memory_equal(ha, hb, 24 * sizeof(ha[0]));
			sr_pool_destroy(b);
		}
	}
}

/*
 * Async faults: 8 envs, worker 1 holds 4..7; env 6 faults at its 20th
 * step while other commands of worker 1 are in flight (batch groups: two
 * groups of 4 in flight; ragged: sends of 3). Every fault row is returned
 * by a recv (none lost, each of an env of worker 1, truncated), the ring
 * keeps every published transition with valid links, the restarted envs
 * begin new episodes, and the run is the same again and with worker 0
 * inline. Returns the hash of the batches.
 */
static uint64_t async_fault_run(uint64_t mode, uint32_t timeout_ms, int kind, uint32_t batch)
{
	sr_env_spec f = faulty(mode);
	sr_pool *p = mka(&f, NULL, 8, 2, kind, SR_AUTORESET_NEXT_STEP, timeout_ms, 10, batch);
	sr_ring *r = t_pool_info(p).ring;
	const uint64_t m = sr_ring_capacity(r) - 1;
	const sr_batch *b;
	sr_pool_faults fs;
	sr_pool_worker_stats ws;
	int32_t act[8];
	uint32_t ids[8], sent[8] = {0}, got[8] = {0}, after[8] = {0};
	uint64_t st = 99, h = 0, frows = 0;
	int32_t pid0;

	assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
	pid0 = ws.pid;
	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t e = 0; e < 8; e++)
		sent[e] = 1;
	for (uint32_t k = 0; k < 150; k++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		h = batch_hash(h, b);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];
			uint8_t fl = sr_ring_flags_col(r)[(b->first_seq != UINT64_MAX
								   ? b->first_seq + i
								   : 0) &
							  m];

			got[e]++;
			if (b->first_seq != UINT64_MAX && (fl & SR_SLOT_FAULT)) {
				assert_true(e >= 4);
				assert_int_equal(b->truncated[i], 1);
				after[e] = 1;
				frows++;
			} else if (after[e] == 1) {
				/* The first row after the fault: a new episode. */
				assert_int_equal(b->truncated[i], 0);
				assert_true(b->obs[(size_t)i * 3 + 1] == 0.0f);
				after[e] = 2;
			}
			ids[i] = e;
			act[i] = (int32_t)(sr_splitmix64(&st) & 1);
			if (e == 6 && sent[e] == 20)
				act[i] = 2;
			sent[e]++;
		}
		assert_int_equal(sr_pool_send(p, act, batch == 4 ? NULL : ids, b->n), 0);
	}
	/* Nothing lost: each env got back every send but those in flight. */
	for (uint32_t e = 0; e < 8; e++)
		assert_true(sent[e] - got[e] <= 1);
	assert_true(check_replay(p) > 300);
	assert_int_equal(sr_pool_faults_get(p, &fs), 0);
	assert_int_equal(fs.faults, 1);
	assert_int_equal(fs.restarts, 1);
	/* Env 6 faults in a command that holds 6 and 7 (groups: 6, 7; ragged:
	 * the last batch's envs), and the command sent next holds 4 and 5,
	 * posted before the fault is found (when recv needs worker 1's rows):
	 * the worker's 4 envs in flight. */
	assert_int_equal(fs.fault_rows, 4);
	if (batch == 4)
		assert_int_equal(frows, fs.fault_rows); /* views: flags read in place */
	assert_non_null(strstr(fs.last, "envs 4-7, worker 1"));
	assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
	assert_int_equal(ws.restarts, 1);
	assert_true(ws.pid > 0 && ws.pid != pid0);
	sr_pool_destroy(p);
	assert_int_equal(kill(pid0, 0), -1);
	if (getenv("T_VERBOSE"))
		fprintf(stderr, "async fault: mode %llu kind %d batch %u: %llu fault rows, %llu "
			"returned, hash %016llx\n", (unsigned long long)mode, kind, batch,
			(unsigned long long)fs.fault_rows, (unsigned long long)frows,
			(unsigned long long)h);
	return h ^ fs.fault_rows;
}

static void test_async_faults(void **state)
{
	const uint64_t modes[] = {M_SEGV, M_EXIT, M_HANG, M_ABORT};
	const uint32_t batches[] = {4, 3};

	for (size_t m = 0; m < 4; m++)
		for (size_t bi = 0; bi < 2; bi++) {
			uint32_t to = modes[m] == M_HANG ? 300 : 0;
			uint64_t h1 = async_fault_run(modes[m], to, K_PROCS, batches[bi]);

			assert_true(async_fault_run(modes[m], to, K_PROCS, batches[bi]) == h1);
			assert_true(async_fault_run(modes[m], to, K_INLINE, batches[bi]) == h1);
		}
}

/* Closing an async pool with commands in flight (a worker hung in one of
 * them, the other with a group queued) leaves no worker behind. */
static void test_async_close(void **state)
{
	for (uint32_t batch = 3; batch <= 4; batch++) {
		sr_env_spec f = faulty(M_HANG);
		sr_pool *p = mka(&f, NULL, 8, 2, K_PROCS, 0, 0, 0, batch);
		sr_pool_worker_stats ws[2];
		const sr_batch *b;
		int32_t act[8] = {0};
		uint32_t ids[8];

		assert_int_equal(sr_pool_reset(p, &b), 0);
		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < b->n; i++) {
			ids[i] = b->env_id[i];
			act[i] = ids[i] >= 4 ? 2 : 0; /* worker 1's envs hang */
		}
		assert_int_equal(sr_pool_send(p, act, ids, b->n), 0);
		assert_int_equal(sr_pool_recv(p, &b), 0); /* the other group or rows */
		for (uint32_t i = 0; i < b->n; i++)
			ids[i] = b->env_id[i];
		memset(act, 0, sizeof(act));
		assert_int_equal(sr_pool_send(p, act, ids, b->n), 0);
		for (uint32_t w = 0; w < 2; w++)
			assert_int_equal(sr_pool_worker_stats_get(p, w, &ws[w]), 0);
		sr_pool_destroy(p);
		for (uint32_t w = 0; w < 2; w++) {
			assert_int_equal(kill(ws[w].pid, 0), -1);
			assert_int_equal(errno, ESRCH);
		}
	}
}

static void test_close(void **state)
{
	sr_env_spec f = faulty(M_HANG);
	sr_pool *p = mk(&f, NULL, 4, 2, K_PROCS, 0, 0, 0);
	sr_pool_worker_stats ws[2];
	const sr_batch *b;

	assert_int_equal(sr_pool_reset(p, &b), 0);
	for (uint32_t w = 0; w < 2; w++)
		assert_int_equal(sr_pool_worker_stats_get(p, w, &ws[w]), 0);
	sr_pool_destroy(p);
	for (uint32_t w = 0; w < 2; w++) {
		assert_int_equal(kill(ws[w].pid, 0), -1);
		assert_int_equal(errno, ESRCH);
	}
}

/* Process workers are bound where the placement plan puts them (bind
 * core: one CPU each), and so are their restarts; the calling thread keeps
 * its affinity unless SR_POOL_F_BIND_CALLER binds it to worker 0's CPU
 * (worker 0 inline). Needs two allowed CPUs. */
static void test_bind(void **state)
{
	cpu_set_t all, now, one;
	(void)state;

	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	if (CPU_COUNT(&all) < 2) {
		skip();
		return;
	}
	for (int kind = K_PROCS; kind <= K_INLINE; kind++)
		for (int caller = 0; caller < 2; caller++) {
			sr_pool_opts o;
			sr_pool *p = NULL;
			sr_pool_worker_stats ws;
			const sr_batch *b;
			int32_t a[8] = {0};
			pid_t old;

			sr_pool_opts_init(&o);
			o.flags = SR_POOL_F_SEED | SR_POOL_F_PROCS |
				  (kind == K_INLINE ? SR_POOL_F_PROC_INLINE : 0) |
				  (caller ? SR_POOL_F_BIND_CALLER : 0);
			o.env = "CartPole-v1";
			o.num_envs = 8;
			o.num_threads = 2;
			o.bind = SR_BIND_CORE;
			assert_int_equal(sr_pool_create(&o, &p), 0);
			assert_int_equal(sr_pool_reset(p, &b), 0);
			for (uint32_t w = 0; w < 2; w++) {
				assert_int_equal(sr_pool_worker_stats_get(p, w, &ws), 0);
				if (w == 0 && kind == K_INLINE) {
					/* The calling thread: bound only when asked. */
					assert_int_equal(sched_getaffinity(0, sizeof(now), &now), 0);
					if (caller) {
						assert_true(ws.cpu >= 0);
						CPU_ZERO(&one);
						CPU_SET(ws.cpu, &one);
						assert_true(CPU_EQUAL(&now, &one));
					} else {
						assert_int_equal(ws.cpu, -ENOENT);
						assert_true(CPU_EQUAL(&now, &all));
					}
					continue;
				}
				assert_true(ws.pid > 0 && ws.cpu >= 0);
				assert_int_equal(sched_getaffinity(ws.pid, sizeof(now), &now), 0);
				CPU_ZERO(&one);
				CPU_SET(ws.cpu, &one);
				assert_true(CPU_EQUAL(&now, &one));
			}
			if (!caller) {
				/* Spawning the workers left this thread as it was. */
				assert_int_equal(sched_getaffinity(0, sizeof(now), &now), 0);
				assert_true(CPU_EQUAL(&now, &all));
			}
			/* A restart is bound like the first one. */
			assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
			old = ws.pid;
			assert_int_equal(kill(old, SIGKILL), 0);
			while (ws.restarts == 0) {
				assert_int_equal(sr_pool_step(p, a, &b), 0);
				assert_int_equal(sr_pool_worker_stats_get(p, 1, &ws), 0);
			}
			assert_true(ws.pid > 0 && ws.pid != old);
			assert_int_equal(sched_getaffinity(ws.pid, sizeof(now), &now), 0);
			CPU_ZERO(&one);
			CPU_SET(ws.cpu, &one);
			assert_true(CPU_EQUAL(&now, &one));
			sr_pool_destroy(p);
			assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
		}
}

/* An inline slice of the caller's (proc_inline): rows whose obs[0] is
 * 1000 * info->restarts + the command count; it fails at command fail_at. */
struct cb {
	uint32_t calls, fail_at, restarts_seen, first, n;
};

static int inline_cb(void *arg, sr_proc_worker *w, const sr_proc_info *in, const sr_proc_cmd *c)
{
	struct cb *x = arg;
	sr_ring *r = in->ring;
	const uint64_t m = sr_ring_capacity(r) - 1;

	x->calls++;
	x->restarts_seen = in->restarts;
	x->first = in->first_env;
	x->n = in->n_envs;
	if (x->calls == x->fail_at) {
		/* Half its rows published, then it fails. */
		uint64_t q = c->seq + in->first_env;

		sr_ring_obs_col(r)[(q & m) * in->obs_dim] = -1.0f;
		sr_ring_flags_col(r)[q & m] = SR_SLOT_FIRST;
		sr_ring_env_id_col(r)[q & m] = in->first_env;
		sr_ring_prev_col(r)[q & m] = SR_RING_NO_PREV;
		sr_ring_truncated_col(r)[q & m] = 0;
		sr_ring_publish(r, q, 1);
		sr_proc_worker_fail(w, "Traceback: ValueError: env 0 broke");
		return 1;
	}
	for (uint32_t i = 0; i < in->n_envs; i++) {
		uint64_t q = c->seq + in->first_env + i, s = q & m;

		for (uint32_t d = 0; d < in->obs_dim; d++)
			sr_ring_obs_col(r)[s * in->obs_dim + d] =
				(float)(1000u * in->restarts + x->calls);
		sr_ring_reward_col(r)[s] = 0.0f;
		sr_ring_terminated_col(r)[s] = 0;
		sr_ring_truncated_col(r)[s] = 0;
		sr_ring_flags_col(r)[s] = c->kind == SR_PROC_CMD_RESET ? SR_SLOT_FIRST : 0;
		sr_ring_env_id_col(r)[s] = in->first_env + i;
		sr_ring_prev_col(r)[s] = SR_RING_NO_PREV;
	}
	sr_ring_publish(r, c->seq + in->first_env, in->n_envs);
	return 0;
}

static void test_inline_fn(void **state)
{
	sr_pool_opts o;
	sr_pool *p = NULL;
	const sr_batch *b;
	sr_pool_faults fs;
	struct cb x = {.fail_at = 4};
	int32_t act[8] = {0};
	sr_ring *r;
	uint64_t m;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_SEED | SR_POOL_F_PROCS | SR_POOL_F_PROC_INLINE;
	o.env = "CartPole-v1";
	o.num_envs = 8;
	o.num_threads = 2;
	o.bind = SR_BIND_NONE;
	o.max_restarts = 1;
	o.proc_inline = inline_cb;
	o.proc_inline_arg = &x;
	assert_int_equal(sr_pool_create(&o, &p), 0);
	r = t_pool_info(p).ring;
	m = sr_ring_capacity(r) - 1;
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(x.first, 0);
	assert_int_equal(x.n, 4);
	assert_true(b->obs[0] == 1.0f);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_true(b->obs[3 * 4] == 3.0f);
	/* Command 4: the slice fails after publishing env 0's row. */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_true(b->obs[0] == -1.0f);
	assert_false(sr_ring_flags_col(r)[b->first_seq & m] & SR_SLOT_FAULT);
	for (uint32_t i = 1; i < 8; i++) {
		bool f = i < 4;

		assert_int_equal(!!(sr_ring_flags_col(r)[(b->first_seq + i) & m] & SR_SLOT_FAULT), f);
		if (f)
			assert_int_equal(b->truncated[i], 1);
	}
	assert_int_equal(sr_pool_faults_get(p, &fs), 0);
	assert_int_equal(fs.faults, 1);
	assert_int_equal(fs.restarts, 1);
	assert_int_equal(fs.fault_rows, 3);
	assert_non_null(strstr(fs.last, "envs 0-3, worker 0 (inline)"));
	assert_non_null(strstr(fs.last, "ValueError: env 0 broke"));
	/* The next command sees the restart. */
	assert_int_equal(sr_pool_step(p, act, &b), 0);
	assert_int_equal(x.restarts_seen, 1);
	assert_true(b->obs[0] == 1005.0f);
	/* Past the budget: -EOWNERDEAD, and it stays so. */
	x.fail_at = 6;
	assert_int_equal(sr_pool_step(p, act, &b), -EOWNERDEAD);
	assert_non_null(strstr(sr_last_error(), "restart budget of 1"));
	assert_non_null(strstr(sr_last_error(), "worker 0 (inline)"));
	assert_int_equal(sr_pool_step(p, act, &b), -EOWNERDEAD);
	sr_pool_destroy(p);

	/* A worker program without proc_inline cannot be inline. */
	{
		const char *argv[] = {"/bin/true", NULL};

		o.proc_inline = NULL;
		o.worker_argv = argv;
		assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "needs proc_inline"));
		o.flags = SR_POOL_F_PROC_INLINE;
		o.worker_argv = NULL;
		assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "SR_POOL_F_PROCS too"));
	}
}

static void test_errors(void **state)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.flags = SR_POOL_F_PROCS;
	o.env = "CartPole-v1";
	o.num_envs = 8;
	o.batch_size = 4;
	{
		/* Async needs the C env worker: a program of the caller's
		 * steps whole slices. */
		const char *argv[] = {"/bin/true", NULL};

		o.worker_argv = argv;
		assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "C env worker"));
		o.worker_argv = NULL;
	}
	{
		/* Reset seeds and options go to the workers (run_reset_ex has
		 * their rows); a bad option is refused before anything is sent;
		 * a reset mask works. */
		sr_pool_reset_opts ro;
		const sr_batch *b;
		uint8_t mask[8] = {1, 0, 0, 0, 0, 0, 0, 1};
		const uint8_t *flags;
		uint64_t cap;

		o.batch_size = 0;
		assert_int_equal(sr_pool_create(&o, &p), 0);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		sr_pool_reset_opts_init(&ro);
		ro.flags = SR_RESET_F_SEED;
		ro.seed = 7;
		assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
		ro.flags = SR_RESET_F_OPTIONS;
		ro.options = "low=-0.01,high=0.01";
		assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
		ro.options = "low=0.1,high=-0.1";
		assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
		ro.options = "width=3";
		assert_int_equal(sr_pool_reset_ex(p, &ro, &b), -EINVAL);
		ro.flags = SR_RESET_F_MASK;
		ro.mask = mask;
		assert_int_equal(sr_pool_reset_ex(p, &ro, &b), 0);
		assert_int_equal(b->n, 8);
		/* Env parameters: each worker process keeps the spec it
		 * started with, so a live change is refused. */
		assert_int_equal(sr_pool_set_params(p, "gravity=12"), -ENOTSUP);
		assert_non_null(strstr(sr_last_error(), "fixed when it is made"));
		flags = sr_ring_flags_col(t_pool_info(p).ring);
		cap = sr_ring_capacity(t_pool_info(p).ring);
		for (uint32_t i = 0; i < 8; i++)
			assert_int_equal(flags[(b->first_seq + i) & (cap - 1)],
					 mask[i] ? SR_SLOT_FIRST : SR_SLOT_PAD);
		sr_pool_destroy(p);
		p = NULL;
	}
	{
		/* Out areas (sr_pool_worker_out): one per worker, in the command
		 * block, shared with the worker processes; process pools only. */
		void *a0, *a1, *a;
		size_t s0, s1, s;

		o.batch_size = 0;
		o.num_threads = 2;
		o.worker_out_size = 4096;
		o.flags = 0;
		assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "worker_out_size"));
		o.flags = SR_POOL_F_PROCS;
		o.worker_out_size = ((size_t)256 << 20) + 1;
		assert_int_equal(sr_pool_create(&o, &p), -EINVAL);
		o.worker_out_size = 4096;
		assert_int_equal(sr_pool_create(&o, &p), 0);
		assert_int_equal(sr_pool_worker_out(p, 0, &a0, &s0), 0);
		assert_int_equal(sr_pool_worker_out(p, 1, &a1, &s1), 0);
		assert_non_null(a0);
		assert_non_null(a1);
		assert_int_equal(s0, 4096);
		assert_int_equal(s1, 4096);
		assert_true((char *)a1 >= (char *)a0 + 4096 || (char *)a0 >= (char *)a1 + 4096);
		memset(a0, 1, s0); /* writable, the whole of it */
		memset(a1, 2, s1);
		assert_int_equal(sr_pool_worker_out(p, 2, &a, &s), -EINVAL);
		sr_pool_destroy(p);
		p = NULL;
		o.worker_out_size = 0;
		assert_int_equal(sr_pool_create(&o, &p), 0);
		assert_int_equal(sr_pool_worker_out(p, 1, &a, &s), 0);
		assert_null(a);
		assert_int_equal(s, 0);
		sr_pool_destroy(p);
		p = NULL;
		o.flags = 0;
		assert_int_equal(sr_pool_create(&o, &p), 0);
		assert_int_equal(sr_pool_worker_out(p, 0, &a, &s), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "not a process pool"));
		sr_pool_destroy(p);
		p = NULL;
		o.flags = SR_POOL_F_PROCS;
	}
	{
		/* A worker program that fails: create says why. */
		const char *argv[] = {"/bin/false", NULL};

		o.batch_size = 0;
		o.worker_argv = argv;
		assert_int_equal(sr_pool_create(&o, &p), -ECHILD);
		assert_non_null(strstr(sr_last_error(), "exited with code 1"));
	}
	assert_null(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_same_as_threads),
		cmocka_unit_test(test_reset_ex_same_as_threads),
		cmocka_unit_test(test_faults),
		cmocka_unit_test(test_budget),
		cmocka_unit_test(test_inline_fn),
		cmocka_unit_test(test_long_run),
		cmocka_unit_test(test_close),
		cmocka_unit_test(test_async_same_as_threads),
		cmocka_unit_test(test_async_streams),
		cmocka_unit_test(test_async_faults),
		cmocka_unit_test(test_async_close),
		cmocka_unit_test(test_bind),
		cmocka_unit_test(test_trainer_killed),
		cmocka_unit_test(test_stats_block),
		cmocka_unit_test(test_trainer_killed_named),
	};

	/* Sanitizer runtimes in the workers must let the faults through as
	 * the signals they are. */
	{
		const char *names[] = {"ASAN_OPTIONS", "TSAN_OPTIONS"};
		char buf[2048];

		for (int i = 0; i < 2; i++) {
			const char *v = getenv(names[i]);

			snprintf(buf, sizeof(buf), "%s%shandle_segv=0:handle_abort=0", v ? v : "",
				 v && *v ? ":" : "");
			setenv(names[i], buf, 1);
		}
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
