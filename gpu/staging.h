/* SPDX-License-Identifier: MIT */
/* staging: rings of batch slots that daemon threads fill with rows gathered from the chunk cache,
 * behind a backend table {host: shared-memory files, cuda: pinned ring, device slots, IPC}. */
#ifndef TFS_STAGING_H
#define TFS_STAGING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cache.h"
#include "devcache.h"
#include "reader.h"
#include "ringkeep.h"
#include "version.h"
#include "workpool.h"

#define TFS_STAGING_MAX_COLS 16
#define TFS_STAGING_MAX_DEPTH 64
#define TFS_STAGING_MAX_SLOT_BYTES (1ull << 30)
#define TFS_STAGING_ALIGN 4096 /* slots, and columns inside a slot, start at this alignment */
#define TFS_STAGING_IPC_BYTES 64
#define TFS_STAGING_HOST (-1) /* the device number of host memory */

/* "host" -> TFS_STAGING_HOST, "cuda" or "cuda:N" -> N, and a PCI bus id ("0000:3b:00.0" or
 * "3b:00.0", as cudaDeviceGetPCIBusId writes it) -> this process's number for the CUDA device
 * there: a loader names its device so where CUDA_VISIBLE_DEVICES numbers the devices otherwise
 * than in the daemon. Returns 0; -EINVAL for none of these forms; -ENODEV, with the reason in
 * err, for a bus id without a CUDA device (or without CUDA in this build). */
int tfs_staging_parse_device(const char *s, int *device, char *err, size_t err_cap);

/* Whether device can be staged to now: 0, or -ENODEV with the reason in err (no CUDA support
 * in this build, no driver, no such device). */
int tfs_staging_probe(int device, char *err, size_t err_cap);
/* -o cuda_init=N: make device's CUDA context and register cache's arena with it now, on a
 * thread of their own, rather than when the first ring of the device opens; so that chunks are
 * cached where the device reads them from the start, and the first stream opens and gathers at
 * once. Logged and ignored where there is no such device (or no CUDA in this build). */
void tfs_staging_prepare(int device, struct tfs_cache *cache);

struct tfs_staging_backend;

struct tfs_staging_config {
	struct tfs_version *ver; /* the ring takes a reference */
	struct tfs_cache *cache; /* borrowed: outlives the ring */
	size_t ncols;
	size_t cols[TFS_STAGING_MAX_COLS]; /* column indices in ver */
	uint64_t max_rows;		   /* rows one slot holds */
	/* Columns of another kind than fixed: bytes of row data one slot holds for each. */
	uint64_t room[TFS_STAGING_MAX_COLS];
	/* Rows of chunks damaged for good (badchunks.h) are gathered as zeros (ragged, text and
	 * bytes: as empty rows) and counted (tfs_staging_padded), not an error. */
	int pad_bad_rows;
	unsigned depth; /* slots */
	int device;	/* TFS_STAGING_HOST or a CUDA device */
	/* cuda: bytes of the device's memory for a chunk cache that every ring of the device
	 * shares (made by the first ring asking for one; later sizes are ignored); 0: none. It
	 * leaves cache_gpu_headroom bytes of the device free for other allocations, giving memory
	 * back when they take more (0: a 32nd of the device, at least 2 GiB; cudacache.h). */
	uint64_t cache_gpu, cache_gpu_headroom;
	const char *shm_dir; /* host: directory of slot files; NULL: /dev/shm */
	const char *tag;     /* host: makes the file name unique: tensorfs-<tag> */
	uid_t uid;	     /* host: the loader, who must be able to read the file */
	gid_t gid;
	/* The reader the fills read through (borrowed: outlives the ring); NULL: the ring opens
	 * its own, which pads bad rows as pad_bad_rows says. */
	struct tfs_reader *reader;
	/* A pack view's ring (pack.h): rows are its samples, cols[c] its files (tfs_pack_file),
	 * described by pack_cols[c] as fixed columns of the dtype staged (tokens may be widened
	 * to int32 or int64). The samples are made on the host and copied into the slot. */
	const struct tfs_pack *pack;
	const struct tfs_column *pack_cols;
	/* NULL: the backend of device. Tests put one of their own here. */
	const struct tfs_staging_backend *backend;
	/* Fills made ahead run on it, and the host backend splits a large batch's copy over its
	 * threads (borrowed: outlives the ring); NULL: every fill on the caller's thread alone. */
	struct tfs_workpool *pool;
	/* Slots of closed rings (ringkeep.h): the ring takes kept ones of its shape rather than
	 * make its own, and its own are kept there when it is destroyed (borrowed: outlives the
	 * ring); NULL: made and freed with the ring. */
	struct tfs_ringkeep *keep;
	/* With keep: the bytes of kept slots the staging limit leaves beside this ring's (and every
	 * other live ring's). A ring that finds no kept slots of its shape frees the least recently
	 * kept past this before it makes its own, so that live and kept slots stay within the
	 * limit together. UINT64_MAX: no limit but the keep's own budget. */
	uint64_t keep_room;
};

/* Where a slot's batch is, for the loader. */
struct tfs_staging_loc {
	int device;
	const char *path; /* host: the file holding every slot of the ring (valid with the ring) */
	uint64_t file_bytes; /* host: its size */
	uint64_t base;	     /* offset of the slot in the file or in the device allocation */
	/* Offsets of each column, base included. A fixed column's rows are at col_off; another
	 * kind's are at data_off, with rows + 1 uint64 byte offsets into them at col_off and, for
	 * ragged tensors, rows x rank int64 shapes at shapes_off. */
	uint64_t col_off[TFS_STAGING_MAX_COLS];
	uint64_t data_off[TFS_STAGING_MAX_COLS];
	uint64_t shapes_off[TFS_STAGING_MAX_COLS];
	unsigned char ipc_mem[TFS_STAGING_IPC_BYTES];	/* cuda: IPC handle of the allocation */
	unsigned char ipc_event[TFS_STAGING_IPC_BYTES]; /* cuda: the slot's interprocess event */
	void *dev_mem; /* cuda: the allocation, as this process addresses it (tests, kernels) */
};

struct tfs_staging;

/* A ring of cfg->depth slots of slot bytes each. Returns 0; -E2BIG when a slot would exceed
 * TFS_STAGING_MAX_SLOT_BYTES; -ENODEV for an unusable device; other -errno; err says why. */
int tfs_staging_create(const struct tfs_staging_config *cfg, struct tfs_staging **out, char *err,
		       size_t err_cap);
/* Waits for fills under way, frees the slots (host: unlinks the file). */
void tfs_staging_destroy(struct tfs_staging *st);

uint64_t tfs_staging_slot_bytes(const struct tfs_staging *st);
/* The reader the ring's fills read through: bad rows are asked of it. */
struct tfs_reader *tfs_staging_reader(struct tfs_staging *st);
unsigned tfs_staging_depth(const struct tfs_staging *st);

/* Slots go FREE -> FILLING (fill) -> READY -> LEASED (take) -> FREE (release); a slot filled
 * ahead and never taken goes back with discard. */

/* Start gathering version rows rows[0..n) (each < the version's rows, n <= max_rows; copied)
 * into slot (-1: any free slot). async: on a pool thread; else on the caller's, before this
 * returns. Returns the slot, or -EBUSY when it is not free (or none is). */
int tfs_staging_fill(struct tfs_staging *st, int slot, const uint64_t *rows, size_t n, int async);
/* Wait for slot's fill; on success it is leased to the caller (0), on failure it is free again
 * and the fill's -errno is returned. -EINVAL if the slot is not being filled or ready. */
int tfs_staging_take(struct tfs_staging *st, unsigned slot);
/* A leased slot is free again: -EINVAL if it was not leased. */
int tfs_staging_release(struct tfs_staging *st, unsigned slot);
/* Waits for a fill under way; a filled, untaken slot is free again. */
void tfs_staging_discard(struct tfs_staging *st, unsigned slot);
/* Leased slots now. */
unsigned tfs_staging_leased(struct tfs_staging *st);
/* The rows gathered into slot by its last fill. */
size_t tfs_staging_rows(struct tfs_staging *st, unsigned slot);
/* Bytes of column c (an index into cfg->cols) in slot: a fixed column's rows, another kind's
 * row data. */
uint64_t tfs_staging_col_bytes(struct tfs_staging *st, unsigned slot, size_t c);
/* Rows of the slot's last fill that were bad and padded (pad_bad_rows). */
size_t tfs_staging_padded(struct tfs_staging *st, unsigned slot);
/* After a fill failed with -E2BIG: the column whose rows did not fit its room, and the bytes
 * they needed. */
void tfs_staging_overflow(struct tfs_staging *st, unsigned slot, size_t *c, uint64_t *need);
void tfs_staging_locate(const struct tfs_staging *st, unsigned slot, struct tfs_staging_loc *loc);

/* Process-wide counters. */
struct tfs_staging_stats {
	uint64_t rings, slots, leased; /* now */
	uint64_t batches, rows, bytes; /* gathered */
	uint64_t fill_ns;	       /* time spent gathering */
	uint64_t errors;	       /* failed fills */
	struct tfs_devcache_stats gpu; /* chunk caches in GPU memory, over every device */
};
void tfs_staging_stats(struct tfs_staging_stats *out);

/* Backends. Each ring has one. A fill builds the batch as a gather list (reader.h) and the
 * backend executes it into the slot: the host backend with tfs_gather_list_run_on, the cuda backend
 * with a kernel that reads the cached chunks in place. */
struct tfs_staging_backend {
	const char *name;
	int (*probe)(int device, char *err, size_t err_cap);
	/* depth slots of slot_bytes each; *b is the backend's state. */
	int (*create)(const struct tfs_staging_config *cfg, uint64_t slot_bytes, void **b,
		      char *err, size_t err_cap);
	/* Completes every batch under way (releasing their lists), then frees. */
	void (*destroy)(void *b);
	/* Host memory laid out as slot, where the fill writes what it computes (a column's
	 * offsets). Waits until the slot's previous batch is complete. */
	int (*begin)(void *b, unsigned slot, uint8_t **mem);
	/* Execute l into slot, whose first bytes bytes the batch makes, so that the loader sees
	 * it once the slot's completion is signalled; release l (tfs_gather_list_release) once the
	 * batch is complete, which may be after this returns: its chunks stay pinned until then.
	 * On failure l is released before this returns. */
	int (*submit)(void *b, unsigned slot, struct tfs_gather_list *l, size_t bytes);
	void (*locate)(const void *b, unsigned slot, struct tfs_staging_loc *loc);
	/* Optional: ready device for cache's rings ahead of the first (probed already). */
	void (*prepare)(int device, struct tfs_cache *cache);
	/* Optional: the device at a PCI bus id (checked for its form already); 0, or -ENODEV
	 * with the reason in err. */
	int (*find_pci)(const char *pci, int *device, char *err, size_t err_cap);
	/* Optional, both or neither: the ring is gone and its slots are to be kept (every batch
	 * complete first; host: the file leaves the ring's name); 0, or -errno and then destroy
	 * frees them. reuse: kept slots become cfg's ring's (host: the file takes its name);
	 * on failure destroy frees them. */
	int (*keep)(void *b);
	int (*reuse)(void *b, const struct tfs_staging_config *cfg, char *err, size_t err_cap);
};

extern const struct tfs_staging_backend tfs_staging_host;
/* The cuda backend's chunk caches in GPU memory, summed (zeros without). */
void tfs_staging_cuda_cache_stats(struct tfs_devcache_stats *out);
/* They go, their device memory with them (no stream may be open, no batch under way); the next
 * CUDA stream makes them again. */
void tfs_staging_cuda_cache_close(void);
/* NULL in a build without the CUDA toolkit. */
extern const struct tfs_staging_backend *const tfs_staging_cuda;

#endif
