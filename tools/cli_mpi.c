/* The CLI with MPI (see cli_mpi.h; tools/cli_nompi.c is the fallback). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "cli.h"
#include "cli_mpi.h"
#include "stepring.h"
#include "stepring/mpi.h"

struct cli_mpi_pool {
	sr_mpi_pool *mp; /* launched by mpirun / srun */
	sr_pool *pool;   /* otherwise */
	char cpus[256];
};

static int g_rank, g_size = 1, g_on, g_abort;

static void at_exit(void)
{
	int fin = 0;

	if (!g_on)
		return;
	MPI_Finalized(&fin);
	if (fin)
		return;
	fflush(stdout);
	fflush(stderr);
	/* After a timeout or an MPI error some rank is gone or stuck: a
	 * clean finalize could wait for it forever. */
	if (g_abort)
		MPI_Abort(MPI_COMM_WORLD, 1);
	MPI_Finalize();
}

/* mpirun and srun stop the other ranks with SIGTERM when one fails (or
 * the job is cancelled): say so, instead of vanishing without a word. */
static void on_term(int sig)
{
	char msg[200];
	int n = snprintf(msg, sizeof(msg),
			 "stepring: rank %d: stopped by the launcher (signal %d): another rank "
			 "failed, or the job was cancelled\n", g_rank, sig);

	if (n > 0)
		(void)!write(2, msg, (size_t)n);
	_exit(128 + sig);
}

int cli_mpi_init(int *argc, char ***argv)
{
	int provided, rc;

	if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMIX_RANK") && !getenv("PMI_RANK"))
		return 0;
	rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
	if (rc != MPI_SUCCESS)
		cli_die("MPI_Init failed (error %d)", rc);
	g_on = 1;
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	MPI_Comm_size(MPI_COMM_WORLD, &g_size);
	atexit(at_exit);
	signal(SIGTERM, on_term);
	return 0;
}

int cli_mpi_rank(void)
{
	return g_rank;
}

int cli_mpi_size(void)
{
	return g_size;
}

void cli_mpi_die(const char *cmd, int err)
{
	if (err == -ETIMEDOUT || err == -EIO)
		g_abort = 1;
	cli_die("%s: %s", cmd, sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
}

struct cli_mpi_pool *cli_mpi_pool_create(const char *cmd, const sr_pool_opts *o, sr_pool **local,
					 uint64_t *first_env)
{
	struct cli_mpi_pool *c = calloc(1, sizeof(*c));
	sr_mpi_pool_info info;
	int err;

	if (!c)
		cli_die("%s: out of memory", cmd);
	if (!g_on) {
		err = sr_pool_create(o, local);
		if (err)
			cli_die("%s: %s", cmd, sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
		c->pool = *local;
		*first_env = 0;
		return c;
	}
	err = sr_mpi_pool_create(MPI_COMM_WORLD, o, NULL, &c->mp);
	if (err)
		cli_mpi_die(cmd, err);
	sr_mpi_pool_info_get(c->mp, &info);
	snprintf(c->cpus, sizeof(c->cpus), "%s", info.cpus);
	*local = sr_mpi_pool_local(c->mp);
	*first_env = info.first_env;
	return c;
}

void cli_mpi_pool_destroy(struct cli_mpi_pool *c)
{
	if (!c)
		return;
	sr_mpi_pool_destroy(c->mp);
	sr_pool_destroy(c->pool);
	free(c);
}

const char *cli_mpi_pool_cpus(const struct cli_mpi_pool *c)
{
	return c->cpus;
}

void cli_mpi_gather_envs(struct cli_mpi_pool *c, const void *local, size_t size, void *out)
{
	int err;

	if (!c->mp) {
		memcpy(out, local, (size_t)cli_pool_info(c->pool).num_envs * size);
		return;
	}
	err = sr_mpi_pool_gather_envs(c->mp, local, size, out, 0);
	if (err)
		cli_mpi_die("gather", err);
}

/* World collectives for the CLI's own tables, nonblocking and polled
 * against the same limit as the pool's (STEPRING_MPI_TIMEOUT, 60 s): a
 * rank that died or hangs ends the job with a message, never a hang. */
static void wait_or_die(int rc, MPI_Request *rq, const char *what)
{
	const char *s = getenv("STEPRING_MPI_TIMEOUT");
	double lim = s && strtod(s, NULL) > 0 ? strtod(s, NULL) : 60.0, t0 = MPI_Wtime();
	int done = 0;

	while (rc == MPI_SUCCESS) {
		rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
		if (rc != MPI_SUCCESS || done)
			break;
		if (MPI_Wtime() - t0 > lim) {
			g_abort = 1;
			cli_die("%s: rank %d waited %.0f s for the other ranks: a rank died or "
				"hangs", what, g_rank, lim);
		}
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	if (rc != MPI_SUCCESS) {
		g_abort = 1;
		cli_die("%s failed (MPI error %d): a rank died, or the network failed", what, rc);
	}
}

void cli_mpi_gather(const void *local, size_t size, void *out)
{
	MPI_Request rq;

	if (!g_on) {
		memcpy(out, local, size);
		return;
	}
	wait_or_die(MPI_Igather(local, (int)size, MPI_BYTE, out, (int)size, MPI_BYTE, 0,
				MPI_COMM_WORLD, &rq), &rq, "MPI_Igather");
}

void cli_mpi_allreduce(double *v, int n, char op)
{
	MPI_Op o = op == '+' ? MPI_SUM : op == '<' ? MPI_MIN : MPI_MAX;
	MPI_Request rq;

	if (!g_on)
		return;
	wait_or_die(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, o, MPI_COMM_WORLD, &rq), &rq,
		    "MPI_Iallreduce");
}

void cli_mpi_barrier(void)
{
	MPI_Request rq;

	if (g_on)
		wait_or_die(MPI_Ibarrier(MPI_COMM_WORLD, &rq), &rq, "MPI_Ibarrier");
}
