/* SPDX-License-Identifier: MIT */
/* archread: archives read through libarchive for the importers (import_npz.c, import_wds.c):
 * opened from a path or URL, their members' headers in turn, a member's bytes. */
#ifndef TFS_ARCHREAD_H
#define TFS_ARCHREAD_H

#include <stddef.h>
#include <stdint.h>

#include <archive.h>

#include "source.h"
#include "util.h"

/* Columns an archive's import makes at most. */
#define TFS_ARCHIVE_MAX_COLS 64

enum tfs_archive_kind { TFS_ARCHIVE_ZIP, TFS_ARCHIVE_TAR };

/* An archive being read, from a source (source.h): a URL's object is read as it arrives, each
 * read waiting for its bytes, so that a tar's import begins before its fetch ends. */
struct tfs_archive {
	struct archive *a;
	struct tfs_source *src;
	uint64_t off; /* where the next read of src begins */
	uint8_t *buf; /* TFS_ARCHIVE_READ bytes: what libarchive is handed */
	/* Set when a read of src failed (a fetch that failed, a disk's error): libarchive then
	 * reports damage, which this tells apart from damage in the archive's bytes. */
	int err;
	int own; /* src is closed with the archive (opened by path) */
	/* The last reading of a source opened TFS_SOURCE_ONCE: what libarchive was handed a read
	 * before is released (tfs_source_release), so that the source holds a window of it, not
	 * all of it. Set by the caller before the first read. */
	int once;
};

/* A zip is read through its central directory (libarchive's seekable reader, at the file's
 * end: a URL's end is fetched first, then its members as they arrive), so a file cut short, or
 * whose directory does not match its members, is refused before anything is imported; a tar
 * front to back, a header at a time (tfs_archive_next tells its end from damage). 0 and *out,
 * or (logged) -EINVAL for bytes that are no such archive, -ENOMEM, or the source's own error
 * where its bytes could not be read: the open's or the fetch's -errno, -EBADMSG for a URL's
 * found damaged on the way (tfs_source_verify), which an import runs again. */
int tfs_archive_open(const char *path, enum tfs_archive_kind kind, struct tfs_archive **out);
/* The same from a source opened already (its fetch perhaps under way), read from its start; the
 * caller closes the source after the archive, so that several readings share one fetch. */
int tfs_archive_open_from(struct tfs_source *src, enum tfs_archive_kind kind,
			  struct tfs_archive **out);
/* Free the archive, and close its source when it was opened by path (a fetch still running is
 * cancelled). */
void tfs_archive_close(struct tfs_archive *ar);
/* The next member's header: 1, or 0 at the archive's proper end, or -EIO when the archive is
 * damaged or cut short there (logged). */
int tfs_archive_next(struct archive *a, const char *path, struct archive_entry **e);
/* The rest of the current member into out, read straight into its room (kept from one member
 * to the next: a pipeline's items are reused). */
int tfs_archive_read_member(struct archive *a, const char *path, struct tfs_buf *out);
/* Up to n bytes of the current member into p: fewer only at its end. The bytes read, or -1 with
 * the archive's error logged. */
la_ssize_t tfs_archive_read_upto(struct archive *a, const char *what, uint8_t *p, size_t n);

#endif
