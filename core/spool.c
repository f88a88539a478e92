/* SPDX-License-Identifier: MIT */
/* spool: unlinked files in $TMPDIR for bytes too large for memory, a buffer that moves into one
 * past a size, and the descriptor a fetched object is held in. */
#include "spool.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "util.h"

/* $TMPDIR, else /var/tmp (on disk where /tmp may be a tmpfs, which is memory). */
static const char *spool_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/var/tmp";
}

/* Objects up to this size are held in memory (a memfd); larger ones in a spool file. */
#define HOLD_IN_MEMORY (64ull << 20)

int tfs_spool_file(uint64_t reserve, char *why, size_t why_cap)
{
	const char *dir = spool_dir();
	struct statvfs vfs;
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), rc;

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		/* A file system without O_TMPFILE: a named file, unlinked at once. */
		char path[PATH_MAX];

		if (snprintf(path, sizeof(path), "%s/tensorfs-source-XXXXXX", dir) >=
		    (int)sizeof(path)) {
			snprintf(why, why_cap, "%s: path too long", dir);
			return -ENAMETOOLONG;
		}
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0) {
		rc = -errno;
		snprintf(why, why_cap, "%s: %s", dir, strerror(errno));
		return rc;
	}
	/* Asked first, so that a file larger than the room left is refused without filling the
	 * disk up to it for a moment (fallocate allocates what it can before it fails). */
	if (reserve && !fstatvfs(fd, &vfs) && reserve > (uint64_t)vfs.f_bavail * vfs.f_frsize)
		rc = ENOSPC;
	else
		rc = reserve ? posix_fallocate(fd, 0, (off_t)reserve) : 0;
	if (rc) {
		snprintf(why, why_cap, "%s: no room for %llu bytes: %s", dir,
			 (unsigned long long)reserve, strerror(rc));
		close(fd);
		return -rc;
	}
	return fd;
}

void tfs_spool_map_done(const uint8_t **done, const uint8_t *to)
{
	const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	const uint8_t *start = (const uint8_t *)((uintptr_t)*done / page * page);
	const uint8_t *end = (const uint8_t *)((uintptr_t)to / page * page);

	if (end < start || (size_t)(end - start) < TFS_SPOOL_MAP_STEP)
		return;
	madvise((void *)start, (size_t)(end - start), MADV_DONTNEED);
	*done = end;
}

void tfs_spool_init(struct tfs_spool *sp, uint64_t hold)
{
	memset(sp, 0, sizeof(*sp));
	sp->hold = hold;
}

uint64_t tfs_spool_memory_max(void)
{
	const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4 : UINT64_MAX;
}

/* Move what is in memory into a spool file; with none to be had, stay in memory up to a quarter
 * of it (said once a process: every buffer after it fails the same way). */
static void to_file(struct tfs_spool *sp)
{
	static atomic_int warned;
	char why[PATH_MAX + 128];
	int fd = tfs_spool_file(0, why, sizeof(why)), rc = fd < 0 ? fd : 0;

	if (!rc && sp->len && (rc = tfs_pwrite_full(fd, sp->mem, (size_t)sp->len, 0)) != 0) {
		snprintf(why, sizeof(why), "%s: %s", spool_dir(), strerror(-rc));
		close(fd);
	}
	if (rc) {
		if (!atomic_exchange(&warned, 1))
			tfs_warn("cannot spool decoded data to disk (%s; set TMPDIR): holding it "
				 "in memory",
				 why);
		sp->no_file = 1;
		sp->hold = tfs_spool_memory_max();
		return;
	}
	free(sp->mem);
	sp->mem = NULL;
	sp->cap = 0;
	sp->fd = fd;
	sp->in_file = 1;
}

int tfs_spool_room(struct tfs_spool *sp, size_t n, void **p)
{
	assert(!sp->map);
	if (!sp->in_file && !sp->no_file && sp->len + n > sp->hold)
		to_file(sp);
	if (!sp->in_file && sp->len + n > sp->hold)
		return -ENOSPC; /* no spool file, and more than memory should hold */
	if (sp->in_file) {
		if (n > sp->scratch_cap) {
			uint8_t *g = realloc(sp->scratch, n);

			if (!g)
				return -ENOMEM;
			sp->scratch = g;
			sp->scratch_cap = n;
		}
		*p = sp->scratch;
		return 0;
	}
	if (sp->len + n > sp->cap || !sp->mem) { /* room for 0 bytes is somewhere too */
		const size_t cap = (size_t)(sp->len + n) * 2 + 4096;
		uint8_t *g = realloc(sp->mem, cap);

		if (!g)
			return -ENOMEM;
		sp->mem = g;
		sp->cap = cap;
	}
	*p = sp->mem + sp->len;
	return 0;
}

int tfs_spool_commit(struct tfs_spool *sp, size_t made)
{
	if (sp->in_file) {
		const int rc = tfs_pwrite_full(sp->fd, sp->scratch, made, sp->len);

		if (rc)
			return rc;
	}
	sp->len += made;
	return 0;
}

int tfs_spool_append(struct tfs_spool *sp, const void *p, size_t n)
{
	void *to;
	int rc = tfs_spool_room(sp, n, &to);

	if (rc)
		return rc;
	if (sp->in_file) /* straight to the file: no copy through the scratch buffer */
		rc = tfs_pwrite_full(sp->fd, p, n, sp->len);
	else
		memcpy(to, p, n);
	if (!rc)
		sp->len += n;
	return rc;
}

int tfs_spool_view(struct tfs_spool *sp, const uint8_t **data)
{
	void *m;

	if (!sp->in_file || !sp->len) {
		*data = sp->len ? sp->mem : NULL;
		return 0;
	}
	if (!sp->map) {
		m = mmap(NULL, (size_t)sp->len, PROT_READ, MAP_SHARED, sp->fd, 0);
		if (m == MAP_FAILED)
			return -errno;
		madvise(m, (size_t)sp->len, MADV_SEQUENTIAL);
		sp->map = sp->done = m;
	}
	*data = sp->map;
	return 0;
}

void tfs_spool_done(struct tfs_spool *sp, const uint8_t *to)
{
	if (sp->map)
		tfs_spool_map_done(&sp->done, to);
}

void tfs_spool_free(struct tfs_spool *sp)
{
	if (sp->map)
		munmap((void *)sp->map, (size_t)sp->len);
	if (sp->in_file)
		close(sp->fd);
	free(sp->mem);
	free(sp->scratch);
	tfs_spool_init(sp, sp->hold);
}

/* Whether fd's room can be given back a range at a time (a hole punched): tmpfs, memfds and the
 * usual disk file systems can. */
static int can_punch(int fd)
{
	return !fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096);
}

int tfs_spool_hold(const char *url, uint64_t size, uint64_t *held, int *in_memory)
{
	char why[PATH_MAX + 128];
	int fd;

	if (size > HOLD_IN_MEMORY) {
		fd = tfs_spool_file(*held, why, sizeof(why));
		if (fd >= 0 && *held < size && !can_punch(fd)) {
			close(fd); /* the whole object, then */
			*held = size;
			fd = tfs_spool_file(size, why, sizeof(why));
		}
		if (fd >= 0 && ftruncate(fd, (off_t)size) < 0) {
			snprintf(why, sizeof(why), "ftruncate: %s", strerror(errno));
			close(fd);
			fd = -1;
		}
		if (fd >= 0)
			return fd;
		/* Memory instead, for what it can hold without crowding out the import itself. */
		if (*held > tfs_spool_memory_max()) {
			tfs_err("%s: cannot spool its %llu bytes to disk (%s), and they are more "
				"than a quarter of memory: set TMPDIR to a directory with room",
				url, (unsigned long long)*held, why);
			return -ENOSPC;
		}
		tfs_warn("%s: cannot spool its %llu bytes to disk (%s; set TMPDIR): holding it in "
			 "memory",
			 url, (unsigned long long)*held, why);
	}
	*in_memory = 1;
	fd = memfd_create("tensorfs-source", MFD_CLOEXEC);
	if (fd < 0) {
		fd = -errno;
		tfs_err("%s: memfd_create: %s", url, strerror(errno));
	} else if (ftruncate(fd, (off_t)size) < 0) {
		const int err = errno;

		tfs_err("%s: cannot hold %llu bytes in memory: %s", url, (unsigned long long)size,
			strerror(err));
		close(fd);
		fd = -err;
	} else if (*held < size && !can_punch(fd)) {
		*held = size;
	}
	return fd;
}
