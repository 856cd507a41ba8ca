/*
 * A checkpoint generator for tests and fuzzers: writes files in the format
 * of docs/checkpoint.md (header, sections at 4096-byte offsets, trailer
 * with the section table and footer) with valid CRC32Cs over whatever the
 * caller puts in them, including lies: a table entry may claim any offset
 * and length. So a test can make files whose every checksum is right and
 * whose contents are impossible, which is what a corrupt disk cannot do
 * but a stranger can.
 *
 * craft_load() reads a real checkpoint's sections (to mutate and rewrite).
 * Written from the format description, not from the writer's code.
 */
#ifndef SR_TEST_CKPT_CRAFT_H
#define SR_TEST_CKPT_CRAFT_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt_internal.h"

struct craft_sect {
	uint32_t type;
	uint64_t len;      /* payload bytes written */
	uint8_t *data;     /* owned (free) */
	/* Lies for the table (0: tell the truth). */
	bool lie;
	uint64_t table_offset, table_length;
};

struct craft {
	struct craft_sect s[SR_CKPT_MAX_SECTIONS];
	uint32_t n;
	uint32_t table_n;       /* footer's count: 0 means n */
	bool table_n_set;
	uint64_t sparse_extra;  /* bytes of hole before the trailer */
};

static inline void craft_free(struct craft *c)
{
	for (uint32_t i = 0; i < c->n; i++)
		free(c->s[i].data);
	memset(c, 0, sizeof(*c));
}

static inline int craft_find(const struct craft *c, uint32_t type)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->s[i].type == type)
			return (int)i;
	return -1;
}

static inline struct craft_sect *craft_add(struct craft *c, uint32_t type, const void *d,
					   uint64_t len)
{
	struct craft_sect *s = &c->s[c->n++];

	memset(s, 0, sizeof(*s));
	s->type = type;
	s->len = len;
	s->data = calloc(1, len ? len : 1);
	if (d && len)
		memcpy(s->data, d, len);
	return s;
}

static inline uint64_t craft_align(uint64_t x)
{
	return (x + SR_CKPT_ALIGN - 1) & ~(uint64_t)(SR_CKPT_ALIGN - 1);
}

static inline int craft_pwrite(int fd, const void *b, size_t n, uint64_t off)
{
	const char *p = b;

	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);

		if (w <= 0)
			return -errno;
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

/* Write @c to @fd (truncated first). 0 or -errno. */
static inline int craft_write_fd(const struct craft *c, int fd)
{
	struct sr__ckpt_header h;
	struct sr__ckpt_footer ft;
	struct sr__ckpt_entry tab[SR_CKPT_MAX_SECTIONS];
	uint8_t trailer[SR_CKPT_ALIGN];
	uint64_t off = SR_CKPT_ALIGN, size;
	uint32_t tn = c->table_n_set ? c->table_n : c->n;
	int err;

	if (ftruncate(fd, 0))
		return -errno;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, SR_CKPT_MAGIC, 8);
	h.format_version = SR_CKPT_FORMAT_VERSION;
	h.header_size = SR_CKPT_ALIGN;
	h.endian = 0x01020304u;
	strcpy(h.build_info, "crafted by tests/ckpt_craft.h");
	h.crc = sr__crc32c(0, &h, offsetof(struct sr__ckpt_header, crc));
	err = craft_pwrite(fd, &h, sizeof(h), 0);
	if (err)
		return err;
	memset(tab, 0, sizeof(tab));
	for (uint32_t i = 0; i < c->n; i++) {
		const struct craft_sect *s = &c->s[i];

		tab[i].type = s->type;
		tab[i].crc = sr__crc32c(0, s->data, (size_t)s->len);
		tab[i].offset = s->lie ? s->table_offset : off;
		tab[i].length = s->lie ? s->table_length : s->len;
		err = craft_pwrite(fd, s->data, (size_t)s->len, off);
		if (err)
			return err;
		off += craft_align(s->len);
	}
	off += craft_align(c->sparse_extra);
	size = off + SR_CKPT_ALIGN;
	memset(trailer, 0, sizeof(trailer));
	memcpy(trailer, tab, sizeof(tab));
	memset(&ft, 0, sizeof(ft));
	memcpy(ft.magic, SR_CKPT_END_MAGIC, 8);
	ft.format_version = SR_CKPT_FORMAT_VERSION;
	ft.n_sections = tn;
	ft.file_size = size;
	ft.trailer_offset = off;
	ft.table_crc = sr__crc32c(0, tab, (tn <= SR_CKPT_MAX_SECTIONS ? tn : 0) * sizeof(tab[0]));
	ft.crc = sr__crc32c(0, &ft, offsetof(struct sr__ckpt_footer, crc));
	memcpy(trailer + SR_CKPT_ALIGN - sizeof(ft), &ft, sizeof(ft));
	return craft_pwrite(fd, trailer, sizeof(trailer), off);
}

static inline int craft_write(const struct craft *c, const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), err;

	if (fd < 0)
		return -errno;
	err = craft_write_fd(c, fd);
	close(fd);
	return err;
}

/* Read every section of a (valid) checkpoint into @c. 0 or -errno. */
static inline int craft_load(struct craft *c, const char *path)
{
	struct sr__ckpt_footer ft;
	struct sr__ckpt_entry tab[SR_CKPT_MAX_SECTIONS];
	off_t size;
	int fd = open(path, O_RDONLY | O_CLOEXEC), err = 0;

	memset(c, 0, sizeof(*c));
	if (fd < 0)
		return -errno;
	size = lseek(fd, 0, SEEK_END);
	if (size < 2 * (off_t)SR_CKPT_ALIGN ||
	    pread(fd, &ft, sizeof(ft), size - (off_t)sizeof(ft)) != (ssize_t)sizeof(ft) ||
	    ft.n_sections > SR_CKPT_MAX_SECTIONS ||
	    pread(fd, tab, sizeof(tab), (off_t)ft.trailer_offset) != (ssize_t)sizeof(tab)) {
		close(fd);
		return -EBADMSG;
	}
	for (uint32_t i = 0; i < ft.n_sections && !err; i++) {
		struct craft_sect *s = craft_add(c, tab[i].type, NULL, tab[i].length);

		if (tab[i].length &&
		    pread(fd, s->data, (size_t)tab[i].length, (off_t)tab[i].offset) !=
			    (ssize_t)tab[i].length)
			err = -EIO;
	}
	close(fd);
	if (err)
		craft_free(c);
	return err;
}

#endif
