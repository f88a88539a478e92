/* SPDX-License-Identifier: MIT */
/* spool: where an import holds bytes too large for memory: unlinked files in $TMPDIR (default
 * /var/tmp, on disk where /tmp may be a tmpfs), and a growing buffer that moves into one once it
 * passes a size, so that what an import holds in memory does not grow with its input (the page
 * cache may write a spool file's pages out and drop them). */
#ifndef TFS_SPOOL_H
#define TFS_SPOOL_H

#include <stddef.h>
#include <stdint.h>

/* An unlinked file in the spool directory, opened read-write, `reserve` bytes of it allocated
 * (0: none), so that a disk without room says so at once. The descriptor, or -errno with the
 * reason (naming the directory) in why. */
int tfs_spool_file(uint64_t reserve, char *why, size_t why_cap);

/* A descriptor to hold an object of `size` bytes, `held` of them at once (less than size for an
 * object read once, whose bytes read are given back): a memfd for one of up to 64 MiB, a spool
 * file for a larger one (its *held bytes reserved), or a memfd after all (said once, naming
 * url) when no spool file can be had and *held is at most tfs_spool_memory_max(). *held becomes
 * size where the room of bytes read cannot be given back. The descriptor, sized, or -errno
 * (logged). */
int tfs_spool_hold(const char *url, uint64_t size, uint64_t *held, int *in_memory);

/* A mapped file read front to back: the pages from the one *done lies in (where the reading
 * began, at first) up to the last page boundary at or before `to` were read and leave the
 * process's memory (MADV_DONTNEED: a file's clean pages stay in the page cache, and are mapped
 * again if touched), and *done moves there; nothing until TFS_SPOOL_MAP_STEP bytes have
 * gathered, so that a reader may call it at every line. What an import holds is then bounded by
 * its buffers, not its input's size. */
#define TFS_SPOOL_MAP_STEP (8u << 20)
void tfs_spool_map_done(const uint8_t **done, const uint8_t *to);

/* What memory holds, at most, of bytes that belong in a spool file when none can be made: a
 * quarter of it, so as not to crowd out the work they are for. */
uint64_t tfs_spool_memory_max(void);

/* Bytes appended in order and then read: in memory up to `hold` bytes, in a spool file past
 * that (in memory after all, with one warning a process, when no spool file can be made, up to a
 * quarter of memory: past it, -ENOSPC). A zeroed one holds nothing, and may be freed. */
struct tfs_spool {
	uint64_t hold;
	uint64_t len;	     /* appended so far */
	uint8_t *mem;	     /* while in memory */
	size_t cap;	     /* mem's room */
	int in_file;	     /* the bytes are in fd, not mem */
	int no_file;	     /* none could be made: in memory, up to a quarter of it */
	int fd;		     /* the spool file, when in_file */
	const uint8_t *map;  /* the file mapped, once viewed */
	const uint8_t *done; /* tfs_spool_done's mark in map */
	uint8_t *scratch;    /* tfs_spool_room's, while in a file */
	size_t scratch_cap;
};

void tfs_spool_init(struct tfs_spool *sp, uint64_t hold);
/* Append n bytes: 0, -ENOMEM, or a spool file's write error. */
int tfs_spool_append(struct tfs_spool *sp, const void *p, size_t n);
/* Append n bytes written in place: *p is room for them (in memory, or a scratch buffer that
 * tfs_spool_commit writes out); then tfs_spool_commit(sp, made) with made <= n. */
int tfs_spool_room(struct tfs_spool *sp, size_t n, void **p);
int tfs_spool_commit(struct tfs_spool *sp, size_t made);
/* Every byte appended, to read from here on (memory, or the file mapped read-only); NULL for
 * none. 0 or -errno. */
int tfs_spool_view(struct tfs_spool *sp, const uint8_t **data);
/* The viewed bytes before `to` were read: a mapped file's pages leave the process's memory a few
 * megabytes at a time (tfs_spool_map_done); memory is kept. */
void tfs_spool_done(struct tfs_spool *sp, const uint8_t *to);
void tfs_spool_free(struct tfs_spool *sp);

#endif
