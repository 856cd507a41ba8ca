/*
 * Worker placement for the CLI's `stepring topo` and for binding the
 * thread that drives a GPU: thin wrappers over the pool's planner
 * (runtime/affinity/affinity.c), which has no public API yet. The only part of the
 * benchmark library that reaches library internals; it needs the static
 * library.
 */
#ifndef SR_BENCH_PLACEMENT_H
#define SR_BENCH_PLACEMENT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Plan @threads workers (0: one per allowed core) with @bind (enum
 * sr_bind) on @topology (NULL: this machine; an hwloc synthetic
 * description, or a path ending in .xml), inside @cpuset (NULL: allowed
 * CPUs), worker 0 near @near (NULL: anywhere), and print the plan to @f.
 * 0 or -errno (sr_last_error() says why). */
int bench_placement_print(const char *topology, const char *cpuset, const char *near,
			  uint32_t threads, uint32_t bind, FILE *f);

/* The CPUs near CUDA device @dev as a list: 0, -ENOSYS (no CUDA in this
 * build, no topology), -ENODEV (no such GPU, or hwloc does not know). */
int bench_gpu_local_cpus(int dev, char *buf, size_t len);

/* Bind the calling thread to the CPUs near CUDA device @dev; @buf gets the
 * list. 0 or -errno. */
int bench_bind_near_gpu(int dev, char *buf, size_t len);

#endif
