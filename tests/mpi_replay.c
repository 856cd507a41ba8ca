#define _POSIX_C_SOURCE 200809L
/*
 * Replay across ranks (run by tests/mpi_replay.sh under mpirun):
 *   mpi_replay check [force|direct|noshm]  every rank steps its CartPole
 *       envs and, in between, samples from every rank's ring (direct: the
 *       node's rings mapped through shared memory; noshm: the other ranks'
 *       through MPI; force: every ring through MPI, its own too); each
 *       sampled (prev obs, action, obs) must follow CartPole's dynamics,
 *       its env must be one the ring's rank hosts, and the rings must be
 *       read the way the mode says
 *   mpi_replay bench          rank 0 samples batches of 256 (obs 3072):
 *       from rank 1's ring attached through shared memory against its own
 *       ring, and through the MPI path against a plain MPI_Get loop over
 *       the same slots' bytes, interleaved rounds; prints GB/s and ratios
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "stepring.h"
#include "stepring/mpi.h"

static int g_rank;

static void die(const char *what, int err)
{
	fprintf(stderr, "mpi_replay: rank %d: %s: %s (%s)\n", g_rank, what, sr_last_error(),
		sr_strerror(err));
	MPI_Abort(MPI_COMM_WORLD, 1);
}

/* Gymnasium's CartPole step from a float32 obs (the ring's), in doubles. */
static void cartpole(const float *s, int a, double *out)
{
	const double g = 9.8, mc = 1.0, mp = 0.1, l = 0.5, f = a ? 10.0 : -10.0, tau = 0.02;
	double x = s[0], xd = s[1], th = s[2], thd = s[3];
	double ct = cos(th), st = sin(th), tm = mc + mp, pml = mp * l;
	double temp = (f + pml * thd * thd * st) / tm;
	double tha = (g * st - ct * temp) / (l * (4.0 / 3.0 - mp * ct * ct / tm));
	double xa = temp - pml * tha * ct / tm;
	out[0] = x + tau * xd;
	out[1] = xd + tau * xa;
	out[2] = th + tau * thd;
	out[3] = thd + tau * tha;
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "check";
	bool force = argc > 2 && !strcmp(argv[2], "force"), bench = !strcmp(mode, "bench");
	bool noshm = argc > 2 && !strcmp(argv[2], "noshm");
	enum { B = 256 };
	const uint32_t od = bench ? 3072 : 4;
	sr_pool_opts o;
	sr_mpi_pool *mp;
	sr_mpi_pool_info in;
	sr_mpi_replay *rp;
	sr_mpi_sample smp;
	const sr_batch *b;
	int32_t *act;
	int size, err;
	sr_rng rng;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	sr_pool_opts_init(&o);
	o.env = bench ? "spin:obs_dim=3072" : "CartPole-v1";
	o.num_envs = bench ? 64u * (uint32_t)size : 48;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_SEED;
	o.seed = 5;
	err = sr_mpi_pool_create(MPI_COMM_WORLD, &o, NULL, &mp);
	if (err)
		die("create", err);
	sr_mpi_pool_info_get(mp, &in);
	act = calloc(in.local_envs, sizeof(*act));
	sr_rng_seed(&rng, 77, in.rank);
	err = sr_pool_reset(sr_mpi_pool_local(mp), &b);
	for (int t = 0; !err && t < (bench ? 40 : 30); t++) {
		for (uint32_t i = 0; i < in.local_envs; i++)
			act[i] = (int32_t)(sr_rng_next(&rng) & 1);
		err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
	}
	if (err)
		die("step", err);
	err = sr_mpi_replay_create(mp, force || bench ? SR_MPI_REPLAY_F_FORCE_MPI
						      : noshm ? SR_MPI_REPLAY_F_NO_SHM : 0, &rp);
	if (err)
		die("replay create", err);
	memset(&smp, 0, sizeof(smp));
	smp.obs = malloc((size_t)B * od * sizeof(float));
	smp.prev_obs = malloc((size_t)B * od * sizeof(float));
	smp.prev_valid = malloc(B);
	smp.action = malloc((size_t)B * 4);
	smp.reward = malloc(B * sizeof(float));
	smp.terminated = malloc(B);
	smp.truncated = malloc(B);
	smp.env = malloc(B * sizeof(uint64_t));
	smp.rank = malloc(B * sizeof(uint32_t));
	smp.seq = malloc(B * sizeof(uint64_t));

	if (!bench) {
		long rows = 0, checked = 0, other = 0, bad = 0, tot[4];
		int direct = 0;

		/* One machine: every ring is on this node. Direct (the default)
		 * maps them all; noshm only this rank's own; force none. */
		for (int k = 0; k < size; k++)
			direct += sr_mpi_replay_direct(rp, (uint32_t)k) == 1;
		if (direct != (force ? 0 : noshm ? 1 : size)) {
			fprintf(stderr, "rank %d: %d of %d rings read directly (mode %s)\n", g_rank,
				direct, size, argc > 2 ? argv[2] : "direct");
			bad++;
		}
		for (int round = 0; round < 60; round++) {
			/* the rings keep moving: step, then read everyone's */
			for (uint32_t i = 0; i < in.local_envs; i++)
				act[i] = (int32_t)(sr_rng_next(&rng) & 1);
			err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
			if (err)
				die("step", err);
			err = sr_mpi_replay_sample(rp, B, &smp);
			if (err != B)
				die("sample", err);
			for (int i = 0; i < B; i++) {
				uint64_t f;
				uint32_t n;
				int32_t a;

				rows++;
				other += smp.rank[i] != in.rank;
				sr_mpi_env_range(o.num_envs, (uint32_t)size, smp.rank[i], &f, &n);
				if (smp.env[i] < f || smp.env[i] >= f + n) {
					fprintf(stderr, "rank %d: env %llu not on rank %u\n", g_rank,
						(unsigned long long)smp.env[i], smp.rank[i]);
					bad++;
				}
				if (!smp.prev_valid[i])
					continue;
				memcpy(&a, smp.action + 4 * i, 4);
				double nx[4];
				cartpole(smp.prev_obs + 4 * i, a, nx);
				checked++;
				for (int k = 0; k < 4; k++)
					if (fabs(nx[k] - smp.obs[4 * i + k]) > 1e-4 * (1 + fabs(nx[k]))) {
						fprintf(stderr, "rank %d: rank %u seq %llu: obs[%d] %.7g, "
							"dynamics give %.7g\n", g_rank, smp.rank[i],
							(unsigned long long)smp.seq[i], k,
							smp.obs[4 * i + k], nx[k]);
						bad++;
						break;
					}
			}
			MPI_Barrier(MPI_COMM_WORLD); /* no rank finishes while others read it */
		}
		tot[0] = bad;
		tot[1] = checked;
		tot[2] = other;
		tot[3] = direct;
		MPI_Allreduce(MPI_IN_PLACE, tot, 4, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
		if (g_rank == 0) {
			uint64_t by, re;
			sr_mpi_replay_counters(rp, &by, &re);
			printf("rows %ld per rank, checked %ld, from other ranks %ld, bad %ld, rings "
			       "read directly %ld (all ranks), rank 0 read %llu bytes through MPI, %llu "
			       "redrawn\n", rows, tot[1], tot[2], tot[0], tot[3],
			       (unsigned long long)by, (unsigned long long)re);
			printf("%s\n", tot[0] == 0 && tot[1] > rows / 2 &&
					       (size == 1 || tot[2] > 0) ? "ok" : "FAIL");
		}
	} else {
		/* Rank 0, interleaved rounds of 0.5 s each, medians:
		 *  - local: a sampler that reads its own ring directly;
		 *  - same node: the same sampler drawing from rank 1's ring,
		 *    attached through shared memory (zero copy);
		 *  - remote: every rank's ring through MPI (its own too), against
		 *    a plain MPI_Get loop of the same slots' obs bytes over a
		 *    window of the same segments (one flush per batch).
		 * Batches of B rows of obs 3072. The other ranks wait at a
		 * barrier meanwhile (their CPU does not serve the direct reads;
		 * with osc/pt2pt their progress engine answers the gets). */
		enum { ROUNDS = 7 };
		double gl[ROUNDS], gd[ROUNDS], gs[ROUNDS], gp[ROUNDS], rdl[ROUNDS], ratio[ROUNDS];
		sr_ring *ring = sr_pool_ring(sr_mpi_pool_local(mp));
		sr_ring_info ri = {.size = sizeof(ri)};
		size_t len;
		unsigned char *base;
		sr_mpi_replay *dr;
		uint8_t *use = calloc((size_t)size, 1);
		int peer = size > 1 ? 1 : 0, attached;

		err = sr_mpi_replay_create(mp, 0, &dr);
		if (err)
			die("replay create (direct)", err);
		attached = sr_mpi_replay_direct(dr, (uint32_t)peer);
		sr_ring_info_get(ring, &ri);
		base = ri.base;
		len = ri.bytes;
		uint64_t off_obs = (uint64_t)((unsigned char *)sr_ring_obs_col(ring) - base);
		uint64_t cap = sr_ring_capacity(ring);
		MPI_Win win;

		/* every rank's ring has the same geometry here (same envs each) */
		MPI_Win_create(base, (MPI_Aint)len, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
		MPI_Win_lock_all(MPI_MODE_NOCHECK, win);
		smp.prev_obs = NULL;
		smp.prev_valid = NULL;
		if (g_rank == 0) {
			double t0, t;
			long nb;

			for (int r = 0; r < ROUNDS; r++) {
				uint64_t by0, by1;

				for (int which = 0; which < 2; which++) {
					memset(use, 0, (size_t)size);
					use[which ? peer : 0] = 1;
					err = sr_mpi_replay_set_sources(dr, use);
					if (err)
						die("sources", err);
					t0 = now();
					nb = 0;
					do {
						err = sr_mpi_replay_sample(dr, B, &smp);
						if (err != B)
							die("sample", err);
						nb++;
					} while ((t = now()) - t0 < 0.5);
					(which ? gd : gl)[r] = (double)nb * B * od * 4 / (t - t0) / 1e9;
				}
				rdl[r] = gd[r] / gl[r];
				sr_mpi_replay_counters(rp, &by0, NULL);
				t0 = now();
				nb = 0;
				do {
					err = sr_mpi_replay_sample(rp, B, &smp);
					if (err != B)
						die("sample", err);
					nb++;
				} while ((t = now()) - t0 < 0.5);
				sr_mpi_replay_counters(rp, &by1, NULL);
				gs[r] = (double)nb * B * od * 4 / (t - t0) / 1e9;
				t0 = now();
				long np = 0;
				do {
					for (int i = 0; i < B; i++)
						MPI_Get(smp.obs + (size_t)i * od, (int)(od * 4), MPI_BYTE,
							(int)smp.rank[i],
							(MPI_Aint)(off_obs + (smp.seq[i] & (cap - 1)) * od * 4),
							(int)(od * 4), MPI_BYTE, win);
					MPI_Win_flush_all(win);
					np++;
				} while ((t = now()) - t0 < 0.5);
				gp[r] = (double)np * B * od * 4 / (t - t0) / 1e9;
				ratio[r] = gs[r] / gp[r];
				if (r == 0)
					printf("replay bytes per batch through MPI: %.0f (obs %u)\n",
					       (double)(by1 - by0) / nb, B * od * 4);
			}
			qsort(gl, ROUNDS, sizeof(double), cmp_d);
			qsort(gd, ROUNDS, sizeof(double), cmp_d);
			qsort(rdl, ROUNDS, sizeof(double), cmp_d);
			qsort(gs, ROUNDS, sizeof(double), cmp_d);
			qsort(gp, ROUNDS, sizeof(double), cmp_d);
			qsort(ratio, ROUNDS, sizeof(double), cmp_d);
			printf("same-node direct replay, %d ranks, batch %d, obs %u: rank %d's ring %s: "
			       "%.3f GB/s of obs, local (own ring) %.3f GB/s, ratio %.3f (rounds %.3f .. "
			       "%.3f; medians of %d)\n", size, B, od, peer,
			       attached ? "attached (shared memory)" : "NOT attached (read through MPI)",
			       gd[ROUNDS / 2], gl[ROUNDS / 2], rdl[ROUNDS / 2], rdl[0], rdl[ROUNDS - 1],
			       ROUNDS);
			printf("remote replay (forced MPI path), %d ranks, batch %d, obs %u: sampler "
			       "%.3f GB/s of obs, plain MPI_Get loop %.3f GB/s, ratio %.3f (rounds "
			       "%.3f .. %.3f; medians of %d)\n", size, B, od, gs[ROUNDS / 2],
			       gp[ROUNDS / 2], ratio[ROUNDS / 2], ratio[0], ratio[ROUNDS - 1], ROUNDS);
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Win_unlock_all(win);
		MPI_Win_free(&win);
		sr_mpi_replay_destroy(dr);
		free(use);
	}
	sr_mpi_replay_destroy(rp);
	sr_mpi_pool_destroy(mp);
	MPI_Finalize();
	return 0;
}
