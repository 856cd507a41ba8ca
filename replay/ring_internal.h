/*
 * Ring internals shared by the replay .c files and the `stepring ring` tool: the
 * segment header layout (the on-disk / in-shm ABI of SR_RING_FORMAT_VERSION)
 * and the process-local handle.
 *
 * Memory ordering pairs used by the ring (named in the code as R1..R4):
 *
 *  R1  publish: producer stores seq[slot] = s + 1 with release after writing
 *      the columns of slot s; a consumer or sampler loads it with acquire
 *      and then sees the columns.
 *  R2  consume: the consumer stores cursor with release after it is done
 *      reading slots below it; a producer waiting for room loads cursor with
 *      acquire before it overwrites those slots.
 *  R3  overwrite: a producer claims slots by advancing head (an atomic
 *      read-modify-write), waits for room (R2's acquire of cursor) and
 *      issues a release fence before it writes any column of them: the
 *      reserving thread in sr_ring_reserve, or, when the range was
 *      reserved by another thread (the pool's sync command), each writer
 *      after the acquire that hands it the range. Either way the claim
 *      and the consumer's release of the slot happen before the column
 *      writes. A sampler that copied columns of slot s, then issues an
 *      acquire fence and loads head and cursor, sees both (head >
 *      s + capacity and cursor > s) if it read any byte written for the
 *      next lap: fence to fence. So a copy is intact when, after it,
 *      s >= min(head - capacity, cursor) (sr__lap_floor) and seq[slot]
 *      still reads s + 1. (A claimed slot that the consumer has not
 *      released yet is still intact: its producer is waiting for room.)
 *      The seq words are written once per slot and lap, by the publish
 *      (format version 2; version 1 stored seq = 0 before writing
 *      instead, one more store per slot).
 *  R4  ready: the creator writes the whole header and then stores ready = 1
 *      with release; an attacher loads it with acquire before trusting the
 *      geometry.
 */
#ifndef SR_RING_INTERNAL_H
#define SR_RING_INTERNAL_H

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sr_base.h"
#include "stepring/ring.h"

#define SR__RING_NAME_MAX 128
#define SR__RING_COL_ALIGN 4096u

/* Segment header. Identity first (written once by the creator, then
 * read-only), then each hot counter on its own 128-byte line. */
struct sr__ring_hdr {
	/* line 0: identity */
	uint64_t magic;        /* SR_RING_MAGIC */
	uint32_t version;      /* SR_RING_FORMAT_VERSION */
	uint32_t hdr_size;     /* sizeof(struct sr__ring_hdr) */
	uint64_t capacity;     /* slots, power of two */
	uint32_t obs_dim;      /* float32 per obs */
	uint32_t act_size;     /* bytes per action */
	uint64_t total_size;   /* bytes of the whole segment */
	int64_t creator_pid;
	uint64_t create_time;  /* CLOCK_REALTIME seconds */
	_Atomic uint32_t ready; /* R4: 1 once the header and columns are set up */
	uint32_t reserved0;
	uint64_t reserved1[6];
	/* line 1: column offsets from the segment base */
	uint64_t off_obs, off_action, off_reward, off_terminated, off_truncated;
	uint64_t off_flags, off_env_id, off_prev, off_seq;
	uint64_t reserved2[7];
	/* line 2: segment name (for `stepring ring inspect`) */
	char name[SR__RING_NAME_MAX];
	/* line 3: producers' reservation head (next sequence to reserve) */
	_Alignas(SR_CACHELINE) _Atomic uint64_t head;
	/* line 4: consumer cursor (first sequence not consumed) */
	_Alignas(SR_CACHELINE) _Atomic uint64_t cursor;
	/* line 5: statistics, updated off the fast path (relaxed) */
	_Alignas(SR_CACHELINE) _Atomic uint64_t reserve_waits; /* producers that had to wait */
	_Atomic uint64_t pad_slots;     /* SR_SLOT_PAD filler slots written */
	_Atomic uint64_t consumed_batches; /* sr_ring_consume calls with n > 0 */
	/* line 6: reserved for future counters */
	_Alignas(SR_CACHELINE) uint64_t reserved3[16];
};

_Static_assert(offsetof(struct sr__ring_hdr, head) % SR_CACHELINE == 0, "head on its own line");
_Static_assert(offsetof(struct sr__ring_hdr, cursor) - offsetof(struct sr__ring_hdr, head) >=
		       SR_CACHELINE,
	       "cursor not sharing head's line");
_Static_assert(offsetof(struct sr__ring_hdr, reserve_waits) -
			       offsetof(struct sr__ring_hdr, cursor) >=
		       SR_CACHELINE,
	       "stats not sharing cursor's line");
_Static_assert(offsetof(struct sr__ring_hdr, name) >= SR_CACHELINE, "identity on line 0");
_Static_assert(sizeof(struct sr__ring_hdr) % SR_CACHELINE == 0, "header is whole lines");
_Static_assert(sizeof(struct sr__ring_hdr) <= SR__RING_COL_ALIGN, "header fits one page");
_Static_assert(sizeof(_Atomic uint64_t) == 8 && sizeof(_Atomic uint32_t) == 4,
	       "atomics have plain layout");

/* Process-local handle. */
struct sr_ring {
	struct sr__ring_hdr *hdr;
	uint64_t cap;
	uint64_t mask;
	uint32_t obs_dim;
	uint32_t act_size;
	uint64_t id;   /* process-unique handle id (producer room cache key) */
	float *obs;
	uint8_t *action;
	float *reward;
	uint8_t *terminated;
	uint8_t *truncated;
	uint8_t *flags;
	uint32_t *env_id;
	uint64_t *prev;
	_Atomic uint64_t *seq; /* publish sequence column: s + 1 once slot s is published */
	void *base;
	size_t len;
	int fd;
	bool owner;    /* created it: unlink a named segment on destroy */
	bool rdonly;
	bool named;
	char name[SR__RING_NAME_MAX]; /* "/sr-foo" */
};

/*
 * A ring's columns, cached by a writer (a pool, a process worker): every
 * row range it touches goes through them. Set once (sr__ring_cols_get),
 * read-only after, by every thread; the slots they point into are ordered
 * by the ring's protocol (reserve, publish R1, consume: stepring/ring.h).
 */
struct sr__ring_cols {
	sr_ring *r;
	uint64_t cap; /* slots, a power of two */
	float *obs, *rew;
	uint8_t *act, *term, *trunc, *flags;
	uint32_t *env;
	uint64_t *prev;
};

static inline void sr__ring_cols_get(sr_ring *r, struct sr__ring_cols *c)
{
	c->r = r;
	c->cap = r->cap;
	c->obs = r->obs;
	c->rew = r->reward;
	c->act = r->action;
	c->term = r->terminated;
	c->trunc = r->truncated;
	c->flags = r->flags;
	c->env = r->env_id;
	c->prev = r->prev;
}

/* Column layout for a geometry: fills the off_* and total_size of @h.
 * Returns 0 or -EINVAL (overflow). */
int sr__ring_layout(uint64_t capacity, uint32_t obs_dim, uint32_t act_size,
		    struct sr__ring_hdr *h);
/* Attach from a descriptor: inherited from the creator (process workers
 * get the pool's memfd, read-write), or opened through /proc/PID/fd (MPI
 * ranks of one node read each other's rings, @rdonly: mapped PROT_READ).
 * The handle owns @fd. Returns 0 or -errno. */
int sr__ring_attach_fd(int fd, bool rdonly, struct sr_ring **out);
/* The oldest sequence still readable: head - capacity, or 0. */
static inline uint64_t sr__ring_oldest(const struct sr_ring *r)
{
	uint64_t h = atomic_load_explicit(&r->hdr->head, memory_order_acquire);

	return h > r->cap ? h - r->cap : 0;
}

/*
 * Rows nobody stepped, the one writer of them (the ring's own lap-end
 * pads, a pool's reservation that no command fills, a dead process
 * worker's rows and leftover extras). Neither publishes: the caller does
 * (R1), after it has claimed the slots (R3).
 *  - sr__ring_pad_rows: slots [seq, seq + n) as SR_SLOT_PAD filler, which
 *    consumers skip: reward, terminated, truncated 0, env UINT32_MAX, no
 *    prev (obs and action are not written).
 *  - sr__ring_fault_row: slot @seq as env @env's SR_SLOT_FAULT row (its
 *    step was interrupted): obs and reward 0, truncated 1, no prev, the
 *    action @act (act_size bytes; NULL: zeros).
 */
void sr__ring_pad_rows(sr_ring *r, uint64_t seq, uint64_t n);
void sr__ring_fault_row(sr_ring *r, uint64_t seq, uint32_t env, const void *act);

/* "sr-foo" or "/sr-foo" -> "/sr-foo" in @out. Returns 0 or -EINVAL. */
int sr__ring_norm_name(const char *name, char out[SR__RING_NAME_MAX]);

/*
 * Seqlock read helpers for samplers. A reader calls sr__slot_begin(r, s)
 * (acquire, R1) and only if it is true copies the columns, then
 * sr__slot_end(r, s) (acquire fence, R3): true means the copy is not torn.
 * sr__lap_floor() after an acquire fence gives the oldest sequence whose
 * slot no producer can be writing for the next lap (R3): copies of older
 * slots may be torn.
 */
static inline uint64_t sr__lap_floor(const struct sr_ring *r)
{
	uint64_t h = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
	uint64_t c = atomic_load_explicit(&r->hdr->cursor, memory_order_relaxed);
	uint64_t f = h > r->cap ? h - r->cap : 0;

	return c < f ? c : f;
}

static inline bool sr__slot_begin(const struct sr_ring *r, uint64_t s)
{
	return atomic_load_explicit(&r->seq[s & r->mask], memory_order_acquire) == s + 1;
}

static inline bool sr__slot_end(const struct sr_ring *r, uint64_t s)
{
	atomic_thread_fence(memory_order_acquire); /* R3: column reads before the re-check */
	return sr__lap_floor(r) <= s &&
	       atomic_load_explicit(&r->seq[s & r->mask], memory_order_relaxed) == s + 1;
}

/* Copy that may race with a producer overwriting the slot; the caller
 * discards the result unless sr__slot_end() agrees. Kept in one named
 * function so that the TSan suppression can name it (tests/tsan.supp). */
void sr__racy_copy(void *dst, const void *src, size_t n);

#if defined(__SANITIZE_THREAD__)
#define SR__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SR__TSAN 1
#endif
#endif

/*
 * Inline forms of the racy reads for the sampling hot path. Under TSan they
 * go through sr__racy_copy (suppressed by name); otherwise scalars are read
 * with one volatile load each (the compiler neither re-reads nor splits
 * them) and rows with memcpy. A racy value is only ever used masked as a
 * ring index or copied out, and the row is dropped unless the seqlock
 * re-check passes, so a torn value can cause a retry, never a wrong row.
 */
#ifdef SR__TSAN
#define SR__RACY_SCALAR(type, name)                                                        \
	static inline type name(const type *p)                                             \
	{                                                                                  \
		type v;                                                                    \
		sr__racy_copy(&v, p, sizeof(v));                                           \
		return v;                                                                  \
	}
static inline void sr__racy_rows(void *dst, const void *src, size_t n)
{
	sr__racy_copy(dst, src, n);
}
#else
#define SR__RACY_SCALAR(type, name)                                                        \
	static inline type name(const type *p)                                             \
	{                                                                                  \
		return *(const volatile type *)p;                                          \
	}
/* Rows of a few bytes (small obs, actions) are the common case: copy them
 * inline with two overlapping fixed-size moves instead of a libc call. */
static inline void sr__racy_rows(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if (n > 32) {
		memcpy(d, s, n);
	} else if (n >= 16) {
		__builtin_memcpy(d, s, 16);
		__builtin_memcpy(d + n - 16, s + n - 16, 16);
	} else if (n >= 8) {
		__builtin_memcpy(d, s, 8);
		__builtin_memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		__builtin_memcpy(d, s, 4);
		__builtin_memcpy(d + n - 4, s + n - 4, 4);
	} else {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	}
}
#endif
SR__RACY_SCALAR(uint64_t, sr__racy_u64)
SR__RACY_SCALAR(uint32_t, sr__racy_u32)
SR__RACY_SCALAR(uint8_t, sr__racy_u8)
SR__RACY_SCALAR(float, sr__racy_f32)

#endif
