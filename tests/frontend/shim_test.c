/*
 * shim_test.c -- the preload shim seen from a program: run under
 * `ferrite run --pool POOL -- shim_test CASE` (run_shim_test.sh does it with
 * a fresh pool). The program uses plain libc on paths under /pm; each case
 * checks that descriptors, paths, stdio, dup/fcntl/flock, exec, fork and mmap
 * behave as on Linux (or as docs/contracts.md#preload says they differ).
 * Run `shim_test -l` for the list of cases.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <spawn.h>
#include <unistd.h>

static const char *prog;
static int failures;

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: CHECK(%s) failed (errno %d: %s)\n", __FILE__,      \
				__LINE__, #cond, errno, strerror(errno));                          \
			failures++;                                                                \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static int is_kernel_fd(int fd)
{
	char link[64], target[PATH_MAX];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	return n >= 0;
}

static int write_all(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/* ---- cases -------------------------------------------------------------------- */

static void case_fds(void)
{
	int k1 = open("/dev/null", O_RDONLY);
	int f1 = open("/pm/a", O_RDWR | O_CREAT, 0644);
	int k2 = open("/proc/self/status", O_RDONLY);
	int f2 = open("/pm/b", O_RDWR | O_CREAT, 0644);
	CHECK(k1 >= 0 && f1 >= 0 && k2 >= 0 && f2 >= 0);
	int fds[] = {k1, f1, k2, f2};
	for (int i = 0; i < 4; i++)
		for (int j = i + 1; j < 4; j++)
			CHECK(fds[i] != fds[j]);
	/* Every number the program sees is a real kernel descriptor too. */
	CHECK(is_kernel_fd(f1) && is_kernel_fd(f2));
	CHECK(write(f1, "one", 3) == 3 && write(f2, "two!", 4) == 4);
	CHECK(close(k1) == 0 && close(k2) == 0); /* unrelated closes */
	struct stat st;
	CHECK(fstat(f1, &st) == 0 && st.st_size == 3 && S_ISREG(st.st_mode));
	CHECK(fstat(f2, &st) == 0 && st.st_size == 4);
	char buf[8] = {0};
	CHECK(pread(f2, buf, sizeof(buf), 0) == 4 && !memcmp(buf, "two!", 4));
	int k3 = open("/dev/zero", O_RDONLY); /* may reuse k1's number */
	CHECK(k3 >= 0 && k3 != f1 && k3 != f2);
	CHECK(read(k3, buf, 4) == 4 && buf[0] == 0);
	CHECK(close(f1) == 0 && close(f2) == 0);
	CHECK(close(f1) == -1 && errno == EBADF);
	CHECK(read(f2, buf, 1) == -1 && errno == EBADF);
	CHECK(stat("/pm/a", &st) == 0 && st.st_size == 3);
	CHECK(stat("/pm/none", &st) == -1 && errno == ENOENT);
	CHECK(open("/pm/none", O_RDONLY) == -1 && errno == ENOENT);
	close(k3);
}

/* Descriptor numbers of closed pool files are kept for the next open
 * (src/preload/park.c): the program still sees POSIX numbers. */
static void case_reuse(void)
{
	int a = open("/pm/r", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(a > 2 && close(a) == 0);
	int b = open("/pm/r", O_RDONLY | O_CLOEXEC); /* the lowest free number again */
	CHECK(b == a && close(b) == 0);
	/* a closed number is closed to every call, as on Linux */
	struct stat st;
	CHECK(fcntl(a, F_GETFD) == -1 && errno == EBADF);
	CHECK(fstat(a, &st) == -1 && errno == EBADF);
	CHECK(dup(a) == -1 && errno == EBADF);
	CHECK(dup2(a, 200) == -1 && errno == EBADF);
	CHECK(close(a) == -1 && errno == EBADF);
	/* a host number freed below the kept one: open takes the lower */
	int h = open("/dev/null", O_RDONLY);
	int p = open("/pm/r", O_RDONLY);
	CHECK(h >= 0 && p > h && close(p) == 0 && close(h) == 0);
	int q = open("/pm/r", O_RDONLY);
	CHECK(q == h);
	/* 0-2 are never kept: closing stdin and opening gives 0 */
	int saved = dup(0);
	CHECK(saved > 2 && dup2(q, 0) == 0 && close(0) == 0);
	int z = open("/pm/r", O_RDONLY);
	CHECK(z == 0 && dup2(saved, 0) == 0 && close(saved) == 0 && close(q) == 0);
	/* a kept number is closed by exec (it never shows in another program),
	 * also when the pool descriptor it was had no close-on-exec */
	int n = open("/pm/r", O_RDONLY);
	CHECK(n > 2 && close(n) == 0);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "test ! -e /proc/self/fd/%d", n);
	CHECK(system(cmd) == 0);
	/* a number keeps the flag of its last open: the next open asks for
	 * its own, whatever the number had */
	int c1 = open("/pm/r", O_RDONLY);
	CHECK(c1 > 2 && fcntl(c1, F_GETFD) == 0 && close(c1) == 0);
	int c2 = open("/pm/r", O_RDONLY | O_CLOEXEC);
	CHECK(c2 == c1 && fcntl(c2, F_GETFD) == FD_CLOEXEC && close(c2) == 0);
	int c3 = open("/pm/r", O_RDONLY);
	CHECK(c3 == c1 && fcntl(c3, F_GETFD) == 0 && close(c3) == 0);
	/* ... and exec closes it in every way a program starts another: a
	 * vfork child's execv (which must leave the parent's flags alone) and
	 * posix_spawn */
	snprintf(cmd, sizeof(cmd), "test ! -e /proc/self/fd/%d", c1);
	char *sh_argv[] = {"sh", "-c", cmd, NULL};
	pid_t vp = vfork();
	if (vp == 0) {
		execv("/bin/sh", sh_argv);
		_exit(127);
	}
	int vst;
	CHECK(vp > 0 && waitpid(vp, &vst, 0) == vp && WIFEXITED(vst) && !WEXITSTATUS(vst));
	CHECK(open("/pm/r", O_RDONLY) == c1 && fcntl(c1, F_GETFD) == 0 && close(c1) == 0);
	pid_t sp;
	CHECK(posix_spawn(&sp, "/bin/sh", NULL, NULL, sh_argv, environ) == 0);
	CHECK(waitpid(sp, &vst, 0) == sp && WIFEXITED(vst) && !WEXITSTATUS(vst));
	/* dup2 of a host file onto a kept number: the program's from then on */
	int m = open("/pm/r", O_RDONLY | O_CLOEXEC);
	CHECK(m > 2 && close(m) == 0);
	int k = open("/dev/zero", O_RDONLY);
	char c = 1;
	CHECK(k >= 0 && dup2(k, m) == m && read(m, &c, 1) == 1 && c == 0);
	CHECK(close(m) == 0 && close(k) == 0);
	/* a forked child opens and closes on its own; the parent goes on */
	pid_t pid = fork();
	if (pid == 0) {
		int x = open("/pm/r", O_RDONLY);
		_exit(x > 2 && close(x) == 0 && close(x) == -1 ? 0 : 1);
	}
	int wst;
	CHECK(pid > 0 && waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && !WEXITSTATUS(wst));
	int y = open("/pm/r", O_RDONLY);
	CHECK(y > 2 && fstat(y, &st) == 0 && S_ISREG(st.st_mode) && close(y) == 0);
}

static void case_paths(void)
{
	struct stat st;
	char cwd[PATH_MAX];
	CHECK(mkdir("/pm/d", 0755) == 0);
	CHECK(mkdir("/pm/d/e", 0755) == 0);
	CHECK(write_all("/pm/d/x", "xx") == 0);
	CHECK(stat("//pm//d/./x", &st) == 0 && st.st_size == 2);
	CHECK(stat("/pm/", &st) == 0 && S_ISDIR(st.st_mode));
	CHECK(stat("/pm/d/e/../x", &st) == 0 && st.st_size == 2);
	/* "/pm/../tmp" leaves the prefix: the kernel's /tmp. */
	struct stat kst;
	CHECK(stat("/pm/../tmp", &st) == 0 && stat("/tmp", &kst) == 0 && st.st_ino == kst.st_ino);
	CHECK(chdir("/pm/d") == 0);
	CHECK(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/pm/d"));
	CHECK(stat("x", &st) == 0 && st.st_size == 2);
	int fd = open("y", O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0 && write(fd, "yyy", 3) == 3 && close(fd) == 0);
	CHECK(stat("/pm/d/y", &st) == 0 && st.st_size == 3 && (st.st_mode & 0777) == 0600);
	CHECK(chdir("e") == 0 && getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/pm/d/e"));
	CHECK(stat("../y", &st) == 0 && st.st_size == 3);
	CHECK(access("../../d/x", R_OK) == 0);
	char rp[PATH_MAX];
	CHECK(realpath("../x", rp) && !strcmp(rp, "/pm/d/x"));
	CHECK(symlink("/pm/d/x", "/pm/d/lnk") == 0);
	CHECK(realpath("/pm/d/lnk", rp) && !strcmp(rp, "/pm/d/x"));
	/* Relative paths that climb out of the prefix reach the kernel. */
	CHECK(stat("../../../tmp", &st) == 0 && st.st_ino == kst.st_ino);
	CHECK(rename("/pm/d/y", "/pm/d/e/z") == 0 && stat("z", &st) == 0);
	CHECK(rename("/pm/d/x", "/tmp/ferrite-shim-xdev") == -1 && errno == EXDEV);
	CHECK(unlink("z") == 0 && stat("z", &st) == -1 && errno == ENOENT);
	CHECK(chdir("/tmp") == 0 && getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/tmp"));
	CHECK(stat("/pm/d/x", &st) == 0);
	int dfd = open("/pm/d", O_RDONLY | O_DIRECTORY);
	CHECK(dfd >= 0 && fstatat(dfd, "x", &st, 0) == 0 && st.st_size == 2);
	CHECK(fchdir(dfd) == 0 && stat("x", &st) == 0 && close(dfd) == 0);
	CHECK(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/pm/d"));
	CHECK(chdir("/") == 0 && stat("pm/d/x", &st) == 0); /* relative from "/" */
	DIR *d = opendir("/pm/d");
	CHECK(d);
	int seen = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		seen |= !strcmp(e->d_name, "x") ? 1 : !strcmp(e->d_name, "e") ? 2 : 0;
	CHECK(seen == 3 && dirfd(d) >= 0 && closedir(d) == 0);
	struct dirent **list;
	int n = scandir("/pm/d", &list, NULL, alphasort);
	CHECK(n == 5 && !strcmp(list[0]->d_name, ".") && !strcmp(list[2]->d_name, "e"));
	for (int i = 0; i < n; i++)
		free(list[i]);
	free(list);
}

static void case_stdio(void)
{
	FILE *f = fopen("/pm/s.txt", "w");
	CHECK(f);
	CHECK(fprintf(f, "line one\nline %d\n", 2) > 0);
	int fd = fileno(f);
	CHECK(fd >= 0 && is_kernel_fd(fd));
	CHECK(fclose(f) == 0);
	CHECK(fcntl(fd, F_GETFD) == -1 && errno == EBADF); /* fclose closed it */
	f = fopen("/pm/s.txt", "r+");
	CHECK(f);
	char line[64];
	CHECK(fgets(line, sizeof(line), f) && !strcmp(line, "line one\n"));
	CHECK(ftell(f) == 9);
	CHECK(fseek(f, 5, SEEK_SET) == 0 && fgets(line, sizeof(line), f) && !strcmp(line, "one\n"));
	struct stat st;
	CHECK(fstat(fileno(f), &st) == 0 && st.st_size == 16);
	CHECK(fseek(f, 0, SEEK_END) == 0 && fputs("three\n", f) >= 0 && fclose(f) == 0);
	f = fopen("/pm/s.txt", "a");
	CHECK(f && fputs("four\n", f) >= 0 && fclose(f) == 0);
	CHECK(stat("/pm/s.txt", &st) == 0 && st.st_size == 27);
	fd = open("/pm/s.txt", O_RDONLY);
	f = fdopen(fd, "r");
	CHECK(f && fileno(f) == fd && fgets(line, sizeof(line), f) && fclose(f) == 0);
	CHECK(fopen("/pm/nodir/x", "w") == NULL && errno == ENOENT);
	f = fopen("/pm/s.txt", "wx");
	CHECK(f == NULL && errno == EEXIST);
	CHECK(remove("/pm/s.txt") == 0 && access("/pm/s.txt", F_OK) == -1);
}

/* The whole content of a file as a string ("" if unreadable). */
static const char *slurp(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return buf;
}

/* stdin/stdout/stderr follow descriptors 0-2 onto pool files: dup2 and back,
 * freopen, a pool file opened on a closed 1, fgets from a redirected stdin,
 * fclose of a redirected stdout. */
static void case_stdio_redirect(void)
{
	FILE *out0 = stdout, *in0 = stdin, *err0 = stderr;
	CHECK(fflush(stdout) == 0);
	int saved = dup(1);
	CHECK(saved > 2 && is_kernel_fd(saved));
	/* dup2 of a pool descriptor onto 1, then a kernel one back */
	int fd = open("/pm/redir", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd > 2 && dup2(fd, 1) == 1 && close(fd) == 0);
	CHECK(stdout != out0 && fileno(stdout) == 1);
	CHECK(printf("hello %d\n", 42) == 9 && fputs("second\n", stdout) >= 0);
	CHECK(fflush(stdout) == 0 && write(1, "raw\n", 4) == 4);
	CHECK(puts("buffered") >= 0);
	CHECK(dup2(saved, 1) == 1 && stdout == out0 && fileno(stdout) == 1);
	CHECK(!strcmp(slurp("/pm/redir"), "hello 42\nsecond\nraw\nbuffered\n"));
	/* freopen of a pool path onto stdout, "w" then "a" */
	FILE *r = freopen("/pm/fre", "w", stdout);
	CHECK(r && r == stdout && r != out0 && fileno(stdout) == 1);
	CHECK(printf("via freopen\n") > 0);
	r = freopen("/pm/fre", "a", stdout);
	CHECK(r && r == stdout && puts("appended") >= 0);
	CHECK(dup2(saved, 1) == 1 && stdout == out0);
	CHECK(!strcmp(slurp("/pm/fre"), "via freopen\nappended\n"));
	/* fclose of the redirected stdout closes 1, as fclose(stdout) does */
	CHECK(freopen("/pm/fre", "w", stdout) && puts("closed") >= 0 && fclose(stdout) == 0);
	CHECK(stdout == out0 && fcntl(1, F_GETFD) == -1 && errno == EBADF);
	CHECK(!strcmp(slurp("/pm/fre"), "closed\n"));
	/* a pool file opened on the closed 1 takes what stdout still held */
	CHECK(fputs("pending ", stdout) >= 0); /* fd 1 is closed: stays buffered */
	fd = open("/pm/land", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd == 1 && stdout != out0 && printf("landed\n") > 0);
	CHECK(dup2(saved, 1) == 1 && close(saved) == 0 && stdout == out0);
	CHECK(!strcmp(slurp("/pm/land"), "pending landed\n"));
	/* stderr keeps its buffering: unbuffered */
	int serr = dup(2);
	fd = open("/pm/err", O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK(serr > 2 && fd > 2 && dup2(fd, 2) == 2 && stderr != err0);
	CHECK(fprintf(stderr, "oops\n") == 5);
	char buf[64] = {0};
	CHECK(pread(fd, buf, sizeof(buf), 0) == 5 && !strcmp(buf, "oops\n"));
	CHECK(dup2(serr, 2) == 2 && close(serr) == 0 && close(fd) == 0 && stderr == err0);
	/* stdin from a pool file: fgets, then the read-ahead goes back to the file */
	CHECK(write_all("/pm/in", "alpha\nbeta\ngamma\n") == 0);
	int sin = dup(0);
	if (sin < 0)
		sin = open("/dev/null", O_RDONLY);
	fd = open("/pm/in", O_RDONLY);
	CHECK(sin > 2 && fd > 2 && dup2(fd, 0) == 0 && stdin != in0 && fileno(stdin) == 0);
	char line[64];
	CHECK(fgets(line, sizeof(line), stdin) && !strcmp(line, "alpha\n"));
	CHECK(getchar() == 'b');
	CHECK(dup2(sin, 0) == 0 && stdin == in0);
	CHECK(lseek(fd, 0, SEEK_CUR) == 7); /* shares the description 0 had */
	CHECK(close(fd) == 0);
	r = freopen("/pm/in", "r", stdin);
	CHECK(r && r == stdin && scanf("%63s", line) == 1 && !strcmp(line, "alpha"));
	CHECK(fgets(line, sizeof(line), stdin) && fgets(line, sizeof(line), stdin));
	CHECK(!strcmp(line, "beta\n") && fclose(stdin) == 0 && stdin == in0);
	CHECK(dup2(sin, 0) == 0 && close(sin) == 0);
	CHECK(unlink("/pm/redir") == 0 && unlink("/pm/fre") == 0 && unlink("/pm/land") == 0);
	CHECK(unlink("/pm/err") == 0 && unlink("/pm/in") == 0);
}

/* stdout onto a pool file left buffered: exit flushes it (stdio_exit_check
 * reads it in the next process, with the result line main printed after). */
static void case_stdio_exit(void)
{
	int fd = open("/pm/atexit", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd > 2 && dup2(fd, 1) == 1 && close(fd) == 0);
	CHECK(printf("unflushed at exit\n") > 0);
}

static void case_stdio_exit_check(void)
{
	CHECK(!strcmp(slurp("/pm/atexit"), "unflushed at exit\nok   stdio_exit\n"));
	CHECK(unlink("/pm/atexit") == 0);
}

static void case_dup(void)
{
	int fd = open("/pm/dup", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC);
	CHECK(write(fd, "abcdef", 6) == 6);
	int d1 = dup(fd);
	CHECK(d1 >= 0 && d1 != fd && fcntl(d1, F_GETFD) == 0);
	CHECK(lseek(d1, 1, SEEK_SET) == 1); /* shared offset */
	char c;
	CHECK(read(fd, &c, 1) == 1 && c == 'b');
	int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	CHECK(d2 >= 100 && fcntl(d2, F_GETFD) == FD_CLOEXEC);
	CHECK(fcntl(d2, F_SETFD, 0) == 0 && fcntl(d2, F_GETFD) == 0);
	/* dup2 onto a kernel descriptor replaces it. */
	int k = open("/dev/null", O_RDONLY);
	CHECK(k >= 0 && dup2(fd, k) == k && read(k, &c, 1) == 1 && c == 'c');
	/* dup2 of a kernel descriptor onto ours drops ours. */
	int k2 = open("/dev/zero", O_RDONLY);
	CHECK(dup2(k2, d1) == d1 && read(d1, &c, 1) == 1 && c == 0);
	CHECK(dup3(fd, fd, 0) == -1 && errno == EINVAL);
	CHECK(dup2(fd, fd) == fd);
	int fl = fcntl(fd, F_GETFL);
	CHECK(fl >= 0 && (fl & O_ACCMODE) == O_RDWR && !(fl & O_APPEND));
	CHECK(fcntl(fd, F_SETFL, fl | O_APPEND) == 0 && (fcntl(k, F_GETFL) & O_APPEND));
	CHECK(write(fd, "Z", 1) == 1);
	struct stat st;
	CHECK(fstat(d2, &st) == 0 && st.st_size == 7);
	/* Record locks never conflict inside the pool's one process. */
	struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
	CHECK(fcntl(fd, F_SETLK, &lk) == 0);
	lk.l_type = F_WRLCK;
	CHECK(fcntl(fd, F_GETLK, &lk) == 0 && lk.l_type == F_UNLCK);
	lk.l_type = 42;
	CHECK(fcntl(fd, F_SETLK, &lk) == -1 && errno == EINVAL);
	int ro = open("/pm/dup", O_RDONLY);
	lk.l_type = F_WRLCK;
	CHECK(fcntl(ro, F_SETLK, &lk) == -1 && errno == EBADF);
	/* flock: per open file description, conflicts between two opens. */
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == 0);
	CHECK(flock(k, LOCK_EX | LOCK_NB) == 0); /* same description */
	CHECK(flock(ro, LOCK_SH | LOCK_NB) == -1 && errno == EWOULDBLOCK);
	CHECK(flock(fd, LOCK_SH) == 0 && flock(ro, LOCK_SH | LOCK_NB) == 0);
	CHECK(flock(fd, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK);
	CHECK(close(ro) == 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
	CHECK(ioctl(fd, FIONREAD, &fl) == -1 && errno == ENOTTY);
	CHECK(isatty(fd) == 0);
	CHECK(close(fd) == 0 && close(k) == 0 && close(d2) == 0 && close(d1) == 0);
	close(k2);
}

static void case_exec(void)
{
	int fd = open("/pm/ex", O_RDWR | O_CREAT, 0644);
	int cx = open("/pm/ex", O_RDONLY | O_CLOEXEC);
	CHECK(fd >= 0 && cx >= 0 && write(fd, "0123456789", 10) == 10);
	CHECK(lseek(fd, 3, SEEK_SET) == 3);
	int dupfd = dup(fd);
	CHECK(mkdir("/pm/exdir", 0755) == 0 && chdir("/pm/exdir") == 0);
	char a1[16], a2[16], a3[16];
	snprintf(a1, sizeof(a1), "%d", fd);
	snprintf(a2, sizeof(a2), "%d", cx);
	snprintf(a3, sizeof(a3), "%d", dupfd);
	char *argv[] = {(char *)prog, "exec_child", a1, a2, a3, NULL};
	char *bad[] = {"/nonexistent/program", NULL};
	CHECK(execv(bad[0], bad) == -1 && errno == ENOENT);
	CHECK(read(fd, a1 + 8, 1) == 1 && lseek(fd, 3, SEEK_SET) == 3); /* unchanged */
	execv(prog, argv);
	CHECK(!"execv failed");
}

/* The new image: fd continues at offset 3, cx is closed, dupfd shares fd's
 * offset, and the working directory is still /pm/exdir. */
static void case_exec_child(int argc, char **argv)
{
	CHECK(argc == 5);
	int fd = atoi(argv[2]), cx = atoi(argv[3]), dupfd = atoi(argv[4]);
	char buf[8] = {0}, cwd[PATH_MAX];
	CHECK(read(fd, buf, 3) == 3 && !memcmp(buf, "345", 3));
	CHECK(lseek(dupfd, 0, SEEK_CUR) == 6);
	CHECK(fcntl(cx, F_GETFD) == -1 && errno == EBADF);
	CHECK(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/pm/exdir"));
	CHECK(write(fd, "abc", 3) == 3 && close(fd) == 0);
	struct stat st;
	CHECK(stat("/pm/ex", &st) == 0 && st.st_size == 10);
}

/* posix_spawn with file actions that name pool files: the child's stdout is
 * a pool descriptor (dup2, one description with the spawner's), its stderr a
 * pool path opened for it, its working directory a pool directory (chdir and
 * fchdir), relative opens resolved there; a dup2 of a kernel descriptor
 * over a pool one and a close take it away; an action on a missing pool
 * file fails the spawn with its errno (docs/contracts.md#preload). */
static void case_spawn(void)
{
	extern char **environ;
	CHECK(mkdir("/pm/sp", 0755) == 0 && mkdir("/pm/sp/dir", 0755) == 0);
	CHECK(write_all("/pm/sp/dir/in", "from-stdin\n") == 0);
	int out = open("/pm/sp/out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(out >= 0 && write(out, "head\n", 5) == 5);
	posix_spawn_file_actions_t fa;
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, out, 1) == 0);
	CHECK(posix_spawn_file_actions_addclose(&fa, out) == 0);
	CHECK(posix_spawn_file_actions_addopen(&fa, 2, "/pm/sp/err", O_WRONLY | O_CREAT | O_TRUNC,
					       0644) == 0);
	CHECK(posix_spawn_file_actions_addchdir_np(&fa, "/pm/sp/dir") == 0);
	CHECK(posix_spawn_file_actions_addopen(&fa, 0, "in", O_RDONLY, 0) == 0);
	char *av[] = {"/bin/sh", "-c", "read x; echo \"$x\"; echo err >&2; pwd; echo made > rel",
		      NULL};
	pid_t pid;
	int st;
	CHECK(posix_spawn(&pid, "/bin/sh", &fa, NULL, av, environ) == 0);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(posix_spawn_file_actions_destroy(&fa) == 0);
	/* the child wrote through the spawner's description: its offset moved */
	CHECK(lseek(out, 0, SEEK_CUR) == (off_t)strlen("head\nfrom-stdin\n/pm/sp/dir\n"));
	CHECK(close(out) == 0);
	CHECK(!strcmp(slurp("/pm/sp/out"), "head\nfrom-stdin\n/pm/sp/dir\n"));
	CHECK(!strcmp(slurp("/pm/sp/err"), "err\n"));
	CHECK(!strcmp(slurp("/pm/sp/dir/rel"), "made\n"));

	/* fchdir to a pool directory; a kernel descriptor dup2'ed over a pool
	 * one replaces it; a pool descriptor closed by closefrom is gone */
	int dir = open("/pm/sp/dir", O_RDONLY | O_DIRECTORY);
	int keep = open("/pm/sp/keep", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int lost = open("/pm/sp/lost", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	int null = open("/dev/null", O_WRONLY);
	CHECK(dir >= 0 && keep >= 0 && lost >= 0 && null >= 0);
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_addfchdir_np(&fa, dir) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, keep, 1) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, lost, 2) == 0);
	CHECK(posix_spawn_file_actions_adddup2(&fa, null, 2) == 0);
	CHECK(posix_spawn_file_actions_addclosefrom_np(&fa, 3) == 0);
	char *av2[] = {"/bin/sh", "-c", "pwd; cat rel; echo gone >&2", NULL};
	CHECK(posix_spawnp(&pid, "sh", &fa, NULL, av2, environ) == 0);
	CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
	CHECK(posix_spawn_file_actions_destroy(&fa) == 0);
	CHECK(!strcmp(slurp("/pm/sp/keep"), "/pm/sp/dir\nmade\n"));
	CHECK(!strcmp(slurp("/pm/sp/lost"), ""));
	close(dir), close(keep), close(lost), close(null);

	/* F4: an open of a missing pool file fails the spawn, no child */
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_addopen(&fa, 0, "/pm/sp/missing", O_RDONLY, 0) == 0);
	CHECK(posix_spawn(&pid, "/bin/true", &fa, NULL, av, environ) == ENOENT);
	CHECK(posix_spawn_file_actions_destroy(&fa) == 0);
	CHECK(posix_spawn_file_actions_init(&fa) == 0);
	CHECK(posix_spawn_file_actions_addchdir_np(&fa, "/pm/sp/out") == 0);
	CHECK(posix_spawn(&pid, "/bin/true", &fa, NULL, av, environ) == ENOTDIR);
	CHECK(posix_spawn_file_actions_destroy(&fa) == 0);
}

/* A forked child goes on with the pool: its inherited descriptor, new
 * opens, its own writes seen by the parent; a forked child that execs finds
 * its descriptors and working directory again (docs/contracts.md#preload-fork). */
static void case_fork(void)
{
	int fd = open("/pm/fk", O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && write(fd, "parent", 6) == 6);
	CHECK(mkdir("/pm/fkdir", 0755) == 0 && chdir("/pm/fkdir") == 0);
	pid_t pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		char c;
		int ok = pread(fd, &c, 1, 0) == 1 && c == 'p';
		int fd2 = open("/pm/fk", O_RDWR);
		ok = ok && fd2 >= 0 && pwrite(fd2, "CHILD", 5, 6) == 5 && close(fd2) == 0;
		ok = ok && close(fd) == 0;
		int rel = open("made-by-child", O_WRONLY | O_CREAT, 0644); /* in /pm/fkdir */
		ok = ok && rel >= 0 && close(rel) == 0;
		_exit(ok ? 0 : 1);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char buf[16] = {0};
	CHECK(pread(fd, buf, 11, 0) == 11 && !memcmp(buf, "parentCHILD", 11));
	struct stat st;
	CHECK(stat("/pm/fkdir/made-by-child", &st) == 0);
	/* A forked child that execs: the descriptor and the directory follow. */
	CHECK(lseek(fd, 2, SEEK_SET) == 2);
	char num[16];
	snprintf(num, sizeof(num), "%d", fd);
	pid = fork();
	CHECK(pid >= 0);
	if (pid == 0) {
		execl(prog, prog, "fork_exec_child", num, (char *)NULL);
		_exit(3);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK(close(fd) == 0 && chdir("/") == 0);
}

static void case_fork_exec_child(int fd)
{
	char buf[8] = {0}, cwd[PATH_MAX];
	CHECK(read(fd, buf, 4) == 4 && !memcmp(buf, "rent", 4));
	CHECK(getcwd(cwd, sizeof(cwd)) && !strcmp(cwd, "/pm/fkdir"));
	CHECK(access("made-by-child", F_OK) == 0);
}

#define MMAP_LEN (3 * 4096)

static void case_mmap_write(void)
{
	int fd = open("/pm/map", O_RDWR | O_CREAT, 0644);
	CHECK(fd >= 0 && ftruncate(fd, 10000) == 0);
	char *m = mmap(NULL, MMAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED);
	CHECK(m[0] == 0 && m[9999] == 0);
	memcpy(m, "mapped!", 7);
	memcpy(m + 5000, "middle", 6);
	CHECK(msync(m, MMAP_LEN, MS_SYNC) == 0);
	char buf[8] = {0};
	CHECK(pread(fd, buf, 7, 0) == 7 && !memcmp(buf, "mapped!", 7));
	CHECK(pwrite(fd, "W", 1, 1) == 1 && m[1] == 'W'); /* the same pages */
	/* A shrink keeps the pages below the new end where the mapping has
	 * them, and the rest of the last page reads zeros (mmap_edges_test
	 * goes further). */
	CHECK(ftruncate(fd, 5010) == 0 && m[5000] == 'm' && m[5010] == 0);
	memcpy(m + 5006, "!!!!", 4); /* stays past the new end: zeroed by the next shrink */
	CHECK(ftruncate(fd, 5006) == 0 && m[5006] == 0);
	/* Growing maps the new pages into the mapping. */
	CHECK(ftruncate(fd, MMAP_LEN) == 0);
	m[MMAP_LEN - 1] = 'E';
	CHECK(pread(fd, buf, 1, MMAP_LEN - 1) == 1 && buf[0] == 'E');
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 4096);
	CHECK(p != MAP_FAILED && p[5000 - 4096] == 'm');
	p[0] = 'P'; /* copy-on-write: the file does not change */
	CHECK(pread(fd, buf, 1, 4096) == 1 && buf[0] == 0);
	CHECK(munmap(p, 4096) == 0 && munmap(m, MMAP_LEN) == 0);
	/* A large mapped file may shrink: the mapping is cut at the new EOF. */
	int big = open("/pm/bigmap", O_RDWR | O_CREAT, 0644);
	CHECK(big >= 0 && ftruncate(big, 4 << 20) == 0);
	char *b = mmap(NULL, 4 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, big, 0);
	CHECK(b != MAP_FAILED);
	b[(1 << 20) - 1] = 'B';
	CHECK(ftruncate(big, 1 << 20) == 0 && b[(1 << 20) - 1] == 'B');
	CHECK(ftruncate(big, 3 << 20) == 0 && b[(3 << 20) - 1] == 0); /* back again */
	CHECK(ftruncate(big, 4096) == 0 && b[4095] == 0);	      /* small, and still mapped */
	b[100] = 'S';
	char s;
	CHECK(pread(big, &s, 1, 100) == 1 && s == 'S');
	CHECK(munmap(b, 4 << 20) == 0 && ftruncate(big, 0) == 0 && close(big) == 0);
	CHECK(ftruncate(fd, 20000) == 0); /* allowed again */
	int ro = open("/pm/map", O_RDONLY);
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0) == MAP_FAILED &&
	      errno == EACCES);
	CHECK(close(ro) == 0 && close(fd) == 0);
}

/* A new process after mmap_write: the stores are in the pool. */
static void case_mmap_check(void)
{
	int fd = open("/pm/map", O_RDONLY);
	char buf[8] = {0};
	CHECK(fd >= 0 && pread(fd, buf, 7, 0) == 7 && !memcmp(buf, "mWpped!", 7));
	CHECK(pread(fd, buf, 6, 5000) == 6 && !memcmp(buf, "middle", 6));
	char *m = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 0);
	CHECK(m != MAP_FAILED && !memcmp(m + 5000, "middle", 6));
	CHECK(munmap(m, 8192) == 0 && close(fd) == 0);
}

static void case_copy(void)
{
	CHECK(write_all("/pm/src", "copy me please") == 0);
	int in = open("/pm/src", O_RDONLY), out = open("/pm/dst", O_WRONLY | O_CREAT, 0644);
	CHECK(in >= 0 && out >= 0 && copy_file_range(in, NULL, out, NULL, 100, 0) == 14);
	int k = open("/tmp", O_TMPFILE | O_RDWR, 0600);
	CHECK(k >= 0);
	loff_t off = 5;
	CHECK(copy_file_range(in, &off, k, NULL, 100, 0) == 9 && off == 14);
	char buf[16] = {0};
	CHECK(pread(k, buf, 9, 0) == 9 && !memcmp(buf, "me please", 9));
	CHECK(close(in) == 0 && close(out) == 0 && close(k) == 0);
	struct stat st;
	CHECK(stat("/pm/dst", &st) == 0 && st.st_size == 14);
	char tmpl[] = "/pm/tmpXXXXXX";
	int t = mkstemp(tmpl);
	CHECK(t >= 0 && strncmp(tmpl, "/pm/tmp", 7) == 0 && stat(tmpl, &st) == 0 && close(t) == 0);
}

/* ---- table ---------------------------------------------------------------------- */

struct test_case {
	const char *name;
	void (*fn)(void);
};

static const struct test_case cases[] = {
    {"fds", case_fds},
    {"reuse", case_reuse},
    {"paths", case_paths},
    {"stdio", case_stdio},
    {"stdio_redirect", case_stdio_redirect},
    {"stdio_exit", case_stdio_exit},
    {"stdio_exit_check", case_stdio_exit_check},
    {"dup", case_dup},
    {"exec", case_exec},
    {"fork", case_fork},
    {"spawn", case_spawn},
    {"mmap_write", case_mmap_write},
    {"mmap_check", case_mmap_check},
    {"copy", case_copy},
};

int main(int argc, char **argv)
{
	prog = argv[0];
	if (argc < 2) {
		fprintf(stderr, "usage: %s CASE... | -l\n", argv[0]);
		return 2;
	}
	if (!strcmp(argv[1], "-l")) {
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			puts(cases[i].name);
		return 0;
	}
	if (!strcmp(argv[1], "exec_child")) {
		case_exec_child(argc, argv);
		printf("%s exec (in the new image)\n", failures ? "FAIL" : "ok  ");
		return failures ? 1 : 0;
	}
	if (!strcmp(argv[1], "fork_exec_child") && argc == 3) {
		case_fork_exec_child(atoi(argv[2]));
		return failures ? 1 : 0;
	}
	for (int a = 1; a < argc; a++) {
		size_t i = 0;
		while (i < sizeof(cases) / sizeof(cases[0]) && strcmp(cases[i].name, argv[a]))
			i++;
		if (i == sizeof(cases) / sizeof(cases[0])) {
			fprintf(stderr, "unknown case %s\n", argv[a]);
			return 2;
		}
		int before = failures;
		cases[i].fn();
		printf("%s %s\n", failures == before ? "ok  " : "FAIL", argv[a]);
	}
	return failures ? 1 : 0;
}
