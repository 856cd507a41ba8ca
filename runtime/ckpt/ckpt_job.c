/*
 * The job that writes a checkpoint file (ckpt_file.c has the format).
 *
 * A job owns a temporary file "<dir>/.<name>.tmp.<pid>.<n>" next to the
 * target. One writer (ckpt_uring.c or ckpt_pwrite.c) pulls pieces from
 * sr__ckpt_produce() in file order, in the job's thread: the producer copies
 * section bytes into the writer's staging buffer and folds them into the
 * section CRC, so the CRC covers exactly the bytes handed to the kernel.
 * After the last data write the trailer is written and the file fsynced
 * (io_uring: linked), then closed, renamed over the target and the
 * directory fsynced. On any error the temporary file is removed and the
 * target is left as it was.
 *
 * Threads: the job's fields are written by the creating thread before the
 * writer thread starts (pthread_create orders them), then only by the
 * writer until it stores `done` with release; poll/wait read `done` with
 * acquire before they read the result and the message (pair D).
 */
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_internal.h"
#include "sr_base.h"

/* ---- the job ------------------------------------------------------------- */

_Atomic uint64_t sr__ckpt_fault_at = UINT64_MAX;
_Atomic int sr__ckpt_fault_err = ENOSPC;
_Atomic uint32_t sr__ckpt_chunk_delay_us;

struct sr__ckpt_job {
	char path[PATH_MAX];
	char tmp[PATH_MAX];
	char dir[PATH_MAX];
	int fd;
	uint32_t backend; /* asked */
	uint32_t used;    /* actually used */
	size_t chunk;
	int nice;
	bool set_nice;
	bool has_cpus;
	cpu_set_t cpus;
	int (*prepare)(void *ctx);
	void *prepare_ctx;
	uint32_t n;
	struct sr__ckpt_src src[SR_CKPT_MAX_SECTIONS];
	struct sr__ckpt_entry table[SR_CKPT_MAX_SECTIONS];
	uint64_t trailer_off, total;
	/* producer cursor: cur == -1 is the header */
	int cur;
	uint64_t pos;
	uint32_t crc;
	pthread_t th;
	bool started, joined;
	_Atomic int done; /* pair D: release by the writer, acquire by poll/wait */
	int result;
	char err[512];
	uint64_t ns;
};

int sr__ckpt_fail(sr__ckpt_job *j, int err, const char *fmt, ...)
{
	va_list ap;

	if (j->err[0]) /* keep the first (root) cause */
		return err;
	va_start(ap, fmt);
	vsnprintf(j->err, sizeof(j->err), fmt, ap);
	va_end(ap);
	return err;
}

size_t sr__ckpt_chunk(const sr__ckpt_job *j)
{
	return j->chunk;
}

int sr__ckpt_fd(const sr__ckpt_job *j)
{
	return j->fd;
}

uint32_t sr__ckpt_job_backend(const sr__ckpt_job *j)
{
	return j->used;
}

uint64_t sr__ckpt_job_size(const sr__ckpt_job *j)
{
	return j->total;
}

uint64_t sr__ckpt_job_ns(const sr__ckpt_job *j)
{
	return j->ns;
}

int sr__ckpt_fault_check(const struct sr__ckpt_piece *pc)
{
	uint64_t at = atomic_load_explicit(&sr__ckpt_fault_at, memory_order_relaxed);
	uint32_t us = atomic_load_explicit(&sr__ckpt_chunk_delay_us, memory_order_relaxed);

	if (us)
		usleep(us);
	if (at != UINT64_MAX && pc->off + pc->len > at)
		return -atomic_load_explicit(&sr__ckpt_fault_err, memory_order_relaxed);
	return 0;
}

int sr__ckpt_produce(sr__ckpt_job *j, void *buf, struct sr__ckpt_piece *pc)
{
	if (j->cur < 0) {
		struct sr__ckpt_header *h = buf;
		struct timespec ts;

		memset(buf, 0, SR_CKPT_ALIGN);
		clock_gettime(CLOCK_REALTIME, &ts);
		memcpy(h->magic, SR_CKPT_MAGIC, 8);
		h->format_version = SR_CKPT_FORMAT_VERSION;
		h->header_size = SR_CKPT_ALIGN;
		h->created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		h->endian = 0x01020304u;
		snprintf(h->build_info, sizeof(h->build_info), "%s", sr_build_info());
		h->crc = sr__crc32c(0, h, offsetof(struct sr__ckpt_header, crc));
		pc->off = 0;
		pc->len = SR_CKPT_ALIGN;
		pc->ptr = buf;
		j->cur = 0;
		j->pos = 0;
		j->crc = 0;
		return 1;
	}
	while ((uint32_t)j->cur < j->n && j->src[j->cur].len == 0) {
		j->table[j->cur].crc = sr__crc32c(0, NULL, 0);
		j->cur++;
	}
	if ((uint32_t)j->cur >= j->n)
		return 0;

	const struct sr__ckpt_src *s = &j->src[j->cur];
	uint64_t rem = s->len - j->pos;
	size_t n = rem < j->chunk ? (size_t)rem : j->chunk;
	size_t padded = (size_t)sr__align_up(n, SR_CKPT_ALIGN);

	const void *m = NULL;

	if (s->map && n % SR_CKPT_ALIGN == 0)
		m = s->map(s->ctx, j->pos, n);
	if (m) {
		j->crc = sr__crc32c(j->crc, m, n);
		pc->off = j->table[j->cur].offset + j->pos;
		pc->len = n;
		pc->ptr = m;
		goto advance;
	}
	if (s->data) {
		memcpy(buf, (const char *)s->data + j->pos, n);
	} else {
		int err = s->fill(s->ctx, buf, j->pos, n);
		if (err)
			return sr__ckpt_fail(j, err, "checkpoint: producing section %s failed: %s",
					     sr__ckpt_section_name(s->type), sr_strerror(err));
	}
	if (padded > n)
		memset((char *)buf + n, 0, padded - n);
	j->crc = sr__crc32c(j->crc, buf, n);
	pc->off = j->table[j->cur].offset + j->pos;
	pc->len = padded;
	pc->ptr = buf;
advance:
	j->pos += n;
	if (j->pos == s->len) {
		j->table[j->cur].crc = j->crc;
		j->crc = 0;
		j->pos = 0;
		j->cur++;
	}
	return 1;
}

void sr__ckpt_produce_trailer(sr__ckpt_job *j, void *buf, struct sr__ckpt_piece *pc)
{
	struct sr__ckpt_footer *f =
		(struct sr__ckpt_footer *)((char *)buf + SR_CKPT_ALIGN - sizeof(*f));

	memset(buf, 0, SR_CKPT_ALIGN);
	memcpy(buf, j->table, j->n * sizeof(j->table[0]));
	memcpy(f->magic, SR_CKPT_END_MAGIC, 8);
	f->format_version = SR_CKPT_FORMAT_VERSION;
	f->n_sections = j->n;
	f->file_size = j->total;
	f->trailer_offset = j->trailer_off;
	f->table_crc = sr__crc32c(0, j->table, j->n * sizeof(j->table[0]));
	f->crc = sr__crc32c(0, f, offsetof(struct sr__ckpt_footer, crc));
	pc->off = j->trailer_off;
	pc->len = SR_CKPT_ALIGN;
	pc->ptr = buf;
}

static atomic_flag said_fallback = ATOMIC_FLAG_INIT;

static void *job_thread(void *arg);

static int run_job(sr__ckpt_job *j)
{
	const char *why = NULL;
	int err, dfd;
	uint64_t t0 = sr__now_ns();

	if (j->set_nice) {
		/* Lower the writer below the step loop; a thread's own nice value
		 * (Linux: per thread). Failure only costs latency. */
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), j->nice);
		if (j->has_cpus)
			pthread_setaffinity_np(pthread_self(), sizeof(j->cpus), &j->cpus);
	}

	if (j->prepare) {
		err = j->prepare(j->prepare_ctx);
		if (err) {
			err = sr__ckpt_fail(j, err, "checkpoint: preparing the data failed: %s",
					    sr_strerror(err));
			goto fail;
		}
	}
	/* Reserve the space first: a full disk fails here, before any write. */
	err = posix_fallocate(j->fd, 0, (off_t)j->total);
	if (err && err != EOPNOTSUPP && err != EINVAL) {
		err = sr__ckpt_fail(j, -err, "checkpoint: cannot reserve %llu bytes for '%s': %s",
				    (unsigned long long)j->total, j->path, strerror(err));
		goto fail;
	}

	err = SR__CKPT_REFUSED;
	if (j->backend == SR_CKPT_BACKEND_AUTO || j->backend == SR_CKPT_BACKEND_URING) {
		j->used = SR_CKPT_BACKEND_URING;
		err = sr__ckpt_run_uring(j, &why);
		if (err == SR__CKPT_REFUSED && !atomic_flag_test_and_set(&said_fallback))
			fprintf(stderr,
				"stepring: io_uring is not available (%s); checkpoints are written "
				"by a pwrite thread instead\n",
				why ? why : "refused");
	}
	if (err == SR__CKPT_REFUSED) {
		j->used = j->backend == SR_CKPT_BACKEND_SYNC ? SR_CKPT_BACKEND_SYNC
							      : SR_CKPT_BACKEND_PWRITE;
		err = sr__ckpt_run_pwrite(j);
	}
	if (err)
		goto fail;
	if (close(j->fd) < 0) {
		j->fd = -1;
		err = sr__ckpt_fail(j, -errno, "checkpoint: close of '%s' failed: %s", j->tmp,
				    strerror(errno));
		goto fail;
	}
	j->fd = -1;
	if (rename(j->tmp, j->path) < 0) {
		err = sr__ckpt_fail(j, -errno, "checkpoint: rename to '%s' failed: %s", j->path,
				    strerror(errno));
		goto fail;
	}
	/* The rename is durable only once the directory is. */
	dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		err = sr__ckpt_fail(j, -errno, "checkpoint: fsync of directory '%s' failed: %s",
				    j->dir, strerror(errno));
		if (dfd >= 0)
			close(dfd);
		j->ns = sr__now_ns() - t0;
		return err;
	}
	close(dfd);
	j->ns = sr__now_ns() - t0;
	return 0;

fail:
	if (j->fd >= 0) {
		close(j->fd);
		j->fd = -1;
	}
	unlink(j->tmp);
	j->ns = sr__now_ns() - t0;
	return err;
}

static void *job_thread(void *arg)
{
	sr__ckpt_job *j = arg;

	j->result = run_job(j);
	atomic_store_explicit(&j->done, 1, memory_order_release); /* D: release */
	return NULL;
}

int sr__ckpt_job_create(const char *path, const struct sr__ckpt_src *srcs, uint32_t n,
			uint32_t backend, const sr_ckpt_opts *opts, sr__ckpt_job **out)
{
	static _Atomic unsigned seq;
	sr_ckpt_opts def;
	sr__ckpt_job *j;
	const char *slash, *base;
	uint64_t off;
	int flags, err;

	*out = NULL;
	if (!opts) {
		sr_ckpt_opts_init(&def);
		opts = &def;
	}
	if (!path || !path[0])
		return sr__errorf(-EINVAL, "checkpoint: empty path");
	if (n > SR_CKPT_MAX_SECTIONS)
		return sr__errorf(-EINVAL, "checkpoint: %u sections, at most %d", n,
				  SR_CKPT_MAX_SECTIONS);
	if (backend > SR_CKPT_BACKEND_SYNC)
		return sr__errorf(-EINVAL, "checkpoint: unknown backend %u", backend);
	if ((opts->flags & SR_CKPT_F_CHUNK) &&
	    (opts->chunk_size < (64u << 10) || opts->chunk_size % SR_CKPT_ALIGN ||
	     opts->chunk_size > (256u << 20)))
		return sr__errorf(-EINVAL,
				  "checkpoint: chunk_size %llu must be a multiple of 4096 in "
				  "[64 KiB, 256 MiB]",
				  (unsigned long long)opts->chunk_size);
	for (uint32_t i = 0; i < n; i++)
		if (srcs[i].type == 0 || (srcs[i].len && !srcs[i].data && !srcs[i].fill))
			return sr__errorf(-EINVAL, "checkpoint: section %u has no type or no data",
					  i);
	if (strlen(path) + 32 >= PATH_MAX)
		return sr__errorf(-ENAMETOOLONG, "checkpoint: path too long");

	j = calloc(1, sizeof(*j));
	if (!j)
		return sr__errorf(-ENOMEM, "checkpoint: out of memory");
	j->fd = -1;
	j->backend = backend;
	j->used = backend;
	j->chunk = (opts->flags & SR_CKPT_F_CHUNK) ? (size_t)opts->chunk_size
						   : SR_CKPT_DEFAULT_CHUNK;
	j->set_nice = backend != SR_CKPT_BACKEND_SYNC;
	j->nice = (opts->flags & SR_CKPT_F_NICE) ? opts->nice : 10;
	j->n = n;
	memcpy(j->src, srcs, n * sizeof(*srcs));
	snprintf(j->path, sizeof(j->path), "%s", path);
	slash = strrchr(path, '/');
	if (slash) {
		base = slash + 1;
		snprintf(j->dir, sizeof(j->dir), "%.*s", (int)(slash - path + (slash == path)),
			 path);
	} else {
		base = path;
		snprintf(j->dir, sizeof(j->dir), ".");
	}
	if (!base[0]) {
		free(j);
		return sr__errorf(-EINVAL, "checkpoint: '%s' names a directory, not a file", path);
	}
	if (snprintf(j->tmp, sizeof(j->tmp), "%s/.%s.tmp.%ld.%u", j->dir, base, (long)getpid(),
		     atomic_fetch_add(&seq, 1)) >= (int)sizeof(j->tmp)) {
		free(j);
		return sr__errorf(-ENAMETOOLONG, "checkpoint: path too long");
	}

	/* Temporaries left by writers of this target that were killed midway
	 * are removed (best effort: a failure here is not the job's). */
	sr_checkpoint_clean(path, SR_CKPT_CLEAN_REMOVE, NULL, NULL);

	off = SR_CKPT_ALIGN;
	for (uint32_t i = 0; i < n; i++) {
		j->table[i].type = srcs[i].type;
		j->table[i].offset = off;
		j->table[i].length = srcs[i].len;
		off += sr__align_up(srcs[i].len, SR_CKPT_ALIGN);
	}
	j->trailer_off = off;
	j->total = off + SR_CKPT_ALIGN;
	j->cur = -1;
	{
		/* A file past RLIMIT_FSIZE raises SIGXFSZ, which kills the
		 * process (and leaves the temporary): refuse it here instead,
		 * before anything is created. */
		struct rlimit rl;

		if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
		    j->total > (uint64_t)rl.rlim_cur) {
			err = sr__errorf(-EFBIG,
					 "checkpoint: '%s' needs %llu bytes, above the file size "
					 "limit of %llu bytes (ulimit -f)",
					 path, (unsigned long long)j->total,
					 (unsigned long long)rl.rlim_cur);
			free(j);
			return err;
		}
	}

	flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
	/* io_uring + O_DIRECT: truly asynchronous DMA from our buffers, no
	 * page-cache copy competing with the step loop for CPU. */
	if ((opts->flags & SR_CKPT_F_DIRECT) ||
	    ((backend == SR_CKPT_BACKEND_AUTO || backend == SR_CKPT_BACKEND_URING) &&
	     !(opts->flags & SR_CKPT_F_BUFFERED))) {
		j->fd = open(j->tmp, flags | O_DIRECT, 0644);
		if (j->fd < 0 && errno == EINVAL) /* tmpfs and friends: buffered */
			j->fd = open(j->tmp, flags, 0644);
	} else {
		j->fd = open(j->tmp, flags, 0644);
	}
	if (j->fd < 0) {
		err = sr__errorf(-errno, "checkpoint: cannot create '%s' next to '%s': %s", j->tmp,
				 path, strerror(errno));
		free(j);
		return err;
	}
	*out = j;
	return 0;
}

void sr__ckpt_job_set_nice(sr__ckpt_job *j, int nice)
{
	j->nice = nice;
}

void sr__ckpt_job_set_prepare(sr__ckpt_job *j, int (*fn)(void *ctx), void *ctx)
{
	j->prepare = fn;
	j->prepare_ctx = ctx;
}

void sr__ckpt_job_set_cpus(sr__ckpt_job *j, const void *cpuset, size_t size)
{
	j->has_cpus = cpuset && size == sizeof(cpu_set_t) && CPU_COUNT((const cpu_set_t *)cpuset);
	if (j->has_cpus)
		memcpy(&j->cpus, cpuset, sizeof(j->cpus));
}

const void *sr__ckpt_job_cpus(const sr__ckpt_job *j, size_t *size)
{
	*size = sizeof(j->cpus);
	return j->has_cpus && j->set_nice ? &j->cpus : NULL;
}

int sr__ckpt_job_start(sr__ckpt_job *j)
{
	int err;

	if (j->started)
		return sr__errorf(-EINVAL, "checkpoint: job already started");
	j->started = true;
	if (j->backend == SR_CKPT_BACKEND_SYNC) {
		j->result = run_job(j);
		j->joined = true;
		atomic_store_explicit(&j->done, 1, memory_order_release);
		if (j->result)
			return sr__errorf(j->result, "%s", j->err[0] ? j->err : sr_strerror(j->result));
		return 0;
	}
	err = pthread_create(&j->th, NULL, job_thread, j);
	if (err) {
		j->started = false;
		return sr__thread_errorf(err, "checkpoint: cannot start the writer thread");
	}
	return 0;
}

static int job_result(sr__ckpt_job *j)
{
	if (!j->joined) {
		pthread_join(j->th, NULL);
		j->joined = true;
	}
	if (j->result)
		return sr__errorf(j->result, "%s", j->err[0] ? j->err : sr_strerror(j->result));
	return 0;
}

int sr__ckpt_job_poll(sr__ckpt_job *j)
{
	if (!j->started)
		return 0;
	if (!atomic_load_explicit(&j->done, memory_order_acquire)) /* D: acquire */
		return -EINPROGRESS;
	return job_result(j);
}

int sr__ckpt_job_wait(sr__ckpt_job *j)
{
	if (!j->started)
		return 0;
	return job_result(j);
}

void sr__ckpt_job_destroy(sr__ckpt_job *j)
{
	if (!j)
		return;
	if (j->started && !j->joined)
		pthread_join(j->th, NULL);
	if (!j->started && j->fd >= 0) {
		close(j->fd);
		unlink(j->tmp);
	}
	free(j);
}

int sr__ckpt_write(const char *path, const struct sr__ckpt_src *srcs, uint32_t n,
		   uint32_t backend, const sr_ckpt_opts *opts)
{
	sr__ckpt_job *j;
	int err = sr__ckpt_job_create(path, srcs, n, backend, opts, &j);

	if (err)
		return err;
	err = sr__ckpt_job_start(j);
	if (!err)
		err = sr__ckpt_job_wait(j);
	sr__ckpt_job_destroy(j);
	return err;
}
