/* Checkpoint internals (runtime/ckpt/): the file format and loader
 * (ckpt_file.c), the writer job (ckpt_job.c) and its backends
 * (ckpt_uring.c, ckpt_nouring.c, ckpt_pwrite.c); used by the pool's
 * snapshot and restore (runtime/pool/), the process workers' SAVE and
 * LOAD (runtime/worker/) and the MPI manifests (runtime/mpi/). */
#ifndef SR_CKPT_INTERNAL_H
#define SR_CKPT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stepring/checkpoint.h"

/* ---- on-disk format (little endian, every block 4096-aligned) ---------- */

#define SR_CKPT_ALIGN 4096u
#define SR_CKPT_MAGIC "STEPCKPT"    /* header, 8 bytes */
#define SR_CKPT_END_MAGIC "STEPCEND" /* footer, 8 bytes */
#define SR_CKPT_DEFAULT_CHUNK (4u << 20)
#define SR_CKPT_NBUF 4 /* staging buffers (io_uring: registered) */

struct sr__ckpt_header {
	char magic[8];
	uint32_t format_version;
	uint32_t header_size;     /* SR_CKPT_ALIGN */
	uint64_t created_unix_ns;
	uint32_t flags;
	uint32_t endian;          /* 0x01020304 as written */
	char build_info[160];
	uint32_t reserved[7];
	uint32_t crc;             /* CRC32C of the bytes above */
};

struct sr__ckpt_entry {
	uint32_t type;
	uint32_t crc;    /* of the payload bytes */
	uint64_t offset; /* 4096-aligned */
	uint64_t length; /* payload bytes (the block is zero-padded) */
	uint64_t reserved;
};

/* The last 64 bytes of the file; the table sits at the start of the
 * trailer block, which is the last SR_CKPT_ALIGN bytes. */
struct sr__ckpt_footer {
	char magic[8];
	uint32_t format_version;
	uint32_t n_sections;
	uint64_t file_size;
	uint64_t trailer_offset;
	uint32_t table_crc;
	uint32_t reserved[5];
	uint32_t pad;
	uint32_t crc;    /* CRC32C of the bytes above */
};

_Static_assert(sizeof(struct sr__ckpt_header) <= SR_CKPT_ALIGN, "header fits its block");
_Static_assert(sizeof(struct sr__ckpt_footer) == 64, "footer is 64 bytes");
_Static_assert(SR_CKPT_MAX_SECTIONS * sizeof(struct sr__ckpt_entry) + 64 <= SR_CKPT_ALIGN,
	       "trailer fits its block");

/* Pool section payload (SR_CKPT_SECT_POOL). */
struct sr__ckpt_pool_sect {
	char env_id[64];
	uint32_t num_envs, batch_size, num_threads, autoreset;
	uint32_t obs_dim, act_size, state_size, act_kind;
	uint32_t pool_flags, max_episode_steps;
	uint64_t seed;
	uint64_t steps;
	uint64_t ring_capacity;
	uint64_t first_env; /* global index of env 0 (SR_POOL_F_FIRST_ENV), else 0 */
	uint64_t reserved[7];
};

/* One env's bookkeeping in the env_counters section (fixed layout,
 * independent of struct padding): what thread workers keep per env, and
 * what process workers hand over at a checkpoint's SAVE (proc_internal.h). */
struct sr__ckpt_env_rec {
	uint64_t prev_seq; /* ring sequence of its last slot, or SR_RING_NO_PREV */
	uint64_t ep_len;   /* length of the episode so far */
	double ep_ret;     /* its return so far */
	uint32_t elapsed;  /* steps since its reset (TimeLimit) */
	uint8_t done, term, trunc, pad0; /* its last step ended the episode (by ...) */
};

/* Every env's saved state and bookkeeping, in env order, as the workers
 * of a process pool hand them over (proc_ckpt.c sr__procs_save / _load). */
struct sr__env_recs {
	uint32_t n;
	struct sr__ckpt_env_rec *env; /* n */
	const uint8_t **rec;          /* n: env e's state bytes */
	uint64_t *len;                /* n: their lengths */
};
/* Allocate the arrays for @n envs (zeroed) / free them. */
int sr__env_recs_alloc(struct sr__env_recs *r, uint32_t n);
void sr__env_recs_free(struct sr__env_recs *r);

/* Replay meta section (SR_CKPT_SECT_REPLAY_META). The replay section holds
 * the slots of sequences [first_seq, head) as chunks: for each chunk, all
 * columns (obs, action, reward, terminated, truncated, flags, env_id,
 * prev) of its slots, one after the other. */
struct sr__ckpt_replay_meta {
	uint64_t capacity;
	uint64_t head;       /* next sequence to reserve at the snapshot */
	uint64_t cursor;     /* consumer cursor at the snapshot */
	uint64_t first_seq;  /* first sequence stored in the replay section */
	uint64_t first_valid;/* slots below were lapped while saved: discard */
	uint64_t chunk_slots;/* slots per block (the last one may be shorter) */
	uint64_t block_bytes;/* bytes between blocks (>= chunk_slots * slot bytes) */
	uint32_t obs_dim, act_size;
	uint64_t reserved[3];
};

/* ---- CRC32C -------------------------------------------------------------- */

/* CRC32C (Castagnoli) of @len bytes, continuing @crc (0 to start). Uses
 * SSE4.2 when the CPU has it, else slicing-by-8. */
/* Bytes of one replay slot as saved: obs, action, reward, terminated,
 * truncated, flags, env_id, prev. */
static inline uint64_t sr__ckpt_slot_bytes(uint32_t obs_dim, uint32_t act_size)
{
	return (uint64_t)obs_dim * 4 + act_size + 4 + 1 + 1 + 1 + 4 + 8;
}

/* Fixed sizes of the pool's sections (pool/snapshot_pvt.h checks them)
 * and the bounds a pool section must keep. */
#define SR__CKPT_ENV_REC_SIZE 32
#define SR__CKPT_STATS_SIZE (24 + 2 * 8 * 100 + 64)
#define SR__CKPT_RUNTIME_SIZE (16 + 64 + 64)
#define SR__CKPT_MAX_ENVS (1u << 24)

/* 0 when a replay_meta section is consistent in itself and with a replay
 * section of @replay_len bytes (overflow-checked), else -EBADMSG. */
/* Name of a section type ("pool", "env_states", ...), for messages. */
const char *sr__ckpt_section_name(uint32_t type);
int sr__ckpt_check_replay_meta(const struct sr__ckpt_replay_meta *m, uint64_t replay_len);

uint32_t sr__crc32c(uint32_t crc, const void *buf, size_t len);
/* The table implementation (tests compare both). */
uint32_t sr__crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* ---- writer -------------------------------------------------------------- */

/* A section to write: either @data (len bytes) or a fill callback that
 * produces bytes [off, off + n) of the section into dst, called in
 * increasing offset order, in the writer thread. Returns 0 or -errno. */
struct sr__ckpt_src {
	uint32_t type;
	uint64_t len;
	const void *data;
	int (*fill)(void *ctx, void *dst, uint64_t off, size_t n);
	void *ctx;
	/* Optional, with fill: bytes [off, off + n) already sit in stable,
	 * 4096-aligned memory? Return them (the writer writes from there, no
	 * copy; n is then a multiple of 4096), or NULL to use fill. */
	const void *(*map)(void *ctx, uint64_t off, size_t n);
};

/* Fault injection for tests: fail the write that covers file offset
 * >= at with -err (once armed, in every backend). at = UINT64_MAX: off. */
extern _Atomic uint64_t sr__ckpt_fault_at;
extern _Atomic int sr__ckpt_fault_err;
/* Sleep this many microseconds after each chunk (tests: SIGKILL window). */
extern _Atomic uint32_t sr__ckpt_chunk_delay_us;
/* Tests: called by sr__ckpt_read() after each read with the bytes read and
 * their file offset; may change them (a file rewritten in place) or return
 * -errno (a failed read). NULL: off. Set while no checkpoint is read. */
extern int (*sr__ckpt_read_hook)(void *buf, size_t len, uint64_t off);

struct sr__ckpt_job;
typedef struct sr__ckpt_job sr__ckpt_job;

/* Create a job writing @n sources to @path with @backend. The sources
 * (and what they point to) must stay valid until the job is done; the
 * array itself is copied. Opens the temporary file here, so that a bad
 * directory fails at once. */
int sr__ckpt_job_create(const char *path, const struct sr__ckpt_src *srcs, uint32_t n,
			uint32_t backend, const sr_ckpt_opts *opts, sr__ckpt_job **out);
/* Keep the writer thread (and io_uring's workers) off the CPUs the pool's
 * workers are bound to: @cpus is where it may run (NULL: anywhere). */
void sr__ckpt_job_set_cpus(sr__ckpt_job *j, const void *cpuset, size_t size);
/* Where the writer may run, or NULL (ckpt_job.c; ckpt_uring.c applies it
 * to io_uring's worker threads). */
const void *sr__ckpt_job_cpus(const sr__ckpt_job *j, size_t *size);
/* Nice value of the writer thread (background backends). */
void sr__ckpt_job_set_nice(sr__ckpt_job *j, int nice);
/* Call @fn(@ctx) in the writer thread before the first write (a failure
 * fails the job). */
void sr__ckpt_job_set_prepare(sr__ckpt_job *j, int (*fn)(void *ctx), void *ctx);
/* Run it: SYNC runs here and returns the result; others start a thread. */
int sr__ckpt_job_start(sr__ckpt_job *j);
/* -EINPROGRESS or the result (0 / -errno). The error message is copied to
 * the caller's sr_last_error(). */
int sr__ckpt_job_poll(sr__ckpt_job *j);
int sr__ckpt_job_wait(sr__ckpt_job *j);
/* Waits, then frees. NULL is a no-op. */
void sr__ckpt_job_destroy(sr__ckpt_job *j);
uint32_t sr__ckpt_job_backend(const sr__ckpt_job *j);
uint64_t sr__ckpt_job_size(const sr__ckpt_job *j);
uint64_t sr__ckpt_job_ns(const sr__ckpt_job *j);

/* One-shot: write and wait. */
int sr__ckpt_write(const char *path, const struct sr__ckpt_src *srcs, uint32_t n,
		   uint32_t backend, const sr_ckpt_opts *opts);

/* Backend interface, used by the job (ckpt_job.c) ---------------------- */

/* A piece of the file to write: [off, off + len) from buf. */
struct sr__ckpt_piece {
	uint64_t off;
	size_t len;
	const void *ptr; /* the bytes: the staging buffer passed in, or mapped memory */
};

/* Produce the next piece (header, section data, or the trailer block when
 * @trailer) into @buf (capacity chunk_size, 4096-aligned). Returns 1 with
 * *pc set, 0 when everything but the trailer is produced, -errno. */
int sr__ckpt_produce(sr__ckpt_job *j, void *buf, struct sr__ckpt_piece *pc);
void sr__ckpt_produce_trailer(sr__ckpt_job *j, void *buf, struct sr__ckpt_piece *pc);
size_t sr__ckpt_chunk(const sr__ckpt_job *j);
int sr__ckpt_fd(const sr__ckpt_job *j);
/* Test hooks applied by the backends after each piece: returns -err when
 * the fault is armed for this piece, else 0 (and sleeps if asked). */
int sr__ckpt_fault_check(const struct sr__ckpt_piece *pc);
/* Record the reason of a failure (kept for the caller's sr_last_error). */
int sr__ckpt_fail(sr__ckpt_job *j, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* io_uring writer (ckpt_uring.c; ckpt_nouring.c returns -ENOSYS). Writes
 * every piece and the trailer and fsyncs, linked. Returns 0, -errno, or
 * SR__CKPT_REFUSED (with *why set) when io_uring cannot be used here. */
#define SR__CKPT_REFUSED 1
int sr__ckpt_run_uring(sr__ckpt_job *j, const char **why);
/* pwrite writer (ckpt_pwrite.c): same contract, never refuses. */
int sr__ckpt_run_pwrite(sr__ckpt_job *j);

/* ---- loader -------------------------------------------------------------- */

struct sr__ckpt_file {
	int fd;
	uint64_t size;
	struct sr__ckpt_header hdr;
	struct sr__ckpt_footer foot;
	struct sr__ckpt_entry table[SR_CKPT_MAX_SECTIONS];
};

/* Validate an open file: header, footer, table, every section's bounds
 * and CRC (streamed). Fills @f (fd is not owned) and @info (may be NULL).
 * Returns 0, -EBADMSG, -EPROTO, -EIO with the reason in sr_last_error(). */
int sr__ckpt_verify_fd(int fd, struct sr__ckpt_file *f, sr_ckpt_info *info);
/* Index of the first section of @type, or -1. */
int sr__ckpt_find(const struct sr__ckpt_file *f, uint32_t type);
/* Read bytes [off, off + len) of section @idx. 0 or -EIO/-EBADMSG. */
int sr__ckpt_read(const struct sr__ckpt_file *f, int idx, uint64_t off, void *buf, size_t len);
/* 0 if @crc (of bytes read after the verify pass) is the stored CRC of
 * section @idx, else -EBADMSG "changed since it was verified". */
int sr__ckpt_check_crc(const struct sr__ckpt_file *f, int idx, uint32_t crc);

#endif
