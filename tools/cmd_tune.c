/*
 * Shared tuning logic of `stepring sweep` and `stepring diagnose`: the
 * bound classification, the diagnose verdict, the sweep table, the
 * `--envs auto` series, the progress line and the JSONL context (machine,
 * build). This file defines no subcommand of its own (cmd_tune is not in
 * the dispatcher's list); it sits in tools/cmd_*.c so the CLI build picks
 * it up. Pure functions only: no pool is run here, so tests/tool_tune.c
 * links it alone.
 */
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stepring.h"
#include "stepring/device.h"
#include "tune.h"
#include "bench_pool.h"

static const char *const bound_names[TUNE_BOUND_COUNT] = {"env", "policy", "copy", "sync"};
static const char *const verdict_names[TUNE_BOUND_COUNT] = {"env-bound", "policy/GPU-bound",
							    "copy-bound", "sync-bound"};

const char *tune_bound_name(enum tune_bound b)
{
	return (unsigned)b < TUNE_BOUND_COUNT ? bound_names[b] : "?";
}

const char *tune_verdict_name(enum tune_bound b)
{
	return (unsigned)b < TUNE_BOUND_COUNT ? verdict_names[b] : "?";
}

static double pos(double x)
{
	return x > 0 && isfinite(x) ? x : 0;
}

enum tune_bound tune_classify(const struct tune_shares *s)
{
	double v[TUNE_BOUND_COUNT] = {
		[TUNE_BOUND_ENV] = pos(s->env),
		[TUNE_BOUND_POLICY] = pos(s->policy),
		[TUNE_BOUND_COPY] = pos(s->ring) + pos(s->copy),
		[TUNE_BOUND_SYNC] = pos(s->wait),
	};
	enum tune_bound best = TUNE_BOUND_ENV;

	for (int b = 1; b < TUNE_BOUND_COUNT; b++)
		if (v[b] > v[best])
			best = (enum tune_bound)b;
	return best;
}

static double clamp01(double x)
{
	x = pos(x);
	return x > 1 ? 1 : x;
}

void tune_wall_shares(double ns_env, double ns_ring, double ns_copy, double ns_policy,
		      uint32_t threads, double batch_wall_ns, struct tune_shares *out)
{
	double t = threads ? (double)threads : 1.0, used;

	memset(out, 0, sizeof(*out));
	if (!(batch_wall_ns > 0))
		return;
	out->env = clamp01(ns_env / t / batch_wall_ns);
	out->ring = clamp01(ns_ring / t / batch_wall_ns);
	out->copy = clamp01(ns_copy / batch_wall_ns);
	out->policy = clamp01(ns_policy / batch_wall_ns);
	used = out->env + out->ring + out->copy + out->policy;
	if (used > 1) {
		/* The parts overlap or a timer caught a preemption: scale them
		 * to the batch, nothing was left for waiting. */
		out->env /= used;
		out->ring /= used;
		out->copy /= used;
		out->policy /= used;
		used = 1;
	}
	out->wait = 1 - used;
}

/* ---- table ------------------------------------------------------------- */

void tune_table_header(FILE *f)
{
	fprintf(f, "%8s %7s %5s %5s %12s %9s %9s %9s %5s %4s %4s %4s %6s %4s %6s\n", "num_envs",
		"threads", "batch", "mode", "steps/s", "p50_us", "p90_us", "p99_us", "eff", "env",
		"ring", "copy", "policy", "wait", "bound");
	fprintf(f, "%8s %7s %5s %5s %12s %9s %9s %9s %5s %4s %4s %4s %6s %4s %6s\n", "--------",
		"-------", "-----", "-----", "------------", "---------", "---------", "---------",
		"-----", "----", "----", "----", "------", "----", "------");
}

/* A share as a whole percentage, clamped to [0, 100]. */
static int pct(double x)
{
	x = pos(x) * 100.0;
	return x > 100.0 ? 100 : (int)lround(x);
}

void tune_table_row(FILE *f, const struct tune_row *r)
{
	fprintf(f, "%8u %7u %5u %5s %12.0f %9.1f %9.1f %9.1f %4d%% %3d%% %3d%% %3d%% %5d%% %3d%% %6s\n",
		r->envs, r->threads, r->batch, r->async ? "async" : "sync", r->steps_per_sec,
		r->p50_us, r->p90_us, r->p99_us, pct(r->efficiency), pct(r->sh.env), pct(r->sh.ring),
		pct(r->sh.copy), pct(r->sh.policy), pct(r->sh.wait),
		tune_bound_name(tune_classify(&r->sh)));
}

/* ---- --envs auto -------------------------------------------------------- */

void tune_auto_init(struct tune_auto *a, uint32_t start, uint32_t max)
{
	uint32_t p = 1;

	while (p < start && p < (1u << 30))
		p <<= 1;
	a->next = p;
	a->max = max;
	a->best = 0;
	a->flat = 0;
}

bool tune_auto_next(struct tune_auto *a, double last_sps, uint32_t *envs)
{
	if (last_sps >= 0) {
		if (last_sps > a->best * TUNE_AUTO_GAIN) {
			a->flat = 0;
		} else if (++a->flat >= TUNE_AUTO_PATIENCE) {
			return false;
		}
		if (last_sps > a->best)
			a->best = last_sps;
		if (a->next > a->max / 2)
			return false;
		a->next <<= 1;
	}
	if (a->next > a->max)
		return false;
	*envs = a->next;
	return true;
}

/* ---- diagnose verdict --------------------------------------------------- */

#define SYNC_EFFICIENCY 0.60 /* loop below this fraction of the expected rate */
#define SYNC_WAIT_SHARE 0.30 /* ... and waiting at least this share */
#define TAIL_SHARE 0.30      /* 1 - median/mean batch time: "slow outliers" */

static void why(struct tune_verdict *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void advise(struct tune_verdict *v, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void why(struct tune_verdict *v, const char *fmt, ...)
{
	va_list ap;

	if (v->nwhy >= TUNE_MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(v->why[v->nwhy++], TUNE_LINE, fmt, ap);
	va_end(ap);
}

static void advise(struct tune_verdict *v, const char *fmt, ...)
{
	va_list ap;

	if (v->nadvice >= TUNE_MAX_LINES)
		return;
	va_start(ap, fmt);
	vsnprintf(v->advice[v->nadvice++], TUNE_LINE, fmt, ap);
	va_end(ap);
}

/* Rate a closed loop could reach if it only paid for envs and policy:
 * sync runs them one after the other (harmonic sum), async overlaps them
 * (the slower one sets the pace). */
static double expected_rate(const struct tune_diag_in *in)
{
	double e = pos(in->env_only_sps), p = pos(in->policy_only_sps);

	if (e <= 0)
		return 0;
	if (p <= 0)
		return e;
	return in->async ? fmin(e, p) : 1.0 / (1.0 / e + 1.0 / p);
}

void tune_diagnose(const struct tune_diag_in *in, struct tune_verdict *v)
{
	const struct tune_shares *s = &in->loop;
	double data = pos(s->ring) + pos(s->copy);
	double e = pos(in->env_only_sps), p = pos(in->policy_only_sps), l = pos(in->loop_sps);
	uint32_t per_thread = in->threads ? in->envs / in->threads : in->envs;
	bool policy_slower, busy = false, busy_tail = false;

	memset(v, 0, sizeof(*v));
	v->expected_sps = expected_rate(in);
	v->loop_vs_expected = v->expected_sps > 0 ? l / v->expected_sps : 0;
	policy_slower = pos(s->policy) > pos(s->env);

	if (pos(s->wait) >= SYNC_WAIT_SHARE &&
	    (tune_classify(s) == TUNE_BOUND_SYNC ||
	     (v->expected_sps > 0 && v->loop_vs_expected < SYNC_EFFICIENCY)))
		v->bound = TUNE_BOUND_SYNC;
	else if (data > pos(s->env) && data > pos(s->policy))
		v->bound = TUNE_BOUND_COPY;
	else if (policy_slower)
		v->bound = TUNE_BOUND_POLICY;
	else
		v->bound = TUNE_BOUND_ENV;

	if (p > 0)
		why(v, "envs alone: %.0f steps/s; policy alone: %.0f rows/s; closed loop (%s): "
		       "%.0f steps/s",
		    e, p, in->async ? "async" : "sync", l);
	else
		why(v, "envs alone: %.0f steps/s; policy alone: not measured; closed loop (%s): "
		       "%.0f steps/s",
		    e, in->async ? "async" : "sync", l);
	if (v->expected_sps > 0)
		why(v, "the loop reaches %.0f%% of the %.0f steps/s that envs and policy alone "
		       "allow (%s)",
		    100.0 * v->loop_vs_expected, v->expected_sps,
		    in->async ? "async overlaps them: the slower sets the pace"
			      : "sync runs them one after the other");
	why(v, "time per batch: env %d%%, ring %d%%, copy %d%%, policy %d%%, wait %d%%", pct(s->env),
	    pct(s->ring), pct(s->copy), pct(s->policy), pct(s->wait));

	if (in->median_batch_us > 0 && in->mean_batch_us > in->median_batch_us &&
	    1 - in->median_batch_us / in->mean_batch_us >= TAIL_SHARE) {
		busy_tail = true;
		why(v, "the median batch takes %.1f us but the mean %.1f us: %d%% of the time "
		       "is in slow outliers (preemption, page faults)",
		    in->median_batch_us, in->mean_batch_us,
		    pct(1 - in->median_batch_us / in->mean_batch_us));
	}
	if (in->loadavg > 0 && in->cpus && in->loadavg > in->cpus) {
		busy = true;
		why(v, "the machine is busy: load average %.1f on %u CPUs, so waits include "
		       "time other processes hold the cores",
		    in->loadavg, in->cpus);
	}

	switch (v->bound) {
	case TUNE_BOUND_SYNC:
		if (busy || busy_tail)
			advise(v, "measure on quiet cores (--cpuset, or when the machine is idle): "
				  "other processes hold the CPUs the workers wait for");
		why(v, "%d%% of each batch is spent waiting for workers, not working",
		    pct(s->wait));
		if (!in->async)
			advise(v, "async mode (--mode async, batch = num_envs/2): the policy runs "
				  "while the other half of the envs steps");
		if (in->other_mode_sps > 0)
			why(v, "the same loop in %s mode: %.0f steps/s (%.2fx)",
			    in->async ? "sync" : "async", in->other_mode_sps,
			    l > 0 ? in->other_mode_sps / l : 0);
		if (per_thread < 64)
			advise(v, "more envs per thread (%u now; try >= 64, e.g. --envs %u): each "
				  "wake-up then buys more work",
			       per_thread, in->threads * 64);
		if (in->threads > in->cores)
			advise(v, "fewer threads (%u > %u cores): oversubscribed workers are "
				  "descheduled and everyone waits for them",
			       in->threads, in->cores);
		else
			advise(v, "keep workers bound (--bind core) and other processes off their "
				  "cores: one late worker delays every sync batch");
		if (in->threads > 1 && per_thread < 1024)
			advise(v, "fewer threads (compare: stepring sweep --threads 1,%u): with "
				  "cheap envs one worker that never waits can beat %u that wait for "
				  "each other",
			       in->threads, in->threads);
		break;
	case TUNE_BOUND_COPY:
		why(v, "ring + copy take %d%% of the batch, more than env (%d%%) and policy (%d%%)",
		    pct(data), pct(s->env), pct(s->policy));
		if (in->async) {
			/* Copy includes send here: the trainer thread's own work,
			 * per batch with batch groups, per row without. */
			if (in->batch_groups) {
				why(v, "in async mode the trainer thread sends and collects each batch "
				       "(send + collect): with small batches its fixed costs weigh");
			} else {
				why(v, "in async mode the trainer thread queues every action and "
				       "collects every row (send + collect), of the order of a cheap "
				       "env's step");
				advise(v, "a batch size that divides the env count and is at least the "
					  "thread count: the envs then form batch groups, each sent and "
					  "received whole, with no per-env work");
			}
			if (in->other_mode_sps > 0)
				why(v, "the same loop in sync mode: %.0f steps/s (%.2fx)",
				    in->other_mode_sps, l > 0 ? in->other_mode_sps / l : 0);
			if (!(in->other_mode_sps > 0) || in->other_mode_sps > l)
				advise(v, "sync mode (--mode sync): one barrier per batch instead of "
					  "per-row sends, when the policy is cheap enough not to need "
					  "the overlap");
		}
		advise(v, "a bigger batch: each column is one copy per batch, so fixed per-copy "
			  "costs are shared by more rows");
		advise(v, "pinned memory (register the ring with the device) so batches go "
			  "straight from the ring without a staging copy");
		advise(v, "keep the collector on the GPU's NUMA node, and observations compact "
			  "(float32, no padding)");
		break;
	case TUNE_BOUND_POLICY:
		why(v, "policy takes %d%% of the batch against env's %d%%", pct(s->policy),
		    pct(s->env));
		if (p > 0)
			why(v, "the policy alone does %.0f rows/s, the envs alone %.0f steps/s", p,
			    e);
		advise(v, "a bigger batch (--batch / --envs): a forward pass costs little more "
			  "for more rows, above all on a GPU");
		if (!in->async)
			advise(v, "async mode: envs step while the policy runs, so the loop "
				  "approaches min(env, policy) instead of their harmonic sum");
		else if (in->threads > 1 && s->env >= 0.05)
			/* Worker 0's envs are stepped by the trainer thread, after
			 * its policy: with no-inline the other threads step them
			 * while it runs (worth it when stepping shows in the
			 * batch at all). */
			advise(v, "the trainer thread steps no envs (STEPRING_POOL_KNOBS=no-inline, bench "
				  "pool --no-inline) with one thread fewer (--threads %u): the "
				  "envs then step while the policy runs",
			       in->threads - 1);
		if (!in->cuda)
			advise(v, "run the policy on a GPU (device cuda) when one is present");
		advise(v, "a smaller model, or fewer policy calls per env step (frame skip)");
		break;
	default:
		why(v, "env stepping takes %d%% of the batch; the policy alone would allow %s",
		    pct(s->env), p > 0 ? "more" : "(not measured)");
		if (in->threads < in->cores)
			advise(v, "more threads (--threads %u): %u of %u cores are stepping envs",
			       in->cores, in->threads, in->cores);
		if (per_thread < 16)
			advise(v, "more envs per thread (%u now; try >= 16): batched stepping "
				  "amortises the per-call cost",
			       per_thread);
		if (!in->async && in->other_mode_sps > l * 1.05)
			advise(v, "async mode: measured %.0f steps/s against %.0f in sync",
			       in->other_mode_sps, l);
		if (in->threads >= in->cores)
			advise(v, "all %u cores are stepping envs: the env's own step cost is the "
				  "limit (a cheaper env step, or more cores)",
			       in->cores);
		break;
	}
	/* Where stepping or waiting for it is the bound, a slow worker is
	 * the sync loop's pace. */
	if ((v->bound == TUNE_BOUND_ENV || v->bound == TUNE_BOUND_SYNC) && !in->async &&
	    in->threads > 1 && in->worker_fast_ns > 0 &&
	    in->worker_slow_ns >= TUNE_WORKER_SPREAD * in->worker_fast_ns) {
		char cpu[32] = "";

		if (in->worker_slow_cpu >= 0)
			snprintf(cpu, sizeof(cpu), " (cpu %d)", in->worker_slow_cpu);
		why(v, "worker %u%s takes %.1f ns a step (env + ring) against %.1f on worker %u: "
		       "every sync batch waits for the slowest",
		    in->worker_slow, cpu, in->worker_slow_ns, in->worker_fast_ns, in->worker_fast);
		advise(v, "look for other work on worker %u's CPU, or leave it out (--cpuset): "
			  "its envs hold up every batch",
		       in->worker_slow);
	}
	/* The same pace, seen without the pool: raw env loops on every
	 * worker's CPU at once. Unequal there, the CPUs themselves differ
	 * (a hypervisor, SMT siblings, another process, unequal cores). */
	if ((v->bound == TUNE_BOUND_ENV || v->bound == TUNE_BOUND_SYNC) && !in->async &&
	    in->threads > 1 && in->cpu_balance > 0 &&
	    in->cpu_balance * TUNE_WORKER_SPREAD < 1.0)
		why(v, "the CPUs themselves step at different speeds: raw env loops on every "
		       "worker's CPU at once ran at %.2f of the fastest on the slowest (no pool "
		       "involved), and a sync batch waits for the slowest one, less what the "
		       "pool's rebalancing moves (at most a quarter of a slice each way)",
		    in->cpu_balance);
}

void tune_print_verdict(FILE *f, const struct tune_verdict *v)
{
	fprintf(f, "verdict: %s\n", tune_verdict_name(v->bound));
	for (int i = 0; i < v->nwhy; i++)
		fprintf(f, "  because %s\n", v->why[i]);
	for (int i = 0; i < v->nadvice; i++)
		fprintf(f, "  try     %s\n", v->advice[i]);
}

/* ---- progress ----------------------------------------------------------- */

void tune_progress_init(struct tune_progress *p, unsigned total, bool enabled)
{
	p->tty = isatty(STDERR_FILENO);
	p->enabled = enabled;
	p->done = 0;
	p->total = total;
}

void tune_progress_step(struct tune_progress *p, const char *what)
{
	enum { W = 24 };
	char bar[W + 1];
	unsigned fill;

	if (!p->enabled)
		return;
	if (!p->tty) {
		if (p->total)
			fprintf(stderr, "[%u/%u] %s\n", p->done + 1, p->total, what);
		else
			fprintf(stderr, "[%u] %s\n", p->done + 1, what);
		p->done++;
		return;
	}
	fill = p->total ? (p->done * W) / p->total : (p->done % (W + 1));
	for (unsigned i = 0; i < W; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[W] = '\0';
	/* \r + erase-line: redraw in place. */
	if (p->total)
		fprintf(stderr, "\r\033[2K[%s] %u/%u %s", bar, p->done + 1, p->total, what);
	else
		fprintf(stderr, "\r\033[2K[%s] %u %s", bar, p->done + 1, what);
	fflush(stderr);
	p->done++;
}

void tune_progress_end(struct tune_progress *p)
{
	if (p->enabled && p->tty)
		fputs("\r\033[2K", stderr);
}

/* Wall-clock shares of a batch (see tune_wall_shares); the benchmark's own
 * shares are of worker time (threads x window), where the trainer's policy
 * time shows up as the other workers' waiting. Copy is the trainer
 * thread's own runtime work: collect, and in async mode send too. The
 * pool's collect time leaves out worker 0's envs that recv steps inline
 * (they count as env and ring time) and its waits, so nothing is counted
 * twice; sync and async need no different treatment. */
void tune_result_shares(const struct bench_pool_result *r, struct tune_shares *sh)
{
	double wall = r->batches ? r->seconds * 1e9 / (double)r->batches : 0;

	if (wall > 0)
		tune_wall_shares(r->ns_env_step, r->ns_ring, r->ns_copy + r->ns_send,
				 r->ns_policy, r->threads_used, wall, sh);
	else
		*sh = (struct tune_shares){r->share_env, r->share_ring,
					   r->share_copy + r->share_send, r->share_policy,
					   r->share_wait};
}
