/* SPDX-License-Identifier: MIT */
/* fs: the FUSE file system that shows a lake as directories of datasets, refs and NPY files. */
#ifndef TFS_FS_H
#define TFS_FS_H

#include <stdint.h>

struct tfs_fs_config {
	const char *lake_url;
	const char *mountpoint;
	int foreground;
	int debug;		/* libfuse request tracing */
	uint64_t cache_mem;	/* bytes of decoded chunks kept in memory */
	double ref_ttl;		/* seconds a branch head is trusted before it is read again */
	const char *cache_dir;	/* disk cache of fetched objects; NULL: none */
	uint64_t cache_disk;	/* its budget in bytes */
	const char *log_path;	/* NULL: stderr in the foreground, syslog as a daemon */
	unsigned max_threads;	/* FUSE worker threads */
	unsigned prefetch_threads; /* chunk loaders working ahead of readers; 0: no prefetch */
	unsigned readahead_kb;	   /* kernel readahead for the mount (needs root); 0: leave it */
	const char *fuse_opts;	/* extra -o options for libfuse (allow_other, ...), or NULL */
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
