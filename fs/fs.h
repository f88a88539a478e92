/* SPDX-License-Identifier: MIT */
/* fs: the FUSE file system that shows a lake as directories of datasets, refs and NPY files. */
#ifndef TFS_FS_H
#define TFS_FS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"

struct tfs_lake;

/* What serves <mount>/.tensorfs/control. fs/ only routes the control file's opens, reads,
 * writes, ioctls and releases here; the wiring (mount/) plugs in the staging engine (gpu/), so
 * neither depends on the other. All functions return 0 or -errno (sizes for read and write). */
struct tfs_fs_control {
	/* Called once the lake is started (after daemonising); *obj is passed back below. */
	int (*create)(struct tfs_lake *lake, const char *mountpoint, void **obj);
	void (*destroy)(void *obj);
	/* One session per open file, for the user who opened it. */
	int (*open)(void *obj, uid_t uid, gid_t gid, void **session);
	void (*close)(void *session);
	ssize_t (*write)(void *session, const char *buf, size_t len);
	ssize_t (*read)(void *session, char *buf, size_t len);
	int (*ioctl)(void *session, unsigned cmd, const void *in, size_t in_len, void *out,
		     size_t out_len);
	/* A member for .tensorfs/stats: `  "name": {...},\n`. */
	int (*stats_json)(void *obj, struct tfs_buf *out);
	/* Its metric families for .tensorfs/metrics (Prometheus text); may be NULL. */
	int (*metrics)(void *obj, struct tfs_buf *out);
};

struct tfs_fs_config {
	struct tfs_lake *lake; /* the engine, opened (not started) by the caller, who closes it */
	const char *lake_url;  /* as the user gave it: for mount(8)'s listing and the log */
	const char *mountpoint;
	int foreground;
	int debug;	       /* libfuse request tracing */
	double ref_ttl;	       /* seconds a branch head is trusted before it is read again */
	const char *log_path;  /* NULL: stderr in the foreground, syslog as a daemon */
	unsigned max_threads;  /* FUSE worker threads */
	unsigned readahead_kb; /* kernel readahead for the mount (needs root); 0: leave it */
	int splice;	       /* reply to column reads through a pipe (vmsplice + splice) */
	const char *fuse_opts; /* extra -o options for libfuse (allow_other, ...), or NULL */
	const struct tfs_fs_control *control; /* NULL: no control file */
};

#define TFS_FS_DEFAULT_CACHE_MEM (512ull << 20)
#define TFS_FS_DEFAULT_REF_TTL 5.0
#define TFS_FS_DEFAULT_READAHEAD_KB 1024
#define TFS_FS_DEFAULT_CACHE_DISK (8ull << 30)

/* Mount and serve until unmounted. Returns 0, or non-zero (after logging why) when the lake
 * cannot be opened or the mount fails; in daemon mode, returns in the parent only once the
 * mount is up (or has failed). */
int tfs_fs_main(const struct tfs_fs_config *cfg);

#endif
