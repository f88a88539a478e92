/* SPDX-License-Identifier: MIT */
/* tfs_client: the C client of the staging control file (libtensorfs-client). */
#include <tensorfs/client.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

int tfs_client_connect(const char *mountpoint)
{
	char path[4096];
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/.tensorfs/control", mountpoint) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void tfs_client_disconnect(int fd)
{
	if (fd >= 0)
		close(fd);
}

/* The ioctl, then the daemon's verdict. */
static int call(int fd, unsigned long cmd, void *arg, struct tfs_ctl_status *st)
{
	st->abi = TFS_CTL_ABI;
	st->status = 0;
	st->msg[0] = 0;
	if (ioctl(fd, cmd, arg) < 0)
		return -errno;
	return st->status;
}

int tfs_client_open(int fd, const char *target, const char *const *cols, size_t ncols,
		    const char *device, unsigned depth, uint64_t batch, struct tfs_ctl_open *out)
{
	memset(out, 0, sizeof(*out));
	if (ncols > TFS_CTL_MAX_COLS ||
	    (size_t)snprintf(out->target, sizeof(out->target), "%s", target) >= sizeof(out->target))
		return -EINVAL;
	for (size_t i = 0; i < ncols; i++)
		if ((size_t)snprintf(out->cols[i], sizeof(out->cols[i]), "%s", cols[i]) >=
		    sizeof(out->cols[i]))
			return -EINVAL;
	out->ncols = (uint32_t)ncols;
	snprintf(out->device, sizeof(out->device), "%s", device ? device : "host");
	out->depth = depth;
	out->batch = batch;
	out->ahead = UINT32_MAX;
	return call(fd, TFS_CTL_IOC_OPEN, out, &out->st);
}

static int stage(int fd, uint32_t stream, uint32_t mode, uint64_t start, uint64_t count,
		 const uint64_t *rows, size_t n, struct tfs_ctl_stage *io)
{
	memset(io, 0, offsetof(struct tfs_ctl_stage, u));
	if (n > TFS_CTL_MAX_ROWS)
		return -E2BIG;
	io->stream = stream;
	io->mode = mode;
	io->slot = -1;
	io->start = start;
	io->count = count;
	io->nrows = (uint32_t)n;
	if (n)
		memcpy(io->u.rows, rows, n * sizeof(*rows));
	return call(fd, TFS_CTL_IOC_STAGE, io, &io->st);
}

int tfs_client_stage_rows(int fd, uint32_t stream, const uint64_t *rows, size_t n,
			  struct tfs_ctl_stage *io)
{
	return stage(fd, stream, TFS_CTL_ROWS, 0, 0, rows, n, io);
}

int tfs_client_stage_range(int fd, uint32_t stream, uint64_t start, uint64_t count,
			   struct tfs_ctl_stage *io)
{
	return stage(fd, stream, TFS_CTL_RANGE, start, count, NULL, 0, io);
}

int tfs_client_next(int fd, uint32_t stream, uint64_t count, struct tfs_ctl_stage *io)
{
	return stage(fd, stream, TFS_CTL_NEXT, 0, count, NULL, 0, io);
}

int tfs_client_next_release(int fd, uint32_t stream, uint64_t count, int32_t release,
			    struct tfs_ctl_next *io)
{
	memset(io, 0, offsetof(struct tfs_ctl_next, out));
	io->stream = stream;
	io->release = release;
	io->batch = count;
	return call(fd, TFS_CTL_IOC_NEXT, io, &io->st);
}

int tfs_client_seek(int fd, uint32_t stream, uint64_t pos)
{
	struct tfs_ctl_seek k = { .stream = stream, .pos = pos };

	return call(fd, TFS_CTL_IOC_SEEK, &k, &k.st);
}

int tfs_client_release(int fd, uint32_t stream, int32_t slot)
{
	struct tfs_ctl_release r = { .stream = stream, .slot = slot };

	return call(fd, TFS_CTL_IOC_RELEASE, &r, &r.st);
}

int tfs_client_close_stream(int fd, uint32_t stream)
{
	struct tfs_ctl_close c = { .stream = stream };

	return call(fd, TFS_CTL_IOC_CLOSE, &c, &c.st);
}

int tfs_client_stats(int fd, struct tfs_ctl_stats *out)
{
	memset(out, 0, sizeof(*out));
	return call(fd, TFS_CTL_IOC_STATS, out, &out->st);
}

int tfs_client_map(const struct tfs_ctl_batch *b, const void **base, size_t *len)
{
	void *p;
	int fd;

	if (b->device != -1 || !b->path[0])
		return -EINVAL;
	fd = open(b->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	p = mmap(NULL, (size_t)b->file_bytes, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -errno;
	*base = p;
	*len = (size_t)b->file_bytes;
	return 0;
}

void tfs_client_unmap(const void *base, size_t len)
{
	if (base)
		munmap((void *)base, len);
}

ssize_t tfs_client_request(int fd, const char *line, char *reply, size_t cap)
{
	size_t len = strlen(line), got = 0;
	char req[8192];

	if (!cap)
		return -EINVAL;
	if (len + 2 > sizeof(req))
		return -E2BIG;
	memcpy(req, line, len);
	if (!len || req[len - 1] != '\n')
		req[len++] = '\n';
	if (write(fd, req, len) != (ssize_t)len)
		return errno ? -errno : -EIO;
	while (!got || reply[got - 1] != '\n') {
		ssize_t n;

		if (got + 1 >= cap)
			return -ENOBUFS;
		n = read(fd, reply + got, cap - 1 - got);
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPROTO; /* no reply pending */
		got += (size_t)n;
	}
	reply[--got] = 0;
	return (ssize_t)got;
}

int tfs_client_batch_row(const struct tfs_ctl_batch *b, const void *base, size_t len, uint32_t c,
			 uint64_t i, const void **data, size_t *row_len, const int64_t **shape)
{
	const struct tfs_ctl_col *col = &b->cols[c];
	const uint8_t *p = base;
	uint64_t off[2];

	if (c >= b->ncols || col->kind == TFS_CTL_FIXED)
		return -EINVAL;
	if (i >= b->rows)
		return -ERANGE;
	if (col->offset > len || (len - col->offset) / 8 < b->rows + 1)
		return -EIO;
	memcpy(off, p + col->offset + i * 8, sizeof(off));
	if (off[1] < off[0] || off[1] > col->bytes || col->data > len ||
	    col->bytes > len - col->data)
		return -EIO;
	*data = p + col->data + off[0];
	*row_len = (size_t)(off[1] - off[0]);
	if (shape) {
		*shape = NULL;
		if (col->kind == TFS_CTL_RAGGED) {
			if (col->shapes > len ||
			    (len - col->shapes) / 8 / (col->ndim ? col->ndim : 1) < b->rows)
				return -EIO;
			*shape = (const int64_t *)(const void *)(p + col->shapes +
								 i * col->ndim * 8);
		}
	}
	return 0;
}
