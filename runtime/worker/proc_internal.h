/*
 * Process workers: the shared command block, and the functions of the
 * process family of runtime/worker/: the trainer's side (proc_trainer.c,
 * proc_spawn.c, proc_ckpt.c), the worker's side (proc_worker.c), the C
 * env worker (proc_cworker.c), the guard (proc_guard.c); the pool's
 * process kind (proc_kind.c) uses them.
 *
 * One memfd segment per pool, inherited by every worker process (fd
 * SR__PROC_FD_BLOCK; the ring is SR__PROC_FD_RING): a header with the
 * pool's geometry, one record per worker, a ring of command records, the
 * action mailbox (one action per env), the reset mask, the env lists of
 * ragged commands, a reset's seeds, seed mask and payload
 * (sr_pool_reset_ex: a sync reset, so one area of each), and an optional payload (bytes the trainer hands every
 * worker at spawn, e.g. pickled env factories). Offsets, never pointers,
 * inside it. memfd: no name in /dev/shm, so nothing is left behind when
 * every process holding it is gone.
 *
 * Commands. Command g (g = 1, 2, ...: its gen) is record g % ncmds. It
 * names the ring slot of its first row (seq) and, for each worker, the
 * part of the command that is its own (struct sr__proc_part): a range of
 * its envs (a sync step or reset: the whole slice; an async batch group:
 * the worker's envs of the group), or a list of its envs (a ragged async
 * send), with the first row of that part; a worker's rows are consecutive
 * slots, in env order. The actions are in the mailbox, by env: an env is
 * in at most one command in flight (the pool refuses to send an env in
 * flight, and a sync command waits for the last one), so its mailbox
 * entry is not rewritten while a worker may read it. Several commands may
 * be in flight (async); a worker runs them in gen order.
 *
 * Memory ordering (named in the code as PC0..PC4):
 *  PC0 command: the trainer writes record g, the actions of its envs, the
 *      mask and the env lists, then stores go = g (release); a worker loads
 *      go (acquire) and then reads every record up to go.
 *  PC1 done: a worker publishes its rows (the ring's R1), then stores
 *      done_gen = g (release); the trainer loads done_gen (acquire)
 *      and then reads the rows and the worker's counters.
 *  PC2 sleep: waker stores the word (go or done_evt) seq_cst, then loads
 *      the sleeper's flag seq_cst; sleeper stores its flag seq_cst, then
 *      reloads the word seq_cst before futex_wait (Dekker, as the threads
 *      do); futex_wait rechecks the word in the kernel. One wake-up of
 *      the trainer per command: each worker process counts the record's
 *      done_left down before its done_gen store and reads it after (all
 *      seq_cst); the one whose store comes last sees 0 and bumps done_evt
 *      (sr_proc_worker_done).
 *  PC3 episodes: a worker writes an entry, then stores eps_head (release);
 *      the trainer loads eps_head (acquire), reads the entries, stores
 *      eps_tail (release); the worker loads eps_tail (acquire) before it
 *      reuses entries.
 *  PC4 reuse: the trainer rewrites record g % ncmds for command g only
 *      once every worker's done_gen >= g - ncmds (PC1's acquire: each
 *      read that record for the last time before its release). An env
 *      list is rewritten only after every env in it was received by the
 *      pool (its row was published, after its worker read the list), and
 *      the list area holds twice the envs (see sr__procs_ids).
 *  The finite check's counters (nonfinite, nf_first, checks_finite) are
 *  written before done_gen's release (PC1) and read after its acquire.
 */
#ifndef SR_PROC_INTERNAL_H
#define SR_PROC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sched.h>
#include <sys/types.h>

#include "sr_base.h"
#include "worker_internal.h" /* struct sr__eps_q */
#include "stepring/env.h"
#include "stepring/pool.h"
#include "stepring/proc.h"
#include "stepring/ring.h"

#define SR__PROC_MAGIC 0x434f525047525453ull /* "STRGPROC" */
#define SR__PROC_VERSION 3u
#define SR__PROC_FD_RING 3
#define SR__PROC_FD_BLOCK 4
#define SR__PROC_FD_XCHG 5 /* the exchange segment of SAVE / LOAD (checkpoints) */
#define SR__PROC_ENV "STEPRING_PROC" /* "<worker index>,<trainer pid>" */
#define SR__PROC_ERR_MAX 4096

enum sr__proc_wstate {
	SR__PW_BOOT = 0,   /* spawned, building its envs */
	SR__PW_READY = 1,  /* waiting for commands */
	SR__PW_FAILED = 2, /* told why in err, then exits */
};

/* One worker's record: written by that worker, except where noted. */
struct sr__proc_wrec {
	/* set by the trainer before the spawn */
	uint32_t first_env, n_envs;
	uint32_t restarts;    /* how many times this worker was restarted */
	uint32_t eps_cap;     /* episode queue entries (power of two) */
	uint64_t off_eps;     /* 2 doubles per entry: return, length */
	int64_t pid;
	uint32_t start_gen;   /* commands up to this one are settled at spawn */
	/* SAVE / LOAD (checkpoints): the trainer sets the worker's area of the
	 * exchange segment before the command (PC0); the worker sets the
	 * result before done_gen (PC1): 0, -ENOBUFS (xchg_len bytes needed),
	 * or -errno with err set. */
	int32_t xchg_status;
	uint64_t xchg_off, xchg_cap;
	uint64_t xchg_len;    /* SAVE: bytes written, or needed */
	uint64_t off_out, out_size; /* its out area (sr_pool_worker_out) */
	_Alignas(SR_CACHELINE) _Atomic uint32_t state;     /* enum sr__proc_wstate */
	_Atomic uint32_t done_gen;  /* PC1: last command finished */
	_Atomic uint32_t sleeping;  /* PC2: in futex_wait(go) */
	_Atomic uint32_t err_len;   /* bytes of err set (release after err) */
	_Atomic uint64_t steps;     /* env steps (resets included) */
	_Atomic uint64_t ns_env;    /* in the env's step / reset */
	_Atomic uint64_t ns_ring;   /* bookkeeping and publishing */
	_Atomic uint64_t ns_idle;   /* waiting for commands */
	_Atomic uint64_t nonfinite; /* rows it flagged SR_SLOT_NONFINITE */
	_Atomic uint32_t checks_finite; /* 1: it checks its own rows (the C env
					 * worker); 0: the trainer checks them */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_head; /* PC3, worker */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_tail; /* PC3, trainer */
	_Alignas(SR_CACHELINE) char err[SR__PROC_ERR_MAX]; /* why it failed */
};

/* A worker's part of a command: its envs and where their rows go. */
struct sr__proc_part {
	uint32_t lo;  /* a range: envs [lo, lo + n) (pool indices); SR__PROC_LIST: a list */
	uint32_t n;   /* envs of this worker in the command (0: none) */
	uint32_t row; /* their rows: slots seq + row .. seq + row + n - 1, in env order */
	uint32_t ids; /* a list: the envs at ids area entries [ids, ids + n) */
};
#define SR__PROC_LIST UINT32_MAX

/* A command record (PC0, PC4): cmd_size bytes, nworkers parts. */
struct sr__proc_crec {
	uint32_t gen;       /* the command's gen */
	uint32_t kind;      /* SR_PROC_CMD_*: a step, a reset; SAVE, LOAD, COMMIT (no rows) */
	uint64_t seq;       /* ring slot of row 0 */
	uint32_t has_mask;  /* reset: the mask bytes are valid */
	uint32_t rows;      /* rows of the command (the parts' n summed) */
	_Atomic uint32_t done_left; /* PC2: worker processes not done with it */
	uint32_t reserved;
	/* a reset of sr_pool_reset_ex (sr_proc_cmd's reset fields; the seeds,
	 * seed mask and payload in their areas); 0 for every other command */
	uint32_t reset_flags;
	uint32_t has_smask;
	uint64_t reset_seed;
	double reset_b[2];
	uint64_t rpay_len;
	struct sr__proc_part part[]; /* nworkers */
};

struct sr__proc_hdr {
	uint64_t magic;
	uint32_t version, hdr_size;
	uint64_t total_size;
	int64_t trainer_pid;
	uint32_t nworkers, num_envs;
	uint32_t obs_dim, act_size;
	uint32_t autoreset, keep_final;
	uint64_t seed;
	uint64_t off_workers, off_actions, off_mask, off_final, off_payload, payload_len;
	uint64_t off_cmds, off_ids;
	uint64_t off_seeds;  /* num_envs uint64: a reset's seeds (SR_RESET_F_SEEDS) */
	uint64_t off_smask;  /* num_envs bytes: its seed mask */
	uint64_t off_rpay;   /* SR_PROC_RESET_PAYLOAD_MAX bytes: its payload */
	uint32_t ncmds, cmd_size; /* command records: a power of two, bytes each */
	uint32_t ids_cap;         /* entries of the ids area */
	uint32_t reserved2;
	/* The env, for C workers: a built-in by name, or a plugin by path;
	 * the scalar fields of the trainer's spec (spin keeps its
	 * parameters there) are copied over what the worker loads. */
	char env_name[64];
	char plugin[1024];
	uint32_t state_size, max_episode_steps;
	uint32_t obs_ndim, obs_shape[SR_ENV_MAX_DIMS];
	uint64_t params[8];
	uint32_t spin_ns;    /* the longest a waiter spins before futex_wait (sr__spin) */
	uint32_t check_finite; /* the finite check is on (SR_POOL_F_CHECK_FINITE) */
	uint64_t env_base;   /* global index of env 0 (seeding: SR_POOL_F_FIRST_ENV) */
	/* The first non-finite row a worker found, as 1 + env | SR__NF_OBS /
	 * SR__NF_REW; 0: none yet (compare-exchange from 0, once). */
	_Atomic uint64_t nf_first;
	uint64_t reserved1[6];
	/* the commands (PC0) */
	_Alignas(SR_CACHELINE) _Atomic uint32_t go; /* futex word: the last command's gen */
	_Atomic uint32_t stop;        /* set before the last bump of go: exit */
	/* completion (PC1, PC2) */
	_Alignas(SR_CACHELINE) _Atomic uint32_t done_evt; /* futex word of the trainer */
	_Atomic uint32_t trainer_sleeping;
};
/* Bytes and offsets of a block. Returns the total size, 0 on overflow. */
size_t sr__proc_layout(struct sr__proc_hdr *h, uint32_t nworkers, uint32_t num_envs,
		       uint32_t obs_dim, uint32_t act_size, size_t payload_len,
		       const uint32_t *slice_n, size_t out_size);

static inline struct sr__proc_wrec *sr__proc_wrec(struct sr__proc_hdr *h, uint32_t w)
{
	return (struct sr__proc_wrec *)((char *)h + h->off_workers) + w;
}

static inline struct sr__proc_crec *sr__proc_crec(struct sr__proc_hdr *h, uint32_t gen)
{
	return (struct sr__proc_crec *)((char *)h + h->off_cmds +
					(size_t)(gen & (h->ncmds - 1)) * h->cmd_size);
}

static inline uint32_t *sr__proc_ids(struct sr__proc_hdr *h)
{
	return (uint32_t *)((char *)h + h->off_ids);
}

/* Gens wrap: a is at or after b. */
static inline bool sr__gen_ge(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

/*
 * Adaptive spinning. A waiter (a worker waiting for the next command, the
 * trainer waiting for the workers) spins before it sleeps only when its
 * recent waits were short: it keeps a moving average of how long it
 * waited, and spins for twice that plus 2 us, but at least a quarter of
 * max_ns and at most max_ns; a waiter whose waits average more than
 * max_ns sleeps at once. On a quiet machine the waits between the
 * commands of a tight loop are microseconds, and spinning saves a futex
 * wake-up (tens of microseconds on a VM) per command; the floor keeps an
 * occasional longer wait (an interrupt, a timer tick on the other party's
 * CPU) from costing a sleep: without it, 2% of the commands of a
 * CartPole loop slept. On a busy machine the waits grow (the other party
 * is off its CPU) and spinning would only take a CPU that it needs: the
 * average grows past max_ns and the waiter sleeps.
 */
struct sr__spin {
	uint64_t avg_ns; /* moving average of the waits (1/8 weight for the newest) */
	uint32_t max_ns; /* 0: never spin */
};
/* How long to spin now. */
static inline uint64_t sr__spin_budget(const struct sr__spin *s)
{
	uint64_t b = 2 * s->avg_ns + 2000;

	if (!s->max_ns || s->avg_ns >= s->max_ns)
		return 0;
	if (b < s->max_ns / 4)
		b = s->max_ns / 4;
	return b < s->max_ns ? b : s->max_ns;
}
/* A wait of @ns ended. */
static inline void sr__spin_note(struct sr__spin *s, uint64_t ns)
{
	s->avg_ns = s->avg_ns - s->avg_ns / 8 + ns / 8;
}


/* --- the trainer's side (proc_trainer.c; checkpoints: proc_ckpt.c) --- */
struct sr__procs;

struct sr__procs_opts {
	uint32_t num_envs, nworkers;
	const uint32_t *slice_n;     /* envs per worker (contiguous slices) */
	const cpu_set_t *cpus;       /* NULL, or the CPUs of each worker process
				      * (nworkers sets; an empty one: not bound) */
	const sr_env_spec *spec;     /* the trainer's spec (C workers: what to load) */
	sr_ring *ring;
	uint64_t seed, env_base;
	uint32_t autoreset, keep_final;
	uint32_t spin_ns;            /* the most a waiter spins (0: it sleeps at once) */
	bool check_finite;           /* C env workers flag their non-finite rows */
	uint32_t step_timeout_ms;    /* 0: none */
	uint32_t max_restarts;       /* per pool */
	const char *const *argv;     /* NULL: the stepring-worker program */
	const void *payload;
	size_t payload_len;
	size_t out_size;             /* each worker's out area (sr_pool_worker_out) */
	bool ragged;                 /* ragged commands will be written (an async pool):
				      * sr__procs_env_mark is there */
	/* Worker 0 inline: its envs are stepped on the calling thread, in this
	 * process, between posting a command and waiting for the processes.
	 * inline_fn NULL: the C env of spec (the same code as stepring-worker). */
	bool inline0;
	sr_proc_inline_fn inline_fn;
	void *inline_arg;
	/* The pool's statistics block by name ("/NAME.stats"), or NULL: with a
	 * named ring, the guard removes it too (sr__proc_guard_main). */
	const char *stats_name;
};

int sr__procs_create(const struct sr__procs_opts *o, struct sr__procs **out);
void sr__procs_destroy(struct sr__procs *P);
/*
 * A sync command on every worker: the rows of env e go to ring slot
 * seq + e (reserved contiguously by the caller). @actions: num_envs
 * actions for a step; @mask: NULL or num_envs bytes for a reset. Posts it
 * and waits for it (sr__procs_wait). Returns what sr__procs_wait returns.
 */
int sr__procs_run(struct sr__procs *P, uint32_t cmd, uint64_t seq, const void *actions,
		  const uint8_t *mask);
/* The next command (sr__procs_begin), if it is a reset, carries @o's
 * seeds, seed mask, payload and (with @b, the parsed SR_RESET_F_OPTIONS)
 * reset options to the workers; any other command drops them. @o was
 * checked by the pool (a sync pool: nothing in flight); NULL forgets what
 * an earlier call set. */
void sr__procs_reset_next(struct sr__procs *P, const sr_pool_reset_opts *o, const double *b);
/*
 * A command in parts (async): sr__procs_begin returns the record of the
 * next command (kind, seq and rows set; the caller fills part[w] for every
 * worker, the actions of its envs in sr__procs_actions, the env lists
 * from sr__procs_ids) after waiting until no worker reads it any more
 * (PC4); the caller's reservation [seq, seq + rows) is left alone by the
 * fault path meanwhile. sr__procs_post publishes it (PC0) and returns its
 * gen. begin returns NULL when the workers failed for good (the error is
 * set, as sr__procs_wait's).
 */
struct sr__proc_crec *sr__procs_begin(struct sr__procs *P, uint32_t kind, uint64_t seq,
				      uint32_t rows, int *err);
uint32_t sr__procs_post(struct sr__procs *P);
/* The action mailbox: num_envs actions, row = env; the reset mask
 * (num_envs bytes, for a record with has_mask). */
void *sr__procs_actions(struct sr__procs *P);
uint8_t *sr__procs_mask(struct sr__procs *P);
/* Ragged commands (sr__procs_opts.ragged): num_envs bytes, all 0, for the
 * caller that builds a command's env lists in env order (it leaves them 0
 * again). */
uint8_t *sr__procs_env_mark(struct sr__procs *P);
/* The last command posted. */
uint32_t sr__procs_gen(const struct sr__procs *P);
/* @n contiguous entries of the ids area for the command being written;
 * *@off: the first one's index (for sr__proc_part.ids). */
uint32_t *sr__procs_ids(struct sr__procs *P, uint32_t n, uint32_t *off);
/*
 * Wait until command @gen is done by every worker (an inline worker 0
 * runs its part of the commands up to @gen first) and its rows are
 * published. A worker that dies or exceeds the step timeout is killed;
 * then every live worker finishes every command posted, the dead one's
 * unpublished rows of each of them are published as fault rows, the slots
 * it reserved and left are published as pads, and it is restarted.
 * Returns 0, or -EOWNERDEAD when the restart budget is spent (the message
 * names the env, the worker and the cause; every later call returns it),
 * or -errno of a failed spawn.
 */
int sr__procs_wait(struct sr__procs *P, uint32_t gen);
/* Wait for what writes ring slot @pos (async recv): its worker, for the
 * command in flight whose rows hold it (an extra slot: the oldest
 * command). Faults as sr__procs_wait. */
int sr__procs_wait_slot(struct sr__procs *P, uint64_t pos);
/* The oldest command some worker has not done, or 0 with none in flight. */
uint32_t sr__procs_oldest(const struct sr__procs *P);
/* The record of command @gen (in flight or the last ncmds ones). */
const struct sr__proc_crec *sr__procs_rec(const struct sr__procs *P, uint32_t gen);
/* Finished episodes since the last call: @fn(arg, return, length). */
void sr__procs_episodes(struct sr__procs *P, void (*fn)(void *, double, double), void *arg);
struct sr__procs_stats {
	uint64_t faults;      /* workers that died or hung */
	uint64_t restarts;    /* workers started again */
	uint64_t fault_rows;  /* rows published as SR_SLOT_FAULT */
	uint64_t pad_rows;    /* a dead worker's extra slots published as pads */
	const char *last_fault; /* "" or the last fault's description */
};
struct sr__procs_wstats {
	int64_t pid;          /* -1 while dead */
	uint32_t restarts;
	uint32_t checks_finite; /* it flags its own non-finite rows */
	uint64_t steps, ns_env, ns_ring, ns_idle;
	uint64_t nonfinite;   /* rows it flagged */
};
void sr__procs_info(const struct sr__procs *P, struct sr__procs_stats *out);
int sr__procs_worker(const struct sr__procs *P, uint32_t w, struct sr__procs_wstats *out);
/* The first non-finite row the workers found (SR__NF_*), or 0. */
uint64_t sr__procs_nonfinite_first(const struct sr__procs *P);
/* Worker 0 runs inline (in this process). */
bool sr__procs_inline(const struct sr__procs *P);
/* Final observations (keep_final): num_envs * obs_dim floats, row = env. */
float *sr__procs_final(struct sr__procs *P);
/* Worker @w's out area and its size (NULL, 0: none). */
void *sr__procs_out(struct sr__procs *P, uint32_t w, size_t *size);

/*
 * Checkpoints of process workers (proc_ckpt.c). A SAVE command has
 * each worker write its slice's env records into its area of the exchange
 * segment (a memfd inherited as fd SR__PROC_FD_XCHG, grown by the trainer
 * while the workers are idle), laid out as include/stepring/proc.h says;
 * LOAD hands records back, which each worker checks and stages, and
 * COMMIT (seq 1) puts the staged records in place or (seq 0) drops them.
 */
struct sr__env_recs;
/* Every env's state record and bookkeeping, in env order, into @out (its
 * arrays are allocated; the records point into the exchange segment and
 * stay valid until the next command). 0, or -errno with the message: a
 * worker that refused (an env that cannot be serialized), or one that died
 * meanwhile (it is restarted: its envs start over; nothing is saved). */
int sr__procs_save(struct sr__procs *P, struct sr__env_recs *out);
/* Put @in in the workers: LOAD everywhere, then COMMIT if every worker
 * staged its records, else drop them (the pool unchanged, except the envs
 * of a worker that died: restarted). @steps: the step count to restore. */
int sr__procs_load(struct sr__procs *P, const struct sr__env_recs *in, uint64_t steps);

/* --- proc_worker.c: the worker's side of the block (stepring/proc.h) --- */
/* The handle of sr_proc_worker_open, or of sr__proc_worker_local. */
struct sr_proc_worker {
	struct sr__proc_hdr *h;
	size_t len;
	struct sr__proc_wrec *rec;
	sr_ring *ring;
	uint32_t index;
	uint32_t last_go;
	pid_t trainer;
	struct sr__spin spin;
	uint64_t idle_t0; /* when it last started waiting */
	uint64_t busy_t0; /* when the command in hand arrived */
	bool local;       /* the inline slice: block and ring are the trainer's */
	/* The exchange segment of SAVE / LOAD: its descriptor (the trainer's
	 * for a local handle, not owned), mapped at the size it had then. */
	int xfd;
	uint8_t *xmap;
	size_t xlen;
	struct sr__eps_q eps; /* its record's episode queue (PC3), as its producer */
};

/* --- proc_worker.c: a worker handle in this process (the inline slice) --- */
/* Command @gen as worker @idx sees it (after PC0's acquire). */
void sr__proc_cmd_of(struct sr__proc_hdr *h, uint32_t idx, uint32_t gen, sr_proc_cmd *cmd);
/* A handle on record @idx of the block @h (mapped by the caller) and @ring,
 * with @info filled; close it with sr_proc_worker_close (unmaps nothing). */
int sr__proc_worker_local(struct sr__proc_hdr *h, sr_ring *ring, uint32_t idx,
			  sr_proc_worker **out, sr_proc_info *info);
/* The exchange segment of a local handle: the trainer's memfd (not owned). */
void sr__proc_worker_local_xchg(sr_proc_worker *w, int fd);
/* Run @fn on @cmd as the inline worker: its counters (all of the call is
 * ns_env), then done_gen = cmd->gen. Returns what @fn returned. */
int sr__proc_worker_local_run(sr_proc_worker *w, sr_proc_inline_fn fn, void *arg,
			      const sr_proc_info *info, const sr_proc_cmd *cmd);
/* The C env worker on a handle: @spec is this process's (a local handle) or
 * NULL (load it as the block names it). */
struct sr__cworker;
int sr__cworker_open(sr_proc_worker *w, const sr_proc_info *info, const sr_env_spec *spec,
		     struct sr__cworker **out);
/* An sr_pool_inline_fn: @arg is the struct sr__cworker. */
int sr__cworker_run(void *arg, sr_proc_worker *w, const sr_proc_info *info,
		    const sr_proc_cmd *cmd);
void sr__cworker_close(struct sr__cworker *c);

/* The guard of a pool with a named ring (`stepring-worker --guard`, spawned
 * by sr__procs_create): waits until the trainer's end of a pipe (fd 3)
 * closes, then removes the named segments it was given that are still the
 * pool's (same inode) and that no live process holds (the creator lock),
 * so that a trainer killed outright leaves no named shared memory behind.
 * argv: --guard NAME DEV INO [NAME DEV INO]. */
int sr__proc_guard_main(int argc, char **argv);
/* The C env worker's main (proc_worker.c): the stepring-worker program
 * without --guard. */
int sr__proc_c_main(void);

#endif
