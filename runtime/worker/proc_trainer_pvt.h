/*
 * The trainer's state of a process pool (struct sr__procs): for the
 * trainer's files only (proc_trainer.c: commands, waits, faults, create
 * and destroy; proc_spawn.c: spawning; proc_ckpt.c: checkpoints). Everyone
 * else goes through proc_internal.h's functions.
 */
#ifndef SR_PROC_TRAINER_PVT_H
#define SR_PROC_TRAINER_PVT_H

#include <sys/types.h>

#include "proc_internal.h"

struct sr__procs {
	struct sr__proc_hdr *h;
	size_t len;
	int fd;
	sr_ring *ring;
	uint32_t nworkers, num_envs, act_size, obs_dim;
	uint32_t gen;         /* the last command posted */
	uint64_t posted;      /* commands posted (gen without the wrap) */
	uint64_t ids_w;       /* the next entry of the ids area (free-running) */
	uint64_t pend_lo, pend_hi; /* the reservation of the command being written:
				    * fill_gaps leaves it alone */
	/* The next command's reset flags and values (sr__procs_reset_next). */
	uint32_t reset_next, rn_smask;
	uint64_t rn_seed, rn_pay;
	double rn_b[2];
	struct sr__spin spin; /* the trainer's waits for the workers */
	uint32_t step_timeout_ms, max_restarts;
	uint64_t restarts, faults, fault_rows, pad_rows;
	pid_t *pid;
	cpu_set_t *cpus;   /* NULL, or each worker process's CPUs (empty: not bound) */
	uint64_t *ready_at; /* when a restarted worker was first seen ready (its
			     * step timeout counts from then, not from its boot) */
	char **argv;       /* owned copy */
	char *exe;         /* argv[0] resolved */
	int broken;        /* the budget is spent: every command returns it */
	bool *dead;        /* nworkers: found dead, not settled yet */
	int *dead_st;      /* ... its wait status */
	bool *dead_hung;   /* ... killed by us for the step timeout */
	bool gaps;         /* an inline fault: fill_gaps once everything is settled */
	char last_fault[1024];
	/* Worker 0 inline (sr__procs_opts.inline0): its handle on record 0,
	 * its slice, the function that steps it, and the C env worker when
	 * that function is ours. first: the first worker that is a process. */
	uint32_t first;
	sr_proc_worker *lw;
	sr_proc_info linfo;
	sr_proc_inline_fn ifn;
	void *iarg;
	struct sr__cworker *cw;
	/* The guard of a named ring (sr__proc_guard_main): its pid and our
	 * end of its pipe, closed at destroy or by the kernel when we die. */
	pid_t guard;
	int guard_fd;
	/* Checkpoints (the end of this file): the exchange segment (a memfd
	 * every worker inherits), this process's mapping of it, and each
	 * worker's area size of the last SAVE. */
	int xfd;
	uint8_t *xmap;
	size_t xlen;
	uint64_t *xcap;
	/* Ragged sends (sr__procs_opts.ragged): a byte per env, zero between
	 * uses (sr__procs_env_mark). */
	uint8_t *mark;
};

/* proc_spawn.c. The worker program's path into *@out (malloc'ed): 0 or
 * -errno (message set). */
int sr__procs_find_worker(char **out);
/* Spawn worker @w (its record set up): 0 or -errno (message set). */
int sr__procs_spawn(struct sr__procs *P, uint32_t w);
/* The guard of a named ring (and of the stats block @stats_name, or
 * NULL), if the ring has a name. */
void sr__procs_spawn_guard(struct sr__procs *P, const char *stats_name);

#endif
