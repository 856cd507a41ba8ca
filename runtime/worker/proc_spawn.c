/*
 * Process workers, the trainer's side: spawning (proc_trainer.c has the
 * design). posix_spawn of the worker program (the stepring-worker
 * executable for C envs, or the caller's argv, e.g. the Python worker),
 * never a bare fork() of a trainer that runs threads: the ring and the
 * command block are inherited as fds 3 and 4, every other descriptor is
 * closed in the child, signals start at their defaults with an empty mask,
 * STEPRING_PROC tells the worker its index and the trainer's pid. And the
 * guard of a named ring (sr__proc_guard_main, proc_guard.c).
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc_trainer_pvt.h"
#include "ring_internal.h"

extern char **environ;

/* The stepring-worker program: $STEPRING_WORKER, else next to this
 * library (the build tree), else ../libexec/stepring/ from it. */
int sr__procs_find_worker(char **out)
{
	const char *env = getenv("STEPRING_WORKER");
	Dl_info di;
	char buf[PATH_MAX];

	*out = NULL;
	if (env && *env) {
		*out = strdup(env);
		return *out ? 0 : -ENOMEM;
	}
	if (dladdr((void *)sr__procs_find_worker, &di) && di.dli_fname) {
		const char *slash = strrchr(di.dli_fname, '/');
		int dl = slash ? (int)(slash - di.dli_fname) : 1;
		const char *dir = slash ? di.dli_fname : ".";
		const char *tails[] = {"/stepring-worker", "/../libexec/stepring/stepring-worker"};

		for (size_t i = 0; i < 2; i++) {
			snprintf(buf, sizeof(buf), "%.*s%s", dl, dir, tails[i]);
			if (!access(buf, X_OK)) {
				*out = strdup(buf);
				return *out ? 0 : -ENOMEM;
			}
		}
	}
	return sr__errorf(-ENOENT, "process workers: the stepring-worker program was not found "
				   "next to the library nor in ../libexec/stepring (set "
				   "STEPRING_WORKER to its path)");
}

/* Spawn attributes of every child the pool starts: no signal blocked,
 * every signal at its default (the trainer's handlers and masks are not
 * the child's), plus @flags (POSIX_SPAWN_SETPGROUP: a group of its own). */
static void spawnattr_init(posix_spawnattr_t *at, short flags)
{
	sigset_t none, all;

	posix_spawnattr_init(at);
	sigemptyset(&none);
	sigfillset(&all);
	sigdelset(&all, SIGKILL);
	sigdelset(&all, SIGSTOP);
	posix_spawnattr_setsigmask(at, &none);
	posix_spawnattr_setsigdefault(at, &all);
	if (flags & POSIX_SPAWN_SETPGROUP)
		posix_spawnattr_setpgroup(at, 0);
	posix_spawnattr_setflags(at, (short)(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | flags));
}

int sr__procs_spawn(struct sr__procs *P, uint32_t w)
{
	struct sr__proc_wrec *r = sr__proc_wrec(P->h, w);
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	size_t nenv = 0, k = 0;
	char var[64], **envp;
	int rfd, bfd, xfd, err;
	pid_t pid;
	cpu_set_t self;
	bool bound = false;

	while (environ && environ[nenv])
		nenv++;
	envp = calloc(nenv + 2, sizeof(char *));
	if (!envp)
		return sr__errorf(-ENOMEM, "out of memory");
	snprintf(var, sizeof(var), "%s=%u,%lld", SR__PROC_ENV, w, (long long)getpid());
	for (size_t i = 0; i < nenv; i++)
		if (strncmp(environ[i], SR__PROC_ENV "=", sizeof(SR__PROC_ENV)))
			envp[k++] = environ[i];
	envp[k++] = var;
	envp[k] = NULL;
	/* Sources above the targets, so that dup2 clears close-on-exec. */
	rfd = fcntl(P->ring->fd, F_DUPFD_CLOEXEC, 16);
	bfd = fcntl(P->fd, F_DUPFD_CLOEXEC, 16);
	xfd = fcntl(P->xfd, F_DUPFD_CLOEXEC, 16);
	if (rfd < 0 || bfd < 0 || xfd < 0) {
		err = sr__errorf(-errno, "process workers: dup: %s", strerror(errno));
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, rfd, SR__PROC_FD_RING);
	posix_spawn_file_actions_adddup2(&fa, bfd, SR__PROC_FD_BLOCK);
	posix_spawn_file_actions_adddup2(&fa, xfd, SR__PROC_FD_XCHG);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	/* Nothing else of the trainer's (its pipes, sockets) stays open. */
	posix_spawn_file_actions_addclosefrom_np(&fa, SR__PROC_FD_XCHG + 1);
#endif
	spawnattr_init(&at, 0);
	atomic_store_explicit(&r->state, SR__PW_BOOT, memory_order_relaxed);
	atomic_store_explicit(&r->err_len, 0, memory_order_relaxed);
	atomic_store_explicit(&r->sleeping, 0, memory_order_relaxed);
	atomic_store_explicit(&r->checks_finite, 0, memory_order_relaxed);
	/* The worker treats every command up to the current go as settled. */
	atomic_store_explicit(&r->done_gen, P->gen, memory_order_relaxed);
	r->start_gen = P->gen;
	/* The worker's CPUs: the child inherits the affinity of the thread
	 * that spawns it, so this thread takes them for the spawn and gets
	 * its own back after. The worker and every thread it ever starts (a
	 * Python worker's BLAS threads) run there, restarts included. */
	if (P->cpus && CPU_COUNT(&P->cpus[w]) && !sched_getaffinity(0, sizeof(self), &self))
		bound = !sched_setaffinity(0, sizeof(P->cpus[w]), &P->cpus[w]);
	/* Ordered before the child reads them by the spawn itself. */
	err = posix_spawn(&pid, P->exe, &fa, &at, P->argv, envp);
	if (bound)
		sched_setaffinity(0, sizeof(self), &self);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	if (err) {
		char what[300];

		snprintf(what, sizeof(what), "process workers: cannot start '%s'", P->exe);
		err = sr__spawn_errorf(err, what);
		goto out;
	}
	P->pid[w] = pid;
	r->pid = pid;
out:
	if (rfd >= 0)
		close(rfd);
	if (bfd >= 0)
		close(bfd);
	if (xfd >= 0)
		close(xfd);
	free(envp);
	return err;
}

/*
 * A pool with a named ring: a guard process removes the ring's and the
 * statistics block's names once this process is gone, if nobody else
 * removed them (a trainer killed by SIGKILL never runs sr_ring_destroy).
 * It reads a pipe whose write end only this process holds (close-on-exec,
 * and our spawns close every other descriptor), so it wakes when we close
 * the pool or die; it is in a process group of its own, so that a Ctrl-C
 * in the terminal, which stops the trainer, does not stop it first.
 * Without the stepring-worker program the names stay, as for thread pools
 * (`stepring ring rm --stale`).
 */
void sr__procs_spawn_guard(struct sr__procs *P, const char *stats_name)
{
	char *exe = NULL, dev[2][24], ino[2][24];
	char *argv[9];
	struct stat st;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int pfd[2], n = 0, rfd;

	if (!P->ring->named || sr__procs_find_worker(&exe))
		goto out;
	if (fstat(P->ring->fd, &st))
		goto out;
	argv[n++] = exe;
	argv[n++] = "--guard";
	argv[n++] = P->ring->name;
	snprintf(dev[0], sizeof(dev[0]), "%llu", (unsigned long long)st.st_dev);
	snprintf(ino[0], sizeof(ino[0]), "%llu", (unsigned long long)st.st_ino);
	argv[n++] = dev[0];
	argv[n++] = ino[0];
	if (stats_name) {
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", sr__shm_dir(),
			 stats_name[0] == '/' ? stats_name + 1 : stats_name);
		if (!stat(path, &st)) {
			argv[n++] = (char *)stats_name;
			snprintf(dev[1], sizeof(dev[1]), "%llu", (unsigned long long)st.st_dev);
			snprintf(ino[1], sizeof(ino[1]), "%llu", (unsigned long long)st.st_ino);
			argv[n++] = dev[1];
			argv[n++] = ino[1];
		}
	}
	argv[n] = NULL;
	if (pipe2(pfd, O_CLOEXEC))
		goto out;
	rfd = fcntl(pfd[0], F_DUPFD_CLOEXEC, 16);
	close(pfd[0]);
	if (rfd < 0) {
		close(pfd[1]);
		goto out;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, rfd, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	posix_spawn_file_actions_addclosefrom_np(&fa, 4);
#endif
	spawnattr_init(&at, POSIX_SPAWN_SETPGROUP); /* process group 0: one of its own */
	if (posix_spawn(&P->guard, exe, &fa, &at, argv, environ) == 0)
		P->guard_fd = pfd[1];
	else
		close(pfd[1]);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	close(rfd);
out:
	free(exe);
}
