/*
 * MPI in the CLI (tools/cli_mpi.c with MPI, tools/cli_nompi.c without):
 * an interface free of MPI types, so the subcommands need no <mpi.h>.
 *
 * When the process was started by a launcher (mpirun, srun: it sees
 * OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK), main() initializes MPI on
 * MPI_COMM_WORLD and the commands that know about ranks (rollout, bench
 * pool) split their envs over the ranks; rank 0 prints. Otherwise size
 * is 1 and nothing changes.
 */
#ifndef SR_CLI_MPI_H
#define SR_CLI_MPI_H

#include <stddef.h>
#include <stdint.h>

#include "stepring/pool.h"

/* Called by main(); returns 0, or dies when MPI cannot start. */
int cli_mpi_init(int *argc, char ***argv);
int cli_mpi_rank(void);
int cli_mpi_size(void); /* 1 when not launched by an MPI launcher */

/* A pool over every rank: @o->num_envs is global. *@local is this rank's
 * pool, *@first_env the global index of its env 0. Dies (on every rank,
 * with the same message) on bad input. Size 1: an ordinary pool. */
struct cli_mpi_pool;
struct cli_mpi_pool *cli_mpi_pool_create(const char *cmd, const sr_pool_opts *o, sr_pool **local,
					 uint64_t *first_env);
void cli_mpi_pool_destroy(struct cli_mpi_pool *mp);
/* The CPUs this rank's pool may use ("0-3"; "" when not split or known). */
const char *cli_mpi_pool_cpus(const struct cli_mpi_pool *mp);
/* Gather @size bytes per local env into global env order at rank 0's
 * @out (num_envs * size). Dies on an error (a rank died or hangs). */
void cli_mpi_gather_envs(struct cli_mpi_pool *mp, const void *local, size_t size, void *out);
/* Gather @size bytes from every rank into rank order at rank 0's @out. */
void cli_mpi_gather(const void *local, size_t size, void *out);
/* Sum / max / min of doubles over ranks, result on every rank. */
void cli_mpi_allreduce(double *v, int n, char op);
void cli_mpi_barrier(void);
/* Report an error of a collective and end the job: an error that every
 * rank saw ends cleanly; a timeout or MPI error aborts the job. */
void cli_mpi_die(const char *cmd, int err) __attribute__((noreturn));

#endif
