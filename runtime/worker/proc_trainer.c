/*
 * DESIGN: process workers, the trainer's side (proc_internal.h has the command
 * block and the orderings PC0..PC3; proc_worker.c the worker's side).
 *
 * Spawning: posix_spawn of the worker program (the stepring-worker
 * executable for C envs, or the caller's argv, e.g. the Python worker),
 * never a bare fork() of a trainer that runs threads. The ring and the
 * command block (both memfd by default) are inherited as fds 3 and 4;
 * every other descriptor is closed in the child; signals start at their
 * defaults with an empty mask; STEPRING_PROC tells the worker its index
 * and the trainer's pid (for its parent-death check).
 *
 * A command (proc_internal.h: records, parts, PC0..PC4): the caller has reserved
 * its rows (SR_RESERVE_CONTIG); a sync command has env e's row at slot
 * seq + e, an async one (a batch group, a ragged send) has each worker's
 * rows consecutive from its part's row. The trainer writes the record,
 * the envs' actions and lists into the block, bumps go (PC0) and wakes
 * sleeping workers; each worker runs the posted commands in order, writes
 * and publishes its rows and stores done_gen (PC1). Waiting for command g
 * (sr__procs_wait): an inline worker 0 runs its parts up to g on this
 * thread, then the trainer spins (sr__spin) and sleeps on done_evt in
 * ticks of 10 ms; after each tick it checks the workers not done yet.
 *
 * Faults: a worker that exited or was killed (waitpid, this pid only: a
 * Python trainer's other children are not touched), or that has not
 * answered within the step timeout (then SIGKILL and reap), is dead
 * before anything else happens: no write of it can land later. Then the
 * trainer settles every command posted: the inline worker runs its parts
 * and every live worker finishes them (a second fault meanwhile is
 * handled the same way). Each row of the dead worker's parts of the
 * commands it had not done that is not published (ring seq word) becomes
 * a fault row, published by the trainer: truncated = 1, flags
 * SR_SLOT_FAULT, prev SR_RING_NO_PREV, obs and reward zero, the action
 * sent. Rows it published stay as they are (it dies after a publish or in
 * the middle of one: each slot is whole when published, R1). Then, with
 * every live party done with every command posted, any slot between the
 * ring's cursor and head still unpublished (outside a reservation the
 * caller is writing a command for) is an extra slot the dead worker
 * reserved (same-step autoreset): it becomes a pad row, so the consumer
 * never waits for it. The worker is then spawned again with restarts + 1,
 * settled up to the last command posted: it seeds its envs from
 * sr_proc_seed(seed, env, restarts) and starts each of them with a reset.
 * In sync mode this is the one command; in async mode every command in
 * flight is settled the same way, so a fault costs the rows of the dead
 * worker's envs that were in flight. Past the pool's restart budget the
 * command returns -EOWNERDEAD with the env range, the worker and the cause
 * (signal, exit code, or the worker's own message such as a Python
 * traceback), and so does every later command.
 *
 * Close: stop and a bump of go, a short wait, then SIGKILL for any worker left,
 * and every child is reaped. A trainer killed outright takes its workers
 * with it (PR_SET_PDEATHSIG in the worker) and, with memfd segments,
 * leaves no shared memory behind.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_trainer_pvt.h"
#include "ring_internal.h"
#include "stepring/pool.h"

#define TICK_MS 10
#define BOOT_TIMEOUT_MS 120000u /* a worker building its envs (Python imports) */

size_t sr__proc_layout(struct sr__proc_hdr *h, uint32_t nworkers, uint32_t num_envs,
		       uint32_t obs_dim, uint32_t act_size, size_t payload_len,
		       const uint32_t *slice_n, size_t out_size)
{
	size_t off = sr__align_up(sizeof(*h), 4096);

	h->off_workers = off;
	off = sr__align_up(off + (size_t)nworkers * sizeof(struct sr__proc_wrec), 4096);
	for (uint32_t w = 0; w < nworkers; w++) {
		uint32_t cap = 1;

		while (cap < slice_n[w] + 1u)
			cap <<= 1;
		/* recorded by the caller into the worker records: its
		 * episode queue, then its out area */
		off = sr__align_up(off + (size_t)cap * 2 * sizeof(double), 64);
		off = sr__align_up(off + out_size, 64);
	}
	h->ncmds = 256;
	h->cmd_size = (uint32_t)sr__align_up(sizeof(struct sr__proc_crec) +
					 (size_t)nworkers * sizeof(struct sr__proc_part), 64);
	h->off_cmds = off = sr__align_up(off, 4096);
	off += (size_t)h->ncmds * h->cmd_size;
	/* Ragged sends' env lists: twice the envs (sr__procs_ids). */
	h->ids_cap = 2 * num_envs;
	h->off_ids = off = sr__align_up(off, 64);
	off += (size_t)h->ids_cap * sizeof(uint32_t);
	h->off_actions = off = sr__align_up(off, 4096);
	off = sr__align_up(off + (size_t)num_envs * act_size, 64);
	h->off_mask = off;
	off = sr__align_up(off + num_envs, 64);
	h->off_final = off;
	off = sr__align_up(off + (size_t)num_envs * obs_dim * sizeof(float), 64);
	h->off_seeds = off;
	off = sr__align_up(off + (size_t)num_envs * sizeof(uint64_t), 64);
	h->off_smask = off;
	off = sr__align_up(off + num_envs, 64);
	h->off_rpay = off;
	off = sr__align_up(off + SR_PROC_RESET_PAYLOAD_MAX, 64);
	h->off_payload = off;
	h->payload_len = payload_len;
	off = sr__align_up(off + payload_len, 4096);
	h->total_size = off;
	return off;
}

/* Describe how worker @w ended (@st from waitpid; @hung: killed by us). */
static void describe(struct sr__procs *P, uint32_t w, int st, bool hung, char *buf, size_t len)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
	uint32_t n = atomic_load_explicit(&r->err_len, memory_order_acquire);
	int o;

	if (hung)
		o = snprintf(buf, len, "no answer within the step timeout of %u ms (killed)",
			     P->step_timeout_ms);
	else if (WIFSIGNALED(st))
		o = snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(st),
			     strsignal(WTERMSIG(st)));
	else if (WIFEXITED(st))
		o = snprintf(buf, len, "exited with code %d", WEXITSTATUS(st));
	else
		o = snprintf(buf, len, "ended (status 0x%x)", st);
	/* The worker's own message (a Python traceback): its end says the
	 * most (the exception), and the whole error message holds 512 bytes. */
	if (n && n < SR__PROC_ERR_MAX && o > 0 && (size_t)o < len) {
		const uint32_t keep = 300;

		snprintf(buf + o, len - (size_t)o, ": %s%.*s", n > keep ? "..." : "",
			 (int)(n > keep ? keep : n), r->err + (n > keep ? n - keep : 0));
	}
}

/* Publish every unpublished row of worker @w's part of command @gen as a
 * fault row. The worker is dead and reaped (or, inline, failed). */
static void fault_rows(struct sr__procs *P, uint32_t w, uint32_t gen)
{
	struct sr_ring *R = P->ring;
	const struct sr__proc_crec *c = sr__proc_crec(P->h, gen);
	const struct sr__proc_part *pt = &c->part[w];
	const uint32_t *ids = sr__proc_ids(P->h) + (pt->lo == SR__PROC_LIST ? pt->ids : 0);
	const char *acts = (const char *)P->h + P->h->off_actions;

	for (uint32_t j = 0; j < pt->n; j++) {
		uint32_t e = pt->lo == SR__PROC_LIST ? ids[j] : pt->lo + j;
		uint64_t q = c->seq + pt->row + j, s = q & R->mask;

		if (atomic_load_explicit(&R->seq[s], memory_order_acquire) == q + 1)
			continue; /* published whole before it died: keep it */
		sr__ring_fault_row(R, q, e,
				   c->kind == SR_PROC_CMD_STEP ? acts + (size_t)e * R->act_size : NULL);
		sr_ring_publish(R, q, 1); /* R1 */
		P->fault_rows++;
	}
}

/* With every live party done with every command posted: slots in
 * [cursor, head) that nobody will publish (a dead worker's extra
 * reservation) become pad rows; the reservation of a command being
 * written (pend_lo, pend_hi) is the caller's. */
static void fill_gaps(struct sr__procs *P)
{
	struct sr_ring *R = P->ring;
	uint64_t c = sr_ring_cursor(R), hd = sr_ring_head(R);

	for (uint64_t q = c; q < hd && q < c + R->cap; q++) {
		uint64_t s = q & R->mask;

		if (q >= P->pend_lo && q < P->pend_hi)
			continue;
		if (atomic_load_explicit(&R->seq[s], memory_order_acquire) == q + 1)
			continue;
		sr__ring_pad_rows(R, q, 1);
		sr_ring_publish(R, q, 1); /* R1 */
		P->pad_rows++;
	}
}

/* Worker @w is dead (reaped, status @st) and every live party has done
 * every command posted: fault rows of its parts of the commands it had
 * not done, then a restart within the budget. */
static int recover(struct sr__procs *P, uint32_t w, int st, bool hung)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
	char why[SR__PROC_ERR_MAX + 128];
	uint32_t g = atomic_load_explicit(&r->done_gen, memory_order_acquire);

	describe(P, w, st, hung, why, sizeof(why));
	P->pid[w] = -1;
	P->faults++;
	while (g != P->gen)
		fault_rows(P, w, ++g);
	snprintf(P->last_fault, sizeof(P->last_fault), "envs %u-%u, worker %u (pid %lld): %.900s",
		 r->first_env, r->first_env + r->n_envs - 1, w, (long long)r->pid, why);
	atomic_store_explicit(&r->done_gen, P->gen, memory_order_relaxed);
	if (P->restarts >= P->max_restarts) {
		P->broken = sr__errorf(-EOWNERDEAD,
				       "process workers: restart budget of %u spent; last fault: "
				       "envs %u-%u, worker %u (pid %lld): %s",
				       P->max_restarts, r->first_env,
				       r->first_env + r->n_envs - 1, w, (long long)r->pid, why);
		return P->broken;
	}
	P->restarts++;
	r->restarts++;
	return sr__procs_spawn(P, w);
}

/* Worker 0's part of command @gen, on this thread. A failure of the
 * inline function is a fault of worker 0: its unpublished rows become
 * fault rows and it counts as a restart (the function rebuilds its envs
 * when info->restarts grows); the slots it may have reserved are padded
 * once everything is settled (P->gaps). */
static int run_inline(struct sr__procs *P, uint32_t gen)
{
	struct sr__proc_hdr *h = P->h;
	struct sr__proc_wrec *r = sr__proc_wrec(h, 0);
	sr_proc_cmd c;
	char why[SR__PROC_ERR_MAX + 128];
	uint32_t n;

	sr__proc_cmd_of(h, 0, gen, &c);
	atomic_store_explicit(&r->err_len, 0, memory_order_relaxed);
	if (!sr__proc_worker_local_run(P->lw, P->ifn, P->iarg, &P->linfo, &c))
		return 0;
	n = atomic_load_explicit(&r->err_len, memory_order_relaxed);
	snprintf(why, sizeof(why), "failed in the trainer's process (inline): %s",
		 n && n < SR__PROC_ERR_MAX ? r->err + (n > 600 ? n - 600 : 0)
					   : "no reason given");
	P->faults++;
	P->gaps = true;
	fault_rows(P, 0, gen);
	snprintf(P->last_fault, sizeof(P->last_fault), "envs %u-%u, worker 0 (inline): %.900s",
		 r->first_env, r->first_env + r->n_envs - 1, why);
	if (P->restarts >= P->max_restarts) {
		P->broken = sr__errorf(-EOWNERDEAD,
				       "process workers: restart budget of %u spent; last fault: "
				       "%s",
				       P->max_restarts, P->last_fault);
		return P->broken;
	}
	P->restarts++;
	r->restarts++;
	P->linfo.restarts = r->restarts;
	return 0;
}

/* The inline worker 0 runs its parts of the commands up to @gen. */
static int inline_upto(struct sr__procs *P, uint32_t gen)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, 0);
	int err = 0;

	if (!P->first)
		return 0;
	/* Only this thread writes and reads record 0's done_gen. */
	while (!err && !sr__gen_ge(atomic_load_explicit(&r->done_gen, memory_order_relaxed), gen))
		err = run_inline(P, atomic_load_explicit(&r->done_gen, memory_order_relaxed) + 1);
	return err;
}

/* Reap worker @w if it has ended: 1 (and *st), 0 alive. */
static int ended(struct sr__procs *P, uint32_t w, int *st)
{
	pid_t r;

	if (P->pid[w] <= 0)
		return 0;
	do
		r = waitpid(P->pid[w], st, WNOHANG);
	while (r < 0 && errno == EINTR);
	if (r == P->pid[w])
		return 1;
	if (r < 0) {
		/* Reaped by someone else (a SIGCHLD handler of the program):
		 * the process is gone all the same. */
		*st = 0;
		return 1;
	}
	return 0;
}

static void kill_reap(struct sr__procs *P, uint32_t w, int *st)
{
	kill(P->pid[w], SIGKILL);
	while (waitpid(P->pid[w], st, 0) < 0 && errno == EINTR)
		;
}

/* Worker @w (a process) has done command @gen, or was found dead. */
static bool worker_done(struct sr__procs *P, uint32_t w, uint32_t gen)
{
	/* PC1: acquire pairs with the worker's release. */
	return P->dead[w] ||
	       sr__gen_ge(atomic_load_explicit(&sr__proc_wrec(P->h, w)->done_gen,
					       memory_order_acquire),
			  gen);
}

/* Every worker process (or only worker @only, unless UINT32_MAX). */
static bool all_done(struct sr__procs *P, uint32_t gen, uint32_t only)
{
	for (uint32_t w = P->first; w < P->nworkers; w++)
		if ((only == UINT32_MAX || w == only) && !worker_done(P, w, gen))
			return false;
	return true;
}

/*
 * Wait until every worker process (or only worker @only, unless
 * UINT32_MAX) has done command @gen or is dead (P->dead, reaped: ended,
 * or killed after the step timeout, counted from this call or from the
 * worker's readiness after a restart). Returns whether one was found dead.
 */
static bool wait_workers(struct sr__procs *P, uint32_t gen, uint32_t only)
{
	struct sr__proc_hdr *h = P->h;
	uint64_t t0, until;
	bool spinning, any = false;

	/* Done already (a record's earlier command, sr__procs_begin): not a
	 * wait, so not one for the spin's average either. */
	if (all_done(P, gen, only))
		return false;
	t0 = sr__now_ns();
	until = t0 + sr__spin_budget(&P->spin);
	spinning = until > t0;
	for (uint32_t i = 0; !all_done(P, gen, only); i++) {
		uint32_t ev;

		if (spinning) {
			sr__cpu_relax();
			if ((i & 31) != 31 || sr__now_ns() < until)
				continue;
			spinning = false;
		}
		/* PC2: announce, re-check, sleep one tick at most. */
		atomic_store_explicit(&h->trainer_sleeping, 1, memory_order_seq_cst);
		ev = atomic_load_explicit(&h->done_evt, memory_order_seq_cst);
		if (!all_done(P, gen, only))
			sr__futex_wait(&h->done_evt, ev, TICK_MS, true);
		atomic_store_explicit(&h->trainer_sleeping, 0, memory_order_relaxed);
		for (uint32_t w = P->first; w < P->nworkers; w++) {
			struct sr__proc_wrec *r = sr__proc_wrec(h, w);
			uint64_t now = sr__now_ns(), el;
			bool booting, hung = false;
			int st = 0;

			if ((only != UINT32_MAX && w != only) || worker_done(P, w, gen))
				continue;
			booting = atomic_load_explicit(&r->state, memory_order_acquire) ==
				  SR__PW_BOOT;
			if (booting)
				P->ready_at[w] = UINT64_MAX;
			else if (P->ready_at[w] == UINT64_MAX)
				P->ready_at[w] = now;
			el = (now - (P->ready_at[w] != UINT64_MAX && P->ready_at[w] > t0
					     ? P->ready_at[w]
					     : t0)) /
			     1000000u;
			if (!ended(P, w, &st)) {
				if (booting ? el < BOOT_TIMEOUT_MS
					    : !P->step_timeout_ms || el < P->step_timeout_ms)
					continue;
				kill_reap(P, w, &st);
				hung = true;
			}
			P->dead[w] = true;
			P->dead_st[w] = st;
			P->dead_hung[w] = hung;
			any = true;
		}
	}
	if (!any)
		sr__spin_note(&P->spin, sr__now_ns() - t0);
	return any;
}

/*
 * After a fault: every live party does every command posted (a worker
 * found dead meanwhile joins the others), then each dead worker's rows
 * become fault rows and it restarts, then the slots nobody will publish
 * become pads. Returns the first error (the budget, a spawn).
 */
static int settle(struct sr__procs *P)
{
	int err = inline_upto(P, P->gen), e2;

	while (wait_workers(P, P->gen, UINT32_MAX))
		;
	for (uint32_t w = P->first; w < P->nworkers; w++) {
		if (!P->dead[w])
			continue;
		P->dead[w] = false;
		e2 = recover(P, w, P->dead_st[w], P->dead_hung[w]);
		if (e2 && !err)
			err = e2;
	}
	fill_gaps(P);
	P->gaps = false;
	return err;
}

/* Wait until command @gen is done by every worker, or only by worker
 * @only (unless UINT32_MAX); a fault settles everything posted. */
static int wait_gen(struct sr__procs *P, uint32_t gen, uint32_t only)
{
	int err;

	if (P->broken)
		return sr__errorf(P->broken, "process workers: restart budget of %u spent; "
					     "last fault: %s",
				  P->max_restarts, P->last_fault);
	err = only == UINT32_MAX || only < P->first ? inline_upto(P, gen) : 0;
	if (!err && (only < P->first || !wait_workers(P, gen, only)) && !P->gaps)
		return 0;
	/* A fault (or the budget spent inline): settle everything posted. */
	{
		int e2 = settle(P);

		return err ? err : e2;
	}
}

int sr__procs_wait(struct sr__procs *P, uint32_t gen)
{
	return wait_gen(P, gen, UINT32_MAX);
}

/*
 * Wait for what writes ring slot @pos: the worker whose part of a command
 * in flight holds it, for that command (an inline worker 0 runs its parts
 * up to it). Only that worker: a worker found dead is found when its own
 * rows are needed, in ring order, so the commands posted before the fault
 * is handled (whose parts of it become fault rows) do not depend on how
 * fast the other workers were. A slot outside every command (an extra a
 * worker reserved for same-step autoreset): the oldest command in flight.
 */
int sr__procs_wait_slot(struct sr__procs *P, uint64_t pos)
{
	uint32_t g = sr__procs_oldest(P);

	if (!g)
		return 0;
	for (uint32_t k = g;; k++) {
		const struct sr__proc_crec *c = sr__proc_crec(P->h, k);

		if (pos >= c->seq && pos < c->seq + c->rows) {
			const uint32_t off = (uint32_t)(pos - c->seq);

			for (uint32_t w = 0; w < P->nworkers; w++)
				if (off >= c->part[w].row && off < c->part[w].row + c->part[w].n)
					return wait_gen(P, k, w);
			break;
		}
		if (k == P->gen)
			break;
	}
	return wait_gen(P, g, UINT32_MAX);
}

uint32_t sr__procs_oldest(const struct sr__procs *P)
{
	uint32_t oldest = P->gen;

	for (uint32_t w = 0; w < P->nworkers; w++) {
		uint32_t d = atomic_load_explicit(&sr__proc_wrec(P->h, w)->done_gen,
						  memory_order_acquire);

		if (!sr__gen_ge(d, oldest))
			oldest = d;
	}
	return oldest == P->gen ? 0 : oldest + 1;
}

const struct sr__proc_crec *sr__procs_rec(const struct sr__procs *P, uint32_t gen)
{
	return sr__proc_crec(P->h, gen);
}

void *sr__procs_actions(struct sr__procs *P)
{
	return (char *)P->h + P->h->off_actions;
}

uint8_t *sr__procs_env_mark(struct sr__procs *P)
{
	return P->mark;
}

uint8_t *sr__procs_mask(struct sr__procs *P)
{
	return (uint8_t *)P->h + P->h->off_mask;
}

uint32_t sr__procs_gen(const struct sr__procs *P)
{
	return P->gen;
}

/*
 * Env lists: the ids area holds 2 * num_envs entries, written in order
 * (free-running index ids_w), a list never wrapping (it starts over at 0
 * when the rest of the area is too short: a hole shorter than the list).
 * A list is read by its workers before they publish its envs' rows, and
 * the envs of a list stay in flight until recv returns those rows, in
 * ring order, so the lists still read are those of the last commands,
 * whose envs are in flight: at most num_envs - n entries and their holes,
 * each shorter than its list, so fewer than 2 * (num_envs - n); with this
 * list and its hole, fewer than 2 * num_envs (PC4).
 */
uint32_t *sr__procs_ids(struct sr__procs *P, uint32_t n, uint32_t *off)
{
	const uint32_t cap = P->h->ids_cap;
	uint64_t at = P->ids_w;

	if (at % cap + n > cap)
		at += cap - at % cap;
	P->ids_w = at + n;
	*off = (uint32_t)(at % cap);
	return sr__proc_ids(P->h) + *off;
}

struct sr__proc_crec *sr__procs_begin(struct sr__procs *P, uint32_t kind, uint64_t seq,
				      uint32_t rows, int *err)
{
	const uint32_t gen = P->gen + 1;
	struct sr__proc_crec *c = sr__proc_crec(P->h, gen);

	*err = 0;
	P->pend_lo = seq;
	P->pend_hi = seq + rows;
	/* PC4: the record's last command (gen - ncmds) is done by every
	 * worker (a restarted one is settled past it). A pool past its
	 * budget takes no more commands. */
	if (P->broken || P->posted >= P->h->ncmds) {
		*err = sr__procs_wait(P, P->posted >= P->h->ncmds ? gen - P->h->ncmds : P->gen);
		if (*err) {
			P->pend_lo = P->pend_hi = 0;
			return NULL;
		}
	}
	c->gen = gen;
	c->kind = kind;
	c->seq = seq;
	c->rows = rows;
	c->has_mask = 0;
	/* A reset's seeds and options go with this command only; their areas
	 * were written by sr__procs_reset_next (a sync reset: no command in
	 * flight reads them). PC0 orders them before the workers' reads. */
	c->reset_flags = kind == SR_PROC_CMD_RESET ? P->reset_next : 0;
	c->has_smask = P->rn_smask;
	c->reset_seed = P->rn_seed;
	c->reset_b[0] = P->rn_b[0];
	c->reset_b[1] = P->rn_b[1];
	c->rpay_len = P->rn_pay;
	P->reset_next = 0;
	return c;
}

uint32_t sr__procs_post(struct sr__procs *P)
{
	struct sr__proc_hdr *h = P->h;
	struct sr__proc_crec *c = sr__proc_crec(h, P->gen + 1);
	bool any_sleeping = false;

	P->pend_lo = P->pend_hi = 0;
	atomic_store_explicit(&c->done_left, P->nworkers - P->first, memory_order_relaxed);
	P->gen++;
	P->posted++;
	/* PC0 (release, and seq_cst for PC2): the command before go. */
	atomic_store_explicit(&h->go, P->gen, memory_order_seq_cst);
	for (uint32_t w = P->first; w < P->nworkers; w++)
		any_sleeping |= atomic_load_explicit(&sr__proc_wrec(h, w)->sleeping,
						     memory_order_seq_cst) != 0;
	if (any_sleeping)
		sr__futex_wake(&h->go, INT_MAX, true);
	return P->gen;
}

void sr__procs_reset_next(struct sr__procs *P, const sr_pool_reset_opts *o, const double *b)
{
	struct sr__proc_hdr *h = P->h;
	const uint32_t f = !o ? 0 : o->flags & (SR_RESET_F_SEED | SR_RESET_F_SEEDS |
					       SR_RESET_F_OPTIONS | SR_RESET_F_PAYLOAD);

	P->reset_next = f;
	P->rn_seed = (f & SR_RESET_F_SEED) ? o->seed : 0;
	P->rn_smask = 0;
	P->rn_b[0] = P->rn_b[1] = 0.0;
	P->rn_pay = 0;
	if (!f)
		return;
	/* Between commands: no worker reads these areas (the last command's
	 * completion was acquired); the next go releases the writes (PC0). */
	if (f & SR_RESET_F_SEEDS) {
		memcpy((char *)h + h->off_seeds, o->seeds, (size_t)P->num_envs * sizeof(uint64_t));
		if (o->seed_mask) {
			memcpy((char *)h + h->off_smask, o->seed_mask, P->num_envs);
			P->rn_smask = 1;
		}
	}
	if ((f & SR_RESET_F_OPTIONS) && b) {
		P->rn_b[0] = b[0];
		P->rn_b[1] = b[1];
	}
	if ((f & SR_RESET_F_PAYLOAD) && o->payload_len) {
		memcpy((char *)h + h->off_rpay, o->payload, o->payload_len);
		P->rn_pay = o->payload_len;
	}
}

int sr__procs_run(struct sr__procs *P, uint32_t cmd, uint64_t seq, const void *actions,
		  const uint8_t *mask)
{
	struct sr__proc_hdr *h = P->h;
	struct sr__proc_crec *c;
	int err;

	c = sr__procs_begin(P, cmd, seq, P->num_envs, &err);
	if (!c)
		return err;
	for (uint32_t w = 0; w < P->nworkers; w++) {
		const struct sr__proc_wrec *r = sr__proc_wrec(h, w);

		c->part[w] = (struct sr__proc_part){r->first_env, r->n_envs, r->first_env, 0};
	}
	if (cmd == SR_PROC_CMD_STEP)
		memcpy((char *)h + h->off_actions, actions, (size_t)P->num_envs * P->act_size);
	if (mask) {
		memcpy((char *)h + h->off_mask, mask, P->num_envs);
		c->has_mask = 1;
	}
	return sr__procs_wait(P, sr__procs_post(P));
}

void sr__procs_episodes(struct sr__procs *P, void (*fn)(void *, double, double), void *arg)
{
	for (uint32_t w = 0; w < P->nworkers; w++) {
		struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

		/* PC3 */
		sr__eps_take((const double *)((char *)P->h + r->off_eps), r->eps_cap - 1,
			     &r->eps_head, &r->eps_tail, fn, arg);
	}
}

uint64_t sr__procs_nonfinite_first(const struct sr__procs *P)
{
	/* Relaxed: read after the workers' done_gen (PC1). */
	return atomic_load_explicit(&P->h->nf_first, memory_order_relaxed);
}

bool sr__procs_inline(const struct sr__procs *P)
{
	return P->first != 0;
}

float *sr__procs_final(struct sr__procs *P)
{
	return P->h->keep_final ? (float *)((char *)P->h + P->h->off_final) : NULL;
}

void *sr__procs_out(struct sr__procs *P, uint32_t w, size_t *size)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);

	*size = (size_t)r->out_size;
	return r->out_size ? (char *)P->h + r->off_out : NULL;
}

void sr__procs_info(const struct sr__procs *P, struct sr__procs_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->faults = P->faults;
	out->restarts = P->restarts;
	out->fault_rows = P->fault_rows;
	out->pad_rows = P->pad_rows;
	out->last_fault = P->last_fault;
}

int sr__procs_worker(const struct sr__procs *P, uint32_t w, struct sr__procs_wstats *out)
{
	const struct sr__proc_wrec *r;

	if (w >= P->nworkers)
		return -EINVAL;
	r = sr__proc_wrec(P->h, w);
	out->pid = w < P->first ? P->h->trainer_pid : P->pid[w];
	out->restarts = r->restarts;
	out->checks_finite = atomic_load_explicit(&r->checks_finite, memory_order_relaxed);
	out->nonfinite = atomic_load_explicit(&r->nonfinite, memory_order_relaxed);
	out->steps = atomic_load_explicit(&r->steps, memory_order_relaxed);
	out->ns_env = atomic_load_explicit(&r->ns_env, memory_order_relaxed);
	out->ns_ring = atomic_load_explicit(&r->ns_ring, memory_order_relaxed);
	out->ns_idle = atomic_load_explicit(&r->ns_idle, memory_order_relaxed);
	return 0;
}

static void stop_all(struct sr__procs *P)
{
	struct sr__proc_hdr *h = P->h;
	uint64_t t0 = sr__now_ns();
	bool left = false;

	atomic_store_explicit(&h->stop, 1, memory_order_relaxed);
	atomic_store_explicit(&h->go, ++P->gen, memory_order_seq_cst); /* PC0 */
	sr__futex_wake(&h->go, INT_MAX, true);
	/* A second for a clean exit, then SIGKILL: a hung env ends here too. */
	do {
		int st;

		left = false;
		for (uint32_t w = 0; w < P->nworkers; w++) {
			if (P->pid[w] <= 0)
				continue;
			if (ended(P, w, &st))
				P->pid[w] = -1;
			else
				left = true;
		}
		if (left) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
	} while (left && sr__now_ns() - t0 < 1000000000ull);
	for (uint32_t w = 0; w < P->nworkers; w++) {
		int st;

		if (P->pid[w] > 0)
			kill_reap(P, w, &st);
		P->pid[w] = -1;
	}
}

void sr__procs_destroy(struct sr__procs *P)
{
	if (!P)
		return;
	if (P->h && P->pid)
		stop_all(P);
	sr__cworker_close(P->cw);
	sr_proc_worker_close(P->lw);
	if (P->guard_fd >= 0)
		close(P->guard_fd); /* the guard wakes; the pool removes the names itself */
	if (P->guard > 0) {
		/* It finds the names still held by this process (the ring is
		 * destroyed after us), leaves them, and exits: reap it. */
		kill(P->guard, SIGKILL);
		while (waitpid(P->guard, NULL, 0) < 0 && errno == EINTR)
			;
	}
	if (P->h)
		munmap(P->h, P->len);
	if (P->fd >= 0)
		close(P->fd);
	if (P->xmap)
		munmap(P->xmap, P->xlen);
	if (P->xfd >= 0)
		close(P->xfd);
	free(P->xcap);
	if (P->argv)
		for (char **a = P->argv; *a; a++)
			free(*a);
	free(P->argv);
	free(P->exe);
	free(P->pid);
	free(P->cpus);
	free(P->ready_at);
	free(P->dead);
	free(P->dead_st);
	free(P->dead_hung);
	free(P->mark);
	free(P);
}

int sr__procs_create(const struct sr__procs_opts *o, struct sr__procs **out)
{
	struct sr__proc_hdr geo, *h;
	struct sr__procs *P;
	size_t len, na = 0, off;
	uint64_t t0;
	int err;

	*out = NULL;
	P = calloc(1, sizeof(*P));
	if (!P)
		return sr__errorf(-ENOMEM, "out of memory");
	P->fd = -1;
	P->guard_fd = -1;
	P->xfd = -1;
	P->ring = o->ring;
	P->nworkers = o->nworkers;
	P->num_envs = o->num_envs;
	P->act_size = sr_ring_act_size(o->ring);
	P->obs_dim = sr_ring_obs_dim(o->ring);
	P->step_timeout_ms = o->step_timeout_ms;
	P->max_restarts = o->max_restarts;
	P->spin.max_ns = o->spin_ns;
	P->pid = calloc(o->nworkers, sizeof(pid_t));
	if (o->cpus && P->pid) {
		P->cpus = calloc(o->nworkers, sizeof(cpu_set_t));
		if (!P->cpus) {
			err = sr__errorf(-ENOMEM, "out of memory");
			goto fail;
		}
		memcpy(P->cpus, o->cpus, o->nworkers * sizeof(cpu_set_t));
	}
	P->ready_at = calloc(o->nworkers, sizeof(uint64_t));
	P->dead = calloc(o->nworkers, sizeof(bool));
	P->dead_st = calloc(o->nworkers, sizeof(int));
	P->dead_hung = calloc(o->nworkers, sizeof(bool));
	P->xcap = calloc(o->nworkers, sizeof(uint64_t));
	if (o->ragged)
		P->mark = calloc(o->num_envs, 1);
	if (!P->pid || !P->ready_at || !P->dead || !P->dead_st || !P->dead_hung || !P->xcap ||
	    (o->ragged && !P->mark)) {
		err = sr__errorf(-ENOMEM, "out of memory");
		goto fail;
	}
	for (uint32_t w = 0; w < o->nworkers; w++)
		P->pid[w] = -1;
	if (o->argv && o->argv[0]) {
		while (o->argv[na])
			na++;
		P->exe = strdup(o->argv[0]);
	} else {
		err = sr__procs_find_worker(&P->exe);
		if (err)
			goto fail;
		na = 1;
	}
	P->argv = calloc(na + 1, sizeof(char *));
	if (!P->exe || !P->argv) {
		err = sr__errorf(-ENOMEM, "out of memory");
		goto fail;
	}
	for (size_t i = 0; i < na; i++) {
		P->argv[i] = strdup(o->argv && o->argv[0] ? o->argv[i] : P->exe);
		if (!P->argv[i]) {
			err = sr__errorf(-ENOMEM, "out of memory");
			goto fail;
		}
	}

	memset(&geo, 0, sizeof(geo));
	len = sr__proc_layout(&geo, o->nworkers, o->num_envs, P->obs_dim, P->act_size,
			      o->payload_len, o->slice_n, o->out_size);
	P->fd = memfd_create("stepring-procs", MFD_CLOEXEC);
	/* Empty until a checkpoint needs it (sr__procs_save). */
	P->xfd = memfd_create("stepring-procs-xchg", MFD_CLOEXEC);
	if (P->fd < 0 || P->xfd < 0) {
		err = sr__errorf(-errno, "process workers: memfd_create: %s", strerror(errno));
		goto fail;
	}
	if (ftruncate(P->fd, (off_t)len) || (errno = posix_fallocate(P->fd, 0, (off_t)len))) {
		err = sr__errorf(-errno, "process workers: %zu bytes of shared memory: %s", len,
				 strerror(errno));
		goto fail;
	}
	h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, P->fd, 0);
	if (h == MAP_FAILED) {
		err = sr__errorf(-errno, "process workers: mmap: %s", strerror(errno));
		goto fail;
	}
	P->h = h;
	P->len = len;
	memcpy(h, &geo, sizeof(geo));
	h->magic = SR__PROC_MAGIC;
	h->version = SR__PROC_VERSION;
	h->hdr_size = sizeof(*h);
	h->trainer_pid = getpid();
	h->nworkers = o->nworkers;
	h->num_envs = o->num_envs;
	h->obs_dim = P->obs_dim;
	h->act_size = P->act_size;
	h->autoreset = o->autoreset;
	h->keep_final = o->keep_final;
	h->seed = o->seed;
	h->env_base = o->env_base;
	h->spin_ns = o->spin_ns;
	h->check_finite = o->check_finite;
	if (o->spec) {
		const sr_env_spec *s = o->spec;
		Dl_info di, me;

		snprintf(h->env_name, sizeof(h->env_name), "%s", s->name);
		/* A plugin's spec points into its shared object: the worker
		 * loads the same file. */
		if (s->step && dladdr((void *)s->step, &di) && di.dli_fname &&
		    dladdr((void *)sr__procs_create, &me) && me.dli_fname &&
		    strcmp(di.dli_fname, me.dli_fname) && di.dli_fbase != me.dli_fbase)
			snprintf(h->plugin, sizeof(h->plugin), "%s", di.dli_fname);
		h->state_size = s->state_size;
		h->max_episode_steps = s->max_episode_steps;
		h->obs_ndim = s->obs_ndim;
		memcpy(h->obs_shape, s->obs_shape, sizeof(h->obs_shape));
		memcpy(h->params, s->params, sizeof(h->params));
	}
	off = h->off_workers + sr__align_up((size_t)o->nworkers * sizeof(struct sr__proc_wrec), 4096);
	for (uint32_t w = 0, e = 0; w < o->nworkers; w++) {
		struct sr__proc_wrec *r = sr__proc_wrec(h, w);
		uint32_t cap = 1;

		while (cap < o->slice_n[w] + 1u)
			cap <<= 1;
		r->first_env = e;
		r->n_envs = o->slice_n[w];
		r->eps_cap = cap;
		r->off_eps = off;
		off = sr__align_up(off + (size_t)cap * 2 * sizeof(double), 64);
		r->off_out = o->out_size ? off : 0;
		r->out_size = o->out_size;
		off = sr__align_up(off + o->out_size, 64);
		e += o->slice_n[w];
	}
	if (o->payload_len)
		memcpy((char *)h + h->off_payload, o->payload, o->payload_len);
	if (o->inline0) {
		/* Worker 0 is this process: a handle on its record, and the C
		 * env worker unless the caller steps the slice. */
		P->first = 1;
		err = sr__proc_worker_local(h, P->ring, 0, &P->lw, &P->linfo);
		if (err)
			goto fail;
		sr__proc_worker_local_xchg(P->lw, P->xfd);
		sr__proc_wrec(h, 0)->pid = getpid();
		atomic_store_explicit(&sr__proc_wrec(h, 0)->state, SR__PW_READY,
				      memory_order_relaxed);
		if (o->inline_fn) {
			P->ifn = o->inline_fn;
			P->iarg = o->inline_arg;
		} else {
			err = sr__cworker_open(P->lw, &P->linfo, o->spec, &P->cw);
			if (err)
				goto fail;
			P->ifn = sr__cworker_run;
			P->iarg = P->cw;
		}
	}
	sr__procs_spawn_guard(P, o->stats_name);
	for (uint32_t w = P->first; w < o->nworkers; w++) {
		err = sr__procs_spawn(P, w);
		if (err)
			goto fail;
	}
	/* Wait until every worker has built its envs, or one failed. */
	t0 = sr__now_ns();
	for (uint32_t w = P->first; w < o->nworkers;) {
		struct sr__proc_wrec *r = sr__proc_wrec(h, w);
		int st = 0;

		if (atomic_load_explicit(&r->state, memory_order_acquire) == SR__PW_READY) {
			w++;
			continue;
		}
		bool dead = ended(P, w, &st);

		if (dead || (sr__now_ns() - t0) / 1000000u > BOOT_TIMEOUT_MS) {
			char why[SR__PROC_ERR_MAX + 128];

			if (!dead)
				kill_reap(P, w, &st);
			P->pid[w] = -1;
			describe(P, w, st, false, why, sizeof(why));
			err = sr__errorf(-ECHILD, "process workers: worker %u (envs %u-%u) did not "
						  "start: %s",
					 w, r->first_env, r->first_env + r->n_envs - 1, why);
			goto fail;
		}
		{
			struct timespec ts = {0, 200000};
			nanosleep(&ts, NULL);
		}
	}
	*out = P;
	return 0;
fail:
	sr__procs_destroy(P);
	return err;
}
