/*
 * Shared-memory transition ring: segment lifecycle, producers, consumer.
 *
 * DESIGN
 * One segment (memfd, or shm_open with SR_RING_SHM) holds a header and one
 * column per field (struct of arrays, each column page aligned). Sequence
 * numbers are free-running uint64; slot = seq & (capacity - 1).
 *
 * Producers (any number of threads, possibly in several processes when the
 * segment is attached read-write) reserve a range with one atomic
 * fetch-add on head (SR_RESERVE_CONTIG and try_reserve use a CAS loop
 * instead, because they must decide before claiming). A reservation never
 * overwrites unconsumed slots: the producer waits until
 * cursor + capacity >= end of its range (spin, then sched_yield, then short
 * sleeps). It then writes the columns outside any lock and publishes each
 * slot (seq = s + 1, R1); its claim on head, ordered before those writes
 * by a release fence (R3), is what tells a sampler that a slot of the
 * previous lap is being overwritten, so the seq words are written once
 * per slot and lap. A slow
 * producer delays only the consumer, which needs contiguity; other
 * producers keep reserving ahead of it up to the capacity.
 *
 * The single consumer peeks the longest published run from its cursor and
 * consumes it (R2). Consumed slots stay readable as the replay window
 * until a producer claims them again; samplers detect that by the head
 * check after their copy (see ring_internal.h and replay.c).
 *
 * The orderings R1..R4 are described in ring_internal.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ring_internal.h"
#include "stepring/stats.h" /* SR_STATS_MAGIC */

/* Each producer thread caches the last cursor it saw (per ring handle, by
 * a process-unique id, so a new ring at a recycled address never matches):
 * the cursor only grows, so a stale value is a safe lower bound, and the
 * producer touches the consumer's cache line only when the cached room runs
 * out (the Disruptor's gating-sequence cache). */
static _Thread_local struct {
	uint64_t id;
	uint64_t limit; /* cached cursor + capacity */
} room_cache;
static _Atomic uint64_t next_ring_id = 1;

int sr__ring_layout(uint64_t capacity, uint32_t obs_dim, uint32_t act_size,
		    struct sr__ring_hdr *h)
{
	uint64_t off = sr__align_up(sizeof(*h), SR__RING_COL_ALIGN);
	/* Bound the geometry so that no product below can overflow. */
	if (capacity < 2 || (capacity & (capacity - 1)) || capacity > (1ull << 40) ||
	    obs_dim == 0 || act_size == 0 || obs_dim > (1u << 24) || act_size > (1u << 24))
		return -EINVAL;
#define COL(field, width)                                                                  \
	do {                                                                               \
		h->field = off;                                                            \
		off = sr__align_up(off + capacity * (uint64_t)(width), SR__RING_COL_ALIGN);    \
	} while (0)
	COL(off_obs, 4ull * obs_dim);
	COL(off_action, act_size);
	COL(off_reward, 4);
	COL(off_terminated, 1);
	COL(off_truncated, 1);
	COL(off_flags, 1);
	COL(off_env_id, 4);
	COL(off_prev, 8);
	COL(off_seq, 8);
#undef COL
	if (off > (1ull << 46))
		return -EINVAL;
	h->total_size = off;
	return 0;
}

int sr__ring_norm_name(const char *name, char out[SR__RING_NAME_MAX])
{
	const char *p;

	if (!name || !*name)
		return -EINVAL;
	p = name[0] == '/' ? name + 1 : name;
	if (!*p || strchr(p, '/') || strlen(p) + 2 > SR__RING_NAME_MAX)
		return -EINVAL;
	snprintf(out, SR__RING_NAME_MAX, "/%s", p);
	return 0;
}

void __attribute__((noinline)) sr__racy_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

size_t sr_ring_memsize(const sr_ring_opts *opts)
{
	struct sr__ring_hdr h;

	if (!opts || sr__ring_layout(opts->capacity, opts->obs_dim, opts->act_size, &h))
		return 0;
	return (size_t)h.total_size;
}

static void bind_columns(struct sr_ring *r)
{
	struct sr__ring_hdr *h = r->hdr;
	char *b = r->base;

	r->id = atomic_fetch_add_explicit(&next_ring_id, 1, memory_order_relaxed);
	r->cap = h->capacity;
	r->mask = h->capacity - 1;
	r->obs_dim = h->obs_dim;
	r->act_size = h->act_size;
	r->obs = (float *)(b + h->off_obs);
	r->action = (uint8_t *)(b + h->off_action);
	r->reward = (float *)(b + h->off_reward);
	r->terminated = (uint8_t *)(b + h->off_terminated);
	r->truncated = (uint8_t *)(b + h->off_truncated);
	r->flags = (uint8_t *)(b + h->off_flags);
	r->env_id = (uint32_t *)(b + h->off_env_id);
	r->prev = (uint64_t *)(b + h->off_prev);
	r->seq = (_Atomic uint64_t *)(b + h->off_seq);
}

int sr_ring_create(const sr_ring_opts *opts, sr_ring **out)
{
	struct sr__ring_hdr geo;
	struct sr__shm_seg seg;
	struct sr_ring *r;
	int err;

	if (!opts || !out)
		return sr__errorf(-EINVAL, "ring: opts and out must not be NULL");
	*out = NULL;
	if (opts->flags & ~(uint32_t)SR_RING_SHM)
		return sr__errorf(-EINVAL, "ring: unknown flags 0x%x", opts->flags);
	memset(&geo, 0, sizeof(geo));
	if (sr__ring_layout(opts->capacity, opts->obs_dim, opts->act_size, &geo))
		return sr__errorf(-EINVAL,
				  "ring: bad geometry capacity=%llu (power of two in [2, 2^40] "
				  "needed) obs_dim=%u act_size=%u (in [1, 2^24] each)",
				  (unsigned long long)opts->capacity, opts->obs_dim,
				  opts->act_size);
	r = calloc(1, sizeof(*r));
	if (!r)
		return sr__errorf(-ENOMEM, "ring: out of memory");
	r->fd = -1;
	if ((opts->flags & SR_RING_SHM) && sr__ring_norm_name(opts->name, r->name)) {
		err = sr__errorf(-EINVAL, "ring: bad segment name '%s' (use \"sr-foo\")",
				 opts->name ? opts->name : "(null)");
		goto err_free;
	}
	/* Room, lock, size, allocate (every page: a too-small /dev/shm fails
	 * here, never later with SIGBUS), map; the name comes last. */
	err = sr__shm_make("ring", (opts->flags & SR_RING_SHM) ? r->name : NULL,
			   (size_t)geo.total_size, &seg);
	if (err) {
		if (err == -EEXIST)
			err = sr__errorf(err, "ring: cannot create '%s': already exists "
					      "(stepring ring rm?)", r->name);
		goto err_free;
	}
	r->named = opts->flags & SR_RING_SHM;
	r->fd = seg.fd;
	r->base = seg.base;
	r->len = seg.len;
	r->hdr = seg.base;
	r->owner = true;

	/* A fresh tmpfs file reads as zeros: seq 0 means "never published",
	 * prev 0 columns are never read before a publish. Fill the header. */
	memcpy(r->hdr, &geo, sizeof(geo));
	r->hdr->magic = SR_RING_MAGIC;
	r->hdr->version = SR_RING_FORMAT_VERSION;
	r->hdr->hdr_size = sizeof(struct sr__ring_hdr);
	r->hdr->capacity = opts->capacity;
	r->hdr->obs_dim = opts->obs_dim;
	r->hdr->act_size = opts->act_size;
	r->hdr->creator_pid = getpid();
	r->hdr->create_time = (uint64_t)time(NULL);
	snprintf(r->hdr->name, sizeof(r->hdr->name), "%s", r->named ? r->name : "");
	atomic_store_explicit(&r->hdr->head, 0, memory_order_relaxed);
	atomic_store_explicit(&r->hdr->cursor, 0, memory_order_relaxed);
	bind_columns(r);
	/* R4: everything above is visible to an attacher that sees ready. */
	atomic_store_explicit(&r->hdr->ready, 1, memory_order_release);
	err = sr__shm_link(&seg, "ring");
	if (err)
		goto err_abandon;
	*out = r;
	return 0;

err_abandon:
	sr__shm_abandon(&seg);
err_free:
	free(r);
	return err;
}

/* Whether a ready header's geometry is this format's for its capacity,
 * obs_dim and act_size, and fills a segment of @size bytes exactly (every
 * column offset recomputed, so no column can point outside the mapping). */
static bool geometry_ok(const struct sr__ring_hdr *h, uint64_t size)
{
	struct sr__ring_hdr want;

	memset(&want, 0, sizeof(want));
	return h->hdr_size == sizeof(struct sr__ring_hdr) &&
	       !sr__ring_layout(h->capacity, h->obs_dim, h->act_size, &want) &&
	       want.total_size == size && h->total_size == want.total_size &&
	       h->off_obs == want.off_obs && h->off_action == want.off_action &&
	       h->off_reward == want.off_reward && h->off_terminated == want.off_terminated &&
	       h->off_truncated == want.off_truncated && h->off_flags == want.off_flags &&
	       h->off_env_id == want.off_env_id && h->off_prev == want.off_prev &&
	       h->off_seq == want.off_seq;
}

int sr_ring_attach(const char *name, unsigned flags, sr_ring **out)
{
	struct sr__ring_hdr want, *h;
	struct sr_ring *r;
	struct stat st;
	uint32_t ready;
	int err, fd;
	bool rw = flags & SR_RING_RDWR;
	void *base;

	if (!out)
		return sr__errorf(-EINVAL, "ring attach: out must not be NULL");
	*out = NULL;
	if (flags & ~(unsigned)SR_RING_RDWR)
		return sr__errorf(-EINVAL, "ring attach: unknown flags 0x%x", flags);
	r = calloc(1, sizeof(*r));
	if (!r)
		return sr__errorf(-ENOMEM, "ring attach: out of memory");
	if (sr__ring_norm_name(name, r->name)) {
		err = sr__errorf(-EINVAL, "ring attach: bad segment name '%s'",
				 name ? name : "(null)");
		goto err_free;
	}
	fd = shm_open(r->name, rw ? O_RDWR : O_RDONLY, 0);
	if (fd < 0) {
		err = -errno;
		if (err == -ENOENT)
			err = sr__errorf(err, "ring attach: no segment named '%s'", r->name);
		else
			err = sr__errorf(err, "ring attach: cannot open '%s': %s", r->name,
					 strerror(-err));
		goto err_free;
	}
	if (fstat(fd, &st)) {
		err = sr__errorf(-errno, "ring attach: fstat '%s': %s", r->name, strerror(errno));
		goto err_close;
	}
	err = sr__shm_trusted(&st, "ring attach", r->name);
	if (err)
		goto err_close;
	if ((uint64_t)st.st_size < sizeof(struct sr__ring_hdr)) {
		err = sr__errorf(-EBADMSG,
				 "ring attach: '%s' is not a stepring ring (%lld bytes, too small "
				 "for a header)",
				 r->name, (long long)st.st_size);
		goto err_close;
	}
	base = mmap(NULL, (size_t)st.st_size, rw ? PROT_READ | PROT_WRITE : PROT_READ,
		    MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = sr__errorf(-errno, "ring attach: mmap '%s': %s", r->name, strerror(errno));
		goto err_close;
	}
	r->base = base;
	r->len = (size_t)st.st_size;
	h = base;
	if (h->magic != SR_RING_MAGIC) {
		err = sr__errorf(-EBADMSG, "ring attach: '%s' is not a stepring ring (bad magic)",
				 r->name);
		goto err_unmap;
	}
	if (h->version != SR_RING_FORMAT_VERSION) {
		err = sr__errorf(-EPROTO,
				 "ring attach: '%s' has ring format version %u, this library "
				 "reads version %u",
				 r->name, h->version, SR_RING_FORMAT_VERSION);
		goto err_unmap;
	}
	/* R4: the geometry is only trusted once ready is seen with acquire. */
	ready = atomic_load_explicit(&h->ready, memory_order_acquire);
	if (ready != 1) {
		/* Only a creator that still holds its lock will finish it: a
		 * header of a dead creator, or with any other value, is never
		 * worth a retry. */
		if (ready == 0 && sr__shm_in_use(fd) == 1)
			err = sr__errorf(-EAGAIN, "ring attach: '%s' is still being created",
					 r->name);
		else if (ready == 0)
			err = sr__errorf(-EBADMSG,
					 "ring attach: '%s' is incomplete: its creator died while "
					 "making it (stepring ring rm --stale)",
					 r->name);
		else
			err = sr__errorf(-EBADMSG,
					 "ring attach: '%s' has a corrupt header (ready = %u)",
					 r->name, ready);
		goto err_unmap;
	}
	memset(&want, 0, sizeof(want));
	if (h->hdr_size != sizeof(struct sr__ring_hdr) ||
	    sr__ring_layout(h->capacity, h->obs_dim, h->act_size, &want)) {
		err = sr__errorf(-EBADMSG,
				 "ring attach: '%s' has a bad geometry (header %u bytes, "
				 "capacity %llu, obs_dim %u, act_size %u)",
				 r->name, h->hdr_size, (unsigned long long)h->capacity, h->obs_dim,
				 h->act_size);
		goto err_unmap;
	}
	if (!geometry_ok(h, (uint64_t)st.st_size)) {
		err = sr__errorf(-EBADMSG,
				 "ring attach: '%s': geometry (capacity %llu, obs_dim %u, "
				 "act_size %u) needs %llu bytes, the segment has %lld",
				 r->name, (unsigned long long)h->capacity, h->obs_dim, h->act_size,
				 (unsigned long long)want.total_size, (long long)st.st_size);
		goto err_unmap;
	}
	r->hdr = h;
	r->fd = fd;
	r->rdonly = !rw;
	r->named = true;
	bind_columns(r);
	*out = r;
	return 0;

err_unmap:
	munmap(base, (size_t)st.st_size);
err_close:
	close(fd);
err_free:
	free(r);
	return err;
}

void sr_ring_destroy(sr_ring *r)
{
	if (!r)
		return;
	if (r->owner && r->named)
		shm_unlink(r->name);
	munmap(r->base, r->len);
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

int sr_ring_unlink(const char *name)
{
	char n[SR__RING_NAME_MAX];

	if (sr__ring_norm_name(name, n))
		return sr__errorf(-EINVAL, "ring unlink: bad segment name '%s'",
				  name ? name : "(null)");
	if (shm_unlink(n)) {
		int err = -errno;
		return sr__errorf(err, "ring unlink: '%s': %s", n,
				  err == -ENOENT ? "no such segment" : strerror(-err));
	}
	return 0;
}

uint64_t sr_ring_capacity(const sr_ring *r)
{
	return r->cap;
}

uint32_t sr_ring_obs_dim(const sr_ring *r)
{
	return r->obs_dim;
}

uint32_t sr_ring_act_size(const sr_ring *r)
{
	return r->act_size;
}

float *sr_ring_obs_col(const sr_ring *r)
{
	return r->obs;
}

uint8_t *sr_ring_action_col(const sr_ring *r)
{
	return r->action;
}

float *sr_ring_reward_col(const sr_ring *r)
{
	return r->reward;
}

uint8_t *sr_ring_terminated_col(const sr_ring *r)
{
	return r->terminated;
}

uint8_t *sr_ring_truncated_col(const sr_ring *r)
{
	return r->truncated;
}

uint8_t *sr_ring_flags_col(const sr_ring *r)
{
	return r->flags;
}

uint32_t *sr_ring_env_id_col(const sr_ring *r)
{
	return r->env_id;
}

uint64_t *sr_ring_prev_col(const sr_ring *r)
{
	return r->prev;
}

/* ---------------------------------------------------------------------------
 * Producers
 * ------------------------------------------------------------------------- */

/* Wait until slots below @end may be written: end - cursor <= capacity.
 * R2: the acquire load pairs with sr_ring_consume's release store (the
 * cached value came from such a load too). */
static void wait_room(sr_ring *r, uint64_t end)
{
	unsigned spins = 0;
	uint64_t c;

	if (SR_LIKELY(room_cache.id == r->id && end <= room_cache.limit))
		return;
	c = atomic_load_explicit(&r->hdr->cursor, memory_order_acquire);
	if (SR_LIKELY(end - c <= r->cap)) {
		room_cache.id = r->id;
		room_cache.limit = c + r->cap;
		return;
	}
	atomic_fetch_add_explicit(&r->hdr->reserve_waits, 1, memory_order_relaxed);
	while (end - atomic_load_explicit(&r->hdr->cursor, memory_order_acquire) > r->cap) {
		if (spins < 64) {
			sr__cpu_relax();
		} else if (spins < 256) {
			sched_yield();
		} else {
			struct timespec ts = {0, 50000}; /* 50 us */
			nanosleep(&ts, NULL);
		}
		spins++;
	}
}

void sr__ring_pad_rows(sr_ring *r, uint64_t seq, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t s = (seq + i) & r->mask;

		r->flags[s] = SR_SLOT_PAD;
		r->terminated[s] = 0;
		r->truncated[s] = 0;
		r->reward[s] = 0.0f;
		r->env_id[s] = UINT32_MAX;
		r->prev[s] = SR_RING_NO_PREV;
	}
}

void sr__ring_fault_row(sr_ring *r, uint64_t seq, uint32_t env, const void *act)
{
	uint64_t s = seq & r->mask;

	memset(r->obs + s * r->obs_dim, 0, r->obs_dim * sizeof(float));
	if (act)
		memcpy(r->action + s * r->act_size, act, r->act_size);
	else
		memset(r->action + s * r->act_size, 0, r->act_size);
	r->reward[s] = 0.0f;
	r->terminated[s] = 0;
	r->truncated[s] = 1;
	r->flags[s] = SR_SLOT_FAULT;
	r->env_id[s] = env;
	r->prev[s] = SR_RING_NO_PREV;
}

/* Fill [seq, seq + n) (less than a lap) with SR_SLOT_PAD filler and
 * publish it. The caller claimed the range and issued R3's release fence. */
static void write_pad(sr_ring *r, uint64_t seq, uint64_t n)
{
	sr__ring_pad_rows(r, seq, n);
	/* R1: publish the filler at once; the consumer skips it. */
	sr_ring_publish(r, seq, (uint32_t)n);
	atomic_fetch_add_explicit(&r->hdr->pad_slots, n, memory_order_relaxed);
}

static int check_reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq)
{
	if (SR_UNLIKELY(r->rdonly))
		return sr__errorf(-EPERM, "ring reserve: ring attached read-only");
	if (SR_UNLIKELY(n == 0 || n > r->cap || !seq))
		return sr__errorf(-EINVAL, "ring reserve: n=%u must be in [1, capacity=%llu]", n,
				  (unsigned long long)r->cap);
	if (SR_UNLIKELY(flags & ~(unsigned)SR_RESERVE_CONTIG))
		return sr__errorf(-EINVAL, "ring reserve: unknown flags 0x%x", flags);
	return 0;
}

static int reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq, bool wait)
{
	uint64_t h, pad, pos;
	int err = check_reserve(r, n, flags, seq);

	if (SR_UNLIKELY(err))
		return err;
	if (wait && !(flags & SR_RESERVE_CONTIG)) {
		/* The fast path: one fetch-add claims the range. Relaxed is
		 * enough, the data is ordered by the seq column (R1/R3). */
		h = atomic_fetch_add_explicit(&r->hdr->head, n, memory_order_relaxed);
		wait_room(r, h + n);
		/* R3: the claim (head) and the room (cursor) before any column
		 * write of the range. */
		atomic_thread_fence(memory_order_release);
		*seq = h;
		return 0;
	}
	/* CONTIG or try: decide from the current head, then claim with CAS. */
	h = atomic_load_explicit(&r->hdr->head, memory_order_relaxed);
	for (;;) {
		pos = h & r->mask;
		pad = (flags & SR_RESERVE_CONTIG) && pos + n > r->cap ? r->cap - pos : 0;
		if (!wait) {
			uint64_t cur = atomic_load_explicit(&r->hdr->cursor, memory_order_acquire);
			uint64_t need = pad + n <= r->cap ? h + pad + n : h + pad;

			if (need - cur > r->cap)
				return sr__errorf(-EAGAIN,
						  "ring try_reserve: no room for %u slots (the "
						  "consumer lags a full capacity)",
						  n);
			if (pad + n > r->cap) {
				/* The range cannot fit before the pad is consumed:
				 * claim and publish the pad alone, ask to retry. */
				if (!atomic_compare_exchange_weak_explicit(
					    &r->hdr->head, &h, h + pad, memory_order_relaxed,
					    memory_order_relaxed))
					continue;
				atomic_thread_fence(memory_order_release); /* R3 */
				write_pad(r, h, pad);
				return sr__errorf(-EAGAIN,
						  "ring try_reserve: lap end padded, no room for "
						  "%u contiguous slots yet",
						  n);
			}
		}
		if (atomic_compare_exchange_weak_explicit(&r->hdr->head, &h, h + pad + n,
							  memory_order_relaxed,
							  memory_order_relaxed))
			break;
	}
	if (pad) {
		/* Pads first, so the consumer can move past them even when
		 * pad + n > capacity. */
		wait_room(r, h + pad);
		atomic_thread_fence(memory_order_release); /* R3 */
		write_pad(r, h, pad);
	}
	wait_room(r, h + pad + n);
	/* R3: the claim (head) and the room (cursor) before any column write
	 * of the range. */
	atomic_thread_fence(memory_order_release);
	*seq = h + pad;
	return 0;
}

int sr_ring_reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq)
{
	return reserve(r, n, flags, seq, true);
}

int sr_ring_try_reserve(sr_ring *r, uint32_t n, unsigned flags, uint64_t *seq)
{
	return reserve(r, n, flags, seq, false);
}

void sr_ring_publish(sr_ring *r, uint64_t seq, uint32_t n)
{
	/* Locals: the stores may alias @r's fields, which would otherwise be
	 * reloaded for every slot; and the range is at most two runs of
	 * consecutive slots, so no mask per slot. */
	_Atomic uint64_t *const col = r->seq;
	const uint64_t mask = r->mask, end = seq + n;

	while (seq < end) {
		uint64_t s = seq & mask, k = r->cap - s < end - seq ? r->cap - s : end - seq;

		/* R1: each release store makes the columns of its slot visible
		 * to a reader that loads seq[slot] == s + 1 with acquire.
		 * Unrolled: an atomic store is not vectorized, and the plain
		 * loop spent five instructions and a taken branch a slot (2%
		 * of a CartPole pool step's instructions); eight stores a round
		 * run at the stores' own rate. */
#pragma GCC unroll 8
		for (uint64_t i = 0; i < k; i++)
			atomic_store_explicit(&col[s + i], seq + i + 1, memory_order_release);
		seq += k;
	}
}

/* ---------------------------------------------------------------------------
 * Consumer
 * ------------------------------------------------------------------------- */

uint32_t sr_ring_peek(sr_ring *r, uint32_t max, uint64_t *first)
{
	/* Only the consumer writes cursor: a relaxed load reads its own value. */
	uint64_t c = atomic_load_explicit(&r->hdr->cursor, memory_order_relaxed);
	uint32_t n = 0;

	if (first)
		*first = c;
	if (max > r->cap)
		max = (uint32_t)(r->cap > UINT32_MAX ? UINT32_MAX : r->cap);
	/* R1: acquire pairs with the producer's publish; a stale value from
	 * an earlier lap (c - capacity + 1 or 0) never equals c + 1. */
	while (n < max &&
	       atomic_load_explicit(&r->seq[(c + n) & r->mask], memory_order_acquire) == c + n + 1)
		n++;
	return n;
}

int sr_ring_consume(sr_ring *r, uint32_t n)
{
	uint64_t c;

	if (!n)
		return 0;
	c = atomic_load_explicit(&r->hdr->cursor, memory_order_relaxed);
	/* Only a published run may be consumed: a cursor past a slot that is
	 * not published would let producers lap slots nobody read, and one
	 * past head would wedge the ring (peek never matches again). The last
	 * slot of the run is on a line peek just read. R1 (acquire). */
	if (SR_UNLIKELY(n > r->cap ||
			atomic_load_explicit(&r->seq[(c + n - 1) & r->mask],
					     memory_order_acquire) != c + n))
		return sr__errorf(-EINVAL,
				  "ring consume: %u slots from cursor %llu are not all "
				  "published (consume at most what sr_ring_peek returned)",
				  n, (unsigned long long)c);
	/* R2: the consumer's reads of [c, c + n) happen before a producer
	 * that sees the new cursor overwrites them. */
	atomic_store_explicit(&r->hdr->cursor, c + n, memory_order_release);
	atomic_fetch_add_explicit(&r->hdr->consumed_batches, 1, memory_order_relaxed);
	return 0;
}

uint64_t sr_ring_head(const sr_ring *r)
{
	return atomic_load_explicit(&r->hdr->head, memory_order_acquire);
}

uint64_t sr_ring_cursor(const sr_ring *r)
{
	return atomic_load_explicit(&r->hdr->cursor, memory_order_acquire);
}

bool sr_ring_slot_valid(const sr_ring *r, uint64_t seq)
{
	/* R3 then R1: reads before this call are ordered before the loads;
	 * published (seq word), and not claimed again by a producer (head). */
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&r->seq[seq & r->mask], memory_order_acquire) == seq + 1 &&
	       sr__lap_floor(r) <= seq;
}

/* Attach a ring from a descriptor: inherited from its creator (process
 * workers: the pool's memfd, read-write) or opened through /proc (another
 * MPI rank of the node: @rdonly). The same checks as sr_ring_attach. The
 * handle owns @fd (closed by sr_ring_destroy). */
int sr__ring_attach_fd(int fd, bool rdonly, sr_ring **out)
{
	struct sr__ring_hdr *h;
	struct sr_ring *r;
	struct stat st;
	void *base;
	int err;

	*out = NULL;
	if (fstat(fd, &st))
		return sr__errorf(-errno, "ring attach fd %d: %s", fd, strerror(errno));
	if ((uint64_t)st.st_size < sizeof(struct sr__ring_hdr))
		return sr__errorf(-EBADMSG, "ring attach fd %d: not a stepring ring", fd);
	r = calloc(1, sizeof(*r));
	if (!r)
		return sr__errorf(-ENOMEM, "ring attach: out of memory");
	base = mmap(NULL, (size_t)st.st_size, rdonly ? PROT_READ : PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		err = sr__errorf(-errno, "ring attach fd %d: mmap: %s", fd, strerror(errno));
		goto err_free;
	}
	h = base;
	/* R4: the geometry is trusted only once ready is seen with acquire. */
	if (h->magic != SR_RING_MAGIC || h->version != SR_RING_FORMAT_VERSION ||
	    atomic_load_explicit(&h->ready, memory_order_acquire) != 1 ||
	    !geometry_ok(h, (uint64_t)st.st_size)) {
		err = sr__errorf(-EBADMSG, "ring attach fd %d: not a stepring ring of format %u",
				 fd, SR_RING_FORMAT_VERSION);
		goto err_unmap;
	}
	r->base = base;
	r->len = (size_t)st.st_size;
	r->hdr = h;
	r->fd = fd;
	r->rdonly = rdonly;
	bind_columns(r);
	*out = r;
	return 0;

err_unmap:
	munmap(base, (size_t)st.st_size);
err_free:
	free(r);
	return err;
}

/* ---------------------------------------------------------------------------
 * Info and probe
 * ------------------------------------------------------------------------- */

/* The members every caller's struct has: up to and including flags. */
#define INFO_MIN (offsetof(sr_ring_info, flags) + sizeof(uint32_t))

/* Copy @ours to the caller's @info: what both know, zeroes beyond. */
static void info_out(sr_ring_info *info, const sr_ring_info *ours)
{
	size_t n = info->size < sizeof(*ours) ? info->size : sizeof(*ours);
	uint32_t size = info->size;

	memcpy(info, ours, n);
	if (size > n)
		memset((char *)info + n, 0, size - n);
	info->size = size;
}

/* Fill @o from a header of this format version (@h read or mapped). */
static void info_from_hdr(sr_ring_info *o, const struct sr__ring_hdr *h)
{
	o->kind = SR_SEGMENT_RING;
	o->version = h->version;
	o->capacity = h->capacity;
	o->obs_dim = h->obs_dim;
	o->act_size = h->act_size;
	o->header_bytes = h->hdr_size;
	o->bytes = h->total_size;
	o->creator_pid = h->creator_pid;
	o->create_time = h->create_time;
	o->head = atomic_load_explicit(&((struct sr__ring_hdr *)h)->head, memory_order_relaxed);
	o->cursor =
		atomic_load_explicit(&((struct sr__ring_hdr *)h)->cursor, memory_order_relaxed);
	o->oldest = o->head > o->capacity ? o->head - o->capacity : 0;
	o->reserve_waits = atomic_load_explicit(&((struct sr__ring_hdr *)h)->reserve_waits,
						memory_order_relaxed);
	o->pad_slots = atomic_load_explicit(&((struct sr__ring_hdr *)h)->pad_slots,
					    memory_order_relaxed);
	o->consumed_batches = atomic_load_explicit(
		&((struct sr__ring_hdr *)h)->consumed_batches, memory_order_relaxed);
	o->offsets[SR_RING_COL_OBS] = h->off_obs;
	o->offsets[SR_RING_COL_ACTION] = h->off_action;
	o->offsets[SR_RING_COL_REWARD] = h->off_reward;
	o->offsets[SR_RING_COL_TERMINATED] = h->off_terminated;
	o->offsets[SR_RING_COL_TRUNCATED] = h->off_truncated;
	o->offsets[SR_RING_COL_FLAGS] = h->off_flags;
	o->offsets[SR_RING_COL_ENV_ID] = h->off_env_id;
	o->offsets[SR_RING_COL_PREV] = h->off_prev;
	o->offsets[SR_RING_COL_SEQ] = h->off_seq;
	if (atomic_load_explicit(&((struct sr__ring_hdr *)h)->ready, memory_order_acquire) == 1)
		o->flags |= SR_RING_INFO_COMPLETE;
}

int sr_ring_info_get(const sr_ring *r, sr_ring_info *info)
{
	sr_ring_info o;
	struct stat st;

	if (!r || !info || info->size < INFO_MIN)
		return sr__errorf(-EINVAL, "ring info: NULL argument, or info->size not set");
	memset(&o, 0, sizeof(o));
	info_from_hdr(&o, r->hdr);
	o.bytes = r->len;
	o.base = r->base;
	if (r->rdonly)
		o.flags |= SR_RING_INFO_READ_ONLY;
	if (r->owner)
		o.flags |= SR_RING_INFO_OWNER;
	/* A handle in this process keeps a creator's lock only if it made it. */
	if (r->named && r->fd >= 0 && sr__shm_in_use(r->fd) == 1)
		o.flags |= SR_RING_INFO_ALIVE;
	else if (r->owner)
		o.flags |= SR_RING_INFO_ALIVE;
	if (r->named && r->fd >= 0 && fstat(r->fd, &st) == 0)
		o.uid = (uint32_t)st.st_uid;
	if (r->named)
		snprintf(o.name, sizeof(o.name), "%s", r->name);
	info_out(info, &o);
	return 0;
}

int sr_ring_probe(const char *name, sr_ring_info *info)
{
	struct sr__ring_hdr h;
	sr_ring_info o;
	char path[512];
	struct stat st;
	const char *p;
	ssize_t got;
	int fd, err;

	if (!name || !info || info->size < INFO_MIN)
		return sr__errorf(-EINVAL, "ring probe: NULL argument, or info->size not set");
	p = name[0] == '/' ? name + 1 : name;
	if (!*p || strchr(p, '/') || strlen(p) > 255)
		return sr__errorf(-EINVAL, "ring probe: bad segment name '%s'", name);
	memset(&o, 0, sizeof(o));
	snprintf(o.name, sizeof(o.name), "/%.254s", p);
	snprintf(path, sizeof(path), "/dev/shm/%s", p);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		err = -errno;
		return sr__errorf(err, "ring probe: '%s': %s", o.name, strerror(-err));
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return sr__errorf(-EINVAL, "ring probe: '%s' is not a regular file", o.name);
	}
	o.bytes = (uint64_t)st.st_size;
	o.uid = (uint32_t)st.st_uid;
	if (sr__shm_in_use(fd) == 1)
		o.flags |= SR_RING_INFO_ALIVE;
	memset(&h, 0, sizeof(h));
	got = pread(fd, &h, sizeof(h), 0);
	close(fd);
	if (got < 0)
		return sr__errorf(-EIO, "ring probe: '%s': %s", o.name, strerror(errno));
	if (got >= 16 && h.magic == SR_STATS_MAGIC) {
		o.kind = SR_SEGMENT_STATS;
	} else if (got >= 16 && h.magic == SR_RING_MAGIC) {
		o.kind = SR_SEGMENT_RING;
		o.version = h.version;
		/* Another format version: only magic and version can be read;
		 * a truncated header is not a usable ring either. */
		if (h.version == SR_RING_FORMAT_VERSION && got == (ssize_t)sizeof(h)) {
			uint64_t bytes = o.bytes;

			info_from_hdr(&o, &h);
			o.bytes = bytes;
		}
	}
	info_out(info, &o);
	return 0;
}
