/*
 * Shared-memory segments (the ring and the pool's statistics block):
 * creation that never takes the machine down, a creator lock that says
 * whether a segment is in use across PID namespaces, and the checks a
 * reader makes before it maps another process's segment.
 *
 * DESIGN
 * - Room first. Before a byte is allocated, the size is checked against
 *   the memory the machine (MemAvailable) and its memory cgroup can still
 *   give, against the free space of /dev/shm for a named segment, and
 *   against RLIMIT_FSIZE (a larger ftruncate would raise SIGXFSZ and kill
 *   the process). Shared-memory pages are not limited by RLIMIT_AS, so
 *   without this check a huge ring is pre-faulted until the OOM killer
 *   ends unrelated processes.
 * - Whole or not at all. A named segment is made as an O_TMPFILE inode in
 *   /dev/shm: sized, allocated (posix_fallocate), mapped, initialised, and
 *   only then given its name with linkat. A creator killed half way leaves
 *   nothing behind (the inode dies with its last descriptor). Where
 *   O_TMPFILE is refused, shm_open(O_EXCL) is the fallback and the lock
 *   below tells a half-made segment of a dead creator from a live one.
 * - Liveness by lock, not by pid. The creator holds flock(LOCK_EX) on the
 *   segment for as long as it keeps it open. Another process (in another
 *   PID namespace too: the lock lives on the shared inode) probes it with
 *   flock(LOCK_SH | LOCK_NB): EWOULDBLOCK means a creator is alive.
 *   flock locks belong to the open file description, so the probe works
 *   inside the creator's own process as well.
 * - Trust. A reader maps only segments owned by its own effective uid:
 *   the owner of a segment can truncate it at any time, and a mapped page
 *   past the new end raises SIGBUS in every process that touches it.
 *   Refusing segments of other users (root included) leaves only the
 *   reader itself able to do that.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sr_base.h"

/* Where shm_open(3) puts its files on Linux. */
static const char *shm_dir(void)
{
	return "/dev/shm";
}

const char *sr__shm_dir(void)
{
	return shm_dir();
}

/* A decimal number from the start of @path, or UINT64_MAX. */
static uint64_t read_u64_file(const char *path)
{
	char buf[64];
	uint64_t v;
	FILE *f = fopen(path, "re");

	if (!f)
		return UINT64_MAX;
	if (!fgets(buf, sizeof(buf), f) || sscanf(buf, "%" SCNu64, &v) != 1)
		v = UINT64_MAX; /* "max" (cgroup v2 without a limit) lands here */
	fclose(f);
	return v;
}

/* Bytes of memory the machine can still give without swapping:
 * MemAvailable, lowered to the room left under a memory cgroup limit. */
static uint64_t mem_available(const char **src)
{
	uint64_t avail = UINT64_MAX, lim, use;
	char line[256];
	FILE *f = fopen("/proc/meminfo", "re");

	*src = "MemAvailable";
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			unsigned long long kb;

			if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) {
				avail = kb > UINT64_MAX / 1024 ? UINT64_MAX : (uint64_t)kb * 1024;
				break;
			}
		}
		fclose(f);
	}
	/* cgroup v2, then v1 (a container sees its own cgroup at the root). */
	lim = read_u64_file("/sys/fs/cgroup/memory.max");
	use = read_u64_file("/sys/fs/cgroup/memory.current");
	if (lim == UINT64_MAX) {
		lim = read_u64_file("/sys/fs/cgroup/memory/memory.limit_in_bytes");
		use = read_u64_file("/sys/fs/cgroup/memory/memory.usage_in_bytes");
	}
	if (lim != UINT64_MAX && use != UINT64_MAX && lim < (1ull << 62)) {
		uint64_t room = lim > use ? lim - use : 0;

		if (room < avail) {
			avail = room;
			*src = "the memory cgroup's limit less its usage";
		}
	}
	return avail;
}

int sr__shm_room(uint64_t bytes, bool named, const char *what)
{
	struct rlimit rl;
	struct statvfs vfs;
	const char *src;
	uint64_t avail;

	avail = mem_available(&src);
	if (bytes > avail)
		return sr__errorf(-ENOMEM,
				  "%s: %" PRIu64 " bytes of shared memory needed, the machine "
				  "can give %" PRIu64 " (%s)",
				  what, bytes, avail, src);
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    bytes > (uint64_t)rl.rlim_cur)
		return sr__errorf(-EFBIG,
				  "%s: %" PRIu64 " bytes of shared memory exceed the file size "
				  "limit of %" PRIu64 " bytes (ulimit -f)",
				  what, bytes, (uint64_t)rl.rlim_cur);
	if (named && statvfs(shm_dir(), &vfs) == 0) {
		uint64_t fr = (uint64_t)vfs.f_frsize ? (uint64_t)vfs.f_frsize : vfs.f_bsize;
		uint64_t free_b = vfs.f_bavail > UINT64_MAX / fr ? UINT64_MAX : vfs.f_bavail * fr;

		if (bytes > free_b)
			return sr__errorf(-ENOSPC,
					  "%s: %" PRIu64 " bytes of shared memory needed, %s has "
					  "%" PRIu64 " bytes free",
					  what, bytes, shm_dir(), free_b);
	}
	return 0;
}

/* "/name" -> "<shm dir>/name" */
static int seg_path(const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s", shm_dir(), name[0] == '/' ? name + 1 : name);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int sr__shm_make(const char *what, const char *name, size_t len, struct sr__shm_seg *s)
{
	char path[512];
	int fd = -1, err;
	void *base;

	memset(s, 0, sizeof(*s));
	s->fd = -1;
	err = sr__shm_room(len, name != NULL, what);
	if (err)
		return err;
	if (!name) {
		fd = memfd_create("stepring-shm", MFD_CLOEXEC);
		if (fd < 0)
			return sr__errorf(-errno, "%s: memfd_create: %s", what, strerror(errno));
		s->linked = true; /* nothing to name */
	} else {
		if (seg_path(name, path, sizeof(path)))
			return sr__errorf(-ENAMETOOLONG, "%s: segment name '%s' is too long", what,
					  name);
		if (access(path, F_OK) == 0)
			return sr__errorf(-EEXIST, "%s: cannot create '%s': already exists", what,
					  name);
		fd = open(shm_dir(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0) {
			/* No O_TMPFILE here: create under the name at once; the
			 * lock taken below marks it as being made. */
			fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (fd < 0) {
				err = -errno;
				return sr__errorf(err, "%s: cannot create '%s': %s", what, name,
						  err == -EEXIST ? "already exists" : strerror(-err));
			}
			s->linked = true;
			s->unlink_on_error = true;
		}
		snprintf(s->name, sizeof(s->name), "%s", name);
	}
	/* The creator lock: held until the last descriptor of this open file
	 * description is closed (sr__shm_close, or the process's death). */
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		err = sr__errorf(-errno, "%s: cannot lock the new segment: %s", what,
				 strerror(errno));
		goto err_close;
	}
	if (ftruncate(fd, (off_t)len)) {
		err = -errno;
		err = sr__errorf(err, "%s: cannot size the segment to %zu bytes: %s", what, len,
				 strerror(-err));
		goto err_close;
	}
	/* Allocate every page now, so that a full /dev/shm fails here
	 * (ENOSPC) and never later with SIGBUS in a writer. */
	err = posix_fallocate(fd, 0, (off_t)len);
	if (err) {
		err = sr__errorf(-err, "%s: cannot allocate %zu bytes of shared memory%s%s: %s",
				 what, len, name ? " in " : "", name ? shm_dir() : "",
				 strerror(err));
		goto err_close;
	}
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (base == MAP_FAILED) {
		char note[300];

		err = -errno;
		if (err == -ENOMEM && sr__as_note(note, sizeof(note), len))
			err = sr__errorf(err, "%s: cannot map %zu bytes: %s", what, len, note);
		else
			err = sr__errorf(err, "%s: mmap %zu bytes: %s", what, len, strerror(-err));
		goto err_close;
	}
	s->fd = fd;
	s->base = base;
	s->len = len;
	return 0;

err_close:
	if (s->unlink_on_error && seg_path(name, path, sizeof(path)) == 0)
		unlink(path);
	close(fd);
	return err;
}

int sr__shm_link(struct sr__shm_seg *s, const char *what)
{
	char path[512], self[64];

	if (s->linked)
		return 0;
	if (seg_path(s->name, path, sizeof(path)))
		return sr__errorf(-ENAMETOOLONG, "%s: segment name too long", what);
	snprintf(self, sizeof(self), "/proc/self/fd/%d", s->fd);
	if (linkat(AT_FDCWD, self, AT_FDCWD, path, AT_SYMLINK_FOLLOW)) {
		int err = -errno;

		return sr__errorf(err, "%s: cannot name the segment '%s': %s", what, s->name,
				  err == -EEXIST ? "already exists" : strerror(-err));
	}
	s->linked = true;
	return 0;
}

void sr__shm_abandon(struct sr__shm_seg *s)
{
	char path[512];

	if (s->base)
		munmap(s->base, s->len);
	if (s->unlink_on_error && s->name[0] && seg_path(s->name, path, sizeof(path)) == 0)
		unlink(path);
	if (s->fd >= 0)
		close(s->fd);
	memset(s, 0, sizeof(*s));
	s->fd = -1;
}

int sr__shm_in_use(int fd)
{
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		flock(fd, LOCK_UN);
		return 0;
	}
	return errno == EWOULDBLOCK ? 1 : -errno;
}

int sr__shm_in_use_name(const char *name)
{
	char path[512];
	int fd, r;

	if (seg_path(name, path, sizeof(path)))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	r = sr__shm_in_use(fd);
	close(fd);
	return r;
}

int sr__shm_trusted(const struct stat *st, const char *what, const char *name)
{
	if (!S_ISREG(st->st_mode))
		return sr__errorf(-EBADMSG, "%s: '%s' is not a regular shared-memory file", what,
				  name);
	if (st->st_uid != geteuid())
		return sr__errorf(-EPERM,
				  "%s: '%s' belongs to uid %u, not to this user (uid %u): a "
				  "segment of another user is not mapped (its owner could "
				  "truncate it under the reader)",
				  what, name, (unsigned)st->st_uid, (unsigned)geteuid());
	return 0;
}
