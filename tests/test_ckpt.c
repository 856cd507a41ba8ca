/* Checkpoint format and writers on raw sections: CRC32C, round trips with
 * every backend, verify/info, and the faults: truncation, a flipped bit in
 * each section, a wrong version, ENOSPC (injected and on a tiny tmpfs),
 * SIGKILL in the middle of a write (the temporary it leaves is removed by
 * the next checkpoint or sr_checkpoint_clean, never a live writer's), io_uring
 * refused by seccomp. In every fault the previous checkpoint stays intact
 * and loads. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "stepring.h"
#include "stepring/checkpoint.h"
#include "ckpt_internal.h"
#include "bench_pool.h" /* bench_ckpt_backend_parse, the CLI's */
#include "helpers.h"

static char dir[256];

static int setup(void **st)
{
	(void)st;
	return t_mkdtemp(dir, sizeof(dir), "sr-ckpt");
}

static int teardown(void **st)
{
	(void)st;
	return t_rmtree(dir);
}

static void pathf(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

/* Deterministic bytes. */
static void fill_bytes(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed;

	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(sr_splitmix64(&x) >> 56);
}

/* A fill() source: bytes = f(offset), checks the call order. */
struct gen {
	uint64_t next_off;
	uint64_t seed;
	int calls;
};

static int gen_fill(void *ctx, void *dst, uint64_t off, size_t n)
{
	struct gen *g = ctx;
	uint8_t *d = dst;

	if (off != g->next_off)
		return -EIO;
	for (size_t i = 0; i < n; i++)
		d[i] = (uint8_t)((off + i) * 131 + g->seed);
	g->next_off = off + n;
	g->calls++;
	return 0;
}

#define NS 5
static uint8_t *data[NS];
static const size_t sizes[NS] = {1, 4095, 4096, 0, (5u << 20) + 17};

static void make_sources(struct sr__ckpt_src *src, struct gen *g, uint64_t seed)
{
	for (int i = 0; i < NS; i++) {
		free(data[i]);
		data[i] = malloc(sizes[i] + 1);
		fill_bytes(data[i], sizes[i], seed + (uint64_t)i);
		src[i] = (struct sr__ckpt_src){SR_CKPT_SECT_USER + (uint32_t)i, sizes[i], data[i],
					       NULL, NULL};
	}
	*g = (struct gen){.seed = seed};
	src[NS] = (struct sr__ckpt_src){SR_CKPT_SECT_USER + NS, 9u << 20, NULL, gen_fill, g};
}

static void check_file(const char *path, uint64_t seed)
{
	sr_ckpt_info info;
	struct sr__ckpt_file f;
	int fd;

	assert_int_equal(sr_checkpoint_verify(path, &info), 0);
	assert_int_equal(info.format_version, SR_CKPT_FORMAT_VERSION);
	assert_int_equal(info.n_sections, NS + 1);
	assert_string_equal(info.env_id, "");
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(sr__ckpt_verify_fd(fd, &f, NULL), 0);
	for (int i = 0; i < NS; i++) {
		uint8_t *b = malloc(sizes[i] + 1), *want = malloc(sizes[i] + 1);
		fill_bytes(want, sizes[i], seed + (uint64_t)i);
		assert_int_equal(info.sections[i].length, sizes[i]);
		assert_int_equal(info.sections[i].offset % 4096, 0);
		assert_int_equal(sr__ckpt_read(&f, i, 0, b, sizes[i]), 0);
		assert_memory_equal(b, want, sizes[i]);
		assert_int_equal(info.sections[i].crc, sr__crc32c(0, want, sizes[i]));
		free(b);
		free(want);
	}
	uint8_t *b = malloc(9u << 20);
	assert_int_equal(sr__ckpt_read(&f, NS, 0, b, 9u << 20), 0);
	for (size_t k = 0; k < (9u << 20); k += 4099)
		assert_int_equal(b[k], (uint8_t)(k * 131 + seed));
	free(b);
	close(fd);
}

static int write_ckpt(const char *path, uint32_t backend, uint64_t seed)
{
	struct sr__ckpt_src src[NS + 1];
	struct gen g;

	make_sources(src, &g, seed);
	return sr__ckpt_write(path, src, NS + 1, backend, NULL);
}

/* No temporary files left next to the target. */
static int count_tmp(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".tmp."))
			n++;
	closedir(d);
	return n;
}

/* ---- CRC32C -------------------------------------------------------------- */

static void test_crc32c(void **st)
{
	static const uint8_t zeros[32], ones[32] = {[0 ... 31] = 0xff};
	uint8_t buf[1000];

	(void)st;
	/* Check values of the CRC32C standard (RFC 3720 B.4, and "123456789"). */
	assert_int_equal(sr__crc32c(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(sr__crc32c_sw(0, "123456789", 9), 0xe3069283u);
	assert_int_equal(sr__crc32c(0, zeros, 32), 0x8a9136aau);
	assert_int_equal(sr__crc32c(0, ones, 32), 0x62a8ab43u);
	assert_int_equal(sr__crc32c(0, NULL, 0), 0);
	fill_bytes(buf, sizeof(buf), 7);
	for (size_t a = 0; a < 9; a++)
		for (size_t n = 0; n + a <= sizeof(buf); n += 37) {
			uint32_t whole = sr__crc32c_sw(0, buf + a, n);
			assert_int_equal(sr__crc32c(0, buf + a, n), whole);
			/* Incremental == one shot. */
			uint32_t c = sr__crc32c(0, buf + a, n / 3);
			c = sr__crc32c(c, buf + a + n / 3, n - n / 3);
			assert_int_equal(c, whole);
		}
}

/* ---- round trips ----------------------------------------------------------- */

static void test_roundtrip_backends(void **st)
{
	char path[300];

	(void)st;
	pathf(path, sizeof(path), "rt.ckpt");
	for (uint32_t b = SR_CKPT_BACKEND_AUTO; b <= SR_CKPT_BACKEND_SYNC; b++) {
		assert_int_equal(write_ckpt(path, b, 100 + b), 0);
		check_file(path, 100 + b);
	}
	assert_int_equal(count_tmp(), 0);
}

static void test_direct_and_chunk(void **st)
{
	struct sr__ckpt_src src[NS + 1];
	struct gen g;
	char path[300];
	sr_ckpt_opts o;

	(void)st;
	pathf(path, sizeof(path), "direct.ckpt");
	sr_ckpt_opts_init(&o);
	o.flags = SR_CKPT_F_DIRECT | SR_CKPT_F_CHUNK;
	o.chunk_size = 64 << 10;
	for (uint32_t b = SR_CKPT_BACKEND_URING; b <= SR_CKPT_BACKEND_SYNC; b++) {
		make_sources(src, &g, 7 + b);
		assert_int_equal(sr__ckpt_write(path, src, NS + 1, b, &o), 0);
		check_file(path, 7 + b);
	}
	o.chunk_size = 1000; /* not a multiple of 4096 */
	make_sources(src, &g, 1);
	assert_int_equal(sr__ckpt_write(path, src, NS + 1, SR_CKPT_BACKEND_SYNC, &o), -EINVAL);
	assert_non_null(strstr(sr_last_error(), "chunk_size"));
}

static void test_bad_args(void **st)
{
	struct sr__ckpt_src src[1] = {{SR_CKPT_SECT_USER, 4, "abcd", NULL, NULL}};
	char path[300];

	(void)st;
	pathf(path, sizeof(path), "nodir/x.ckpt");
	assert_int_equal(sr__ckpt_write(path, src, 1, SR_CKPT_BACKEND_SYNC, NULL), -ENOENT);
	assert_non_null(strstr(sr_last_error(), "cannot create"));
	assert_int_equal(sr__ckpt_write(dir, src, 1, 9, NULL), -EINVAL);
	pathf(path, sizeof(path), "");
	assert_int_equal(sr__ckpt_write(path, src, 1, SR_CKPT_BACKEND_SYNC, NULL), -EINVAL);
	assert_int_equal(sr_checkpoint_verify("/nonexistent/x", NULL), -ENOENT);
	assert_string_equal(sr_ckpt_backend_name(SR_CKPT_BACKEND_PWRITE), "pwrite");
	assert_int_equal(bench_ckpt_backend_parse("uring"), SR_CKPT_BACKEND_URING);
	assert_int_equal(bench_ckpt_backend_parse("nope"), -EINVAL);
	assert_string_equal(sr__ckpt_section_name(SR_CKPT_SECT_ENV_STATES), "env_states");
}

/* ---- corruption ------------------------------------------------------------ */

static void copy_file(const char *from, const char *to)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

static void flip_bit(const char *path, uint64_t off, int bit)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, (off_t)off), 1);
	b ^= (uint8_t)(1u << bit);
	assert_int_equal(pwrite(fd, &b, 1, (off_t)off), 1);
	close(fd);
}

static void test_truncated(void **st)
{
	char path[300], bad[300];
	sr_ckpt_info info;
	struct stat sb;

	(void)st;
	pathf(path, sizeof(path), "good.ckpt");
	pathf(bad, sizeof(bad), "trunc.ckpt");
	assert_int_equal(write_ckpt(path, SR_CKPT_BACKEND_SYNC, 1), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sr_checkpoint_verify(path, &info), 0);
	const off_t cuts[] = {0, 100, 4096, 8191, 8192, (off_t)info.sections[4].offset + 10,
			      sb.st_size - 4096, sb.st_size - 64, sb.st_size - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		copy_file(path, bad);
		assert_int_equal(truncate(bad, cuts[i]), 0);
		assert_int_equal(sr_checkpoint_verify(bad, NULL), -EBADMSG);
		assert_true(sr_last_error()[0] != '\0');
	}
	/* Extended by garbage: the trailer is no longer at the end. */
	copy_file(path, bad);
	assert_int_equal(truncate(bad, sb.st_size + 4096), 0);
	assert_int_equal(sr_checkpoint_verify(bad, NULL), -EBADMSG);
	check_file(path, 1); /* the original is still good */
}

static void test_flipped_bits(void **st)
{
	char path[300], bad[300];
	sr_ckpt_info info;
	struct stat sb;

	(void)st;
	pathf(path, sizeof(path), "good.ckpt");
	pathf(bad, sizeof(bad), "flip.ckpt");
	assert_int_equal(write_ckpt(path, SR_CKPT_BACKEND_PWRITE, 2), 0);
	assert_int_equal(sr_checkpoint_verify(path, &info), 0);
	assert_int_equal(stat(path, &sb), 0);
	/* A bit in each non-empty section: first, middle and last byte. */
	for (uint32_t i = 0; i < info.n_sections; i++) {
		const sr_ckpt_section_info *s = &info.sections[i];
		if (!s->length)
			continue;
		const uint64_t at[] = {0, s->length / 2, s->length - 1};
		for (int k = 0; k < 3; k++) {
			copy_file(path, bad);
			flip_bit(bad, s->offset + at[k], k * 3);
			assert_int_equal(sr_checkpoint_verify(bad, NULL), -EBADMSG);
			assert_non_null(strstr(sr_last_error(), "corrupt"));
			assert_non_null(strstr(sr_last_error(), "user"));
		}
	}
	/* Header, section table and footer. */
	const uint64_t meta[] = {0, 20, 100, (uint64_t)sb.st_size - 4096,
				 (uint64_t)sb.st_size - 4096 + 40, (uint64_t)sb.st_size - 64,
				 (uint64_t)sb.st_size - 30, (uint64_t)sb.st_size - 1};
	for (size_t k = 0; k < sizeof(meta) / sizeof(meta[0]); k++) {
		copy_file(path, bad);
		flip_bit(bad, meta[k], (int)(k % 8));
		int r = sr_checkpoint_verify(bad, NULL);
		assert_true(r == -EBADMSG || r == -EPROTO);
	}
	check_file(path, 2);
}

static void test_wrong_version(void **st)
{
	char path[300];
	struct sr__ckpt_header h;
	int fd;

	(void)st;
	pathf(path, sizeof(path), "ver.ckpt");
	assert_int_equal(write_ckpt(path, SR_CKPT_BACKEND_SYNC, 3), 0);
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	h.format_version = SR_CKPT_FORMAT_VERSION + 1;
	h.crc = sr__crc32c(0, &h, offsetof(struct sr__ckpt_header, crc));
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	close(fd);
	assert_int_equal(sr_checkpoint_verify(path, NULL), -EPROTO);
	assert_non_null(strstr(sr_last_error(), "format version 2"));
	/* Not a checkpoint at all. */
	fd = open(path, O_RDWR | O_TRUNC);
	assert_true(fd >= 0);
	uint8_t junk[3 * 4096];
	fill_bytes(junk, sizeof(junk), 5);
	assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
	close(fd);
	assert_int_equal(sr_checkpoint_verify(path, NULL), -EBADMSG);
	assert_non_null(strstr(sr_last_error(), "magic"));
}

/* ---- write faults ---------------------------------------------------------- */

static void test_enospc_injected(void **st)
{
	char path[300];

	(void)st;
	pathf(path, sizeof(path), "inj.ckpt");
	for (uint32_t b = SR_CKPT_BACKEND_AUTO; b <= SR_CKPT_BACKEND_SYNC; b++) {
		sr_ckpt_info info;
		assert_int_equal(write_ckpt(path, b, 10), 0);
		assert_int_equal(sr_checkpoint_verify(path, &info), 0);
		/* header, first section, middle, last data piece, trailer */
		const uint64_t at[] = {0, 4096, 6u << 20, info.file_size - 4097,
				       info.file_size - 4095};
		for (size_t k = 0; k < sizeof(at) / sizeof(at[0]); k++) {
			atomic_store(&sr__ckpt_fault_err, ENOSPC);
			atomic_store(&sr__ckpt_fault_at, at[k]);
			int r = write_ckpt(path, b, 11);
			atomic_store(&sr__ckpt_fault_at, UINT64_MAX);
			assert_int_equal(r, -ENOSPC);
			assert_non_null(strcasestr(sr_last_error(), "no space left"));
			check_file(path, 10); /* previous one intact */
			assert_int_equal(count_tmp(), 0);
		}
		atomic_store(&sr__ckpt_fault_err, EIO);
		atomic_store(&sr__ckpt_fault_at, 1u << 20);
		assert_int_equal(write_ckpt(path, b, 12), -EIO);
		atomic_store(&sr__ckpt_fault_at, UINT64_MAX);
		check_file(path, 10);
	}
}

static void test_enospc_tmpfs(void **st)
{
	char mnt[300], path[400];
	struct sr__ckpt_src src[1];
	uint8_t *big = calloc(1, 3u << 20);

	(void)st;
	pathf(mnt, sizeof(mnt), "tiny");
	assert_int_equal(mkdir(mnt, 0700), 0);
	if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m") < 0) {
		rmdir(mnt);
		free(big);
		skip(); /* needs CAP_SYS_ADMIN */
	}
	snprintf(path, sizeof(path), "%s/c.ckpt", mnt);
	src[0] = (struct sr__ckpt_src){SR_CKPT_SECT_USER, 1u << 20, big, NULL, NULL};
	assert_int_equal(sr__ckpt_write(path, src, 1, SR_CKPT_BACKEND_SYNC, NULL), 0);
	assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
	/* The old file (1 MiB) still takes room: 1.5 MiB more does not fit. */
	src[0].len = 3u << 19;
	for (uint32_t b = SR_CKPT_BACKEND_AUTO; b <= SR_CKPT_BACKEND_SYNC; b++) {
		big[0] = (uint8_t)b;
		assert_int_equal(sr__ckpt_write(path, src, 1, b, NULL), -ENOSPC);
		assert_non_null(strstr(sr_last_error(), "c.ckpt"));
		assert_int_equal(sr_checkpoint_verify(path, NULL), 0);
	}
	/* Nothing left behind: a small one fits again. */
	src[0].len = 4096;
	assert_int_equal(sr__ckpt_write(path, src, 1, SR_CKPT_BACKEND_URING, NULL), 0);
	assert_int_equal(umount(mnt), 0);
	rmdir(mnt);
	free(big);
}

/* Child: write a 64 MiB checkpoint slowly; the parent kills it. */
static void test_sigkill(void **st)
{
	char path[300];

	(void)st;
	pathf(path, sizeof(path), "kill.ckpt");
	for (uint32_t b = SR_CKPT_BACKEND_URING; b <= SR_CKPT_BACKEND_SYNC; b++) {
		int status, pfd[2];
		char c;
		assert_int_equal(write_ckpt(path, SR_CKPT_BACKEND_SYNC, 20), 0);
		assert_int_equal(pipe(pfd), 0);
		pid_t pid = fork();
		assert_true(pid >= 0);
		if (pid == 0) {
			static uint8_t blob[64u << 20];
			struct sr__ckpt_src s = {SR_CKPT_SECT_USER, sizeof(blob), blob, NULL, NULL};
			atomic_store(&sr__ckpt_chunk_delay_us, 20000);
			if (write(pfd[1], "g", 1) != 1)
				_exit(3);
			sr__ckpt_write(path, &s, 1, b, NULL);
			_exit(0); /* must not get here: 16 chunks * 20 ms */
		}
		assert_int_equal(read(pfd[0], &c, 1), 1);
		/* In the middle of the writes: once the temporary file exists
		 * (a fixed sleep alone could kill a child that a loaded machine
		 * had not run yet), then a few 20 ms chunks more. */
		for (int i = 0; i < 10000 && count_tmp() < 1; i++)
			usleep(1000);
		usleep(60000);
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		assert_true(WIFSIGNALED(status));
		close(pfd[0]);
		close(pfd[1]);
		check_file(path, 20); /* the previous checkpoint loads */
		/* The dead writer's temporary file is left, never the target. */
		assert_int_equal(count_tmp(), 1);
		/* Reported, then removed by the clean call or by the next
		 * checkpoint to the same target (alternately). */
		assert_int_equal(sr_checkpoint_clean(path, 0, NULL, NULL), 1);
		assert_int_equal(count_tmp(), 1);
		if (b % 2) {
			assert_int_equal(sr_checkpoint_clean(path, SR_CKPT_CLEAN_REMOVE, NULL, NULL),
					 1);
		} else {
			assert_int_equal(write_ckpt(path, b, 21), 0);
			check_file(path, 21);
		}
		assert_int_equal(count_tmp(), 0);
	}
}

static void on_stale(void *ctx, const char *tmp, long pid, uint64_t bytes)
{
	long *want = ctx;

	(void)bytes;
	assert_int_equal(pid, *want);
	assert_non_null(strstr(tmp, ".tmp."));
}

static void touch(const char *name)
{
	char p[400];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
}

static bool exists(const char *name)
{
	char p[400];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

/* Only the temporaries of this target whose writer is gone are removed:
 * never a live process's (this one's or another's), another target's, or a
 * name that merely looks alike. */
static void test_stale_temps(void **st)
{
	char path[300], n_dead[128], n_live[128], n_self[128], n_other[128], n_odd[128];
	pid_t live, dead;
	int status;
	long want;

	(void)st;
	pathf(path, sizeof(path), "stale.ckpt");
	live = fork();
	assert_true(live >= 0);
	if (live == 0) {
		pause();
		_exit(0);
	}
	dead = fork();
	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, &status, 0), dead);
	snprintf(n_dead, sizeof(n_dead), ".stale.ckpt.tmp.%ld.3", (long)dead);
	snprintf(n_live, sizeof(n_live), ".stale.ckpt.tmp.%ld.0", (long)live);
	snprintf(n_self, sizeof(n_self), ".stale.ckpt.tmp.%ld.99", (long)getpid());
	snprintf(n_other, sizeof(n_other), ".other.ckpt.tmp.%ld.3", (long)dead);
	snprintf(n_odd, sizeof(n_odd), ".stale.ckpt.tmp.%ld.3x", (long)dead);
	touch(n_dead);
	touch(n_live);
	touch(n_self);
	touch(n_other);
	touch(n_odd);

	want = dead;
	assert_int_equal(sr_checkpoint_clean(path, 0, on_stale, &want), 1);
	assert_true(exists(n_dead));
	assert_int_equal(sr_checkpoint_clean(path, 1u << 5, NULL, NULL), -EINVAL);
	assert_int_equal(sr_checkpoint_clean(NULL, 0, NULL, NULL), -EINVAL);
	/* A new checkpoint to the target removes the dead writer's file. */
	assert_int_equal(write_ckpt(path, SR_CKPT_BACKEND_SYNC, 5), 0);
	assert_false(exists(n_dead));
	assert_true(exists(n_live));
	assert_true(exists(n_self));
	assert_true(exists(n_other));
	assert_true(exists(n_odd));
	assert_int_equal(sr_checkpoint_clean(path, SR_CKPT_CLEAN_REMOVE, NULL, NULL), 0);
	assert_true(exists(n_live));

	/* Once the live writer is gone, its file is stale too. */
	kill(live, SIGKILL);
	assert_int_equal(waitpid(live, &status, 0), live);
	want = live;
	assert_int_equal(sr_checkpoint_clean(path, SR_CKPT_CLEAN_REMOVE, on_stale, &want), 1);
	assert_false(exists(n_live));
	assert_true(exists(n_self));
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -f '%s'/.*.tmp.*", dir);
	assert_int_equal(system(cmd), 0);
}

/* io_uring refused by seccomp (as in many containers): the writer falls back
 * to the pwrite thread, says so once, and the file is as good. */
static void test_uring_refused(void **st)
{
	char path[300];
	int status;

	(void)st;
	pathf(path, sizeof(path), "seccomp.ckpt");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sock_filter filt[] = {
			BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
			BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
			BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		};
		struct sock_fprog prog = {.len = 4, .filter = filt};
		struct sr__ckpt_src src[NS + 1];
		struct gen g;
		sr__ckpt_job *j;
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP,
								      SECCOMP_MODE_FILTER, &prog))
			_exit(77);
		make_sources(src, &g, 30);
		if (sr__ckpt_job_create(path, src, NS + 1, SR_CKPT_BACKEND_AUTO, NULL, &j) ||
		    sr__ckpt_job_start(j) || sr__ckpt_job_wait(j))
			_exit(1);
		if (sr__ckpt_job_backend(j) != SR_CKPT_BACKEND_PWRITE)
			_exit(2);
		sr__ckpt_job_destroy(j);
		/* Asked for io_uring explicitly: same fallback. */
		if (write_ckpt(path, SR_CKPT_BACKEND_URING, 30))
			_exit(3);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip();
	assert_int_equal(WEXITSTATUS(status), 0);
	check_file(path, 30);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_crc32c),
		cmocka_unit_test(test_roundtrip_backends),
		cmocka_unit_test(test_direct_and_chunk),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_flipped_bits),
		cmocka_unit_test(test_wrong_version),
		cmocka_unit_test(test_enospc_injected),
		cmocka_unit_test(test_enospc_tmpfs),
		cmocka_unit_test(test_sigkill),
		cmocka_unit_test(test_stale_temps),
		cmocka_unit_test(test_uring_refused),
	};
	int r = cmocka_run_group_tests(tests, setup, teardown);

	for (int i = 0; i < NS; i++)
		free(data[i]);
	return r;
}
