/* SPDX-License-Identifier: MIT */
/* archread: archives read through libarchive for the importers (import_npz.c, import_wds.c):
 * opened from a path or URL, their members' headers in turn, a member's bytes. */
#ifndef TFS_ARCHREAD_H
#define TFS_ARCHREAD_H

#include <stddef.h>
#include <stdint.h>

#include <archive.h>

#include "util.h"

/* Columns an archive's import makes at most. */
#define TFS_ARCHIVE_MAX_COLS 64

enum tfs_archive_kind { TFS_ARCHIVE_ZIP, TFS_ARCHIVE_TAR };

/* A zip is read through its central directory (libarchive's seekable reader), so a file cut
 * short, or whose directory does not match its members, is refused before anything is
 * imported; a tar front to back, a header at a time (tfs_archive_next tells its end from damage).
 * keep_fd: NULL, or where the descriptor of the file (a URL's object: its copy in memory) is
 * left open for the caller to close. */
struct archive *tfs_archive_open(const char *path, enum tfs_archive_kind kind, int *keep_fd);
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
