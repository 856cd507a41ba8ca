/* Wrappers over the pool's planner and hwloc's GPU locality (placement.h). */
#include "affinity_internal.h"
#include "placement.h"

int bench_placement_print(const char *topology, const char *cpuset, const char *near,
			  uint32_t threads, uint32_t bind, FILE *f)
{
	struct sr__plan *plan;
	int err = sr__plan_compute(topology, cpuset, near, threads, bind, &plan);

	if (err)
		return err;
	sr__plan_print(plan, f);
	sr__plan_free(plan);
	return 0;
}

int bench_gpu_local_cpus(int dev, char *buf, size_t len)
{
	return sr__cuda_local_cpus(dev, buf, len);
}

int bench_bind_near_gpu(int dev, char *buf, size_t len)
{
	return sr__bind_self_near_cuda(dev, buf, len);
}
