/*
 * Fallback of runtime/mpi/*_mpi.c for a build without MPI: stepring/mpi.h
 * is not installed, but the entry points a binding finds by name (the
 * Python binding through ctypes) exist and say why they cannot work.
 */
#include <stdlib.h>
#include <string.h>

#include "sr_base.h"
#include "stepring/pool.h"

struct sr_mpi_opts;
struct sr_mpi_pool;
struct sr_mpi_pool_info;

#define NO_MPI "this stepring was built without MPI (install libopenmpi-dev and configure " \
	       "with -DSR_WITH_MPI=ON)"

SR_EXPORT int sr_mpi_pool_create_f(int64_t fcomm, const sr_pool_opts *opts,
				   const struct sr_mpi_opts *mopts, struct sr_mpi_pool **out);
SR_EXPORT void sr_mpi_pool_destroy(struct sr_mpi_pool *mp);
SR_EXPORT sr_pool *sr_mpi_pool_local(const struct sr_mpi_pool *mp);
SR_EXPORT sr_pool *sr_mpi_pool_detach(struct sr_mpi_pool *mp);
SR_EXPORT int sr_mpi_pool_info_get(const struct sr_mpi_pool *mp, struct sr_mpi_pool_info *out);
SR_EXPORT int sr_mpi_pool_barrier(struct sr_mpi_pool *mp);

int sr_mpi_pool_create_f(int64_t fcomm, const sr_pool_opts *opts, const struct sr_mpi_opts *mopts,
			 struct sr_mpi_pool **out)
{
	if (out)
		*out = NULL;
	return sr__errorf(-ENOSYS, "sr_mpi_pool_create: %s", NO_MPI);
}

void sr_mpi_pool_destroy(struct sr_mpi_pool *mp)
{
}

sr_pool *sr_mpi_pool_local(const struct sr_mpi_pool *mp)
{
	return NULL;
}

sr_pool *sr_mpi_pool_detach(struct sr_mpi_pool *mp)
{
	return NULL;
}

int sr_mpi_pool_info_get(const struct sr_mpi_pool *mp, struct sr_mpi_pool_info *out)
{
	return sr__errorf(-ENOSYS, "sr_mpi_pool_info_get: %s", NO_MPI);
}

int sr_mpi_pool_barrier(struct sr_mpi_pool *mp)
{
	return sr__errorf(-ENOSYS, "sr_mpi_pool_barrier: %s", NO_MPI);
}
