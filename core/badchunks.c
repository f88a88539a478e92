/* SPDX-License-Identifier: MIT */
/* badchunks: the process's record of chunks damaged for good. */
#include "badchunks.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tfs_bad_chunk *bad; /* protected by lock */
static size_t nbad, cap;	  /* protected by lock */
static uint64_t dropped;	  /* past TFS_BAD_CHUNKS_MAX; protected by lock */
static unsigned generation;	  /* records made; written under lock, read atomically */

static int find(const struct tfs_id *id)
{
	for (size_t i = 0; i < nbad; i++)
		if (tfs_id_eq(&bad[i].id, id))
			return 1;
	return 0;
}

int tfs_bad_chunk_note(const struct tfs_bad_chunk *b)
{
	int first = 0;

	pthread_mutex_lock(&lock);
	if (!find(&b->id)) {
		if (cap < TFS_BAD_CHUNKS_MAX)
			(void)TFS_GROW(bad, &cap, nbad + 1); /* else, or out of memory: dropped */
		if (nbad < cap)
			bad[nbad++] = *b;
		else
			dropped++;
		first = 1;
		__atomic_add_fetch(&generation, 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&lock);
	return first;
}

static int id_cmp(const void *a, const void *b)
{
	return memcmp(a, b, sizeof(struct tfs_id));
}

int tfs_bad_chunks_ids(struct tfs_id **ids, size_t *n)
{
	int rc = 0;

	pthread_mutex_lock(&lock);
	*n = nbad;
	*ids = malloc((nbad ? nbad : 1) * sizeof(**ids));
	if (!*ids)
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < nbad; i++)
		(*ids)[i] = bad[i].id;
	pthread_mutex_unlock(&lock);
	if (!rc)
		qsort(*ids, *n, sizeof(**ids), id_cmp);
	return rc;
}

int tfs_bad_chunks_search(const struct tfs_id *ids, size_t n, const struct tfs_id *id)
{
	return n && bsearch(id, ids, n, sizeof(*ids), id_cmp) != NULL;
}

unsigned tfs_bad_chunks_generation(void)
{
	return __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}

int tfs_bad_chunks_text(struct tfs_buf *out)
{
	int rc;

	pthread_mutex_lock(&lock);
	rc = tfs_buf_printf(out,
			    "# chunks damaged for good: %zu (%" PRIu64
			    " more not listed); their rows are bad rows\n"
			    "# column chunk first_row last_row object reason\n",
			    nbad, dropped);
	for (size_t i = 0; !rc && i < nbad; i++)
		rc = tfs_buf_printf(out, "%s %" PRIu64 " %" PRIu64 " %" PRIu64 " %s %s\n",
				    bad[i].column, bad[i].chunk, bad[i].first_row, bad[i].last_row,
				    bad[i].where, bad[i].why);
	pthread_mutex_unlock(&lock);
	return rc;
}
