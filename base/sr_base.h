/*
 * The ground floor (base/): what every part of stepring may use, and the
 * only internal header that envs/ and replay/ may include. Nothing here
 * knows a pool, a ring, an env or a worker; everything above uses these
 * instead of a copy of its own.
 *
 *  - errors (error.c): sr__errorf, sr__clear_error, behind sr_strerror()
 *    and sr_last_error();
 *  - resource limits in messages (limits.c);
 *  - the version (version.c: sr_version(), sr_build_info());
 *  - shared-memory segments (shm.c): room checks, whole-or-nothing
 *    creation, the creator lock, the owner check;
 *  - one clock (sr__now_ns), one futex wrapper (futex.c: sr__futex_wait,
 *    sr__futex_wake, process-private or shared), align_up, cpu_relax, a
 *    single writer's counter add, branch hints, the cache-line size, the
 *    vector clones of hot loops, the finite check's bit tests.
 *
 * Plain C11 plus GNU builtins; the parts with C11 atomics are hidden from
 * C++ (nvcc compiles device_cuda.cu with this header).
 */
#ifndef SR_BASE_H
#define SR_BASE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include "stepring/common.h"

/* ---- errors (error.c) ----------------------------------------------------- */

/* Record a detailed message for sr_last_error() and return @err (a negative
 * errno), so error paths read: return sr__errorf(-EINVAL, "bad %s", x); */
int sr__errorf(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Forget the thread's last error message. */
void sr__clear_error(void);

/* ---- resource limits in messages (limits.c) ------------------------------ */

/*
 * Resource limits in messages (limits.c). sr__thread_errorf: a failed
 * pthread_create (@err, positive or negative) of @what ("cannot start
 * worker thread 2"): -ENOMEM naming RLIMIT_AS when the address space has
 * no room for the thread's stack, -EAGAIN naming RLIMIT_NPROC and
 * kernel.threads-max for any other EAGAIN. sr__spawn_errorf: the same for
 * a failed posix_spawn. sr__as_note: when RLIMIT_AS cannot take @want more
 * bytes, a phrase saying so into @buf, and true; else "" and false.
 */
int sr__thread_errorf(int err, const char *what);
int sr__spawn_errorf(int err, const char *what);
bool sr__as_note(char *buf, size_t n, uint64_t want);

/* ---- shared-memory segments (shm.c) -------------------------------------- */

/*
 * Shared-memory segments (shm.c): room checks before allocating,
 * whole-or-nothing creation, the creator lock that tells a live segment
 * from a leftover across PID namespaces, and the owner check of a reader.
 */
struct stat;
struct sr__shm_seg {
	int fd;                /* holds the creator lock (flock LOCK_EX) */
	void *base;            /* mapped read-write, every page allocated */
	size_t len;
	bool linked;           /* reachable by its name (or unnamed: memfd) */
	bool unlink_on_error;  /* created under its name (no O_TMPFILE) */
	char name[256];        /* "/foo" or "" */
};
/* "/dev/shm" */
const char *sr__shm_dir(void);
/* 0 when @bytes of shared memory fit: -EFBIG above RLIMIT_FSIZE, -ENOMEM
 * above what the machine (MemAvailable, memory cgroup) can give, -ENOSPC
 * above the free space of /dev/shm (@named). The message names both
 * numbers; @what prefixes it. */
int sr__shm_room(uint64_t bytes, bool named, const char *what);
/* Make a locked, allocated, mapped segment of @len bytes: a memfd when
 * @name is NULL, else an unnamed file in /dev/shm that sr__shm_link names
 * once the caller has initialised it. 0 or -errno (message set). */
int sr__shm_make(const char *what, const char *name, size_t len, struct sr__shm_seg *s);
/* Give a segment from sr__shm_make its name: 0, -EEXIST or -errno. */
int sr__shm_link(struct sr__shm_seg *s, const char *what);
/* Unmap and close a segment that failed before or at sr__shm_link. */
void sr__shm_abandon(struct sr__shm_seg *s);
/* 1 when a creator holds the segment's lock (alive), 0 when nobody does
 * (a leftover), -errno when it cannot be told. By fd or by shm name. */
int sr__shm_in_use(int fd);
int sr__shm_in_use_name(const char *name);
/* 0 when @st is a regular file owned by this effective uid, else -EPERM
 * or -EBADMSG with a message naming the owner. */
int sr__shm_trusted(const struct stat *st, const char *what, const char *name);

/* ---- clock, futex, small helpers ------------------------------------------- */

/* The clock of every duration and deadline: CLOCK_MONOTONIC in
 * nanoseconds (the vDSO: no system call). */
static inline uint64_t sr__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * futex (futex.c). Wait while *@addr holds @val, at most @timeout_ms (0:
 * no limit); the kernel rechecks the word, so a wake-up between the
 * caller's last load and the wait is never lost. @shared: the word is in
 * memory other processes map too (a command block); else the process's
 * own (FUTEX_PRIVATE). Returns 0 (woken, or the word had changed:
 * -EAGAIN is folded into 0), -ETIMEDOUT or -EINTR.
 */
#ifndef __cplusplus
int sr__futex_wait(_Atomic uint32_t *addr, uint32_t val, uint32_t timeout_ms, bool shared);
/* Wake up to @n waiters of @addr. */
void sr__futex_wake(_Atomic uint32_t *addr, int n, bool shared);

/* A counter with a single writer: a relaxed load and store (no locked
 * read-modify-write); readers may see it a little stale. */
static inline void sr__add_relaxed(_Atomic uint64_t *c, uint64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + v,
			      memory_order_relaxed);
}
#endif

/* @x rounded up to a multiple of @a, a power of two. */
static inline uint64_t sr__align_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) & ~(a - 1);
}

#define SR_LIKELY(x) __builtin_expect(!!(x), 1)
#define SR_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SR_CACHELINE 128 /* two 64-byte lines: defeats the adjacent-line prefetcher */

/*
 * SR_VECTOR_CLONES on a hot column loop: on x86-64 the function is built
 * twice, for AVX2 and for the baseline (SSE2), and the dynamic loader
 * picks one for the CPU at load time (an ifunc: one indirect call, no
 * per-call test). The vectorizer then works on 32-byte vectors where the
 * CPU has them, while the library still runs on any x86-64. Elsewhere,
 * or where the toolchain lacks ifuncs, it is empty. Define
 * SR_NO_VECTOR_CLONES to turn it off. Sanitizer builds turn it off: the
 * loader runs the ifunc resolver before the sanitizer's runtime is set
 * up, and an instrumented resolver crashes there.
 */
#if !defined(SR_NO_VECTOR_CLONES)
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SR_NO_VECTOR_CLONES 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
	__has_feature(memory_sanitizer)
#define SR_NO_VECTOR_CLONES 1
#endif
#endif
#endif
#if defined(__x86_64__) && defined(__linux__) && defined(__GLIBC__) && \
	!defined(SR_NO_VECTOR_CLONES) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SR_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef SR_VECTOR_CLONES
#define SR_VECTOR_CLONES
#endif
/* The same on a helper that must stay a function of its own (called from
 * code that is not cloned): noinline too, where the compiler takes both
 * (GCC); clang refuses noinline on a multiversioned function, which it
 * never inlines anyway. */
#if defined(__clang__) && !defined(SR_NO_VECTOR_CLONES)
#define SR_VECTOR_CLONES_NOINLINE SR_VECTOR_CLONES
#else
#define SR_VECTOR_CLONES_NOINLINE SR_VECTOR_CLONES __attribute__((noinline))
#endif

/* ---- the finite check's bit tests ------------------------------------------ */

/*
 * The finite check (SR_POOL_F_CHECK_FINITE): a float is NaN or infinite
 * when its exponent bits are all ones. Integer tests on the bits: no
 * floating-point compare (which -ffinite-math-only would fold away) and a
 * straight loop the vectorizer turns into and / compare / or over whole
 * vectors.
 */
static inline uint32_t sr__nonfinite_f(float x)
{
	uint32_t b;

	__builtin_memcpy(&b, &x, sizeof(b));
	return (b & 0x7f800000u) == 0x7f800000u;
}

/* The first non-finite row of a pool, as one word: 1 + its env index,
 * or-ed with what was not finite. */
#define SR__NF_ENV_MASK ((1ull << 40) - 1)
#define SR__NF_OBS (1ull << 40)
#define SR__NF_REW (1ull << 41)

#ifndef __cplusplus
/* Offer env @env's row as the first non-finite one (@what: SR__NF_OBS |
 * SR__NF_REW) to @first (a pool's, or a command block's): kept only if
 * none was seen before (one compare-exchange from 0). Relaxed: the row's
 * publish (release) orders it for whoever reads it after the row. Any
 * thread. */
static inline void sr__nonfinite_offer(_Atomic uint64_t *first, uint64_t env, uint64_t what)
{
	uint64_t zero = 0;

	if (atomic_load_explicit(first, memory_order_relaxed))
		return;
	atomic_compare_exchange_strong_explicit(first, &zero, (env + 1) | what,
						memory_order_relaxed, memory_order_relaxed);
}
#endif

/* Whether any of @a[0 .. @n) is NaN or infinite. The exponent field plus
 * one carries into the sign bit exactly when it is all ones, so an or of
 * those sums has bit 31 set when one is: an and, an add and an or per
 * vector (the or of per-element compares took a compare and an and more). */
static inline uint32_t sr__nonfinite_any(const float *a, size_t n)
{
	uint32_t acc = 0;

	for (size_t i = 0; i < n; i++) {
		uint32_t b;

		__builtin_memcpy(&b, &a[i], sizeof(b));
		acc |= (b & 0x7f800000u) + 0x00800000u;
	}
	return acc >> 31;
}

/* One round of a spin-wait: tells the core (and an SMT sibling) that this
 * thread only polls. */
static inline void sr__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif
