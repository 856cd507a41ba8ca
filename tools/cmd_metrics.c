/*
 * `stepring metrics [NAME...]`: every live pool's statistics block as
 * Prometheus / OpenMetrics metrics (tools/metrics.c), served over HTTP
 * (--listen), written for node_exporter's textfile collector
 * (--textfile), appended as a time series (--out), or printed once.
 *
 * DESIGN
 * One thread, one poll(2) loop. Every --interval the command samples:
 * it looks for pools (the NAMEs given, or every live pool of this uid),
 * attaches to new ones with the shared reader (tools/stats_read.c: pread,
 * our uid only, the seqlock snapshot), drops those that ended (state
 * ENDED, name gone, or nobody holds the creator lock: a stale segment is
 * never reported), and takes the interval's rates (steps/s, the time
 * shares, worker utilisation, CPU use) between this sample and the last.
 * A scrape reads a fresh snapshot of each pool for the counters, so they
 * are as new as the scrape, and checks again that the pool is alive; the
 * interval gauges come from the last sample.
 *
 * The HTTP server is deliberately small: HTTP/1.0 and 1.1 requests, GET
 * and HEAD of /metrics, every response "Connection: close". A request
 * head is read into a fixed buffer (8 KiB: larger is answered 431); a
 * request that is not HTTP is answered 400, another method 405, another
 * path 404. Sockets are non-blocking and each connection has a deadline,
 * so a client that sends nothing, or reads nothing, holds one of the 16
 * connection slots for at most 10 s and never blocks the loop. After a
 * response the server shuts down its side and drains what the client
 * still sends, so a pipelined request does not turn into a reset that
 * cuts the response short.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "metrics.h"
#include "stats_read.h"

int cmd_metrics(int argc, char **argv);

#define MAX_POOLS 64
#define MAX_NAMES 64
#define MAX_CLIENTS 16
#define REQ_MAX 8192
#define CLIENT_TIMEOUT_NS (10ull * 1000000000ull)
#define DRAIN_TIMEOUT_NS (1ull * 1000000000ull)
#define TEXTFILE "stepring.prom"

struct mpool {
	struct stats_src src;
	struct stats_snap prev, cur, fresh;
	struct stats_rates rates;
	bool have_prev;
	bool fresh_sample; /* the last sample found the block updated */
};

enum cstate { C_READ, C_WRITE, C_DRAIN };

struct client {
	int fd;
	enum cstate st;
	char req[REQ_MAX];
	size_t rlen;
	struct mbuf resp;
	size_t woff;
	uint64_t deadline;
};

struct metrics {
	const char *names[MAX_NAMES];
	int nnames;
	struct mpool *pools[MAX_POOLS];
	int npools;
	const char *out_path, *textfile_dir;
	char textfile[4096], textfile_tmp[4096];
	FILE *out;
	int lfd;
	struct client cl[MAX_CLIENTS];
	int ncl;
};

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stepring metrics [NAME...] [--listen [HOST:]PORT] [--textfile DIR]\n"
		"                        [--out FILE.jsonl] [--interval S] [--count N]\n"
		"                        [--once [--openmetrics]]\n"
		"\n"
		"Live pools' statistics as Prometheus metrics (steps, episodes, faults,\n"
		"restarts, fault and non-finite rows as counters; batch latency as a summary;\n"
		"time-breakdown shares, envs, workers, CPU and RSS as gauges; labels pool, env,\n"
		"worker_kind, mode and, in MPI pools, rank). NAME is a pool's ring name; without\n"
		"NAME, every running pool of this user. A pool that ends disappears; a\n"
		"segment whose pool is gone is never reported. docs/metrics.md lists them.\n"
		"\n"
		"  --listen [HOST:]PORT  serve GET /metrics over HTTP (HOST default 127.0.0.1;\n"
		"                        PORT 0: pick a free one); prints the address\n"
		"  --textfile DIR        write DIR/" TEXTFILE " every interval, atomically\n"
		"                        (node_exporter --collector.textfile.directory DIR)\n"
		"  --out FILE            append one JSON line per pool and interval (a time\n"
		"                        series: /usr/bin/python3 tools/plot_timeline.py FILE)\n"
		"  --interval S          sampling interval: new pools, the interval gauges,\n"
		"                        the outputs (default 1)\n"
		"  --count N             exit after N intervals\n"
		"  --once                print the metrics once on stdout and exit\n"
		"  --openmetrics         with --once: the OpenMetrics text format\n"
		"\n"
		"Exit status: 0, 1 when it cannot listen or write, 2 on bad arguments.\n");
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double unix_now(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* ------------------------------------------------------------------ pools */

static void drop_pool(struct metrics *m, int i)
{
	stats_detach(&m->pools[i]->src);
	free(m->pools[i]);
	m->pools[i] = m->pools[--m->npools];
}

static int find_pool(const struct metrics *m, const char *name)
{
	for (int i = 0; i < m->npools; i++)
		if (!strcmp(m->pools[i]->src.name, name))
			return i;
	return -1;
}

/* Attach to the pool @name if it runs. */
static void add_pool(struct metrics *m, const char *name)
{
	struct mpool *p;
	const char *why;

	if (m->npools == MAX_POOLS || find_pool(m, name) >= 0)
		return;
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->src.fd = -1;
	if (stats_set_names(&p->src, name) || stats_attach(&p->src, &why) ||
	    stats_ended(&p->src, &why)) {
		stats_detach(&p->src);
		free(p);
		return;
	}
	m->pools[m->npools++] = p;
}

/* One sample: new pools, ended ones dropped, the interval's rates, and the
 * time series and the textfile written. */
static void sample(struct metrics *m)
{
	const char *why;

	if (m->nnames) {
		for (int i = 0; i < m->nnames; i++)
			add_pool(m, m->names[i]);
	} else {
		static char live[MAX_POOLS][256];
		int n = stats_find_live(live, MAX_POOLS);

		for (int i = 0; i < n; i++)
			add_pool(m, live[i]);
	}
	for (int i = 0; i < m->npools;) {
		struct mpool *p = m->pools[i];

		if (stats_ended(&p->src, &why) || !stats_snapshot(&p->src, &p->cur)) {
			drop_pool(m, i);
			continue;
		}
		i++;
		/* A pool updates its block every 64 batches: a slow one may not
		 * have since the last sample. Its rates stay those of the last
		 * interval that had news, and the series skips the sample. */
		p->fresh_sample = !p->have_prev || p->cur.agg.now_ns != p->prev.agg.now_ns;
		if (!p->fresh_sample)
			continue;
		stats_rates(p->have_prev ? &p->prev : NULL, &p->cur, &p->rates);
		p->prev = p->cur;
		p->have_prev = true;
	}
	if (m->out) {
		double t = unix_now();

		for (int i = 0; i < m->npools; i++)
			if (m->pools[i]->fresh_sample)
				stats_sample_json(m->out, m->pools[i]->src.name, &m->pools[i]->cur,
						  &m->pools[i]->rates, t);
	}
}

static int cmp_pool(const void *a, const void *b)
{
	return strcmp(((const struct metrics_pool *)a)->name,
		      ((const struct metrics_pool *)b)->name);
}

/* The exposition of the live pools, from fresh snapshots. */
static void render(struct metrics *m, struct mbuf *b, bool om)
{
	struct metrics_pool mp[MAX_POOLS];
	int n = 0;
	const char *why;

	for (int i = 0; i < m->npools;) {
		struct mpool *p = m->pools[i];

		if (stats_ended(&p->src, &why) || !stats_snapshot(&p->src, &p->fresh)) {
			drop_pool(m, i);
			continue;
		}
		mp[n++] = (struct metrics_pool){.name = p->src.name, .snap = &p->fresh,
						.rates = p->have_prev ? &p->rates : NULL};
		i++;
	}
	qsort(mp, (size_t)n, sizeof(mp[0]), cmp_pool);
	metrics_render(b, mp, n, om);
}

/* --------------------------------------------------------------- textfile */

static int write_textfile(struct metrics *m)
{
	struct mbuf b = {0};
	int fd, err = 0;

	render(m, &b, false);
	if (b.oom) {
		mbuf_free(&b);
		return -ENOMEM;
	}
	fd = open(m->textfile_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		err = -errno;
	for (size_t off = 0; !err && off < b.len;) {
		ssize_t w = write(fd, b.p + off, b.len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			err = -errno;
		else
			off += (size_t)w;
	}
	if (fd >= 0 && close(fd) && !err)
		err = -errno;
	/* rename: node_exporter never reads a half-written file. */
	if (!err && rename(m->textfile_tmp, m->textfile))
		err = -errno;
	if (err)
		unlink(m->textfile_tmp);
	mbuf_free(&b);
	return err;
}

/* ------------------------------------------------------------------- HTTP */

/* "[HOST:]PORT", "[V6]:PORT" -> a listening socket; dies on bad syntax,
 * returns -errno when it cannot listen. *@shown: the address as printed. */
static int listen_on(const char *spec, char *shown, size_t shown_len)
{
	char host[256] = "127.0.0.1", port[16];
	const char *p = spec, *colon;
	struct addrinfo hints = {0}, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	char hbuf[NI_MAXHOST], pbuf[NI_MAXSERV];
	int fd, one = 1, rc;
	size_t hl;

	if (spec[0] == '[') {
		const char *end = strchr(spec, ']');

		if (!end || end[1] != ':' || end - spec - 1 <= 0 ||
		    (size_t)(end - spec - 1) >= sizeof(host))
			cli_die("--listen: '%s' is not [HOST:]PORT", spec);
		hl = (size_t)(end - spec - 1);
		memcpy(host, spec + 1, hl);
		host[hl] = '\0';
		p = end + 2;
	} else if ((colon = strrchr(spec, ':'))) {
		hl = (size_t)(colon - spec);
		if (hl >= sizeof(host) || memchr(spec, ':', hl))
			cli_die("--listen: '%s' is not [HOST:]PORT (an IPv6 address goes in [])",
				spec);
		if (hl) {
			memcpy(host, spec, hl);
			host[hl] = '\0';
		}
		p = colon + 1;
	}
	if (!*p || strlen(p) > 5 || strspn(p, "0123456789") != strlen(p) || atoi(p) > 65535)
		cli_die("--listen: '%s' is not [HOST:]PORT with PORT in [0, 65535]", spec);
	snprintf(port, sizeof(port), "%d", atoi(p));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "stepring: metrics: --listen %s: %s\n", spec, gai_strerror(rc));
		return -EADDRNOTAVAIL;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		freeaddrinfo(ai);
		return rc;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
		rc = -errno;
		close(fd);
		freeaddrinfo(ai);
		return rc;
	}
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) ||
	    getnameinfo((struct sockaddr *)&ss, sl, hbuf, sizeof(hbuf), pbuf, sizeof(pbuf),
			NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(shown, shown_len, "%s:?", host);
	} else {
		snprintf(shown, shown_len, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", hbuf,
			 pbuf);
	}
	return fd;
}

static void client_close(struct metrics *m, int i)
{
	close(m->cl[i].fd);
	mbuf_free(&m->cl[i].resp);
	m->cl[i] = m->cl[--m->ncl];
	memset(&m->cl[m->ncl], 0, sizeof(m->cl[0]));
}

static const char *reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 431:
		return "Request Header Fields Too Large";
	case 505:
		return "HTTP Version Not Supported";
	}
	return "Internal Server Error";
}

/* The response to one request head (NUL-terminated in c->req). */
static void respond(struct metrics *m, struct client *c, int code, bool head_only, bool om)
{
	struct mbuf body = {0};
	const char *ct = "text/plain; charset=utf-8";

	if (code == 200) {
		render(m, &body, om);
		ct = om ? METRICS_CT_OPENMETRICS : METRICS_CT_PROMETHEUS;
	} else {
		mbuf_printf(&body, "%d %s%s\n", code, reason(code),
			    code == 404 ? ": the metrics are at /metrics" : "");
	}
	if (body.oom) {
		mbuf_free(&body);
		code = 500;
		mbuf_printf(&body, "500 out of memory\n");
	}
	mbuf_printf(&c->resp,
		    "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
		    "Connection: close\r\n\r\n",
		    code, reason(code), ct, body.len, code == 405 ? "Allow: GET, HEAD\r\n" : "");
	if (!head_only && body.len)
		mbuf_printf(&c->resp, "%.*s", (int)body.len, body.p);
	mbuf_free(&body);
	c->st = C_WRITE;
	c->woff = 0;
}

static bool token_char(char ch)
{
	return ch > 0x20 && ch < 0x7f && !strchr("()<>@,;:\\\"/[]?={}", ch);
}

/* Do the header lines from @lines (the request line's end) ask for
 * OpenMetrics (an Accept header naming it)? */
static bool wants_openmetrics(const char *lines)
{
	for (const char *l = strchr(lines, '\n'); l; l = strchr(l, '\n')) {
		l++;
		if (!strncasecmp(l, "Accept:", 7)) {
			const char *end = strchr(l, '\n');
			size_t n = end ? (size_t)(end - l) : strlen(l);

			if (memmem(l, n, "application/openmetrics-text", 28))
				return true;
		}
	}
	return false;
}

/* A complete request head is in c->req: parse its request line. */
static void handle(struct metrics *m, struct client *c)
{
	char *sp1, *sp2, *eol, *target;
	size_t mlen;
	bool head;

	eol = strpbrk(c->req, "\r\n");
	*eol = '\0';
	sp1 = strchr(c->req, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strchr(sp2 + 1, ' ')) {
		respond(m, c, 400, false, false);
		return;
	}
	mlen = (size_t)(sp1 - c->req);
	for (size_t i = 0; i < mlen; i++)
		if (!token_char(c->req[i])) {
			respond(m, c, 400, false, false);
			return;
		}
	if (mlen == 0 || sp2 == sp1 + 1 || strncmp(sp2 + 1, "HTTP/", 5)) {
		respond(m, c, 400, false, false);
		return;
	}
	if (strcmp(sp2 + 1, "HTTP/1.0") && strcmp(sp2 + 1, "HTTP/1.1")) {
		respond(m, c, 505, false, false);
		return;
	}
	head = mlen == 4 && !memcmp(c->req, "HEAD", 4);
	if (!head && !(mlen == 3 && !memcmp(c->req, "GET", 3))) {
		respond(m, c, 405, false, false);
		return;
	}
	*sp2 = '\0';
	target = sp1 + 1;
	target[strcspn(target, "?#")] = '\0';
	if (strcmp(target, "/metrics")) {
		respond(m, c, 404, head, false);
		return;
	}
	*eol = '\n'; /* the headers after the request line, for Accept */
	respond(m, c, 200, head, wants_openmetrics(eol));
}

static void client_read(struct metrics *m, int i)
{
	struct client *c = &m->cl[i];
	char *end;
	ssize_t n;

	if (c->st == C_DRAIN) {
		char junk[4096];

		n = recv(c->fd, junk, sizeof(junk), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			client_close(m, i);
		return;
	}
	n = recv(c->fd, c->req + c->rlen, sizeof(c->req) - 1 - c->rlen, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		client_close(m, i);
		return;
	}
	c->rlen += (size_t)n;
	c->req[c->rlen] = '\0';
	if (memchr(c->req, '\0', c->rlen)) {
		respond(m, c, 400, false, false);
		return;
	}
	end = strstr(c->req, "\r\n\r\n");
	if (!end)
		end = strstr(c->req, "\n\n");
	if (end) {
		handle(m, c);
	} else if (c->rlen == sizeof(c->req) - 1) {
		respond(m, c, 431, false, false);
	}
}

static void client_write(struct metrics *m, int i)
{
	struct client *c = &m->cl[i];

	while (c->woff < c->resp.len) {
		ssize_t n = send(c->fd, c->resp.p + c->woff, c->resp.len - c->woff,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			client_close(m, i);
			return;
		}
		c->woff += (size_t)n;
	}
	/* Sent: our side done; read what the client still sends until it
	 * closes, so that closing does not reset the connection under it. */
	shutdown(c->fd, SHUT_WR);
	mbuf_free(&c->resp);
	c->st = C_DRAIN;
	c->deadline = now_ns() + DRAIN_TIMEOUT_NS;
}

static void accept_clients(struct metrics *m)
{
	while (m->ncl < MAX_CLIENTS) {
		int fd = accept4(m->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return; /* EAGAIN, or an aborted connection: nothing to do */
		memset(&m->cl[m->ncl], 0, sizeof(m->cl[0]));
		m->cl[m->ncl].fd = fd;
		m->cl[m->ncl].st = C_READ;
		m->cl[m->ncl].deadline = now_ns() + CLIENT_TIMEOUT_NS;
		m->ncl++;
	}
}

/* Serve until @until (monotonic ns) or a signal. */
static void serve(struct metrics *m, uint64_t until)
{
	struct pollfd pf[MAX_CLIENTS + 1];

	for (;;) {
		uint64_t now = now_ns(), wake = until;
		int n = 0, timeout_ms;

		if (stop_flag || now >= until)
			return;
		for (int i = 0; i < m->ncl;) {
			if (now >= m->cl[i].deadline) {
				client_close(m, i);
				continue;
			}
			if (m->cl[i].deadline < wake)
				wake = m->cl[i].deadline;
			i++;
		}
		if (m->lfd >= 0 && m->ncl < MAX_CLIENTS)
			pf[n++] = (struct pollfd){.fd = m->lfd, .events = POLLIN};
		for (int i = 0; i < m->ncl; i++)
			pf[n++] = (struct pollfd){
				.fd = m->cl[i].fd,
				.events = m->cl[i].st == C_WRITE ? POLLOUT : POLLIN};
		timeout_ms = (int)((wake - now + 999999) / 1000000);
		if (poll(pf, (nfds_t)n, timeout_ms) <= 0)
			continue; /* timeout, or EINTR (stop_flag is checked above) */
		/* Clients first, from the last (client_close moves the last
		 * one into the closed one's slot), then new connections. */
		for (int k = n - 1; k >= 0; k--) {
			int i;

			if (!pf[k].revents || pf[k].fd == m->lfd)
				continue;
			for (i = 0; i < m->ncl && m->cl[i].fd != pf[k].fd; i++)
				;
			if (i == m->ncl)
				continue;
			if (m->cl[i].st == C_WRITE)
				client_write(m, i);
			else
				client_read(m, i);
			/* A response just formed: try to send it at once. */
			if (i < m->ncl && m->cl[i].fd == pf[k].fd && m->cl[i].st == C_WRITE)
				client_write(m, i);
		}
		if (m->lfd >= 0 && n && pf[0].fd == m->lfd && pf[0].revents)
			accept_clients(m);
	}
}

/* ------------------------------------------------------------------- main */

int cmd_metrics(int argc, char **argv)
{
	struct metrics *m = calloc(1, sizeof(*m));
	const char *v, *listen_spec = NULL;
	double interval = 1.0;
	long long count = 0;
	bool once = false, om = false;
	char shown[300];
	int rc = 0, err;

	if (!m)
		cli_die("metrics: out of memory");
	m->lfd = -1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			free(m);
			return 0;
		} else if (cli_opt(argc, argv, &i, "--listen", &v)) {
			listen_spec = v;
		} else if (cli_opt(argc, argv, &i, "--textfile", &v)) {
			if (!v[0])
				cli_die("--textfile: empty directory name");
			m->textfile_dir = v;
		} else if (cli_opt(argc, argv, &i, "--out", &v)) {
			if (!v[0])
				cli_die("--out: empty file name");
			m->out_path = v;
		} else if (cli_opt(argc, argv, &i, "--interval", &v)) {
			interval = cli_double("--interval", v, 0.05, 3600);
		} else if (cli_opt(argc, argv, &i, "--count", &v)) {
			count = cli_int("--count", v, 1, 1000000000);
		} else if (cli_opt(argc, argv, &i, "--once", NULL)) {
			once = true;
		} else if (cli_opt(argc, argv, &i, "--openmetrics", NULL)) {
			om = true;
		} else if (argv[i][0] == '-') {
			cli_unknown("metrics", argv[i]);
		} else {
			struct stats_src t;

			if (stats_set_names(&t, argv[i]))
				cli_die("metrics: '%s' is not a valid pool name", argv[i]);
			if (m->nnames == MAX_NAMES)
				cli_die("metrics: at most %d pool names", MAX_NAMES);
			m->names[m->nnames++] = argv[i];
		}
	}
	if (om && !once)
		cli_die("metrics: --openmetrics is for --once (a scrape asks for the format "
			"it wants; the textfile collector reads Prometheus' format)");
	if (once && (listen_spec || m->textfile_dir || m->out_path || count))
		cli_die("metrics: --once prints on stdout; not with --listen, --textfile, --out "
			"or --count");
	if (!once && !listen_spec && !m->textfile_dir && !m->out_path)
		cli_die("metrics: nothing to do: give --listen, --textfile, --out or --once "
			"(see 'stepring metrics --help')");
	if (m->textfile_dir) {
		struct stat st;

		if (stat(m->textfile_dir, &st) || !S_ISDIR(st.st_mode))
			cli_die("--textfile: '%s' is not a directory", m->textfile_dir);
		if (strlen(m->textfile_dir) > 3000)
			cli_die("--textfile: directory name too long");
		snprintf(m->textfile, sizeof(m->textfile), "%s/%s", m->textfile_dir, TEXTFILE);
		snprintf(m->textfile_tmp, sizeof(m->textfile_tmp), "%s/.%s.%d.tmp",
			 m->textfile_dir, TEXTFILE, (int)getpid());
	}
	signal(SIGPIPE, SIG_IGN);
	if (once) {
		struct mbuf b = {0};

		sample(m);
		render(m, &b, om);
		if (b.oom || fwrite(b.p, 1, b.len, stdout) != b.len || fflush(stdout)) {
			fprintf(stderr, "stepring: metrics: cannot write the metrics\n");
			rc = 1;
		}
		mbuf_free(&b);
		goto out;
	}
	if (m->out_path && !(m->out = fopen(m->out_path, "a"))) {
		fprintf(stderr, "stepring: metrics: --out %s: %s\n", m->out_path, strerror(errno));
		rc = 1;
		goto out;
	}
	if (listen_spec) {
		m->lfd = listen_on(listen_spec, shown, sizeof(shown));
		if (m->lfd < 0) {
			fprintf(stderr, "stepring: metrics: cannot listen on %s: %s\n", listen_spec,
				strerror(-m->lfd));
			rc = 1;
			goto out;
		}
		printf("stepring metrics: serving http://%s/metrics\n", shown);
		fflush(stdout);
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	for (long long k = 0; !stop_flag; k++) {
		uint64_t next = now_ns() + (uint64_t)(interval * 1e9);

		sample(m);
		if (m->textfile_dir && (err = write_textfile(m))) {
			fprintf(stderr, "stepring: metrics: --textfile %s: %s\n", m->textfile,
				strerror(-err));
			rc = 1;
			break;
		}
		if (count && k + 1 >= count)
			break;
		if (m->lfd >= 0) {
			serve(m, next);
		} else {
			while (!stop_flag && now_ns() < next) {
				uint64_t left = next - now_ns();
				struct timespec ts = {(time_t)(left / 1000000000ull),
						      (long)(left % 1000000000ull)};

				nanosleep(&ts, NULL);
			}
		}
	}
	/* The metrics stop with the command: node_exporter must not keep
	 * reporting the last values of a textfile nobody updates. */
	if (m->textfile_dir)
		unlink(m->textfile);
out:
	while (m->ncl)
		client_close(m, 0);
	if (m->lfd >= 0)
		close(m->lfd);
	if (m->out && fclose(m->out) && !rc) {
		fprintf(stderr, "stepring: metrics: --out %s: %s\n", m->out_path, strerror(errno));
		rc = 1;
	}
	while (m->npools)
		drop_pool(m, 0);
	free(m);
	return rc;
}
