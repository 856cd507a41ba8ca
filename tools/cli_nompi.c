/* The CLI without MPI (tools/cli_mpi.c is the one with): one rank, an
 * ordinary pool. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_mpi.h"
#include "stepring.h"

struct cli_mpi_pool {
	sr_pool *pool;
	uint32_t n;
};

int cli_mpi_init(int *argc, char ***argv)
{
	const char *s = getenv("OMPI_COMM_WORLD_SIZE");

	if (s && atoi(s) > 1)
		cli_die("this stepring was built without MPI: it cannot run as %s ranks "
			"(configure with -DSR_WITH_MPI=ON)", s);
	return 0;
}

int cli_mpi_rank(void)
{
	return 0;
}

int cli_mpi_size(void)
{
	return 1;
}

struct cli_mpi_pool *cli_mpi_pool_create(const char *cmd, const sr_pool_opts *o, sr_pool **local,
					 uint64_t *first_env)
{
	struct cli_mpi_pool *mp = calloc(1, sizeof(*mp));
	int err;

	if (!mp)
		cli_die("%s: out of memory", cmd);
	err = sr_pool_create(o, &mp->pool);
	if (err)
		cli_die("%s: %s", cmd, sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	mp->n = o->num_envs;
	*local = mp->pool;
	*first_env = 0;
	return mp;
}

void cli_mpi_pool_destroy(struct cli_mpi_pool *mp)
{
	if (mp) {
		sr_pool_destroy(mp->pool);
		free(mp);
	}
}

const char *cli_mpi_pool_cpus(const struct cli_mpi_pool *mp)
{
	return "";
}

void cli_mpi_gather_envs(struct cli_mpi_pool *mp, const void *local, size_t size, void *out)
{
	memcpy(out, local, mp->n * size);
}

void cli_mpi_gather(const void *local, size_t size, void *out)
{
	memcpy(out, local, size);
}

void cli_mpi_allreduce(double *v, int n, char op)
{
}

void cli_mpi_barrier(void)
{
}

void cli_mpi_die(const char *cmd, int err)
{
	cli_die("%s: %s", cmd, sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
}
