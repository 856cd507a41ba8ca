/*
 * The MPI part (runtime/mpi/): what its files share. Only the files
 * named *_mpi.c include it (and <mpi.h>); CMake builds them with MPI, or
 * pool_nompi.c without.
 *
 * Every collective exchange is nonblocking and polled against a deadline
 * (sr__mpi_wait), so a rank that died or hangs turns into -ETIMEDOUT on
 * the others instead of a hang; the pool's communicator is a duplicate
 * with MPI_ERRORS_RETURN, so an MPI error (a broken connection) becomes
 * -EIO rather than the default abort.
 */
#ifndef SR_MPI_INTERNAL_H
#define SR_MPI_INTERNAL_H

#include <mpi.h>

#include "pool_internal.h"
#include "ring_internal.h"
#include "stepring/mpi.h"

struct sr_mpi_pool {
	MPI_Comm comm; /* duplicate, MPI_ERRORS_RETURN */
	sr_pool *pool;
	uint64_t seed;
	double timeout_s;
	sr_mpi_pool_info info;
};

/* One rank's outcome, as every rank learns it (sr__mpi_agree). */
struct sr__mpi_result {
	int32_t err;
	char msg[252];
};

/* -EIO with MPI's text for @rc. */
int sr__mpi_fail(int rc, const char *what);
/* Poll @rq until it completes or @timeout_s passes (-ETIMEDOUT: the
 * communicator is unusable from then on). */
int sr__mpi_wait(MPI_Comm comm, MPI_Request *rq, double timeout_s, const char *what);
/* An allgather of @bytes from every rank, waited for as sr__mpi_wait. */
int sr__mpi_allgather(MPI_Comm comm, const void *in, void *out, int bytes, double timeout_s,
		      const char *what);
/* Every rank learns every rank's (@err, message); the first error
 * becomes every rank's result, with the same text on all. */
int sr__mpi_agree(sr_mpi_pool *mp, int err, const char *what);

#endif
