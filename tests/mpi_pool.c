/*
 * A pool across ranks through the C API (run under mpirun by
 * tests/mpi_pool.sh): the partition, the reduced statistics, the gather
 * in global env order, and the same obs as one local pool of all envs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "stepring.h"
#include "stepring/mpi.h"

static int g_rank, g_fail;

#define CHECK(c)                                                                           \
	do {                                                                               \
		if (!(c)) {                                                                \
			fprintf(stderr, "rank %d: %s:%d: %s failed (%s)\n", g_rank, __FILE__,      \
				__LINE__, #c, sr_last_error());                            \
			g_fail = 1;                                                        \
		}                                                                          \
	} while (0)

int main(int argc, char **argv)
{
	enum { N = 23, STEPS = 150 };
	sr_pool_opts o;
	sr_mpi_pool *mp;
	sr_mpi_pool_info in;
	sr_mpi_pool_stats st;
	sr_pool_stats *pr;
	sr_pool *ref = NULL;
	const sr_batch *b, *rb = NULL;
	int32_t act[N];
	float *mine, *allobs = NULL;
	int size, any;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = N;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_SEED;
	o.seed = 99;
	CHECK(sr_mpi_pool_create(MPI_COMM_WORLD, &o, NULL, &mp) == 0);
	CHECK(sr_mpi_pool_info_get(mp, &in) == 0);
	CHECK(in.rank == (uint32_t)g_rank && in.size == (uint32_t)size && in.num_envs == N);
	{
		uint64_t f;
		uint32_t n;
		sr_pool_info pi = {.size = sizeof(pi)};
		CHECK(sr_mpi_env_range(N, (uint32_t)size, in.rank, &f, &n) == 0);
		CHECK(f == in.first_env && n == in.local_envs);
		CHECK(sr_pool_info_get(sr_mpi_pool_local(mp), &pi) == 0 && pi.num_envs == n);
	}
	if (g_rank == 0) {
		/* one pool of all N envs, stepped with the same actions */
		CHECK(sr_pool_create(&o, &ref) == 0);
		CHECK(sr_pool_reset(ref, &rb) == 0);
		allobs = malloc(N * 4 * sizeof(float));
	}
	mine = malloc(in.local_envs * 4 * sizeof(float));
	CHECK(sr_pool_reset(sr_mpi_pool_local(mp), &b) == 0);
	for (int t = 0; t <= STEPS; t++) {
		memcpy(mine, b->obs, in.local_envs * 4 * sizeof(float));
		CHECK(sr_mpi_pool_gather_envs(mp, mine, 4 * sizeof(float), allobs, 0) == 0);
		if (g_rank == 0)
			CHECK(memcmp(allobs, rb->obs, N * 4 * sizeof(float)) == 0);
		if (t == STEPS)
			break;
		for (int e = 0; e < N; e++)
			act[e] = (t * 5 + e * 3) % 7 < 3;
		CHECK(sr_pool_step(sr_mpi_pool_local(mp), act + in.first_env, &b) == 0);
		if (g_rank == 0)
			CHECK(sr_pool_step(ref, act, &rb) == 0);
	}
	pr = calloc((size_t)size, sizeof(*pr));
	CHECK(sr_mpi_pool_stats_get(mp, &st, pr) == 0);
	{
		uint64_t sum = 0;
		for (int r = 0; r < size; r++) {
			uint64_t f;
			uint32_t n;
			sr_mpi_env_range(N, (uint32_t)size, (uint32_t)r, &f, &n);
			/* the reset and STEPS steps of each of its envs */
			CHECK(pr[r].steps == (uint64_t)n * (STEPS + 1) || pr[r].steps == (uint64_t)n * STEPS);
			sum += pr[r].steps;
		}
		CHECK(st.total.steps == sum && st.size == (uint32_t)size);
		CHECK(st.steps_min <= st.steps_max);
		CHECK(pr[st.slowest_rank].steps == st.steps_min);
	}
	if (g_rank == 0) {
		sr_pool_stats rs;
		sr_pool_stats_get(ref, &rs);
		CHECK(rs.steps == st.total.steps);
		CHECK(rs.episodes == st.total.episodes);
	}
	CHECK(sr_mpi_pool_barrier(mp) == 0);
	sr_mpi_pool_destroy(mp);
	sr_pool_destroy(ref);
	free(mine);
	free(allobs);
	free(pr);
	any = g_fail;
	MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	if (g_rank == 0)
		printf("%s\n", any ? "FAIL" : "ok");
	MPI_Finalize();
	return any;
}
