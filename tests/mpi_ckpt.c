/*
 * Checkpoints across ranks, re-sharded (run by tests/mpi_ckpt.sh):
 *   mpi_ckpt save DIR   step K, checkpoint into DIR, step K more: print the
 *                       hash of the last K steps (global env order)
 *   mpi_ckpt load DIR   restore DIR (saved on any number of ranks), step K:
 *                       print the same hash
 * A third argument names the env (default CartPole-v1; LunarLander-v3: an
 * opaque Box2D state, ABI v2).
 * Actions depend only on (step, global env), so the hashes are equal when
 * every env continues its trajectory bit-exactly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "stepring.h"
#include "stepring/mpi.h"
#include "helpers.h"

enum { N = 23, K = 60 };

static void die(int rank, const char *what, int err)
{
	fprintf(stderr, "mpi_ckpt: rank %d: %s: %s (%s)\n", rank, what, sr_last_error(),
		sr_strerror(err));
	MPI_Finalize();
	exit(1);
}

int main(int argc, char **argv)
{
	sr_pool_opts o;
	sr_mpi_pool *mp;
	sr_mpi_pool_info in;
	const sr_batch *b;
	int32_t act[N];
	uint64_t h[N], hall[N], all = T_FNV_INIT;
	/* actions in {0, 1}: valid for CartPole's Discrete(2) and LunarLander's Discrete(4) */
	int rank, err, t0;
	bool save;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (argc < 3 || argc > 4 || (strcmp(argv[1], "save") && strcmp(argv[1], "load"))) {
		fprintf(stderr, "usage: mpi_ckpt save|load DIR [ENV]\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	save = !strcmp(argv[1], "save");
	sr_pool_opts_init(&o);
	o.env = argc > 3 ? argv[3] : "CartPole-v1";
	o.num_envs = N;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	o.flags = SR_POOL_F_SEED;
	o.seed = 4242;
	err = sr_mpi_pool_create(MPI_COMM_WORLD, &o, NULL, &mp);
	if (err)
		die(rank, "create", err);
	sr_mpi_pool_info_get(mp, &in);
	err = sr_pool_reset(sr_mpi_pool_local(mp), &b);
	if (err)
		die(rank, "reset", err);
	if (save) {
		for (int t = 0; t < K; t++) {
			for (uint32_t i = 0; i < in.local_envs; i++)
				act[i] = (int32_t)(((uint64_t)t * 5 + (in.first_env + i) * 3) % 7 < 3);
			err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
			if (err)
				die(rank, "step", err);
		}
		err = sr_mpi_pool_checkpoint(mp, argv[2], NULL);
		if (err)
			die(rank, "checkpoint", err);
	} else {
		err = sr_mpi_pool_restore(mp, argv[2]);
		if (err)
			die(rank, "restore", err);
	}
	t0 = K;
	for (uint32_t i = 0; i < in.local_envs; i++)
		h[i] = T_FNV_INIT;
	for (int t = t0; t < t0 + K; t++) {
		for (uint32_t i = 0; i < in.local_envs; i++)
			act[i] = (int32_t)(((uint64_t)t * 5 + (in.first_env + i) * 3) % 7 < 3);
		err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
		if (err)
			die(rank, "step", err);
		for (uint32_t i = 0; i < b->n; i++) {
			uint32_t e = b->env_id[i];
			h[e] = t_fnv(h[e], b->obs + (size_t)i * b->obs_dim, b->obs_dim * sizeof(float));
			h[e] = t_fnv(h[e], &b->reward[i], sizeof(float));
			h[e] = t_fnv(h[e], &b->terminated[i], 1);
			h[e] = t_fnv(h[e], &b->truncated[i], 1);
		}
	}
	err = sr_mpi_pool_gather_envs(mp, h, sizeof(h[0]), hall, 0);
	if (err)
		die(rank, "gather", err);
	if (rank == 0) {
		for (int e = 0; e < N; e++)
			all = t_fnv(all, &hall[e], sizeof(hall[e]));
		printf("%016llx\n", (unsigned long long)all);
	}
	sr_mpi_pool_destroy(mp);
	MPI_Finalize();
	return 0;
}
