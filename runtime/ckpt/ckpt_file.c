/*
 * Checkpoint files: the format, CRC32C, the env records of a worker
 * kind's checkpoint (struct sr__env_recs), the loader / verifier, and
 * stale temporaries. The job that writes a file is ckpt_job.c, its
 * writers ckpt_pwrite.c and ckpt_uring.c.
 *
 * DESIGN
 *
 * Layout (every block 4096-aligned, so O_DIRECT works and each write is
 * large and aligned):
 *
 *   [0, 4096)            header: magic, format version, build info, CRC
 *   [4096, ...)          sections, each at a 4096-aligned offset, zero padded
 *   [size - 4096, size)  trailer: the section table (type, offset, length,
 *                        CRC32C of the payload) and, in its last 64 bytes,
 *                        the footer (magic, file size, table CRC, CRC)
 *
 * The header is the first write, the trailer the last one: a file whose
 * footer is missing or does not match its size was not finished.
 */
#include <ctype.h>
#include <dirent.h>
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

#include "sr_base.h"
#include "ckpt_internal.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

/* ---- CRC32C -------------------------------------------------------------- */

/* Fuzzing builds accept any checksum, so the fuzzer reaches the checks
 * behind them (the conventional libFuzzer macro; never in a release). */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define CRC_BAD(a, b) ((void)(a), (void)(b), 0)
#else
#define CRC_BAD(a, b) ((a) != (b))
#endif

#define CRC32C_POLY 0x82f63b78u /* reflected Castagnoli */

static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		crc_tab[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc_hw = __builtin_cpu_supports("sse4.2");
#endif
	if (getenv("SR_CKPT_CRC_SW"))
		crc_hw = false;
}

uint32_t sr__crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&crc_once, crc_init);
	crc = ~crc;
	while (len && ((uintptr_t)p & 7)) {
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
		len--;
	}
	/* Slicing-by-8: one 64-bit load, eight table lookups per step. */
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		v ^= crc;
		crc = crc_tab[7][v & 0xff] ^ crc_tab[6][(v >> 8) & 0xff] ^
		      crc_tab[5][(v >> 16) & 0xff] ^ crc_tab[4][(v >> 24) & 0xff] ^
		      crc_tab[3][(v >> 32) & 0xff] ^ crc_tab[2][(v >> 40) & 0xff] ^
		      crc_tab[1][(v >> 48) & 0xff] ^ crc_tab[0][v >> 56];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const void *buf,
							     size_t len)
{
	const uint8_t *p = buf;
	uint64_t c = ~crc;

	while (len && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		len--;
	}
	while (len >= 32) {
		uint64_t v[4];
		memcpy(v, p, 32);
		c = _mm_crc32_u64(c, v[0]);
		c = _mm_crc32_u64(c, v[1]);
		c = _mm_crc32_u64(c, v[2]);
		c = _mm_crc32_u64(c, v[3]);
		p += 32;
		len -= 32;
	}
	while (len >= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = _mm_crc32_u64(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}
#endif

uint32_t sr__crc32c(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
	if (crc_hw)
		return crc32c_hw(crc, buf, len);
#endif
	return sr__crc32c_sw(crc, buf, len);
}

/* ---- public small helpers ------------------------------------------------ */

void sr_ckpt_opts_init(sr_ckpt_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = SR_CKPT_BACKEND_AUTO;
	o->chunk_size = SR_CKPT_DEFAULT_CHUNK;
	o->nice = 10;
}

static const char *const backend_names[] = {"auto", "uring", "pwrite", "sync"};

const char *sr_ckpt_backend_name(uint32_t b)
{
	return b < 4 ? backend_names[b] : "?";
}

/* For messages: tools keep their own names (see stepring checkpoint info). */
const char *sr__ckpt_section_name(uint32_t type)
{
	switch (type) {
	case SR_CKPT_SECT_POOL:
		return "pool";
	case SR_CKPT_SECT_ENV_STATES:
		return "env_states";
	case SR_CKPT_SECT_ENV_COUNTERS:
		return "env_counters";
	case SR_CKPT_SECT_STATS:
		return "stats";
	case SR_CKPT_SECT_RUNTIME:
		return "runtime";
	case SR_CKPT_SECT_REPLAY:
		return "replay";
	case SR_CKPT_SECT_REPLAY_META:
		return "replay_meta";
	case SR_CKPT_SECT_PRIORITIES:
		return "priorities";
	default:
		return type >= SR_CKPT_SECT_USER ? "user" : "unknown";
	}
}

/* ---- env records (struct sr__env_recs) ---------------------------------- */

int sr__env_recs_alloc(struct sr__env_recs *r, uint32_t n)
{
	size_t m = n ? n : 1;

	memset(r, 0, sizeof(*r));
	r->n = n;
	r->env = calloc(m, sizeof(*r->env));
	r->rec = calloc(m, sizeof(*r->rec));
	r->len = calloc(m, sizeof(*r->len));
	if (!r->env || !r->rec || !r->len) {
		sr__env_recs_free(r);
		return sr__errorf(-ENOMEM, "checkpoint: out of memory");
	}
	return 0;
}

void sr__env_recs_free(struct sr__env_recs *r)
{
	free(r->env);
	free(r->rec);
	free(r->len);
	memset(r, 0, sizeof(*r));
}

/* ---- loader -------------------------------------------------------------- */

int (*sr__ckpt_read_hook)(void *buf, size_t len, uint64_t off);


static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t r = pread(fd, p, len, (off_t)off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return sr__errorf(-errno, "checkpoint: read failed: %s", strerror(errno));
		}
		if (r == 0)
			return sr__errorf(-EBADMSG, "checkpoint: file truncated while reading");
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int sr__ckpt_find(const struct sr__ckpt_file *f, uint32_t type)
{
	for (uint32_t i = 0; i < f->foot.n_sections; i++)
		if (f->table[i].type == type)
			return (int)i;
	return -1;
}

int sr__ckpt_read(const struct sr__ckpt_file *f, int idx, uint64_t off, void *buf, size_t len)
{
	const struct sr__ckpt_entry *e = &f->table[idx];

	if (off > e->length || len > e->length - off)
		return sr__errorf(-EBADMSG, "checkpoint: read past the end of section %s",
				  sr__ckpt_section_name(e->type));
	int err = pread_all(f->fd, buf, len, e->offset + off);

	if (!err && sr__ckpt_read_hook) {
		err = sr__ckpt_read_hook(buf, len, e->offset + off);
		if (err)
			return sr__errorf(err, "checkpoint: read failed: %s", strerror(-err));
	}
	return err;
}

int sr__ckpt_check_crc(const struct sr__ckpt_file *f, int idx, uint32_t crc)
{
	const struct sr__ckpt_entry *e = &f->table[idx];

	if (CRC_BAD(crc, e->crc))
		return sr__errorf(-EBADMSG,
				  "checkpoint: section %d (%s) changed since it was verified: "
				  "CRC32C %08x, stored %08x (was the file rewritten in place?)",
				  idx, sr__ckpt_section_name(e->type), crc, e->crc);
	return 0;
}

static bool str_terminated(const char *s, size_t n)
{
	return memchr(s, '\0', n) != NULL;
}

static int check_pool_sect(const struct sr__ckpt_pool_sect *ps)
{
	if (!str_terminated(ps->env_id, sizeof(ps->env_id)) || !ps->env_id[0])
		return sr__errorf(-EBADMSG, "checkpoint: pool section has no env id");
	if (ps->num_envs == 0 || ps->obs_dim == 0 || ps->act_size == 0 || ps->state_size == 0 ||
	    ps->batch_size > ps->num_envs || ps->num_envs > SR__CKPT_MAX_ENVS ||
	    ps->obs_dim > (1u << 24) || ps->act_size > (1u << 24) ||
	    ps->state_size > SR_ENV_MAX_STATE_SIZE || ps->state_size % 8 ||
	    ps->ring_capacity < 2 || ps->ring_capacity > (1ull << 40) ||
	    (ps->ring_capacity & (ps->ring_capacity - 1)))
		return sr__errorf(-EBADMSG, "checkpoint: pool section has an impossible geometry "
					    "(num_envs %u, batch %u, obs_dim %u, act_size %u, state %u, "
					    "ring %llu)",
				  ps->num_envs, ps->batch_size, ps->obs_dim, ps->act_size,
				  ps->state_size, (unsigned long long)ps->ring_capacity);
	return 0;
}

/* Section @pi of @f as a pool section: its size, its bytes, its fields. */
static int read_pool_sect(const struct sr__ckpt_file *f, int pi, struct sr__ckpt_pool_sect *ps)
{
	int err;

	if (f->table[pi].length != sizeof(*ps))
		return sr__errorf(-EBADMSG, "checkpoint: pool section has size %llu, expected %zu",
				  (unsigned long long)f->table[pi].length, sizeof(*ps));
	err = sr__ckpt_read(f, pi, 0, ps, sizeof(*ps));
	return err ? err : check_pool_sect(ps);
}

/* Section @type's length, or -1 when absent. */
static int64_t sect_len(const struct sr__ckpt_file *f, uint32_t type)
{
	int i = sr__ckpt_find(f, type);

	return i < 0 ? -1 : (int64_t)f->table[i].length;
}

int sr__ckpt_check_replay_meta(const struct sr__ckpt_replay_meta *m, uint64_t replay_len)
{
	uint64_t cnt, sb, nblk, len = 0, last;

	/* Sequences: first_seq <= first_valid <= head, cursor <= head, and
	 * the window at most one capacity. */
	if (m->capacity < 2 || m->capacity > (1ull << 40) || (m->capacity & (m->capacity - 1)) ||
	    m->first_seq > m->first_valid || m->first_valid > m->head || m->cursor > m->head ||
	    m->head - m->first_seq > m->capacity || m->obs_dim == 0 || m->obs_dim > (1u << 24) ||
	    m->act_size == 0 || m->act_size > (1u << 24))
		return sr__errorf(-EBADMSG,
				  "checkpoint: replay_meta is inconsistent (capacity %llu, head "
				  "%llu, cursor %llu, first %llu, first valid %llu)",
				  (unsigned long long)m->capacity, (unsigned long long)m->head,
				  (unsigned long long)m->cursor, (unsigned long long)m->first_seq,
				  (unsigned long long)m->first_valid);
	/* Blocks as the writer makes them: block_bytes is its chunk size (a
	 * multiple of 4096 in [64 KiB, 256 MiB]), chunk_slots = block_bytes /
	 * slot bytes. So the section is bounded by the window itself. */
	sb = sr__ckpt_slot_bytes(m->obs_dim, m->act_size);
	if (m->block_bytes < (64u << 10) || m->block_bytes > (256u << 20) ||
	    m->block_bytes % SR_CKPT_ALIGN || m->chunk_slots != m->block_bytes / sb ||
	    m->chunk_slots == 0)
		return sr__errorf(-EBADMSG,
				  "checkpoint: replay_meta has impossible blocks (%llu bytes, %llu "
				  "slots of %llu bytes)",
				  (unsigned long long)m->block_bytes,
				  (unsigned long long)m->chunk_slots, (unsigned long long)sb);
	cnt = m->head - m->first_seq;
	nblk = (cnt + m->chunk_slots - 1) / m->chunk_slots;
	last = nblk ? cnt - (nblk - 1) * m->chunk_slots : 0;
	/* Overflow-checked: (nblk - 1) * block_bytes + last * slot bytes. */
	if (nblk && (__builtin_mul_overflow(nblk - 1, m->block_bytes, &len) ||
		     __builtin_add_overflow(len, last * sb, &len)))
		return sr__errorf(-EBADMSG, "checkpoint: replay_meta describes more bytes than "
					    "a file can hold");
	if (replay_len != len)
		return sr__errorf(-EBADMSG,
				  "checkpoint: replay section has %llu bytes, its window needs %llu",
				  (unsigned long long)replay_len, (unsigned long long)len);
	return 0;
}

/* A pool checkpoint's sections agree with each other: the pool section
 * names the sizes of the others, which must all be there; replay and
 * replay_meta come together and describe each other. A file without a
 * pool section (raw user sections) is only checked as a container. */
static int check_pool_file(const struct sr__ckpt_file *f)
{
	struct sr__ckpt_pool_sect ps;
	struct sr__ckpt_replay_meta m;
	int pi = sr__ckpt_find(f, SR_CKPT_SECT_POOL), mi, err;
	int64_t replay_len;
	uint64_t want;

	if (pi < 0) {
		for (uint32_t i = 0; i < f->foot.n_sections; i++)
			if (f->table[i].type < SR_CKPT_SECT_USER)
				return sr__errorf(-EBADMSG,
						  "checkpoint: section %s without a pool section",
						  sr__ckpt_section_name(f->table[i].type));
		return 0;
	}
	err = read_pool_sect(f, pi, &ps);
	if (err)
		return err;
	/* num_envs <= 2^24 and state_size <= 2^20: no product overflows. */
	want = (uint64_t)ps.num_envs * ps.state_size;
	if (sect_len(f, SR_CKPT_SECT_ENV_STATES) != (int64_t)want)
		return sr__errorf(-EBADMSG,
				  "checkpoint: env_states has %lld bytes, %u envs of %u bytes need "
				  "%llu",
				  (long long)sect_len(f, SR_CKPT_SECT_ENV_STATES), ps.num_envs,
				  ps.state_size, (unsigned long long)want);
	want = (uint64_t)ps.num_envs * SR__CKPT_ENV_REC_SIZE;
	if (sect_len(f, SR_CKPT_SECT_ENV_COUNTERS) != (int64_t)want)
		return sr__errorf(-EBADMSG,
				  "checkpoint: env_counters has %lld bytes, %u envs need %llu",
				  (long long)sect_len(f, SR_CKPT_SECT_ENV_COUNTERS), ps.num_envs,
				  (unsigned long long)want);
	if (sect_len(f, SR_CKPT_SECT_STATS) != SR__CKPT_STATS_SIZE ||
	    sect_len(f, SR_CKPT_SECT_RUNTIME) != SR__CKPT_RUNTIME_SIZE)
		return sr__errorf(-EBADMSG, "checkpoint: the stats or runtime section is missing "
					    "or has the wrong size");
	mi = sr__ckpt_find(f, SR_CKPT_SECT_REPLAY_META);
	replay_len = sect_len(f, SR_CKPT_SECT_REPLAY);
	if ((mi < 0) != (replay_len < 0))
		return sr__errorf(-EBADMSG, "checkpoint: replay and replay_meta must come together");
	if (mi < 0)
		return 0;
	if (f->table[mi].length != sizeof(m))
		return sr__errorf(-EBADMSG, "checkpoint: replay_meta section has size %llu",
				  (unsigned long long)f->table[mi].length);
	err = sr__ckpt_read(f, mi, 0, &m, sizeof(m));
	if (err)
		return err;
	err = sr__ckpt_check_replay_meta(&m, (uint64_t)replay_len);
	if (err)
		return err;
	if (m.capacity != ps.ring_capacity || m.obs_dim != ps.obs_dim || m.act_size != ps.act_size)
		return sr__errorf(-EBADMSG,
				  "checkpoint: replay_meta's ring (%llu slots, obs_dim %u, action %u "
				  "bytes) is not the pool section's",
				  (unsigned long long)m.capacity, m.obs_dim, m.act_size);
	return 0;
}

int sr__ckpt_verify_fd(int fd, struct sr__ckpt_file *f, sr_ckpt_info *info)
{
	struct stat st;
	uint8_t *buf;
	uint64_t prev_end;
	size_t bufsz = 1u << 20;
	uint32_t crc;
	int err;

	memset(f, 0, sizeof(*f));
	f->fd = fd;
	if (info)
		memset(info, 0, sizeof(*info));
	if (fstat(fd, &st) < 0)
		return sr__errorf(-errno, "checkpoint: stat failed: %s", strerror(errno));
	if (S_ISDIR(st.st_mode))
		return sr__errorf(-EISDIR, "checkpoint: is a directory, not a checkpoint file");
	if (!S_ISREG(st.st_mode))
		return sr__errorf(-EINVAL, "checkpoint: not a regular file (a pipe or device)");
	f->size = (uint64_t)st.st_size;
	if (f->size < 2 * SR_CKPT_ALIGN)
		return sr__errorf(-EBADMSG,
				  "checkpoint: truncated or not a checkpoint (%llu bytes, a checkpoint "
				  "has at least %u)",
				  (unsigned long long)f->size, 2 * SR_CKPT_ALIGN);

	err = pread_all(fd, &f->hdr, sizeof(f->hdr), 0);
	if (err)
		return err;
	if (memcmp(f->hdr.magic, SR_CKPT_MAGIC, 8))
		return sr__errorf(-EBADMSG, "checkpoint: not a stepring checkpoint (bad magic)");
	if (CRC_BAD(f->hdr.crc, sr__crc32c(0, &f->hdr, offsetof(struct sr__ckpt_header, crc))))
		return sr__errorf(-EBADMSG, "checkpoint: header checksum mismatch (corrupt header)");
	if (f->hdr.endian != 0x01020304u)
		return sr__errorf(-EPROTO, "checkpoint: written on a machine of another byte order");
	if (f->hdr.format_version != SR_CKPT_FORMAT_VERSION)
		return sr__errorf(-EPROTO,
				  "checkpoint: format version %u, this stepring reads version %u",
				  f->hdr.format_version, SR_CKPT_FORMAT_VERSION);
	if (f->hdr.header_size != SR_CKPT_ALIGN || !str_terminated(f->hdr.build_info,
								     sizeof(f->hdr.build_info)))
		return sr__errorf(-EBADMSG, "checkpoint: malformed header");

	err = pread_all(fd, &f->foot, sizeof(f->foot), f->size - sizeof(f->foot));
	if (err)
		return err;
	if (memcmp(f->foot.magic, SR_CKPT_END_MAGIC, 8) ||
	    CRC_BAD(f->foot.crc, sr__crc32c(0, &f->foot, offsetof(struct sr__ckpt_footer, crc))))
		return sr__errorf(-EBADMSG, "checkpoint: no valid trailer: the file is truncated or "
					    "was not completely written");
	if (f->foot.file_size != f->size)
		return sr__errorf(-EBADMSG, "checkpoint: file is %llu bytes, its trailer says %llu "
					    "(truncated or extended)",
				  (unsigned long long)f->size,
				  (unsigned long long)f->foot.file_size);
	if (f->foot.format_version != SR_CKPT_FORMAT_VERSION)
		return sr__errorf(-EPROTO, "checkpoint: trailer format version %u, expected %u",
				  f->foot.format_version, SR_CKPT_FORMAT_VERSION);
	if (f->foot.trailer_offset != f->size - SR_CKPT_ALIGN ||
	    f->foot.n_sections > SR_CKPT_MAX_SECTIONS)
		return sr__errorf(-EBADMSG, "checkpoint: malformed trailer");
	if (f->foot.n_sections == 0)
		return sr__errorf(-EBADMSG, "checkpoint: no sections (an empty checkpoint)");
	err = pread_all(fd, f->table, f->foot.n_sections * sizeof(f->table[0]),
			f->foot.trailer_offset);
	if (err)
		return err;
	if (CRC_BAD(f->foot.table_crc,
		    sr__crc32c(0, f->table, f->foot.n_sections * sizeof(f->table[0]))))
		return sr__errorf(-EBADMSG, "checkpoint: section table checksum mismatch");

	prev_end = SR_CKPT_ALIGN;
	for (uint32_t i = 0; i < f->foot.n_sections; i++) {
		const struct sr__ckpt_entry *e = &f->table[i];
		/* Every bound from the file is checked before it is used in
		 * arithmetic: offset first (so trailer - offset cannot wrap),
		 * then length against the room left (so sr__align_up cannot wrap).
		 * A 0-length section must lie inside the file too. */
		if (e->type == 0 || e->offset % SR_CKPT_ALIGN || e->offset < prev_end ||
		    e->offset > f->foot.trailer_offset ||
		    e->length > f->foot.trailer_offset - e->offset ||
		    sr__align_up(e->length, SR_CKPT_ALIGN) > f->foot.trailer_offset - e->offset)
			return sr__errorf(-EBADMSG, "checkpoint: section %u (%s) lies outside the file",
					  i, sr__ckpt_section_name(e->type));
		for (uint32_t k = 0; k < i; k++)
			if (f->table[k].type == e->type)
				return sr__errorf(-EBADMSG,
						  "checkpoint: section %s appears twice (%u and %u)",
						  sr__ckpt_section_name(e->type), k, i);
		prev_end = e->offset + sr__align_up(e->length, SR_CKPT_ALIGN);
	}

	buf = malloc(bufsz);
	if (!buf)
		return sr__errorf(-ENOMEM, "checkpoint: out of memory");
	for (uint32_t i = 0; i < f->foot.n_sections; i++) {
		const struct sr__ckpt_entry *e = &f->table[i];
		crc = 0;
		for (uint64_t off = 0; off < e->length;) {
			size_t n = e->length - off < bufsz ? (size_t)(e->length - off) : bufsz;
			err = pread_all(fd, buf, n, e->offset + off);
			if (err) {
				free(buf);
				return err;
			}
			crc = sr__crc32c(crc, buf, n);
			off += n;
		}
		if (CRC_BAD(crc, e->crc)) {
			free(buf);
			return sr__errorf(-EBADMSG,
					  "checkpoint: section %u (%s) is corrupt: CRC32C %08x, "
					  "stored %08x",
					  i, sr__ckpt_section_name(e->type), crc, e->crc);
		}
	}
	free(buf);

	err = check_pool_file(f);
	if (err || !info)
		return err;

	info->format_version = f->hdr.format_version;
	info->n_sections = f->foot.n_sections;
	info->file_size = f->size;
	info->created_unix_ns = f->hdr.created_unix_ns;
	snprintf(info->build_info, sizeof(info->build_info), "%s", f->hdr.build_info);
	for (uint32_t i = 0; i < f->foot.n_sections; i++) {
		info->sections[i].type = f->table[i].type;
		info->sections[i].crc = f->table[i].crc;
		info->sections[i].offset = f->table[i].offset;
		info->sections[i].length = f->table[i].length;
	}
	int pi = sr__ckpt_find(f, SR_CKPT_SECT_POOL);
	if (pi >= 0) {
		struct sr__ckpt_pool_sect ps;
		err = read_pool_sect(f, pi, &ps);
		if (err)
			return err;
		snprintf(info->env_id, sizeof(info->env_id), "%s", ps.env_id);
		info->num_envs = ps.num_envs;
		info->batch_size = ps.batch_size;
		info->obs_dim = ps.obs_dim;
		info->act_size = ps.act_size;
		info->state_size = ps.state_size;
		info->autoreset = ps.autoreset;
		info->seed = ps.seed;
		info->steps = ps.steps;
	}
	int mi = sr__ckpt_find(f, SR_CKPT_SECT_REPLAY_META);
	if (mi >= 0) {
		struct sr__ckpt_replay_meta m;
		if (f->table[mi].length != sizeof(m))
			return sr__errorf(-EBADMSG, "checkpoint: replay_meta section has size %llu",
					  (unsigned long long)f->table[mi].length);
		err = sr__ckpt_read(f, mi, 0, &m, sizeof(m));
		if (err)
			return err;
		info->replay_slots = m.head - m.first_valid;
		info->replay_head = m.head;
	}
	return 0;
}

int sr_checkpoint_verify(const char *path, sr_ckpt_info *info)
{
	struct sr__ckpt_file f;
	int fd, err;

	if (!path)
		return sr__errorf(-EINVAL, "sr_checkpoint_verify: NULL path");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sr__errorf(-errno, "checkpoint: cannot open '%s': %s", path, strerror(errno));
	err = sr__ckpt_verify_fd(fd, &f, info);
	close(fd);
	return err;
}

/* ---- stale temporaries ----------------------------------------------------- */

/* Is @nm ".<base>.tmp.<pid>.<n>"? Then *pid is set. */
static bool stale_name(const char *nm, const char *base, size_t blen, long *pid)
{
	const char *q;
	char *end;

	if (nm[0] != '.' || strncmp(nm + 1, base, blen) || strncmp(nm + 1 + blen, ".tmp.", 5))
		return false;
	q = nm + 1 + blen + 5;
	if (!isdigit((unsigned char)q[0]))
		return false;
	errno = 0;
	*pid = strtol(q, &end, 10);
	if (errno || *pid <= 0 || *pid > INT_MAX || end[0] != '.' ||
	    !isdigit((unsigned char)end[1]))
		return false;
	for (q = end + 1; *q; q++)
		if (!isdigit((unsigned char)*q))
			return false;
	return true;
}

int sr_checkpoint_clean(const char *path, unsigned flags, sr_ckpt_stale_fn fn, void *ctx)
{
	char dirname[PATH_MAX], full[PATH_MAX + 256];
	const char *slash, *base;
	struct dirent *e;
	size_t blen;
	DIR *d;
	int n = 0, err = 0;

	if (!path || !path[0])
		return sr__errorf(-EINVAL, "sr_checkpoint_clean: empty path");
	if (flags & ~(unsigned)SR_CKPT_CLEAN_REMOVE)
		return sr__errorf(-EINVAL, "sr_checkpoint_clean: unknown flags 0x%x",
				  flags & ~(unsigned)SR_CKPT_CLEAN_REMOVE);
	if (strlen(path) + 32 >= PATH_MAX)
		return sr__errorf(-ENAMETOOLONG, "sr_checkpoint_clean: path too long");
	slash = strrchr(path, '/');
	if (slash) {
		base = slash + 1;
		snprintf(dirname, sizeof(dirname), "%.*s", (int)(slash - path + (slash == path)),
			 path);
	} else {
		base = path;
		snprintf(dirname, sizeof(dirname), ".");
	}
	if (!base[0])
		return sr__errorf(-EINVAL, "checkpoint: '%s' names a directory, not a file", path);
	blen = strlen(base);
	d = opendir(dirname);
	if (!d)
		return sr__errorf(-errno, "checkpoint: cannot read the directory '%s': %s", dirname,
				  strerror(errno));
	while ((e = readdir(d))) {
		struct stat st;
		long pid;

		if (!stale_name(e->d_name, base, blen, &pid) || pid == (long)getpid())
			continue;
		/* Only a writer that no longer exists: EPERM means alive. */
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		snprintf(full, sizeof(full), "%s/%s", dirname, e->d_name);
		if (fn)
			fn(ctx, full, pid, (uint64_t)st.st_size);
		if ((flags & SR_CKPT_CLEAN_REMOVE) && unlinkat(dirfd(d), e->d_name, 0) < 0 &&
		    errno != ENOENT) {
			err = sr__errorf(-errno, "checkpoint: cannot remove '%s': %s", full,
					 strerror(errno));
			break;
		}
		n++;
	}
	closedir(d);
	return err ? err : n;
}
