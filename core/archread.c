/* SPDX-License-Identifier: MIT */
/* archread: archives read through libarchive for the importers: opened from a path or URL,
 * their members' headers in turn, a member's bytes. */
#include "archread.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <archive_entry.h>

#include "source.h"
#include "util.h"

struct archive *tfs_archive_open(const char *path, enum tfs_archive_kind kind, int *keep_fd)
{
	struct archive *a = archive_read_new();
	char proc[64];
	int fd;

	if (!a)
		return NULL;
	if (kind == TFS_ARCHIVE_ZIP) {
		archive_read_support_format_zip_seekable(a);
	} else {
		archive_read_support_format_tar(a);
		archive_read_support_filter_all(a);
	}
	/* A URL's object is fetched into memory; libarchive reopens that through /proc. */
	fd = tfs_source_open_file(path);
	if (fd >= 0)
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (fd < 0 || archive_read_open_filename(a, proc, 1 << 16) != ARCHIVE_OK) {
		if (fd >= 0)
			tfs_err("%s: %s%s", path, archive_error_string(a),
				kind == TFS_ARCHIVE_ZIP
					? " (not a zip file, or cut short: no central directory)"
					: "");
		archive_read_free(a);
		a = NULL;
	}
	if (a && fd >= 0 && keep_fd)
		*keep_fd = fd;
	else if (fd >= 0)
		close(fd);
	return a;
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
