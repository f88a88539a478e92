/* SPDX-License-Identifier: MIT */
/* store: the object-store interface (get, ranged get, put, compare-and-swap, list) and its
 * backends. Keys are '/'-separated paths relative to the store's root URL. */
#ifndef TFS_STORE_H
#define TFS_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util.h"
#include "workpool.h"

struct tfs_store;

struct tfs_store_put; /* a put_new begun and not yet ended (put_new_begin) */

/* What a reply says of the object it came from, for a reader of one object in many ranges. */
struct tfs_store_version {
	int64_t size;  /* -1: not said */
	char tag[132]; /* its validator (ETag, quotes included); "": none */
	int tag_md5;   /* tag is the MD5 of the object's bytes, in hex (S3's, of most objects) */
};

/* list callback: one call per child of the listed prefix; is_dir says it has children itself.
 * A non-zero return stops the listing and is returned by tfs_store_list. */
typedef int (*tfs_store_list_fn)(void *arg, const char *name, int is_dir);

/* A backend: a const operation table. Every function returns 0 or -errno; -ENOENT when the key
 * does not exist. */
struct tfs_store_ops {
	const char *scheme; /* "file" */
	int (*open)(const char *url, unsigned flags, struct tfs_store **out);
	void (*close)(struct tfs_store *s);
	/* Whole value of key into out (reset first): refs, markers, anything not content-addressed;
	 * the backend checks what it can (S3: a whole body against its MD5 ETag). */
	int (*get)(struct tfs_store *s, const char *key, struct tfs_buf *out);
	/* A content-addressed object (a key of tfs_object_key), whose own checksum vouches for it.
	 * urgent_size, when not 0, is its size (known from a manifest) and says a reader waits for
	 * it: remote backends then request parallel ranges at once, so that it arrives sooner than
	 * one connection brings it (-EIO when the object is another size). *verified is set when
	 * out has passed tfs_object_check already (the disk cache checks its files); otherwise
	 * tfs_store_get_object checks it. NULL: get. */
	int (*get_object)(struct tfs_store *s, const char *key, uint64_t urgent_size,
			  struct tfs_buf *out, int *verified);
	/* Up to len bytes at off; returns the count (short only at the end of the object). */
	ssize_t (*get_range)(struct tfs_store *s, const char *key, uint64_t off, void *buf,
			     size_t len);
	/* get_range, and what the reply says of the object (its size and validator), so that a
	 * reader of it in many ranges can tell they all came from one version of it. NULL: nothing
	 * said (tfs_store_get_range_of falls back to get_range). */
	ssize_t (*get_range_of)(struct tfs_store *s, const char *key, uint64_t off, void *buf,
				size_t len, struct tfs_store_version *v);
	int (*head)(struct tfs_store *s, const char *key, uint64_t *size);
	/* Size and last-modified time (seconds since the epoch). */
	int (*stat)(struct tfs_store *s, const char *key, uint64_t *size, int64_t *mtime);
	/* Atomic replace: a reader sees the old or the new content, never a mix. */
	int (*put)(struct tfs_store *s, const char *key, const void *data, size_t len);
	/* Create only if absent; -EEXIST (nothing written) when the key exists, in which case its
	 * modification time is refreshed so a concurrent gc's grace period covers it again. */
	int (*put_new)(struct tfs_store *s, const char *key, const void *data, size_t len);
	/* put_new in two steps, for a writer of many objects. begin stores the bytes where key
	 * does not show them yet and starts writing them out (-EEXIST as put_new: then *put stays
	 * NULL). end takes a batch of them at once, makes each durable and then visible at its key
	 * and frees them (entries set NULL); durable as a batch, they cost the file backend a
	 * journal commit or two where put_new costs two each (and it drops their pages from the
	 * page cache once durable: bulk data written, not read back). NULL, both, for backends
	 * where put_new serves as well (begin does all of it). */
	int (*put_new_begin)(struct tfs_store *s, const char *key, const void *data, size_t len,
			     struct tfs_store_put **put);
	int (*put_new_end)(struct tfs_store *s, struct tfs_store_put **puts, size_t n);
	/* Compare-and-swap: replace key's content with data only if it is exactly `old` (old NULL:
	 * only if the key does not exist). -EAGAIN when the current content differs. */
	int (*cas)(struct tfs_store *s, const char *key, const void *old, size_t old_len,
		   const void *data, size_t len);
	int (*list)(struct tfs_store *s, const char *prefix, tfs_store_list_fn fn, void *arg);
	int (*del)(struct tfs_store *s, const char *key);
	/* Remove writers' leftovers (temporary files, unfinished uploads, abandoned locks) under
	 * prefix last modified at or before the given time (seconds since the epoch); with dry_run
	 * only count them. NULL for backends that leave none. Returns the count or -errno. */
	int (*sweep)(struct tfs_store *s, const char *prefix, int64_t older_than, int dry_run);
	/* Make requests in flight and every later one fail at once with -ECANCELED (the daemon is
	 * stopping and must not wait out retries against an endpoint that went away); NULL for
	 * backends whose requests never wait on a network. */
	void (*cancel)(struct tfs_store *s);
	/* Run parallel requests (ranges of one object) as tasks on pool from now on; NULL: on
	 * threads of their own. NULL for backends without parallel requests. */
	void (*use_pool)(struct tfs_store *s, struct tfs_workpool *pool);
};

/* Requests made through a store (the inline wrappers below count them, atomically). */
struct tfs_store_counters {
	uint64_t gets, ranged_gets, heads, puts, lists, deletes;
	uint64_t urgent_gets; /* object gets a reader waited for (urgent_size; in gets too) */
	uint64_t bytes_read, bytes_written;
	/* Time in get requests, whole, ranged and objects' (tfs_store_get_object's own check left
	 * out), summed over the threads that made them: the disk's or the network's share. */
	uint64_t read_ns;
	/* Attempts repeated by remote backends (transport errors, 5xx/429, short or damaged
	 * bodies), counted by the backend itself; 0 for file://. */
	uint64_t retries;
};

/* Fields every backend's store begins with. */
struct tfs_store {
	const struct tfs_store_ops *ops;
	char *url;			 /* the root URL, without a trailing '/' */
	struct tfs_store_counters count; /* atomic */
	/* Its requests go over TLS, whose records are authenticated: no byte is damaged on the
	 * way unnoticed, as one may be where only TCP's 16-bit checksum guards it. */
	int tls;
};

extern const struct tfs_store_ops tfs_store_file_ops;

/* Whether s is a local directory (the file backend): a request costs a read, not a round trip,
 * so reading two small pieces beats one large one. */
static inline int tfs_store_is_local(const struct tfs_store *s)
{
	return s->ops == &tfs_store_file_ops;
}

/* Whether tag (a version's, with tag_md5 set: a quoted ETag of 32 hex digits) states md5. */
int tfs_store_tag_md5_is(const char *tag, const unsigned char md5[16]);

/* A consistent-enough snapshot of a store's counters. */
void tfs_store_counters(const struct tfs_store *s, struct tfs_store_counters *out);

extern const struct tfs_store_ops tfs_store_http_ops; /* read-only, see store_http.c */
extern const struct tfs_store_ops tfs_store_https_ops;
extern const struct tfs_store_ops tfs_store_s3_ops;

/* TFS_STORE_CREATE: create the lake root if it does not exist (writers only). */
#define TFS_STORE_CREATE 1u

/* Open the store for a URL: file:///abs/path (or a bare absolute path),
 * s3://[REMOTE@]BUCKET[/PREFIX], http(s)://HOST/PATH (read-only). */
int tfs_store_open(const char *url, unsigned flags, struct tfs_store **out);
void tfs_store_close(struct tfs_store *s);

/* Split "<lake-url>/<dataset>" into its parts. Both outputs are allocated for the caller.
 * -EINVAL when the URL has no dataset component or the name is not a valid name. */
int tfs_url_split(const char *url, char **lake_url, char **dataset);

#define TFS_STORE_COUNT(s, field, n) __atomic_add_fetch(&(s)->count.field, (n), __ATOMIC_RELAXED)

static inline int tfs_store_get(struct tfs_store *s, const char *key, struct tfs_buf *out)
{
	const uint64_t t0 = tfs_now_ns();
	int rc = s->ops->get(s, key, out);

	TFS_STORE_COUNT(s, read_ns, tfs_now_ns() - t0);
	TFS_STORE_COUNT(s, gets, 1);
	if (!rc)
		TFS_STORE_COUNT(s, bytes_read, out->len);
	return rc;
}

/* A content-addressed object (see get_object), its checksum verified: the one place a fetched
 * object is checked, so that a chunk is verified once per fetch and decoded without another
 * check. An object that fails is fetched again once, and is -EBADMSG (logged, naming the object)
 * when it fails again; a newer format version is -EPROTO. */
int tfs_store_get_object(struct tfs_store *s, const char *key, uint64_t urgent_size,
			 struct tfs_buf *out);

static inline ssize_t tfs_store_get_range(struct tfs_store *s, const char *key, uint64_t off,
					  void *buf, size_t len)
{
	const uint64_t t0 = tfs_now_ns();
	ssize_t rc = s->ops->get_range(s, key, off, buf, len);

	TFS_STORE_COUNT(s, read_ns, tfs_now_ns() - t0);
	TFS_STORE_COUNT(s, ranged_gets, 1);
	if (rc > 0)
		TFS_STORE_COUNT(s, bytes_read, (uint64_t)rc);
	return rc;
}

/* tfs_store_get_range, with what the reply said of the object (v->size -1 and v->tag "" when the
 * backend says nothing). */
static inline ssize_t tfs_store_get_range_of(struct tfs_store *s, const char *key, uint64_t off,
					     void *buf, size_t len, struct tfs_store_version *v)
{
	uint64_t t0;
	ssize_t rc;

	v->size = -1;
	v->tag[0] = 0;
	v->tag_md5 = 0;
	if (!s->ops->get_range_of)
		return tfs_store_get_range(s, key, off, buf, len);
	t0 = tfs_now_ns();
	rc = s->ops->get_range_of(s, key, off, buf, len, v);
	TFS_STORE_COUNT(s, read_ns, tfs_now_ns() - t0);
	TFS_STORE_COUNT(s, ranged_gets, 1);
	if (rc > 0)
		TFS_STORE_COUNT(s, bytes_read, (uint64_t)rc);
	return rc;
}

static inline int tfs_store_head(struct tfs_store *s, const char *key, uint64_t *size)
{
	TFS_STORE_COUNT(s, heads, 1);
	return s->ops->head(s, key, size);
}

static inline int tfs_store_stat(struct tfs_store *s, const char *key, uint64_t *size,
				 int64_t *mtime)
{
	TFS_STORE_COUNT(s, heads, 1);
	return s->ops->stat(s, key, size, mtime);
}

static inline int tfs_store_sweep(struct tfs_store *s, const char *prefix, int64_t older_than,
				  int dry_run)
{
	return s->ops->sweep ? s->ops->sweep(s, prefix, older_than, dry_run) : 0;
}

static inline void tfs_store_cancel(struct tfs_store *s)
{
	if (s->ops->cancel)
		s->ops->cancel(s);
}

static inline void tfs_store_use_pool(struct tfs_store *s, struct tfs_workpool *pool)
{
	if (s->ops->use_pool)
		s->ops->use_pool(s, pool);
}

static inline int tfs_store_put(struct tfs_store *s, const char *key, const void *d, size_t n)
{
	TFS_STORE_COUNT(s, puts, 1);
	TFS_STORE_COUNT(s, bytes_written, n);
	return s->ops->put(s, key, d, n);
}

static inline int tfs_store_put_new(struct tfs_store *s, const char *key, const void *d, size_t n)
{
	TFS_STORE_COUNT(s, puts, 1);
	TFS_STORE_COUNT(s, bytes_written, n);
	return s->ops->put_new(s, key, d, n);
}

static inline int tfs_store_put_new_begin(struct tfs_store *s, const char *key, const void *d,
					  size_t n, struct tfs_store_put **put)
{
	*put = NULL;
	if (!s->ops->put_new_begin)
		return tfs_store_put_new(s, key, d, n);
	TFS_STORE_COUNT(s, puts, 1);
	TFS_STORE_COUNT(s, bytes_written, n);
	return s->ops->put_new_begin(s, key, d, n, put);
}

/* The first error of the batch; every entry is NULL after. */
static inline int tfs_store_put_new_end(struct tfs_store *s, struct tfs_store_put **puts, size_t n)
{
	return s->ops->put_new_end ? s->ops->put_new_end(s, puts, n) : 0;
}

/* Batches of begun puts ended on a thread of their own, one batch at a time, so that their
 * fsyncs wait there and not on a thread with chunks to make. A writer of many objects starts a
 * batch when it has one and waits for the last before anything refers to them. Zeroed: idle. */
struct tfs_put_ender {
	pthread_t thread;
	int running;
	struct tfs_store *s;
	struct tfs_store_put **puts; /* the batch (owned) */
	size_t n;
	int rc;
};

/* Wait for the batch under way, then start ending puts[0..n) of store s (the array is taken;
 * ended here, at once, if no thread can be had). Returns the first error of the batch waited for,
 * or of this one when ended here. */
int tfs_put_ender_start(struct tfs_put_ender *e, struct tfs_store *s, struct tfs_store_put **puts,
			size_t n);
/* Wait for the batch under way: its first error. */
int tfs_put_ender_wait(struct tfs_put_ender *e);

static inline int tfs_store_cas(struct tfs_store *s, const char *key, const void *old,
				size_t old_len, const void *d, size_t n)
{
	TFS_STORE_COUNT(s, puts, 1);
	return s->ops->cas(s, key, old, old_len, d, n);
}

static inline int tfs_store_list(struct tfs_store *s, const char *prefix, tfs_store_list_fn fn,
				 void *arg)
{
	TFS_STORE_COUNT(s, lists, 1);
	return s->ops->list(s, prefix, fn, arg);
}

static inline int tfs_store_del(struct tfs_store *s, const char *key)
{
	TFS_STORE_COUNT(s, deletes, 1);
	return s->ops->del(s, key);
}

#endif
