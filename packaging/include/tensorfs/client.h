/* SPDX-License-Identifier: MIT */
/* tensorfs/client.h: a C loader's side of <mount>/.tensorfs/control, over its ioctls. */
#ifndef TENSORFS_CLIENT_H
#define TENSORFS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <tensorfs/control.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Every function returns 0 or -errno. When the daemon refused a request, the -errno is its
 * status and the struct's st.msg says why. Link with -ltensorfs-client. */

/* Open a session: <mountpoint>/.tensorfs/control, read-write. Returns the fd or -errno. */
int tfs_client_connect(const char *mountpoint);
void tfs_client_disconnect(int fd);

/* Open a stream over target (DATASET/REF[/views/PARAMS]) for ncols columns. device: "host",
 * "cuda:N" or NULL (host); depth, batch: 0 for the defaults. out receives the stream id, rows,
 * slots and the granted batch. */
int tfs_client_open(int fd, const char *target, const char *const *cols, size_t ncols,
		    const char *device, unsigned depth, uint64_t batch, struct tfs_ctl_open *out);

/* Stage a batch; on success io->u.batch describes it and the slot is leased to the session. */
int tfs_client_stage_rows(int fd, uint32_t stream, const uint64_t *rows, size_t n,
			  struct tfs_ctl_stage *io);
int tfs_client_stage_range(int fd, uint32_t stream, uint64_t start, uint64_t count,
			   struct tfs_ctl_stage *io);
/* The next count rows of the stream; -ENODATA at its end. */
int tfs_client_next(int fd, uint32_t stream, uint64_t count, struct tfs_ctl_stage *io);
/* The same in one call with slot `release` given back first (-1: none), as a loader that is done
 * with its last batch asks for the next: on success io->out describes the batch. */
int tfs_client_next_release(int fd, uint32_t stream, uint64_t count, int32_t release,
			    struct tfs_ctl_next *io);
int tfs_client_seek(int fd, uint32_t stream, uint64_t pos);

/* slot -1: every slot of the stream. */
int tfs_client_release(int fd, uint32_t stream, int32_t slot);
int tfs_client_close_stream(int fd, uint32_t stream);
int tfs_client_stats(int fd, struct tfs_ctl_stats *out);

/* Host batches: map the stream's slot file (b->path, read-only) once; column c of any batch of
 * the stream is at base + b->cols[c].offset. */
int tfs_client_map(const struct tfs_ctl_batch *b, const void **base, size_t *len);
void tfs_client_unmap(const void *base, size_t len);
/* Row i (< b->rows) of a ragged, text or bytes column c of a host batch mapped at base: its
 * bytes and, ragged, its shape (b->cols[c].ndim values; NULL for text and bytes). Returns 0,
 * -ERANGE past the last row, -EINVAL for a fixed column, -EIO for offsets that do not fit. */
int tfs_client_batch_row(const struct tfs_ctl_batch *b, const void *base, size_t len, uint32_t c,
			 uint64_t i, const void **data, size_t *row_len, const int64_t **shape);

/* The text protocol: send one request line, read its reply line (NUL-terminated, without the
 * newline) into reply. Returns the reply length or -errno. */
ssize_t tfs_client_request(int fd, const char *line, char *reply, size_t cap);

/* Ragged, text and bytes columns, read from the mount: <version or view dir>/<column>/ holds
 * data.bin, offsets.npy and (ragged) shapes.npy. tfs_client_rows_open maps them; row i is then
 * data[offsets[i], offsets[i+1]) with shape shapes[i * ndim ...], no copy. */
struct tfs_client_rows {
	const uint8_t *data; /* every row's bytes (NULL when there are none) */
	uint64_t data_len;
	const uint64_t *offsets; /* rows + 1 */
	const int64_t *shapes;	 /* rows x ndim; NULL for text and bytes */
	uint64_t rows;
	unsigned ndim;
	void *map_[3]; /* the mappings, for tfs_client_rows_close */
	size_t len_[3];
};

int tfs_client_rows_open(const char *coldir, struct tfs_client_rows *out);
/* Row i: its bytes (*data, *len) and, for a ragged column, its shape (ndim values). -ERANGE past
 * the last row, -EIO when the files disagree. */
int tfs_client_row(const struct tfs_client_rows *r, uint64_t i, const void **data, size_t *len,
		   const int64_t **shape);
void tfs_client_rows_close(struct tfs_client_rows *r);

#ifdef __cplusplus
}
#endif

#endif
