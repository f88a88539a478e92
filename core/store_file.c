/* SPDX-License-Identifier: MIT */
/* store_file: the file:// backend. Writes go to a temporary file that is fsync'ed and renamed
 * (or linked, for create-only puts) into place, so a reader never sees a partial object. */
#include "store.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

struct file_store {
	struct tfs_store base;
	int root_fd; /* O_PATH directory descriptor of the lake root */
};

static atomic_uint tmp_counter;

static struct file_store *fs_of(struct tfs_store *s)
{
	return (struct file_store *)s;
}

static int key_ok(const char *key)
{
	/* Keys come from our own code, but a name from a listing or a URL ends up here too:
	 * refuse anything that could climb out of the root ("a..b" is a fine name, ".." is not). */
	if (!*key || key[0] == '/' || strlen(key) >= PATH_MAX - 64)
		return 0;
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL)
		if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == 0))
			return 0;
	return 1;
}

static int file_open(const char *url, unsigned flags, struct tfs_store **out)
{
	const char *path = url;
	struct file_store *s;
	int fd;

	if (!strncmp(url, "file://", 7))
		path = url + 7;
	if (path[0] != '/') {
		tfs_err("%s: file URLs need an absolute path (file:///path)", url);
		return -EINVAL;
	}
	if (flags & TFS_STORE_CREATE) {
		char p[PATH_MAX];

		if (strlen(path) >= sizeof(p))
			return -ENAMETOOLONG;
		strcpy(p, path);
		for (char *q = p + 1; (q = strchr(q, '/')); q++) {
			*q = 0;
			mkdir(p, 0777);
			*q = '/';
		}
		mkdir(p, 0777);
	}
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		tfs_err("%s: cannot open lake directory: %s", url, strerror(e));
		return -e;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->base.ops = &tfs_store_file_ops;
	s->base.url = strdup(url);
	if (!s->base.url) {
		close(fd);
		free(s);
		return -ENOMEM;
	}
	{
		size_t n = strlen(s->base.url);

		while (n > 8 && s->base.url[n - 1] == '/')
			s->base.url[--n] = 0;
	}
	s->root_fd = fd;
	*out = &s->base;
	return 0;
}

static void file_close(struct tfs_store *st)
{
	struct file_store *s = fs_of(st);

	close(s->root_fd);
	free(s->base.url);
	free(s);
}

static int file_get(struct tfs_store *st, const char *key, struct tfs_buf *out)
{
	int fd, rc;

	out->len = 0;
	if (!key_ok(key))
		return -EINVAL;
	fd = openat(fs_of(st)->root_fd, key, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	rc = tfs_read_fd(fd, out);
	close(fd);
	return rc;
}

static ssize_t file_get_range(struct tfs_store *st, const char *key, uint64_t off, void *buf,
			      size_t len)
{
	size_t done = 0;
	ssize_t rc;
	int fd;

	if (!key_ok(key))
		return -EINVAL;
	fd = openat(fs_of(st)->root_fd, key, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* The range is what the reader needs (a frame, a run of frames, an index): the kernel's
	 * read-ahead past it would be read from the disk for nothing. */
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	while (done < len) {
		rc = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0) {
			rc = -errno;
			close(fd);
			return rc;
		}
		if (rc == 0)
			break;
		done += (size_t)rc;
	}
	close(fd);
	return (ssize_t)done;
}

static int file_stat(struct tfs_store *st, const char *key, uint64_t *size, int64_t *mtime)
{
	struct stat sb;

	if (!key_ok(key))
		return -EINVAL;
	if (fstatat(fs_of(st)->root_fd, key, &sb, 0) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -EISDIR;
	*size = (uint64_t)sb.st_size;
	if (mtime)
		*mtime = (int64_t)sb.st_mtime;
	return 0;
}

static int file_head(struct tfs_store *st, const char *key, uint64_t *size)
{
	return file_stat(st, key, size, NULL);
}

/* mkdir -p for the directories leading to key. */
static int make_parents(int root_fd, const char *key)
{
	char path[PATH_MAX];
	size_t n = strlen(key);

	if (n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, key, n + 1);
	for (char *p = path; (p = strchr(p, '/')); p++) {
		*p = 0;
		if (mkdirat(root_fd, path, 0777) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return 0;
}

static void dir_of(const char *key, char *dir, size_t cap)
{
	const char *slash = strrchr(key, '/');
	size_t n = slash ? (size_t)(slash - key) : 0;

	if (n >= cap)
		n = cap - 1;
	if (n == 0) {
		snprintf(dir, cap, ".");
		return;
	}
	memcpy(dir, key, n);
	dir[n] = 0;
}

/* fsync path (a file or a directory); with drop, its pages then leave the page cache (they are
 * clean once durable). */
static int fsync_at_drop(int root, const char *path, int drop)
{
	int fd = openat(root, path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	if (!rc && drop)
		(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return rc;
}

static int fsync_at(int root, const char *path)
{
	return fsync_at_drop(root, path, 0);
}

/* Make key's directory entry durable. */
static int sync_dir(int root_fd, const char *key)
{
	char dir[PATH_MAX];

	dir_of(key, dir, sizeof(dir));
	return fsync_at(root_fd, dir);
}

/* Write data to a fresh temporary file beside key and fsync it, or (durable 0) only start
 * writing it out: a later fsync then finds the work done or under way. */
static int write_temp(int root_fd, const char *key, const void *data, size_t len, int durable,
		      char *tmp, size_t tmp_cap)
{
	char dir[PATH_MAX];
	int fd, rc;

	rc = make_parents(root_fd, key);
	if (rc)
		return rc;
	dir_of(key, dir, sizeof(dir));
	if ((size_t)snprintf(tmp, tmp_cap, "%s/.tmp-%d-%u", dir, (int)getpid(),
			     atomic_fetch_add(&tmp_counter, 1)) >= tmp_cap)
		return -ENAMETOOLONG;
	fd = openat(root_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	rc = tfs_write_full(fd, data, len);
	if (!rc && durable && fsync(fd) < 0)
		rc = -errno;
	/* Its error, if any, is the later fsync's too. */
	if (!rc && !durable)
		(void)sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		unlinkat(root_fd, tmp, 0);
	return rc;
}

static int file_put(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	int root = fs_of(st)->root_fd, rc;
	char tmp[PATH_MAX];

	if (!key_ok(key))
		return -EINVAL;
	rc = write_temp(root, key, data, len, 1, tmp, sizeof(tmp));
	if (rc)
		return rc;
	if (renameat(root, tmp, root, key) < 0) {
		rc = -errno;
		unlinkat(root, tmp, 0);
		return rc;
	}
	return sync_dir(root, key);
}

/* The durable file tmp at key, unless key is there already (-EEXIST, and key refreshed for gc's
 * grace period); tmp is removed either way. link() refuses to replace: two writers racing on
 * the same content-addressed key both succeed in effect, and neither can clobber a file a
 * reader has open. */
static int link_new(int root, const char *tmp, const char *key)
{
	int rc = 0;

	if (linkat(root, tmp, root, key, 0) < 0) {
		rc = -errno;
		if (rc == -EEXIST)
			utimensat(root, key, NULL, 0);
	}
	unlinkat(root, tmp, 0);
	return rc;
}

static int exists_new(int root, const char *key)
{
	struct stat sb;

	if (!key_ok(key))
		return -EINVAL;
	if (fstatat(root, key, &sb, 0) == 0) {
		utimensat(root, key, NULL, 0);
		return -EEXIST;
	}
	return 0;
}

static int file_put_new(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	int root = fs_of(st)->root_fd, rc = exists_new(root, key);
	char tmp[PATH_MAX];

	if (!rc)
		rc = write_temp(root, key, data, len, 1, tmp, sizeof(tmp));
	if (!rc)
		rc = link_new(root, tmp, key);
	return rc ? rc : sync_dir(root, key);
}

/* A put_new begun: its bytes in tmp beside key, being written out; neither durable nor at key
 * yet. */
struct tfs_store_put {
	char tmp[PATH_MAX];
	char key[];
};

static int file_put_new_begin(struct tfs_store *st, const char *key, const void *data, size_t len,
			      struct tfs_store_put **out)
{
	int root = fs_of(st)->root_fd, rc = exists_new(root, key);
	struct tfs_store_put *p;

	if (rc)
		return rc;
	p = malloc(sizeof(*p) + strlen(key) + 1);
	if (!p)
		return -ENOMEM;
	strcpy(p->key, key);
	rc = write_temp(root, key, data, len, 0, p->tmp, sizeof(p->tmp));
	if (rc) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* By key, the NULL entries last: the puts of one directory come together. */
static int put_cmp(const void *a, const void *b)
{
	const struct tfs_store_put *x = *(struct tfs_store_put *const *)a;
	const struct tfs_store_put *y = *(struct tfs_store_put *const *)b;

	if (!x || !y)
		return !x - !y;
	return strcmp(x->key, y->key);
}

/* A put of a batch failed with e: logged, and kept in *rc if it is the batch's first error. */
static void put_failed(const struct tfs_store *st, const struct tfs_store_put *p, int e, int *rc)
{
	tfs_err("%s/%s: cannot write object: %s", st->url, p->key, strerror(-e));
	if (!*rc)
		*rc = e;
}

/* Durable first, all of them: their write-out began at put_new_begin, so the first fsync
 * commits the filesystem's journal with every one of them in it and the others find little
 * left to do. Then visible: all linked at their keys, then each directory made durable once
 * (the first of those commits every link). */
static int file_put_new_end(struct tfs_store *st, struct tfs_store_put **puts, size_t n)
{
	int root = fs_of(st)->root_fd, rc = 0, e;
	char dir[PATH_MAX], synced[PATH_MAX] = "";

	qsort(puts, n, sizeof(*puts), put_cmp);
	for (size_t i = 0; i < n; i++) {
		if (!puts[i] || !(e = fsync_at_drop(root, puts[i]->tmp, 1)))
			continue;
		put_failed(st, puts[i], e, &rc);
		unlinkat(root, puts[i]->tmp, 0);
		free(puts[i]);
		puts[i] = NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (!puts[i])
			continue;
		e = link_new(root, puts[i]->tmp, puts[i]->key);
		if (e) { /* there already (another writer's), or not linked: no directory to sync */
			if (e != -EEXIST)
				put_failed(st, puts[i], e, &rc);
			free(puts[i]);
			puts[i] = NULL;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!puts[i])
			continue;
		dir_of(puts[i]->key, dir, sizeof(dir));
		if (!strcmp(dir, synced))
			continue;
		e = fsync_at(root, dir);
		if (e)
			put_failed(st, puts[i], e, &rc);
		strcpy(synced, dir);
	}
	for (size_t i = 0; i < n; i++) {
		free(puts[i]);
		puts[i] = NULL;
	}
	return rc;
}

static int file_cas(struct tfs_store *st, const char *key, const void *old, size_t old_len,
		    const void *data, size_t len)
{
	int root = fs_of(st)->root_fd, lock_fd = -1, rc;
	char lock[PATH_MAX + 8], dir[PATH_MAX];
	struct tfs_buf cur = { 0 };

	if (!key_ok(key))
		return -EINVAL;
	rc = make_parents(root, key);
	if (rc)
		return rc;
	/* flock is dropped by the kernel when its holder dies: a killed writer never leaves a
	 * stale lock behind. The lock file itself is harmless and stays. */
	dir_of(key, dir, sizeof(dir));
	snprintf(lock, sizeof(lock), "%s/.lock", dir);
	lock_fd = openat(root, lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (lock_fd < 0)
		return -errno;
	while (flock(lock_fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			rc = -errno;
			goto out;
		}
	}
	rc = file_get(st, key, &cur);
	if (rc == -ENOENT) {
		if (old) {
			rc = -EAGAIN;
			goto out;
		}
	} else if (rc) {
		goto out;
	} else if (!old || cur.len != old_len || memcmp(cur.data, old, old_len)) {
		rc = -EAGAIN;
		goto out;
	}
	rc = file_put(st, key, data, len);
out:
	tfs_buf_free(&cur);
	close(lock_fd); /* releases the flock */
	return rc;
}

static int file_list(struct tfs_store *st, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	int root = fs_of(st)->root_fd, rc = 0;
	struct dirent *de;
	DIR *d;

	if (*prefix && !key_ok(prefix))
		return -EINVAL;
	rc = tfs_opendirat(root, *prefix ? prefix : ".", &d);
	if (rc)
		return rc;
	while ((de = readdir(d))) {
		struct stat sb;
		int is_dir;

		if (de->d_name[0] == '.')
			continue; /* temporaries, locks, . and .. */
		if (de->d_type == DT_UNKNOWN || de->d_type == DT_LNK) {
			if (fstatat(dirfd(d), de->d_name, &sb, 0) < 0)
				continue;
			is_dir = S_ISDIR(sb.st_mode);
		} else {
			is_dir = de->d_type == DT_DIR;
		}
		rc = fn(arg, de->d_name, is_dir);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

static int file_del(struct tfs_store *st, const char *key)
{
	if (!key_ok(key))
		return -EINVAL;
	if (unlinkat(fs_of(st)->root_fd, key, 0) < 0)
		return -errno;
	return 0;
}

struct sweep_ctx {
	int root;
	char dir[PATH_MAX];
	int64_t older_than;
	int dry_run;
	int removed; /* or, dry_run, found */
};

static int sweep_dir(struct sweep_ctx *c, int depth)
{
	struct dirent *de;
	size_t n = strlen(c->dir);
	int fd = openat(c->root, c->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat sb;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(sb.st_mode) && depth < 8 &&
		    n + strlen(de->d_name) + 2 < sizeof(c->dir)) {
			snprintf(c->dir + n, sizeof(c->dir) - n, "/%s", de->d_name);
			sweep_dir(c, depth + 1);
			c->dir[n] = 0;
		} else if (S_ISREG(sb.st_mode) && !strncmp(de->d_name, ".tmp-", 5) &&
			   (int64_t)sb.st_mtime <= c->older_than) {
			if (c->dry_run || unlinkat(dirfd(d), de->d_name, 0) == 0)
				c->removed++;
		}
	}
	closedir(d);
	return 0;
}

static int file_sweep(struct tfs_store *st, const char *prefix, int64_t older_than, int dry_run)
{
	struct sweep_ctx c = { .root = fs_of(st)->root_fd,
			       .older_than = older_than,
			       .dry_run = dry_run };
	int rc;

	if (!key_ok(prefix) || strlen(prefix) >= sizeof(c.dir))
		return -EINVAL;
	strcpy(c.dir, prefix);
	rc = sweep_dir(&c, 0);
	return rc ? rc : c.removed;
}

const struct tfs_store_ops tfs_store_file_ops = {
	.scheme = "file",
	.open = file_open,
	.close = file_close,
	.get = file_get,
	.get_range = file_get_range,
	.head = file_head,
	.stat = file_stat,
	.put = file_put,
	.put_new = file_put_new,
	.put_new_begin = file_put_new_begin,
	.put_new_end = file_put_new_end,
	.cas = file_cas,
	.list = file_list,
	.del = file_del,
	.sweep = file_sweep,
};
