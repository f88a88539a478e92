/* SPDX-License-Identifier: MIT */
/* fetchahead: a tree's files fetched by threads of their own into a ring of slots, ahead of the
 * threads that take them. */
#include "fetchahead.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* A slot of the ring: file i lives in slot i % ahead. */
struct slot {
	size_t i; /* the file it holds or is fetching (state not EMPTY) */
	enum { EMPTY, BUSY, READY, TAKEN } state;
	int rc;		    /* READY: the GET's result */
	struct tfs_buf buf; /* READY: the file's bytes */
};

struct tfs_fetchahead {
	struct tfs_store *tree;
	const char *(*name)(void *arg, size_t i);
	void *arg;
	tfs_fetchahead_get_fn get;
	size_t n;
	unsigned ahead;
	uint64_t hold;
	pthread_t *threads;
	unsigned nthreads;

	pthread_mutex_t lock;
	pthread_cond_t moved; /* a slot changed state, or stop */
	struct slot *slots;   /* guarded by lock */
	size_t next;	      /* guarded by lock: the next file a fetcher begins */
	size_t low;	      /* guarded by lock: every file before low was taken */
	uint64_t held;	      /* guarded by lock: bytes of files fetched, not yet taken */
	int stopping;	      /* guarded by lock */
};

/* Whether file i may begin: it is fewer than `ahead` past the lowest file not yet taken (so its
 * slot is free, and the slots low's loop in take reads are not reused before it passes them),
 * and the bytes held leave room, or it is that lowest file (so that its taker always can). */
static int may_begin(const struct tfs_fetchahead *fa, size_t i)
{
	return i < fa->low + fa->ahead && (fa->held <= fa->hold || i == fa->low);
}

static void *fetcher(void *arg)
{
	struct tfs_fetchahead *fa = arg;

	pthread_mutex_lock(&fa->lock);
	while (!fa->stopping && fa->next < fa->n) {
		const size_t i = fa->next++;
		struct slot *s = &fa->slots[i % fa->ahead];
		struct tfs_buf buf = { 0 };
		int rc;

		while (!fa->stopping && !may_begin(fa, i))
			pthread_cond_wait(&fa->moved, &fa->lock);
		if (fa->stopping)
			break;
		s->i = i;
		s->state = BUSY;
		pthread_mutex_unlock(&fa->lock);
		rc = fa->get(fa->tree, fa->name(fa->arg, i), &buf);
		pthread_mutex_lock(&fa->lock);
		s->rc = rc;
		s->buf = buf;
		s->state = READY;
		fa->held += buf.len;
		pthread_cond_broadcast(&fa->moved);
	}
	pthread_mutex_unlock(&fa->lock);
	return NULL;
}

int tfs_fetchahead_get_small(struct tfs_store *tree, const char *key, struct tfs_buf *out)
{
	struct tfs_store_version v;
	ssize_t got;

	out->len = 0;
	if (tfs_buf_reserve(out, TFS_FETCHAHEAD_SMALL))
		return -ENOMEM;
	got = tfs_store_get_range_of(tree, key, 0, out->data, TFS_FETCHAHEAD_SMALL, &v);
	if (got == TFS_FETCHAHEAD_SMALL && v.size != TFS_FETCHAHEAD_SMALL)
		got = -EFBIG; /* more to come (or a size not said) */
	if (got < 0) {
		tfs_buf_free(out); /* not held while it waits to be taken */
		return (int)got;
	}
	out->len = (size_t)got; /* its pages past len were never touched */
	return 0;
}

/* tfs_store_get is inline: this is its address. */
static int store_get(struct tfs_store *tree, const char *key, struct tfs_buf *out)
{
	return tfs_store_get(tree, key, out);
}

int tfs_fetchahead_start(struct tfs_store *tree, size_t n, const char *(*name)(void *arg, size_t i),
			 void *arg, tfs_fetchahead_get_fn get, unsigned inflight, unsigned ahead,
			 uint64_t hold, struct tfs_fetchahead **out)
{
	struct tfs_fetchahead *fa = calloc(1, sizeof(*fa));
	pthread_attr_t attr;
	int rc = 0;

	*out = NULL;
	if (!fa)
		return -ENOMEM;
	assert(inflight > 0 && ahead >= inflight);
	*fa = (struct tfs_fetchahead){ .tree = tree,
				       .name = name,
				       .arg = arg,
				       .get = get ? get : store_get,
				       .n = n,
				       .ahead = ahead,
				       .hold = hold };
	fa->slots = calloc(ahead, sizeof(*fa->slots));
	fa->threads = calloc(inflight, sizeof(*fa->threads));
	if (!fa->slots || !fa->threads) {
		free(fa->slots);
		free(fa->threads);
		free(fa);
		return -ENOMEM;
	}
	pthread_mutex_init(&fa->lock, NULL);
	pthread_cond_init(&fa->moved, NULL);
	/* A fetcher waits in a GET and little else: a stack of 1 MiB (libcurl and TLS use tens of
	 * KiB; a sanitizer's build several times that), not the default 8 MiB, for the hundreds a
	 * many-core import may run. */
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 1u << 20);
	for (unsigned t = 0; t < inflight && t < n; t++) {
		rc = -pthread_create(&fa->threads[t], &attr, fetcher, fa);
		if (rc)
			break;
		fa->nthreads++;
	}
	pthread_attr_destroy(&attr);
	if (rc) {
		tfs_fetchahead_stop(fa);
		return rc;
	}
	*out = fa;
	return 0;
}

static const char *tree_name(void *arg, size_t i)
{
	return ((const struct tfs_filetree *)arg)->f[i].rel;
}

int tfs_fetchahead_tree(const struct tfs_filetree *ft, tfs_fetchahead_get_fn get, unsigned least,
			struct tfs_fetchahead **out)
{
	struct tfs_config_http cfg;
	int rc;

	*out = NULL;
	if (!ft->tree || !ft->n || tfs_store_is_local(ft->tree))
		return 0;
	rc = tfs_config_http(&cfg);
	if (rc)
		return rc;
	return tfs_fetchahead_start(ft->tree, ft->n, tree_name, (void *)ft, get, cfg.max_inflight,
				    least > 2 * cfg.max_inflight ? least : 2 * cfg.max_inflight,
				    64u << 20, out);
}

int tfs_fetchahead_take(struct tfs_fetchahead *fa, size_t i, struct tfs_buf *out)
{
	struct slot *s = &fa->slots[i % fa->ahead];
	int rc;

	assert(i < fa->n);
	pthread_mutex_lock(&fa->lock);
	while (!(s->i == i && s->state == READY) && !fa->stopping)
		pthread_cond_wait(&fa->moved, &fa->lock);
	if (fa->stopping) {
		pthread_mutex_unlock(&fa->lock);
		return -ECANCELED;
	}
	rc = s->rc;
	tfs_buf_free(out);
	*out = s->buf;
	memset(&s->buf, 0, sizeof(s->buf));
	fa->held -= out->len;
	s->state = TAKEN;
	while (fa->low < fa->n && fa->slots[fa->low % fa->ahead].i == fa->low &&
	       fa->slots[fa->low % fa->ahead].state == TAKEN)
		fa->low++;
	pthread_cond_broadcast(&fa->moved);
	pthread_mutex_unlock(&fa->lock);
	return rc;
}

void tfs_fetchahead_stop(struct tfs_fetchahead *fa)
{
	if (!fa)
		return;
	pthread_mutex_lock(&fa->lock);
	fa->stopping = 1;
	pthread_cond_broadcast(&fa->moved);
	pthread_mutex_unlock(&fa->lock);
	for (unsigned t = 0; t < fa->nthreads; t++)
		pthread_join(fa->threads[t], NULL);
	for (unsigned k = 0; k < fa->ahead; k++)
		tfs_buf_free(&fa->slots[k].buf);
	pthread_cond_destroy(&fa->moved);
	pthread_mutex_destroy(&fa->lock);
	free(fa->slots);
	free(fa->threads);
	free(fa);
}
