/*
 * Faults across ranks (run by tests/mpi_faults.sh under mpirun):
 *   mpi_faults kill   rank 1 kills itself (SIGKILL) while the ranks step
 *                     and meet at a heartbeat barrier every 20 steps
 *   mpi_faults hang   rank 1 stops answering (sleeps) instead
 * Every surviving rank must end with an error, not hang: a timed-out
 * collective says so (-ETIMEDOUT, message on stderr) and aborts the job;
 * a rank stopped by the launcher because another died says that.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "stepring.h"
#include "stepring/mpi.h"

static int g_rank;

static void on_term(int sig)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg),
			 "mpi_faults: rank %d: stopped by the launcher (signal %d): another "
			 "rank of the job failed\n", g_rank, sig);
	if (n > 0)
		(void)!write(2, msg, (size_t)n);
	_exit(3);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "kill";
	sr_pool_opts o;
	sr_mpi_opts mo;
	sr_mpi_pool *mp;
	const sr_batch *b;
	int32_t *act;
	int err;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
	signal(SIGTERM, on_term);
	sr_pool_opts_init(&o);
	o.env = "CartPole-v1";
	o.num_envs = 64;
	o.num_threads = 1;
	o.bind = SR_BIND_NONE;
	sr_mpi_opts_init(&mo);
	mo.flags = SR_MPI_F_TIMEOUT;
	mo.timeout_s = 3;
	err = sr_mpi_pool_create(MPI_COMM_WORLD, &o, &mo, &mp);
	if (err) {
		fprintf(stderr, "mpi_faults: rank %d: %s\n", g_rank, sr_last_error());
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	act = calloc(64, sizeof(*act));
	sr_pool_reset(sr_mpi_pool_local(mp), &b);
	for (int t = 1;; t++) {
		err = sr_pool_step(sr_mpi_pool_local(mp), act, &b);
		if (!err && t % 20 == 0) {
			if (t == 100 && g_rank == 1) {
				if (!strcmp(mode, "kill"))
					raise(SIGKILL);
				for (;;)
					pause();
			}
			err = sr_mpi_pool_barrier(mp);
		}
		if (err) {
			fprintf(stderr, "mpi_faults: rank %d: step %d: %s (%s)\n", g_rank, t,
				sr_last_error(), sr_strerror(err));
			fflush(stderr);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
		if (t > 1000000)
			break;
	}
	free(act);
	sr_mpi_pool_destroy(mp);
	MPI_Finalize();
	return 0;
}
