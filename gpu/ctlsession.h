/* SPDX-License-Identifier: MIT */
/* ctlsession: the control file's sessions and streams, shared by its parts: ctlfile.c (sessions,
 * streams, staging), ctltext.c (the text protocol) and ctlioctl.c (the ioctls). Internal to
 * gpu/: the module's interface is ctlfile.h. */
#ifndef TFS_CTLSESSION_H
#define TFS_CTLSESSION_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include <tensorfs/control.h>

#include "ctlfile.h"
#include "pack.h"
#include "staging.h"
#include "version.h"
#include "view.h"

#define MAX_STREAMS 16		       /* per session */
#define MAX_AHEAD 8		       /* batches of `next` made ahead, per stream */
#define MAX_TOKENS 64		       /* per request line */
#define MAX_OUT (4u << 20)	       /* reply bytes waiting to be read, per session */
#define MAX_STREAM_BYTES (16ull << 30) /* all slots of one stream */
#define DEFAULT_DEPTH 4
#define DEFAULT_BATCH 1024
#define DEFAULT_SHM_DIR "/dev/shm"
#define ERR_MAX TFS_CTL_MSG_MAX

_Static_assert(TFS_CTL_MAX_COLS == TFS_STAGING_MAX_COLS, "column limits differ");
_Static_assert(TFS_CTL_IPC_BYTES == TFS_STAGING_IPC_BYTES, "IPC handle sizes differ");

struct tfs_ctlfile {
	struct tfs_lake *lake; /* borrowed */
	char *mountpoint;      /* NULL: absolute targets are refused */
	char *shm_dir;
	pthread_mutex_t lock;
	unsigned max_sessions, max_streams;   /* immutable: the limits */
	uint64_t max_staging;		      /* immutable */
	uint64_t cache_gpu;		      /* immutable: bytes of a GPU chunk cache, 0: none */
	uint64_t cache_gpu_headroom;	      /* immutable: what it leaves free (staging.h) */
	struct tfs_ctlfile_session *sessions; /* protected by lock */
	unsigned next_session;		      /* protected by lock */
	uint64_t nsessions, nstreams;	      /* now; protected by lock */
	uint64_t staging_bytes;		      /* slots of every stream now; protected by lock */
	struct tfs_ringkeep *keep;	      /* closed streams' slots (thread-safe); NULL: none */
	uint64_t requests, errors;	      /* atomic */
};

/* A batch of `next` being made ahead of the loader: at stream position pos, for a request of
 * want rows, taking used positions (more than its rows where bad rows were skipped). */
struct ahead {
	unsigned slot;
	uint64_t pos, used, want;
};

struct tfs_ctl_stream {
	unsigned id;
	struct tfs_ctlfile *ctl;
	struct tfs_version *ver;
	struct tfs_lake *lake;
	struct tfs_lake_view *lview; /* the view, shared through the lake; NULL: none */
	const struct tfs_view *view; /* lview's rows; NULL: the version's rows in order */
	uint64_t n;		     /* rows of the stream */
	struct tfs_staging *ring;
	/* Counted in the control file's nstreams and staging_bytes (its slots' bytes) once counted
	 * is set; stream_free gives both back. */
	uint64_t bytes;
	int counted;
	int device;
	size_t ncols;
	size_t cols[TFS_CTL_MAX_COLS];
	uint64_t max_batch; /* rows a slot holds: the batch asked for, at most the stream's rows */
	uint64_t asked_batch; /* the batch asked for at open (or the default) */
	unsigned depth, ahead_max;
	uint64_t pos; /* the next cursor */
	struct ahead ahead[MAX_AHEAD];
	size_t nahead;
	uint64_t *rows;	    /* scratch: max_batch version rows */
	uint64_t *slot_pos; /* per slot: stream position of its first row */
	/* The read: bad rows, gathers, the cache's plan over a view, the next epoch's warm-up. */
	struct tfs_reader *reader;
	uint64_t row_bytes; /* a row's bytes of the fixed columns: what is left, for the warm-up */
	int staged;	    /* a batch was staged: the first one reads frames (tfs_reader_frames) */
	int skip;	    /* the view's on_error=skip: `next` passes bad rows over */
	/* A pack view's stream: its rows are samples, its columns the pack's files (cols[c]: a
	 * tfs_pack_file), described by pcols[c] as fixed columns of the dtype staged. */
	const struct tfs_pack *pack;
	struct tfs_column pcols[TFS_CTL_MAX_COLS];
};

/* Column c of stream s: a version's column, or a pack file's description. */
static inline const struct tfs_column *tfs_ctl_col(const struct tfs_ctl_stream *s, size_t c)
{
	return s->pack ? &s->pcols[c] : &s->ver->manifest.cols[s->cols[c]];
}

struct tfs_ctlfile_session {
	struct tfs_ctlfile *ctl;
	unsigned id;
	uid_t uid;
	gid_t gid;
	struct tfs_ctlfile_session *next, *prev;     /* protected by ctl->lock */
	pthread_mutex_t lock;			     /* serialises the session's requests */
	struct tfs_ctl_stream *streams[MAX_STREAMS]; /* by id - 1; protected by lock */
	unsigned nstreams;			     /* protected by lock */
	struct tfs_buf out;			     /* replies not read yet; protected by lock */
	size_t out_off;				     /* protected by lock */
	struct tfs_buf in; /* a request line's start, its newline not written yet; by lock */
	bool in_discard;   /* the line in hand went over TFS_CTL_LINE_MAX; by lock */
};

#define SET_ERR(...) snprintf(err, ERR_MAX, __VA_ARGS__)

struct tfs_ctl_open_args {
	const char *target;
	const char *cols[TFS_CTL_MAX_COLS];
	size_t ncols;
	const char *device; /* NULL: host */
	unsigned depth;	    /* 0: default */
	uint64_t batch;	    /* 0: default */
	long ahead;	    /* < 0: default */
	uint64_t room;	   /* row bytes of each ragged, text or bytes column per slot; 0: default */
	const char *dtype; /* pack views: tokens staged as int32 or int64; NULL: as stored */
};

/* Every function below takes the session's lock held by the caller, and on failure writes a
 * message of at most ERR_MAX bytes to err and returns -errno. */

/* Open a stream over a->target (a version or view path) in the session. */
int tfs_ctl_stream_open(struct tfs_ctlfile_session *se, const struct tfs_ctl_open_args *a,
			struct tfs_ctl_stream **out, char *err);
/* The session's stream id; NULL (with err set) when there is none. */
struct tfs_ctl_stream *tfs_ctl_stream_find(struct tfs_ctlfile_session *se, uint64_t id, char *err);
int tfs_ctl_stream_close(struct tfs_ctlfile_session *se, uint64_t id, char *err);
/* The next batch of the stream's order (batch rows, at least 1) in a leased slot, made ahead
 * where it can be. release >= 0: the loader gives that slot back first, in the same request (a
 * slot not leased is an error, and then no batch is made); < 0: none. */
int tfs_ctl_stream_next(struct tfs_ctl_stream *s, int release, uint64_t batch, unsigned *slot,
			char *err);
/* Stage by rows (rows != NULL, n of them) or by range [start, start + n) into slot (-1: any
 * free one), which is leased to the caller: *out. */
int tfs_ctl_stream_stage(struct tfs_ctl_stream *s, const uint64_t *rows, uint64_t start, uint64_t n,
			 int slot, unsigned *out, char *err);
int tfs_ctl_stream_release(struct tfs_ctl_stream *s, int slot, char *err);
/* Move the `next` cursor to stream position pos (batches made ahead are dropped). */
int tfs_ctl_stream_seek(struct tfs_ctl_stream *s, uint64_t pos, char *err);

/* Batches of `next` made ahead are dropped, all but the first keep. */
void tfs_ctl_drop_ahead(struct tfs_ctl_stream *s, size_t keep);

/* Counters of the control file and, with se, of that session. */
void tfs_ctl_stats_now(struct tfs_ctlfile *ctl, struct tfs_ctl_stats *st,
		       struct tfs_ctlfile_session *se);
/* The name of an errno value for a reply ("EINVAL"). */
const char *tfs_ctl_errno_name(int e);

#endif
