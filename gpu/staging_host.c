/* SPDX-License-Identifier: MIT */
/* staging_host: the host backend: a ring's slots live in one shared-memory file loaders map. */
#include "staging.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older C libraries lack the name */
#endif

#define DEFAULT_SHM_DIR "/dev/shm"

struct host {
	char *path; /* the ring's file: tensorfs-<tag>, or while kept tensorfs-<pid>-kept-<n> */
	char *dir;
	int fd; /* the file, for reserving its slots */
	uint8_t *map;
	uint64_t size, slot_bytes;
	uint64_t reserved;	   /* a bit a slot whose memory is reserved (atomic) */
	struct tfs_workpool *pool; /* a large batch's copy is split over it */
	unsigned last;		   /* the slot filled last (atomic) */
};

_Static_assert(TFS_STAGING_MAX_DEPTH <= 64, "struct host's reserved has a bit a slot");

static int host_probe(int device, char *err, size_t err_cap)
{
	(void)err;
	(void)err_cap;
	return device == TFS_STAGING_HOST ? 0 : -ENODEV;
}

/* Let one more user read the file, and nobody else: a POSIX ACL user entry, in the kernel's
 * xattr form (version 2, entries sorted by tag, little-endian). The loader gets read access
 * only, so it cannot truncate the file under the daemon's mapping. */
static int grant_read(int fd, uid_t uid)
{
	struct {
		uint16_t tag, perm;
		uint32_t id;
	} acl[5] = {
		{ 0x01, 6, UINT32_MAX },    /* ACL_USER_OBJ: rw */
		{ 0x02, 4, (uint32_t)uid }, /* ACL_USER: r */
		{ 0x04, 0, UINT32_MAX },    /* ACL_GROUP_OBJ */
		{ 0x10, 4, UINT32_MAX },    /* ACL_MASK: r */
		{ 0x20, 0, UINT32_MAX },    /* ACL_OTHER */
	};
	uint8_t buf[4 + sizeof(acl)];
	const uint32_t version = 2;

	memcpy(buf, &version, 4);
	memcpy(buf + 4, acl, sizeof(acl));
	return fsetxattr(fd, "system.posix_acl_access", buf, sizeof(buf), 0) ? -errno : 0;
}

/* dir/tensorfs-<name>, allocated; NULL when out of memory. name: a ring's tag, or a kept
 * ring's. */
static char *file_path(const char *dir, const char *name)
{
	char *p;

	return asprintf(&p, "%s/tensorfs-%s", dir, name) < 0 ? NULL : p;
}

/* 0 when fd's file system has bytes free (beside what fd holds), else ENOSPC; 0 too where it
 * cannot tell. */
static int room_for(int fd, uint64_t bytes)
{
	struct statvfs sv;

	if (fstatvfs(fd, &sv) || !sv.f_blocks)
		return 0;
	return (uint64_t)sv.f_bavail * sv.f_frsize < bytes ? ENOSPC : 0;
}

static const char *ring_tag(const struct tfs_staging_config *cfg)
{
	return cfg->tag ? cfg->tag : "ring";
}

static int host_create(const struct tfs_staging_config *cfg, uint64_t slot_bytes, void **out,
		       char *err, size_t err_cap)
{
	const char *dir = cfg->shm_dir ? cfg->shm_dir : DEFAULT_SHM_DIR;
	struct host *h = calloc(1, sizeof(*h));
	int fd = -1, rc;

	if (!h)
		return -ENOMEM;
	h->slot_bytes = slot_bytes;
	h->size = slot_bytes * cfg->depth;
	h->pool = cfg->pool;
	h->last = UINT32_MAX;
	h->dir = strdup(dir);
	h->path = file_path(dir, ring_tag(cfg));
	if (!h->dir || !h->path) {
		rc = -ENOMEM;
		goto out;
	}
	for (int tries = 0; tries < 2; tries++) {
		fd = open(h->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			break;
		/* Left by an earlier daemon that had our pid: ours to replace. */
		unlink(h->path);
	}
	if (fd < 0) {
		rc = -errno;
		snprintf(err, err_cap, "cannot create %s: %s", h->path, strerror(errno));
		goto out;
	}
	if (cfg->uid != geteuid() && cfg->uid != 0 && (rc = grant_read(fd, cfg->uid))) {
		snprintf(err, err_cap, "cannot let uid %u read %s (POSIX ACLs on %s: %s)",
			 (unsigned)cfg->uid, h->path, dir, strerror(-rc));
		rc = -EACCES;
		goto out;
	}
	/* A slot's memory is reserved when it is first filled (host_begin), not all of it here:
	 * reserving 6 slots of 256 images of 224x224 (231 MB) at once took the kernel 90 ms, which
	 * a stream's opening and so its first batch waited for. A file system without the room for
	 * them all fails here, as it did when all of it was reserved at once. */
	rc = room_for(fd, h->size);
	if (!rc)
		rc = ftruncate(fd, (off_t)h->size) ? errno : 0;
	if (rc) {
		snprintf(err, err_cap, "cannot reserve %" PRIu64 " MiB of shared memory in %s: %s",
			 h->size >> 20, dir, strerror(rc));
		rc = rc == ENOSPC ? -ENOMEM : -rc;
		goto out;
	}
	h->map = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h->map == MAP_FAILED) {
		h->map = NULL;
		rc = -errno;
		snprintf(err, err_cap, "cannot map %s: %s", h->path, strerror(errno));
		goto out;
	}
	h->fd = fd;
	rc = 0;
out:
	if (rc) {
		if (fd >= 0) {
			close(fd);
			unlink(h->path);
		}
		free(h->path);
		free(h->dir);
		free(h);
		return rc;
	}
	*out = h;
	return 0;
}

static void host_destroy(void *b)
{
	struct host *h = b;

	if (!h)
		return;
	/* Loaders that still map the file keep its pages until they unmap; the name goes now. */
	if (unlink(h->path))
		tfs_warn("staging: cannot remove %s: %s", h->path, strerror(errno));
	munmap(h->map, h->size);
	close(h->fd);
	free(h->path);
	free(h->dir);
	free(h);
}

/* The file renamed dir/tensorfs-<name> (a file of that name, left by an earlier daemon that had
 * our pid, is replaced). */
static int move_file(struct host *h, const char *name, char *err, size_t err_cap)
{
	char *to = file_path(h->dir, name);

	if (!to)
		return -ENOMEM;
	if (rename(h->path, to)) {
		const int e = errno;

		snprintf(err, err_cap, "cannot rename %s to %s: %s", h->path, to, strerror(e));
		free(to);
		return -e;
	}
	free(h->path);
	h->path = to;
	return 0;
}

/* Kept: the stream's name goes, as when the file is removed; loaders that still map it keep
 * their mapping (and would see the next stream's batches: the same user's). */
static int host_keep(void *b)
{
	static unsigned n; /* atomic */
	char name[64], err[256];
	int rc;

	snprintf(name, sizeof(name), "%ld-kept-%u", (long)getpid(),
		 __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED));
	rc = move_file(b, name, err, sizeof(err));
	if (rc)
		tfs_warn("staging: %s", err);
	return rc;
}

static int host_reuse(void *b, const struct tfs_staging_config *cfg, char *err, size_t err_cap)
{
	struct host *h = b;

	h->pool = cfg->pool;
	h->last = UINT32_MAX;
	return move_file(h, ring_tag(cfg), err, err_cap);
}

/* The slot's memory, reserved at its first fill (a slot is filled by one fill at a time): a
 * full tmpfs is then this batch's error, where a gather into a page it cannot back would kill
 * the daemon with SIGBUS. Its pages are then mapped here at once: the gather would otherwise take
 * a fault a 4 KiB page as it first writes each (tmpfs gives no huge pages unless its mount or
 * the system says so), 56,000 of them for 6 slots of 256 images of 224x224, a fifth of the
 * daemon's time in a cold epoch of a few thousand images on the 2-core machine. */
static int host_begin(void *b, unsigned slot, uint8_t **mem)
{
	struct host *h = b;
	const uint64_t bit = 1ull << slot, off = (uint64_t)slot * h->slot_bytes;
	int rc;

	*mem = h->map + off;
	if (__atomic_load_n(&h->reserved, __ATOMIC_ACQUIRE) & bit)
		return 0;
	rc = posix_fallocate(h->fd, (off_t)off, (off_t)h->slot_bytes);
	if (rc && rc != EOPNOTSUPP && rc != EINVAL) { /* those: a file system that cannot say */
		char size[32];

		tfs_warn("staging: cannot reserve %s of shared memory in %s for a batch: %s",
			 tfs_size_str((double)h->slot_bytes, size, sizeof(size)), h->dir,
			 strerror(rc));
		return rc == ENOSPC ? -ENOMEM : -rc;
	}
	/* Before Linux 5.14 (EINVAL) the gather's writes fault the pages in as before. */
	(void)madvise(*mem, (size_t)h->slot_bytes, MADV_POPULATE_WRITE);
	__atomic_or_fetch(&h->reserved, bit, __ATOMIC_RELEASE);
	return 0;
}

static int host_submit(void *b, unsigned slot, struct tfs_gather_list *l, size_t bytes)
{
	struct host *h = b;
	/* A slot filled again right after its last fill (stage, release, stage) is still in the
	 * cache; the next slot of a ring in turn is not. */
	const int cold = __atomic_exchange_n(&h->last, slot, __ATOMIC_RELAXED) != slot;

	(void)bytes;
	/* The CPU copies every run here, a large batch on several threads; the loader reads the
	 * bytes after our reply, which the reply's write orders. */
	tfs_gather_list_run_on(l, h->map + (uint64_t)slot * h->slot_bytes, h->pool, cold);
	tfs_gather_list_release(l);
	return 0;
}

static void host_locate(const void *b, unsigned slot, struct tfs_staging_loc *loc)
{
	const struct host *h = b;

	loc->device = TFS_STAGING_HOST;
	loc->path = h->path;
	loc->file_bytes = h->size;
	loc->base = (uint64_t)slot * h->slot_bytes;
}

const struct tfs_staging_backend tfs_staging_host = {
	.name = "host",
	.probe = host_probe,
	.create = host_create,
	.destroy = host_destroy,
	.begin = host_begin,
	.submit = host_submit,
	.locate = host_locate,
	.keep = host_keep,
	.reuse = host_reuse,
};
