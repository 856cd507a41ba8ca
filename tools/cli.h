/* Shared helpers of the stepring CLI: option parsing with one clear error
 * line and exit 2 on bad input, timing, JSON output. */
#ifndef SR_CLI_H
#define SR_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "stepring/pool.h"

/* Subcommands: int cmd_NAME(int argc, char **argv), each in tools/cmd_*.c,
 * listed by the dispatcher (tools/stepring.c). */
typedef int (*sr_cmd_fn)(int argc, char **argv);

#define SR_CLI_EXIT_USAGE 2

/* `stepring bench WHAT` dispatches (tools/cmd_bench.c) to
 * int bench_WHAT(int argc, char **argv): bench_env, bench_ring,
 * bench_replay, bench_pool, bench_checkpoint, bench_loop. */

/* Print "stepring: <msg>" to stderr and exit(2). */
void cli_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Parse numbers; on junk or out-of-range values call cli_die naming @opt. */
long long cli_int(const char *opt, const char *s, long long lo, long long hi);
double cli_double(const char *opt, const char *s, double lo, double hi);
/* Comma list of ints ("1,2,4"); returns count, at most @max. */
int cli_int_list(const char *opt, const char *s, long long *out, int max, long long lo,
		 long long hi);

/* Tiny option scanner: argv[*i] is "--name" or "--name=value". Returns true
 * when it matches @name; *val gets the value (next arg or after '='),
 * dies if a value is missing. For flags without value pass val = NULL. */
bool cli_opt(int argc, char **argv, int *i, const char *name, const char **val);
/* Dies with "unknown option" for argv[i]. */
void cli_unknown(const char *cmd, const char *arg) __attribute__((noreturn));

/* "host" | "cuda" | "auto" -> enum sr_device_kind, or dies naming --device. */
int cli_device(const char *v);

/* "core" | "numa" | "none" -> enum sr_bind, or dies naming --bind. */
int cli_bind(const char *v);

/* The run options the bench commands share (bench pool/loop/checkpoint/mpi,
 * sweep, diagnose): one parser, so each flag has one range and one message.
 * A command sets a pointer for each flag it takes and leaves the others
 * NULL; cli_run_opt then matches argv[*i] like cli_opt, stores the parsed
 * value, and returns true, or returns false for any other option. Sweep
 * takes lists of these numbers and parses them with the same limits. */
#define CLI_ENVS_MAX (1 << 24)
#define CLI_THREADS_MAX 4096 /* --threads 0: one per CPU */
#define CLI_BATCH_MAX (1 << 24)
struct cli_run_opts {
	const char **env;       /* --env ID (resolved later by cli_env) */
	uint32_t *envs;         /* --envs N in [1, envs_max] */
	uint32_t envs_max;      /* 0: CLI_ENVS_MAX */
	uint32_t *threads;      /* --threads N in [0, CLI_THREADS_MAX] */
	uint32_t *batch;        /* --batch N in [1, CLI_BATCH_MAX] */
	int *bind;              /* --bind core|numa|none (enum sr_bind) */
	const char **bind_name; /* the --bind word as given (with bind) */
};
bool cli_run_opt(int argc, char **argv, int *i, const struct cli_run_opts *o);

/* Resolve an env id or dies listing the known ones. */
struct sr_env_spec;
void cli_env(const char *name, struct sr_env_spec *out);

/* sr_pool_info of @p (dies if it cannot be read: a bug). */
sr_pool_info cli_pool_info(const sr_pool *p);


#endif
