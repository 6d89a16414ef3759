/*
 * hangfs: a FUSE filesystem whose statfs never answers, as a hung NFS server or a stuck
 * CVMFS/EOS FUSE client looks to a caller of statvfs(3). The root directory answers getattr
 * (so that the mount point can be looked up and listed) and is empty; statfs blocks for ever and
 * ignores the kernel's INTERRUPT, so a caller that the kernel has already handed the request to
 * sleeps uninterruptibly (D state, deaf even to SIGKILL) until the daemon dies or the
 * connection is aborted. With --hang-getattr, getattr of the root blocks as well. Each statfs
 * request is logged to stderr ("statfs /") as it arrives, before the daemon hangs on it.
 *
 * Built by agent/tests/it/dead_mount.rs: cc hangfs.c $(pkg-config --cflags --libs fuse3)
 * Run: hangfs [--hang-getattr] -f -o fsname=...,subtype=hangfs MOUNTPOINT
 */
#define FUSE_USE_VERSION 31
#include <errno.h>
#include <fuse.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hang_getattr_too;

static void hang(void)
{
	for (;;)
		pause();
}

static int hangfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	(void)fi;
	if (strcmp(path, "/") != 0)
		return -ENOENT;
	if (hang_getattr_too)
		hang();
	memset(st, 0, sizeof *st);
	st->st_mode = S_IFDIR | 0755;
	st->st_nlink = 2;
	return 0;
}

static int hangfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
			  struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	if (strcmp(path, "/") != 0)
		return -ENOENT;
	fill(buf, ".", NULL, 0, 0);
	fill(buf, "..", NULL, 0, 0);
	return 0;
}

static int hangfs_statfs(const char *path, struct statvfs *st)
{
	(void)st;
	/* Said before hanging, so that a test knows the request has reached the daemon. */
	fprintf(stderr, "statfs %s\n", path);
	fflush(stderr);
	hang();
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = hangfs_getattr,
	.readdir = hangfs_readdir,
	.statfs = hangfs_statfs,
};

int main(int argc, char *argv[])
{
	if (argc > 1 && strcmp(argv[1], "--hang-getattr") == 0) {
		hang_getattr_too = 1;
		argv[1] = argv[0];
		argv++;
		argc--;
	}
	return fuse_main(argc, argv, &ops, NULL);
}
