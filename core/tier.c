/* SPDX-License-Identifier: MIT */
/* tier: reads of objects through a shared tier store, checked against their ids, and the
 * background writer that puts what the origin served into the tier. */
#include "tier.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "object.h"
#include "util.h"

/* A write waiting for the writer thread. */
struct pending {
	struct pending *next;
	char key[TFS_KEY_MAX];
	struct tfs_buf obj;
};

struct tier {
	struct tfs_store base;
	struct tfs_store *origin; /* owned; thread-safe */
	struct tfs_store *tier;	  /* owned; thread-safe */
	uint64_t queue_bytes;	  /* immutable: the most bytes queued */
	pthread_t writer;
	pthread_mutex_t lock;
	pthread_cond_t wake;	     /* the writer: work or stop */
	pthread_cond_t idle;	     /* flush: queue empty and nothing under way */
	struct pending *head, *tail; /* protected by lock */
	int writing;		     /* protected by lock: a write is under way */
	int stopping;		     /* protected by lock */
	int started;		     /* protected by lock: the writer runs (from the first write,
				      * so that a daemon forks before any thread exists) */
	struct tfs_tier_stats st;    /* protected by lock */
};

static const struct tfs_store_ops tier_ops;

static struct tier *tier_of(struct tfs_store *s)
{
	return (struct tier *)s;
}

static void count(struct tier *t, uint64_t *field, uint64_t n)
{
	pthread_mutex_lock(&t->lock);
	*field += n;
	pthread_mutex_unlock(&t->lock);
}

/* The tier's key of an object: "objects/<hh>/<62 hex>", the same for every lake. */
static void tier_key(const struct tfs_id *id, char out[TFS_KEY_MAX])
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(id, hex);
	snprintf(out, TFS_KEY_MAX, "objects/%.2s/%s", hex, hex + 2);
}

/* --- the writer ------------------------------------------------------------------------------ */

static void *writer_main(void *arg)
{
	struct tier *t = arg;

	pthread_mutex_lock(&t->lock);
	for (;;) {
		struct pending *p;
		int rc;

		while (!t->head && !t->stopping)
			pthread_cond_wait(&t->wake, &t->lock);
		if (t->stopping)
			break;
		p = t->head;
		t->head = p->next;
		if (!t->head)
			t->tail = NULL;
		t->writing = 1;
		pthread_mutex_unlock(&t->lock);
		rc = tfs_store_put(t->tier, p->key, p->obj.data, p->obj.len);
		if (rc)
			tfs_debug("%s/%s: not written to the tier: %s", t->tier->url, p->key,
				  strerror(-rc));
		pthread_mutex_lock(&t->lock);
		t->st.pending_bytes -= p->obj.len;
		if (rc) {
			t->st.write_errors++;
		} else {
			t->st.writes++;
			t->st.write_bytes += p->obj.len;
		}
		t->writing = 0;
		if (!t->head)
			pthread_cond_broadcast(&t->idle);
		tfs_buf_free(&p->obj);
		free(p);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* Queue a copy of obj for the tier, unless the queue is full. */
static void enqueue(struct tier *t, const struct tfs_id *id, const struct tfs_buf *obj)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p || tfs_buf_append(&p->obj, obj->data, obj->len)) {
		if (p)
			tfs_buf_free(&p->obj);
		free(p);
		count(t, &t->st.dropped, 1);
		return;
	}
	tier_key(id, p->key);
	pthread_mutex_lock(&t->lock);
	if (!t->started && !t->stopping && !pthread_create(&t->writer, NULL, writer_main, t))
		t->started = 1;
	if (!t->started || t->stopping || t->st.pending_bytes + obj->len > t->queue_bytes) {
		t->st.dropped++;
		pthread_mutex_unlock(&t->lock);
		tfs_buf_free(&p->obj);
		free(p);
		return;
	}
	t->st.pending_bytes += obj->len;
	if (t->tail)
		t->tail->next = p;
	else
		t->head = p;
	t->tail = p;
	pthread_cond_signal(&t->wake);
	pthread_mutex_unlock(&t->lock);
}

void tfs_tier_flush(struct tfs_store *s)
{
	struct tier *t;

	if (!s || s->ops != &tier_ops)
		return;
	t = tier_of(s);
	pthread_mutex_lock(&t->lock);
	while ((t->head || t->writing) && !t->stopping)
		pthread_cond_wait(&t->idle, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

/* --- reads ----------------------------------------------------------------------------------- */

/* The object from the tier if it is there and is what its id says; -ENOENT otherwise. */
static int from_tier(struct tier *t, const struct tfs_id *id, struct tfs_buf *out)
{
	char key[TFS_KEY_MAX];
	struct tfs_id got;
	int rc;

	tier_key(id, key);
	rc = tfs_store_get(t->tier, key, out);
	if (rc == -ENOENT) {
		count(t, &t->st.misses, 1);
		return rc;
	}
	if (rc) {
		tfs_debug("%s/%s: tier read failed (%s); reading the origin", t->tier->url, key,
			  strerror(-rc));
		count(t, &t->st.errors, 1);
		return -ENOENT;
	}
	tfs_id_of(out->data, out->len, &got);
	if (!tfs_id_eq(&got, id) || tfs_object_check(out->data, out->len)) {
		tfs_warn("%s/%s: tier object is not what its id says (%zu bytes: stale, truncated "
			 "or forged); ignored, reading the origin",
			 t->tier->url, key, out->len);
		count(t, &t->st.bad, 1);
		return -ENOENT;
	}
	pthread_mutex_lock(&t->lock);
	t->st.hits++;
	t->st.hit_bytes += out->len;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

static int tier_get_object(struct tfs_store *s, const char *key, uint64_t urgent_size,
			   struct tfs_buf *out, int *verified)
{
	struct tier *t = tier_of(s);
	struct tfs_id id;
	int rc;

	out->len = 0;
	if (!tfs_object_key_parse(key, &id)) {
		*verified = 0;
		return tfs_store_get(t->origin, key, out);
	}
	if (!from_tier(t, &id, out)) {
		*verified = 1;
		return 0;
	}
	/* Checked there: only objects that pass reach the tier. */
	rc = tfs_store_get_object(t->origin, key, urgent_size, out);
	*verified = !rc;
	if (!rc)
		enqueue(t, &id, out);
	return rc;
}

/* --- everything else goes to the origin ------------------------------------------------------ */

static int tier_get(struct tfs_store *s, const char *key, struct tfs_buf *out)
{
	return tfs_store_get(tier_of(s)->origin, key, out);
}

static ssize_t tier_get_range(struct tfs_store *s, const char *key, uint64_t off, void *buf,
			      size_t len)
{
	return tfs_store_get_range(tier_of(s)->origin, key, off, buf, len);
}

static int tier_head(struct tfs_store *s, const char *key, uint64_t *size)
{
	return tfs_store_head(tier_of(s)->origin, key, size);
}

static int tier_stat(struct tfs_store *s, const char *key, uint64_t *size, int64_t *mtime)
{
	return tfs_store_stat(tier_of(s)->origin, key, size, mtime);
}

static int tier_put(struct tfs_store *s, const char *key, const void *data, size_t len)
{
	return tfs_store_put(tier_of(s)->origin, key, data, len);
}

static int tier_put_new(struct tfs_store *s, const char *key, const void *data, size_t len)
{
	return tfs_store_put_new(tier_of(s)->origin, key, data, len);
}

static int tier_cas(struct tfs_store *s, const char *key, const void *old, size_t old_len,
		    const void *data, size_t len)
{
	return tfs_store_cas(tier_of(s)->origin, key, old, old_len, data, len);
}

static int tier_list(struct tfs_store *s, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	return tfs_store_list(tier_of(s)->origin, prefix, fn, arg);
}

static int tier_del(struct tfs_store *s, const char *key)
{
	return tfs_store_del(tier_of(s)->origin, key);
}

static int tier_sweep(struct tfs_store *s, const char *prefix, int64_t older_than, int dry_run)
{
	return tfs_store_sweep(tier_of(s)->origin, prefix, older_than, dry_run);
}

static int tier_open(const char *url, unsigned flags, struct tfs_store **out)
{
	(void)url;
	(void)flags;
	(void)out;
	return -EOPNOTSUPP; /* made by tfs_tier_wrap, never opened by URL */
}

static void tier_cancel(struct tfs_store *s)
{
	tfs_store_cancel(tier_of(s)->origin);
	tfs_store_cancel(tier_of(s)->tier);
}

static void tier_use_pool(struct tfs_store *s, struct tfs_workpool *pool)
{
	tfs_store_use_pool(tier_of(s)->origin, pool);
}

static void tier_close(struct tfs_store *s)
{
	struct tier *t = tier_of(s);

	pthread_mutex_lock(&t->lock);
	t->stopping = 1;
	pthread_cond_broadcast(&t->wake);
	pthread_cond_broadcast(&t->idle);
	pthread_mutex_unlock(&t->lock);
	if (t->started)
		pthread_join(t->writer, NULL);
	while (t->head) {
		struct pending *p = t->head;

		t->head = p->next;
		tfs_buf_free(&p->obj);
		free(p);
	}
	tfs_store_close(t->tier);
	tfs_store_close(t->origin);
	pthread_cond_destroy(&t->wake);
	pthread_cond_destroy(&t->idle);
	pthread_mutex_destroy(&t->lock);
	free(t->base.url);
	free(t);
}

static const struct tfs_store_ops tier_ops = {
	.scheme = "tier",
	.open = tier_open,
	.close = tier_close,
	.get = tier_get,
	.get_object = tier_get_object,
	.get_range = tier_get_range,
	.head = tier_head,
	.stat = tier_stat,
	.put = tier_put,
	.put_new = tier_put_new,
	.cas = tier_cas,
	.list = tier_list,
	.del = tier_del,
	.sweep = tier_sweep,
	.cancel = tier_cancel,
	.use_pool = tier_use_pool,
};

int tfs_tier_wrap(struct tfs_store *origin, struct tfs_store *tier, uint64_t queue_bytes,
		  struct tfs_store **out)
{
	struct tier *t = calloc(1, sizeof(*t));

	if (!t || !(t->base.url = strdup(origin->url))) {
		free(t);
		return -ENOMEM;
	}
	t->base.ops = &tier_ops;
	t->origin = origin;
	t->tier = tier;
	t->queue_bytes = queue_bytes;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->wake, NULL);
	pthread_cond_init(&t->idle, NULL);
	*out = &t->base;
	return 0;
}

int tfs_tier_stats(struct tfs_store *s, struct tfs_tier_stats *st)
{
	struct tier *t;

	if (!s || s->ops != &tier_ops)
		return -EINVAL;
	t = tier_of(s);
	pthread_mutex_lock(&t->lock);
	*st = t->st;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

struct tfs_store *tfs_tier_origin(struct tfs_store *s)
{
	return s && s->ops == &tier_ops ? tier_of(s)->origin : s;
}

struct tfs_store *tfs_tier_store(struct tfs_store *s)
{
	return s && s->ops == &tier_ops ? tier_of(s)->tier : NULL;
}
