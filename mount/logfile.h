/* SPDX-License-Identifier: MIT */
/* logfile: where a daemon's log goes when there is no syslog to take it. */
#ifndef TFS_LOGFILE_H
#define TFS_LOGFILE_H

#include <stddef.h>

/* A daemon without -o log=FILE logs to syslog. Where no syslog listens (/dev/log, as in many
 * containers), its lines would be lost: this picks a file instead, in the run directory
 * (/run/tensorfs for root, $XDG_RUNTIME_DIR/tensorfs or /tmp/tensorfs-UID otherwise; not the
 * disk cache's directory, which holds only cache files), named after the mount point
 * (tensorfs-mnt-lake.log), and writes its path to path.
 * Returns 1 when syslog is there (path untouched), 0 with a path, -errno when no file could be
 * made. */
int tfs_logfile_fallback(const char *mountpoint, char *path, size_t cap);

#endif
