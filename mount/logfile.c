/* SPDX-License-Identifier: MIT */
/* logfile: a log file for a daemon that has no syslog socket to write to. */
#include "logfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int syslog_listens(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX, .sun_path = "/dev/log" };
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int run_dir(char *dir, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (geteuid() == 0)
		snprintf(dir, cap, "/run/tensorfs");
	else if (xdg && *xdg == '/')
		snprintf(dir, cap, "%s/tensorfs", xdg);
	else
		snprintf(dir, cap, "/tmp/tensorfs-%u", (unsigned)geteuid());
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	return 0;
}

int tfs_logfile_fallback(const char *mountpoint, char *path, size_t cap)
{
	char dir[4096], name[256];
	size_t n = 0;
	int rc;

	if (syslog_listens())
		return 1;
	rc = run_dir(dir, sizeof(dir));
	if (rc)
		return rc;
	/* /mnt/lake -> mnt-lake, as systemd names units after paths. */
	for (const char *p = mountpoint; *p && n + 1 < sizeof(name); p++) {
		if (*p == '/' && (n == 0 || name[n - 1] == '-'))
			continue;
		name[n++] = *p == '/' ? '-' : *p;
	}
	while (n && name[n - 1] == '-')
		n--;
	name[n] = 0;
	if (snprintf(path, cap, "%s/tensorfs-%s.log", dir, n ? name : "root") >= (int)cap)
		return -ENAMETOOLONG;
	return 0;
}
