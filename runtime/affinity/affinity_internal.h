/*
 * Placement (runtime/affinity/affinity.c, the only file that includes
 * hwloc.h): where each worker runs. The pool plans its workers with it,
 * binds its threads and its worker processes; the MPI part splits a
 * node's CPUs between ranks; the benchmarks bind their collector near a
 * GPU.
 */
#ifndef SR_AFFINITY_INTERNAL_H
#define SR_AFFINITY_INTERNAL_H

#include <sched.h>
#include <stdio.h>

#include "sr_base.h"

/*
 * Placement plan (affinity.c, the only file that includes hwloc.h).
 * Worker w runs on plan->w[w]; worker 0 is the calling thread, which the
 * pool does not bind (its entry says where it should live).
 */
struct sr__plan_worker {
	int32_t cpu;    /* OS index of the PU it is bound to (bind core), or -1 */
	int32_t core;   /* logical index of its core, or -1 (bind none) */
	int32_t numa;   /* OS index of its NUMA node, or -1 */
	int32_t pack;   /* logical index of its package, or -1 */
	char cpus[256]; /* cpuset it is bound to, as a list ("0-7"), "" = unbound */
};

struct sr__plan {
	uint32_t nthreads; /* workers planned */
	uint32_t ncores;   /* cores with at least one allowed PU */
	uint32_t npus;     /* allowed PUs */
	uint32_t nnuma;    /* NUMA nodes holding allowed PUs */
	uint32_t bind;     /* enum sr_bind */
	char allowed[256]; /* allowed cpuset as a list */
	char near[256];    /* CPUs near the batch's device as given, or "" */
	char warning[256]; /* non-fatal remark ("2 threads per core"), or "" */
	struct sr__plan_worker w[]; /* nthreads */
};

/*
 * Compute the placement plan. @topology: NULL for this machine, an hwloc
 * synthetic description ("pack:2 numa:2 core:8 pu:2") or the path of an
 * hwloc XML export (ends in ".xml"). @cpuset: NULL or a list like "0-3,8"
 * restricting the PUs (like taskset -c). @num_threads: 0 = one per allowed
 * physical core. Workers are spread over the NUMA nodes in proportion to
 * their allowed cores, then over cores in order; more threads than cores
 * use the second PU of each core (warning), more threads than PUs is
 * -EINVAL. @near: NULL or a list of the CPUs near the device the batches
 * go to (a GPU's local CPUs): worker 0 (the calling thread, which is the
 * collector) is then the planned worker that runs there, the first one in
 * plan order, by exchanging two entries (the spread is unchanged); with
 * no planned worker there, plan->warning says so. Ignored with bind none.
 * Pure: reads the topology, binds nothing. Returns 0, -EINVAL (bad
 * description, cpuset, near list, thread count), -ENOMEM; *@out is freed
 * with sr__plan_free().
 */
int sr__plan_compute(const char *topology, const char *cpuset, const char *near,
		     uint32_t num_threads, uint32_t bind, struct sr__plan **out);
void sr__plan_free(struct sr__plan *plan);
/* Print the plan as text, one line per worker. */
void sr__plan_print(const struct sr__plan *plan, FILE *f);
/* Bind the calling thread as worker @w of @plan says (no-op for bind none
 * or empty cpus). 0 or -errno (the pool treats failure as a warning). */
int sr__bind_self(const struct sr__plan_worker *w);
/* The CPUs worker @w of a plan is bound to, as a cpu_set_t (empty: not
 * bound). 0, -EINVAL, -ENOMEM. */
int sr__plan_cpuset(const struct sr__plan_worker *w, cpu_set_t *out);

/* Bind the calling thread to the CPUs near CUDA device @dev (hwloc's CUDA
 * helper); @buf gets the list. 0, -ENOSYS (no CUDA in this build, no
 * topology), -ENODEV (no such GPU, or hwloc does not know where it is),
 * -errno of the binding. */
int sr__bind_self_near_cuda(int dev, char *buf, size_t len);
/* The CPUs near CUDA device @dev as a list (hwloc's CUDA helper): 0,
 * -ENOSYS (no CUDA in this build, no topology), -ENODEV (no such GPU, or
 * hwloc does not know where it is). */
int sr__cuda_local_cpus(int dev, char *buf, size_t len);

#endif
