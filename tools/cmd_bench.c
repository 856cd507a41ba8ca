/* stepring bench WHAT: dispatch to the benchmark functions bench_WHAT in
 * tools/cmd_bench_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_mpi.h"

/* Called by the dispatcher (tools/stepring.c). */
int cmd_bench(int argc, char **argv);
/* Under mpirun / srun: tools/cmd_bench_mpi.c */
int bench_mpi_pool(int argc, char **argv);

#define SR_BENCHES(X)                                                                      \
	X(env, "raw single-thread batched step loop of one env type (the ceiling)")       \
	X(ring, "shared-memory ring: push/pop throughput")                                 \
	X(replay, "replay sampling from the ring")                                         \
	X(pool, "the worker pool end to end")                                              \
	X(checkpoint, "checkpoint write and restore")                                       \
	X(loop, "closed loop env -> ring -> device -> policy -> env vs env only")

#define X(name, help) int bench_##name(int argc, char **argv);
SR_BENCHES(X)
#undef X

static const struct {
	const char *name;
	const char *help;
} benches[] = {
#define X(name, help) {#name, help},
	SR_BENCHES(X)
#undef X
};

static sr_cmd_fn lookup(const char *name)
{
#define X(n, help)                                                                         \
	if (!strcmp(name, #n))                                                             \
		return bench_##n;
	SR_BENCHES(X)
#undef X
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stepring bench WHAT [OPTIONS]   (stepring bench WHAT --help)\n\n"
		   "benchmarks:\n");
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]); i++)
		fprintf(f, "  %-11s %s\n", benches[i].name, benches[i].help);
}

int cmd_bench(int argc, char **argv)
{
	char avail[256];
	size_t off = 0;
	sr_cmd_fn fn;

	avail[0] = '\0';
	for (size_t i = 0; i < sizeof(benches) / sizeof(benches[0]) && off < sizeof(avail); i++)
		off += (size_t)snprintf(avail + off, sizeof(avail) - off, "%s%s", off ? ", " : "",
					benches[i].name);
	if (argc < 2)
		cli_die("bench: which benchmark? (available: %s; see 'stepring bench --help')",
			avail);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (cli_mpi_size() > 1) {
		if (!strcmp(argv[1], "pool"))
			return bench_mpi_pool(argc - 1, argv + 1);
		cli_die("bench %s: not across MPI ranks (only 'bench pool' is); run it without "
			"mpirun", argv[1]);
	}
	fn = lookup(argv[1]);
	if (!fn)
		cli_die("bench: unknown benchmark '%s' (available: %s)", argv[1], avail);
	return fn(argc - 1, argv + 1);
}
