/* SPDX-License-Identifier: MIT */
/* source: local paths and URLs of import sources; a URL's object fetched in parallel ranges, in
 * the background, into an unnamed file its readers wait on. */
#include "source.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "config.h"
#include "http.h"
#include "httpparts.h"
#include "spool.h"
#include "util.h"

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

/* A source being read. A URL's object is fetched in pieces, `parallel` at once, by a thread of
 * its own (the driver, running tfs_parallel); its readers wait for the bytes they read. */
struct tfs_source {
	char *path;
	int fd;
	uint64_t size;
	/* A URL's fetch (store NULL for a local file): */
	struct tfs_store *store;
	const char *key; /* in path */
	uint64_t piece;
	unsigned parallel;
	size_t npieces;
	pthread_t driver;
	int driving;	    /* the driver was started (joined by close) */
	atomic_int stopped; /* close came first: pieces not started are not fetched */
	pthread_mutex_t lock;
	pthread_cond_t grew; /* ready or finished moved */
	pthread_cond_t room; /* the window moved, or close came */
	/* A source read once, front to back (TFS_SOURCE_ONCE): the fetch runs at most `ahead`
	 * bytes past what its reader released (or to what it waits for, if further), and what was
	 * released is given back, so that it holds about `ahead` bytes however large it is. */
	uint64_t ahead;	   /* guarded by lock; 0: the whole object, as fast as it comes */
	int in_memory;	   /* fd is a memfd (set at open) */
	int tail_first;	   /* TFS_SOURCE_TAIL_FIRST (set at open) */
	uint64_t released; /* guarded by lock: [0, released) will not be read again */
	uint64_t wanted;   /* guarded by lock: the furthest end a reader waited for */
	uint64_t punched;  /* guarded by lock: [0, punched) was given back */
	uint8_t *done;	   /* guarded by lock: per piece, in fd */
	size_t gap;	   /* guarded by lock: the first piece not done */
	uint64_t ready;	   /* guarded by lock: [0, ready) is in fd */
	int finished;	   /* guarded by lock: the driver returned */
	int err;	   /* guarded by lock: its error */
	/* guarded by lock: the object's ETag as the first reply said it, "" until one did, and
	 * whether it is the MD5 of the object's bytes */
	char tag[sizeof(((struct tfs_store_version *)0)->tag)];
	int tag_md5;
	/* The object's bytes checked against that MD5 as they arrive, in order, by a thread of
	 * its own (the hasher): a damaged range would otherwise pass as the object's bytes. */
	pthread_t hasher;
	int hashing_thread; /* the hasher was started (joined by close) */
	/* guarded by lock: whether the hasher may yet read bytes from fd (they are not given back
	 * before it has), or found them damaged; CHECK_OFF when they passed, cannot be checked (no
	 * MD5 ETag, or a single range: the store checks that one itself), or a local file's */
	enum { CHECK_OFF, CHECK_RUNNING, CHECK_BAD } check;
	uint64_t hashed; /* guarded by lock: [0, hashed) was hashed (read from fd) */
	void *spare[64]; /* guarded by lock: piece buffers not in use (a fetcher's at most) */
	unsigned nspare; /* guarded by lock */
};

/* A piece buffer: one left by an earlier piece (already faulted in), or a new one. */
static void *buf_take(struct tfs_source *src)
{
	void *b = NULL;

	pthread_mutex_lock(&src->lock);
	if (src->nspare)
		b = src->spare[--src->nspare];
	pthread_mutex_unlock(&src->lock);
	return b ? b : malloc((size_t)src->piece);
}

static void buf_give(struct tfs_source *src, void *b)
{
	pthread_mutex_lock(&src->lock);
	if (src->nspare < sizeof(src->spare) / sizeof(src->spare[0])) {
		src->spare[src->nspare++] = b;
		b = NULL;
	}
	pthread_mutex_unlock(&src->lock);
	free(b);
}

/* Whether a piece's reply is of the version the others came from: its size the one the HEAD
 * said, its ETag the first reply's. -ESTALE (logged) when not: ranges of two versions would make
 * bytes neither holds. */
static int same_version(struct tfs_source *src, const struct tfs_store_version *v)
{
	char first[sizeof(src->tag)];
	int rc = 0;

	if (v->size >= 0 && (uint64_t)v->size != src->size) {
		tfs_err("%s: changed while it was read: %lld bytes, not %llu", src->path,
			(long long)v->size, (unsigned long long)src->size);
		return -ESTALE;
	}
	if (!v->tag[0])
		return 0;
	pthread_mutex_lock(&src->lock);
	if (!src->tag[0]) {
		memcpy(src->tag, v->tag, sizeof(src->tag));
		src->tag_md5 = v->tag_md5;
	} else if (strcmp(src->tag, v->tag))
		rc = -ESTALE;
	memcpy(first, src->tag, sizeof(first));
	pthread_mutex_unlock(&src->lock);
	if (rc)
		tfs_err("%s: changed while it was read: its ETag went from %s to %s", src->path,
			first, v->tag);
	return rc;
}

/* The piece fetched i-th: in order, or (tail_first) the last two first, then the rest in order;
 * two, so that the tail holds at least a piece's bytes when the last piece is short. */
static size_t piece_of(const struct tfs_source *src, size_t i)
{
	const size_t n = src->npieces, tail = n < 2 ? n : 2;

	if (!src->tail_first)
		return i;
	return i < tail ? n - 1 - i : i - tail;
}

/* What a source read once may give back: the bytes its reader released that are there, and
 * that the hasher has read, while it runs. Called with src->lock held. */
static uint64_t givable(const struct tfs_source *src)
{
	uint64_t upto = src->released < src->ready ? src->released : src->ready;

	return src->check == CHECK_RUNNING && src->hashed < upto ? src->hashed : upto;
}

/* The room to give back now, whole pieces of what is givable (a hole punched is a call into the
 * file system). Called with src->lock held; the caller punches [*from, *to) after letting go. */
static void to_punch(struct tfs_source *src, uint64_t *from, uint64_t *to)
{
	const uint64_t upto = givable(src);

	*from = *to = 0;
	if (!src->ahead || upto - src->punched < src->piece)
		return;
	*from = src->punched;
	*to = upto / src->piece * src->piece;
	src->punched = *to;
}

static void punch(const struct tfs_source *src, uint64_t from, uint64_t to)
{
	if (to > from && fallocate(src->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)from,
				   (off_t)(to - from)) < 0)
		tfs_warn("%s: cannot give back the room of bytes read: %s", src->path,
			 strerror(errno));
}

/* The hasher reads this much at a time. */
#define HASH_STEP (1u << 20)

/* Hash fd's [from, to) into md; 0, or -ECANCELED when close came first. */
static int hash_range(struct tfs_source *src, EVP_MD_CTX *md, uint8_t *buf, uint64_t from,
		      uint64_t to)
{
	while (from < to && !atomic_load(&src->stopped)) {
		const size_t n = (size_t)(to - from < HASH_STEP ? to - from : HASH_STEP);
		const int rc = tfs_pread_full(src->fd, buf, n, from);

		if (rc)
			return rc;
		if (!EVP_DigestUpdate(md, buf, n))
			return -ENOMEM;
		from += n;
	}
	return from < to ? -ECANCELED : 0;
}

/* Whether md's digest is the MD5 that tag (a quoted ETag of 32 hex digits) states. */
static int md5_is(EVP_MD_CTX *md, const char *tag)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	return EVP_DigestFinal_ex(md, d, &n) && n == 16 && tfs_store_tag_md5_is(tag, d);
}

/* The hasher: the object's bytes in order, as they arrive, until the fetch ends, a reply says
 * its ETag is not an MD5, or close comes; then the digest against the ETag. */
static void *hasher(void *arg)
{
	struct tfs_source *src = arg;
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t *buf = malloc(HASH_STEP);
	int rc = md && buf && EVP_DigestInit_ex(md, EVP_md5(), NULL) ? 0 : -ENOMEM;
	int state = CHECK_OFF;

	pthread_mutex_lock(&src->lock);
	while (!rc) {
		uint64_t from = src->hashed, to = src->ready, pfrom, pto;

		if (atomic_load(&src->stopped) || (src->tag[0] && !src->tag_md5) ||
		    (src->finished && src->err))
			break; /* nothing to check against, or nothing more will come */
		if (from == src->size) {
			if (src->tag_md5 && !md5_is(md, src->tag))
				state = CHECK_BAD;
			break;
		}
		if (from == to) {
			pthread_cond_wait(&src->grew, &src->lock);
			continue;
		}
		pthread_mutex_unlock(&src->lock);
		rc = hash_range(src, md, buf, from, to);
		pthread_mutex_lock(&src->lock);
		src->hashed = to;
		to_punch(src, &pfrom, &pto);
		pthread_cond_broadcast(&src->room); /* the window may move */
		pthread_mutex_unlock(&src->lock);
		punch(src, pfrom, pto);
		pthread_mutex_lock(&src->lock);
	}
	if (rc && rc != -ECANCELED)
		tfs_warn("%s: cannot check its bytes against its ETag: %s", src->path,
			 strerror(-rc));
	if (state == CHECK_BAD)
		tfs_err("%s: its bytes are not those its ETag's MD5 (%s) states: %s", src->path,
			src->tag, "damaged on the way");
	src->check = state;
	pthread_cond_broadcast(&src->grew); /* tfs_source_verify waits for this */
	pthread_cond_broadcast(&src->room);
	pthread_mutex_unlock(&src->lock);
	EVP_MD_CTX_free(md);
	free(buf);
	return NULL;
}

static int fetch_piece(void *arg, size_t nth)
{
	struct tfs_source *src = arg;
	const size_t i = piece_of(src, nth);
	const uint64_t off = (uint64_t)i * src->piece;
	const size_t want = (size_t)(src->size - off < src->piece ? src->size - off : src->piece);
	struct tfs_store_version v;
	void *buf;
	ssize_t got;
	int rc = 0;

	pthread_mutex_lock(&src->lock);
	/* A reader that waits past the window moves it: it reads what it waits for. */
	while (src->ahead && !atomic_load(&src->stopped) &&
	       off + want > givable(src) + src->ahead && off >= src->wanted)
		pthread_cond_wait(&src->room, &src->lock);
	pthread_mutex_unlock(&src->lock);
	if (atomic_load(&src->stopped))
		return -ECANCELED;
	buf = buf_take(src);
	if (!buf)
		return -ENOMEM;
	got = tfs_store_get_range_of(src->store, src->key, off, buf, want, &v);
	if (got >= 0 && (rc = same_version(src, &v)) != 0) {
		/* logged */
	} else if (got < 0 || (size_t)got != want) {
		rc = got < 0 ? (int)got : -EIO;
		if (!atomic_load(&src->stopped))
			tfs_err("%s: read at byte %llu: %s", src->path, (unsigned long long)off,
				got < 0 ? strerror(-rc)
					: "the object ended early (changed while read?)");
	} else if ((rc = tfs_pwrite_full(src->fd, buf, want, off)) != 0) {
		tfs_err("%s: cannot hold byte %llu: %s", src->path, (unsigned long long)off,
			strerror(-rc));
	}
	buf_give(src, buf);
	if (rc)
		return rc;
	pthread_mutex_lock(&src->lock);
	src->done[i] = 1;
	while (src->gap < src->npieces && src->done[src->gap])
		src->gap++;
	src->ready = src->gap == src->npieces ? src->size : src->gap * src->piece;
	pthread_cond_broadcast(&src->grew); /* a range waited for may be there, if not a prefix */
	pthread_mutex_unlock(&src->lock);
	return 0;
}

static void fetch_all(struct tfs_source *src)
{
	const int rc =
		tfs_parallel(NULL, TFS_WORK_NORMAL, src->npieces, src->parallel, fetch_piece, src);

	pthread_mutex_lock(&src->lock);
	src->finished = 1;
	src->err = rc;
	pthread_cond_broadcast(&src->grew);
	pthread_mutex_unlock(&src->lock);
}

static void *driver(void *arg)
{
	fetch_all(arg);
	return NULL;
}

/* How far past its reader a source read once is fetched: four times what is in flight at once,
 * so that the fetch never waits on a reader that keeps up with it. */
#define AHEAD_PIECES 4

/* Begin fetching src's object (its store and key set): HEAD, a place to hold it, the pieces on
 * the driver (background) or on this thread. */
static int fetch_begin(struct tfs_source *src, int background, unsigned flags,
		       const struct tfs_store_version *prev)
{
	struct tfs_config_http cfg;
	uint64_t held;
	int rc = tfs_config_http(&cfg);

	if (!rc)
		rc = tfs_store_head(src->store, src->key, &src->size);
	if (rc) {
		if (rc != -ENOMEM)
			tfs_err("%s: %s", src->path,
				rc == -ENOENT ? "no such object" : strerror(-rc));
		return rc;
	}
	if (prev) { /* the version an earlier fetch read, or none */
		if (src->size != (uint64_t)prev->size) {
			tfs_err("%s: changed while it was read: %llu bytes, not %lld", src->path,
				(unsigned long long)src->size, (long long)prev->size);
			return -ESTALE;
		}
		memcpy(src->tag, prev->tag, sizeof(src->tag));
		src->tag_md5 = prev->tag_md5;
	}
	src->piece = cfg.part_size;
	/* Pieces in flight at once, each a connection of its own: an object store caps what one
	 * connection brings (S3: about 85-90 MB/s). */
	src->parallel = cfg.parallel;
	held = src->size;
	src->tail_first = !!(flags & TFS_SOURCE_TAIL_FIRST);
	if ((flags & TFS_SOURCE_ONCE) && !src->tail_first && background) {
		src->ahead = cfg.window ? cfg.window
					: (uint64_t)AHEAD_PIECES * src->parallel * src->piece;
		if (src->ahead < src->piece)
			src->ahead = src->piece; /* a part is what one request fetches */
		/* What is fetched and not yet given back: the window, a piece given back late (a
		 * piece at a time) and one a reader waits for past it. */
		if (src->ahead + 2 * src->piece < held)
			held = src->ahead + 2 * src->piece;
	}
	src->fd = tfs_spool_hold(src->path, src->size, &held, &src->in_memory);
	if (src->fd < 0)
		return src->fd;
	if (held == src->size)
		src->ahead = 0;
	src->npieces = (size_t)((src->size + src->piece - 1) / src->piece);
	src->done = calloc(src->npieces ? src->npieces : 1, 1);
	if (!src->done)
		return -ENOMEM;
	/* One piece is one reply, which the store checks itself against an MD5 ETag; TLS checks
	 * what it carries itself (and hashing costs a core a few hundred MB/s); an ETag known from
	 * an earlier fetch that is not an MD5 leaves nothing to check against. */
	if (src->npieces > 1 && !src->store->tls && !(src->tag[0] && !src->tag_md5)) {
		src->check = CHECK_RUNNING;
		rc = -pthread_create(&src->hasher, NULL, hasher, src);
		if (rc) {
			src->check = CHECK_OFF;
			tfs_err("%s: cannot start a thread: %s", src->path, strerror(-rc));
			return rc;
		}
		src->hashing_thread = 1;
	}
	if (background && src->npieces > 0) {
		rc = pthread_create(&src->driver, NULL, driver, src);
		if (!rc) {
			src->driving = 1;
			return 0;
		}
	}
	fetch_all(src); /* no thread to be had, or asked for: here, now */
	return src->err;
}

/* Open path: a local file, or a URL's object, fetched through store where one is given (path is
 * then its URL and the key's, and store the source's, closed with it, on failure too). */
static int source_open(const char *path, struct tfs_store *store, int background, unsigned flags,
		       const struct tfs_store_version *prev, struct tfs_source **out)
{
	struct tfs_source *src = calloc(1, sizeof(*src));
	struct stat sb;
	int rc = 0;

	*out = NULL;
	if (!src) {
		if (store)
			tfs_store_close(store);
		return -ENOMEM;
	}
	src->store = store;
	src->fd = -1;
	atomic_init(&src->stopped, 0);
	pthread_mutex_init(&src->lock, NULL);
	pthread_cond_init(&src->grew, NULL);
	pthread_cond_init(&src->room, NULL);
	src->path = strdup(path);
	if (!src->path) {
		rc = -ENOMEM;
	} else if (store) {
		src->key = src->path + strlen(store->url) + 1;
		rc = fetch_begin(src, background, flags, prev);
	} else if (!tfs_source_is_url(path)) {
		src->fd = open(path, O_RDONLY | O_CLOEXEC);
		if (src->fd < 0 || fstat(src->fd, &sb) < 0) {
			rc = -errno;
			tfs_err("%s: %s", path, strerror(errno));
		} else {
			src->size = (uint64_t)sb.st_size;
			src->finished = 1;
			src->ready = src->size;
		}
	} else {
		rc = open_parent(path, &src->store, &src->key);
		if (!rc) {
			src->key = src->path + (src->key - path);
			rc = fetch_begin(src, background, flags, prev);
		}
	}
	if (rc) {
		tfs_source_close(src);
		return rc;
	}
	*out = src;
	return 0;
}

int tfs_source_open(const char *path, unsigned flags, struct tfs_source **out)
{
	return source_open(path, NULL, 1, flags, NULL, out);
}

int tfs_source_open_in(struct tfs_store *store, const char *key, unsigned flags,
		       struct tfs_source **out)
{
	char *path;
	int rc;

	*out = NULL;
	if (asprintf(&path, "%s/%s", store->url, key) < 0) {
		tfs_store_close(store);
		return -ENOMEM;
	}
	rc = source_open(path, store, 1, flags, NULL, out);
	free(path);
	return rc;
}

int tfs_source_fd(const struct tfs_source *src)
{
	return src->fd;
}

uint64_t tfs_source_size(const struct tfs_source *src)
{
	return src->size;
}

const char *tfs_source_path(const struct tfs_source *src)
{
	return src->path;
}

/* Whether bytes [off, end) are in fd. Called with src->lock held. */
static int there(const struct tfs_source *src, uint64_t off, uint64_t end)
{
	if (end <= src->ready)
		return 1;
	assert(src->piece); /* a local file's bytes are all there */
	/* [0, ready) is there: the pieces are looked at from there on (a prefix waited for is
	 * answered at once, done[gap] being 0). */
	for (uint64_t k = (off > src->ready ? off : src->ready) / src->piece; k * src->piece < end;
	     k++)
		if (!src->done[k])
			return 0;
	return 1;
}

/* Wait until bytes [off, end) are there. */
static int wait_for(struct tfs_source *src, uint64_t off, uint64_t end)
{
	int rc;

	if (end > src->size)
		end = src->size;
	pthread_mutex_lock(&src->lock);
	if (end > src->wanted) {
		src->wanted = end;
		if (src->ahead)
			pthread_cond_broadcast(&src->room);
	}
	while (!there(src, off, end) && !src->finished)
		pthread_cond_wait(&src->grew, &src->lock);
	rc = src->check == CHECK_BAD ? -EBADMSG
	     : there(src, off, end)  ? 0
	     : src->err		     ? src->err
				     : -EIO;
	pthread_mutex_unlock(&src->lock);
	return rc;
}

int tfs_source_wait(struct tfs_source *src, uint64_t end)
{
	return wait_for(src, 0, end);
}

uint64_t tfs_source_ready(struct tfs_source *src)
{
	uint64_t ready;

	pthread_mutex_lock(&src->lock);
	ready = src->ready;
	pthread_mutex_unlock(&src->lock);
	return ready;
}

int tfs_source_pread(struct tfs_source *src, void *buf, size_t len, uint64_t off)
{
	int rc;

	if (off > src->size || len > src->size - off)
		return -EIO; /* past the end: the source is shorter than its reader expects */
	pthread_mutex_lock(&src->lock);
	rc = off < src->punched ? -EIO : 0;
	pthread_mutex_unlock(&src->lock);
	if (rc) {
		/* The reader said it was done with these bytes: a reader's fault, never data. */
		assert(!"a source read behind what its reader released");
		tfs_err("%s: byte %llu read again after it was released", src->path,
			(unsigned long long)off);
		return rc;
	}
	rc = wait_for(src, off, off + len);
	return rc ? rc : tfs_pread_full(src->fd, buf, len, off);
}

void tfs_source_release(struct tfs_source *src, uint64_t upto)
{
	uint64_t from, to;

	pthread_mutex_lock(&src->lock);
	if (!src->ahead) {
		pthread_mutex_unlock(&src->lock);
		return;
	}
	if (upto > src->ready)
		upto = src->ready; /* what is not there was not read */
	if (upto > src->released) {
		src->released = upto;
		pthread_cond_broadcast(&src->room);
	}
	to_punch(src, &from, &to);
	pthread_mutex_unlock(&src->lock);
	punch(src, from, to);
}

int tfs_source_whole(struct tfs_source *src)
{
	int whole;

	pthread_mutex_lock(&src->lock);
	whole = src->punched == 0;
	pthread_mutex_unlock(&src->lock);
	return whole;
}

int tfs_source_again(struct tfs_source **src, unsigned flags)
{
	struct tfs_store_version was = { .size = (int64_t)(*src)->size };
	char *path = strdup((*src)->path);
	int rc;

	if (!path)
		return -ENOMEM;
	pthread_mutex_lock(&(*src)->lock);
	memcpy(was.tag, (*src)->tag, sizeof(was.tag));
	was.tag_md5 = (*src)->tag_md5;
	pthread_mutex_unlock(&(*src)->lock);
	/* Closed first: the two fetches never hold room at once. */
	tfs_source_close(*src);
	rc = source_open(path, NULL, 1, flags, &was, src);
	free(path);
	return rc;
}

int tfs_source_keep_all(struct tfs_source *src)
{
	uint64_t ahead, punched;
	int rc = 0;

	pthread_mutex_lock(&src->lock);
	ahead = src->ahead;
	punched = src->punched;
	pthread_mutex_unlock(&src->lock);
	if (!ahead)
		return 0;
	assert(punched == 0);
	if (punched)
		return -EINVAL;
	/* Room for all of it, asked for before the fetch goes past the window. */
	rc = src->in_memory && src->size > tfs_spool_memory_max()
		     ? ENOSPC
		     : posix_fallocate(src->fd, 0, (off_t)src->size);
	if (rc) {
		tfs_err("%s: needs all its %llu bytes held at once, and there is no room for them: "
			"%s (set TMPDIR to a directory with room)",
			src->path, (unsigned long long)src->size, strerror(rc));
		return -rc;
	}
	pthread_mutex_lock(&src->lock);
	src->ahead = 0;
	pthread_cond_broadcast(&src->room);
	pthread_mutex_unlock(&src->lock);
	return 0;
}

int tfs_source_verify(struct tfs_source *src)
{
	int rc;

	if (!src || !src->store)
		return 0;
	pthread_mutex_lock(&src->lock);
	/* Its reader is done: the rest comes past any window, and is given back once hashed. */
	src->wanted = src->size;
	if (src->ahead)
		src->released = src->size;
	pthread_cond_broadcast(&src->room);
	while (!src->finished || src->check == CHECK_RUNNING)
		pthread_cond_wait(&src->grew, &src->lock);
	rc = src->err ? src->err : src->check == CHECK_BAD ? -EBADMSG : 0;
	pthread_mutex_unlock(&src->lock);
	return rc;
}

void tfs_source_close(struct tfs_source *src)
{
	if (!src)
		return;
	if (src->driving) {
		int running;

		pthread_mutex_lock(&src->lock);
		running = !src->finished;
		pthread_mutex_unlock(&src->lock);
		if (running) {
			/* Pieces in flight end at once; those not started never start. */
			atomic_store(&src->stopped, 1);
			pthread_mutex_lock(&src->lock);
			pthread_cond_broadcast(&src->room);
			pthread_mutex_unlock(&src->lock);
			if (src->store->ops->cancel)
				src->store->ops->cancel(src->store);
		}
		pthread_join(src->driver, NULL);
	}
	if (src->hashing_thread) {
		atomic_store(&src->stopped, 1);
		pthread_mutex_lock(&src->lock);
		pthread_cond_broadcast(&src->grew);
		pthread_mutex_unlock(&src->lock);
		pthread_join(src->hasher, NULL);
	}
	if (src->store)
		tfs_store_close(src->store);
	while (src->nspare)
		free(src->spare[--src->nspare]);
	if (src->fd >= 0)
		close(src->fd);
	pthread_cond_destroy(&src->grew);
	pthread_cond_destroy(&src->room);
	pthread_mutex_destroy(&src->lock);
	free(src->done);
	free(src->path);
	free(src);
}

int tfs_source_open_file(const char *path)
{
	struct tfs_source *src;
	int fd, rc = source_open(path, NULL, 0, 0, NULL, &src);

	if (rc)
		return rc;
	rc = tfs_source_verify(src);
	if (rc) {
		tfs_source_close(src);
		return rc;
	}
	fd = src->fd; /* at offset 0: a fetch writes with pwrite */
	src->fd = -1; /* the caller's now */
	tfs_source_close(src);
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
