/*
 * ferrite.c -- entry point of the `ferrite` command: global options
 * (--help, --version, --pool) and the table that dispatches to subcommands;
 * run as `fsck.ferrite`, it is `ferrite fsck`.
 */
#include <string.h>

#include "cli.h"

#ifndef FERRITE_TOOL_VERSION
#define FERRITE_TOOL_VERSION "unknown"
#endif

struct cli_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static int cmd_help(int argc, char **argv);

static const struct cli_cmd commands[] = {
    {"mkfs", cmd_mkfs, "format a pool"},
    {"info", cmd_info, "show a pool's format, space use and layout"},
    {"fsck", cmd_fsck, "check a pool and repair what can be repaired"},
    {"tune", cmd_tune, "change a pool's label, mode or backing directory"},
    {"ls", cmd_ls, "list directories of a pool"},
    {"cat", cmd_cat, "write files of a pool to standard output"},
    {"cp", cmd_cp, "copy files and trees between the host and a pool"},
    {"stat", cmd_stat, "show how files are stored: inode, partition, pages"},
    {"inode", cmd_inode, "show an inode by number"},
    {"rm", cmd_rm, "remove files and directories from a pool"},
    {"mkdir", cmd_mkdir, "create directories in a pool"},
    {"mv", cmd_mv, "rename or move files inside a pool"},
    {"mount", cmd_mount, "mount a pool on a directory (FUSE)"},
    {"umount", cmd_umount, "unmount a mounted pool and wait until it is released"},
    {"run", cmd_run, "run a program with its files under /pm in a pool"},
    {"stats", cmd_stats, "show what the cache of a tiered pool does"},
    {"bench", cmd_bench, "measure Ferrite against tmpfs, ext4 and raw memory"},
    {"crashtest", cmd_crashtest, "explore crash states: recover and check every image"},
    {"help", cmd_help, "show the help of a command"},
};

#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void print_main_usage(FILE *out)
{
	size_t i;

	fputs("Usage: ferrite [--pool POOL] COMMAND [ARGS...]\n"
	      "       ferrite help COMMAND | ferrite --help | ferrite --version\n"
	      "       ferrite POOL DIR [-o OPTIONS]   (mount -t fuse.ferrite runs this)\n"
	      "\nFerrite is a user-space persistent-memory file system; this command\n"
	      "formats, checks and inspects its pools and copies files in and out.\n"
	      "\nCommands:\n",
	      out);
	/* two blanks after the longest name, as help2man and the eye want */
	int width = 0;
	for (i = 0; i < N_COMMANDS; i++)
		if ((int)strlen(commands[i].name) > width)
			width = (int)strlen(commands[i].name);
	for (i = 0; i < N_COMMANDS; i++)
		fprintf(out, "  %-*s  %s\n", width, commands[i].name, commands[i].summary);
	fputs("\nGlobal options:\n"
	      "  --pool POOL    pool for the command (default: $FERRITE_POOL, else\n"
	      "                 /dev/shm/ferrite/default.pool)\n"
	      "  -h, --help     show this help\n"
	      "  -V, --version  show the version\n"
	      "\nRun 'ferrite COMMAND --help' for the options of a command.\n",
	      out);
}

static void print_version(void)
{
	printf("ferrite %s (API %d.%d)\n", FERRITE_TOOL_VERSION, FERRITE_VERSION_MAJOR,
	       FERRITE_VERSION_MINOR);
}

static const struct cli_cmd *find_command(const char *name)
{
	size_t i;

	for (i = 0; i < N_COMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static int unknown_command(const char *name)
{
	fprintf(stderr, "ferrite: unknown command '%s'\nTry 'ferrite --help' for the list.\n",
		name);
	return CLI_EXIT_USAGE;
}

/* `ferrite help [COMMAND]`: the same text as `ferrite COMMAND --help`. */
static int cmd_help(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	char help_opt[] = "--help";
	char *help_argv[3];

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_main_usage(stdout);
		return CLI_EXIT_OK;
	}
	if (argc > 2)
		return cli_usage_error("help", CLI_EXIT_USAGE, "one COMMAND at most");
	cmd = find_command(argv[1]);
	if (!cmd)
		return unknown_command(argv[1]);
	if (cmd->run == cmd_help)
		return cmd_help(1, argv);
	help_argv[0] = argv[1];
	help_argv[1] = help_opt;
	help_argv[2] = NULL;
	return cmd->run(2, help_argv);
}

/* Consumes the options before COMMAND; returns the index of COMMAND, or
 * -(exit status + 1) when the command line is already handled. */
static int parse_global_options(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *opt = argv[i];

		if (strcmp(opt, "--help") == 0 || strcmp(opt, "-h") == 0) {
			print_main_usage(stdout);
			return -(CLI_EXIT_OK + 1);
		}
		if (strcmp(opt, "--version") == 0 || strcmp(opt, "-V") == 0) {
			print_version();
			return -(CLI_EXIT_OK + 1);
		}
		if (strncmp(opt, "--pool=", 7) == 0) {
			cli_set_global_pool(opt + 7);
		} else if (strcmp(opt, "--pool") == 0 && i + 1 < argc) {
			cli_set_global_pool(argv[++i]);
		} else {
			fprintf(stderr, "ferrite: %s '%s'\nTry 'ferrite --help'.\n",
				strcmp(opt, "--pool") == 0 ? "missing POOL after"
							   : "unknown option",
				opt);
			return -(CLI_EXIT_USAGE + 1);
		}
	}
	return i;
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;
	const char *self = strrchr(argv[0], '/');

	/* fsck(8) runs fsck.TYPE: `fsck -t ferrite POOL` reaches `ferrite fsck`
	 * through a link of that name. */
	if (strcmp(self ? self + 1 : argv[0], "fsck.ferrite") == 0)
		return cmd_fsck(argc, argv);
	int first = parse_global_options(argc, argv);

	if (first < 0)
		return -first - 1;
	if (first >= argc) {
		print_main_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	cmd = find_command(argv[first]);
	if (!cmd && cli_mount_helper_call(argc - first, argv + first))
		return cli_mount_helper(argc - first, argv + first);
	if (!cmd)
		return unknown_command(argv[first]);
	return cmd->run(argc - first, argv + first);
}
