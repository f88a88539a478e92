/* SPDX-License-Identifier: MIT */
/* mountpoint: refuse to stack on a tensorfs mount, clean a dead one on request, keep files visible.
 */
#include "mountpoint.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"

/* Detach a dead FUSE mount: directly as root, through fusermount3 otherwise. */
static int unmount_dead(const char *path)
{
	pid_t pid;
	int status;

	if (umount2(path, MNT_DETACH) == 0)
		return 0;
	if (errno != EPERM)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", path, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EPERM;
}

/* An absolute, lexically clean form of a path that cannot be resolved (a dead mount). */
static int absolute(const char *path, char abs[PATH_MAX])
{
	char cwd[PATH_MAX];

	if (path[0] == '/')
		return snprintf(abs, PATH_MAX, "%s", path) < PATH_MAX ? 0 : -ENAMETOOLONG;
	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	return snprintf(abs, PATH_MAX, "%s/%s", cwd, path) < PATH_MAX ? 0 : -ENAMETOOLONG;
}

static int entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

int tfs_mountpoint_prepare(const char *path, int force, int nonempty, char abs[PATH_MAX])
{
	struct tfs_mountinfo mi;
	struct statfs sf;
	int rc, n;

	/* Every request to a FUSE mount whose daemon is gone fails with ENOTCONN (ECONNABORTED
	 * while the kernel is still tearing the connection down; ECONNREFUSED when the daemon
	 * died before it answered the kernel's INIT); statfs is one the kernel never answers from
	 * its caches (stat may). */
	if (statfs(path, &sf) &&
	    (errno == ENOTCONN || errno == ECONNABORTED || errno == ECONNREFUSED)) {
		rc = absolute(path, abs);
		if (rc)
			return rc;
		if (!force) {
			tfs_err("mount point %s: a dead mount is there (its daemon is gone: "
				"Transport endpoint is not connected); run `fusermount3 -u %s` "
				"once, or mount with --force to clean it up",
				path, abs);
			return -ENOTCONN;
		}
		rc = unmount_dead(abs);
		if (rc) {
			tfs_err("mount point %s: cannot unmount the dead mount there: %s", path,
				strerror(-rc));
			return rc;
		}
		tfs_info("mount point %s: unmounted the dead mount that was there", abs);
	}
	if (!realpath(path, abs)) {
		rc = -errno;
		tfs_err("mount point %s: %s", path, strerror(errno));
		return rc;
	}
	if (tfs_mountinfo_find(abs, &mi) && !strcmp(mi.fstype, "fuse.tensorfs")) {
		tfs_err("mount point %s: %s is mounted there already; unmount it first "
			"(`fusermount3 -u %s`)",
			abs, mi.source, abs);
		return -EBUSY;
	}
	n = entries(abs);
	if (n < 0) {
		tfs_err("mount point %s: %s", abs, strerror(-n));
		return n;
	}
	if (n > 0 && !nonempty) {
		tfs_err("mount point %s is not empty (%d entr%s): the mount would hide them; use "
			"-o nonempty to mount there anyway",
			abs, n, n == 1 ? "y" : "ies");
		return -ENOTEMPTY;
	}
	return 0;
}
