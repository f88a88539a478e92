/* SPDX-License-Identifier: MIT */
/* import_rows: sources that come a row at a time: a text file (a row a line, a text column) and
 * a directory of .npy files (a row each, sorted by name: a fixed column when every file has one
 * shape, else a ragged one). Scanned whole before anything is written. */
#include "import_rows.h"
#include "source.h"
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int tfs_import_map(struct tfs_source *src, const uint8_t **data, size_t *len)
{
	const char *path = tfs_source_path(src);
	const int fd = tfs_source_fd(src);
	struct stat sb;
	void *map;

	*data = NULL;
	*len = 0;
	if (fstat(fd, &sb) < 0) {
		const int rc = -errno;

		tfs_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	if (!S_ISREG(sb.st_mode)) {
		tfs_err("%s: not a regular file", path);
		return -EINVAL;
	}
	if (tfs_source_size(src) == 0)
		return 0;
	map = mmap(NULL, (size_t)tfs_source_size(src), PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED) {
		const int rc = -errno;

		tfs_err("%s: %s", path, strerror(-rc));
		return rc;
	}
	*data = map;
	*len = (size_t)tfs_source_size(src);
	madvise(map, *len, MADV_SEQUENTIAL);
	return 0;
}

int tfs_import_map_source(const char *path, unsigned flags, struct tfs_source **src,
			  const uint8_t **data, size_t *len)
{
	int rc = tfs_source_open(path, flags, src);

	*data = NULL;
	*len = 0;
	if (rc)
		return rc;
	rc = tfs_import_map(*src, data, len);
	if (rc) {
		tfs_source_close(*src);
		*src = NULL;
	}
	return rc;
}

int tfs_import_map_file(const char *path, const uint8_t **data, size_t *len)
{
	struct tfs_source *src;
	int rc = tfs_import_map_source(path, 0, &src, data, len);

	if (rc)
		return rc;
	rc = tfs_source_verify(src); /* all of it there, and checked */
	if (rc && *data) {
		munmap((void *)*data, *len);
		*data = NULL;
		*len = 0;
	}
	tfs_source_close(src); /* the mapping keeps the file */
	return rc;
}

/* The next line of [*p, end): its start and length without the newline (or a CRLF's \r). */
static const uint8_t *next_line(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *line = *p, *nl = memchr(line, '\n', (size_t)(end - line));
	const uint8_t *stop = nl ? nl : end;

	*p = nl ? nl + 1 : end;
	if (stop > line && stop[-1] == '\r')
		stop--;
	*len = (size_t)(stop - line);
	return line;
}

static int scan_text(const struct tfs_import_src *src, struct tfs_rows_scan *sc)
{
	const uint8_t *data, *p, *end, *done;
	size_t len;
	int rc = tfs_import_map_file(src->path, &data, &len);

	if (rc)
		return rc;
	sc->text = data;
	sc->text_len = len;
	sc->kind = TFS_COL_TEXT;
	tfs_dtype_parse("|u1", &sc->dtype, &(int){ 0 }, NULL, 0);
	for (p = done = data, end = data + len; p < end;) {
		size_t n;
		const uint8_t *line = next_line(&p, end, &n);

		tfs_spool_map_done(&done, line);

		sc->rows++;
		sc->bytes += n;
		if (!tfs_utf8_valid(line, n)) {
			tfs_err("%s: line %" PRIu64
				" is not valid UTF-8; a text column holds UTF-8 "
				"(import bytes as a .npy directory instead)",
				src->path, sc->rows);
			rc = -EINVAL;
			break;
		}
	}
	return rc;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .npy files of a directory, sorted by name. */
static int list_npy(const char *dir, struct tfs_rows_scan *sc)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t cap = 0;
	int rc = 0;

	if (!d) {
		rc = -errno;
		tfs_err("%s: %s", dir, strerror(errno));
		return rc;
	}
	while (!rc && (de = readdir(d))) {
		size_t n = strlen(de->d_name);

		if (n <= 4 || strcmp(de->d_name + n - 4, ".npy") || de->d_name[0] == '.')
			continue;
		rc = TFS_GROW(sc->files, &cap, sc->nfiles + 1);
		if (rc)
			break;
		if (asprintf(&sc->files[sc->nfiles], "%s/%s", dir, de->d_name) < 0)
			rc = -ENOMEM;
		else
			sc->nfiles++;
	}
	closedir(d);
	if (!rc && sc->nfiles)
		qsort(sc->files, sc->nfiles, sizeof(*sc->files), by_name);
	return rc;
}

static int open_npy(const char *path, struct tfs_npy_info *info)
{
	char err[256];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		tfs_err("%s: %s", path, strerror(errno));
		return -errno;
	}
	if (tfs_npy_read_header(fd, info, err, sizeof(err))) {
		tfs_err("%s: %s", path, err);
		close(fd);
		return -EINVAL;
	}
	if (info->fortran_order && info->ndim > 1) {
		tfs_err("%s: Fortran-ordered arrays are not taken from a directory; save it in C "
			"order (np.ascontiguousarray)",
			path);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

/* Element i of a little-endian integer array of dtype dt, widened (-1 for a negative one). */
static int64_t int_at(const uint8_t *p, const struct tfs_dtype *dt, uint64_t i)
{
	uint64_t u = 0;

	memcpy(&u, p + i * dt->itemsize, dt->itemsize);
	if (dt->kind == 'i' && dt->itemsize < 8 && (u >> (8 * dt->itemsize - 1)) & 1)
		return -1;
	return dt->kind == 'i' && (int64_t)u < 0 ? -1 : (int64_t)(u > INT64_MAX ? INT64_MAX : u);
}

/* Read one row file's data (byte-swapped to little-endian) into row. */
static int read_row(const char *path, struct tfs_buf *row, struct tfs_npy_info *info)
{
	uint64_t bytes;
	int rc, fd = open_npy(path, info);

	if (fd < 0)
		return fd;
	bytes = info->dtype.itemsize;
	for (unsigned d = 0; d < info->ndim; d++)
		bytes *= info->shape[d];
	row->len = 0;
	rc = tfs_buf_reserve(row, (size_t)bytes);
	if (!rc)
		rc = tfs_pread_full(fd, row->data, (size_t)bytes, info->data_offset);
	close(fd);
	if (rc) {
		tfs_err("%s: %s", path,
			rc == -EIO ? "file is shorter than its NPY header says" : strerror(-rc));
		return rc;
	}
	row->len = (size_t)bytes;
	if (info->big_endian)
		tfs_dtype_swap(&info->dtype, row->data, (size_t)bytes);
	return 0;
}

/* A token directory: 1-D integer rows whose ids all fit uint32, narrowed to uint16 when they
 * fit that; read through once for the ids' range. */
static int scan_tokens(const struct tfs_import_src *src, struct tfs_rows_scan *sc)
{
	struct tfs_buf row = { 0 };
	int64_t top = 0;
	char err[64];
	int big, rc = 0;

	if (sc->ndim != 1 || (sc->dtype.kind != 'i' && sc->dtype.kind != 'u')) {
		tfs_err("%s: token documents are 1-D integer arrays (%s has dtype %s, %u "
			"dimensions)",
			src->path, sc->files[0], sc->dtype.descr, sc->ndim);
		return -EINVAL;
	}
	for (size_t i = 0; !rc && i < sc->nfiles; i++) {
		struct tfs_npy_info info;

		rc = read_row(sc->files[i], &row, &info);
		for (uint64_t k = 0; !rc && k < info.shape[0]; k++) {
			const int64_t id = int_at(row.data, &info.dtype, k);

			if (id < 0 || (uint64_t)id > UINT32_MAX) {
				tfs_err("%s: element %" PRIu64 " is not a token id (0 to 2^32 - 1)",
					sc->files[i], k);
				rc = -EINVAL;
			}
			top = id > top ? id : top;
		}
	}
	tfs_buf_free(&row);
	if (rc)
		return rc;
	sc->from = sc->dtype;
	tfs_dtype_parse(top <= UINT16_MAX ? "<u2" : "<u4", &sc->dtype, &big, err, sizeof(err));
	sc->narrow = strcmp(sc->from.descr, sc->dtype.descr) != 0;
	sc->kind = TFS_COL_RAGGED; /* documents: rows of their own length, even all alike */
	sc->bytes = sc->bytes / sc->from.itemsize * sc->dtype.itemsize;
	return 0;
}

static int scan_npy_dir(const struct tfs_import_src *src, struct tfs_rows_scan *sc)
{
	int rc = list_npy(src->path, sc);

	if (rc)
		return rc;
	sc->kind = TFS_COL_FIXED;
	for (size_t i = 0; i < sc->nfiles; i++) {
		struct tfs_npy_info info;
		uint64_t bytes = 0;
		int fd = open_npy(sc->files[i], &info);

		if (fd < 0)
			return fd;
		close(fd);
		if (i == 0) {
			sc->dtype = info.dtype;
			sc->ndim = info.ndim;
			memcpy(sc->shape, info.shape, sizeof(sc->shape));
		} else if (strcmp(info.dtype.descr, sc->dtype.descr) || info.ndim != sc->ndim) {
			tfs_err("%s: dtype %s, %u dimensions; %s has %s, %u: a column's rows share "
				"one dtype and rank",
				sc->files[i], info.dtype.descr, info.ndim, sc->files[0],
				sc->dtype.descr, sc->ndim);
			return -EINVAL;
		} else if (memcmp(info.shape, sc->shape, sc->ndim * sizeof(*sc->shape))) {
			sc->kind = TFS_COL_RAGGED; /* shapes differ: rows of any shape */
		}
		bytes = info.dtype.itemsize;
		for (unsigned d = 0; d < info.ndim; d++)
			bytes *= info.shape[d];
		sc->bytes += bytes;
		sc->rows++;
	}
	if (!sc->nfiles) {
		tfs_err("%s: no .npy files", src->path);
		return -EINVAL;
	}
	return src->tokens ? scan_tokens(src, sc) : 0;
}

int tfs_rows_scan(const struct tfs_import_src *src, struct tfs_rows_scan *sc)
{
	memset(sc, 0, sizeof(*sc));
	switch (src->form) {
	case TFS_SRC_TEXT:
		return scan_text(src, sc);
	case TFS_SRC_NPY_DIR:
		return scan_npy_dir(src, sc);
	default:
		return -EINVAL;
	}
}

static int write_text(const struct tfs_rows_scan *sc, struct tfs_rowcol *w,
		      struct tfs_progress *progress)
{
	const uint8_t *p, *end, *done;
	int rc = 0;

	for (p = done = sc->text, end = sc->text + sc->text_len; !rc && p < end;) {
		size_t n;
		const uint8_t *line = next_line(&p, end, &n);

		tfs_spool_map_done(&done, line);
		rc = tfs_rowcol_add(w, line, n, NULL);
		tfs_progress_add(progress, n, 1);
	}
	return rc;
}

static int write_npy_dir(const struct tfs_rows_scan *sc, struct tfs_rowcol *w,
			 struct tfs_progress *progress)
{
	struct tfs_buf row = { 0 }, ids = { 0 };
	int rc = 0;

	for (size_t i = 0; !rc && i < sc->nfiles; i++) {
		struct tfs_npy_info info;
		const struct tfs_buf *out = &row;

		rc = read_row(sc->files[i], &row, &info);
		if (!rc && sc->narrow) { /* ids checked by the scan */
			ids.len = 0;
			rc = tfs_buf_reserve(&ids, (size_t)(info.shape[0] * sc->dtype.itemsize));
			for (uint64_t k = 0; !rc && k < info.shape[0]; k++) {
				const uint64_t id = (uint64_t)int_at(row.data, &info.dtype, k);

				memcpy(ids.data + k * sc->dtype.itemsize, &id, sc->dtype.itemsize);
			}
			ids.len = (size_t)(info.shape[0] * sc->dtype.itemsize);
			out = &ids;
		}
		if (!rc)
			rc = tfs_rowcol_add(w, out->data, out->len, info.shape);
		tfs_progress_add(progress, out->len, 1);
	}
	tfs_buf_free(&row);
	tfs_buf_free(&ids);
	return rc;
}

int tfs_rows_write(const struct tfs_import_src *src, const struct tfs_rows_scan *sc,
		   struct tfs_rowcol *w, struct tfs_progress *progress)
{
	int rc = src->form == TFS_SRC_TEXT ? write_text(sc, w, progress)
					   : write_npy_dir(sc, w, progress);

	return rc ? rc : tfs_rowcol_finish(w);
}

void tfs_rows_scan_free(struct tfs_rows_scan *sc)
{
	for (size_t i = 0; i < sc->nfiles; i++)
		free(sc->files[i]);
	free(sc->files);
	if (sc->text)
		munmap((void *)sc->text, sc->text_len);
	memset(sc, 0, sizeof(*sc));
}
