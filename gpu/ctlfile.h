/* SPDX-License-Identifier: MIT */
/* ctlfile: the sessions of <mount>/.tensorfs/control: the staging protocol as text lines and as
 * ioctls (packaging/include/tensorfs/control.h documents both), served by gpu/staging rings. */
#ifndef TFS_CTLFILE_H
#define TFS_CTLFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lake.h"
#include "util.h"

struct tfs_ctlfile;
struct tfs_ctlfile_session;

struct tfs_ctlfile_config {
	struct tfs_lake *lake;	/* borrowed: outlives the control file; targets resolve in it */
	const char *mountpoint; /* absolute targets are taken relative to it; may be NULL */
	const char *shm_dir;	/* host slot files; NULL: /dev/shm */
	/* Limits over every user and session at once; 0: the default. Beyond one, opening the
	 * control file is EBUSY, and an `open` request an error reply naming the limit (EBUSY for
	 * streams, ENOSPC for memory). */
	unsigned max_sessions; /* open control files (default TFS_CTL_DEFAULT_SESSIONS) */
	unsigned max_streams;  /* streams (default TFS_CTL_DEFAULT_STREAMS) */
	uint64_t max_staging;  /* bytes of staging slots (default: half the machine's memory) */
	/* Bytes of each GPU's memory that CUDA streams keep decoded chunks in (-o cache_gpu);
	 * 0: none. */
	uint64_t cache_gpu;
	/* -o cache_gpu_headroom=SIZE: bytes of each GPU the cache leaves free for other
	 * allocations, giving memory back when they take more; 0: the default (staging.h). */
	uint64_t cache_gpu_headroom;
	/* -o cuda_init=N: the CUDA device made ready at mount (tfs_staging_prepare), plus one;
	 * 0: none. */
	int cuda_init;
	/* -o staging_keep=SIZE: bytes of closed streams' slots kept for the next stream of the
	 * same shape (ringkeep.h), for TFS_CTL_KEEP_MS at most, no more than staging_mem and
	 * counted in it with the open streams' slots; keep_given 0: the default
	 * (TFS_CTL_DEFAULT_KEEP); max_keep 0: none. */
	uint64_t max_keep;
	int keep_given;
};

#define TFS_CTL_DEFAULT_SESSIONS 256
#define TFS_CTL_DEFAULT_STREAMS 1024
#define TFS_CTL_DEFAULT_KEEP (1ull << 30)
#define TFS_CTL_KEEP_MS 30000 /* how long closed streams' slots are kept */

/* Also removes slot files that daemons no longer running left in the shm directory. */
int tfs_ctlfile_create(const struct tfs_ctlfile_config *cfg, struct tfs_ctlfile **out);
/* Closes every session still open (releasing their slots and files). */
void tfs_ctlfile_destroy(struct tfs_ctlfile *ctl);

/* An open file of the control file, for the user uid:gid (who gets to read its slot files). */
int tfs_ctlfile_session_open(struct tfs_ctlfile *ctl, uid_t uid, gid_t gid,
			     struct tfs_ctlfile_session **out);
/* Releases every slot and stream of the session. */
void tfs_ctlfile_session_close(struct tfs_ctlfile_session *s);

/* Requests: one per line; each queues one reply line. Returns len, or -ENOBUFS when too many
 * replies are waiting to be read. */
ssize_t tfs_ctlfile_write(struct tfs_ctlfile_session *s, const char *buf, size_t len);
/* Up to len bytes of pending replies; 0 when none is pending. */
ssize_t tfs_ctlfile_read(struct tfs_ctlfile_session *s, char *buf, size_t len);

/* A TFS_CTL_IOC_* request: in holds in_len bytes, the reply goes to out (out_len bytes).
 * Returns 0 with the outcome in the struct's status, -ENOTTY for an unknown command, -EINVAL
 * for sizes that do not match it. */
int tfs_ctlfile_ioctl(struct tfs_ctlfile_session *s, unsigned cmd, const void *in, size_t in_len,
		      void *out, size_t out_len);

/* The "staging" member of .tensorfs/stats: `  "staging": {...},\n`. */
int tfs_ctlfile_stats_json(struct tfs_ctlfile *ctl, struct tfs_buf *out);
/* The same counters as Prometheus metric families (tensorfs_staging_*). */
int tfs_ctlfile_metrics(struct tfs_ctlfile *ctl, struct tfs_buf *out);

#endif
