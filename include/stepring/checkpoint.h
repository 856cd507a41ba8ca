/*
 * stepring checkpoints: persist a running pool in the background and resume
 * it bit-exactly, in this process or another one.
 *
 * A checkpoint file is a header (magic, format version, build info), a list
 * of sections (pool options, env states with their RNGs, episode counters,
 * statistics, optionally the replay window), each with a CRC32C, and a
 * trailer written last that lists the sections. It is written to a
 * temporary file in the target's directory, fsynced, renamed over the
 * target and the directory is fsynced: a crash at any point leaves either
 * the previous checkpoint or the new one, never a mix. See docs/checkpoint.md.
 *
 * sr_pool_checkpoint() snapshots the pool at a step boundary (env states
 * are copied; the replay window is persisted straight from the ring while
 * the pool keeps stepping) and returns; a background thread writes the
 * file. One checkpoint per pool is in flight at a time.
 *
 * Thread safety: the sr_pool_checkpoint* and sr_pool_restore calls belong
 * to the thread that drives the pool (like sr_pool_step).
 * sr_checkpoint_verify() may be called from any thread.
 */
#ifndef STEPRING_CHECKPOINT_H
#define STEPRING_CHECKPOINT_H

#include "stepring/common.h"
#include "stepring/pool.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checkpoint file format version (independent of the library version). */
#define SR_CKPT_FORMAT_VERSION 1u
#define SR_CKPT_MAX_SECTIONS 32

/* How the background writer persists the bytes. */
enum sr_ckpt_backend {
	SR_CKPT_BACKEND_AUTO = 0,   /* io_uring when available, else pwrite */
	SR_CKPT_BACKEND_URING = 1,  /* io_uring: registered buffers, write -> fsync linked */
	SR_CKPT_BACKEND_PWRITE = 2, /* a thread with pwrite + fsync */
	SR_CKPT_BACKEND_SYNC = 3,   /* pwrite in the caller's thread: returns when durable */
};

/* sr_ckpt_opts.flags */
enum {
	SR_CKPT_F_BACKEND = 1u << 0, /* backend is set (default AUTO) */
	SR_CKPT_F_REPLAY = 1u << 1,  /* include the replay window (ring columns, priorities) */
	SR_CKPT_F_NOWAIT = 1u << 2,  /* a checkpoint in flight: -EBUSY instead of waiting */
	SR_CKPT_F_DIRECT = 1u << 3,  /* O_DIRECT for every backend (the io_uring backend uses
				      * it by default; buffered where the fs refuses it) */
	SR_CKPT_F_CHUNK = 1u << 4,   /* chunk_size is set (default 4 MiB) */
	SR_CKPT_F_NICE = 1u << 5,    /* nice is set (default: 0 when the writer can run on
				      * CPUs no worker is bound to, else 10) */
	SR_CKPT_F_BUFFERED = 1u << 7,/* io_uring backend: buffered writes instead of O_DIRECT */
	SR_CKPT_F_NO_STAGE = 1u << 6,/* replay: write straight from the ring, no staging copy
				      * (no extra memory; slots the producers lap while the
				      * file is written are dropped, see docs/checkpoint.md) */
};

typedef struct sr_ckpt_opts {
	uint32_t flags;   /* SR_CKPT_F_* */
	uint32_t backend; /* enum sr_ckpt_backend, with SR_CKPT_F_BACKEND */
	uint64_t chunk_size; /* bytes per write (multiple of 4096, >= 64 KiB), with SR_CKPT_F_CHUNK */
	int32_t nice;     /* nice value of the writer thread, with SR_CKPT_F_NICE */
	uint32_t reserved0;
} sr_ckpt_opts;

/** Defaults: AUTO backend, no replay window, wait for a checkpoint in flight. */
SR_EXPORT void sr_ckpt_opts_init(sr_ckpt_opts *o);

/** Name of a backend ("auto", "uring", "pwrite", "sync"), "?" if unknown. */
SR_EXPORT const char *sr_ckpt_backend_name(uint32_t backend);

/* sr_ckpt_status.state; also the ckpt_state of the live statistics block
 * (stepring/stats.h). */
enum {
	SR_CKPT_STATE_IDLE = 0,     /* none in flight */
	SR_CKPT_STATE_SNAPSHOT = 1, /* the step loop is held while the pool is copied */
	SR_CKPT_STATE_WRITING = 2,  /* the background writer is writing the file */
	SR_CKPT_STATE_FAILED = 3,   /* the last one failed (sr_pool_checkpoint_poll says why) */
};

typedef struct sr_ckpt_status {
	uint32_t state;       /* SR_CKPT_STATE_* */
	uint32_t backend;     /* the backend actually used (after any fallback) */
	int32_t result;       /* 0 or -errno of the last finished checkpoint */
	uint32_t reserved0;
	uint64_t count;       /* checkpoints completed by this pool */
	uint64_t bytes;       /* size of the file of the last checkpoint */
	uint64_t ns_snapshot; /* time the step loop was held for the snapshot */
	uint64_t ns_write;    /* background time: first write to directory fsync */
	uint64_t replay_slots;   /* replay slots saved */
	uint64_t replay_dropped; /* slots lapped by the producers while being saved */
} sr_ckpt_status;

/**
 * Start a checkpoint of @p into @path (the file is replaced atomically).
 * Call between steps (sync: after sr_pool_step returned; async: when every
 * env has been received, i.e. no step is in flight, else -EBUSY).
 * The snapshot happens here; the writing happens in a background thread
 * (AUTO, URING, PWRITE) or before returning (SYNC). @opts may be NULL.
 *
 * If a checkpoint is still in flight, waits for it (and then starts), or
 * returns -EBUSY with SR_CKPT_F_NOWAIT. A failure of the previous one is
 * reported by sr_pool_checkpoint_wait/poll, not here.
 *
 * Returns 0, -EBUSY, -EINVAL (bad options, unknown flags), -ENOMEM,
 * -ENOENT/-EACCES (the directory cannot be written), -ENOSPC/-EIO (SYNC:
 * write errors); the reason is in sr_last_error(). When io_uring is refused
 * (EPERM, ENOSYS, io_uring_disabled) the writer falls back to the pwrite
 * thread, says so once on stderr and in status.backend.
 */
SR_EXPORT int sr_pool_checkpoint(sr_pool *p, const char *path, const sr_ckpt_opts *opts);

/**
 * Is the checkpoint done? Returns 0 (idle: the last one finished well, or
 * none was started), -EINPROGRESS (still writing), or the -errno of a
 * failed one (reported once; sr_last_error() says why; the previous file
 * at the path is intact). @st (may be NULL) gets the status.
 */
SR_EXPORT int sr_pool_checkpoint_poll(sr_pool *p, sr_ckpt_status *st);
/** Wait for the checkpoint in flight; returns like sr_pool_checkpoint_poll
 * but never -EINPROGRESS. */
SR_EXPORT int sr_pool_checkpoint_wait(sr_pool *p, sr_ckpt_status *st);

/**
 * Restore @p from @path: verifies magic, format version, geometry (env id,
 * num_envs, obs and action sizes, state size, batch size) and every section
 * CRC before changing anything; then sets env states, episode counters,
 * statistics and, if saved and the ring is large enough, the replay window.
 * The next sr_pool_step continues the saved trajectories bit-exactly.
 * Waits for a checkpoint in flight first.
 *
 * Returns 0, -ENOENT (no file), -EBADMSG (corrupt or truncated: the message
 * names the section), -EPROTO (other format version), -EINVAL (geometry
 * mismatch: the message names the field and both values), -EBUSY (async
 * steps in flight), -ENOMEM (also: no memory to stage the replay window),
 * -EIO (a read failed). On any error the pool is untouched: the file is
 * opened once, verified and read through that descriptor, every section is
 * read into memory (the replay window into a staging area as large as its
 * section) and its CRC32C re-checked over the bytes read, all before the
 * pool changes; -EBADMSG "changed since it was verified" means the file was
 * rewritten in place meanwhile.
 */
SR_EXPORT int sr_pool_restore(sr_pool *p, const char *path);

/**
 * Re-shard: restore the envs this pool and the checkpoint at @path share.
 * Envs are known by their global index (SR_POOL_F_FIRST_ENV; 0 for an
 * ordinary pool): the file holds envs [F, F + n) of some run, this pool
 * [first_env, first_env + num_envs); each env in both gets its saved state
 * (its RNG inside), elapsed steps, done flags and episode accumulators,
 * and continues its trajectory bit-exactly. The others are untouched, as
 * are the ring (each restored env's next slot starts a chain: no prev) and
 * the statistics, so a run saved as N parts is restored on M pools by
 * calling this once per overlapping part (stepring/mpi.h does that).
 * Opaque envs (ABI v2, e.g. Box2D) work too: each shared env's saved
 * record is loaded into a new instance before the pool changes.
 * Checks the env, its parameters and sizes, autoreset and seed, and every
 * CRC, before changing anything. Returns the number of envs restored
 * (0: no overlap), or -errno as sr_pool_restore.
 */
SR_EXPORT int sr_pool_restore_envs(sr_pool *p, const char *path);

/* What sr_checkpoint_verify() learns about a file. */
typedef struct sr_ckpt_section_info {
	uint32_t type;   /* SR_CKPT_SECT_* */
	uint32_t crc;    /* CRC32C of the payload */
	uint64_t offset; /* in the file */
	uint64_t length; /* payload bytes */
} sr_ckpt_section_info;

/* Section types. */
enum {
	SR_CKPT_SECT_POOL = 1,        /* options and geometry */
	SR_CKPT_SECT_ENV_STATES = 2,  /* num_envs * state_size bytes (the pool section's
				       * state_size: for opaque envs 8 + save_max rounded
				       * up to 8, a length and what save() wrote) */
	SR_CKPT_SECT_ENV_COUNTERS = 3,/* per env: elapsed steps, return, length */
	SR_CKPT_SECT_STATS = 4,       /* pool statistics */
	SR_CKPT_SECT_RUNTIME = 5,     /* the runtime's own state (pending obs, RNG) */
	SR_CKPT_SECT_REPLAY = 6,      /* ring columns of the replay window */
	SR_CKPT_SECT_REPLAY_META = 7, /* head, cursor, first valid sequence */
	SR_CKPT_SECT_PRIORITIES = 8,  /* sampler priorities */
	SR_CKPT_SECT_USER = 64,       /* raw sections (tests, tools) */
};

typedef struct sr_ckpt_info {
	uint32_t format_version;
	uint32_t n_sections;
	uint64_t file_size;
	uint64_t created_unix_ns;
	char build_info[160];
	/* From the pool section, when present (else env_id is ""). */
	char env_id[64];
	uint32_t num_envs, batch_size, obs_dim, act_size, state_size, autoreset;
	uint64_t seed;
	uint64_t steps;         /* env steps done when saved */
	uint64_t replay_slots;  /* 0 without a replay window */
	uint64_t replay_head;
	sr_ckpt_section_info sections[SR_CKPT_MAX_SECTIONS];
} sr_ckpt_info;

/**
 * Check a checkpoint file: header, trailer, every section's bounds and
 * CRC32C, and the pool section's consistency. @info (may be NULL) gets
 * what the file says. Returns 0, -ENOENT, -EBADMSG (corrupt, truncated,
 * not a checkpoint: the message says where), -EPROTO (format version),
 * -EIO. Thread safe.
 */
SR_EXPORT int sr_checkpoint_verify(const char *path, sr_ckpt_info *info);

/* sr_checkpoint_clean() flags. */
enum {
	SR_CKPT_CLEAN_REMOVE = 1u << 0, /* remove them (else only report them) */
};

/* Called by sr_checkpoint_clean() for each stale temporary: its path, the
 * pid in its name, its size in bytes. */
typedef void (*sr_ckpt_stale_fn)(void *ctx, const char *tmp_path, long pid, uint64_t bytes);

/**
 * Find the temporary files that checkpoint writers killed in the middle of
 * a write (SIGKILL, power loss of the process) left next to @path: the
 * hidden ".NAME.tmp.PID.N" files of the same target whose PID is no longer
 * running (kill(PID, 0) fails with ESRCH). A temporary of a live process,
 * this one included, is never touched; nor is any other file. With
 * SR_CKPT_CLEAN_REMOVE they are unlinked. sr_pool_checkpoint() does this
 * (with REMOVE) each time it starts a checkpoint to a target.
 *
 * The PID is the writer's in its own PID namespace: run the clean-up where
 * the writers run. A reused PID makes a stale file look live (it is kept).
 *
 * @path: the checkpoint file (it need not exist); @flags: SR_CKPT_CLEAN_*;
 * @fn (may be NULL): called for each stale temporary, before it is removed.
 * Returns the number of stale temporaries found (removed with REMOVE), or
 * -EINVAL (NULL path, path naming a directory, unknown flags), -ENOENT /
 * -EACCES (the directory cannot be read), or the -errno of a failed unlink.
 * Thread safe.
 */
SR_EXPORT int sr_checkpoint_clean(const char *path, unsigned flags, sr_ckpt_stale_fn fn,
				  void *ctx);

#ifdef __cplusplus
}
#endif
#endif
