/* SPDX-License-Identifier: MIT */
/* tensorfs/control.h: the staging protocol of <mount>/.tensorfs/control, as text and as ioctls. */
#ifndef TENSORFS_CONTROL_H
#define TENSORFS_CONTROL_H

/*
 * A loader opens <mount>/.tensorfs/control read-write; the open file is a session. It asks the
 * daemon to gather batches of rows of a version or view into staging slots, and the daemon
 * replies with where each batch is: a shared-memory file (device "host") or a CUDA IPC memory
 * handle plus an interprocess event (device "cuda:N"). A slot belongs to the session from the
 * reply until it is released; closing the file (or the loader dying, which closes it) releases
 * every slot and stream of the session.
 *
 * Text protocol: write one request line, read one reply line. Requests queue their replies in
 * order; a read returns pending reply bytes (0 bytes: nothing pending). Tokens are separated by
 * spaces; values never contain spaces.
 *
 *   open TARGET cols=A,B[,...] [device=host|cuda:N] [depth=N] [batch=N] [ahead=N] [room=BYTES]
 *       TARGET: DATASET/REF, DATASET/commits/ID, either followed by /views/PARAMS (a view
 *       directory name, e.g. seed=7,epoch=0,rank=0,world=8), or the absolute path of such a
 *       directory under the mount. depth: slots in the ring (default 4, 1..64). batch: the most
 *       rows one slot holds (default 1024, less if 1024 rows exceed 1 GiB; a slot holds at most
 *       1 GiB). ahead: batches of `next` assembled ahead of the loader, side by side (default
 *       depth-1, at most 8).
 *       room: bytes of row data a slot holds for each ragged, text or bytes column (K, M, G
 *       suffixes); by default the most that any `batch` rows in a row of the stream's order
 *       hold, found at open by reading the column's offsets once. A batch whose rows need more
 *       is refused with E2BIG.
 *     -> ok stream=S rows=N slots=D batch=B device=DEV commit=HEX slot_bytes=X
 *   stage stream=S rows=I,J,K [slot=N]     rows of the stream (view rows for a view), any order
 *   stage stream=S range=A:B [slot=N]      rows A..B-1
 *   next stream=S batch=B [release=K]      the next B rows in stream order (fewer at the end);
 *                                          release=K first gives slot K back, as release does
 *                                          (an error if it is not leased: then no batch)
 *     -> ok stream=S slot=N rows=R pos=P bytes=X file=PATH file_bytes=F
 *           col=NAME offset=O dtype=DESCR shape=R,D1,D2 [col=...]          (host)
 *     -> ok stream=S slot=N rows=R pos=P bytes=X device=cuda:K ipc=HEX128 event=HEX128
 *           col=NAME offset=O dtype=DESCR shape=R,D1,D2 [col=...]          (cuda)
 *     a ragged, text or bytes column is, in place of "offset=O dtype=DESCR shape=...":
 *           col=NAME kind=ragged|text|bytes dtype=DESCR offsets=O data=O data_bytes=N
 *           [shapes=O rank=K]                                             (ragged only)
 *       offsets: rows + 1 little-endian uint64 byte offsets into the batch's data, starting at
 *       0: row i is data[offsets[i]:offsets[i+1]] (UTF-8 for text); data_bytes is
 *       offsets[rows]. shapes: rows x K int64, row i's shape (its data viewed as DESCR and
 *       reshaped). Rows come back exactly as stored: no padding.
 *       offset: bytes from the start of the file (host) or of the IPC allocation (cuda), so a
 *       loader maps the file / opens the handle once and reuses it for every slot. DESCR is a
 *       numpy dtype string ("<f4", "|u1"). pos: the stream position of the first row (next;
 *       for stage it is the first requested row). After the last row, next replies
 *       "error ENODATA ...". For cuda, wait on the event (cudaStreamWaitEvent) before reading,
 *       and finish reading before the release; close the handle and the events
 *       (cudaIpcCloseMemHandle, cudaEventDestroy) before closing the stream or the file, which
 *       frees them (an allocation freed while still open in an importer is undefined).
 *   seek stream=S pos=P                    move the next cursor (drops batches made ahead)
 *   release stream=S slot=N|all            -> ok
 *   close stream=S                         -> ok (releases its slots)
 *   stats                                  -> ok sessions=.. streams=.. slots=.. leased=.. ...
 *
 * Errors: "error NAME message", NAME an errno name (EINVAL malformed request or unknown column,
 * ERANGE row out of range, E2BIG batch larger than the slot, ENODEV no such device, EBUSY slot
 * leased or no free slot, ENOENT unknown stream/dataset/ref, ENODATA end of stream, ...). An
 * error never affects other requests, sessions or the daemon.
 *
 * Host slots: one file per stream, /dev/shm/tensorfs-<daemonpid>-<session>-<stream>, mode 0600
 * owned by the daemon user (a loader of another uid, with -o allow_other, gets a read-only ACL
 * entry), unlinked when the stream closes (its memory may be kept, as
 * tensorfs-<daemonpid>-kept-<n>, for the next stream of the same shape and user: mount option
 * staging_keep). Slot N starts at N * slot_bytes. A mapped slot's bytes are the batch until the
 * slot is released; then the daemon may overwrite them.
 *
 * ioctl protocol: the same operations as fixed-size structs (FUSE restricted ioctls: no
 * pointers, sizes encoded in the command, <= 16 KiB). Every struct starts with
 * struct tfs_ctl_status: the daemon sets status to 0 or -errno and msg to the reason. The
 * ioctl itself returns 0 whenever the daemon understood the command, so check status.
 */

#include <stdint.h>
#include <sys/ioctl.h>

#define TFS_CTL_ABI 2
#define TFS_CTL_IOC_MAGIC 0xB9

#define TFS_CTL_MAX_COLS 16
#define TFS_CTL_NAME_MAX 136 /* column names are at most 128 characters */
#define TFS_CTL_TARGET_MAX 1024
#define TFS_CTL_DEVICE_MAX 16
#define TFS_CTL_MSG_MAX 248
#define TFS_CTL_LINE_MAX (1u << 20) /* bytes of one text request, its newline excluded */
#define TFS_CTL_PATH_MAX 256
#define TFS_CTL_MAX_DIMS 32   /* batch dimension included */
#define TFS_CTL_MAX_ROWS 1024 /* explicit rows per TFS_CTL_IOC_STAGE */
#define TFS_CTL_IPC_BYTES 64  /* cudaIpcMemHandle_t, cudaIpcEventHandle_t */

struct tfs_ctl_status {
	int32_t status;		   /* out: 0 or -errno */
	uint32_t abi;		   /* in: TFS_CTL_ABI (0 is accepted as the current one) */
	char msg[TFS_CTL_MSG_MAX]; /* out: why, when status < 0 */
};

struct tfs_ctl_open {
	struct tfs_ctl_status st;
	/* in */
	char target[TFS_CTL_TARGET_MAX];	       /* as in the text request */
	char cols[TFS_CTL_MAX_COLS][TFS_CTL_NAME_MAX]; /* the first ncols are used */
	uint32_t ncols;
	uint32_t depth; /* 0: default */
	uint64_t batch; /* most rows per slot; 0: default */
	uint32_t ahead; /* UINT32_MAX: default */
	uint32_t pad0;
	uint64_t room; /* row bytes per slot of each ragged, text or bytes column; 0: default */
	char device[TFS_CTL_DEVICE_MAX]; /* "host", "cuda:0", a PCI bus id; empty: host */
	/* out */
	uint32_t stream;
	uint32_t slots;
	uint64_t rows;	    /* rows of the stream */
	uint64_t max_batch; /* batch as granted */
	uint64_t slot_bytes;
	char commit[72]; /* 64 hex digits */
};

/* What a column holds: one shape for every row, or rows of any size. */
enum tfs_ctl_kind {
	TFS_CTL_FIXED = 0,
	TFS_CTL_RAGGED = 1, /* tensors of one dtype and rank, any shape */
	TFS_CTL_TEXT = 2,   /* UTF-8 strings */
	TFS_CTL_BYTES = 3,  /* byte strings */
};

/* One column of a staged batch. Offsets are from the start of the file (host) or of the IPC
 * allocation (cuda). */
struct tfs_ctl_col {
	char name[TFS_CTL_NAME_MAX];
	char dtype[8]; /* numpy descr, e.g. "<f4" */
	uint32_t ndim; /* fixed: dimensions of the batch, rows included; ragged: the rank of a
			  row; text, bytes: 0 */
	uint32_t kind; /* enum tfs_ctl_kind */
	uint64_t shape[TFS_CTL_MAX_DIMS]; /* fixed */
	uint64_t offset; /* fixed: the batch; others: rows + 1 uint64 byte offsets into data */
	uint64_t bytes;	 /* fixed: of the batch; others: of the rows' data */
	uint64_t data;	 /* others: the rows' bytes, one after another */
	uint64_t shapes; /* ragged: rows x ndim int64 */
};

/* Where a staged batch is. */
struct tfs_ctl_batch {
	uint32_t stream;
	uint32_t slot;
	uint64_t rows;
	uint64_t pos;
	int32_t device; /* -1: host; N: cuda:N */
	uint32_t ncols;
	char path[TFS_CTL_PATH_MAX]; /* host: the shared-memory file */
	uint64_t file_bytes;	     /* host: its size (map it whole, once) */
	uint8_t ipc_mem[TFS_CTL_IPC_BYTES];
	uint8_t ipc_event[TFS_CTL_IPC_BYTES];
	struct tfs_ctl_col cols[TFS_CTL_MAX_COLS];
};

enum tfs_ctl_mode {
	TFS_CTL_ROWS = 1,  /* u.rows[0..nrows) */
	TFS_CTL_RANGE = 2, /* rows start..start+count-1 */
	TFS_CTL_NEXT = 3,  /* the next count rows */
};

struct tfs_ctl_stage {
	struct tfs_ctl_status st;
	/* in */
	uint32_t stream;
	uint32_t mode;	/* enum tfs_ctl_mode */
	int32_t slot;	/* -1: any free slot */
	uint32_t nrows; /* TFS_CTL_ROWS */
	uint64_t start;
	uint64_t count;
	union {
		uint64_t rows[TFS_CTL_MAX_ROWS]; /* in */
		struct tfs_ctl_batch batch;	 /* out */
	} u;
};

struct tfs_ctl_release {
	struct tfs_ctl_status st;
	uint32_t stream;
	int32_t slot; /* -1: every slot of the stream */
};

struct tfs_ctl_close {
	struct tfs_ctl_status st;
	uint32_t stream;
	uint32_t pad0;
};

struct tfs_ctl_seek {
	struct tfs_ctl_status st;
	uint32_t stream;
	uint32_t pad0;
	uint64_t pos;
};

/* next stream=S batch=B [release=K]: slot `release` given back first (-1: none; a slot not
 * leased is an error, and then no batch is made), then the next `batch` rows (at least 1) in
 * stream order into `out`. -ENODATA after the last row. */
struct tfs_ctl_next {
	struct tfs_ctl_status st;
	/* in */
	uint32_t stream;
	int32_t release;
	uint64_t batch;
	/* out */
	struct tfs_ctl_batch out;
};

struct tfs_ctl_stats {
	struct tfs_ctl_status st;
	/* out: the daemon */
	uint64_t sessions, streams, slots, slots_leased;
	uint64_t batches, rows, bytes, requests, errors;
	/* out: this session */
	uint64_t session_streams, session_leased;
};

#define TFS_CTL_IOC_OPEN _IOWR(TFS_CTL_IOC_MAGIC, 1, struct tfs_ctl_open)
#define TFS_CTL_IOC_STAGE _IOWR(TFS_CTL_IOC_MAGIC, 2, struct tfs_ctl_stage)
#define TFS_CTL_IOC_RELEASE _IOWR(TFS_CTL_IOC_MAGIC, 3, struct tfs_ctl_release)
#define TFS_CTL_IOC_CLOSE _IOWR(TFS_CTL_IOC_MAGIC, 4, struct tfs_ctl_close)
#define TFS_CTL_IOC_STATS _IOWR(TFS_CTL_IOC_MAGIC, 5, struct tfs_ctl_stats)
#define TFS_CTL_IOC_SEEK _IOWR(TFS_CTL_IOC_MAGIC, 6, struct tfs_ctl_seek)
#define TFS_CTL_IOC_NEXT _IOWR(TFS_CTL_IOC_MAGIC, 7, struct tfs_ctl_next)

/* The ioctl size field has 14 bits: every struct must stay under 16 KiB. */
#ifdef __cplusplus
#define TFS_CTL_STATIC_ASSERT static_assert
#else
#define TFS_CTL_STATIC_ASSERT _Static_assert
#endif
TFS_CTL_STATIC_ASSERT(sizeof(struct tfs_ctl_open) < 16384, "tfs_ctl_open too large");
TFS_CTL_STATIC_ASSERT(sizeof(struct tfs_ctl_stage) < 16384, "tfs_ctl_stage too large");
TFS_CTL_STATIC_ASSERT(sizeof(struct tfs_ctl_next) < 16384, "tfs_ctl_next too large");
TFS_CTL_STATIC_ASSERT(sizeof(struct tfs_ctl_stats) < 16384, "tfs_ctl_stats too large");
#undef TFS_CTL_STATIC_ASSERT

#endif
