/*
 * `stepring compare BASE.jsonl NEW.jsonl`: a regression verdict between two
 * sweep / bench JSONL files.
 *
 * DESIGN
 * Each line of a file is one record of a known kind (sweep, diagnose,
 * bench pool, env, loop, ring, replay, checkpoint, pool_mpi, h2d; table
 * `kinds` below). A kind names the fields that make up a configuration
 * (its key: env, envs, threads, mode, ... never the measuring window or the
 * figures), its throughput figure (higher is better), its P99 latency
 * (lower is better, where it has one), and the arrays of per-round or
 * per-run figures it carries. Records with the same key form a group;
 * repeated runs appended to one file are one group with several records.
 *
 * Per configuration present in both files (and on the same machine: CPU
 * model, CPUs, cores, NUMA nodes, GPU), the samples of each side are its
 * rounds (or runs) pooled over its records when every record of both
 * sides has them, else the records' own figures (repeats). Fewer than 3
 * samples on a side give no verdict. The change is the ratio of the
 * medians, new / base, and its spread a 90% percentile bootstrap interval
 * of that ratio (4000 resamples of both sides, a seed from the key: the
 * same files give the same output). The rule (docs/metrics.md):
 *   throughput up      the whole interval >= 1 + G      (G: 10%)
 *   throughput down    the whole interval <= 1 - G
 *   throughput flat    the whole interval inside (1 - G, 1 + G)
 *   P99 better/worse/flat the same with Q (15%), better meaning lower;
 *   worse      throughput down, or P99 worse
 *   better     throughput up with P99 flat or better, or P99 better with
 *              throughput flat or up ("no side effect")
 *   no change  both flat
 *   too noisy  anything else: an interval that straddles a threshold
 *              (rerun with more rounds or repeats)
 * The overall verdict is the worst: worse, then too noisy, then better,
 * then no change; configurations or machines that do not match are
 * listed and not compared. Exit status: 0 better, 3 no change, 4 worse,
 * 5 too noisy, 2 bad input (unreadable or malformed files, nothing in
 * common), 1 a run-time failure.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "json.h"

int cmd_compare(int argc, char **argv);

#define EXIT_BETTER 0
#define EXIT_FAIL 1
#define EXIT_NO_CHANGE 3
#define EXIT_WORSE 4
#define EXIT_NOISY 5

#define BOOT 4000
#define MIN_SAMPLES 3
#define LINE_MAX_BYTES (16u << 20)

struct kind {
	const char *label;
	const char *schema; /* prefix of "schema", or NULL */
	const char *bench;  /* value of "bench", or NULL */
	const char *key[20];
	const char *thr[3], *thr_name[3];
	const char *thr_rounds;
	const char *p99[3];
	const char *p99_rounds;
	const char *window;
	const char *build;
};

/* "config.*": every scalar member of config but the measuring window (and
 * threads where threads_requested says what was asked for). */
static const struct kind kinds[] = {
	{"sweep", "stepring.sweep/", NULL, {"row", "rank", "ranks", "config.*"},
	 {"result.steps_per_sec"}, {"steps/s"}, "result.rounds.steps_per_sec",
	 {"result.p99_us", "result.p99_us_max"}, "result.rounds.p99_us", "config.seconds",
	 "build.info"},
	{"diagnose", "stepring.diagnose/", NULL,
	 {"row", "rank", "ranks", "env", "num_envs", "mode", "policy", "cpuset"},
	 {"closed_loop.steps_per_sec"}, {"steps/s"}, NULL, {"closed_loop.p99_us"}, NULL, NULL,
	 NULL},
	{"bench pool", NULL, "pool",
	 {"env", "envs", "threads", "batch", "mode", "policy", "device", "bind", "cpuset", "seed",
	  "checkpoint_every", "no_inline", "no_groups", "no_rebalance", "ring_capacity",
	  "check_finite"},
	 {"steps_per_sec"}, {"steps/s"}, "round_steps_per_sec", {"p99_us"}, "round_p99_us",
	 "seconds", "build"},
	{"bench pool_mpi", NULL, "pool_mpi", {"row", "rank", "ranks", "env", "envs", "threads"},
	 {"steps_per_sec"}, {"steps/s"}, NULL, {"p99_us"}, NULL, "seconds", NULL},
	{"bench env", NULL, "env", {"spec", "n_instances", "cpu"}, {"steps_per_sec"}, {"steps/s"},
	 "steps_per_sec_runs", {NULL}, NULL, "seconds", "build"},
	{"bench loop", NULL, "loop",
	 {"env", "envs", "threads", "batch", "mode", "policy", "device", "seed"},
	 {"loop_steps_per_sec"}, {"steps/s"}, NULL, {NULL}, NULL, "seconds", "build"},
	{"bench ring", NULL, "ring",
	 {"what", "producers", "bulk", "writes_columns", "obs_dim", "capacity", "batch"},
	 {"mtransitions_per_s", "drain_gb_per_s"}, {"Mtransitions/s", "GB/s"}, NULL, {NULL}, NULL,
	 NULL, "build"},
	{"bench replay", NULL, "replay", {"what", "obs_dim", "capacity", "batch"},
	 {"transitions_per_s"}, {"transitions/s"}, NULL, {NULL}, NULL, NULL, "build"},
	{"bench checkpoint", NULL, "checkpoint",
	 {"env", "envs", "threads", "ring_capacity", "replay_mib", "chunk_mib"},
	 {"throughput.uring_idle_mib_s"}, {"MiB/s"}, NULL, {"phases[checkpoint=uring].p99_us"},
	 NULL, "seconds", "build"},
	{"bench h2d", NULL, "h2d", {"bytes", "rows", "ring_registered"}, {"ring_gbs"}, {"GB/s"},
	 NULL, {NULL}, NULL, NULL, NULL},
};

/* A growing array of doubles. */
struct vec {
	double *v;
	size_t n, cap;
};

static int vec_push(struct vec *a, double x)
{
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		double *p = realloc(a->v, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		a->v = p;
		a->cap = nc;
	}
	a->v[a->n++] = x;
	return 0;
}

/* The samples of one side of a configuration, record by record: a
 * record's rounds (or runs), or its one figure when it has none. */
struct samples {
	struct vec v;      /* every sample, record after record */
	size_t *start;     /* where record i's begin */
	size_t nrec, cap;
	bool rounds;       /* some record gave its rounds (or runs) */
	size_t with_rounds; /* records that did */
};

static int samples_add(struct samples *s, const struct json *arr, double one, bool positive)
{
	size_t n0 = s->v.n;

	if (s->nrec == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 8;
		size_t *p = realloc(s->start, nc * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->start = p;
		s->cap = nc;
	}
	for (size_t i = 0; arr && arr->type == JSON_ARR && i < arr->n; i++) {
		if (arr->items[i].type != JSON_NUM || (positive && !(arr->items[i].num > 0)))
			continue;
		if (vec_push(&s->v, arr->items[i].num))
			return -ENOMEM;
	}
	if (s->v.n > n0) {
		s->rounds = true;
		s->with_rounds++;
	} else {
		if (positive && !(one > 0))
			return 0; /* no figure: not a record of this side */
		if (vec_push(&s->v, one))
			return -ENOMEM;
	}
	s->start[s->nrec++] = n0;
	return 0;
}

static size_t samples_count(const struct samples *s, size_t i)
{
	return (i + 1 < s->nrec ? s->start[i + 1] : s->v.n) - s->start[i];
}

struct group {
	const struct kind *k;
	char *key;             /* "label k=v k=v ..." */
	char *machine;         /* "" when the records do not say */
	char *build;           /* of the first record */
	bool machines_differ;  /* within this file */
	size_t nrec, line;     /* records; the first one's line */
	struct samples thr, p99;         /* rounds where the records have them */
	struct samples thr_rec, p99_rec; /* the records' own figures */
	struct vec window, load;
	const char *thr_name;
	bool matched;
};

struct file {
	const char *path;
	struct group *g;
	size_t n, cap;
	size_t records, unknown;
	char unknown_what[192]; /* the first unknown kind */
};

struct opts {
	double g, q; /* thresholds, fractions */
	bool any_machine, json;
	const char *ignore[16]; /* --ignore: fields left out of the key */
	int nignore;
	char *copies[16];       /* the --ignore values they point into */
	int ncopies;
};

static const struct opts *g_opts; /* for make_key */

/* ------------------------------------------------------------ reading */

/* A text buffer for keys. */
struct sbuf {
	char s[2048];
	size_t n;
};

static void sb_add(struct sbuf *b, const char *fmt, const char *k, const char *v)
{
	int w = snprintf(b->s + b->n, sizeof(b->s) - b->n, fmt, k, v);

	if (w > 0)
		b->n = b->n + (size_t)w < sizeof(b->s) ? b->n + (size_t)w : sizeof(b->s) - 1;
}

/* A scalar as key text; false for arrays and objects. */
static bool scalar(const struct json *v, char *out, size_t len)
{
	switch (v->type) {
	case JSON_STR:
		snprintf(out, len, "%s", v->str);
		return true;
	case JSON_NUM:
		snprintf(out, len, "%.15g", v->num);
		return true;
	case JSON_BOOL:
		snprintf(out, len, "%s", v->b ? "true" : "false");
		return true;
	case JSON_NULL:
		snprintf(out, len, "null");
		return true;
	default:
		return false;
	}
}

static void key_member(struct sbuf *b, const char *name, const struct json *v)
{
	char val[512];

	if (!v || !scalar(v, val, sizeof(val)))
		return;
	for (int i = 0; g_opts && i < g_opts->nignore; i++)
		if (!strcmp(g_opts->ignore[i], name))
			return;
	/* Values with spaces are quoted, so that keys stay readable. */
	sb_add(b, strpbrk(val, " \t") || !val[0] ? " %s=\"%s\"" : " %s=%s", name, val);
}

static void make_key(const struct kind *k, const struct json *rec, struct sbuf *b)
{
	b->n = 0;
	b->s[0] = '\0';
	sb_add(b, "%s%s", k->label, "");
	for (int i = 0; i < 20 && k->key[i]; i++) {
		const char *path = k->key[i];
		size_t pl = strlen(path);

		if (pl > 2 && !strcmp(path + pl - 2, ".*")) {
			char obj[64];
			const struct json *o;
			bool has_req;

			snprintf(obj, sizeof(obj), "%.*s", (int)(pl - 2), path);
			o = json_path(rec, obj);
			if (!o || o->type != JSON_OBJ)
				continue;
			has_req = json_get(o, "threads_requested") != NULL;
			for (size_t m = 0; m < o->n; m++) {
				const char *name = o->keys[m];

				if (!strcmp(name, "seconds") || !strcmp(name, "warmup") ||
				    !strcmp(name, "cooldown") || (has_req && !strcmp(name, "threads")))
					continue;
				key_member(b, name, &o->items[m]);
			}
		} else {
			const char *dot = strrchr(path, '.');

			key_member(b, dot ? dot + 1 : path, json_path(rec, path));
		}
	}
}

/* The machine as one line: CPU model, CPUs, cores, NUMA nodes, GPU (not
 * the load, which is reported beside). "" when the record has none. */
static void machine_of(const struct json *rec, char *out, size_t len)
{
	static const char *const f[] = {"cpu_model", "cpus", "cores", "numa_nodes", "gpu"};
	const struct json *m = json_get(rec, "machine");
	size_t n = 0;

	out[0] = '\0';
	if (!m || m->type != JSON_OBJ)
		return;
	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		const struct json *v = json_get(m, f[i]);
		char val[256];

		if (v && scalar(v, val, sizeof(val))) {
			int w = snprintf(out + n, len - n, "%s%s=%s", n ? " " : "", f[i], val);

			if (w > 0 && n + (size_t)w < len)
				n += (size_t)w;
		}
	}
}

static const struct json *first_num(const struct json *rec, const char *const *paths, int *which)
{
	for (int i = 0; i < 3 && paths[i]; i++) {
		const struct json *v = json_path(rec, paths[i]);

		if (v && v->type == JSON_NUM) {
			if (which)
				*which = i;
			return v;
		}
	}
	return NULL;
}

static const struct kind *kind_of(const struct json *rec, char *what, size_t len)
{
	const struct json *schema = json_get(rec, "schema"), *bench = json_get(rec, "bench");

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const struct kind *k = &kinds[i];

		if (k->schema && schema && schema->type == JSON_STR &&
		    !strncmp(schema->str, k->schema, strlen(k->schema)))
			return k;
		if (k->bench && bench && bench->type == JSON_STR && !strcmp(bench->str, k->bench))
			return k;
	}
	if (schema && schema->type == JSON_STR)
		snprintf(what, len, "schema \"%.60s\"", schema->str);
	else if (bench && bench->type == JSON_STR)
		snprintf(what, len, "bench \"%.60s\"", bench->str);
	else
		snprintf(what, len, "a JSON object without \"schema\" or \"bench\"");
	return NULL;
}

static struct group *group_for(struct file *f, const struct kind *k, const char *key)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->g[i].key, key))
			return &f->g[i];
	if (f->n == f->cap) {
		size_t nc = f->cap ? f->cap * 2 : 16;
		struct group *g = realloc(f->g, nc * sizeof(*g));

		if (!g)
			return NULL;
		f->g = g;
		f->cap = nc;
	}
	memset(&f->g[f->n], 0, sizeof(f->g[0]));
	f->g[f->n].k = k;
	f->g[f->n].key = strdup(key);
	if (!f->g[f->n].key)
		return NULL;
	return &f->g[f->n++];
}

/* One record into its group: -ENOMEM, or 0. */
static int add_record(struct file *f, const struct kind *k, const struct json *rec, size_t line)
{
	struct sbuf key;
	char mach[512];
	const struct json *thr, *p99, *w, *b, *load;
	struct group *g;
	int which = 0;

	thr = first_num(rec, k->thr, &which);
	if (!thr)
		return 1; /* no figure: counted as unknown */
	make_key(k, rec, &key);
	machine_of(rec, mach, sizeof(mach));
	g = group_for(f, k, key.s);
	if (!g)
		return -ENOMEM;
	if (g->nrec == 0) {
		g->line = line;
		g->machine = strdup(mach);
		b = k->build ? json_path(rec, k->build) : NULL;
		g->build = strdup(b && b->type == JSON_STR ? b->str : "");
		g->thr_name = k->thr_name[which];
		if (!g->machine || !g->build)
			return -ENOMEM;
	} else if (strcmp(g->machine, mach)) {
		g->machines_differ = true;
	}
	g->nrec++;
	if (samples_add(&g->thr, k->thr_rounds ? json_path(rec, k->thr_rounds) : NULL, thr->num,
			false) ||
	    samples_add(&g->thr_rec, NULL, thr->num, false))
		return -ENOMEM;
	p99 = first_num(rec, k->p99, NULL);
	if ((p99 || k->p99_rounds) &&
	    samples_add(&g->p99, k->p99_rounds ? json_path(rec, k->p99_rounds) : NULL,
			p99 ? p99->num : 0, true))
		return -ENOMEM;
	if (p99 && samples_add(&g->p99_rec, NULL, p99->num, true))
		return -ENOMEM;
	w = k->window ? json_path(rec, k->window) : NULL;
	if (w && w->type == JSON_NUM && vec_push(&g->window, w->num))
		return -ENOMEM;
	load = json_path(rec, "machine.loadavg_1m");
	if (load && load->type == JSON_NUM && vec_push(&g->load, load->num))
		return -ENOMEM;
	return 0;
}

/* Read @path: EXIT 2 (bad input, with the reason on stderr), 1 (run-time
 * failure), or 0. */
static int read_file(struct file *f)
{
	FILE *fp = fopen(f->path, "r");
	char *line = NULL, err[256];
	size_t cap = 0, lineno = 0;
	ssize_t len;
	int rc = 0;

	struct stat st;

	if (!fp) {
		fprintf(stderr, "stepring: compare: %s: %s\n", f->path, strerror(errno));
		return SR_CLI_EXIT_USAGE;
	}
	if (fstat(fileno(fp), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(fp);
		fprintf(stderr, "stepring: compare: %s: a directory, not a JSONL file\n", f->path);
		return SR_CLI_EXIT_USAGE;
	}
	errno = 0;
	while ((len = getline(&line, &cap, fp)) >= 0) {
		struct json *rec;
		const struct kind *k;
		char what[128];
		int e;

		lineno++;
		if (strspn(line, " \t\r\n") == (size_t)len)
			continue;
		if ((size_t)len > LINE_MAX_BYTES) {
			fprintf(stderr, "stepring: compare: %s:%zu: line longer than %u bytes\n",
				f->path, lineno, LINE_MAX_BYTES);
			rc = SR_CLI_EXIT_USAGE;
			break;
		}
		if (memchr(line, '\0', (size_t)len)) {
			fprintf(stderr, "stepring: compare: %s:%zu: not text (a NUL byte)\n", f->path,
				lineno);
			rc = SR_CLI_EXIT_USAGE;
			break;
		}
		e = json_parse(line, (size_t)len, &rec, err, sizeof(err));
		if (e == -ENOMEM) {
			fprintf(stderr, "stepring: compare: out of memory\n");
			rc = EXIT_FAIL;
			break;
		}
		if (e) {
			fprintf(stderr, "stepring: compare: %s:%zu: not JSON (%s)\n", f->path, lineno,
				err);
			rc = SR_CLI_EXIT_USAGE;
			break;
		}
		if (rec->type != JSON_OBJ) {
			json_free(rec);
			fprintf(stderr, "stepring: compare: %s:%zu: not a JSON object\n", f->path,
				lineno);
			rc = SR_CLI_EXIT_USAGE;
			break;
		}
		k = kind_of(rec, what, sizeof(what));
		e = k ? add_record(f, k, rec, lineno) : 1;
		json_free(rec);
		if (e < 0) {
			fprintf(stderr, "stepring: compare: out of memory\n");
			rc = EXIT_FAIL;
			break;
		}
		if (e > 0) {
			if (!f->unknown)
				snprintf(f->unknown_what, sizeof(f->unknown_what), "line %zu: %s",
					 lineno, k ? "no throughput figure" : what);
			f->unknown++;
		} else {
			f->records++;
		}
		errno = 0;
	}
	if (!rc && ferror(fp)) {
		fprintf(stderr, "stepring: compare: %s: %s\n", f->path, strerror(errno ? errno : EIO));
		rc = EXIT_FAIL;
	}
	free(line);
	fclose(fp);
	if (!rc && f->records == 0) {
		fprintf(stderr, "stepring: compare: %s: no sweep or bench records%s%s%s\n", f->path,
			f->unknown ? " (" : "", f->unknown ? f->unknown_what : "",
			f->unknown ? ")" : "");
		rc = SR_CLI_EXIT_USAGE;
	}
	return rc;
}

static void file_free(struct file *f)
{
	for (size_t i = 0; i < f->n; i++) {
		struct group *g = &f->g[i];

		free(g->key);
		free(g->machine);
		free(g->build);
		free(g->thr.v.v);
		free(g->thr.start);
		free(g->p99.v.v);
		free(g->p99.start);
		free(g->thr_rec.v.v);
		free(g->thr_rec.start);
		free(g->p99_rec.v.v);
		free(g->p99_rec.start);
		free(g->window.v);
		free(g->load.v);
	}
	free(f->g);
}

/* ------------------------------------------------------------ statistics */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Median of @n values (sorted in place). */
static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Quantile @q of sorted @v (linear between the closest ranks). */
static double quantile(const double *v, size_t n, double q)
{
	double pos = q * (double)(n - 1), frac;
	size_t i = (size_t)pos;

	if (!n)
		return 0;
	if (i + 1 >= n)
		return v[n - 1];
	frac = pos - (double)i;
	return v[i] * (1 - frac) + v[i + 1] * frac;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct change {
	bool ok;              /* computed */
	const char *samples;  /* "rounds" or "records" */
	size_t nb, nn;        /* samples */
	size_t rb, rn;        /* records they come from */
	double base, new_;    /* medians */
	double ratio, lo, hi; /* new / base and its 90% interval */
	double sb, sn;        /* each side's spread: half the IQR / median */
	const char *why;      /* when !ok */
};

static double rel_spread(double *sorted, size_t n, double med)
{
	return med > 0 ? (quantile(sorted, n, 0.75) - quantile(sorted, n, 0.25)) / 2 / med : 0;
}

/* Every record of both sides has rounds (or runs). */
static bool all_rounds(const struct samples *a, const struct samples *b)
{
	return a->nrec && b->nrec && a->with_rounds == a->nrec && b->with_rounds == b->nrec;
}

/* One bootstrap resample of side @s into @out (records drawn with
 * replacement, then each drawn record's samples with replacement); the
 * count of values written. */
static size_t resample(const struct samples *s, uint64_t *seed, double *out)
{
	size_t k = 0;

	for (size_t r = 0; r < s->nrec; r++) {
		size_t j = splitmix(seed) % s->nrec, m = samples_count(s, j);
		const double *v = s->v.v + s->start[j];

		for (size_t i = 0; i < m; i++)
			out[k++] = v[splitmix(seed) % m];
	}
	return k;
}

static size_t max_record(const struct samples *s)
{
	size_t m = 0;

	for (size_t i = 0; i < s->nrec; i++)
		if (samples_count(s, i) > m)
			m = samples_count(s, i);
	return m;
}

/* The change from @b to @n: medians, the ratio and its 90% interval from
 * a two-level bootstrap (records, then samples in each), so that the
 * spread between runs counts as well as the spread between a run's
 * rounds. 0 or -ENOMEM. */
static int change_of(const struct samples *b, const struct samples *n, uint64_t seed,
		     struct change *c)
{
	size_t nb = b->v.n, nn = n->v.n;
	double *sb = malloc(nb * sizeof(*sb)), *sn = malloc(nn * sizeof(*sn));
	double *rs = malloc(BOOT * sizeof(*rs));
	double *tb = malloc((b->nrec * max_record(b) + 1) * sizeof(*tb));
	double *tn = malloc((n->nrec * max_record(n) + 1) * sizeof(*tn));
	int err = 0;

	c->nb = nb;
	c->nn = nn;
	c->rb = b->nrec;
	c->rn = n->nrec;
	c->samples = b->with_rounds || n->with_rounds ? "rounds" : "records";
	if (!sb || !sn || !rs || !tb || !tn) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(sb, b->v.v, nb * sizeof(*sb));
	memcpy(sn, n->v.v, nn * sizeof(*sn));
	c->base = median(sb, nb);
	c->new_ = median(sn, nn);
	c->sb = rel_spread(sb, nb, c->base);
	c->sn = rel_spread(sn, nn, c->new_);
	if (nb < MIN_SAMPLES || nn < MIN_SAMPLES) {
		c->why = "fewer than 3 samples on a side (rerun with more rounds or repeats)";
		goto out;
	}
	if (!(c->base > 0) || !(c->new_ > 0)) {
		c->why = "a median of 0";
		goto out;
	}
	c->ratio = c->new_ / c->base;
	for (int r = 0; r < BOOT; r++) {
		size_t kb = resample(b, &seed, tb), kn = resample(n, &seed, tn);
		double mb = median(tb, kb), mn = median(tn, kn);

		rs[r] = mb > 0 ? mn / mb : INFINITY;
	}
	qsort(rs, BOOT, sizeof(*rs), cmp_double);
	c->lo = quantile(rs, BOOT, 0.05);
	c->hi = quantile(rs, BOOT, 0.95);
	/* The point estimate inside its interval, whatever the resamples. */
	c->lo = fmin(c->lo, c->ratio);
	c->hi = fmax(c->hi, c->ratio);
	c->ok = true;
out:
	free(sb);
	free(sn);
	free(rs);
	free(tb);
	free(tn);
	return err;
}

enum cls { C_UP, C_DOWN, C_FLAT, C_UNCLEAR, C_NONE };

/* The ratio interval against threshold @t: C_UP when the whole interval
 * is at or above 1 + t, C_DOWN at or below 1 - t, C_FLAT inside both.
 * @lower_better (P99) swaps C_UP and C_DOWN, so C_UP always means "got
 * better". */
static enum cls classify(const struct change *c, double t, bool lower_better)
{
	enum cls up = lower_better ? C_DOWN : C_UP, down = lower_better ? C_UP : C_DOWN;

	if (!c->ok)
		return C_UNCLEAR;
	if (c->lo >= 1 + t)
		return up;
	if (c->hi <= 1 - t)
		return down;
	if (c->lo > 1 - t && c->hi < 1 + t)
		return C_FLAT;
	return C_UNCLEAR;
}

enum verdict { V_BETTER, V_NO_CHANGE, V_WORSE, V_NOISY };

static const char *const verdict_name[] = {"better", "no change", "worse", "too noisy"};
static const int verdict_exit[] = {EXIT_BETTER, EXIT_NO_CHANGE, EXIT_WORSE, EXIT_NOISY};

/* @t: throughput class; @p: P99 class (C_UP: P99 fell); C_NONE without
 * P99. */
static enum verdict decide(enum cls t, enum cls p, const char **why)
{
	bool p_flat = p == C_FLAT || p == C_NONE;

	if (t == C_DOWN) {
		*why = "throughput fell";
		return V_WORSE;
	}
	if (p == C_DOWN) {
		*why = "P99 rose";
		return V_WORSE;
	}
	if (t == C_UP && (p_flat || p == C_UP)) {
		*why = p == C_UP ? "throughput rose and P99 fell" : "throughput rose, P99 no worse";
		return V_BETTER;
	}
	if (p == C_UP && (t == C_FLAT || t == C_UP)) {
		*why = "P99 fell, throughput no worse";
		return V_BETTER;
	}
	if (t == C_FLAT && p_flat) {
		*why = "both within the thresholds";
		return V_NO_CHANGE;
	}
	*why = "an interval straddles a threshold: rerun with more rounds or repeats";
	return V_NOISY;
}

/* ------------------------------------------------------------ output */

static uint64_t key_seed(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const char *p = key; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h;
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* A figure in at most 12 characters: whole numbers from 1000 on. */
static const char *fig(char *buf, size_t len, double v)
{
	snprintf(buf, len, fabs(v) >= 1000 && fabs(v) < 1e12 ? "%.0f" : "%.4g", v);
	return buf;
}

static void print_change(const char *name, const struct change *c, bool lower_better)
{
	char a[32], b[32];

	if (!c->ok) {
		printf("    %-12s %12s -> %-12s %zu / %zu samples: no verdict (%s)\n", name,
		       fig(a, sizeof(a), c->base), fig(b, sizeof(b), c->new_), c->nb, c->nn, c->why);
		return;
	}
	printf("    %-12s %12s -> %-12s %+6.1f%%  90%% [%+.1f%%, %+.1f%%]%s\n", name,
	       fig(a, sizeof(a), c->base), fig(b, sizeof(b), c->new_), 100 * (c->ratio - 1),
	       100 * (c->lo - 1), 100 * (c->hi - 1), lower_better ? "  (lower is better)" : "");
	printf("    %-12s spread +-%.1f%% / +-%.1f%% over %zu / %zu %s", "", 100 * c->sb,
	       100 * c->sn, c->nb, c->nn, c->samples);
	if (strcmp(c->samples, "records"))
		printf(" (of %zu / %zu records)", c->rb, c->rn);
	printf("\n");
}

static void json_change(FILE *f, const char *name, const struct change *c)
{
	fprintf(f, ",\"%s\":{\"base\":%.6g,\"new\":%.6g,\"n_base\":%zu,\"n_new\":%zu,"
		   "\"records_base\":%zu,\"records_new\":%zu,\"samples\":",
		name, c->base, c->new_, c->nb, c->nn, c->rb, c->rn);
	json_str(f, c->samples ? c->samples : "");
	if (c->ok)
		fprintf(f, ",\"change\":%.5f,\"lo\":%.5f,\"hi\":%.5f,\"spread_base\":%.5f,"
			   "\"spread_new\":%.5f}",
			c->ratio - 1, c->lo - 1, c->hi - 1, c->sb, c->sn);
	else
		fputs(",\"change\":null}", f);
}

static double vec_median(const struct vec *v)
{
	double *c;
	double m;

	if (!v->n || !(c = malloc(v->n * sizeof(*c))))
		return NAN;
	memcpy(c, v->v, v->n * sizeof(*c));
	m = median(c, v->n);
	free(c);
	return m;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring compare BASE.jsonl NEW.jsonl [--throughput-pct G] [--p99-pct Q]\n"
		"                        [--ignore FIELD,...] [--any-machine] [--json]\n"
		"\n"
		"A regression verdict between two sweep / bench JSONL files (stepring sweep\n"
		"--out, stepring bench ... --json). Per configuration in both files: the\n"
		"change in throughput and in P99 latency (ratio of medians, new / base) with a\n"
		"90%% bootstrap interval over the rounds (or runs, or repeated records), and a\n"
		"verdict:\n"
		"  better     throughput rose >= G%% with P99 no worse, or P99 fell >= Q%%\n"
		"             with throughput no worse\n"
		"  no change  both within the thresholds\n"
		"  worse      throughput fell >= G%%, or P99 rose >= Q%%\n"
		"  too noisy  an interval straddles a threshold: rerun with more rounds\n"
		"Configurations or machines found in only one file are listed, not compared.\n"
		"\n"
		"  --throughput-pct G  throughput threshold, %% (default 10)\n"
		"  --p99-pct Q         P99 threshold, %% (default 15)\n"
		"  --ignore FIELDS     leave these configuration fields out of the match (e.g.\n"
		"                      env: one env against another, the rest alike)\n"
		"  --any-machine       compare records of different machines too\n"
		"  --json              one JSON line per configuration, then a summary line\n"
		"\n"
		"Exit status: 0 better, 3 no change, 4 worse, 5 too noisy (the worst\n"
		"configuration decides: worse, too noisy, better, no change), 2 bad input\n"
		"(unreadable or malformed files, no configuration in common), 1 a run-time\n"
		"failure. Workflow: docs/metrics.md, \"Guarding a change\".\n");
}

int cmd_compare(int argc, char **argv)
{
	struct file fb = {0}, fn = {0};
	struct opts o = {.g = 0.10, .q = 0.15};
	const char *v;
	size_t counts[4] = {0}, only_base = 0, only_new = 0, mism = 0, compared = 0;
	int rc, worst = -1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--throughput-pct", &v)) {
			o.g = cli_double("--throughput-pct", v, 0.1, 90) / 100;
		} else if (cli_opt(argc, argv, &i, "--p99-pct", &v)) {
			o.q = cli_double("--p99-pct", v, 0.1, 90) / 100;
		} else if (cli_opt(argc, argv, &i, "--any-machine", NULL)) {
			o.any_machine = true;
		} else if (cli_opt(argc, argv, &i, "--json", NULL)) {
			o.json = true;
		} else if (cli_opt(argc, argv, &i, "--ignore", &v)) {
			char *save = NULL, *tok, *copy = strdup(v);
			int before = o.nignore;

			if (!copy)
				cli_die("compare: out of memory");
			if (o.ncopies == 16)
				cli_die("--ignore: at most 16 times");
			o.copies[o.ncopies++] = copy;
			for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
				if (o.nignore == 16)
					cli_die("--ignore: at most 16 fields");
				o.ignore[o.nignore++] = tok;
			}
			if (o.nignore == before)
				cli_die("--ignore: empty list");
		} else if (argv[i][0] == '-' && argv[i][1]) {
			cli_unknown("compare", argv[i]);
		} else if (!fb.path) {
			fb.path = argv[i];
		} else if (!fn.path) {
			fn.path = argv[i];
		} else {
			cli_die("compare: two files (BASE and NEW), not '%s' too", argv[i]);
		}
	}
	if (!fn.path)
		cli_die("compare: needs BASE.jsonl and NEW.jsonl (see 'stepring compare --help')");
	g_opts = &o;
	if ((rc = read_file(&fb)) || (rc = read_file(&fn)))
		goto out;
	if (!o.json) {
		printf("compare %s (records: %zu) -> %s (records: %zu); thresholds: throughput "
		       "%.0f%%, P99 %.0f%%\n",
		       fb.path, fb.records, fn.path, fn.records, 100 * o.g, 100 * o.q);
		if (fb.unknown || fn.unknown)
			printf("  not read: %zu line(s) of %s, %zu of %s that are no sweep or bench "
			       "record (%s)\n",
			       fb.unknown, fb.path, fn.unknown, fn.path,
			       fb.unknown ? fb.unknown_what : fn.unknown_what);
	}
	for (size_t i = 0; i < fb.n; i++) {
		struct group *b = &fb.g[i], *n = NULL;
		struct change ct = {0}, cp = {0};
		const char *why;
		enum cls tc, pc = C_NONE;
		enum verdict vd;
		uint64_t seed = key_seed(b->key);
		bool rt;

		for (size_t j = 0; j < fn.n; j++)
			if (!strcmp(fn.g[j].key, b->key))
				n = &fn.g[j];
		if (!n)
			continue;
		n->matched = b->matched = true;
		if (!o.any_machine && b->machine[0] && n->machine[0] && strcmp(b->machine, n->machine)) {
			mism++;
			if (o.json) {
				fputs("{\"config\":", stdout);
				json_str(stdout, b->key);
				fputs(",\"verdict\":\"not compared\",\"why\":\"machines differ\","
				      "\"machine_base\":", stdout);
				json_str(stdout, b->machine);
				fputs(",\"machine_new\":", stdout);
				json_str(stdout, n->machine);
				fputs("}\n", stdout);
			} else {
				printf("\n%s\n    not compared: machines differ\n      base: %s\n"
				       "      new:  %s\n",
				       b->key, b->machine, n->machine);
			}
			continue;
		}
		compared++;
		/* Rounds on both sides, or the records' figures on both: a
		 * build that records no rounds is measured like one that does. */
		rt = all_rounds(&b->thr, &n->thr);
		if (change_of(rt ? &b->thr : &b->thr_rec, rt ? &n->thr : &n->thr_rec, seed, &ct)) {
			rc = EXIT_FAIL;
			fprintf(stderr, "stepring: compare: out of memory\n");
			goto out;
		}
		tc = classify(&ct, o.g, false);
		if (b->p99.nrec && n->p99.nrec) {
			rt = all_rounds(&b->p99, &n->p99);
			if (change_of(rt ? &b->p99 : &b->p99_rec, rt ? &n->p99 : &n->p99_rec,
				      seed ^ 1, &cp)) {
				rc = EXIT_FAIL;
				fprintf(stderr, "stepring: compare: out of memory\n");
				goto out;
			}
			pc = classify(&cp, o.q, true);
		}
		vd = decide(tc, pc, &why);
		counts[vd]++;
		if (worst < 0 || (vd == V_WORSE) || (vd == V_NOISY && worst != V_WORSE) ||
		    (vd == V_BETTER && worst == V_NO_CHANGE))
			worst = (int)vd;
		if (o.json) {
			fputs("{\"config\":", stdout);
			json_str(stdout, b->key);
			printf(",\"verdict\":\"%s\",\"why\":", verdict_name[vd]);
			json_str(stdout, why);
			json_change(stdout, "throughput", &ct);
			if (pc != C_NONE)
				json_change(stdout, "p99_us", &cp);
			fputs(",\"build_base\":", stdout);
			json_str(stdout, b->build);
			fputs(",\"build_new\":", stdout);
			json_str(stdout, n->build);
			fputs("}\n", stdout);
			continue;
		}
		printf("\n%s\n", b->key);
		print_change(b->thr_name, &ct, false);
		if (pc != C_NONE)
			print_change("p99_us", &cp, true);
		else
			printf("    %-12s (not in these records)\n", "p99_us");
		{
			double lb = vec_median(&b->load), ln = vec_median(&n->load);
			double wb = vec_median(&b->window), wn = vec_median(&n->window);

			if (!isnan(lb) && !isnan(ln))
				printf("    load average %.2f -> %.2f", lb, ln);
			if (!isnan(wb) && !isnan(wn) && wb != wn)
				printf("%swindow %g s -> %g s (measured differently)",
				       !isnan(lb) && !isnan(ln) ? "; " : "    ", wb, wn);
			if (!isnan(lb) || (!isnan(wb) && !isnan(wn) && wb != wn))
				printf("\n");
		}
		if (strcmp(b->build, n->build))
			printf("    build %s -> %s\n", b->build[0] ? b->build : "?",
			       n->build[0] ? n->build : "?");
		if (b->machines_differ || n->machines_differ)
			printf("    note: the records of one side come from different machines\n");
		printf("    verdict: %s (%s)\n", verdict_name[vd], why);
	}
	for (size_t i = 0; i < fb.n; i++)
		if (!fb.g[i].matched) {
			only_base++;
			if (o.json) {
				fputs("{\"config\":", stdout);
				json_str(stdout, fb.g[i].key);
				fputs(",\"verdict\":\"not compared\",\"why\":\"only in base\"}\n", stdout);
			}
		}
	for (size_t i = 0; i < fn.n; i++)
		if (!fn.g[i].matched) {
			only_new++;
			if (o.json) {
				fputs("{\"config\":", stdout);
				json_str(stdout, fn.g[i].key);
				fputs(",\"verdict\":\"not compared\",\"why\":\"only in new\"}\n", stdout);
			}
		}
	if (!o.json && (only_base || only_new)) {
		printf("\nnot compared (in one file only):\n");
		for (size_t i = 0; i < fb.n; i++)
			if (!fb.g[i].matched)
				printf("  only in %s (line %zu): %s\n", fb.path, fb.g[i].line, fb.g[i].key);
		for (size_t i = 0; i < fn.n; i++)
			if (!fn.g[i].matched)
				printf("  only in %s (line %zu): %s\n", fn.path, fn.g[i].line, fn.g[i].key);
	}
	if (compared == 0) {
		if (o.json)
			printf("{\"summary\":{\"compared\":0,\"verdict\":\"nothing to compare\","
			       "\"exit\":%d}}\n", SR_CLI_EXIT_USAGE);
		fprintf(stderr, "stepring: compare: no configuration of %s is in %s%s\n", fb.path,
			fn.path, mism ? " on the same machine (--any-machine compares them)" : "");
		rc = SR_CLI_EXIT_USAGE;
		goto out;
	}
	rc = verdict_exit[worst];
	if (o.json) {
		printf("{\"summary\":{\"compared\":%zu,\"better\":%zu,\"no_change\":%zu,\"worse\":%zu,"
		       "\"too_noisy\":%zu,\"only_base\":%zu,\"only_new\":%zu,\"machine_differs\":%zu,"
		       "\"verdict\":\"%s\",\"exit\":%d}}\n",
		       compared, counts[V_BETTER], counts[V_NO_CHANGE], counts[V_WORSE],
		       counts[V_NOISY], only_base, only_new, mism, verdict_name[worst], rc);
	} else {
		printf("\n%zu compared: %zu better, %zu no change, %zu worse, %zu too noisy",
		       compared, counts[V_BETTER], counts[V_NO_CHANGE], counts[V_WORSE],
		       counts[V_NOISY]);
		if (only_base || only_new || mism)
			printf("; not compared: %zu only in base, %zu only in new, %zu on another "
			       "machine", only_base, only_new, mism);
		printf("\nverdict: %s (exit %d)\n", verdict_name[worst], rc);
	}
out:
	file_free(&fb);
	file_free(&fn);
	for (int i = 0; i < o.ncopies; i++)
		free(o.copies[i]);
	fflush(stdout);
	return rc;
}
