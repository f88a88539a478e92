/* SPDX-License-Identifier: MIT */
/* source: local paths and URLs of import sources. */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "http.h"
#include "util.h"

/* Objects up to this size are held in memory (a memfd) while they are imported; larger ones are
 * spooled to an unlinked file on disk, so that an import's memory does not grow with its source:
 * the page cache may write those pages out and drop them. */
#define HOLD_IN_MEMORY (64ull << 20)

int tfs_source_is_url(const char *path)
{
	return !strncmp(path, "s3://", 5) || !strncmp(path, "http://", 7) ||
	       !strncmp(path, "https://", 8);
}

/* Split URL into the store of its parent and the last component: s3://b/dir/x.tar is the store
 * s3://b/dir and the key x.tar. */
static int open_parent(const char *url, struct tfs_store **s, const char **key)
{
	const char *slash = strrchr(url, '/');
	const char *scheme_end = strstr(url, "://");
	char *parent;
	int rc;

	if (!slash || !scheme_end || slash <= scheme_end + 2 || !slash[1]) {
		tfs_err("%s: expected a URL of an object (s3://BUCKET/KEY, https://HOST/PATH)",
			url);
		return -EINVAL;
	}
	parent = strndup(url, (size_t)(slash - url));
	if (!parent)
		return -ENOMEM;
	rc = tfs_store_open(parent, 0, s);
	free(parent);
	*key = slash + 1;
	return rc;
}

/* The directory a large source is spooled to: $TMPDIR, else /var/tmp (on disk where /tmp may be
 * a tmpfs, which is memory). */
static const char *spool_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/var/tmp";
}

/* An unlinked file of `size` bytes, its blocks reserved, in the spool directory; -errno (with
 * the reason in why) when it cannot be had. */
static int spool_open(uint64_t size, char *why, size_t why_len)
{
	const char *dir = spool_dir();
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600), rc;

	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
		/* A file system without O_TMPFILE: a named file, unlinked at once. */
		char path[PATH_MAX];

		if (snprintf(path, sizeof(path), "%s/tensorfs-source-XXXXXX", dir) >=
		    (int)sizeof(path)) {
			snprintf(why, why_len, "%s: path too long", dir);
			return -ENAMETOOLONG;
		}
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0) {
		rc = -errno;
		snprintf(why, why_len, "%s: %s", dir, strerror(errno));
		return rc;
	}
	/* Reserved now, so that a disk without room says so before anything is fetched. */
	rc = posix_fallocate(fd, 0, (off_t)size);
	if (rc) {
		snprintf(why, why_len, "%s: no room for %llu bytes: %s", dir,
			 (unsigned long long)size, strerror(rc));
		close(fd);
		return -rc;
	}
	return fd;
}

/* A descriptor to hold an object of `size` bytes: a memfd for a small one, a spool file for a
 * large one, or a memfd after all (said once) when no spool file can be had. */
static int hold_open(const char *url, uint64_t size)
{
	char why[PATH_MAX + 128];
	int fd;

	if (size > HOLD_IN_MEMORY) {
		fd = spool_open(size, why, sizeof(why));
		if (fd >= 0)
			return fd;
		tfs_warn("%s: cannot spool its %llu bytes to disk (%s; set TMPDIR): holding it in "
			 "memory",
			 url, (unsigned long long)size, why);
	}
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
	}
	return fd;
}

/* A fetch's pieces, taken by up to `parallel` fetchers at once. */
struct fetch {
	struct tfs_store *s;
	const char *url, *key;
	uint64_t size, piece;
	int fd;
	pthread_mutex_t lock;
	void *spare[64]; /* guarded by lock: piece buffers not in use (a fetcher's at most) */
	unsigned nspare; /* guarded by lock */
};

/* A piece buffer: one left by an earlier piece (already faulted in), or a new one. */
static void *buf_take(struct fetch *f)
{
	void *b = NULL;

	pthread_mutex_lock(&f->lock);
	if (f->nspare)
		b = f->spare[--f->nspare];
	pthread_mutex_unlock(&f->lock);
	return b ? b : malloc((size_t)f->piece);
}

static void buf_give(struct fetch *f, void *b)
{
	pthread_mutex_lock(&f->lock);
	if (f->nspare < sizeof(f->spare) / sizeof(f->spare[0])) {
		f->spare[f->nspare++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&f->lock);
	free(b);
}

static int fetch_piece(void *arg, size_t i)
{
	struct fetch *f = arg;
	const uint64_t off = (uint64_t)i * f->piece;
	const size_t want = (size_t)(f->size - off < f->piece ? f->size - off : f->piece);
	void *buf = buf_take(f);
	ssize_t got;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	got = tfs_store_get_range(f->s, f->key, off, buf, want);
	if (got < 0 || (size_t)got != want) {
		rc = got < 0 ? (int)got : -EIO;
		tfs_err("%s: read at byte %llu: %s", f->url, (unsigned long long)off,
			got < 0 ? strerror(-rc) : "the object ended early (changed while read?)");
	} else {
		/* The spool file's space is reserved, a memfd's is memory: short is an error. */
		const ssize_t put = pwrite(f->fd, buf, want, (off_t)off);

		if (put != (ssize_t)want) {
			rc = put < 0 ? -errno : -EIO;
			tfs_err("%s: cannot hold byte %llu: %s", f->url, (unsigned long long)off,
				strerror(-rc));
		}
	}
	buf_give(f, buf);
	return rc;
}

int tfs_source_open_file(const char *path)
{
	struct tfs_config_http cfg;
	struct fetch f = { .url = path, .lock = PTHREAD_MUTEX_INITIALIZER };
	int fd = -1, rc;

	if (!tfs_source_is_url(path)) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			tfs_err("%s: %s", path, strerror(errno));
			return rc;
		}
		return fd;
	}
	rc = tfs_config_http(&cfg);
	if (rc)
		return rc;
	rc = open_parent(path, &f.s, &f.key);
	if (rc)
		return rc;
	rc = tfs_store_head(f.s, f.key, &f.size);
	if (rc) {
		tfs_err("%s: %s", path, rc == -ENOENT ? "no such object" : strerror(-rc));
		goto out;
	}
	fd = hold_open(path, f.size);
	if (fd < 0) {
		rc = fd;
		goto out;
	}
	f.fd = fd;
	f.piece = cfg.part_size;
	/* Pieces in flight at once, each a connection of its own: an object store caps what one
	 * connection brings (S3: about 85-90 MB/s). */
	rc = tfs_http_parallel(NULL, TFS_WORK_NORMAL, (size_t)((f.size + f.piece - 1) / f.piece),
			       cfg.parallel, fetch_piece, &f);
out:
	while (f.nspare)
		free(f.spare[--f.nspare]);
	tfs_store_close(f.s);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return fd;
}
int tfs_source_open_tree(const char *path, struct tfs_store **out)
{
	char abs[PATH_MAX];
	int rc;

	if (tfs_source_is_url(path)) {
		char *root = strdup(path);
		size_t len;

		if (!root)
			return -ENOMEM;
		len = strlen(root);
		while (len > 1 && root[len - 1] == '/')
			root[--len] = 0;
		rc = tfs_store_open(root, 0, out);
		free(root);
		return rc;
	}
	if (!realpath(path, abs)) {
		rc = -errno;
		tfs_err("%s: %s", path, strerror(errno));
		return rc;
	}
	return tfs_store_open(abs, 0, out);
}
