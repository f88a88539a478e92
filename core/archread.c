/* SPDX-License-Identifier: MIT */
/* archread: archives read through libarchive for the importers: opened from a path or URL,
 * their members' headers in turn, a member's bytes. */
#include "archread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive_entry.h>

#include "source.h"
#include "util.h"

#define TFS_ARCHIVE_READ (1u << 20)

static la_ssize_t ar_read(struct archive *a, void *arg, const void **out)
{
	struct tfs_archive *ar = arg;
	const uint64_t size = tfs_source_size(ar->src);
	const size_t len =
		(size_t)(size - ar->off < TFS_ARCHIVE_READ ? size - ar->off : TFS_ARCHIVE_READ);
	int rc;

	*out = ar->buf;
	if (!len)
		return 0;
	/* libarchive is done with the buffer it is handed again, and with the bytes before it;
	 * a read's worth more is kept, for a tar's end-of-archive blocks (read once it ends). */
	if (ar->once && ar->off > TFS_ARCHIVE_READ)
		tfs_source_release(ar->src, ar->off - TFS_ARCHIVE_READ);
	rc = tfs_source_pread(ar->src, ar->buf, len, ar->off);
	if (rc) {
		ar->err = rc;
		archive_set_error(a, -rc, "%s", strerror(-rc));
		return ARCHIVE_FATAL;
	}
	ar->off += len;
	return (la_ssize_t)len;
}

/* Skipped bytes are never read, so never waited for. */
static la_int64_t ar_skip(struct archive *a, void *arg, la_int64_t n)
{
	struct tfs_archive *ar = arg;
	const uint64_t left = tfs_source_size(ar->src) - ar->off;

	(void)a;
	if (n < 0)
		return 0;
	if ((uint64_t)n > left)
		n = (la_int64_t)left;
	ar->off += (uint64_t)n;
	return n;
}

static la_int64_t ar_seek(struct archive *a, void *arg, la_int64_t off, int whence)
{
	struct tfs_archive *ar = arg;
	const int64_t base = whence == SEEK_SET	  ? 0
			     : whence == SEEK_CUR ? (int64_t)ar->off
						  : (int64_t)tfs_source_size(ar->src);

	if (base + off < 0 || (uint64_t)(base + off) > tfs_source_size(ar->src)) {
		archive_set_error(a, EINVAL, "seek out of the file");
		return ARCHIVE_FATAL;
	}
	ar->off = (uint64_t)(base + off);
	return (la_int64_t)ar->off;
}

int tfs_archive_open_from(struct tfs_source *src, enum tfs_archive_kind kind,
			  struct tfs_archive **out)
{
	const char *path = tfs_source_path(src);
	struct tfs_archive *ar = calloc(1, sizeof(*ar));
	int rc = -ENOMEM;

	*out = NULL;
	if (!ar) {
		tfs_err("%s: out of memory", path);
		return rc;
	}
	ar->src = src;
	if (!(ar->buf = malloc(TFS_ARCHIVE_READ)) || !(ar->a = archive_read_new())) {
		tfs_err("%s: out of memory", path);
		goto fail;
	}
	if (kind == TFS_ARCHIVE_ZIP) {
		archive_read_support_format_zip_seekable(ar->a);
	} else {
		archive_read_support_format_tar(ar->a);
		archive_read_support_filter_all(ar->a);
	}
	archive_read_set_read_callback(ar->a, ar_read);
	archive_read_set_skip_callback(ar->a, ar_skip);
	archive_read_set_seek_callback(ar->a, ar_seek);
	archive_read_set_callback_data(ar->a, ar);
	if (archive_read_open1(ar->a) != ARCHIVE_OK) {
		tfs_err("%s: %s%s", path, archive_error_string(ar->a),
			kind == TFS_ARCHIVE_ZIP
				? " (not a zip file, or cut short: no central directory)"
				: "");
		/* Bytes that could not be read (a URL's found damaged on the way among them)
		 * say nothing of the archive. */
		rc = ar->err ? ar->err : -EINVAL;
		goto fail;
	}
	*out = ar;
	return 0;
fail:
	tfs_archive_close(ar);
	return rc;
}

int tfs_archive_open(const char *path, enum tfs_archive_kind kind, struct tfs_archive **out)
{
	struct tfs_source *src;
	int rc;

	/* A zip's directory is at its end: fetched first, so that its members are read as
	 * they arrive. */
	*out = NULL;
	rc = tfs_source_open(path, kind == TFS_ARCHIVE_ZIP ? TFS_SOURCE_TAIL_FIRST : 0, &src);
	if (rc)
		return rc;
	rc = tfs_archive_open_from(src, kind, out);
	if (rc)
		tfs_source_close(src);
	else
		(*out)->own = 1;
	return rc;
}

void tfs_archive_close(struct tfs_archive *ar)
{
	if (!ar)
		return;
	if (ar->a)
		archive_read_free(ar->a);
	if (ar->own)
		tfs_source_close(ar->src);
	free(ar->buf);
	free(ar);
}

int tfs_archive_next(struct archive *a, const char *path, struct archive_entry **e)
{
	const int r = archive_read_next_header(a, e);

	if (r == ARCHIVE_OK)
		return 1;
	if (r == ARCHIVE_EOF)
		return 0;
	tfs_err("%s: damaged or cut short: %s", path,
		archive_error_string(a) ? archive_error_string(a) : "no reason given");
	return -EIO;
}

int tfs_archive_read_member(struct archive *a, const char *path, struct tfs_buf *out)
{
	la_ssize_t n;

	out->len = 0;
	do {
		if (tfs_buf_reserve(out, 1 << 16))
			return -ENOMEM;
		n = archive_read_data(a, out->data + out->len, out->cap - out->len - 1);
		if (n > 0)
			out->len += (size_t)n;
	} while (n > 0);
	if (n < 0) {
		tfs_err("%s: %s", path, archive_error_string(a));
		return -EIO;
	}
	return 0;
}

la_ssize_t tfs_archive_read_upto(struct archive *a, const char *what, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		const la_ssize_t r = archive_read_data(a, p + got, n - got);

		if (r < 0) {
			tfs_err("%s: %s", what, archive_error_string(a));
			return -1;
		}
		if (!r)
			break;
		got += (size_t)r;
	}
	return (la_ssize_t)got;
}
