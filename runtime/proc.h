/*
 * Process workers: the shared command block (runtime/proc.c is the
 * trainer's side, runtime/proc_worker.c the worker's side).
 *
 * One memfd segment per pool, inherited by every worker process (fd
 * SR__PROC_FD_BLOCK; the ring is SR__PROC_FD_RING): a header with the
 * pool's geometry and the command, one record per worker, the actions and
 * the reset mask of the current command, and an optional payload (bytes
 * the trainer hands every worker at spawn, e.g. pickled env factories).
 * Offsets, never pointers, inside it. memfd: no name in /dev/shm, so
 * nothing is left behind when every process holding it is gone.
 *
 * Memory ordering (named in the code as PC0..PC3):
 *  PC0 command: the trainer writes cmd, seq, gen_cmd, actions and mask,
 *      then stores go = gen (release); a worker loads go (acquire) and
 *      then reads them.
 *  PC1 done: a worker publishes its rows (the ring's R1), then stores
 *      done_gen = gen (release); the trainer loads done_gen (acquire)
 *      and then reads the rows and the worker's counters.
 *  PC2 sleep: waker stores the word (go or done_evt) seq_cst, then loads
 *      the sleeper's flag seq_cst; sleeper stores its flag seq_cst, then
 *      reloads the word seq_cst before futex_wait (Dekker, as the threads
 *      do); futex_wait rechecks the word in the kernel.
 *  PC3 episodes: a worker writes an entry, then stores eps_head (release);
 *      the trainer loads eps_head (acquire), reads the entries, stores
 *      eps_tail (release); the worker loads eps_tail (acquire) before it
 *      reuses entries.
 */
#ifndef SR_PROC_H
#define SR_PROC_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "internal.h"
#include "stepring/env.h"
#include "stepring/proc.h"
#include "stepring/ring.h"

#define SR__PROC_MAGIC 0x434f525047525453ull /* "STRGPROC" */
#define SR__PROC_VERSION 1u
#define SR__PROC_FD_RING 3
#define SR__PROC_FD_BLOCK 4
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
	uint32_t reserved1;
	uint64_t reserved0[3];
	_Alignas(SR_CACHELINE) _Atomic uint32_t state;     /* enum sr__proc_wstate */
	_Atomic uint32_t done_gen;  /* PC1: last command finished */
	_Atomic uint32_t sleeping;  /* PC2: in futex_wait(go) */
	_Atomic uint32_t err_len;   /* bytes of err set (release after err) */
	_Atomic uint64_t steps;     /* env steps (resets included) */
	_Atomic uint64_t ns_env;    /* in the env's step / reset */
	_Atomic uint64_t ns_ring;   /* bookkeeping and publishing */
	_Atomic uint64_t ns_idle;   /* waiting for commands */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_head; /* PC3, worker */
	_Alignas(SR_CACHELINE) _Atomic uint32_t eps_tail; /* PC3, trainer */
	_Alignas(SR_CACHELINE) char err[SR__PROC_ERR_MAX]; /* why it failed */
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
	/* The env, for C workers: a built-in by name, or a plugin by path;
	 * the scalar fields of the trainer's spec (spin keeps its
	 * parameters there) are copied over what the worker loads. */
	char env_name[64];
	char plugin[1024];
	uint32_t state_size, max_episode_steps;
	uint32_t obs_ndim, obs_shape[SR_ENV_MAX_DIMS];
	uint64_t params[8];
	uint32_t spin_ns;    /* the longest a waiter spins before futex_wait (sr__spin) */
	uint32_t reserved0;
	uint64_t env_base;   /* global index of env 0 (seeding: SR_POOL_F_FIRST_ENV) */
	uint64_t reserved1[7];
	/* the command (PC0) */
	_Alignas(SR_CACHELINE) _Atomic uint32_t go; /* futex word: the command's gen */
	uint32_t cmd;                 /* SR_PROC_CMD_* */
	uint64_t seq;                 /* ring sequence of env 0's row */
	uint32_t has_mask;            /* reset: mask bytes are valid */
	/* completion (PC1, PC2) */
	_Alignas(SR_CACHELINE) _Atomic uint32_t done_evt; /* futex word of the trainer */
	_Atomic uint32_t trainer_sleeping;
	_Atomic uint32_t done_left; /* PC2: worker processes not done with the command;
				     * the one that takes it to 0 bumps done_evt */
};

/* Bytes and offsets of a block. Returns the total size, 0 on overflow. */
size_t sr__proc_layout(struct sr__proc_hdr *h, uint32_t nworkers, uint32_t num_envs,
		       uint32_t obs_dim, uint32_t act_size, size_t payload_len,
		       const uint32_t *slice_n);

static inline struct sr__proc_wrec *sr__proc_wrec(struct sr__proc_hdr *h, uint32_t w)
{
	return (struct sr__proc_wrec *)((char *)h + h->off_workers) + w;
}

/*
 * Adaptive spinning. A waiter (a worker waiting for the next command, the
 * trainer waiting for the workers) spins before it sleeps only when its
 * recent waits were short: it keeps a moving average of how long it
 * waited, and spins for up to twice that (plus 2 us), at most max_ns; a
 * waiter whose waits are longer than max_ns sleeps at once. On a quiet
 * machine the waits between the commands of a tight loop are microseconds,
 * and spinning saves a futex wake-up (tens of microseconds on a VM) per
 * command; on a busy one the waits grow (the other party is off its CPU)
 * and spinning would only take a CPU that it needs: the average grows past
 * max_ns and the waiter sleeps.
 */
struct sr__spin {
	uint64_t avg_ns; /* moving average of the waits (1/8 weight for the newest) */
	uint32_t max_ns; /* 0: never spin */
};
/* How long to spin now. */
static inline uint64_t sr__spin_budget(const struct sr__spin *s)
{
	if (!s->max_ns || s->avg_ns >= s->max_ns)
		return 0;
	return 2 * s->avg_ns + 2000 < s->max_ns ? 2 * s->avg_ns + 2000 : s->max_ns;
}
/* A wait of @ns ended. */
static inline void sr__spin_note(struct sr__spin *s, uint64_t ns)
{
	s->avg_ns = s->avg_ns - s->avg_ns / 8 + ns / 8;
}

/* futex on shared memory (not _PRIVATE: other processes wait on it). */
int sr__sfutex_wait(_Atomic uint32_t *addr, uint32_t val, uint32_t timeout_ms);
void sr__sfutex_wake(_Atomic uint32_t *addr, int n);

/* --- proc.c: the trainer's side --- */
struct sr__procs;

struct sr__procs_opts {
	uint32_t num_envs, nworkers;
	const uint32_t *slice_n;     /* envs per worker (contiguous slices) */
	const sr_env_spec *spec;     /* the trainer's spec (C workers: what to load) */
	sr_ring *ring;
	uint64_t seed, env_base;
	uint32_t autoreset, keep_final;
	uint32_t spin_ns;            /* the most a waiter spins (0: it sleeps at once) */
	uint32_t step_timeout_ms;    /* 0: none */
	uint32_t max_restarts;       /* per pool */
	const char *const *argv;     /* NULL: the stepring-worker program */
	const void *payload;
	size_t payload_len;
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
 * Run a command on every worker: the rows of env e go to ring slot
 * seq + e (reserved contiguously by the caller). @actions: num_envs
 * actions for a step; @mask: NULL or num_envs bytes for a reset. Waits for
 * all workers; a worker that dies or exceeds the step timeout is killed,
 * its unpublished rows are published as fault rows and it is restarted.
 * Returns 0, or -EOWNERDEAD when the restart budget is spent (the message
 * names the env, the worker and the cause), or -errno of a failed spawn.
 */
int sr__procs_run(struct sr__procs *P, uint32_t cmd, uint64_t seq, const void *actions,
		  const uint8_t *mask);
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
	uint64_t steps, ns_env, ns_ring, ns_idle;
};
void sr__procs_info(const struct sr__procs *P, struct sr__procs_stats *out);
int sr__procs_worker(const struct sr__procs *P, uint32_t w, struct sr__procs_wstats *out);
/* Worker 0 runs inline (in this process). */
bool sr__procs_inline(const struct sr__procs *P);
/* Final observations (keep_final): num_envs * obs_dim floats, row = env. */
float *sr__procs_final(struct sr__procs *P);

/* --- proc_worker.c: a worker handle in this process (the inline slice) --- */
/* A handle on record @idx of the block @h (mapped by the caller) and @ring,
 * with @info filled; close it with sr_proc_worker_close (unmaps nothing). */
int sr__proc_worker_local(struct sr__proc_hdr *h, sr_ring *ring, uint32_t idx,
			  sr_proc_worker **out, sr_proc_info *info);
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

#endif
