/*
 * Placement of the pool's workers: the only file that includes hwloc.h.
 *
 * sr__plan_compute() is a pure function of (topology, cpuset, thread count,
 * bind policy), so tests run it on synthetic and XML topologies and
 * `stepring topo` prints it. sr__bind_self() applies one entry of a plan to
 * the calling thread, using the machine's topology (loaded once).
 */
#include <hwloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pool_internal.h"

#define MAX_NODES 1024

struct node_info {
	hwloc_obj_t numa;     /* NULL: the PUs of no NUMA node (treated as one node) */
	uint32_t ncores;      /* allowed cores */
	uint32_t npus;        /* allowed PUs */
	uint32_t want;        /* workers planned here */
};

/* Synthetic topologies are for tests and planning: bound the PUs they
 * describe, so that "pack:65536 pu:65536" is refused at once instead of
 * making hwloc build four billion objects (minutes, then out of memory). */
#define SR_SYNTH_MAX_PUS 16384

/* Product of the arities ("type:N") of a synthetic description,
 * overflow-checked; UINT64_MAX above the bound. */
static uint64_t synthetic_pus(const char *desc)
{
	uint64_t prod = 1;
	const char *p = desc;

	while ((p = strchr(p, ':'))) {
		char *end;
		unsigned long long n;

		p++;
		if (*p < '0' || *p > '9')
			continue;
		errno = 0;
		n = strtoull(p, &end, 10);
		if (errno || n > SR_SYNTH_MAX_PUS || (n && prod > SR_SYNTH_MAX_PUS / n))
			return UINT64_MAX;
		prod *= n;
		p = end;
	}
	return prod;
}

static int load_topology(const char *desc, hwloc_topology_t *out)
{
	hwloc_topology_t t;
	size_t len;
	int err;

	if (hwloc_topology_init(&t) < 0)
		return sr__errorf(-ENOMEM, "hwloc_topology_init failed");
	if (desc) {
		len = strlen(desc);
		if (len > 4 && !strcmp(desc + len - 4, ".xml")) {
			err = hwloc_topology_set_xml(t, desc);
		} else if (synthetic_pus(desc) > SR_SYNTH_MAX_PUS) {
			hwloc_topology_destroy(t);
			return sr__errorf(-EINVAL,
					  "topology '%.100s' describes more than %d PUs (the "
					  "product of its arities); synthetic topologies are "
					  "bounded",
					  desc, SR_SYNTH_MAX_PUS);
		} else {
			err = hwloc_topology_set_synthetic(t, desc);
		}
		if (err < 0) {
			hwloc_topology_destroy(t);
			return sr__errorf(-EINVAL, "bad topology '%s' (an hwloc synthetic description "
					  "like \"pack:2 numa:2 core:8 pu:2\" or an .xml file)", desc);
		}
	}
	if (hwloc_topology_load(t) < 0) {
		hwloc_topology_destroy(t);
		return sr__errorf(-EINVAL, "cannot load topology '%s'", desc ? desc : "(machine)");
	}
	*out = t;
	return 0;
}

/* The NUMA node holding @cpuset's PUs (first that intersects), or NULL. */
static hwloc_obj_t numa_of(hwloc_topology_t t, hwloc_const_cpuset_t set)
{
	hwloc_obj_t n = NULL;

	while ((n = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_NUMANODE, n)))
		if (n->cpuset && hwloc_bitmap_intersects(n->cpuset, set))
			return n;
	return NULL;
}

static int node_index(struct node_info *nodes, uint32_t nn, hwloc_obj_t numa)
{
	for (uint32_t i = 0; i < nn; i++)
		if (nodes[i].numa == numa)
			return (int)i;
	return -1;
}

/*
 * Worker 0 is the calling thread and the collector: put it on the first
 * planned worker's CPUs that lie near the device (@near), by exchanging
 * the two entries, so the spread over nodes and cores stays as planned.
 */
static void plan_near(struct sr__plan *plan, hwloc_const_bitmap_t near, hwloc_bitmap_t tmp)
{
	uint32_t T = plan->nthreads;

	if (plan->bind == SR_BIND_NONE)
		return;
	for (uint32_t i = 0; i < T; i++) {
		if (hwloc_bitmap_list_sscanf(tmp, plan->w[i].cpus) < 0 ||
		    !hwloc_bitmap_intersects(tmp, near))
			continue;
		if (i) {
			struct sr__plan_worker w0 = plan->w[0];

			plan->w[0] = plan->w[i];
			plan->w[i] = w0;
		}
		return;
	}
	snprintf(plan->warning + strlen(plan->warning),
		 sizeof(plan->warning) - strlen(plan->warning),
		 "%sno worker runs near the device (cpus %s): the collector stays on cpus %s",
		 plan->warning[0] ? "; " : "", plan->near, plan->w[0].cpus);
}

static int plan_from_topology(hwloc_topology_t t, bool machine, const char *cpuset,
			      const char *near, uint32_t num_threads, uint32_t bind,
			      struct sr__plan **out)
{
	hwloc_bitmap_t allowed = hwloc_bitmap_dup(hwloc_topology_get_allowed_cpuset(t));
	hwloc_bitmap_t user = NULL, nearset = NULL, tmp = hwloc_bitmap_alloc();
	hwloc_obj_type_t ctype = HWLOC_OBJ_CORE;
	struct node_info *nodes = calloc(MAX_NODES, sizeof(*nodes));
	struct sr__plan *plan = NULL;
	uint32_t nn = 0, ncores = 0, npus, T, placed = 0;
	hwloc_obj_t c;
	int err = 0;

	if (!allowed || !tmp || !nodes) {
		err = sr__errorf(-ENOMEM, "out of memory computing the placement");
		goto out;
	}
	if (bind > SR_BIND_NONE) {
		err = sr__errorf(-EINVAL, "bind policy %u is not core (0), numa (1) or none (2)", bind);
		goto out;
	}
	/* On the real machine, respect the process binding (taskset, cgroups). */
	if (machine && hwloc_get_cpubind(t, tmp, HWLOC_CPUBIND_PROCESS) == 0 &&
	    hwloc_bitmap_intersects(tmp, allowed))
		hwloc_bitmap_and(allowed, allowed, tmp);
	if (cpuset) {
		user = hwloc_bitmap_alloc();
		if (!user || hwloc_bitmap_list_sscanf(user, cpuset) < 0 ||
		    hwloc_bitmap_iszero(user) || hwloc_bitmap_weight(user) < 0) {
			err = sr__errorf(-EINVAL, "bad cpuset '%s' (expected a list like \"0-3,8\")",
					 cpuset);
			goto out;
		}
		if (!hwloc_bitmap_isincluded(user, allowed)) {
			char have[256];
			hwloc_bitmap_list_snprintf(have, sizeof(have), allowed);
			err = sr__errorf(-EINVAL, "cpuset '%s' names CPUs that are not available "
					 "(available: %s)", cpuset, have);
			goto out;
		}
		hwloc_bitmap_and(allowed, allowed, user);
	}
	if (near) {
		nearset = hwloc_bitmap_alloc();
		if (!nearset || hwloc_bitmap_list_sscanf(nearset, near) < 0 ||
		    hwloc_bitmap_iszero(nearset) || hwloc_bitmap_weight(nearset) < 0) {
			err = sr__errorf(-EINVAL, "bad list of CPUs near the device '%s' (expected a "
					 "list like \"0-3,8\")", near);
			goto out;
		}
	}
	npus = (uint32_t)hwloc_bitmap_weight(allowed);
	if (npus == 0) {
		err = sr__errorf(-EINVAL, "no CPU is available to the pool");
		goto out;
	}
	if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE) <= 0)
		ctype = HWLOC_OBJ_PU; /* topologies without cores: a PU is a core */

	/* Group allowed cores by NUMA node. */
	for (c = NULL; (c = hwloc_get_next_obj_by_type(t, ctype, c));) {
		hwloc_obj_t numa;
		int k;

		if (!hwloc_bitmap_intersects(c->cpuset, allowed))
			continue;
		numa = numa_of(t, c->cpuset);
		k = node_index(nodes, nn, numa);
		if (k < 0) {
			if (nn == MAX_NODES) {
				err = sr__errorf(-EINVAL, "more than %d NUMA nodes", MAX_NODES);
				goto out;
			}
			k = (int)nn++;
			nodes[k].numa = numa;
		}
		hwloc_bitmap_and(tmp, c->cpuset, allowed);
		nodes[k].ncores++;
		nodes[k].npus += (uint32_t)hwloc_bitmap_weight(tmp);
		ncores++;
	}

	T = num_threads ? num_threads : ncores;
	if (T > npus) {
		err = sr__errorf(-EINVAL, "%u threads but only %u CPUs (%u cores) are available%s",
				 T, npus, ncores, cpuset ? " in the cpuset" : "");
		goto out;
	}
	if (T > SR_STATS_MAX_WORKERS) {
		err = sr__errorf(-EINVAL, "%u threads: at most %d", T, SR_STATS_MAX_WORKERS);
		goto out;
	}
	plan = calloc(1, sizeof(*plan) + T * sizeof(plan->w[0]));
	if (!plan) {
		err = sr__errorf(-ENOMEM, "out of memory computing the placement");
		goto out;
	}
	plan->nthreads = T;
	plan->ncores = ncores;
	plan->npus = npus;
	plan->nnuma = nn;
	plan->bind = bind;
	hwloc_bitmap_list_snprintf(plan->allowed, sizeof(plan->allowed), allowed);
	if (T > ncores)
		snprintf(plan->warning, sizeof(plan->warning),
			 "%u threads on %u cores: some workers share a core (SMT)", T, ncores);

	/* Spread: each worker goes to the node with the lowest fill ratio,
	 * first counting cores, then (more threads than cores) PUs. */
	for (uint32_t i = 0; i < T; i++) {
		bool smt = i >= ncores;
		int best = -1;
		for (uint32_t k = 0; k < nn; k++) {
			uint32_t cap = smt ? nodes[k].npus : nodes[k].ncores;
			if (nodes[k].want >= cap)
				continue;
			/* want/cap < best.want/best.cap, cross-multiplied */
			if (best < 0 ||
			    (uint64_t)nodes[k].want * (smt ? nodes[best].npus : nodes[best].ncores) <
				    (uint64_t)nodes[best].want * cap)
				best = (int)k;
		}
		nodes[best].want++;
	}

	/* Assign node-major, so a worker's neighbours share its node. Within a
	 * node: first PU of each core in order, then the next PUs (SMT). */
	for (uint32_t k = 0; k < nn; k++) {
		uint32_t got = 0;
		for (unsigned round = 0; got < nodes[k].want; round++) {
			for (c = NULL; got < nodes[k].want && (c = hwloc_get_next_obj_by_type(t, ctype, c));) {
				hwloc_obj_t pu, pk;
				struct sr__plan_worker *w;
				unsigned idx = 0;
				int id;

				if (!hwloc_bitmap_intersects(c->cpuset, allowed) ||
				    numa_of(t, c->cpuset) != nodes[k].numa)
					continue;
				/* the round-th allowed PU of this core */
				hwloc_bitmap_and(tmp, c->cpuset, allowed);
				id = hwloc_bitmap_first(tmp);
				for (idx = 0; idx < round && id >= 0; idx++)
					id = hwloc_bitmap_next(tmp, id);
				if (id < 0)
					continue;
				pu = hwloc_get_pu_obj_by_os_index(t, (unsigned)id);
				pk = pu ? hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu) : NULL;
				w = &plan->w[placed++];
				got++;
				w->numa = nodes[k].numa ? (int32_t)nodes[k].numa->os_index : -1;
				w->pack = pk ? (int32_t)pk->logical_index : -1;
				if (bind == SR_BIND_CORE) {
					w->cpu = id;
					w->core = ctype == HWLOC_OBJ_CORE ? (int32_t)c->logical_index : -1;
					snprintf(w->cpus, sizeof(w->cpus), "%d", id);
				} else if (bind == SR_BIND_NUMA) {
					w->cpu = -1;
					w->core = -1;
					if (nodes[k].numa)
						hwloc_bitmap_and(tmp, nodes[k].numa->cpuset, allowed);
					else
						hwloc_bitmap_copy(tmp, allowed);
					hwloc_bitmap_list_snprintf(w->cpus, sizeof(w->cpus), tmp);
				} else {
					w->cpu = -1;
					w->core = -1;
					w->numa = -1;
					w->pack = -1;
					w->cpus[0] = '\0';
				}
			}
			if (round > 64)
				break;
		}
	}
	if (placed != T) {
		err = sr__errorf(-EINVAL, "placement failed: %u of %u workers placed", placed, T);
		goto out;
	}
	if (nearset) {
		hwloc_bitmap_list_snprintf(plan->near, sizeof(plan->near), nearset);
		plan_near(plan, nearset, tmp);
	}
	*out = plan;
	plan = NULL;
out:
	free(plan);
	free(nodes);
	hwloc_bitmap_free(tmp);
	hwloc_bitmap_free(user);
	hwloc_bitmap_free(nearset);
	hwloc_bitmap_free(allowed);
	return err;
}

int sr__plan_compute(const char *topology, const char *cpuset, const char *near,
		     uint32_t num_threads, uint32_t bind, struct sr__plan **out)
{
	hwloc_topology_t t = NULL;
	int err;

	*out = NULL;
	err = load_topology(topology, &t);
	if (err)
		return err;
	err = plan_from_topology(t, topology == NULL, cpuset, near, num_threads, bind, out);
	hwloc_topology_destroy(t);
	return err;
}

void sr__plan_free(struct sr__plan *plan)
{
	free(plan);
}

void sr__plan_print(const struct sr__plan *plan, FILE *f)
{
	static const char *const bind_name[] = {"core", "numa", "none"};

	fprintf(f, "allowed cpus %s: %u PUs, %u cores, %u NUMA nodes; %u workers, bind %s\n",
		plan->allowed, plan->npus, plan->ncores, plan->nnuma, plan->nthreads,
		bind_name[plan->bind <= SR_BIND_NONE ? plan->bind : SR_BIND_NONE]);
	for (uint32_t i = 0; i < plan->nthreads; i++) {
		const struct sr__plan_worker *w = &plan->w[i];
		fprintf(f, "worker %u: cpus %s", i, w->cpus[0] ? w->cpus : "any");
		if (w->core >= 0)
			fprintf(f, " core %d", w->core);
		if (w->numa >= 0)
			fprintf(f, " numa %d", w->numa);
		if (w->pack >= 0)
			fprintf(f, " package %d", w->pack);
		fprintf(f, "%s\n", i == 0 ? " (calling thread: not bound by the pool)" : "");
	}
	if (plan->near[0])
		fprintf(f, "device near cpus %s: worker 0 (the collector) on cpus %s\n", plan->near,
			plan->w[0].cpus[0] ? plan->w[0].cpus : "any");
	if (plan->warning[0])
		fprintf(f, "warning: %s\n", plan->warning);
}

/* The machine topology for binding, loaded once. */
static pthread_once_t machine_once = PTHREAD_ONCE_INIT;
static hwloc_topology_t machine_topo;

static void machine_load(void)
{
	if (load_topology(NULL, &machine_topo))
		machine_topo = NULL;
}

int sr__bind_self(const struct sr__plan_worker *w)
{
	hwloc_bitmap_t set;
	int err = 0;

	if (!w->cpus[0])
		return 0;
	pthread_once(&machine_once, machine_load);
	if (!machine_topo)
		return -ENOSYS;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_bitmap_list_sscanf(set, w->cpus) < 0)
		err = -EINVAL;
	else if (hwloc_set_cpubind(machine_topo, set, HWLOC_CPUBIND_THREAD) < 0)
		err = -errno;
	hwloc_bitmap_free(set);
	return err;
}

#ifdef SR_HAVE_CUDA
#include <hwloc/cudart.h>

#include "device_priv.h" /* declares sr__bind_self_near_cuda */

/* *@out gets the CPUs near CUDA device @dev (free it with
 * hwloc_bitmap_free). 0, -ENOSYS (no topology), -ENOMEM, -ENODEV (no such
 * GPU, or hwloc does not know where it is). */
static int cuda_cpuset(int dev, hwloc_bitmap_t *out)
{
	hwloc_bitmap_t set;

	pthread_once(&machine_once, machine_load);
	if (!machine_topo)
		return -ENOSYS;
	set = hwloc_bitmap_alloc();
	if (!set)
		return -ENOMEM;
	if (hwloc_cudart_get_device_cpuset(machine_topo, dev, set) < 0 || hwloc_bitmap_iszero(set)) {
		hwloc_bitmap_free(set);
		return -ENODEV;
	}
	*out = set;
	return 0;
}

int sr__cuda_local_cpus(int dev, char *buf, size_t len)
{
	hwloc_bitmap_t set;
	int err = cuda_cpuset(dev, &set);

	if (err)
		return err;
	if (buf && len)
		hwloc_bitmap_list_snprintf(buf, len, set);
	hwloc_bitmap_free(set);
	return 0;
}

/* Bind the calling thread (the collector) to the CPUs near CUDA device
 * @dev, from hwloc's CUDA helper (the PCI device's local CPUs); @buf gets
 * them as a list. 0, -ENOSYS (no topology), -ENODEV (no such GPU, or
 * hwloc does not know where it is), -errno from the binding. */
int sr__bind_self_near_cuda(int dev, char *buf, size_t len)
{
	hwloc_bitmap_t set;
	int err = cuda_cpuset(dev, &set);

	if (err)
		return err;
	if (hwloc_set_cpubind(machine_topo, set, HWLOC_CPUBIND_THREAD) < 0)
		err = -errno;
	if (!err && buf && len)
		hwloc_bitmap_list_snprintf(buf, len, set);
	hwloc_bitmap_free(set);
	return err;
}
#endif
