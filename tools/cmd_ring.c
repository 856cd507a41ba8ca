/* stepring ring ls | inspect NAME | rm NAME...: shared-memory rings left in
 * /dev/shm (for instance by a crashed owner). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "machine.h" /* bench_json_str */
#include "stepring.h"
#include "stepring/stats.h"

int cmd_ring(int argc, char **argv);

#define SHM_DIR "/dev/shm"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring ring ls [--json] [--all]\n"
		"       stepring ring inspect NAME [--json]\n"
		"       stepring ring rm NAME... [--force] | rm --stale [NAME...]\n"
		"       stepring ring create NAME [--capacity N] [--obs-dim D] [--act-size A]\n"
		"                                 [--fill N]\n"
		"\n"
		"Shared-memory transition rings in " SHM_DIR ".\n"
		"  ls       list segments with a stepring ring header: name, format version,\n"
		"           geometry, size, counters, owner pid and whether it is alive\n"
		"           (--all also lists other segments as 'not a ring')\n"
		"  inspect  attach read-only and print the header, geometry and counters\n"
		"  rm       unlink rings; refuses a ring whose owner is alive, or a segment\n"
		"           that is not a ring, unless --force; --stale removes the rings\n"
		"           (all, or the NAMEs given) whose owner is gone\n"
		"  create   make a named ring, publish N demo transitions and exit without\n"
		"           removing it (what a crashed owner leaves; for tests and demos)\n"
		"NAME is \"sr-foo\" or \"/sr-foo\".\n");
}

/* What a segment's first bytes say (sr_ring_probe). */
struct seg {
	char name[256];
	bool ring;      /* our magic */
	bool stats;     /* a pool's statistics block */
	uint32_t version;
	sr_ring_info h; /* geometry and counters when ring && version == ours */
	off_t size;
	uid_t uid;
	int err;        /* -EACCES: exists, but this user cannot read it */
	bool alive;     /* a creator holds the segment's lock */
	bool incomplete; /* ring header without ready = 1 */
};

/* Probe /dev/shm/@name. 0, or -errno with s->err set (the name is still
 * filled in). */
static int peek_seg(const char *name, struct seg *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->h.size = sizeof(s->h);
	s->err = sr_ring_probe(name, &s->h);
	if (s->err)
		return s->err;
	s->size = (off_t)s->h.bytes;
	s->uid = (uid_t)s->h.uid;
	s->alive = s->h.flags & SR_RING_INFO_ALIVE;
	s->stats = s->h.kind == SR_SEGMENT_STATS;
	s->ring = s->h.kind == SR_SEGMENT_RING;
	s->version = s->h.version;
	s->incomplete = s->ring && !(s->h.flags & SR_RING_INFO_COMPLETE);
	return 0;
}

/* "sr-foo" or "/sr-foo" -> "/sr-foo"; 0 or -EINVAL. */
static int norm_name(const char *name, char *out, size_t len)
{
	const char *p = name[0] == '/' ? name + 1 : name;

	if (!*p || strchr(p, '/') || strlen(p) + 2 > len)
		return -EINVAL;
	snprintf(out, len, "/%s", p);
	return 0;
}

/* A segment name for a terminal: bytes outside printable ASCII as \xNN
 * (a name is chosen by whoever made the segment). */
static const char *safe_name(const char *in, char *buf, size_t len)
{
	size_t o = 0;

	for (; *in && o + 5 < len; in++) {
		unsigned char c = (unsigned char)*in;

		if (c < 0x20 || c >= 0x7f || c == '\\')
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
		else
			buf[o++] = (char)c;
	}
	buf[o] = '\0';
	return buf;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(((const struct seg *)a)->name, ((const struct seg *)b)->name);
}

static int ring_ls(int argc, char **argv)
{
	bool json = false, all = false;
	struct seg *segs = NULL;
	size_t n = 0, capn = 0, denied = 0;
	char nb[1024];
	struct dirent *de;
	DIR *d;

	for (int i = 1; i < argc; i++) {
		if (cli_opt(argc, argv, &i, "--json", NULL))
			json = true;
		else if (cli_opt(argc, argv, &i, "--all", NULL))
			all = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else
			cli_unknown("ring ls", argv[i]);
	}
	d = opendir(SHM_DIR);
	if (!d)
		cli_die("ring ls: cannot open " SHM_DIR ": %s", strerror(errno));
	while ((de = readdir(d))) {
		struct seg s;

		if (de->d_name[0] == '.')
			continue;
		if (peek_seg(de->d_name, &s)) {
			/* Say so rather than hide it: "no rings" would be a lie. */
			if (s.err == -EACCES || s.err == -EPERM)
				denied++;
			if (!all || (s.err != -EACCES && s.err != -EPERM))
				continue;
		} else if (!s.ring && !all)
			continue;
		if (n == capn) {
			capn = capn ? 2 * capn : 16;
			segs = realloc(segs, capn * sizeof(*segs));
			if (!segs)
				cli_die("ring ls: out of memory");
		}
		segs[n++] = s;
	}
	closedir(d);
	if (n) /* qsort(NULL, 0) is undefined */
		qsort(segs, n, sizeof(*segs), cmp_names);
	if (!json)
		printf("%-28s %4s %10s %7s %8s %10s %12s %12s %8s %s\n", "NAME", "VER", "CAPACITY",
		       "OBS_DIM", "ACT_SIZE", "MIB", "HEAD", "CURSOR", "PID", "OWNER");
	for (size_t i = 0; i < n; i++) {
		struct seg *s = &segs[i];
		bool ours = s->ring && s->version == SR_RING_FORMAT_VERSION;
		const char *owner = s->err     ? "permission denied (another user's)"
				    : s->stats ? (s->alive ? "statistics block, pool alive"
							   : "statistics block, pool gone")
				    : !s->ring ? "not a ring"
				    : !ours    ? "other format version"
				    : s->alive ? (s->incomplete ? "being created" : "alive")
				    : s->incomplete ? "incomplete, creator gone (stale: stepring ring rm --stale)"
						    : "dead (stale: stepring ring rm --stale)";

		if (json) {
			printf("{\"name\":");
			bench_json_str(stdout, s->name);
			if (s->err) {
				printf(",\"error\":\"permission denied\"}\n");
				continue;
			}
			printf(",\"ring\":%s,\"version\":%u,\"bytes\":%lld,\"uid\":%u",
			       s->ring ? "true" : "false", s->version, (long long)s->size,
			       (unsigned)s->uid);
			if (ours)
				printf(",\"capacity\":%llu,\"obs_dim\":%u,\"act_size\":%u,"
				       "\"head\":%llu,\"cursor\":%llu,\"pid\":%lld,\"alive\":%s,"
				       "\"complete\":%s",
				       (unsigned long long)s->h.capacity, s->h.obs_dim, s->h.act_size,
				       (unsigned long long)s->h.head,
				       (unsigned long long)s->h.cursor, (long long)s->h.creator_pid,
				       s->alive ? "true" : "false", s->incomplete ? "false" : "true");
			printf("}\n");
		} else if (ours) {
			printf("%-28s %4u %10llu %7u %8u %10.1f %12llu %12llu %8lld %s\n",
			       safe_name(s->name, nb, sizeof(nb)),
			       s->version, (unsigned long long)s->h.capacity, s->h.obs_dim,
			       s->h.act_size, (double)s->size / (1 << 20),
			       (unsigned long long)s->h.head, (unsigned long long)s->h.cursor,
			       (long long)s->h.creator_pid, owner);
		} else {
			printf("%-28s %4s %10s %7s %8s %10.1f %12s %12s %8s %s\n",
			       safe_name(s->name, nb, sizeof(nb)),
			       s->ring ? "?" : "-", "-", "-", "-", (double)s->size / (1 << 20), "-",
			       "-", "-", owner);
		}
	}
	if (!json && n == 0)
		printf("(no rings in " SHM_DIR "%s)\n", denied ? " that this user can read" : "");
	if (denied)
		fprintf(stderr,
			"stepring: ring ls: %zu segment%s in " SHM_DIR " could not be read "
			"(permission denied: another user's; root or their owner can list them%s)\n",
			denied, denied == 1 ? "" : "s", all ? "" : ", --all names them");
	free(segs);
	return 0;
}

static int ring_inspect(int argc, char **argv)
{
	const char *name = NULL;
	bool json = false;
	sr_ring *r;
	int err;

	for (int i = 1; i < argc; i++) {
		if (cli_opt(argc, argv, &i, "--json", NULL))
			json = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1] == '-')
			cli_unknown("ring inspect", argv[i]);
		else if (!name)
			name = argv[i];
		else
			cli_die("ring inspect: one NAME only ('%s' is extra)", argv[i]);
	}
	if (!name)
		cli_die("ring inspect: NAME is missing (see 'stepring ring ls')");
	err = sr_ring_attach(name, 0, &r);
	if (err)
		cli_die("%s", sr_last_error()[0] ? sr_last_error() : sr_strerror(err));

	sr_ring_info info = {.size = sizeof(info)}, *h = &info;
	const uint8_t *flags = sr_ring_flags_col(r), *term = sr_ring_terminated_col(r),
		      *trunc = sr_ring_truncated_col(r);
	uint64_t head, cursor, oldest, mask;
	uint64_t published = 0, pads = 0, firsts = 0, terms = 0, truncs = 0, live = 0;
	bool alive;
	char when[64] = "?";
	time_t ct;
	struct tm tm;

	if (sr_ring_info_get(r, &info))
		cli_die("ring inspect: %s", sr_last_error());
	/* Our handle's lock is shared: probe the name for the creator's. */
	{
		sr_ring_info pi = {.size = sizeof(pi)};

		alive = sr_ring_probe(info.name, &pi) == 0 && (pi.flags & SR_RING_INFO_ALIVE);
	}
	head = info.head;
	cursor = info.cursor;
	oldest = info.oldest;
	mask = info.capacity - 1;
	ct = (time_t)h->create_time;

	if (gmtime_r(&ct, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	/* The consumer's view: published run from the cursor. */
	while (cursor + published < head && sr_ring_slot_valid(r, cursor + published))
		published++;
	/* Window census (a snapshot; slots may change under it). */
	for (uint64_t q = oldest; q < head; q++) {
		uint64_t s = q & mask;

		if (!sr_ring_slot_valid(r, q))
			continue;
		live++;
		pads += !!(flags[s] & SR_SLOT_PAD);
		firsts += !!(flags[s] & SR_SLOT_FIRST);
		terms += term[s] != 0;
		truncs += trunc[s] != 0;
	}
	if (json) {
		printf("{\"name\":");
		bench_json_str(stdout, h->name);
		printf(",\"version\":%u,\"header_bytes\":%u,\"bytes\":%zu,\"capacity\":%llu,"
		       "\"obs_dim\":%u,\"act_size\":%u,\"pid\":%lld,\"alive\":%s,\"created\":\"%s\","
		       "\"head\":%llu,\"cursor\":%llu,\"oldest\":%llu,\"backlog\":%llu,"
		       "\"ready_for_consumer\":%llu,\"live_slots\":%llu,\"pad\":%llu,\"first\":%llu,"
		       "\"terminated\":%llu,\"truncated\":%llu,\"reserve_waits\":%llu,"
		       "\"pad_slots_total\":%llu,\"consumed_batches\":%llu,\"offsets\":{"
		       "\"obs\":%llu,\"action\":%llu,\"reward\":%llu,\"terminated\":%llu,"
		       "\"truncated\":%llu,\"flags\":%llu,\"env_id\":%llu,\"prev\":%llu,\"seq\":%llu}}\n",
		       h->version, h->header_bytes, (size_t)h->bytes, (unsigned long long)h->capacity, h->obs_dim,
		       h->act_size, (long long)h->creator_pid, alive ? "true" : "false", when,
		       (unsigned long long)head, (unsigned long long)cursor,
		       (unsigned long long)oldest, (unsigned long long)(head - cursor),
		       (unsigned long long)published, (unsigned long long)live,
		       (unsigned long long)pads, (unsigned long long)firsts,
		       (unsigned long long)terms, (unsigned long long)truncs,
		       (unsigned long long)h->reserve_waits, (unsigned long long)h->pad_slots,
		       (unsigned long long)h->consumed_batches,
		       (unsigned long long)h->offsets[SR_RING_COL_OBS],
		       (unsigned long long)h->offsets[SR_RING_COL_ACTION],
		       (unsigned long long)h->offsets[SR_RING_COL_REWARD],
		       (unsigned long long)h->offsets[SR_RING_COL_TERMINATED],
		       (unsigned long long)h->offsets[SR_RING_COL_TRUNCATED],
		       (unsigned long long)h->offsets[SR_RING_COL_FLAGS],
		       (unsigned long long)h->offsets[SR_RING_COL_ENV_ID],
		       (unsigned long long)h->offsets[SR_RING_COL_PREV],
		       (unsigned long long)h->offsets[SR_RING_COL_SEQ]);
	} else {
		char nb[1024];

		printf("ring %s\n", safe_name(h->name, nb, sizeof(nb)));
		printf("  format        version %u (this library: %u), header %u bytes\n",
		       h->version, SR_RING_FORMAT_VERSION, h->header_bytes);
		printf("  owner         pid %lld (%s), created %s\n", (long long)h->creator_pid,
		       alive ? "alive" : "dead", when);
		printf("  geometry      capacity %llu slots, obs_dim %u (float32), action %u bytes\n",
		       (unsigned long long)h->capacity, h->obs_dim, h->act_size);
		printf("  segment       %llu bytes (%.1f MiB)\n", (unsigned long long)h->bytes,
		       (double)h->bytes / (1 << 20));
		printf("  columns       obs@%llu action@%llu reward@%llu terminated@%llu "
		       "truncated@%llu flags@%llu env_id@%llu prev@%llu seq@%llu\n",
		       (unsigned long long)h->offsets[SR_RING_COL_OBS],
		       (unsigned long long)h->offsets[SR_RING_COL_ACTION],
		       (unsigned long long)h->offsets[SR_RING_COL_REWARD],
		       (unsigned long long)h->offsets[SR_RING_COL_TERMINATED],
		       (unsigned long long)h->offsets[SR_RING_COL_TRUNCATED],
		       (unsigned long long)h->offsets[SR_RING_COL_FLAGS],
		       (unsigned long long)h->offsets[SR_RING_COL_ENV_ID],
		       (unsigned long long)h->offsets[SR_RING_COL_PREV],
		       (unsigned long long)h->offsets[SR_RING_COL_SEQ]);
		printf("  head          %llu (next sequence to reserve)\n", (unsigned long long)head);
		printf("  cursor        %llu (consumer), backlog %llu, %llu ready to consume\n",
		       (unsigned long long)cursor, (unsigned long long)(head - cursor),
		       (unsigned long long)published);
		printf("  window        [%llu, %llu): %llu published slots, %llu pad, %llu first, "
		       "%llu terminated, %llu truncated\n",
		       (unsigned long long)oldest, (unsigned long long)head,
		       (unsigned long long)live, (unsigned long long)pads,
		       (unsigned long long)firsts, (unsigned long long)terms,
		       (unsigned long long)truncs);
		printf("  counters      reserve_waits %llu, pad_slots %llu, consumed_batches %llu\n",
		       (unsigned long long)h->reserve_waits, (unsigned long long)h->pad_slots,
		       (unsigned long long)h->consumed_batches);
	}
	sr_ring_destroy(r);
	return 0;
}

/* Unlink a segment and, for a ring, its pool's statistics block
 * "<name>.stats" when nobody holds that block's lock: a pool's segments
 * go together. 0 or -errno (message printed). */
static int rm_one(const struct seg *s, const char *why)
{
	char stats[300], nb[1024];
	struct seg st;
	int err = sr_ring_unlink(s->name);

	if (err) {
		fprintf(stderr, "stepring: %s\n", sr_last_error());
		return err;
	}
	safe_name(s->name[0] == '/' ? s->name + 1 : s->name, nb, sizeof(nb));
	if (why)
		printf("removed /%s (%s)\n", nb, why);
	else
		printf("removed /%s\n", nb);
	if (!s->ring)
		return 0;
	snprintf(stats, sizeof(stats), "%s.stats", s->name[0] == '/' ? s->name + 1 : s->name);
	if (peek_seg(stats, &st) == 0 && st.stats && !st.alive && sr_ring_unlink(stats) == 0)
		printf("removed /%s (its statistics block)\n", safe_name(stats, nb, sizeof(nb)));
	return 0;
}

static int ring_rm(int argc, char **argv)
{
	bool force = false, stale = false;
	const char *names[256];
	int n = 0, fails = 0;

	for (int i = 1; i < argc; i++) {
		if (cli_opt(argc, argv, &i, "--force", NULL))
			force = true;
		else if (cli_opt(argc, argv, &i, "--stale", NULL))
			stale = true;
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1] == '-')
			cli_unknown("ring rm", argv[i]);
		else if (n < 256)
			names[n++] = argv[i];
		else
			cli_die("ring rm: at most 256 names");
	}
	if (!stale && !n)
		cli_die("ring rm: NAME is missing (or --stale)");
	if (stale && !n) {
		DIR *d = opendir(SHM_DIR);
		struct dirent *de;

		if (!d)
			cli_die("ring rm: cannot open " SHM_DIR ": %s", strerror(errno));
		while ((de = readdir(d))) {
			struct seg s;

			if (de->d_name[0] == '.' || peek_seg(de->d_name, &s) || s.alive)
				continue;
			/* Dead rings of this format, and statistics blocks whose
			 * pool is gone (nobody holds the lock of either). */
			if (s.stats)
				fails += rm_one(&s, "its pool is gone") != 0;
			else if (s.ring && s.version == SR_RING_FORMAT_VERSION)
				fails += rm_one(&s, s.incomplete ? "incomplete, its creator is gone"
								 : "its owner is gone") != 0;
		}
		closedir(d);
		return fails ? 1 : 0;
	}
	for (int i = 0; i < n; i++) {
		char norm[258], nb[1024];
		struct seg s;
		int err;

		if (norm_name(names[i], norm, sizeof(norm)))
			cli_die("ring rm: bad segment name '%s' (use \"sr-foo\")", names[i]);
		err = peek_seg(norm + 1, &s);
		if (err == -ENOENT)
			cli_die("ring rm: no segment named '%s'", safe_name(norm, nb, sizeof(nb)));
		if (err)
			cli_die("ring rm: cannot read '%s': %s", safe_name(norm, nb, sizeof(nb)),
				err == -EACCES || err == -EPERM
					? "permission denied (another user's segment)"
					: strerror(-err));
		if (!force && !s.ring)
			cli_die("ring rm: '%s' is not a stepring ring (--force removes it anyway)",
				safe_name(norm, nb, sizeof(nb)));
		if (stale && (!s.ring || s.version != SR_RING_FORMAT_VERSION || s.alive)) {
			printf("kept %s (%s)\n", safe_name(norm, nb, sizeof(nb)),
			       !s.ring ? "not a ring" : s.alive ? "owner alive" : "other version");
			continue;
		}
		if (!force && s.version == SR_RING_FORMAT_VERSION && s.alive)
			cli_die("ring rm: '%s' is in use (its creator, pid %lld as it saw itself, "
				"holds it; --force removes it anyway)",
				safe_name(norm, nb, sizeof(nb)), (long long)s.h.creator_pid);
		fails += rm_one(&s, NULL) != 0;
	}
	return fails ? 1 : 0;
}

static int ring_create(int argc, char **argv)
{
	sr_ring_opts o = {.flags = SR_RING_SHM, .obs_dim = 4, .act_size = 4, .capacity = 1024};
	uint64_t fill = 0, q, first;
	const char *v;
	sr_ring *r;
	int err;

	for (int i = 1; i < argc; i++) {
		if (cli_opt(argc, argv, &i, "--capacity", &v))
			o.capacity = (uint64_t)cli_int("--capacity", v, 2, 1ll << 30);
		else if (cli_opt(argc, argv, &i, "--obs-dim", &v))
			o.obs_dim = (uint32_t)cli_int("--obs-dim", v, 1, 1 << 20);
		else if (cli_opt(argc, argv, &i, "--act-size", &v))
			o.act_size = (uint32_t)cli_int("--act-size", v, 1, 1 << 20);
		else if (cli_opt(argc, argv, &i, "--fill", &v))
			fill = (uint64_t)cli_int("--fill", v, 0, 1ll << 40);
		else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' && argv[i][1] == '-')
			cli_unknown("ring create", argv[i]);
		else if (!o.name)
			o.name = argv[i];
		else
			cli_die("ring create: one NAME only ('%s' is extra)", argv[i]);
	}
	if (!o.name)
		cli_die("ring create: NAME is missing");
	if (o.capacity & (o.capacity - 1))
		cli_die("--capacity: %llu is not a power of two", (unsigned long long)o.capacity);
	err = sr_ring_create(&o, &r);
	if (err)
		cli_die("%s", sr_last_error()[0] ? sr_last_error() : sr_strerror(err));
	/* Demo episodes of 10 steps for 4 envs, consumed as they go. */
	for (uint64_t i = 0; i < fill; i++) {
		uint64_t s;
		uint32_t env = (uint32_t)(i % 4), t = (uint32_t)((i / 4) % 10);

		sr_ring_reserve(r, 1, 0, &q);
		s = q & (o.capacity - 1);
		for (uint32_t k = 0; k < o.obs_dim; k++)
			sr_ring_obs_col(r)[s * o.obs_dim + k] = (float)i;
		memset(sr_ring_action_col(r) + s * o.act_size, 0, o.act_size);
		sr_ring_reward_col(r)[s] = t ? 1.0f : 0.0f;
		sr_ring_terminated_col(r)[s] = t == 9;
		sr_ring_truncated_col(r)[s] = 0;
		sr_ring_flags_col(r)[s] = t ? 0 : SR_SLOT_FIRST;
		sr_ring_env_id_col(r)[s] = env;
		sr_ring_prev_col(r)[s] = t ? q - 4 : SR_RING_NO_PREV;
		sr_ring_publish(r, q, 1);
		sr_ring_consume(r, sr_ring_peek(r, UINT32_MAX, &first));
	}
	{
		char norm[258];

		norm_name(o.name, norm, sizeof(norm));
		printf("created %s: capacity %llu, obs_dim %u, %llu transitions; left in place\n",
		       norm, (unsigned long long)o.capacity, o.obs_dim, (unsigned long long)fill);
	}
	/* Leave the segment behind on purpose, as a crashed owner does: end
	 * the process without sr_ring_destroy (which would unlink it). */
	fflush(stdout);
	_exit(0);
}

int cmd_ring(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return SR_CLI_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "ls"))
		return ring_ls(argc - 1, argv + 1);
	if (!strcmp(argv[1], "inspect"))
		return ring_inspect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "rm"))
		return ring_rm(argc - 1, argv + 1);
	if (!strcmp(argv[1], "create"))
		return ring_create(argc - 1, argv + 1);
	cli_die("ring: unknown subcommand '%s' (ls, inspect, rm, create)", argv[1]);
}
