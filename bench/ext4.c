/*
 * ext4.c -- the ext4 column's file system: ext4 on a loop device over a sparse
 * image file in /dev/shm (the papers' "ext4 on a ramdisk"), made before the
 * bench and removed after it. Root only (a loop device and a mount).
 *
 * The image is formatted with its inode tables and journal initialised now
 * (no lazy-init thread runs during the bench), attached to a free loop device
 * with LO_FLAGS_AUTOCLEAR and unlinked at once: the loop device holds the
 * only reference, so the image's memory goes back when the file system is
 * unmounted, and a killed bench leaves at most a mount behind, never an
 * image in /dev/shm.
 */
#ifndef _GNU_SOURCE /* the top-level CMakeLists.txt defines it */
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define GIB (1ull << 30)

static int fail(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return -1;
}

/* Runs argv (PATH, then /sbin and /usr/sbin) with its output in out; its exit
 * status, or -1 if it could not run. */
static int run_tool(char *const argv[], char *out, size_t len)
{
	int p[2];
	pid_t pid;
	size_t got = 0;
	ssize_t n;
	int st;

	out[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		char path[256];

		dup2(p[1], 1);
		dup2(p[1], 2);
		execvp(argv[0], argv);
		snprintf(path, sizeof(path), "/sbin/%s", argv[0]);
		execv(path, argv);
		snprintf(path, sizeof(path), "/usr/sbin/%s", argv[0]);
		execv(path, argv);
		fprintf(stderr, "%s not installed", argv[0]);
		_exit(127);
	}
	close(p[1]);
	while (got + 1 < len &&
	       ((n = read(p[0], out + got, len - 1 - got)) > 0 || (n < 0 && errno == EINTR)))
		got += n > 0 ? (size_t)n : 0;
	out[got] = '\0';
	close(p[0]);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	out[strcspn(out, "\n")] = '\0'; /* the first line says enough */
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The image size: the a) file twice (the Append and SWE files never coexist,
 * but with slack), 16 KiB per b) file, room for journal and inode tables;
 * whole GiB. $EXT4_IMAGE_SIZE overrides it. */
static uint64_t image_size(const struct bench_opts *o)
{
	const char *env = getenv("EXT4_IMAGE_SIZE");
	uint64_t size;

	if (env && parse_size(env, &size) == 0 && size >= (64u << 20))
		return size;
	size = 2 * o->file_size + o->files * 16384 + (o->quick ? 256ull << 20 : GIB);
	return (size + GIB - 1) / GIB * GIB;
}

/* A free loop device for the image (fd), detached by the kernel once nothing
 * uses it (autoclear). Its descriptor, or -errno. */
static int loop_attach(int img_fd, const char *img, char *dev, size_t devlen)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);

	if (ctl < 0)
		return -errno;
	for (int tries = 0; tries < 8; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		struct loop_config cfg;
		int fd;

		if (n < 0)
			break;
		snprintf(dev, devlen, "/dev/loop%d", n);
		fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		memset(&cfg, 0, sizeof(cfg));
		cfg.fd = (unsigned)img_fd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
		snprintf((char *)cfg.info.lo_file_name, LO_NAME_SIZE, "%s", img);
		if (ioctl(fd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			return fd;
		}
		if (errno == EINVAL || errno == ENOTTY) { /* before Linux 5.8 */
			struct loop_info64 info;

			memset(&info, 0, sizeof(info));
			info.lo_flags = LO_FLAGS_AUTOCLEAR;
			snprintf((char *)info.lo_file_name, LO_NAME_SIZE, "%s", img);
			if (ioctl(fd, LOOP_SET_FD, img_fd) == 0) {
				if (ioctl(fd, LOOP_SET_STATUS64, &info) == 0) {
					close(ctl);
					return fd;
				}
				ioctl(fd, LOOP_CLR_FD, 0);
			}
		}
		close(fd); /* taken meanwhile (EBUSY): the next free one */
	}
	int e = errno ? errno : EBUSY;
	close(ctl);
	return -e;
}

int ext4_loop_setup(struct ext4_loop *e, const struct bench_opts *o, char *why, size_t len)
{
	uint64_t size = image_size(o), inodes = o->files + 65536;
	char sz[32], nbuf[32], out[512];
	int img_fd, rc;

	memset(e, 0, sizeof(*e));
	e->loop_fd = -1;
	if (geteuid() != 0)
		return fail(why, len, "not root (a loop device and a mount need root)");
	snprintf(e->img, sizeof(e->img), "/dev/shm/ferrite-bench-ext4.XXXXXX");
	img_fd = mkostemp(e->img, O_CLOEXEC);
	if (img_fd < 0)
		return fail(why, len, "cannot create an image file in /dev/shm: %s",
			    strerror(errno));
	progress("ext4: %s image %s", fmt_size(size, sz, sizeof(sz)), e->img);
	if (ftruncate(img_fd, (off_t)size) < 0) {
		rc = fail(why, len, "cannot size %s: %s", e->img, strerror(errno));
		goto out_img;
	}
	{
		char *argv[16];
		int n = 0;

		argv[n++] = "mkfs.ext4";
		argv[n++] = "-q";
		argv[n++] = "-F";
		argv[n++] = "-b";
		argv[n++] = "4096";
		if (inodes > size / 16384) {
			snprintf(nbuf, sizeof(nbuf), "%llu", (unsigned long long)inodes);
			argv[n++] = "-N";
			argv[n++] = nbuf;
		}
		argv[n++] = "-E";
		argv[n++] = "lazy_itable_init=0,lazy_journal_init=0";
		argv[n++] = e->img;
		argv[n] = NULL;
		rc = run_tool(argv, out, sizeof(out));
		if (rc != 0) {
			rc = fail(why, len, "mkfs.ext4 failed: %s",
				  out[0] ? out : "could not run it");
			goto out_img;
		}
	}
	e->loop_fd = loop_attach(img_fd, e->img, e->dev, sizeof(e->dev));
	if (e->loop_fd < 0) {
		rc = fail(why, len, "no loop device: %s", strerror(-e->loop_fd));
		e->loop_fd = -1;
		goto out_img;
	}
	unlink(e->img); /* the loop device holds it now */
	close(img_fd);
	img_fd = -1;
	snprintf(e->mnt, sizeof(e->mnt), "/tmp/ferrite-bench-ext4.XXXXXX");
	if (!mkdtemp(e->mnt)) {
		e->mnt[0] = '\0';
		ext4_loop_teardown(e);
		return fail(why, len, "cannot create a mount point: %s", strerror(errno));
	}
	if (mount(e->dev, e->mnt, "ext4", 0, NULL) < 0) {
		rc = fail(why, len, "mount of %s failed: %s", e->dev, strerror(errno));
		ext4_loop_teardown(e);
		return rc;
	}
	e->mounted = 1;
	progress("ext4: %s mounted on %s", e->dev, e->mnt);
	sync();
	drop_page_cache();
	return 0;
out_img:
	unlink(e->img);
	if (img_fd >= 0)
		close(img_fd);
	if (e->loop_fd >= 0)
		close(e->loop_fd);
	e->loop_fd = -1;
	return rc;
}

void ext4_loop_teardown(struct ext4_loop *e)
{
	if (e->mounted && umount2(e->mnt, 0) < 0) {
		progress("ext4: cannot unmount %s (%s); detaching it", e->mnt, strerror(errno));
		umount2(e->mnt, MNT_DETACH);
	}
	e->mounted = 0;
	if (e->loop_fd >= 0)
		close(e->loop_fd); /* autoclear: detached once unmounted */
	e->loop_fd = -1;
	if (e->mnt[0])
		rmdir(e->mnt);
	e->mnt[0] = '\0';
}
