/* Placement plans on synthetic hwloc topologies: 1, 2 and 4 NUMA nodes,
 * restricted cpusets, SMT, too many threads, bind policies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "stepring.h"
#include "affinity_internal.h"

static struct sr__plan *plan_near(const char *topo, const char *cpuset, const char *near,
				  uint32_t T, uint32_t bind)
{
	struct sr__plan *p = NULL;
	int err = sr__plan_compute(topo, cpuset, near, T, bind, &p);

	if (err)
		fprintf(stderr, "plan: %s\n", sr_last_error());
	assert_int_equal(err, 0);
	assert_non_null(p);
	return p;
}

static struct sr__plan *plan(const char *topo, const char *cpuset, uint32_t T, uint32_t bind)
{
	return plan_near(topo, cpuset, NULL, T, bind);
}

static void distinct_cpus(const struct sr__plan *p)
{
	for (uint32_t i = 0; i < p->nthreads; i++)
		for (uint32_t j = i + 1; j < p->nthreads; j++)
			assert_true(p->w[i].cpu != p->w[j].cpu);
}

static void test_one_node(void **st)
{
	struct sr__plan *p = plan("pack:1 core:4 pu:2", NULL, 0, SR_BIND_CORE);

	assert_int_equal(p->nthreads, 4); /* default: one per physical core */
	assert_int_equal(p->ncores, 4);
	assert_int_equal(p->npus, 8);
	assert_int_equal(p->nnuma, 1);
	assert_string_equal(p->warning, "");
	for (uint32_t i = 0; i < 4; i++) {
		assert_int_equal(p->w[i].core, (int)i);
		assert_int_equal(p->w[i].cpu, (int)(2 * i)); /* first PU of each core */
		assert_int_equal(p->w[i].numa, 0);
	}
	sr__plan_free(p);
}

static void test_two_nodes(void **st)
{
	struct sr__plan *p = plan("numa:2 core:4 pu:2", NULL, 3, SR_BIND_CORE);
	uint32_t on[2] = {0, 0};

	assert_int_equal(p->nnuma, 2);
	for (uint32_t i = 0; i < 3; i++) {
		assert_true(p->w[i].numa == 0 || p->w[i].numa == 1);
		on[p->w[i].numa]++;
	}
	/* spread: 2 + 1, and node-major order */
	assert_int_equal(on[0], 2);
	assert_int_equal(on[1], 1);
	assert_int_equal(p->w[2].numa, 1);
	assert_int_equal(p->w[2].cpu, 8); /* first PU of node 1 */
	distinct_cpus(p);
	sr__plan_free(p);

	/* bind numa: each worker gets its node's PUs */
	p = plan("numa:2 core:4 pu:2", NULL, 2, SR_BIND_NUMA);
	assert_string_equal(p->w[0].cpus, "0-7");
	assert_string_equal(p->w[1].cpus, "8-15");
	assert_int_equal(p->w[0].cpu, -1);
	sr__plan_free(p);

	/* bind none: no cpus */
	p = plan("numa:2 core:4 pu:2", NULL, 2, SR_BIND_NONE);
	assert_string_equal(p->w[0].cpus, "");
	sr__plan_free(p);
}

static void test_four_nodes(void **st)
{
	struct sr__plan *p = plan("pack:2 numa:2 core:8 pu:2", NULL, 4, SR_BIND_CORE);
	int seen[4] = {0};

	assert_int_equal(p->nnuma, 4);
	assert_int_equal(p->ncores, 32);
	for (uint32_t i = 0; i < 4; i++)
		seen[p->w[i].numa]++;
	for (int k = 0; k < 4; k++)
		assert_int_equal(seen[k], 1); /* one per node */
	assert_int_equal(p->w[0].pack, 0);
	assert_int_equal(p->w[3].pack, 1);
	distinct_cpus(p);
	sr__plan_free(p);

	p = plan("pack:2 numa:2 core:8 pu:2", NULL, 0, SR_BIND_CORE);
	assert_int_equal(p->nthreads, 32);
	distinct_cpus(p);
	sr__plan_free(p);
}

static void test_cpuset(void **st)
{
	struct sr__plan *p;
	struct sr__plan *bad = NULL;

	/* PUs 0-3: cores 0 and 1 of node 0 */
	p = plan("numa:2 core:4 pu:2", "0-3", 0, SR_BIND_CORE);
	assert_int_equal(p->nthreads, 2);
	assert_int_equal(p->nnuma, 1);
	assert_string_equal(p->allowed, "0-3");
	assert_int_equal(p->w[0].cpu, 0);
	assert_int_equal(p->w[1].cpu, 2);
	sr__plan_free(p);

	/* more threads than cores: the second PUs, with a warning */
	p = plan("numa:2 core:4 pu:2", "0-3", 3, SR_BIND_CORE);
	assert_true(strstr(p->warning, "share a core") != NULL);
	distinct_cpus(p);
	assert_int_equal(p->w[2].cpu, 1);
	sr__plan_free(p);

	/* cpuset across nodes */
	p = plan("numa:2 core:4 pu:2", "6-9", 0, SR_BIND_CORE);
	assert_int_equal(p->nthreads, 2);
	assert_int_equal(p->nnuma, 2);
	sr__plan_free(p);

	/* more threads than PUs: refused */
	assert_int_equal(sr__plan_compute("numa:2 core:4 pu:2", "0-3", NULL, 5, SR_BIND_CORE, &bad),
			 -EINVAL);
	assert_null(bad);
	assert_non_null(strstr(sr_last_error(), "5 threads"));
	/* CPUs that do not exist, junk */
	assert_int_equal(sr__plan_compute("core:4 pu:1", "2-9", NULL, 0, SR_BIND_CORE, &bad), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "not available"));
	assert_int_equal(sr__plan_compute("core:4 pu:1", "x", NULL, 0, SR_BIND_CORE, &bad), -EINVAL);
	assert_int_equal(sr__plan_compute("frobnicate:3", NULL, NULL, 0, SR_BIND_CORE, &bad), -EINVAL);
	assert_int_equal(sr__plan_compute("core:4 pu:1", NULL, NULL, 0, 9, &bad), -EINVAL);
}

static void test_machine_and_xml(void **st)
{
	struct sr__plan *p = plan(NULL, NULL, 0, SR_BIND_CORE);
	char path[] = "/tmp/sr-topo-XXXXXX.xml";
	char cmd[256];
	int fd;

	assert_true(p->nthreads >= 1);
	assert_int_equal(p->nthreads, p->ncores);
	/* binding the calling thread to worker 0's CPU works on this machine */
	assert_int_equal(sr__bind_self(&p->w[0]), 0);
	sr__plan_free(p);

	/* XML export of a synthetic topology, when lstopo is around */
	fd = mkstemps(path, 4);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof(cmd), "lstopo-no-graphics -i 'numa:2 core:2 pu:1' -f --of xml %s "
		 ">/dev/null 2>&1", path);
	if (system(cmd) == 0) {
		p = plan(path, NULL, 0, SR_BIND_CORE);
		assert_int_equal(p->nthreads, 4);
		assert_int_equal(p->nnuma, 2);
		sr__plan_free(p);
	}
	unlink(path);
}

static void test_print(void **st)
{
	struct sr__plan *p = plan("numa:2 core:2 pu:1", NULL, 0, SR_BIND_CORE);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	sr__plan_print(p, f);
	fclose(f);
	assert_non_null(strstr(buf, "worker 3: cpus 3 core 3 numa 1"));
	assert_non_null(strstr(buf, "4 workers, bind core"));
	free(buf);
	sr__plan_free(p);
}

/*
 * The collector (worker 0, the calling thread) near the batches' device:
 * a GPU on NUMA node 1 puts worker 0 on node 1 and keeps the spread; no
 * planned worker near the GPU leaves the plan as it was, with a warning.
 */
static void test_near_device(void **st)
{
	const char *topo = "numa:2 core:4 pu:2"; /* node 0: PUs 0-7, node 1: 8-15 */
	struct sr__plan *ref = plan(topo, NULL, 4, SR_BIND_CORE), *p;
	uint32_t on[2] = {0, 0};

	(void)st;
	assert_int_equal(ref->w[0].numa, 0);
	p = plan_near(topo, NULL, "8-15", 4, SR_BIND_CORE);
	assert_int_equal(p->w[0].numa, 1);
	assert_true(p->w[0].cpu >= 8 && p->w[0].cpu <= 15);
	assert_string_equal(p->near, "8-15");
	assert_string_equal(p->warning, "");
	/* The same workers, two entries exchanged: the spread is unchanged. */
	for (uint32_t i = 0; i < 4; i++)
		on[p->w[i].numa]++;
	assert_int_equal(on[0], 2);
	assert_int_equal(on[1], 2);
	distinct_cpus(p);
	{
		uint32_t moved = 0;

		for (uint32_t i = 0; i < 4; i++)
			moved += p->w[i].cpu != ref->w[i].cpu;
		assert_int_equal(moved, 2);
	}
	sr__plan_free(p);

	/* Already near: nothing moves. */
	p = plan_near(topo, NULL, "0-3", 4, SR_BIND_CORE);
	assert_int_equal(p->w[0].cpu, ref->w[0].cpu);
	assert_string_equal(p->warning, "");
	sr__plan_free(p);

	/* bind numa: worker 0 gets node 1's PUs. */
	p = plan_near(topo, NULL, "12", 2, SR_BIND_NUMA);
	assert_string_equal(p->w[0].cpus, "8-15");
	assert_string_equal(p->w[1].cpus, "0-7");
	sr__plan_free(p);

	/* The cpuset keeps the pool off the GPU's node: plan as usual, say so. */
	p = plan_near(topo, "0-7", "8-15", 2, SR_BIND_CORE);
	assert_int_equal(p->w[0].numa, 0);
	assert_non_null(strstr(p->warning, "no worker runs near the device (cpus 8-15)"));
	sr__plan_free(p);

	/* bind none: nobody is bound, nothing to move. */
	p = plan_near(topo, NULL, "8-15", 2, SR_BIND_NONE);
	assert_string_equal(p->w[0].cpus, "");
	assert_string_equal(p->warning, "");
	sr__plan_free(p);

	/* A bad list is refused. */
	p = NULL;
	assert_int_equal(sr__plan_compute(topo, NULL, "x", 2, SR_BIND_CORE, &p), -EINVAL);
	assert_null(p);
	assert_non_null(strstr(sr_last_error(), "near the device"));
	sr__plan_free(ref);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_node),
		cmocka_unit_test(test_two_nodes),
		cmocka_unit_test(test_four_nodes),
		cmocka_unit_test(test_cpuset),
		cmocka_unit_test(test_machine_and_xml),
		cmocka_unit_test(test_print),
		cmocka_unit_test(test_near_device),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
