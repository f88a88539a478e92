/* SPDX-License-Identifier: MIT */
/* diskcache: a store wrapper that keeps whole immutable objects in a bounded local directory. */
#include "diskcache.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "idmap.h"
#include "object.h"

/*
 * Layout. One flat directory: each cached object is the file "<64 lowercase hex id>" holding
 * the object's stored bytes exactly as the inner store returned them. Fills are written to
 * ".tmp-<pid>-<n>" in the same directory and renamed into place, so a file under an id name is
 * always complete (or, after a crash, fails tfs_object_check and is removed when read). Any other
 * name in the directory is left alone and not counted. No fsync: a torn file fails its check.
 *
 * Index. This process keeps an in-memory index (hash by id + LRU list) of the files it knows,
 * seeded at wrap time by scanning the directory, ordered by file mtime. A hit moves the entry to
 * the front and sets the file's mtime to now, so recency survives remounts and is visible to
 * other processes. Eviction removes least recently used files until the known bytes fit the
 * budget; objects larger than the budget are never cached.
 *
 * Sharing. Several processes (or wrappers) may use one directory. Each accounts for the files it
 * knows: those found by its scans and those it filled or read. Every budget/4 bytes filled it
 * rescans, learning the others' files (merged into the LRU order by mtime) and forgetting files
 * that vanished. Files that vanish between index and use (ENOENT) are simply misses; an eviction
 * that finds its file gone is not counted. Races between processes only ever cost a refetch:
 * every file under an id name is a complete object for that id or fails its check.
 *
 * Bypass policy. When the directory cannot be created or opened at wrap time, tfs_diskcache_wrap
 * still succeeds (after one warning) and every object read goes to the inner store: a cache is
 * an optimisation, and the mount should come up without it. A read-only directory still serves
 * the files it holds. When a fill fails (ENOSPC, EDQUOT, EROFS, EACCES, the directory removed,
 * any I/O error) the temporary file is removed, `bypassed` is counted, one warning is logged per
 * wrapper, and the data is returned normally; later fills try again.
 *
 * Ranged reads (get_range) of an object whose file is here are served from the file, unchecked:
 * their callers read the index and frames of framed chunks, each carrying its own checksum, and
 * a mismatch sends them to get_object, which checks the whole file (and removes it if damaged).
 * Anything else goes to the inner store, and ranged reads never fill the cache.
 *
 * Ownership: on success the wrapper owns inner; on failure the caller still does.
 */

struct entry {
	struct tfs_idmap_node node; /* the object's id, in dc->index */
	uint64_t size;		    /* file size in bytes */
	int64_t used_ns;	    /* last use (CLOCK_REALTIME); the LRU list is sorted by it */
	uint64_t seq;		    /* dc->seq when last inserted or used */
	uint64_t seen;		    /* generation of the last scan that found the file */
	struct entry *victim_next;  /* the victim list once removed */
	struct entry *prev, *next;  /* LRU list: dc->lru.next is the most recently used */
};

struct diskcache {
	struct tfs_store base; /* first: a tfs_store pointer is a diskcache pointer */
	struct tfs_store *inner;
	char *dir;
	int dir_fd;	   /* -1: the directory was unusable at wrap time, everything bypasses */
	uint64_t budget;   /* constant after wrap (also in st.budget) */
	atomic_int warned; /* the one bypass warning has been logged */

	pthread_mutex_t lock;
	struct tfs_idmap index;	       /* protected by lock */
	struct entry lru;	       /* sentinel; protected by lock */
	uint64_t seq;		       /* protected by lock */
	uint64_t gen;		       /* scan generation; protected by lock */
	uint64_t filled_since_scan;    /* bytes; protected by lock */
	int scanning;		       /* a rescan is under way; protected by lock */
	struct tfs_diskcache_stats st; /* protected by lock */
};

/* A file found by a scan. */
struct found {
	struct tfs_id id;
	uint64_t size;
	int64_t mtime_ns;
};

#define TMP_PREFIX ".tmp-"
#define NAME_LEN (TFS_ID_HEX - 1)
/* Temporary files older than this are a crashed writer's leftovers. */
#define STALE_TMP_NS (3600ll * 1000000000ll)

static const struct tfs_store_ops diskcache_ops;
static atomic_uint tmp_counter;

static struct diskcache *dc_of(struct tfs_store *s)
{
	assert(s->ops == &diskcache_ops);
	return (struct diskcache *)s;
}

static int64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static void warn_bypass(struct diskcache *dc, const char *what, int err)
{
	if (atomic_exchange(&dc->warned, 1))
		return;
	tfs_warn("%s: disk cache bypassed: %s: %s; reading from the store without it", dc->dir,
		 what, strerror(err));
}

/* --- index (all called with dc->lock held) ---------------------------------------------------- */

static struct entry *lookup(struct diskcache *dc, const struct tfs_id *id)
{
	struct tfs_idmap_node *n = tfs_idmap_find(&dc->index, id);

	return n ? tfs_idmap_entry(n, struct entry, node) : NULL;
}

static void lru_unlink(struct entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	e->prev = e->next = NULL;
}

static void lru_insert_before(struct entry *at, struct entry *e)
{
	e->next = at;
	e->prev = at->prev;
	at->prev->next = e;
	at->prev = e;
}

/* Move (or put) e to the front as used now. used_ns never decreases along the list, even if the
 * clock steps back, so a scan can merge files into it by mtime. */
static void touch(struct diskcache *dc, struct entry *e)
{
	int64_t now = realtime_ns();

	if (e->next)
		lru_unlink(e);
	if (dc->lru.next != &dc->lru && dc->lru.next->used_ns > now)
		now = dc->lru.next->used_ns;
	e->used_ns = now;
	e->seq = ++dc->seq;
	lru_insert_before(dc->lru.next, e);
}

static void hash_insert(struct diskcache *dc, struct entry *e)
{
	tfs_idmap_insert(&dc->index, &e->node);
	dc->st.bytes_used += e->size;
}

/* Take e out of the index and the LRU list. */
static void index_remove(struct diskcache *dc, struct entry *e)
{
	tfs_idmap_remove(&dc->index, &e->node);
	lru_unlink(e);
	assert(dc->st.bytes_used >= e->size);
	dc->st.bytes_used -= e->size;
}

/* Take least recently used entries out of the index until the known bytes fit the budget; the
 * returned list (chained by victim_next) is for unlink_victims once the lock is dropped. */
static struct entry *take_victims(struct diskcache *dc)
{
	struct entry *victims = NULL;

	while (dc->st.bytes_used > dc->st.budget && dc->lru.prev != &dc->lru) {
		struct entry *e = dc->lru.prev;

		index_remove(dc, e);
		e->victim_next = victims;
		victims = e;
	}
	return victims;
}

/* Record that the file for id exists with size bytes and was just used. Returns the victims. */
static struct entry *note_used(struct diskcache *dc, const struct tfs_id *id, uint64_t size)
{
	struct entry *e = lookup(dc, id);

	if (e) {
		dc->st.bytes_used = dc->st.bytes_used - e->size + size;
		e->size = size;
	} else {
		e = calloc(1, sizeof(*e));
		if (!e)
			return NULL; /* the file stays, uncounted until the next scan */
		e->node.id = *id;
		e->size = size;
		hash_insert(dc, e);
	}
	touch(dc, e);
	return take_victims(dc);
}

static void forget(struct diskcache *dc, const struct tfs_id *id)
{
	struct entry *e = lookup(dc, id);

	if (e) {
		index_remove(dc, e);
		free(e);
	}
}

#ifndef NDEBUG
static void index_sanity(struct diskcache *dc)
{
	uint64_t bytes = 0;
	size_t n = 0;

	for (struct entry *e = dc->lru.next; e != &dc->lru; e = e->next) {
		assert(e->next->prev == e);
		assert(e->next == &dc->lru || e->used_ns >= e->next->used_ns);
		assert(lookup(dc, &e->node.id) == e);
		bytes += e->size;
		n++;
	}
	assert(n == dc->index.n);
	assert(bytes == dc->st.bytes_used);
}
#else
static void index_sanity(struct diskcache *dc)
{
	(void)dc;
}
#endif

/* --- directory work (called without the lock) ------------------------------------------------- */

static void unlink_victims(struct diskcache *dc, struct entry *victims)
{
	uint64_t removed = 0;
	char name[TFS_ID_HEX];

	while (victims) {
		struct entry *e = victims;

		victims = e->victim_next;
		tfs_id_hex(&e->node.id, name);
		/* ENOENT: another process evicted it first; it is gone either way. */
		if (unlinkat(dc->dir_fd, name, 0) == 0)
			removed++;
		free(e);
	}
	if (removed) {
		pthread_mutex_lock(&dc->lock);
		dc->st.evictions += removed;
		pthread_mutex_unlock(&dc->lock);
	}
}

static int cmp_found_newest_first(const void *a, const void *b)
{
	const struct found *x = a, *y = b;

	return (x->mtime_ns < y->mtime_ns) - (x->mtime_ns > y->mtime_ns);
}

/* List the cache files in the directory (and remove stale temporaries). *out is malloc'ed. */
static int list_dir(struct diskcache *dc, struct found **out, size_t *count)
{
	struct found *v = NULL;
	size_t n = 0, cap = 0;
	int64_t now = realtime_ns();
	struct dirent *de;
	int rc = 0;
	DIR *d;

	*out = NULL;
	*count = 0;
	rc = tfs_opendirat(dc->dir_fd, ".", &d);
	if (rc)
		return rc;
	while ((de = readdir(d))) {
		struct stat sb;
		int64_t mtime;

		if (strlen(de->d_name) != NAME_LEN && strncmp(de->d_name, TMP_PREFIX, 5))
			continue;
		if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISREG(sb.st_mode))
			continue; /* vanished meanwhile, or not ours */
		mtime = (int64_t)sb.st_mtim.tv_sec * 1000000000ll + sb.st_mtim.tv_nsec;
		if (!strncmp(de->d_name, TMP_PREFIX, 5)) {
			if (mtime < now - STALE_TMP_NS)
				unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (!tfs_is_lower_hex(de->d_name, NAME_LEN))
			continue;
		rc = TFS_GROW(v, &cap, n + 1);
		if (rc)
			goto out;
		if (tfs_id_parse(de->d_name, &v[n].id))
			continue;
		v[n].size = (uint64_t)sb.st_size;
		v[n].mtime_ns = mtime;
		n++;
	}
	if (n)
		qsort(v, n, sizeof(*v), cmp_found_newest_first);
out:
	closedir(d);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*count = n;
	return 0;
}

/* Learn the files in the directory: add the ones this index lacks at their place in the LRU
 * order (by mtime), forget the ones that vanished and were not used since the scan began, and
 * evict down to the budget. */
static int scan(struct diskcache *dc)
{
	struct entry *victims, *p, *next;
	struct found *v;
	uint64_t start_seq, gen;
	size_t n;
	int rc;

	pthread_mutex_lock(&dc->lock);
	start_seq = dc->seq;
	pthread_mutex_unlock(&dc->lock);

	rc = list_dir(dc, &v, &n);
	if (rc)
		return rc;

	pthread_mutex_lock(&dc->lock);
	gen = ++dc->gen;
	/* v is newest first and so is the list: one merging walk places every new file. */
	p = dc->lru.next;
	for (size_t i = 0; i < n; i++) {
		struct entry *e = lookup(dc, &v[i].id);

		if (e) {
			e->seen = gen;
			continue;
		}
		e = calloc(1, sizeof(*e));
		if (!e) {
			rc = -ENOMEM;
			break;
		}
		e->node.id = v[i].id;
		e->size = v[i].size;
		e->used_ns = v[i].mtime_ns;
		e->seen = gen;
		while (p != &dc->lru && p->used_ns >= e->used_ns)
			p = p->next;
		lru_insert_before(p, e);
		hash_insert(dc, e);
	}
	if (!rc) {
		for (p = dc->lru.next; p != &dc->lru; p = next) {
			next = p->next;
			if (p->seen != gen && p->seq <= start_seq) {
				index_remove(dc, p);
				free(p);
			}
		}
	}
	index_sanity(dc);
	victims = take_victims(dc);
	pthread_mutex_unlock(&dc->lock);
	unlink_victims(dc, victims);
	free(v);
	return rc;
}

/* Write obj to the cache file name via a temporary file. Returns 0 or -errno. */
static int write_file(struct diskcache *dc, const char *name, const void *obj, size_t len)
{
	char tmp[64];
	int fd = -1, rc;

	for (int tries = 0; fd < 0; tries++) {
		snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d-%u", (int)getpid(),
			 atomic_fetch_add(&tmp_counter, 1));
		fd = openat(dc->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && (errno != EEXIST || tries >= 8))
			return -errno;
	}
	rc = tfs_write_full(fd, obj, len);
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && renameat(dc->dir_fd, tmp, dc->dir_fd, name) < 0)
		rc = -errno;
	if (rc)
		unlinkat(dc->dir_fd, tmp, 0);
	return rc;
}

/* Read the cache file name into out. 0: a checked object; -ENOENT: no file; -EIO: a damaged
 * file, now removed; other -errno: the file could not be read (left alone). */
static int read_file(struct diskcache *dc, const char *name, struct tfs_buf *out)
{
	int fd, rc;

	out->len = 0;
	fd = openat(dc->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Not a regular file, absurdly large, or shorter than fstat said (truncated under us):
	 * damaged like any other. */
	rc = tfs_read_fd(fd, out);
	if (rc == -EISDIR || rc == -EFBIG)
		rc = -EIO;
	if (rc)
		goto out;
	if (tfs_object_check(out->data, out->len)) {
		rc = -EIO;
		goto out;
	}
	/* Recency for remounts and for other processes' scans; a failure only costs ordering. */
	futimens(fd, NULL);
out:
	close(fd);
	if (rc) {
		out->len = 0;
		if (rc == -EIO && unlinkat(dc->dir_fd, name, 0) < 0 && errno != ENOENT)
			tfs_warn("%s/%s: cannot remove damaged cache file: %s", dc->dir, name,
				 strerror(errno));
	}
	return rc;
}

/* --- store operations ------------------------------------------------------------------------- */

/* A miss: fetch from inner and, if the object checks out and fits, keep a copy. */
static int fill(struct diskcache *dc, const char *key, uint64_t urgent_size, const char *name,
		const struct tfs_id *id, struct tfs_buf *out)
{
	struct entry *victims = NULL;
	int rc, do_scan = 0;

	/* Checked there: damage at the source is an error (after one refetch), never kept. */
	rc = tfs_store_get_object(dc->inner, key, urgent_size, out);
	pthread_mutex_lock(&dc->lock);
	dc->st.misses++;
	pthread_mutex_unlock(&dc->lock);
	if (rc)
		return rc;
	if (out->len > dc->budget)
		return 0;
	if (dc->dir_fd < 0) {
		pthread_mutex_lock(&dc->lock);
		dc->st.bypassed++;
		pthread_mutex_unlock(&dc->lock);
		return 0;
	}
	rc = write_file(dc, name, out->data, out->len);
	pthread_mutex_lock(&dc->lock);
	if (rc) {
		dc->st.bypassed++;
	} else {
		dc->st.fills++;
		victims = note_used(dc, id, out->len);
		dc->filled_since_scan += out->len;
		if (!dc->scanning && dc->filled_since_scan >= dc->budget / 4) {
			dc->scanning = 1;
			dc->filled_since_scan = 0;
			do_scan = 1;
		}
	}
	pthread_mutex_unlock(&dc->lock);
	if (rc)
		warn_bypass(dc, "cannot write a cache file", -rc);
	unlink_victims(dc, victims);
	if (do_scan) {
		scan(dc); /* best effort: a failed rescan leaves the index as it was */
		pthread_mutex_lock(&dc->lock);
		dc->scanning = 0;
		pthread_mutex_unlock(&dc->lock);
	}
	return 0;
}

/* An object from its file, checked as it is read, or fetched (and checked) and kept: either way
 * what it returns has passed tfs_object_check. */
static int dc_get_object(struct tfs_store *s, const char *key, uint64_t urgent_size,
			 struct tfs_buf *out, int *verified)
{
	struct diskcache *dc = dc_of(s);
	struct entry *victims;
	char name[TFS_ID_HEX];
	struct tfs_id id;
	int rc;

	out->len = 0;
	*verified = 1;
	if (!tfs_object_key_parse(key, &id))
		return -EINVAL;
	tfs_id_hex(&id, name);
	if (dc->dir_fd < 0)
		return fill(dc, key, urgent_size, name, &id, out);

	rc = read_file(dc, name, out);
	pthread_mutex_lock(&dc->lock);
	if (!rc) {
		dc->st.hits++;
		victims = note_used(dc, &id, out->len);
	} else {
		/* Gone (evicted elsewhere), damaged (removed) or unreadable: fetch it again. */
		if (rc == -EIO)
			dc->st.bad_files++;
		if (rc == -EIO || rc == -ENOENT)
			forget(dc, &id);
		victims = NULL;
	}
	pthread_mutex_unlock(&dc->lock);
	unlink_victims(dc, victims);
	if (!rc)
		return 0;
	if (rc == -EIO)
		tfs_warn("%s/%s: damaged cache file removed; fetching %s again", dc->dir, name,
			 key);
	return fill(dc, key, urgent_size, name, &id, out);
}

/* Whatever is not a content-addressed object (refs, markers) changes: never kept. */
static int dc_get(struct tfs_store *s, const char *key, struct tfs_buf *out)
{
	return tfs_store_get(dc_of(s)->inner, key, out);
}

static ssize_t dc_get_range(struct tfs_store *s, const char *key, uint64_t off, void *buf,
			    size_t len)
{
	struct diskcache *dc = dc_of(s);
	char name[TFS_ID_HEX];
	struct tfs_id id;
	ssize_t got = -1;
	int fd;

	if (dc->dir_fd >= 0 && tfs_object_key_parse(key, &id)) {
		tfs_id_hex(&id, name);
		fd = openat(dc->dir_fd, name, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			/* The range alone is needed: no read-ahead past it (as store_file). */
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
			got = pread(fd, buf, len, (off_t)off);
			close(fd);
		}
		/* A whole range, or the end of the object: served. Anything else (no file, a
		 * short file being replaced) goes to the origin. */
		if (got >= 0 && (size_t)got == len) {
			pthread_mutex_lock(&dc->lock);
			dc->st.range_hits++;
			pthread_mutex_unlock(&dc->lock);
			return got;
		}
	}
	return tfs_store_get_range(dc->inner, key, off, buf, len);
}

static int dc_head(struct tfs_store *s, const char *key, uint64_t *size)
{
	return tfs_store_head(dc_of(s)->inner, key, size);
}

static int dc_stat(struct tfs_store *s, const char *key, uint64_t *size, int64_t *mtime)
{
	return tfs_store_stat(dc_of(s)->inner, key, size, mtime);
}

static int dc_put(struct tfs_store *s, const char *key, const void *data, size_t len)
{
	return tfs_store_put(dc_of(s)->inner, key, data, len);
}

static int dc_put_new(struct tfs_store *s, const char *key, const void *data, size_t len)
{
	return tfs_store_put_new(dc_of(s)->inner, key, data, len);
}

static int dc_cas(struct tfs_store *s, const char *key, const void *old, size_t old_len,
		  const void *data, size_t len)
{
	return tfs_store_cas(dc_of(s)->inner, key, old, old_len, data, len);
}

static int dc_list(struct tfs_store *s, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	return tfs_store_list(dc_of(s)->inner, prefix, fn, arg);
}

static int dc_del(struct tfs_store *s, const char *key)
{
	/* A deleted object (gc) may stay cached: its id still names the same bytes, and only
	 * readers holding that id ever ask for it. */
	return tfs_store_del(dc_of(s)->inner, key);
}

static int dc_sweep(struct tfs_store *s, const char *prefix, int64_t older_than, int dry_run)
{
	return tfs_store_sweep(dc_of(s)->inner, prefix, older_than, dry_run);
}

static int dc_open(const char *url, unsigned flags, struct tfs_store **out)
{
	(void)url;
	(void)flags;
	(void)out;
	return -EOPNOTSUPP; /* made by tfs_diskcache_wrap, never opened by URL */
}

static void free_index(struct diskcache *dc)
{
	struct entry *e, *next;

	for (e = dc->lru.next; e && e != &dc->lru; e = next) {
		next = e->next;
		free(e);
	}
	tfs_idmap_free(&dc->index);
}

/* Everything the wrapper owns but the inner store (a failed open leaves that to its caller). */
static void free_dc(struct diskcache *dc)
{
	free_index(dc);
	if (dc->dir_fd >= 0)
		close(dc->dir_fd);
	pthread_mutex_destroy(&dc->lock);
	free(dc->dir);
	free(dc->base.url);
	free(dc);
}

static void dc_close(struct tfs_store *s)
{
	struct diskcache *dc = dc_of(s);

	pthread_mutex_lock(&dc->lock);
	index_sanity(dc);
	pthread_mutex_unlock(&dc->lock);
	tfs_store_close(dc->inner);
	free_dc(dc);
}

static void dc_use_pool(struct tfs_store *s, struct tfs_workpool *pool)
{
	tfs_store_use_pool(dc_of(s)->inner, pool);
}

static void dc_cancel(struct tfs_store *s)
{
	tfs_store_cancel(dc_of(s)->inner);
}

static const struct tfs_store_ops diskcache_ops = {
	.scheme = "diskcache",
	.open = dc_open,
	.close = dc_close,
	.get = dc_get,
	.get_object = dc_get_object,
	.get_range = dc_get_range,
	.head = dc_head,
	.stat = dc_stat,
	.put = dc_put,
	.put_new = dc_put_new,
	.cas = dc_cas,
	.list = dc_list,
	.del = dc_del,
	.sweep = dc_sweep,
	.cancel = dc_cancel,
	.use_pool = dc_use_pool,
};

/* mkdir -p dir. Returns 0 or -errno. */
static int make_dirs(const char *dir)
{
	char p[PATH_MAX];
	size_t n = strlen(dir);

	if (n == 0)
		return -EINVAL;
	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (char *q = p + 1; (q = strchr(q, '/')); q++) {
		*q = 0;
		if (mkdir(p, 0700) < 0 && errno != EEXIST) {
			*q = '/';
			return -errno;
		}
		*q = '/';
	}
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int tfs_diskcache_wrap(struct tfs_store *inner, const char *dir, uint64_t budget,
		       struct tfs_store **out)
{
	struct diskcache *dc;
	int rc;

	if (!inner || !dir || !out)
		return -EINVAL;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return -ENOMEM;
	dc->base.ops = &diskcache_ops;
	dc->inner = inner;
	dc->dir_fd = -1;
	dc->lru.next = dc->lru.prev = &dc->lru;
	dc->st.budget = dc->budget = budget;
	pthread_mutex_init(&dc->lock, NULL);
	dc->base.url = strdup(inner->url);
	dc->dir = strdup(dir);
	if (!dc->base.url || !dc->dir || tfs_idmap_init(&dc->index, 1024)) {
		rc = -ENOMEM;
		goto fail;
	}

	rc = make_dirs(dir);
	if (!rc) {
		dc->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dc->dir_fd < 0)
			rc = -errno;
	}
	if (rc) {
		warn_bypass(dc, "cannot create or open the directory", -rc);
		*out = &dc->base;
		return 0;
	}
	rc = scan(dc);
	if (rc == -ENOMEM)
		goto fail;
	if (rc)
		tfs_warn("%s: cannot list the disk cache directory: %s", dir, strerror(-rc));
	*out = &dc->base;
	return 0;
fail:
	free_dc(dc);
	return rc;
}

int tfs_diskcache_stats(struct tfs_store *s, struct tfs_diskcache_stats *st)
{
	struct diskcache *dc;

	if (!s || s->ops != &diskcache_ops)
		return -EINVAL;
	dc = dc_of(s);
	pthread_mutex_lock(&dc->lock);
	*st = dc->st;
	pthread_mutex_unlock(&dc->lock);
	return 0;
}

struct tfs_store *tfs_diskcache_inner(struct tfs_store *s)
{
	return s && s->ops == &diskcache_ops ? dc_of(s)->inner : s;
}
