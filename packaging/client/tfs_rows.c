/* SPDX-License-Identifier: MIT */
/* tfs_rows: the C client's reader of ragged, text and bytes columns from a mount (their
 * COLUMN/ directory's data.bin, offsets.npy and shapes.npy, mapped). */
#include <tensorfs/client.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Map dir/name whole (len 0: nothing mapped). */
static int map_file(const char *dir, const char *name, void **map, size_t *len)
{
	char path[4096];
	struct stat sb;
	int fd, rc = 0;

	*map = NULL;
	*len = 0;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		rc = -errno;
	else if (sb.st_size > 0) {
		*map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
		if (*map == MAP_FAILED) {
			*map = NULL;
			rc = -errno;
		} else {
			*len = (size_t)sb.st_size;
		}
	}
	close(fd);
	return rc;
}

/* The data of an NPY file of 8-byte items: its first item and how many there are. */
static int npy_items(const void *map, size_t len, const void **items, uint64_t *n)
{
	const uint8_t *p = map;
	size_t hdr;

	if (len < 10 || memcmp(p, "\x93NUMPY", 6))
		return -EIO;
	if (p[6] == 1)
		hdr = 10 + (size_t)(p[8] | p[9] << 8);
	else if (len >= 12)
		hdr = 12 + (size_t)(p[8] | p[9] << 8 | p[10] << 16 | (size_t)p[11] << 24);
	else
		return -EIO;
	if (hdr > len || (len - hdr) % 8)
		return -EIO;
	*items = p + hdr;
	*n = (len - hdr) / 8;
	return 0;
}

int tfs_client_rows_open(const char *coldir, struct tfs_client_rows *r)
{
	const void *items;
	uint64_t n, ns;
	int rc;

	memset(r, 0, sizeof(*r));
	rc = map_file(coldir, "data.bin", &r->map_[0], &r->len_[0]);
	if (!rc)
		rc = map_file(coldir, "offsets.npy", &r->map_[1], &r->len_[1]);
	if (!rc)
		rc = npy_items(r->map_[1], r->len_[1], &items, &n);
	if (rc || n == 0) {
		tfs_client_rows_close(r);
		return rc ? rc : -EIO;
	}
	r->data = r->map_[0];
	r->data_len = r->len_[0];
	r->offsets = items;
	r->rows = n - 1;
	/* shapes.npy only for ragged columns. */
	rc = map_file(coldir, "shapes.npy", &r->map_[2], &r->len_[2]);
	if (rc == -ENOENT)
		return 0;
	if (!rc)
		rc = npy_items(r->map_[2], r->len_[2], &items, &ns);
	if (!rc && (r->rows == 0 || ns % r->rows))
		rc = r->rows ? -EIO : 0;
	if (rc) {
		tfs_client_rows_close(r);
		return rc;
	}
	r->shapes = items;
	r->ndim = r->rows ? (unsigned)(ns / r->rows) : 0;
	return 0;
}

int tfs_client_row(const struct tfs_client_rows *r, uint64_t i, const void **data, size_t *len,
		   const int64_t **shape)
{
	if (i >= r->rows)
		return -ERANGE;
	if (r->offsets[i] > r->offsets[i + 1] || r->offsets[i + 1] > r->data_len)
		return -EIO;
	*data = r->data ? r->data + r->offsets[i] : (const void *)"";
	*len = (size_t)(r->offsets[i + 1] - r->offsets[i]);
	if (shape)
		*shape = r->shapes ? r->shapes + i * r->ndim : NULL;
	return 0;
}

void tfs_client_rows_close(struct tfs_client_rows *r)
{
	for (int i = 0; i < 3; i++)
		if (r->map_[i])
			munmap(r->map_[i], r->len_[i]);
	memset(r, 0, sizeof(*r));
}
