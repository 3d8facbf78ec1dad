/*
 * mount_helper.c -- `ferrite POOL DIR -o OPTIONS`: the `ferrite` command as
 * the helper mount(8) runs for file systems of type fuse.ferrite.
 *
 * `mount -t fuse.ferrite POOL DIR -o OPTS`, and an /etc/fstab line of that
 * type, make mount(8) run mount.fuse3(8), which runs the program named after
 * "fuse." -- `ferrite`, looked up in PATH -- as `ferrite POOL DIR -o OPTS`
 * (see mount.fuse3(8)). Such a call is `ferrite mount -o OPTS POOL DIR`, with
 * the options that only mount(8) and fstab give meaning to taken out:
 * mount.fuse3 removes most of them already (defaults, noauto, user, _netdev,
 * nofail, x-*), an older one or a direct call may not, and libfuse rejects
 * each one it does not know. Everything else -- rw, ro, nosuid, nodev,
 * noexec, and ferrite's own (mode=, threads=, ...) -- goes on to `ferrite
 * mount`, which checks it.
 */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* fstab and mount(8) options with no meaning to a FUSE daemon. "comment="
 * and "x-" are prefixes; the atime flavours are the kernel's, which FUSE
 * does not apply, and libfuse refuses them. */
static const char *const fstab_only[] = {
    "defaults",	   "auto",	    "noauto",	"user",	      "nouser",	  "users",
    "owner",	   "group",	    "_netdev",	"nofail",     "relatime", "norelatime",
    "strictatime", "nostrictatime", "lazytime", "nolazytime", "diratime", "nodiratime",
};

static int fstab_only_option(const char *o)
{
	size_t i;
	if (strncmp(o, "x-", 2) == 0 || strncmp(o, "comment=", 8) == 0 || o[0] == '\0')
		return 1;
	for (i = 0; i < sizeof(fstab_only) / sizeof(fstab_only[0]); i++)
		if (strcmp(o, fstab_only[i]) == 0)
			return 1;
	return 0;
}

int cli_mount_helper_call(int argc, char **argv)
{
	struct stat st;
	if (argc < 2 || argv[1][0] == '-')
		return 0;
	/* A pool, not a mistyped command: a path, or a file that exists. */
	return strchr(argv[0], '/') || (stat(argv[0], &st) == 0 && !S_ISDIR(st.st_mode));
}

int cli_mount_helper(int argc, char **argv)
{
	static char opts[4096];
	char *margv[8];
	int i, n = 0;
	size_t len = 0;

	opts[0] = '\0';
	for (i = 2; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "-o") == 0 && i + 1 < argc) {
			a = argv[++i];
		} else if (strncmp(a, "-o", 2) == 0) {
			a += 2;
		} else if (strcmp(a, "-s") == 0 || strcmp(a, "-n") == 0 || strcmp(a, "-v") == 0) {
			continue; /* mount(8)'s sloppy, no-mtab and verbose flags */
		} else {
			return cli_usage_error("mount", CLI_EXIT_USAGE,
					       "as a mount helper: expected POOL DIR [-o OPTIONS], "
					       "got '%s'",
					       a);
		}
		char list[sizeof(opts)], *save = NULL;
		snprintf(list, sizeof(list), "%s", a);
		for (char *o = strtok_r(list, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
			if (fstab_only_option(o))
				continue;
			if (len + strlen(o) + 2 > sizeof(opts))
				return cli_usage_error("mount", CLI_EXIT_USAGE,
						       "too many -o options");
			len += (size_t)snprintf(opts + len, sizeof(opts) - len, "%s%s",
						len ? "," : "", o);
		}
	}
	margv[n++] = "mount";
	if (len) {
		margv[n++] = "-o";
		margv[n++] = opts;
	}
	margv[n++] = "--";
	margv[n++] = argv[0];
	margv[n++] = argv[1];
	margv[n] = NULL;
	return cmd_mount(n, margv);
}
