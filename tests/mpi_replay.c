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
 *   mpi_replay prio [force]   rank 0's prioritized sampler over every rank's
 *       slots: frequencies, weights, valid rows (run_prio)
 *   mpi_replay limit          the limiter and counters across ranks (run_limit)
 *   mpi_replay hang           (2 ranks) rank 1 hangs: rank 0's sample returns
 *       (-ETIMEDOUT after STEPRING_MPI_TIMEOUT with osc/pt2pt), never hangs
 *   mpi_replay bench          rank 0 samples batches of 256 (obs 3072):
 *       from rank 1's ring attached through shared memory against its own
 *       ring, and through the MPI path against a plain MPI_Get loop over
 *       the same slots' bytes, interleaved rounds; prints GB/s and ratios
 */
#include <errno.h>
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

/* Check one sampled batch: env on the ring's rank, dynamics where the
 * previous obs came with it. Returns the number of bad rows. */
static long check_rows(const sr_mpi_sample *smp, int n, uint64_t num_envs, int size, long *checked)
{
	long bad = 0;

	for (int i = 0; i < n; i++) {
		uint64_t f;
		uint32_t cnt;
		int32_t a;
		double nx[4];

		sr_mpi_env_range(num_envs, (uint32_t)size, smp->rank[i], &f, &cnt);
		if (smp->env[i] < f || smp->env[i] >= f + cnt) {
			fprintf(stderr, "rank %d: env %llu not on rank %u\n", g_rank,
				(unsigned long long)smp->env[i], smp->rank[i]);
			bad++;
		}
		if (!smp->prev_valid[i])
			continue;
		memcpy(&a, smp->action + 4 * i, 4);
		cartpole(smp->prev_obs + 4 * i, a, nx);
		(*checked)++;
		for (int k = 0; k < 4; k++)
			if (fabs(nx[k] - smp->obs[4 * i + k]) > 1e-4 * (1 + fabs(nx[k]))) {
				fprintf(stderr, "rank %d: rank %u seq %llu: obs[%d] %.7g, dynamics give "
					"%.7g\n", g_rank, smp->rank[i], (unsigned long long)smp->seq[i], k,
					smp->obs[4 * i + k], nx[k]);
				bad++;
				break;
			}
	}
	return bad;
}

/* Priority of slot (rank k, seq q) in the prio test: rank k's slots
 * (1 + k) times as likely, odd sequences 3 times as likely. */
static double prio_of(uint32_t k, uint64_t q)
{
	return (1.0 + k) * (q & 1 ? 3.0 : 1.0);
}

/* The ring of this rank's pool. */
static sr_ring *local_ring(sr_mpi_pool *mp)
{
	sr_pool_info pi = {.size = sizeof(pi)};

	return sr_pool_info_get(sr_mpi_pool_local(mp), &pi) ? NULL : pi.ring;
}

/*
 * prio: the rings stand still; rank 0's prioritized sampler over every
 * rank's slots gets each live slot's priority from prio_of (keys from
 * every rank's head and cursor), then draws 120 batches: the frequency of
 * each (rank, parity) class must follow the priorities (chi-square), the
 * weights must be (p_min / p)^beta, the rows valid transitions.
 */
static void run_prio(sr_mpi_pool *mp, sr_mpi_replay *rp, sr_mpi_sample *smp, int size,
		     uint64_t num_envs)
{
	enum { B = 256, BATCHES = 120 };
	const double beta = 0.5;
	sr_ring_info ri = {.size = sizeof(ri)};
	uint64_t hc[3], *all = malloc(3 * sizeof(uint64_t) * (size_t)size);
	long bad = 0, checked = 0;
	int err;

	sr_ring_info_get(local_ring(mp), &ri);
	hc[0] = ri.head;
	hc[1] = ri.cursor;
	hc[2] = ri.capacity;
	MPI_Allgather(hc, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, MPI_COMM_WORLD);
	/* every ring's flags, to leave out PAD slots (filler, never sampled) */
	int *cnt = malloc(sizeof(int) * (size_t)size), *at = malloc(sizeof(int) * (size_t)size);
	int ftot = 0;
	for (int k = 0; k < size; k++) {
		cnt[k] = (int)all[3 * k + 2];
		at[k] = ftot;
		ftot += cnt[k];
	}
	uint8_t *flags = malloc((size_t)ftot);
	MPI_Gatherv(sr_ring_flags_col(local_ring(mp)), (int)ri.capacity,
		    MPI_UINT8_T, flags, cnt, at, MPI_UINT8_T, 0, MPI_COMM_WORLD);
	if (g_rank == 0) {
		double *want = calloc(2 * (size_t)size, sizeof(double)), tot = 0, chi = 0;
		long *got = calloc(2 * (size_t)size, sizeof(long)), upd = 0, keys = 0;
		sr_mpi_replay_counts cn;

		err = sr_mpi_replay_prioritize(rp, 1.0, beta, 1e-9);
		if (err)
			die("prioritize", err);
		if (sr_mpi_replay_update(rp, (uint32_t[]){0}, (uint64_t[]){0},
					 (float[]){NAN}, 1) != -EINVAL)
			bad++, fprintf(stderr, "a NaN priority was taken\n");
		err = sr_mpi_replay_sample(rp, B, smp); /* the tree takes in every window */
		if (err != B)
			die("sample", err);
		for (uint32_t k = 0; k < (uint32_t)size; k++) {
			uint64_t h = all[3 * k], c = all[3 * k + 1], cap = all[3 * k + 2];
			uint64_t lo = h > cap ? h - cap + 1 : 0;

			for (uint64_t q = lo; q < c; q++) {
				float p = (float)prio_of(k, q);
				int n;

				if (flags[at[k] + (q & (cap - 1))] & SR_SLOT_PAD)
					continue;
				n = sr_mpi_replay_update(rp, &k, &q, &p, 1);

				if (n < 0)
					die("update", n);
				upd += n;
				keys++;

				want[2 * k + (q & 1)] += p;
				tot += p;
			}
		}
		sr_mpi_replay_counts_get(rp, &cn);
		for (int b = 0; b < BATCHES; b++) {
			double pmin = INFINITY;

			err = sr_mpi_replay_sample(rp, B, smp);
			if (err != B)
				die("sample", err);
			bad += check_rows(smp, B, num_envs, size, &checked);
			for (int i = 0; i < B; i++) {
				double p = prio_of(smp->rank[i], smp->seq[i]);
				got[2 * smp->rank[i] + (smp->seq[i] & 1)]++;
				pmin = p < pmin ? p : pmin;
			}
			for (int i = 0; i < B; i++) {
				double w = pow(pmin / prio_of(smp->rank[i], smp->seq[i]), beta);
				if (fabs(smp->weight[i] - w) > 1e-5) {
					fprintf(stderr, "row %d: weight %.6f, want %.6f\n", i,
						smp->weight[i], w);
					bad++;
					break;
				}
			}
		}
		for (int c = 0; c < 2 * size; c++) {
			double e = (double)B * BATCHES * want[c] / tot;
			if (e > 0)
				chi += (got[c] - e) * (got[c] - e) / e;
			printf("class rank %d %s: drawn %ld, expected %.0f\n", c / 2,
			       c & 1 ? "odd " : "even", got[c], e);
		}
		printf("prioritized over %d ranks: %ld of %ld keys updated, %llu slots in the tree, "
		       "chi-square %.2f (df %d), rows checked %ld, bad %ld\n", size, upd, keys,
		       (unsigned long long)cn.size, chi, 2 * size - 1, checked, bad);
		/* df <= 5: 30 is far beyond the 0.001 quantile (20.5) */
		printf("%s\n", bad == 0 && upd == keys && chi < 30 && checked > 1000 ? "ok" : "FAIL");
		free(want);
		free(got);
	}
	free(all);
	free(cnt);
	free(at);
	free(flags);
	MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * limit: samples-per-insert 0.5, min_size 64, error_buffer 40 on every
 * rank; every rank steps 10 times (the inserts), then rank 0 samples
 * batches of 32 until the limiter refuses; the count must be the one the
 * rule allows, every rank must see the same inserts and samples, and
 * can_insert must answer by the rule on the last rank.
 */
static void run_limit(sr_mpi_pool *mp, sr_mpi_replay *rp, sr_mpi_sample *smp, int size,
		      int32_t *act, uint32_t local_envs, uint64_t cursor0)
{
	const double spi = 0.5, min_size = 64, eb = 40;
	sr_ring_info ri = {.size = sizeof(ri)};
	sr_mpi_replay_counts cn;
	const sr_batch *b;
	uint64_t mine, ins = 0;
	long bad = 0, nb = 0, want = 0;
	int err;

	err = sr_mpi_replay_limit(rp, spi, (uint64_t)min_size, eb, 0);
	if (err)
		die("limit", err);
	if (sr_mpi_replay_limit(rp, 0, 1, 0, 0) != -EINVAL)
		bad++, fprintf(stderr, "samples_per_insert 0 taken\n");
	for (int t = 0; t < 10; t++) {
		for (uint32_t i = 0; i < local_envs; i++)
			act[i] = t & 1;
		err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
		if (err)
			die("step", err);
	}
	sr_ring_info_get(local_ring(mp), &ri);
	mine = ri.cursor - cursor0;
	MPI_Allreduce(&mine, &ins, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	if (g_rank == 0) {
		err = sr_mpi_replay_counts_get(rp, &cn);
		if (err || cn.inserts != ins)
			bad++, fprintf(stderr, "inserts %llu, rings say %llu\n",
				       (unsigned long long)cn.inserts, (unsigned long long)ins);
		for (;;) {
			err = sr_mpi_replay_sample(rp, 32, smp);
			if (err != 32)
				break;
			nb++;
		}
		if (err != -EAGAIN)
			bad++, fprintf(stderr, "sample: %d (%s), not -EAGAIN\n", err, sr_last_error());
		/* the rule: a sample of 32 passes while spi * ins - (samples + 32)
		 * >= spi * min_size - eb, and ins >= min_size */
		while ((double)ins >= min_size &&
		       spi * (double)ins - (double)(32 * want + 32) >= spi * min_size - eb)
			want++;
		printf("limiter: %llu inserts across %d ranks, %ld batches of 32 before it "
		       "refused, the rule allows %ld: %s\n", (unsigned long long)ins, size, nb, want,
		       sr_last_error());
		if (nb != want || want == 0)
			bad++;
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (g_rank == size - 1) {
		err = sr_mpi_replay_counts_get(rp, &cn);
		if (err)
			die("counts", err);
		uint64_t S = cn.samples_all;
		for (uint64_t n = 0; n < 200; n += 37) {
			int c = sr_mpi_replay_can_insert(rp, n);
			int w = spi * (double)(ins + n) - (double)S <= spi * min_size + eb;
			if (c != w)
				bad++, fprintf(stderr, "can_insert(%llu) = %d, rule says %d\n",
					       (unsigned long long)n, c, w);
		}
		printf("rank %d sees %llu inserts and %llu samples across ranks (rank 0 returned "
		       "%ld)\n", g_rank, (unsigned long long)cn.inserts, (unsigned long long)S,
		       32 * (g_rank == 0 ? nb : 0));
		if (cn.inserts != ins)
			bad++;
		if (size > 1 && cn.samples != 0)
			bad++;
		MPI_Send(&S, 1, MPI_UINT64_T, 0, 7, MPI_COMM_WORLD);
	}
	if (g_rank == 0) {
		uint64_t S;
		MPI_Recv(&S, 1, MPI_UINT64_T, size - 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		if (S != (uint64_t)(32 * nb))
			bad++, fprintf(stderr, "rank %d saw %llu samples, rank 0 returned %ld\n",
				       size - 1, (unsigned long long)S, 32 * nb);
	}
	MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (g_rank == 0)
		printf("%s\n", bad == 0 ? "ok" : "FAIL");
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "check";
	bool force = argc > 2 && !strcmp(argv[2], "force"), bench = !strcmp(mode, "bench");
	bool noshm = argc > 2 && !strcmp(argv[2], "noshm");
	bool prio = !strcmp(mode, "prio"), limit = !strcmp(mode, "limit");
	bool hang = !strcmp(mode, "hang");
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
	sr_ring_info ri0 = {.size = sizeof(ri0)};
	sr_ring_info_get(local_ring(mp), &ri0);
	err = sr_mpi_replay_create(mp, force || bench ? SR_MPI_REPLAY_F_FORCE_MPI
				   : noshm || hang ? SR_MPI_REPLAY_F_NO_SHM : 0, &rp);
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
	smp.weight = malloc(B * sizeof(float));

	if (hang) {
		/* Rank 1 stops entering MPI (it hangs); rank 0 reads only its
		 * ring, through MPI: the sample must come back, with the rows
		 * (a transport that reads without the target's CPU) or with
		 * -ETIMEDOUT after STEPRING_MPI_TIMEOUT, never hang. */
		if (g_rank == 1) {
			struct timespec ts = {120, 0};
			nanosleep(&ts, NULL);
		} else if (g_rank == 0) {
			uint8_t use[2] = {0, 1};
			double t0 = now();

			sr_mpi_replay_set_sources(rp, use);
			err = sr_mpi_replay_sample(rp, B, &smp);
			printf("sample from a hung rank: %d after %.1f s: %s\n", err, now() - t0,
			       err == B ? "read without its CPU" : sr_last_error());
			printf("%s\n", err == B || err == -ETIMEDOUT ? "ok" : "FAIL");
			fflush(stdout);
			MPI_Abort(MPI_COMM_WORLD, err == B ? 0 : 3);
		}
	} else if (prio) {
		run_prio(mp, rp, &smp, size, o.num_envs);
	} else if (limit) {
		run_limit(mp, rp, &smp, size, act, in.local_envs, ri0.cursor);
	} else if (!bench) {
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
		sr_ring *ring = local_ring(mp);
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
