/* stepring checkpoint verify|info|clean FILE: check and describe checkpoint
 * files, and remove the temporaries of writers killed midway. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "machine.h" /* bench_json_str */
#include "stepring.h"
#include "stepring/checkpoint.h"

int cmd_checkpoint(int argc, char **argv);

static void usage(FILE *f)
{
	fprintf(f, "usage: stepring checkpoint verify FILE\n"
		   "       stepring checkpoint info FILE [--json]\n"
		   "       stepring checkpoint clean FILE\n\n"
		   "verify  check the header, the trailer and the CRC32C of every section;\n"
		   "        exit 0 if the file loads, 1 if it is corrupt, truncated or of\n"
		   "        another format version, 2 if it cannot be read at all (missing,\n"
		   "        a directory, no permission; the reason is printed)\n"
		   "info    verify, then print the build that wrote it, the pool geometry\n"
		   "        and the sections\n"
		   "clean   remove the stale temporaries next to FILE (.FILE.tmp.PID.N) that\n"
		   "        writers killed in the middle of a write left behind; only those\n"
		   "        whose PID no longer runs. verify and info mention them; a new\n"
		   "        checkpoint to FILE removes them too\n");
}

struct stale {
	int n;
	uint64_t bytes;
	bool print;
};

static void on_stale(void *ctx, const char *tmp, long pid, uint64_t bytes)
{
	struct stale *st = ctx;

	st->n++;
	st->bytes += bytes;
	if (st->print)
		printf("removed %s (%llu bytes; writer pid %ld is gone)\n", tmp,
		       (unsigned long long)bytes, pid);
}

/* Stale temporaries next to @path (not removed); -errno if unreadable. */
static int count_stale(const char *path, struct stale *st)
{
	memset(st, 0, sizeof(*st));
	return sr_checkpoint_clean(path, 0, on_stale, st);
}

static void note_stale(FILE *f, const char *path, const struct stale *st)
{
	if (st->n > 0)
		fprintf(f,
			"%s: note: %d stale temporary file%s (%llu bytes) of killed writers next "
			"to it; 'stepring checkpoint clean %s' removes %s\n",
			path, st->n, st->n == 1 ? "" : "s", (unsigned long long)st->bytes, path,
			st->n == 1 ? "it" : "them");
}

static const char *autoreset_name(uint32_t a)
{
	return a == SR_AUTORESET_NEXT_STEP ? "next_step"
	       : a == SR_AUTORESET_SAME_STEP ? "same_step"
	       : a == SR_AUTORESET_DISABLED ? "disabled"
					     : "?";
}

static const char *section_name(uint32_t type)
{
	static const char *const names[] = {
		[SR_CKPT_SECT_POOL] = "pool",
		[SR_CKPT_SECT_ENV_STATES] = "env_states",
		[SR_CKPT_SECT_ENV_COUNTERS] = "env_counters",
		[SR_CKPT_SECT_STATS] = "stats",
		[SR_CKPT_SECT_RUNTIME] = "runtime",
		[SR_CKPT_SECT_REPLAY] = "replay",
		[SR_CKPT_SECT_REPLAY_META] = "replay_meta",
		[SR_CKPT_SECT_PRIORITIES] = "priorities",
	};

	if (type >= SR_CKPT_SECT_USER)
		return "user";
	return type < sizeof(names) / sizeof(names[0]) && names[type] ? names[type] : "unknown";
}

static void print_text(const char *path, const sr_ckpt_info *in)
{
	time_t t = (time_t)(in->created_unix_ns / 1000000000ull);
	struct tm tm;
	char when[64];

	gmtime_r(&t, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	printf("file        %s\n", path);
	printf("format      version %u, %llu bytes, %u sections\n", in->format_version,
	       (unsigned long long)in->file_size, in->n_sections);
	printf("written     %s by %s\n", when, in->build_info);
	if (in->env_id[0]) {
		printf("pool        %s, num_envs %u, batch %u, obs_dim %u, action %u bytes, "
		       "state %u bytes\n",
		       in->env_id, in->num_envs, in->batch_size, in->obs_dim, in->act_size,
		       in->state_size);
		printf("            seed %llu, autoreset %s, %llu env steps done\n",
		       (unsigned long long)in->seed, autoreset_name(in->autoreset),
		       (unsigned long long)in->steps);
		if (in->replay_slots || in->replay_head)
			printf("replay      %llu slots up to sequence %llu\n",
			       (unsigned long long)in->replay_slots,
			       (unsigned long long)in->replay_head);
		else
			printf("replay      not saved\n");
	}
	printf("sections    %-3s %-13s %12s %14s %10s\n", "#", "type", "offset", "bytes", "crc32c");
	for (uint32_t i = 0; i < in->n_sections; i++) {
		const sr_ckpt_section_info *s = &in->sections[i];
		printf("            %-3u %-13s %12llu %14llu   %08x\n", i,
		       section_name(s->type), (unsigned long long)s->offset,
		       (unsigned long long)s->length, s->crc);
	}
}

static void print_json(const char *path, const sr_ckpt_info *in, const struct stale *st)
{
	printf("{\"file\":");
	bench_json_str(stdout, path);
	printf(",\"format_version\":%u,\"bytes\":%llu,\"created_unix_ns\":%llu,\"build\":",
	       in->format_version, (unsigned long long)in->file_size,
	       (unsigned long long)in->created_unix_ns);
	bench_json_str(stdout, in->build_info);
	printf(",\"env\":");
	bench_json_str(stdout, in->env_id);
	printf(",\"num_envs\":%u,\"batch_size\":%u,"
	       "\"obs_dim\":%u,\"act_size\":%u,\"state_size\":%u,\"seed\":%llu,"
	       "\"autoreset\":\"%s\",\"steps\":%llu,\"replay_slots\":%llu,\"sections\":[",
	       in->num_envs, in->batch_size, in->obs_dim, in->act_size, in->state_size,
	       (unsigned long long)in->seed, autoreset_name(in->autoreset),
	       (unsigned long long)in->steps, (unsigned long long)in->replay_slots);
	for (uint32_t i = 0; i < in->n_sections; i++)
		printf("%s{\"type\":\"%s\",\"offset\":%llu,\"bytes\":%llu,\"crc32c\":\"%08x\"}",
		       i ? "," : "", section_name(in->sections[i].type),
		       (unsigned long long)in->sections[i].offset,
		       (unsigned long long)in->sections[i].length, in->sections[i].crc);
	printf("],\"stale_temporaries\":%d}\n", st->n > 0 ? st->n : 0);
}

int cmd_checkpoint(int argc, char **argv)
{
	const char *what, *path = NULL;
	bool json = false;
	sr_ckpt_info info;
	struct stale stale;
	int err;

	if (argc < 2) {
		usage(stderr);
		return SR_CLI_EXIT_USAGE;
	}
	what = argv[1];
	if (!strcmp(what, "--help") || !strcmp(what, "-h") || !strcmp(what, "help")) {
		usage(stdout);
		return 0;
	}
	if (strcmp(what, "verify") && strcmp(what, "info") && strcmp(what, "clean"))
		cli_die("checkpoint: unknown action '%s' (verify, info, clean)", what);
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(what, "info") && cli_opt(argc, argv, &i, "--json", NULL)) {
			json = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_unknown("checkpoint", argv[i]);
		} else if (!path) {
			path = argv[i];
		} else {
			cli_die("checkpoint %s: one FILE only (got '%s' and '%s')", what, path, argv[i]);
		}
	}
	if (!path)
		cli_die("checkpoint %s: FILE is missing", what);
	if (!strcmp(what, "clean")) {
		struct stale st = {.print = true};
		err = sr_checkpoint_clean(path, SR_CKPT_CLEAN_REMOVE, on_stale, &st);
		if (err < 0) {
			fprintf(stderr, "stepring: %s: %s\n", path,
				sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
			return 1;
		}
		printf("%s: %d stale temporary file%s removed\n", path, err, err == 1 ? "" : "s");
		return 0;
	}
	count_stale(path, &stale);
	err = sr_checkpoint_verify(path, &info);
	if (err) {
		fprintf(stderr, "stepring: %s: %s\n", path,
			sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
		note_stale(stderr, path, &stale);
		/* Not a file to judge (missing, a directory, unreadable): the
		 * invocation is wrong, as for a usage error. */
		if (err == -ENOENT || err == -EISDIR || err == -EACCES || err == -EPERM ||
		    err == -ENOTDIR)
			return SR_CLI_EXIT_USAGE;
		return 1;
	}
	if (!strcmp(what, "verify")) {
		printf("%s: ok (format %u, %u sections, %llu bytes, every CRC32C matches)\n", path,
		       info.format_version, info.n_sections, (unsigned long long)info.file_size);
		note_stale(stdout, path, &stale);
		return 0;
	}
	if (json) {
		print_json(path, &info, &stale);
	} else {
		print_text(path, &info);
		note_stale(stdout, path, &stale);
	}
	return 0;
}
