/*
 * The partition of a distributed pool's envs over ranks (stepring/mpi.h),
 * in every build: it needs no MPI, and re-sharding a saved run uses it.
 */
#include <errno.h>

#include "sr_base.h"

SR_EXPORT int sr_mpi_env_range(uint64_t num_envs, uint32_t size, uint32_t rank, uint64_t *first,
			       uint32_t *n);

int sr_mpi_env_range(uint64_t num_envs, uint32_t size, uint32_t rank, uint64_t *first,
		     uint32_t *n)
{
	uint64_t base, extra, cnt;

	if (!first || !n)
		return sr__errorf(-EINVAL, "sr_mpi_env_range: first or n is NULL");
	if (size == 0 || rank >= size)
		return sr__errorf(-EINVAL, "sr_mpi_env_range: rank %u of %u ranks", rank, size);
	if (num_envs < size)
		return sr__errorf(-EINVAL, "num_envs %llu < %u ranks: every rank must host at "
				  "least one env", (unsigned long long)num_envs, size);
	base = num_envs / size;
	extra = num_envs % size;
	cnt = base + (rank < extra);
	if (cnt > UINT32_MAX)
		return sr__errorf(-EINVAL, "num_envs %llu: %llu envs on one rank is too many",
				  (unsigned long long)num_envs, (unsigned long long)cnt);
	*first = (uint64_t)rank * base + (rank < extra ? rank : extra);
	*n = (uint32_t)cnt;
	return 0;
}
