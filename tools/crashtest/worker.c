/*
 * worker.c -- the process between the explorer and the checkers.
 *
 * The explorer sends, in order: the image PM held when recording started
 * (BASE), the lines that reached PM at each fence (PERSIST), and for each
 * crash instant its pending units and the images to check (POINT). The
 * worker keeps the persisted image up to date from those messages in a
 * memfd and forks one checker per image (at most `jobs` at once). A checker
 * maps the memfd privately: its own changes stay its own, and the worker
 * changes the memfd only when no checker runs (PERSIST waits for them), so
 * each checker sees the image of its instant. Sharing the image instead of
 * copying it keeps each fork cheap. A checker that runs out of time is
 * killed and reported as a hang; one that dies is reported as a crash, with
 * its output (sanitizer reports included).
 */
#include "ct.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MSG_BASE = 1, MSG_PERSIST, MSG_POINT, MSG_END };

struct msg_hdr {
	uint32_t type;
	uint32_t pad;
	uint64_t len;
};

struct point_wire {
	int32_t op, after;
	uint64_t index, hash;
	uint32_t nunits, nlines, nvar, pad;
};

struct ct_worker {
	pid_t pid;
	int fd;
};

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	char *c = p;
	while (n) {
		ssize_t r = read(fd, c, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int send_msg(struct ct_worker *w, uint32_t type, const void *a, size_t alen, const void *b,
		    size_t blen)
{
	struct msg_hdr h = {type, 0, alen + blen};
	if (write_all(w->fd, &h, sizeof h) || (alen && write_all(w->fd, a, alen)) ||
	    (blen && write_all(w->fd, b, blen)))
		return -1;
	return 0;
}

/* ---- the worker process ------------------------------------------------------- */

/* A checker slot and its image file, reused from one checker to the next:
 * a checker writes only the pages where the file may differ from its image
 * (stale), and reports the pages its own stores reached (touched), which
 * become stale for the next. */
struct slot {
	pid_t pid;
	struct timespec t0;
	struct ct_point pt; /* op, after, index of the instant (no lines) */
	uint64_t vid;
	char report[600];
	char img[600];
	int pidfd; /* readable once the checker has exited */
	uint64_t *stale;
	uint64_t *touched; /* shared with the checker */
	int fresh;	   /* the file must be written whole */
};

struct wstate {
	const struct ct_run *run;
	struct ct_stats *st;
	int jobs;
	uint8_t *persisted; /* shared mapping of memfd */
	int memfd;
	uint64_t *base_hash; /* per page, its hash when recording began */
	uint64_t *changed;   /* pages changed since */
	uint64_t *pnz;	     /* 4 KiB pages of persisted that may hold anything but zeros */
	uint64_t size;
	struct slot *slots;
	int busy;
};

static void mark_page(void *arg, uint64_t page)
{
	uint64_t *pnz = arg;
	pnz[page / 64] |= 1ULL << (page % 64);
}

static int page_set(const uint64_t *pnz, uint64_t page)
{
	return (pnz[page / 64] >> (page % 64)) & 1;
}

static int either(const uint64_t *a, const uint64_t *b, uint64_t page)
{
	return page_set(a, page) || (b && page_set(b, page));
}

int ct_write_pages(int fd, const uint8_t *img, uint64_t size, const uint64_t *b1,
		   const uint64_t *b2)
{
	uint64_t npages = size / FR_PAGE_SIZE;
	for (uint64_t p = 0; p < npages;) {
		if (!either(b1, b2, p)) {
			p++;
			continue;
		}
		uint64_t e = p + 1;
		while (e < npages && either(b1, b2, e))
			e++;
		size_t len = (e - p) * FR_PAGE_SIZE;
		if (pwrite(fd, img + p * FR_PAGE_SIZE, len, (off_t)(p * FR_PAGE_SIZE)) !=
		    (ssize_t)len)
			return -1;
		p = e;
	}
	return 0;
}

/* Brings the slot's file to img: whole (a fresh file), or the stale pages
 * and those the variant changed (vpages). */
static int write_image(const struct slot *s, const uint8_t *img, const uint64_t *pnz,
		       const uint64_t *vpages, uint64_t size)
{
	int fd = open(s->img, O_CREAT | O_RDWR | O_CLOEXEC | (s->fresh ? O_TRUNC : 0), 0600);
	if (fd < 0)
		return -1;
	int rc = s->fresh ? ftruncate(fd, (off_t)size) : 0;
	if (!rc)
		rc = s->fresh ? ct_write_pages(fd, img, size, pnz, vpages)
			      : ct_write_pages(fd, img, size, s->stale, vpages);
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

static void print_file(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof buf, f)) > 0)
		fwrite(buf, 1, n, stderr);
	fclose(f);
}

static void reaped(struct wstate *ws, struct slot *s, int status, int hung)
{
	const struct ct_run *run = ws->run;
	int code = hung ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : -2;
	if (getenv("CT_TIMING")) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		fprintf(stderr, "checker %llu/%llu: %.2f ms\n", (unsigned long long)s->pt.index,
			(unsigned long long)s->vid,
			(double)(now.tv_sec - s->t0.tv_sec) * 1e3 +
			    (double)(now.tv_nsec - s->t0.tv_nsec) / 1e6);
	}
	if (code == 0) {
		__atomic_add_fetch(&ws->st->images, 1, __ATOMIC_RELAXED);
		if (run->verbose || run->keep)
			print_file(s->report);
	} else {
		__atomic_add_fetch(&ws->st->images, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&ws->st->violations, 1, __ATOMIC_RELAXED);
		if (code != 3) {
			char cmd[1500];
			ct_replay_cmd(run, &s->pt, s->vid, cmd, sizeof cmd);
			if (hung)
				__atomic_add_fetch(&ws->st->hangs, 1, __ATOMIC_RELAXED);
			fprintf(stderr,
				"CRASH-STATE VIOLATION (%s mode, workload %s)\n"
				"  crash instant %llu (%s operation %d), image %llu: the checker "
				"%s; its output:\n",
				run->mode_name, run->w->name, (unsigned long long)s->pt.index,
				s->pt.after ? "right after" : "inside", s->pt.op,
				(unsigned long long)s->vid,
				hung ? "hung (mount or a check did not finish in time)"
				: WIFSIGNALED(status)
				    ? "died of a signal (a crash in mount or recovery?)"
				    : "exited abnormally (a sanitizer report?)");
			print_file(s->report);
			fprintf(stderr, "  replay: %s\n", cmd);
		} else {
			print_file(s->report);
		}
	}
	if (!run->keep)
		unlink(s->report);
	uint64_t words = ws->size / FR_PAGE_SIZE / 64 + 1;
	if (code == 0 || code == 3) {
		for (uint64_t i = 0; i < words; i++)
			s->stale[i] |= __atomic_load_n(&s->touched[i], __ATOMIC_RELAXED);
	} else {
		s->fresh = 1; /* stopped anywhere: the file's content is unknown */
	}
	s->pid = 0;
	ws->busy--;
}

/* Reaps finished checkers and kills those out of time. Waits (sleeping on
 * the checkers' pidfds) until fewer than `limit` run. */
static void reap(struct wstate *ws, int limit)
{
	for (;;) {
		int status;
		pid_t pid;
		while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
			for (int i = 0; i < ws->jobs; i++)
				if (ws->slots[i].pid == pid) {
					close(ws->slots[i].pidfd);
					reaped(ws, &ws->slots[i], status, 0);
				}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		struct pollfd pf[64];
		int n = 0;
		long wait_ms = 1000;
		for (int i = 0; i < ws->jobs; i++) {
			struct slot *s = &ws->slots[i];
			if (!s->pid)
				continue;
			long left = (long)(s->t0.tv_sec + ws->run->timeout_s - now.tv_sec) * 1000;
			if (left <= 0) {
				kill(s->pid, SIGKILL);
				waitpid(s->pid, &status, 0);
				close(s->pidfd);
				reaped(ws, s, status, 1);
				continue;
			}
			wait_ms = left < wait_ms ? left : wait_ms;
			if (n < 64)
				pf[n++] = (struct pollfd){s->pidfd, POLLIN, 0};
		}
		if (ws->busy < limit)
			return;
		poll(pf, (nfds_t)n, (int)wait_ms);
	}
}

static void run_checker(struct wstate *ws, struct slot *s, const struct ct_point *pt, uint64_t vid,
			uint64_t hash)
{
	const struct ct_run *run = ws->run;
	const char *img = s->img;
	/* A private view: what this checker changes stays its own. */
	uint8_t *mine = mmap(NULL, ws->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, ws->memfd, 0);
	if (mine == MAP_FAILED)
		_exit(2);
	ws->persisted = mine;
	int rfd = open(s->report, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
	if (rfd >= 0) {
		dup2(rfd, 2);
		close(rfd);
	}
	setvbuf(stderr, NULL, _IONBF, 0);
	uint8_t *take = malloc(pt->nunits + 1);
	uint64_t *vpages = calloc(ws->size / FR_PAGE_SIZE / 64 + 1, sizeof(uint64_t));
	struct ct_variant v = {take, -1, 0};
	ct_variant_get(pt, vid, run->seed, &v);
	ct_variant_apply(pt, &v, ws->persisted, mark_page, vpages);
	ct_variant_mark(pt, &v, mark_page, ws->pnz);
	ct_variant_mark(pt, &v, mark_page, ws->changed);
	if (write_image(s, ws->persisted, ws->pnz, vpages, ws->size) < 0) {
		fprintf(stderr, "crashtest: cannot write the image %s: %s\n", img, strerror(errno));
		_exit(2);
	}
	if (getenv("CT_VERIFY_HASH") && ct_image_hash(ws->persisted, ws->size) != hash) {
		fprintf(stderr, "crashtest: internal error: image hash mismatch at instant %llu\n",
			(unsigned long long)pt->index);
		_exit(2);
	}
	struct ct_pages pages = {ws->base_hash, ws->changed, s->touched};
	int rc = ct_check_image(run, ws->persisted, ws->size, hash, pt, &v, vid, img, &pages,
				ws->st, stderr);
	if (run->keep)
		fprintf(stderr, "  image kept: %s\n", img);
	fflush(NULL);
	_exit(rc);
}

/* Reads the data extents of the (sparse) base image only. */
static int read_base(struct wstate *ws, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	static const uint8_t zero[FR_PAGE_SIZE];
	off_t pos = 0;
	for (;;) {
		off_t d = lseek(fd, pos, SEEK_DATA);
		if (d < 0)
			break;
		off_t h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			h = (off_t)ws->size;
		for (off_t p = d & ~(off_t)(FR_PAGE_SIZE - 1); p < h; p += FR_PAGE_SIZE) {
			uint8_t page[FR_PAGE_SIZE];
			if (pread(fd, page, FR_PAGE_SIZE, p) != (ssize_t)FR_PAGE_SIZE) {
				close(fd);
				return -1;
			}
			if (memcmp(page, zero, FR_PAGE_SIZE)) {
				memcpy(ws->persisted + p, page, FR_PAGE_SIZE);
				mark_page(ws->pnz, (uint64_t)p / FR_PAGE_SIZE);
			}
		}
		pos = h;
	}
	close(fd);
	return 0;
}

static int worker_main(const struct ct_run *run, int jobs, struct ct_stats *st, int fd)
{
	struct wstate ws = {.run = run, .st = st, .jobs = jobs, .size = run->pool_size};
	ws.memfd = memfd_create("ferrite-crashtest-image", MFD_CLOEXEC);
	if (ws.memfd < 0 || ftruncate(ws.memfd, (off_t)ws.size) < 0)
		return 2;
	ws.persisted = mmap(NULL, ws.size, PROT_READ | PROT_WRITE, MAP_SHARED, ws.memfd, 0);
	if (ws.persisted == MAP_FAILED)
		return 2;
	ws.pnz = calloc(ws.size / FR_PAGE_SIZE / 64 + 1, sizeof(uint64_t));
	ws.slots = calloc((size_t)jobs, sizeof(*ws.slots));
	uint64_t npages = ws.size / FR_PAGE_SIZE;
	ws.base_hash = malloc(npages * sizeof(uint64_t));
	ws.changed = calloc(npages / 64 + 1, sizeof(uint64_t));
	if (!ws.pnz || !ws.slots || !ws.base_hash || !ws.changed)
		return 2;
	uint64_t words = ws.size / FR_PAGE_SIZE / 64 + 1;
	for (int k = 0; k < jobs; k++) {
		struct slot *s = &ws.slots[k];
		s->stale = calloc(words, sizeof(uint64_t));
		s->touched = mmap(NULL, words * sizeof(uint64_t), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (!s->stale || s->touched == MAP_FAILED)
			return 2;
		s->fresh = 1;
		if (run->keep)
			snprintf(s->img, sizeof s->img, "%s/replay.pool", run->workdir);
		else
			snprintf(s->img, sizeof s->img, "%s/img-%d.pool", run->workdir, k);
	}
	uint8_t *buf = NULL;
	size_t cap = 0;
	for (;;) {
		struct msg_hdr h;
		if (read_all(fd, &h, sizeof h))
			break;
		if (h.len + 1 > cap) {
			cap = h.len + 1;
			buf = realloc(buf, cap);
			if (!buf)
				return 2;
		}
		if (h.len && read_all(fd, buf, h.len))
			break;
		buf[h.len] = 0;
		if (h.type == MSG_END)
			break;
		if (h.type == MSG_BASE) {
			const char *path = (const char *)buf + 8;
			for (int k = 0; k < jobs; k++)
				ws.slots[k].fresh = 1;
			if (read_base(&ws, path) < 0) {
				fprintf(stderr, "crashtest: cannot read the base image %s\n", path);
				return 2;
			}
			const uint64_t *zero = ct_zero_page_hashes(npages);
			for (uint64_t pg = 0; pg < npages; pg++)
				ws.base_hash[pg] = page_set(ws.pnz, pg)
						       ? ct_page_hash(ws.persisted, pg)
						       : zero[pg];
			memset(ws.changed, 0, (npages / 64 + 1) * sizeof(uint64_t));
			continue;
		}
		if (h.type == MSG_PERSIST) {
			/* Checkers read the image they were forked with. */
			reap(&ws, 1);
			for (uint64_t off = 0; off + 8 + CT_LINE <= h.len; off += 8 + CT_LINE) {
				uint64_t line;
				memcpy(&line, buf + off, 8);
				memcpy(ws.persisted + line * CT_LINE, buf + off + 8, CT_LINE);
				uint64_t pg = line * CT_LINE / FR_PAGE_SIZE;
				mark_page(ws.pnz, pg);
				mark_page(ws.changed, pg);
				for (int k = 0; k < jobs; k++)
					mark_page(ws.slots[k].stale, pg);
			}
			continue;
		}
		if (h.type != MSG_POINT)
			return 2;
		struct point_wire pw;
		memcpy(&pw, buf, sizeof pw);
		uint8_t *p = buf + sizeof pw;
		struct ct_point pt = {pw.op, pw.after, pw.index, pw.nunits, pw.nlines,
				      NULL,  NULL,     NULL,	 pw.hash};
		pt.units = (struct ct_unit *)p;
		p += sizeof(struct ct_unit) * pw.nunits;
		pt.lines = (uint64_t *)p;
		p += sizeof(uint64_t) * pw.nlines;
		pt.content = p;
		p += (uint64_t)CT_LINE * pw.nlines;
		const uint64_t *hashes = (const uint64_t *)p;
		p += sizeof(uint64_t) * pw.nvar;
		const uint32_t *vids = (const uint32_t *)p;
		uint8_t *take = malloc(pw.nunits + 1);
		for (uint32_t i = 0; i < pw.nvar; i++) {
			if (run->plant && __atomic_load_n(&st->violations, __ATOMIC_RELAXED))
				break; /* a planted bug needs to be caught once */
			reap(&ws, jobs);
			int k = 0;
			while (ws.slots[k].pid)
				k++;
			struct slot *s = &ws.slots[k];
			s->pt =
			    (struct ct_point){pt.op, pt.after, pt.index, 0, 0, NULL, NULL, NULL, 0};
			s->vid = vids[i];
			snprintf(s->report, sizeof s->report, "%s/report-%d.txt", run->workdir, k);
			memset(s->touched, 0, words * sizeof(uint64_t));
			clock_gettime(CLOCK_MONOTONIC, &s->t0);
			fflush(NULL);
			pid_t pid = fork();
			if (pid < 0) {
				perror("crashtest: fork");
				return 2;
			}
			if (pid == 0)
				run_checker(&ws, s, &pt, vids[i], hashes[i]);
			s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
			/* The checker writes the stale pages; afterwards the file
			 * differs from persisted where the variant did. */
			memset(s->stale, 0, words * sizeof(uint64_t));
			struct ct_variant v = {take, -1, 0};
			ct_variant_get(&pt, vids[i], run->seed, &v);
			ct_variant_mark(&pt, &v, mark_page, s->stale);
			s->fresh = 0;
			s->pid = pid;
			ws.busy++;
		}
		free(take);
	}
	reap(&ws, 1);
	free(buf);
	return 0;
}

/* ---- the explorer's side ------------------------------------------------------------ */

struct ct_worker *ct_worker_start(const struct ct_run *run, int jobs, struct ct_stats *st)
{
	int p[2];
	if (pipe(p) < 0)
		return NULL;
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return NULL;
	}
	if (pid == 0) {
		close(p[1]);
		_exit(worker_main(run, jobs, st, p[0]));
	}
	close(p[0]);
	struct ct_worker *w = calloc(1, sizeof(*w));
	w->pid = pid;
	w->fd = p[1];
	return w;
}

int ct_worker_base(struct ct_worker *w, const char *path, uint64_t hash)
{
	return send_msg(w, MSG_BASE, &hash, 8, path, strlen(path) + 1);
}

static uint8_t *pbatch;
static size_t pbatch_len, pbatch_cap;

static int flush_persist(struct ct_worker *w)
{
	if (!pbatch_len)
		return 0;
	int rc = send_msg(w, MSG_PERSIST, pbatch, pbatch_len, NULL, 0);
	pbatch_len = 0;
	return rc;
}

int ct_worker_persist(struct ct_worker *w, uint64_t line, const uint8_t *content)
{
	if (pbatch_len + 8 + CT_LINE > pbatch_cap) {
		if (pbatch_cap >= (1u << 20) && flush_persist(w))
			return -1;
		if (pbatch_len + 8 + CT_LINE > pbatch_cap) {
			pbatch_cap = pbatch_cap ? 2 * pbatch_cap : 65536;
			pbatch = realloc(pbatch, pbatch_cap);
			if (!pbatch)
				return -1;
		}
	}
	memcpy(pbatch + pbatch_len, &line, 8);
	memcpy(pbatch + pbatch_len + 8, content, CT_LINE);
	pbatch_len += 8 + CT_LINE;
	return 0;
}

int ct_worker_point(struct ct_worker *w, const struct ct_point *pt, const uint32_t *vids,
		    const uint64_t *hashes, uint32_t n)
{
	if (flush_persist(w))
		return -1;
	struct point_wire pw = {pt->op,	    pt->after,	pt->index, pt->hash,
				pt->nunits, pt->nlines, n,	   0};
	size_t len = sizeof pw + sizeof(struct ct_unit) * pt->nunits +
		     sizeof(uint64_t) * pt->nlines + (uint64_t)CT_LINE * pt->nlines +
		     sizeof(uint32_t) * n + sizeof(uint64_t) * n;
	struct msg_hdr h = {MSG_POINT, 0, len};
	if (write_all(w->fd, &h, sizeof h) || write_all(w->fd, &pw, sizeof pw) ||
	    write_all(w->fd, pt->units, sizeof(struct ct_unit) * pt->nunits) ||
	    write_all(w->fd, pt->lines, sizeof(uint64_t) * pt->nlines) ||
	    write_all(w->fd, pt->content, (uint64_t)CT_LINE * pt->nlines) ||
	    write_all(w->fd, hashes, sizeof(uint64_t) * n) ||
	    write_all(w->fd, vids, sizeof(uint32_t) * n))
		return -1;
	return 0;
}

int ct_worker_finish(struct ct_worker *w)
{
	flush_persist(w);
	send_msg(w, MSG_END, NULL, 0, NULL, 0);
	close(w->fd);
	int st = 0;
	waitpid(w->pid, &st, 0);
	free(w);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}
