/* stepring CLI: dispatches to the subcommands in tools/cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_mpi.h"
#include "stepring.h"

#define SR_CMDS(X)                                                                         \
	X(envs, "list the known env types with their spaces")                              \
	X(envcheck, "replay a Gymnasium reference CSV and compare")                        \
	X(envstats, "episode statistics of a policy against a reference (KS tests)")       \
	X(bench, "benchmarks: env, ring, replay, pool, checkpoint")                        \
	X(rollout, "run a pool and hash every obs, reward and flag (determinism check)")   \
	X(topo, "print the worker placement plan")                                         \
	X(ring, "shared-memory rings: ls, inspect, rm")                                    \
	X(checkpoint, "checkpoint files: verify, info, clean")                             \
	X(sweep, "sweep num_envs / threads / batch and print a table")                     \
	X(diagnose, "env-bound, policy-bound, copy-bound or sync-bound?")                  \
	X(top, "live view of a running pool")                                             \
	X(metrics, "Prometheus metrics of running pools (HTTP, textfile, time series)")    \
	X(compare, "regression verdict between two sweep/bench JSONL files")

#define X(name, help) int cmd_##name(int argc, char **argv);
SR_CMDS(X)
#undef X

static const struct {
	const char *name;
	const char *help;
} cmds[] = {
#define X(name, help) {#name, help},
	SR_CMDS(X)
#undef X
};

static sr_cmd_fn lookup(const char *name)
{
#define X(n, help)                                                                         \
	if (strcmp(name, #n) == 0)                                                         \
		return cmd_##n;
	SR_CMDS(X)
#undef X
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stepring COMMAND [OPTIONS]   (stepring COMMAND --help)\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-11s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "  %-11s %s\n", "version", "print the version and build");
}

int main(int argc, char **argv)
{
	sr_cmd_fn fn;

	if (argc < 2) {
		usage(stderr);
		return SR_CLI_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("%s\n", sr_build_info());
		return 0;
	}
	cli_mpi_init(&argc, &argv); /* only when started by mpirun / srun */
	fn = lookup(argv[1]);
	if (!fn) {
		fprintf(stderr, "stepring: unknown command '%s'\n", argv[1]);
		usage(stderr);
		return SR_CLI_EXIT_USAGE;
	}
	return fn(argc - 1, argv + 1);
}
