/*
 * shared_calls_test.c -- calls that only read (stat, lseek, read) run in
 * many processes at once without the pool's turn (src/space/share.c H9),
 * but never beside a call that changes the pool:
 *   - committed_only: a process rewriting a file's chunks, 64 KiB a call,
 *     and two others reading it through lseek, fstat, stat and pread: the
 *     size never moves and no chunk is ever seen half rewritten;
 *   - reader_killed: a process killed inside a shared call leaves its count
 *     in the coordination file; the next call that changes the pool clears
 *     it (the process is gone) instead of waiting for good, and nothing
 *     another process acknowledged is lost;
 *   - read_stamps_atime: a read that stores the access time takes the turn;
 *   - last_put_waits_for_turn: a shared call that drops an open file's last
 *     reference (a close in another thread) leaves its release to the next
 *     call under the turn.
 *
 *   ./shared_calls_test [CASE...]     FT_KILLS=N: kills in reader_killed (60)
 */
#include "ft_test.h"

#include <signal.h>
#include <time.h>

#include "fs/fs.h"
#include "fs/pmfs.h"
#include "space/share_impl.h"

#define MiB   (1024ull * 1024)
#define CHUNK (64 * 1024)

static const char *pool;

static unsigned char chunk_byte(uint64_t i)
{
	return (unsigned char)(i % 251 + 1);
}

/* ---- committed_only ----------------------------------------------------------------- */

#define CHUNKS 16
#define WRITES 3000

/* Reads /g until the writer is done (the marker /done): its size stays
 * CHUNKS chunks, and each chunk holds one byte value throughout -- one
 * 64 KiB write is one call, and no read runs beside it. */
static int reader(void *arg)
{
	(void)arg;
	ferrite_fs *fs;
	if (ferrite_mount(pool, NULL, &fs))
		return -1;
	int fd = ferrite_open(fs, "/g", O_RDONLY, 0);
	static unsigned char buf[CHUNK];
	for (long i = 0;; i++) {
		struct stat st, st2;
		off_t end = ferrite_lseek(fs, fd, 0, SEEK_END);
		if (fd < 0 || end < 0 || ferrite_fstat(fs, fd, &st) ||
		    ferrite_stat(fs, "/g", &st2)) {
			fprintf(stderr, "reader: %s\n", ferrite_errmsg());
			return -1;
		}
		if (end != CHUNKS * CHUNK || st.st_size != end || st2.st_size != end) {
			fprintf(stderr, "reader: sizes %lld, %lld, %lld\n", (long long)end,
				(long long)st.st_size, (long long)st2.st_size);
			return -1;
		}
		uint64_t k = (uint64_t)i % CHUNKS;
		ssize_t n = ferrite_pread(fs, fd, buf, CHUNK, (off_t)(k * CHUNK));
		if (n != CHUNK) {
			fprintf(stderr, "reader: pread of chunk %llu: %zd\n", (unsigned long long)k,
				n);
			return -1;
		}
		for (size_t b = 1; b < CHUNK; b++)
			if (buf[b] != buf[0]) {
				fprintf(stderr,
					"reader: chunk %llu holds %u at 0 and %u at %zu: a read "
					"beside a write\n",
					(unsigned long long)k, buf[0], buf[b], b);
				return -1;
			}
		if (i % 64 == 0 && ferrite_stat(fs, "/done", &st) == 0)
			break;
	}
	ferrite_close(fs, fd);
	return ferrite_unmount(fs) ? -1 : 0;
}

static int c_committed_only(void)
{
	/* the readers mount the pool themselves, so they start unmounted */
	ferrite_fs *fs;
	static unsigned char buf[CHUNK];
	FT_OK(ferrite_mount(pool, NULL, &fs));
	int fd = FT_OK(ferrite_open(fs, "/g", O_CREAT | O_WRONLY, 0644));
	for (uint64_t k = 0; k < CHUNKS; k++) {
		memset(buf, chunk_byte(k), sizeof(buf));
		FT_EQ(ferrite_pwrite(fs, fd, buf, CHUNK, (off_t)(k * CHUNK)), CHUNK);
	}
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	pid_t r[2];
	for (int i = 0; i < 2; i++)
		FT_CHECK((r[i] = ft_spawn(reader, NULL)) > 0, "fork failed");
	FT_OK(ferrite_mount(pool, NULL, &fs));
	fd = FT_OK(ferrite_open(fs, "/g", O_WRONLY, 0644));
	for (uint64_t i = 0; i < WRITES; i++) {
		memset(buf, chunk_byte(i), sizeof(buf));
		FT_EQ(ferrite_pwrite(fs, fd, buf, CHUNK, (off_t)(i % CHUNKS * CHUNK)), CHUNK);
		if (i % 16 == 0) { /* other changes between the writes */
			FT_OK(ferrite_mkdir(fs, "/d", 0755));
			FT_OK(ferrite_rmdir(fs, "/d"));
		}
	}
	FT_OK(ferrite_close(fs, fd));
	FT_OK(ft_write_file(fs, "/done", 1, 1, 0));
	for (int i = 0; i < 2; i++)
		FT_EQ(ft_reap(r[i]), 0);
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static int check_file(ferrite_fs *fs, const char *path, uint64_t key, size_t len)
{
	static char buf[8193];
	int fd = ferrite_open(fs, path, O_RDONLY, 0);
	ssize_t n = fd < 0 ? fd : ferrite_pread(fs, fd, buf, sizeof(buf), 0);
	if (fd >= 0)
		ferrite_close(fs, fd);
	FT_CHECK(len < sizeof(buf) && n == (ssize_t)len && ft_verify(buf, len, key, 0) < 0,
		 "%s: read %zd bytes, want %zu of key %llu", path, n, len, (unsigned long long)key);
	return 0;
}

/* ---- reader_killed ------------------------------------------------------------------ */

struct looper {
	int ready[2];
	ferrite_fs *fs;
};

/* Shared calls back to back until killed, on the mount it inherited. */
static int looper(void *arg)
{
	struct looper *l = arg;
	ferrite_fs *fs = l->fs;
	int fd = ferrite_open(fs, "/r", O_RDONLY, 0);
	if (fd < 0)
		return -1;
	char c = 1, buf[4096];
	struct stat st;
	(void)!write(l->ready[1], &c, 1);
	for (;;) {
		ferrite_lseek(fs, fd, 0, SEEK_END);
		ferrite_fstat(fs, fd, &st);
		ferrite_pread(fs, fd, buf, sizeof(buf), 0);
		ferrite_stat(fs, "/r", &st);
	}
}

/* The count a killed process left in the coordination file: its slot
 * (found by pid) and how many of its threads were inside a shared call. */
static uint32_t left_reading(ferrite_fs *fs, pid_t pid)
{
	struct share_file *f = fs->m.pool.share->f;
	for (int k = 0; k < SHARE_PROCS; k++)
		if (__atomic_load_n(&f->procs[k].pid, __ATOMIC_ACQUIRE) == (uint32_t)pid)
			return __atomic_load_n(&f->reading[k].n, __ATOMIC_ACQUIRE);
	return 0;
}

static int c_reader_killed(void)
{
	const char *k = getenv("FT_KILLS");
	int kills = k ? atoi(k) : 60, inside = 0;
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ft_write_file(fs, "/r", 7, 4096, 0));
	FT_CHECK(fs->m.pool.share, "the pool is not shared");
	srand((unsigned)time(NULL));
	for (int i = 0; i < kills; i++) {
		struct looper l = {.fs = fs};
		FT_OK(pipe(l.ready));
		pid_t pid = ft_spawn(looper, &l);
		FT_CHECK(pid > 0, "fork failed");
		close(l.ready[1]);
		char c;
		FT_CHECK(read(l.ready[0], &c, 1) == 1, "looper %d did not start", i);
		close(l.ready[0]);
		usleep((useconds_t)(rand() % 2000));
		kill(pid, SIGKILL);
		FT_EQ(ft_reap(pid), 128 + SIGKILL);
		inside += left_reading(fs, pid) != 0;
		/* a change: waits out no dead reader, and is there afterwards */
		char path[64];
		snprintf(path, sizeof(path), "/k%d", i);
		FT_OK(ft_write_file(fs, path, (uint64_t)i, 8192, 0));
		struct share_file *f = fs->m.pool.share->f;
		for (int s = 0; s < SHARE_PROCS; s++)
			FT_EQ(f->reading[s].n, 0);
	}
	for (int i = 0; i < kills; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/k%d", i);
		FT_RUN(check_file(fs, path, (uint64_t)i, 8192));
	}
	printf("  %d of %d kills landed inside a shared call\n", inside, kills);
	FT_CHECK(inside > 0, "no kill landed inside a shared call: nothing was tested");
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- atime ------------------------------------------------------------------------------ */

/* A read that stores the access time (relatime: the file changed since it
 * was last read) needs the turn; one that does not stays shared. Either
 * way the access time is right afterwards. */
static int c_read_stamps_atime(void)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ft_write_file(fs, "/a", 3, 4000, 0));
	struct stat before, after;
	FT_OK(ferrite_stat(fs, "/a", &before));
	struct timespec pause = {0, 20000000};
	nanosleep(&pause, NULL);
	int fd = FT_OK(ferrite_open(fs, "/a", O_RDWR, 0));
	FT_EQ(ferrite_pwrite(fs, fd, "z", 1, 0), 1); /* mtime moves past atime */
	char buf[100];
	FT_EQ(ferrite_pread(fs, fd, buf, sizeof(buf), 100), (ssize_t)sizeof(buf));
	FT_OK(ferrite_fstat(fs, fd, &after));
	FT_CHECK(after.st_atim.tv_sec > after.st_mtim.tv_sec ||
		     (after.st_atim.tv_sec == after.st_mtim.tv_sec &&
		      after.st_atim.tv_nsec >= after.st_mtim.tv_nsec),
		 "a read after a write left the access time behind the change");
	FT_CHECK(after.st_atim.tv_sec > before.st_atim.tv_sec ||
		     after.st_atim.tv_nsec > before.st_atim.tv_nsec,
		 "the read did not stamp the access time");
	FT_OK(ferrite_close(fs, fd));
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

/* ---- the last reference dropped inside a shared call ----------------------------------- */

/* Another thread closes a descriptor while a shared call (an fstat) holds
 * its open file: the shared call drops the last reference, and what that
 * releases -- here an unlinked file -- waits for the next call under the
 * turn instead of being released without it. */
static int c_last_put_waits_for_turn(void)
{
	ferrite_fs *fs;
	FT_OK(ferrite_mount(pool, NULL, &fs));
	FT_OK(ft_write_file(fs, "/gone", 4, 1 << 20, 0));
	int fd = FT_OK(ferrite_open(fs, "/gone", O_RDONLY, 0));
	FT_OK(ferrite_unlink(fs, "/gone"));
	struct statvfs held, freed;
	FT_OK(ferrite_statvfs(fs, &held));
	FT_CHECK(pmfs_shared_enter(fs), "a shared call was refused on an idle pool");
	struct ofile *of = fd_get(fs, fd); /* the shared call's reference */
	FT_CHECK(of, "fd_get");
	FT_OK(ferrite_close(fs, fd)); /* the other thread's close */
	of_put(fs, of);		      /* the shared call ends: the last reference */
	int waiting = fs->late_puts == of;
	pmfs_shared_leave(fs);
	FT_CHECK(waiting, "the shared call released the file without the turn");
	FT_OK(ferrite_statvfs(fs, &freed)); /* a call under the turn */
	FT_CHECK(!fs->late_puts, "the next call left the file waiting");
	FT_CHECK(freed.f_bfree > held.f_bfree, "the unlinked file was never released");
	FT_UNMOUNT_CLEAN(&fs, pool);
	return 0;
}

static const struct ft_case cases[] = {
    {"committed_only", c_committed_only, 0},
    {"read_stamps_atime", c_read_stamps_atime, 0},
    {"last_put_waits_for_turn", c_last_put_waits_for_turn, 0},
    {"reader_killed", c_reader_killed, 0},
};

int main(int argc, char **argv)
{
	pool = ft_pool_path("shared_calls", "main");
	return ft_run_fresh(cases, sizeof(cases) / sizeof(cases[0]), argc, argv, pool, 256 * MiB);
}
