/* Pool checkpoints: exact resume in a new process, the replay window,
 * geometry mismatches, corruption, a read error in the middle of the replay
 * window and a file changed after the verify pass leave the pool untouched, one
 * checkpoint in flight (-EBUSY), failures reported by wait/poll, async
 * pools. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/checkpoint.h"
#include "ckpt_internal.h"
#include "helpers.h"

static char dir[256];
/* The env of mk_pool's pools (the Box2D tests switch it). */
static const char *env_name = "CartPole-v1";

static int setup(void **st)
{
	(void)st;
	return t_mkdtemp(dir, sizeof(dir), "sr-ckptp");
}

static int teardown(void **st)
{
	(void)st;
	return t_rmtree(dir);
}

static sr_pool *mk_pool(uint32_t n, uint32_t threads, uint64_t ring_cap, uint32_t batch)
{
	sr_pool_opts o;
	sr_pool *p = NULL;

	sr_pool_opts_init(&o);
	o.env = env_name;
	o.num_envs = n;
	o.num_threads = threads;
	o.bind = SR_BIND_NONE;
	o.flags |= SR_POOL_F_SEED;
	o.seed = 42;
	o.ring_capacity = ring_cap;
	o.batch_size = batch;
	if (sr_pool_create(&o, &p)) {
		fprintf(stderr, "pool: %s\n", sr_last_error());
		return NULL;
	}
	return p;
}

/* Actions depend only on the step number: both runs send the same ones.
 * Discrete: 0 .. act_n - 1 (CartPole: the top bit); box: within bounds. */
static void actions_for(const sr_env_spec *sp, uint64_t step, void *act, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint64_t x = step * 7919 + i;
		if (sp->act_kind == SR_SPACE_DISCRETE) {
			int32_t v = sp->act_n == 2 ? (int32_t)(sr_splitmix64(&x) >> 63)
						   : (int32_t)((sr_splitmix64(&x) >> 32) % sp->act_n);
			((int32_t *)act)[i] = v;
			continue;
		}
		for (uint32_t d = 0; d < sp->act_dim; d++) {
			double u = (double)(sr_splitmix64(&x) >> 11) * 0x1.0p-53;
			((float *)act)[i * sp->act_dim + d] =
				(float)(sp->act_low[d] + (sp->act_high[d] - sp->act_low[d]) * u);
		}
	}
}

/* Step @m times from step number @k; returns the hash of every batch. */
static uint64_t run(sr_pool *p, uint64_t k, uint64_t m)
{
	uint32_t n = t_pool_info(p).num_envs;
	const sr_env_spec *sp = t_pool_info(p).spec;
	void *a = malloc(n * sr_env_action_size(sp));
	const sr_batch *b;
	uint64_t h = T_FNV_INIT;

	for (uint64_t s = k; s < k + m; s++) {
		actions_for(sp, s, a, n);
		assert_int_equal(sr_pool_step(p, a, &b), 0);
		h = t_hash_batch(h, b);
	}
	free(a);
	return h;
}

#define NENV 16
#define K 300
#define M 400

/* Child mode: restore and continue, print the hash and the counters. */
static int child(const char *path, uint32_t threads, uint32_t nenv, uint64_t k, uint64_t m)
{
	sr_pool *p = mk_pool(nenv, threads, 1u << 12, 0);
	sr_pool_stats st;

	if (!p || sr_pool_restore(p, path)) {
		fprintf(stderr, "restore: %s\n", sr_last_error());
		return 1;
	}
	uint64_t h = run(p, k, m);
	sr_pool_stats_get(p, &st);
	printf("%016llx %llu %llu %.9g\n", (unsigned long long)h, (unsigned long long)st.steps,
	       (unsigned long long)st.episodes, st.mean_return);
	sr_pool_destroy(p);
	return 0;
}

static void run_child_env(const char *path, uint32_t threads, uint32_t nenv, uint64_t k,
			  uint64_t m, char *out, size_t n)
{
	int pfd[2], status;
	char th[16], ne[16], ks[24], ms[24];

	snprintf(th, sizeof(th), "%u", threads);
	snprintf(ne, sizeof(ne), "%u", nenv);
	snprintf(ks, sizeof(ks), "%llu", (unsigned long long)k);
	snprintf(ms, sizeof(ms), "%llu", (unsigned long long)m);
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 1);
		close(pfd[0]);
		execl("/proc/self/exe", "test_ckpt_pool", "child", path, th, env_name, ne, ks, ms,
		      (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	ssize_t r = read(pfd[0], out, n - 1);
	close(pfd[0]);
	assert_true(r > 0);
	out[r] = '\0';
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void run_child(const char *path, uint32_t threads, char *out, size_t n)
{
	run_child_env(path, threads, NENV, K, M, out, n);
}

/* Run K steps, checkpoint, run M more; a new process restores and runs M:
 * same obs, rewards, flags, ring sequences and statistics. */
static void test_exact_resume(void **st)
{
	const uint32_t backends[] = {SR_CKPT_BACKEND_URING, SR_CKPT_BACKEND_PWRITE,
				     SR_CKPT_BACKEND_SYNC};
	char path[300], want[128], got[128];
	sr_pool *p;
	const sr_batch *b;

	(void)st;
	for (size_t bi = 0; bi < 3; bi++) {
		sr_ckpt_opts o;
		sr_ckpt_status cs;
		sr_pool_stats ps;
		sr_ckpt_info info;

		snprintf(path, sizeof(path), "%s/resume-%zu.ckpt", dir, bi);
		p = mk_pool(NENV, 2, 1u << 12, 0);
		assert_non_null(p);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		run(p, 0, K);
		sr_ckpt_opts_init(&o);
		o.flags = SR_CKPT_F_BACKEND | SR_CKPT_F_REPLAY;
		o.backend = backends[bi];
		if (backends[bi] == SR_CKPT_BACKEND_PWRITE)
			o.flags |= SR_CKPT_F_NO_STAGE; /* straight from the ring */
		assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
		uint64_t h = run(p, K, M); /* stepping while the writer runs */
		assert_int_equal(sr_pool_checkpoint_wait(p, &cs), 0);
		assert_int_equal(cs.count, 1);
		assert_int_equal(cs.result, 0);
		assert_int_equal(cs.state, SR_CKPT_STATE_IDLE);
		assert_true(cs.bytes > 0);
		sr_pool_stats_get(p, &ps);
		snprintf(want, sizeof(want), "%016llx %llu %llu %.9g", (unsigned long long)h,
			 (unsigned long long)ps.steps, (unsigned long long)ps.episodes,
			 ps.mean_return);
		assert_true(ps.episodes > 0);
		sr_pool_destroy(p);

		assert_int_equal(sr_checkpoint_verify(path, &info), 0);
		assert_string_equal(info.env_id, "CartPole-v1");
		assert_int_equal(info.num_envs, NENV);
		assert_int_equal(info.seed, 42);
		assert_int_equal(info.steps, (uint64_t)NENV * (K + 1));
		/* The pool laps its 4096-slot ring while the window is written:
		 * lapped slots are dropped, never saved torn. SYNC keeps all. */
		assert_int_equal(cs.replay_slots + cs.replay_dropped, 1u << 12);
		assert_int_equal(info.replay_slots, cs.replay_slots);
		if (backends[bi] == SR_CKPT_BACKEND_SYNC)
			assert_int_equal(info.replay_slots, 1u << 12);

		/* Another process, another thread count: same trajectories. */
		run_child(path, 1, got, sizeof(got));
		got[strcspn(got, "\n")] = '\0';
		assert_string_equal(got, want);
	}
}

/* Replay window: the restored ring holds the same live slots. */
static void test_replay_window(void **st)
{
	char path[300];
	const uint64_t cap = 1u << 11;
	sr_pool *a, *c;
	const sr_batch *b;
	sr_ckpt_opts o;

	(void)st;
	snprintf(path, sizeof(path), "%s/replay.ckpt", dir);
	a = mk_pool(NENV, 2, cap, 0);
	assert_int_equal(sr_pool_reset(a, &b), 0);
	run(a, 0, 500);
	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_REPLAY | SR_CKPT_F_CHUNK | SR_CKPT_F_BACKEND;
	o.backend = SR_CKPT_BACKEND_SYNC;
	o.chunk_size = 64 << 10; /* several blocks */
	assert_int_equal(sr_pool_checkpoint(a, path, &o), 0);

	c = mk_pool(NENV, 1, cap, 0);
	assert_int_equal(sr_pool_restore(c, path), 0);
	sr_ring *ra = t_pool_info(a).ring, *rc = t_pool_info(c).ring;
	assert_int_equal(sr_ring_head(ra), sr_ring_head(rc));
	assert_int_equal(sr_ring_cursor(ra), sr_ring_cursor(rc));
	uint64_t h = sr_ring_head(ra);
	for (uint64_t s = h - cap; s < h; s++) {
		uint64_t i = s & (cap - 1);
		assert_true(sr_ring_slot_valid(rc, s));
		assert_memory_equal(sr_ring_obs_col(ra) + i * 4, sr_ring_obs_col(rc) + i * 4, 16);
		assert_memory_equal(sr_ring_action_col(ra) + i * 4, sr_ring_action_col(rc) + i * 4, 4);
		assert_memory_equal(&sr_ring_reward_col(ra)[i], &sr_ring_reward_col(rc)[i], 4);
		assert_int_equal(sr_ring_terminated_col(ra)[i], sr_ring_terminated_col(rc)[i]);
		assert_int_equal(sr_ring_truncated_col(ra)[i], sr_ring_truncated_col(rc)[i]);
		assert_int_equal(sr_ring_flags_col(ra)[i], sr_ring_flags_col(rc)[i]);
		assert_int_equal(sr_ring_env_id_col(ra)[i], sr_ring_env_id_col(rc)[i]);
		assert_int_equal(sr_ring_prev_col(ra)[i], sr_ring_prev_col(rc)[i]);
	}
	assert_false(sr_ring_slot_valid(rc, h));
	/* And both continue identically. */
	assert_int_equal(run(a, 500, 50), run(c, 500, 50));

	/* A ring of another size cannot take the window: refused, untouched. */
	sr_pool *d = mk_pool(NENV, 1, cap * 2, 0);
	assert_int_equal(sr_pool_restore(d, path), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "ring_capacity"));
	sr_pool_destroy(d);
	sr_pool_destroy(a);
	sr_pool_destroy(c);
}

/* Mismatches and corruption: clear errors, and the pool goes on exactly as
 * an untouched twin. */
static void test_refused_untouched(void **st)
{
	char path[300], bad[300], cmd[700];
	sr_pool *a, *x, *twin;
	const sr_batch *b;
	sr_ckpt_opts o;
	sr_ckpt_info info;

	(void)st;
	snprintf(path, sizeof(path), "%s/good.ckpt", dir);
	snprintf(bad, sizeof(bad), "%s/bad.ckpt", dir);
	a = mk_pool(NENV, 1, 1u << 12, 0);
	assert_int_equal(sr_pool_reset(a, &b), 0);
	run(a, 0, 100);
	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_REPLAY;
	assert_int_equal(sr_pool_checkpoint(a, path, &o), 0);
	assert_int_equal(sr_pool_checkpoint_wait(a, NULL), 0);
	sr_pool_destroy(a);

	/* Wrong num_envs. */
	x = mk_pool(NENV / 2, 1, 1u << 12, 0);
	assert_int_equal(sr_pool_restore(x, path), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "num_envs"));
	sr_pool_destroy(x);

	/* Wrong env. */
	sr_pool_opts po;
	sr_pool_opts_init(&po);
	po.env = "MountainCar-v0";
	po.num_envs = NENV;
	po.num_threads = 1;
	po.bind = SR_BIND_NONE;
	po.ring_capacity = 1u << 12;
	if (sr_pool_create(&po, &x) == 0) {
		assert_int_equal(sr_pool_restore(x, path), -EINVAL);
		assert_non_null(strstr(sr_last_error(), "env differs"));
		sr_pool_destroy(x);
	}

	/* Corrupt: a flipped bit in each section; untouched pool. */
	assert_int_equal(sr_checkpoint_verify(path, &info), 0);
	x = mk_pool(NENV, 1, 1u << 12, 0);
	twin = mk_pool(NENV, 1, 1u << 12, 0);
	assert_int_equal(sr_pool_reset(x, &b), 0);
	assert_int_equal(sr_pool_reset(twin, &b), 0);
	run(x, 0, 20);
	run(twin, 0, 20);
	for (uint32_t i = 0; i < info.n_sections; i++) {
		snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, bad);
		assert_int_equal(system(cmd), 0);
		int fd = open(bad, O_RDWR);
		uint8_t byte;
		uint64_t off = info.sections[i].offset + info.sections[i].length / 2;
		assert_int_equal(pread(fd, &byte, 1, (off_t)off), 1);
		byte ^= 0x10;
		assert_int_equal(pwrite(fd, &byte, 1, (off_t)off), 1);
		close(fd);
		assert_int_equal(sr_pool_restore(x, bad), -EBADMSG);
		assert_non_null(strstr(sr_last_error(), sr__ckpt_section_name(info.sections[i].type)));
	}
	/* Truncated, missing. */
	assert_int_equal(truncate(bad, (off_t)info.file_size / 2), 0);
	assert_int_equal(sr_pool_restore(x, bad), -EBADMSG);
	snprintf(bad, sizeof(bad), "%s/missing.ckpt", dir);
	assert_int_equal(sr_pool_restore(x, bad), -ENOENT);
	assert_int_equal(sr_ring_head(t_pool_info(x).ring), sr_ring_head(t_pool_info(twin).ring));
	assert_int_equal(run(x, 20, 100), run(twin, 20, 100));
	sr_pool_destroy(x);
	sr_pool_destroy(twin);
}

/* One checkpoint in flight: NOWAIT gives -EBUSY, the pool keeps stepping,
 * a failure is reported once by wait. */
static void test_busy_and_failure(void **st)
{
	char path[300];
	sr_pool *p;
	const sr_batch *b;
	sr_ckpt_opts o;
	sr_ckpt_status cs;

	(void)st;
	snprintf(path, sizeof(path), "%s/busy.ckpt", dir);
	p = mk_pool(NENV, 2, 1u << 16, 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	run(p, 0, 100);
	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_REPLAY | SR_CKPT_F_NOWAIT | SR_CKPT_F_CHUNK;
	o.chunk_size = 256 << 10; /* 2.5 MiB window: ~10 pieces, 30 ms each */
	atomic_store(&sr__ckpt_chunk_delay_us, 30000);
	assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
	assert_int_equal(sr_pool_checkpoint_poll(p, &cs), -EINPROGRESS);
	assert_int_equal(cs.state, SR_CKPT_STATE_WRITING);
	assert_int_equal(sr_pool_checkpoint(p, path, &o), -EBUSY);
	assert_non_null(strstr(sr_last_error(), "still being written"));
	run(p, 100, 50); /* the pool steps on */
	atomic_store(&sr__ckpt_chunk_delay_us, 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, &cs), 0);
	assert_int_equal(cs.count, 1);
	assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
	/* Without NOWAIT a second request waits for the first. */
	o.flags &= ~(uint32_t)SR_CKPT_F_NOWAIT;
	assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
	assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, &cs), 0);
	assert_int_equal(cs.count, 3);

	/* A failure in the background: reported once, old file intact. */
	atomic_store(&sr__ckpt_fault_err, ENOSPC);
	atomic_store(&sr__ckpt_fault_at, 8192);
	assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, &cs), -ENOSPC);
	atomic_store(&sr__ckpt_fault_at, UINT64_MAX);
	assert_non_null(strcasestr(sr_last_error(), "no space"));
	assert_int_equal(cs.state, SR_CKPT_STATE_FAILED);
	assert_int_equal(sr_pool_checkpoint_poll(p, NULL), 0);
	assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
	/* SYNC returns the error itself. */
	o.flags |= SR_CKPT_F_BACKEND;
	o.backend = SR_CKPT_BACKEND_SYNC;
	atomic_store(&sr__ckpt_fault_at, 8192);
	assert_int_equal(sr_pool_checkpoint(p, path, &o), -ENOSPC);
	atomic_store(&sr__ckpt_fault_at, UINT64_MAX);
	assert_int_equal(sr_pool_checkpoint_poll(p, NULL), 0);
	/* Bad options. */
	o.flags = 1u << 30;
	assert_int_equal(sr_pool_checkpoint(p, path, &o), -EINVAL);
	assert_int_equal(sr_pool_checkpoint(NULL, path, NULL), -EINVAL);
	/* Destroy with a checkpoint in flight waits for it. */
	assert_int_equal(sr_pool_checkpoint(p, path, NULL), 0);
	sr_pool_destroy(p);
	assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
}

/* Async pools: refused while steps are in flight, fine once received. */
static void test_async(void **st)
{
	char path[300];
	sr_pool *p, *q;
	const sr_batch *b;

	(void)st;
	snprintf(path, sizeof(path), "%s/async.ckpt", dir);
	p = mk_pool(8, 2, 1u << 10, 4);
	assert_non_null(p);
	assert_int_equal(sr_pool_reset(p, NULL), 0);
	assert_int_equal(sr_pool_checkpoint(p, path, NULL), -EBUSY);
	assert_non_null(strstr(sr_last_error(), "in flight"));
	assert_int_equal(sr_pool_recv(p, &b), 0);
	assert_int_equal(sr_pool_recv(p, &b), 0);
	assert_int_equal(sr_pool_checkpoint(p, path, NULL), 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, NULL), 0);
	q = mk_pool(8, 1, 1u << 10, 4);
	assert_int_equal(sr_pool_restore(q, path), 0);
	/* Same actions to every env: same results. */
	int32_t a[8] = {1, 0, 1, 0, 1, 1, 0, 0};
	uint32_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	float oa[8][4], oq[8][4];
	assert_int_equal(sr_pool_send(p, a, ids, 8), 0);
	assert_int_equal(sr_pool_send(q, a, ids, 8), 0);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(sr_pool_recv(p, &b), 0);
		for (uint32_t i = 0; i < b->n; i++)
			memcpy(oa[b->env_id[i]], b->obs + i * 4, 16);
		assert_int_equal(sr_pool_recv(q, &b), 0);
		for (uint32_t i = 0; i < b->n; i++)
			memcpy(oq[b->env_id[i]], b->obs + i * 4, 16);
	}
	assert_memory_equal(oa, oq, sizeof(oa));
	sr_pool_destroy(p);
	sr_pool_destroy(q);
}

/* Read-hook fault: the @nth read (from 1) that starts inside [lo, hi) of
 * the file fails with -EIO (flip = false) or comes back with a bit flipped,
 * as if the file had been rewritten in place after the verify pass. */
static struct read_fault {
	uint64_t lo, hi;
	int nth, seen, hit;
	bool flip;
} rf;

static int read_fault(void *buf, size_t len, uint64_t off)
{
	if (off < rf.lo || off >= rf.hi || ++rf.seen != rf.nth)
		return 0;
	rf.hit++;
	if (!rf.flip)
		return -EIO;
	((uint8_t *)buf)[len / 2] ^= 0x04;
	return 0;
}

static void assert_rings_equal(sr_pool *x, sr_pool *y, uint64_t cap)
{
	sr_ring *rx = t_pool_info(x).ring, *ry = t_pool_info(y).ring;

	assert_int_equal(sr_ring_head(rx), sr_ring_head(ry));
	assert_int_equal(sr_ring_cursor(rx), sr_ring_cursor(ry));
	for (uint64_t s = 0; s < cap + 16; s++)
		assert_int_equal(sr_ring_slot_valid(rx, s), sr_ring_slot_valid(ry, s));
	assert_memory_equal(sr_ring_obs_col(rx), sr_ring_obs_col(ry), cap * 16);
	assert_memory_equal(sr_ring_prev_col(rx), sr_ring_prev_col(ry), cap * 8);
}

/* A read error in the middle of the replay window's restore, or a section
 * whose bytes changed since the verify pass: the restore fails and the
 * pool is exactly as before (ring included): its next steps hash like a
 * twin that never tried. */
static void test_restore_fault_untouched(void **st)
{
	char path[300];
	const uint64_t cap = 1u << 11;
	sr_pool *a, *x, *twin;
	const sr_batch *b;
	sr_ckpt_opts o;
	sr_ckpt_info info;
	int ri = -1, si = -1;

	(void)st;
	snprintf(path, sizeof(path), "%s/fault.ckpt", dir);
	a = mk_pool(NENV, 1, cap, 0);
	assert_int_equal(sr_pool_reset(a, &b), 0);
	run(a, 0, 300);
	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_REPLAY | SR_CKPT_F_CHUNK | SR_CKPT_F_BACKEND;
	o.backend = SR_CKPT_BACKEND_SYNC;
	o.chunk_size = 64 << 10; /* 1680 slots a block: two blocks */
	assert_int_equal(sr_pool_checkpoint(a, path, &o), 0);
	sr_pool_destroy(a);
	assert_int_equal(sr_checkpoint_verify(path, &info), 0);
	for (uint32_t i = 0; i < info.n_sections; i++) {
		if (info.sections[i].type == SR_CKPT_SECT_REPLAY)
			ri = (int)i;
		if (info.sections[i].type == SR_CKPT_SECT_ENV_STATES)
			si = (int)i;
	}
	assert_true(ri >= 0 && si >= 0);
	assert_true(info.sections[ri].length > (uint64_t)o.chunk_size);

	x = mk_pool(NENV, 1, cap, 0);
	twin = mk_pool(NENV, 1, cap, 0);
	assert_int_equal(sr_pool_reset(x, &b), 0);
	assert_int_equal(sr_pool_reset(twin, &b), 0);
	run(x, 0, 20);
	run(twin, 0, 20);

	sr__ckpt_read_hook = read_fault;
	/* EIO on the second block of the replay window. */
	rf = (struct read_fault){.lo = info.sections[ri].offset,
			  .hi = info.sections[ri].offset + info.sections[ri].length, .nth = 2};
	assert_int_equal(sr_pool_restore(x, path), -EIO);
	assert_int_equal(rf.hit, 1);
	assert_rings_equal(x, twin, cap);
	/* The second block changed since verify: caught by the re-check. */
	rf = (struct read_fault){.lo = info.sections[ri].offset,
			  .hi = info.sections[ri].offset + info.sections[ri].length, .nth = 2,
			  .flip = true};
	assert_int_equal(sr_pool_restore(x, path), -EBADMSG);
	assert_int_equal(rf.hit, 1);
	assert_non_null(strstr(sr_last_error(), "changed since it was verified"));
	assert_non_null(strstr(sr_last_error(), "replay"));
	/* The env states changed since verify. */
	rf = (struct read_fault){.lo = info.sections[si].offset,
			  .hi = info.sections[si].offset + info.sections[si].length, .nth = 1,
			  .flip = true};
	assert_int_equal(sr_pool_restore(x, path), -EBADMSG);
	assert_int_equal(rf.hit, 1);
	assert_non_null(strstr(sr_last_error(), "env_states"));
	sr__ckpt_read_hook = NULL;

	assert_rings_equal(x, twin, cap);
	assert_int_equal(run(x, 20, 100), run(twin, 20, 100));
	/* And without a fault the same file restores. */
	assert_int_equal(sr_pool_restore(x, path), 0);
	assert_int_equal(sr_pool_restore(twin, path), 0);
	assert_int_equal(run(x, 300, 50), run(twin, 300, 50));
	sr_pool_destroy(x);
	sr_pool_destroy(twin);
}

/*
 * The Box2D envs (opaque state, saved by their save() and restored by
 * load() into new instances): K steps, a checkpoint, M more; another
 * process restores it into a pool of another thread count and runs the
 * same M steps: the same obs, rewards, flags and statistics. An async pool
 * (nothing in flight) restored into another pool answers the same actions
 * the same way. Another env's checkpoint leaves the pool untouched.
 */
static void test_box2d_resume(void **st)
{
	static const char *const envs[] = {"LunarLander-v3", "LunarLanderContinuous-v3",
					   "BipedalWalker-v3"};
	const uint64_t k = 70, m = 90;
	char path[300], want[128], got[128];
	sr_env_spec spec;

	(void)st;
	if (sr_env_find(envs[0], &spec)) {
		print_message("built without Box2D: skipped\n");
		return;
	}
	for (int e = 0; e < 3; e++) {
		sr_ckpt_opts o;
		sr_pool_stats ps;
		const sr_batch *b;

		env_name = envs[e];
		snprintf(path, sizeof(path), "%s/box2d-%d.ckpt", dir, e);
		sr_pool *p = mk_pool(6, 2, 1u << 12, 0);
		assert_non_null(p);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		run(p, 0, k);
		sr_ckpt_opts_init(&o);
		o.flags = SR_CKPT_F_BACKEND;
		o.backend = SR_CKPT_BACKEND_SYNC;
		assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
		uint64_t h = run(p, k, m);
		sr_pool_stats_get(p, &ps);
		snprintf(want, sizeof(want), "%016llx %llu %llu %.9g", (unsigned long long)h,
			 (unsigned long long)ps.steps, (unsigned long long)ps.episodes,
			 ps.mean_return);
		if (e < 2)
			assert_true(ps.episodes > 0); /* landers end within k + m steps */
		run_child_env(path, 1, 6, k, m, got, sizeof(got));
		got[strcspn(got, "\n")] = '\0';
		assert_string_equal(got, want);

		/* In this process too, over a pool that ran elsewhere. */
		sr_pool *q = mk_pool(6, 1, 1u << 12, 0);
		assert_int_equal(sr_pool_reset(q, &b), 0);
		run(q, 500, 33);
		assert_int_equal(sr_pool_restore(q, path), 0);
		assert_true(run(q, k, m) == h);

		sr_pool_destroy(q);
		sr_pool_destroy(p);
	}

	/* Async: checkpoint with nothing in flight, restore elsewhere, same
	 * answers to the same actions. */
	env_name = "BipedalWalker-v3";
	snprintf(path, sizeof(path), "%s/box2d-async.ckpt", dir);
	sr_pool *p = mk_pool(6, 2, 1u << 10, 3), *q;
	const sr_batch *b;
	assert_non_null(p);
	assert_int_equal(sr_pool_reset(p, NULL), 0);
	assert_int_equal(sr_pool_recv(p, &b), 0);
	assert_int_equal(sr_pool_recv(p, &b), 0);
	float act[6 * 4];
	uint32_t ids[6] = {0, 1, 2, 3, 4, 5};
	for (int t = 0; t < 20; t++) { /* some steps before the checkpoint */
		actions_for(t_pool_info(p).spec, (uint64_t)t, act, 6);
		assert_int_equal(sr_pool_send(p, act, ids, 6), 0);
		assert_int_equal(sr_pool_recv(p, &b), 0);
		assert_int_equal(sr_pool_recv(p, &b), 0);
	}
	assert_int_equal(sr_pool_checkpoint(p, path, NULL), 0);
	assert_int_equal(sr_pool_checkpoint_wait(p, NULL), 0);
	q = mk_pool(6, 1, 1u << 10, 3);
	assert_int_equal(sr_pool_restore(q, path), 0);
	float oa[6][24], oq[6][24];
	for (int t = 20; t < 40; t++) {
		actions_for(t_pool_info(p).spec, (uint64_t)t, act, 6);
		assert_int_equal(sr_pool_send(p, act, ids, 6), 0);
		assert_int_equal(sr_pool_send(q, act, ids, 6), 0);
		for (int r = 0; r < 2; r++) {
			assert_int_equal(sr_pool_recv(p, &b), 0);
			for (uint32_t i = 0; i < b->n; i++)
				memcpy(oa[b->env_id[i]], b->obs + i * 24, 96);
			assert_int_equal(sr_pool_recv(q, &b), 0);
			for (uint32_t i = 0; i < b->n; i++)
				memcpy(oq[b->env_id[i]], b->obs + i * 24, 96);
		}
		assert_memory_equal(oa, oq, sizeof(oa));
	}
	sr_pool_destroy(p);
	sr_pool_destroy(q);

	/* Another env type's checkpoint: refused, the pool untouched. */
	env_name = "LunarLander-v3";
	p = mk_pool(6, 1, 1u << 12, 0);
	q = mk_pool(6, 1, 1u << 12, 0);
	assert_int_equal(sr_pool_reset(p, &b), 0);
	assert_int_equal(sr_pool_reset(q, &b), 0);
	run(p, 0, 10);
	run(q, 0, 10);
	assert_int_not_equal(sr_pool_restore(p, path), 0);
	assert_true(run(p, 10, 40) == run(q, 10, 40));
	sr_pool_destroy(p);
	sr_pool_destroy(q);
	env_name = "CartPole-v1";
}

/*
 * The MuJoCo envs (opaque state; float64 observations): K steps, a
 * checkpoint, M more; another process restores it into a pool of another
 * thread count and runs the same M steps: the same obs, rewards, flags and
 * statistics; so does a pool of this process that ran elsewhere. Skipped
 * while the pool refuses float64 observations, and in a build without
 * MuJoCo.
 */
static void test_mujoco_resume(void **st)
{
	static const char *const envs[] = {"Hopper-v5", "Ant-v5",
					   "Humanoid-v5:frame_skip=3,ctrl_cost_weight=0.2"};
	const uint64_t k = 40, m = 60;
	char path[300], want[128], got[128];
	sr_env_spec spec;
	sr_pool_opts po;
	sr_pool *probe = NULL;

	(void)st;
	if (sr_env_find(envs[0], &spec)) {
		print_message("built without MuJoCo: skipped\n");
		return;
	}
	sr_pool_opts_init(&po);
	po.env = envs[0];
	po.num_envs = 2;
	po.num_threads = 1;
	po.bind = SR_BIND_NONE;
	int err = sr_pool_create(&po, &probe);
	sr_pool_destroy(probe);
	if (err == -ENOTSUP && strstr(sr_last_error(), "not supported by the pool yet")) {
		print_message("the pool refuses float64 observations: skipped (%s)\n",
			      sr_last_error());
		skip();
	}
	assert_int_equal(err, 0);
	for (int e = 0; e < 3; e++) {
		sr_ckpt_opts o;
		sr_pool_stats ps;
		const sr_batch *b;

		env_name = envs[e];
		snprintf(path, sizeof(path), "%s/mujoco-%d.ckpt", dir, e);
		sr_pool *p = mk_pool(5, 2, 1u << 10, 0);
		assert_non_null(p);
		assert_int_equal(sr_pool_reset(p, &b), 0);
		run(p, 0, k);
		sr_ckpt_opts_init(&o);
		o.flags = SR_CKPT_F_BACKEND;
		o.backend = SR_CKPT_BACKEND_SYNC;
		assert_int_equal(sr_pool_checkpoint(p, path, &o), 0);
		uint64_t h = run(p, k, m);
		sr_pool_stats_get(p, &ps);
		snprintf(want, sizeof(want), "%016llx %llu %llu %.9g", (unsigned long long)h,
			 (unsigned long long)ps.steps, (unsigned long long)ps.episodes,
			 ps.mean_return);
		run_child_env(path, 1, 5, k, m, got, sizeof(got));
		got[strcspn(got, "\n")] = '\0';
		assert_string_equal(got, want);
		sr_pool *q = mk_pool(5, 3, 1u << 10, 0);
		assert_int_equal(sr_pool_reset(q, &b), 0);
		run(q, 300, 17);
		assert_int_equal(sr_pool_restore(q, path), 0);
		assert_true(run(q, k, m) == h);
		sr_pool_destroy(q);
		sr_pool_destroy(p);
	}
	env_name = "CartPole-v1";
}

int main(int argc, char **argv)
{
	if (argc == 8 && !strcmp(argv[1], "child")) {
		env_name = argv[4];
		return child(argv[2], (uint32_t)atoi(argv[3]), (uint32_t)atoi(argv[5]),
			     strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10));
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exact_resume),
		cmocka_unit_test(test_replay_window),
		cmocka_unit_test(test_refused_untouched),
		cmocka_unit_test(test_restore_fault_untouched),
		cmocka_unit_test(test_busy_and_failure),
		cmocka_unit_test(test_async),
		cmocka_unit_test(test_box2d_resume),
		cmocka_unit_test(test_mujoco_resume),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
