/*
 * The guard of a pool with a named ring (`stepring-worker --guard`): see
 * sr__proc_guard_main in proc_internal.h, spawned by proc_trainer.c.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proc_internal.h"

/* ---------------------------------------------------------------------- */
/* The guard of a named ring                                               */
/* ---------------------------------------------------------------------- */

int sr__proc_guard_main(int argc, char **argv)
{
	char buf[64];
	ssize_t r;

	/* A terminal's Ctrl-C or hang-up is for the trainer; the guard runs
	 * until the trainer's end of the pipe closes. */
	signal(SIGINT, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	while ((r = read(3, buf, sizeof(buf))) != 0)
		if (r < 0 && errno != EINTR)
			break;
	for (int i = 2; i + 2 < argc; i += 3) {
		const char *name = argv[i];
		unsigned long long dev = strtoull(argv[i + 1], NULL, 10);
		unsigned long long ino = strtoull(argv[i + 2], NULL, 10);
		char path[512];

		snprintf(path, sizeof(path), "%s/%s", sr__shm_dir(), name[0] == '/' ? name + 1 : name);
		/* The worker processes die with the trainer, and until they
		 * have exited their inherited descriptor still holds the
		 * ring's creator lock: look again for a while. A live trainer
		 * (the pool was closed normally) keeps the lock and unlinks
		 * the names itself. */
		for (int k = 0; k < 500; k++) {
			struct stat st;
			struct timespec ts = {0, 10000000};

			if (stat(path, &st) || (unsigned long long)st.st_dev != dev ||
			    (unsigned long long)st.st_ino != ino)
				break; /* gone, or another pool's now */
			if (sr__shm_in_use_name(name) == 0) {
				unlink(path);
				break;
			}
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
