/* SPDX-License-Identifier: MIT */
/* source: what `tensorfs import` reads its sources from: a local path, or an object or a prefix
 * under a URL the lake stores read (s3://[REMOTE@]BUCKET/KEY, http(s)://HOST/PATH), so that a
 * dataset on object storage converts without being copied to a local disk first. */
#ifndef TFS_SOURCE_H
#define TFS_SOURCE_H

#include "store.h"

/* Whether path names an object through a store (s3://, http://, https://), not a local file. */
int tfs_source_is_url(const char *path);

/* A file source being read. A local file is opened read-only. The object at a URL is fetched
 * as ranged GETs of the [http] part size, as many at once as its `parallel` setting says, into
 * an unnamed file: in memory (a memfd) for an object of up to 64 MiB, else an unlinked file in
 * $TMPDIR (default /var/tmp), its space reserved before the fetch, so that memory does not grow
 * with the source; in memory after all, with a warning, when no such file can be had. */
struct tfs_source;

/* A source its reader reads once, front to back, saying as it goes what it is done with
 * (tfs_source_release): a URL's object is then fetched at most a window ahead of that reader (4
 * times [http] parallel x part_size: 256 MiB by default), and the room of the bytes released is
 * given back, so that a spool file holds about the window however large the object, and $TMPDIR
 * needs room for that much, not for the object. */
#define TFS_SOURCE_ONCE 1u
/* A source read from its end first (a zip: its directory is there): the fetch brings its last
 * parts first, then the rest in order, so that its reader, waiting for each range it reads
 * (tfs_source_pread), begins before the fetch ends. Not with TFS_SOURCE_ONCE. */
#define TFS_SOURCE_TAIL_FIRST 2u

/* Open path, a URL's object fetched in the background from now on: read it with
 * tfs_source_pread, or wait for the bytes before reading its descriptor. flags: 0 or
 * TFS_SOURCE_ONCE or TFS_SOURCE_TAIL_FIRST. Returns 0 or -errno (logged, naming the source: no such
 * object, no room). */
int tfs_source_open(const char *path, unsigned flags, struct tfs_source **out);
/* The same for the object at key in store, which is the source's from now on (closed with it, on
 * failure too): for a store of the caller's own (a test's). tfs_source_again opens it again by
 * its URL. */
int tfs_source_open_in(struct tfs_store *store, const char *key, unsigned flags,
		       struct tfs_source **out);
/* The descriptor (seekable, mappable). Its bytes past those waited for may not be there yet. */
int tfs_source_fd(const struct tfs_source *src);
uint64_t tfs_source_size(const struct tfs_source *src);
const char *tfs_source_path(const struct tfs_source *src);
/* Wait until bytes [0, end) are in the descriptor (end past the size: all of them). Returns 0,
 * or the fetch's -errno when it failed before they came (logged where it failed). */
int tfs_source_wait(struct tfs_source *src, uint64_t end);
/* How many bytes from the start are there now (the size once all are). */
uint64_t tfs_source_ready(struct tfs_source *src);
/* len bytes at off, once they are there (those bytes, not all before them): 0, -EIO when the
 * source ends before off + len, or the fetch's -errno. */
int tfs_source_pread(struct tfs_source *src, void *buf, size_t len, uint64_t off);
/* A source read once: its bytes before upto will not be read again (a read of them fails with
 * -EIO). The fetch may go on past them, and their room is given back a part at a time. Nothing
 * for any other source. */
void tfs_source_release(struct tfs_source *src, uint64_t upto);
/* Whether every byte of src can still be read: none was given back (tfs_source_release). */
int tfs_source_whole(struct tfs_source *src);
/* A source read once that its reader must read again from its start, some of it given back
 * already: *src is replaced by a new fetch of the object (flags as tfs_source_open's: read once
 * again, or held whole), which must find the version the first one read (else -ESTALE, logged:
 * "changed while it was read"). *src is closed first, so that the two never hold room at
 * once: on failure it is NULL. */
int tfs_source_again(struct tfs_source **src, unsigned flags);
/* A source read once whose reader turns out to need all of it at once (an array in column
 * order): it is held whole from now on, as one opened without TFS_SOURCE_ONCE. 0, or -ENOSPC
 * (logged, saying what to set) when the spool file has no room for it. Before any release. */
int tfs_source_keep_all(struct tfs_source *src);
/* A URL's object whose reader is done with it, before what was read from it is kept (an import
 * committed): waits for the rest of the fetch and for the check of the bytes against the MD5
 * that S3 gives as the ETag of most objects (one not put in parts, nor encrypted with a KMS or
 * customer key), the bytes hashed in order as they arrive, where they come over plain HTTP (TLS
 * authenticates what it carries, and the hash costs a core's time). A range damaged on the way
 * passes every other test, and the MD5 is of the whole object: there is no telling which range
 * it was, so none is fetched again here (the import command runs a failed import again).
 * Returns 0 (also where nothing can be checked: a local file, an ETag that is not an MD5),
 * -EBADMSG (logged: "damaged on the way") or the fetch's -errno; from the moment the damage is
 * found, every read of src fails with -EBADMSG. NULL is fine. */
int tfs_source_verify(struct tfs_source *src);
/* Close src; a fetch still running is cancelled (its requests in flight end at once). */
void tfs_source_close(struct tfs_source *src);

/* A file source whole, as a readable, seekable, mappable descriptor at offset 0: the file
 * itself, or a URL's object once every byte is there. Returns the descriptor or -errno (logged,
 * naming the source). */
int tfs_source_open_file(const char *path);

/* A tree source (a directory, or a prefix under a URL) as a store rooted there: list it with
 * tfs_store_list, read its files with tfs_store_get. A local directory is opened through the
 * file backend. */
int tfs_source_open_tree(const char *path, struct tfs_store **out);

#endif
