/* SPDX-License-Identifier: MIT */
/* ctlfile: the sessions of <mount>/.tensorfs/control: the staging protocol as text lines and as
 * ioctls (packaging/include/tensorfs/control.h documents both), served by gpu/staging rings. */
#include "ctlfile.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tensorfs/control.h>

#include "format.h"
#include "staging.h"
#include "version.h"
#include "view.h"

#define MAX_STREAMS 16		       /* per session */
#define MAX_AHEAD 8		       /* batches of `next` made ahead, per stream */
#define MAX_TOKENS 64		       /* per request line */
#define MAX_OUT (4u << 20)	       /* reply bytes waiting to be read, per session */
#define MAX_STREAM_BYTES (16ull << 30) /* all slots of one stream */
#define DEFAULT_DEPTH 4
#define DEFAULT_BATCH 1024
#define DEFAULT_SHM_DIR "/dev/shm"
#define ERR_MAX TFS_CTL_MSG_MAX

_Static_assert(TFS_CTL_MAX_COLS == TFS_STAGING_MAX_COLS, "column limits differ");
_Static_assert(TFS_CTL_IPC_BYTES == TFS_STAGING_IPC_BYTES, "IPC handle sizes differ");

struct tfs_ctlfile {
	struct tfs_store *store;
	struct tfs_cache *cache;
	char *mountpoint; /* NULL: absolute targets are refused */
	char *shm_dir;
	unsigned threads;
	pthread_mutex_t lock;
	struct tfs_staging_pool *pool;	      /* made on first use; protected by lock */
	struct tfs_ctlfile_session *sessions; /* protected by lock */
	unsigned next_session;		      /* protected by lock */
	uint64_t nsessions, nstreams;	      /* now; protected by lock */
	uint64_t requests, errors;	      /* atomic */
};

/* A batch of `next` being made ahead of the loader. */
struct ahead {
	unsigned slot;
	uint64_t pos, n;
};

struct stream {
	unsigned id;
	struct tfs_version *ver;
	struct tfs_view *view; /* NULL: the version's rows in order */
	uint64_t n;	       /* rows of the stream */
	struct tfs_staging *ring;
	int device;
	size_t ncols;
	size_t cols[TFS_CTL_MAX_COLS];
	uint64_t max_batch;
	unsigned depth, ahead_max;
	uint64_t pos; /* the next cursor */
	struct ahead ahead[MAX_AHEAD];
	size_t nahead;
	uint64_t *rows;	    /* scratch: max_batch version rows */
	uint64_t *slot_pos; /* per slot: stream position of its first row */
};

struct tfs_ctlfile_session {
	struct tfs_ctlfile *ctl;
	unsigned id;
	uid_t uid;
	gid_t gid;
	struct tfs_ctlfile_session *next, *prev; /* protected by ctl->lock */
	pthread_mutex_t lock;			 /* serialises the session's requests */
	struct stream *streams[MAX_STREAMS];	 /* by id - 1; protected by lock */
	unsigned nstreams;			 /* protected by lock */
	struct tfs_buf out;			 /* replies not read yet; protected by lock */
	size_t out_off;				 /* protected by lock */
};

#define SET_ERR(...) snprintf(err, ERR_MAX, __VA_ARGS__)

/* --- the control file ----------------------------------------------------------------------- */

/* Slot files of daemons that died without cleaning up: tensorfs-<pid>-..., ours, pid gone. */
static void remove_stale_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;
		char *end;
		long pid;

		if (strncmp(de->d_name, "tensorfs-", 9))
			continue;
		pid = strtol(de->d_name + 9, &end, 10);
		if (end == de->d_name + 9 || *end != '-' || pid <= 0 || pid == getpid())
			continue;
		if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		if (!unlink(path))
			tfs_info("removed %s, left by tensorfs daemon %ld", path, pid);
	}
	closedir(d);
}

int tfs_ctlfile_create(const struct tfs_ctlfile_config *cfg, struct tfs_ctlfile **out)
{
	struct tfs_ctlfile *ctl = calloc(1, sizeof(*ctl));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	if (!ctl)
		return -ENOMEM;
	ctl->store = cfg->store;
	ctl->cache = cfg->cache;
	ctl->shm_dir = strdup(cfg->shm_dir ? cfg->shm_dir : DEFAULT_SHM_DIR);
	/* As given (absolute): resolving it would stat the mount, which waits for this daemon. */
	ctl->mountpoint = cfg->mountpoint ? strdup(cfg->mountpoint) : NULL;
	if (!ctl->shm_dir || (cfg->mountpoint && !ctl->mountpoint)) {
		free(ctl->shm_dir);
		free(ctl->mountpoint);
		free(ctl);
		return -ENOMEM;
	}
	ctl->threads = cfg->threads ? cfg->threads : ncpu < 2 ? 2 : ncpu > 4 ? 4 : (unsigned)ncpu;
	pthread_mutex_init(&ctl->lock, NULL);
	remove_stale_files(ctl->shm_dir);
	*out = ctl;
	return 0;
}

static void stream_free(struct stream *s);

static void session_free(struct tfs_ctlfile_session *s)
{
	for (unsigned i = 0; i < MAX_STREAMS; i++)
		stream_free(s->streams[i]);
	tfs_buf_free(&s->out);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

void tfs_ctlfile_destroy(struct tfs_ctlfile *ctl)
{
	if (!ctl)
		return;
	/* The FUSE loop is over: nothing else touches the sessions. */
	while (ctl->sessions) {
		struct tfs_ctlfile_session *s = ctl->sessions;

		ctl->sessions = s->next;
		session_free(s);
	}
	tfs_staging_pool_destroy(ctl->pool);
	pthread_mutex_destroy(&ctl->lock);
	free(ctl->mountpoint);
	free(ctl->shm_dir);
	free(ctl);
}

int tfs_ctlfile_session_open(struct tfs_ctlfile *ctl, uid_t uid, gid_t gid,
			     struct tfs_ctlfile_session **out)
{
	struct tfs_ctlfile_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->ctl = ctl;
	s->uid = uid;
	s->gid = gid;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_lock(&ctl->lock);
	s->id = ++ctl->next_session;
	s->next = ctl->sessions;
	if (s->next)
		s->next->prev = s;
	ctl->sessions = s;
	ctl->nsessions++;
	pthread_mutex_unlock(&ctl->lock);
	*out = s;
	return 0;
}

void tfs_ctlfile_session_close(struct tfs_ctlfile_session *s)
{
	struct tfs_ctlfile *ctl;

	if (!s)
		return;
	ctl = s->ctl;
	pthread_mutex_lock(&ctl->lock);
	if (s->prev)
		s->prev->next = s->next;
	else
		ctl->sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	ctl->nsessions--;
	ctl->nstreams -= s->nstreams;
	pthread_mutex_unlock(&ctl->lock);
	session_free(s);
}

/* --- streams -------------------------------------------------------------------------------- */

static void drop_ahead(struct stream *s, size_t keep)
{
	while (s->nahead > keep)
		tfs_staging_discard(s->ring, s->ahead[--s->nahead].slot);
}

static void stream_free(struct stream *s)
{
	if (!s)
		return;
	if (s->ring)
		drop_ahead(s, 0);
	tfs_staging_destroy(s->ring);
	tfs_view_free(s->view);
	tfs_version_put(s->ver);
	free(s->rows);
	free(s->slot_pos);
	free(s);
}

/* "DATASET/REF[/views/PARAMS]" or "DATASET/commits/ID[/views/PARAMS]", or such a directory's
 * absolute path under the mount. */
static int resolve_target(struct tfs_ctlfile *ctl, const char *target, struct tfs_version **vout,
			  struct tfs_view **view, char *err)
{
	struct tfs_view_params params;
	struct tfs_version *v = NULL;
	char *copy = NULL, *parts[6], *save = NULL, *p;
	const char *rel = target;
	size_t n = 0, ml;
	struct tfs_id id;
	int rc;

	*view = NULL;
	if (target[0] == '/') {
		ml = ctl->mountpoint ? strlen(ctl->mountpoint) : 0;
		if (!ml || strncmp(target, ctl->mountpoint, ml) || target[ml] != '/') {
			SET_ERR("%s is not a directory of this mount (%s)", target,
				ctl->mountpoint ? ctl->mountpoint : "?");
			return -EINVAL;
		}
		rel = target + ml + 1;
	}
	copy = strdup(rel);
	if (!copy)
		return -ENOMEM;
	for (p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		if (n == 6) {
			rc = -EINVAL;
			goto bad;
		}
		parts[n++] = p;
	}
	/* ds ref | ds commits id, then optionally views params */
	{
		const size_t vi = n >= 3 && !strcmp(parts[1], "commits") ? 3 : 2;

		if (n != vi && !(n == vi + 2 && !strcmp(parts[vi], "views"))) {
			rc = -EINVAL;
			goto bad;
		}
		if (!tfs_name_valid(parts[0])) {
			rc = -EINVAL;
			goto bad;
		}
		rc = tfs_dataset_check(ctl->store, parts[0]);
		if (rc) {
			SET_ERR("no dataset '%s'%s", parts[0],
				rc == -EPROTO ? " this tensorfs can read (newer format)" : "");
			goto out;
		}
		if (vi == 3) {
			rc = strlen(parts[2]) == TFS_ID_HEX - 1 ? tfs_id_parse(parts[2], &id) : -1;
			if (rc) {
				SET_ERR("'%s' is not a commit id (64 hex digits)", parts[2]);
				rc = -EINVAL;
				goto out;
			}
		} else {
			rc = tfs_ref_resolve(ctl->store, parts[0], parts[1], &id);
			if (rc) {
				SET_ERR("dataset '%s' has no branch, tag or commit '%s'", parts[0],
					parts[1]);
				goto out;
			}
		}
		rc = tfs_version_open(ctl->store, parts[0], &id, &v);
		if (rc) {
			SET_ERR("cannot open %s: %s", rel, strerror(-rc));
			goto out;
		}
		if (n == vi + 2) {
			rc = tfs_view_parse(parts[vi + 1], &params, err, ERR_MAX);
			if (!rc) {
				rc = tfs_view_build(v, ctl->cache, &params, view, err, ERR_MAX);
				tfs_view_params_free(&params);
			}
			if (rc)
				goto out;
		}
	}
	rc = 0;
	goto out;
bad:
	SET_ERR("target '%s': expected DATASET/REF or DATASET/commits/ID, optionally followed by "
		"/views/PARAMS",
		target);
out:
	free(copy);
	if (rc) {
		tfs_version_put(v);
		return rc;
	}
	*vout = v;
	return 0;
}

struct open_args {
	const char *target;
	const char *cols[TFS_CTL_MAX_COLS];
	size_t ncols;
	const char *device; /* NULL: host */
	unsigned depth;	    /* 0: default */
	uint64_t batch;	    /* 0: default */
	long ahead;	    /* < 0: default */
};

/* Column names of v, for a message. */
static void column_list(const struct tfs_version *v, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t i = 0; i < v->manifest.ncols && len < cap; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? ", " : "",
					v->manifest.cols[i].name);
}

static int do_open(struct tfs_ctlfile_session *se, const struct open_args *a, struct stream **out,
		   char *err)
{
	struct tfs_ctlfile *ctl = se->ctl;
	struct tfs_staging_config cfg = { 0 };
	struct stream *s = NULL;
	unsigned slot_id = 0;
	uint64_t row_bytes = 0;
	char tag[64];
	int rc;

	for (unsigned i = 0; i < MAX_STREAMS; i++)
		if (!se->streams[i]) {
			slot_id = i + 1;
			break;
		}
	if (!slot_id) {
		SET_ERR("too many streams in this session (at most %d); close one", MAX_STREAMS);
		return -EMFILE;
	}
	if (!a->ncols) {
		SET_ERR("open needs cols=NAME[,NAME...]");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->id = slot_id;
	s->device = TFS_STAGING_HOST;
	if (a->device && tfs_staging_parse_device(a->device, &s->device)) {
		SET_ERR("device '%s': expected host or cuda:N", a->device);
		rc = -EINVAL;
		goto fail;
	}
	if (a->depth > TFS_STAGING_MAX_DEPTH) {
		SET_ERR("depth=%u: at most %d slots", a->depth, TFS_STAGING_MAX_DEPTH);
		rc = -EINVAL;
		goto fail;
	}
	s->depth = a->depth ? a->depth : DEFAULT_DEPTH;
	if (a->ahead >= (long)s->depth || a->ahead > MAX_AHEAD) {
		SET_ERR("ahead=%ld: at most depth-1 (%u) and %d", a->ahead, s->depth - 1,
			MAX_AHEAD);
		rc = -EINVAL;
		goto fail;
	}
	s->ahead_max = a->ahead >= 0 ? (unsigned)a->ahead : s->depth - 1 < 2 ? s->depth - 1 : 2;
	/* Before the target: a missing device is the clearer message, and cheaper. */
	rc = tfs_staging_probe(s->device, err, ERR_MAX);
	if (rc)
		goto fail;
	rc = resolve_target(ctl, a->target, &s->ver, &s->view, err);
	if (rc)
		goto fail;
	s->n = s->view ? s->view->n : s->ver->manifest.rows;
	for (size_t i = 0; i < a->ncols; i++) {
		int c = tfs_version_column(s->ver, a->cols[i]);

		if (c < 0) {
			char names[160];

			column_list(s->ver, names, sizeof(names));
			SET_ERR("unknown column '%s' (columns: %s)", a->cols[i], names);
			rc = -EINVAL;
			goto fail;
		}
		for (size_t j = 0; j < i; j++)
			if (s->cols[j] == (size_t)c) {
				SET_ERR("column '%s' named twice", a->cols[i]);
				rc = -EINVAL;
				goto fail;
			}
		s->cols[s->ncols++] = (size_t)c;
		row_bytes += s->ver->manifest.cols[c].row_bytes;
	}
	s->max_batch = a->batch;
	if (!s->max_batch) {
		/* The default, shrunk to what fits a slot (each column may waste an alignment). */
		const uint64_t room = TFS_STAGING_MAX_SLOT_BYTES - s->ncols * TFS_STAGING_ALIGN;

		s->max_batch = row_bytes ? room / row_bytes : DEFAULT_BATCH;
		s->max_batch = s->max_batch < DEFAULT_BATCH ? s->max_batch : DEFAULT_BATCH;
		if (!s->max_batch) {
			SET_ERR("one row of these columns is larger than a slot (%llu MiB)",
				TFS_STAGING_MAX_SLOT_BYTES >> 20);
			rc = -E2BIG;
			goto fail;
		}
	}
	if (row_bytes && s->max_batch > TFS_STAGING_MAX_SLOT_BYTES / row_bytes) {
		SET_ERR("batch=%" PRIu64 ": %" PRIu64 " bytes per slot, more than %llu MiB",
			s->max_batch, s->max_batch * row_bytes, TFS_STAGING_MAX_SLOT_BYTES >> 20);
		rc = -E2BIG;
		goto fail;
	}
	if (s->max_batch * row_bytes * s->depth > MAX_STREAM_BYTES) {
		SET_ERR("depth=%u slots of batch=%" PRIu64 " rows: more than %llu GiB per stream",
			s->depth, s->max_batch, MAX_STREAM_BYTES >> 30);
		rc = -E2BIG;
		goto fail;
	}
	s->rows = malloc(s->max_batch * sizeof(*s->rows));
	s->slot_pos = calloc(s->depth, sizeof(*s->slot_pos));
	if (!s->rows || !s->slot_pos) {
		rc = -ENOMEM;
		goto fail;
	}
	pthread_mutex_lock(&ctl->lock);
	rc = ctl->pool ? 0 : tfs_staging_pool_create(ctl->threads, &ctl->pool);
	pthread_mutex_unlock(&ctl->lock);
	if (rc) {
		SET_ERR("cannot start the gather threads: %s", strerror(-rc));
		goto fail;
	}
	snprintf(tag, sizeof(tag), "%ld-%u-%u", (long)getpid(), se->id, s->id);
	cfg.ver = s->ver;
	cfg.cache = ctl->cache;
	cfg.ncols = s->ncols;
	memcpy(cfg.cols, s->cols, sizeof(cfg.cols));
	cfg.max_rows = s->max_batch;
	cfg.depth = s->depth;
	cfg.device = s->device;
	cfg.shm_dir = ctl->shm_dir;
	cfg.tag = tag;
	cfg.uid = se->uid;
	cfg.gid = se->gid;
	rc = tfs_staging_create(ctl->pool, &cfg, &s->ring, err, ERR_MAX);
	if (rc)
		goto fail;
	se->streams[slot_id - 1] = s;
	se->nstreams++;
	pthread_mutex_lock(&ctl->lock);
	ctl->nstreams++;
	pthread_mutex_unlock(&ctl->lock);
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM && !err[0])
		SET_ERR("out of memory");
	stream_free(s);
	return rc;
}

static struct stream *find_stream(struct tfs_ctlfile_session *se, uint64_t id, char *err)
{
	if (id >= 1 && id <= MAX_STREAMS && se->streams[id - 1])
		return se->streams[id - 1];
	SET_ERR("no stream %" PRIu64 " in this session", id);
	return NULL;
}

static int do_close(struct tfs_ctlfile_session *se, uint64_t id, char *err)
{
	struct stream *s = find_stream(se, id, err);

	if (!s)
		return -ENOENT;
	se->streams[s->id - 1] = NULL;
	se->nstreams--;
	pthread_mutex_lock(&se->ctl->lock);
	se->ctl->nstreams--;
	pthread_mutex_unlock(&se->ctl->lock);
	stream_free(s);
	return 0;
}

/* Fill a slot with s->rows[0..n) synchronously and lease it. A slot taken by a batch made ahead
 * is reclaimed (youngest first) rather than refusing. */
static int stage_now(struct stream *s, int slot, size_t n, uint64_t pos, unsigned *out, char *err)
{
	int rc;

	for (;;) {
		rc = tfs_staging_fill(s->ring, slot, s->rows, n, 0);
		if (rc != -EBUSY || !s->nahead)
			break;
		drop_ahead(s, s->nahead - 1);
	}
	if (rc == -EBUSY) {
		if (slot >= 0)
			SET_ERR("slot %d of stream %u is leased: release it first", slot, s->id);
		else
			SET_ERR("no free slot: all %u slots of stream %u are leased (release one)",
				s->depth, s->id);
		return rc;
	}
	*out = (unsigned)rc;
	s->slot_pos[*out] = pos;
	rc = tfs_staging_take(s->ring, *out);
	if (rc)
		SET_ERR("cannot gather the rows: %s", strerror(-rc));
	return rc;
}

static void view_rows(const struct stream *s, uint64_t *rows, uint64_t first, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rows[i] = s->view ? s->view->rows[first + i] : first + i;
}

/* Queue the batches after the cursor (and after those already made ahead) on the pool. */
static void schedule_ahead(struct stream *s, uint64_t batch)
{
	uint64_t p = s->pos;

	for (size_t i = 0; i < s->nahead; i++)
		p = s->ahead[i].pos + s->ahead[i].n;
	while (s->nahead < s->ahead_max && p < s->n) {
		const uint64_t n = s->n - p < batch ? s->n - p : batch;
		int slot;

		view_rows(s, s->rows, p, (size_t)n);
		slot = tfs_staging_fill(s->ring, -1, s->rows, (size_t)n, 1);
		if (slot < 0)
			break; /* the loader holds the other slots */
		s->slot_pos[slot] = p;
		s->ahead[s->nahead++] = (struct ahead){ (unsigned)slot, p, n };
		p += n;
	}
}

static int do_next(struct stream *s, uint64_t batch, unsigned *slot, char *err)
{
	uint64_t n;
	int rc;

	if (!batch) {
		SET_ERR("batch must be at least 1");
		return -EINVAL;
	}
	if (batch > s->max_batch) {
		SET_ERR("batch=%" PRIu64 " is larger than the stream's slots (batch=%" PRIu64
			" at open)",
			batch, s->max_batch);
		return -E2BIG;
	}
	if (s->pos >= s->n) {
		drop_ahead(s, 0);
		SET_ERR("end of stream %u: all %" PRIu64 " rows were staged (seek stream=%u pos=0 "
			"starts over)",
			s->id, s->n, s->id);
		return -ENODATA;
	}
	n = s->n - s->pos < batch ? s->n - s->pos : batch;
	if (s->nahead && s->ahead[0].pos == s->pos && s->ahead[0].n == n) {
		*slot = s->ahead[0].slot;
		memmove(s->ahead, s->ahead + 1, --s->nahead * sizeof(s->ahead[0]));
		rc = tfs_staging_take(s->ring, *slot);
		if (rc) {
			drop_ahead(s, 0);
			SET_ERR("cannot gather the rows: %s", strerror(-rc));
			return rc;
		}
	} else {
		drop_ahead(s, 0);
		view_rows(s, s->rows, s->pos, (size_t)n);
		rc = stage_now(s, -1, (size_t)n, s->pos, slot, err);
		if (rc)
			return rc;
	}
	s->pos += n;
	schedule_ahead(s, batch);
	return 0;
}

/* stage by rows (rows != NULL, n of them) or by range [start, start + n). */
static int do_stage(struct stream *s, const uint64_t *rows, uint64_t start, uint64_t n, int slot,
		    unsigned *out, char *err)
{
	if (!n) {
		SET_ERR("no rows to stage");
		return -EINVAL;
	}
	if (n > s->max_batch) {
		SET_ERR("%" PRIu64 " rows: more than the stream's slots hold (batch=%" PRIu64
			" at open)",
			n, s->max_batch);
		return -E2BIG;
	}
	if (slot >= 0 && (unsigned)slot >= s->depth) {
		SET_ERR("slot %d: stream %u has slots 0..%u", slot, s->id, s->depth - 1);
		return -EINVAL;
	}
	if (rows) {
		for (uint64_t i = 0; i < n; i++) {
			if (rows[i] >= s->n) {
				SET_ERR("row %" PRIu64 " out of range: stream %u has %" PRIu64
					" rows",
					rows[i], s->id, s->n);
				return -ERANGE;
			}
			s->rows[i] = s->view ? s->view->rows[rows[i]] : rows[i];
		}
		start = rows[0];
	} else {
		if (start > s->n || n > s->n - start) {
			SET_ERR("rows %" PRIu64 "..%" PRIu64 " out of range: stream %u has %" PRIu64
				" rows",
				start, start + n - 1, s->id, s->n);
			return -ERANGE;
		}
		view_rows(s, s->rows, start, (size_t)n);
	}
	return stage_now(s, slot, (size_t)n, start, out, err);
}

static int do_release(struct stream *s, int slot, char *err)
{
	if (slot < 0) {
		for (unsigned i = 0; i < s->depth; i++)
			tfs_staging_release(s->ring, i);
		return 0;
	}
	if ((unsigned)slot >= s->depth || tfs_staging_release(s->ring, (unsigned)slot)) {
		SET_ERR("slot %d of stream %u is not leased", slot, s->id);
		return -EINVAL;
	}
	return 0;
}

static int do_seek(struct stream *s, uint64_t pos, char *err)
{
	if (pos > s->n) {
		SET_ERR("pos %" PRIu64 " out of range: stream %u has %" PRIu64 " rows", pos, s->id,
			s->n);
		return -ERANGE;
	}
	drop_ahead(s, 0);
	s->pos = pos;
	return 0;
}

/* --- text requests -------------------------------------------------------------------------- */

static const char *errno_name(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "EIO";
}

struct kv {
	const char *key, *val;
};

/* Strict decimal: digits only, no sign, no overflow. */
static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

static const char *kv_get(const struct kv *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(kv[i].key, key))
			return kv[i].val;
	return NULL;
}

/* Every key must be one the verb takes, once. */
static int kv_check(const struct kv *kv, size_t n, const char *verb, const char *const *allowed,
		    char *err)
{
	for (size_t i = 0; i < n; i++) {
		int ok = 0;

		for (const char *const *a = allowed; *a && !ok; a++)
			ok = !strcmp(*a, kv[i].key);
		if (!ok) {
			SET_ERR("%s does not take '%s'", verb, kv[i].key);
			return -EINVAL;
		}
		for (size_t j = 0; j < i; j++)
			if (!strcmp(kv[i].key, kv[j].key)) {
				SET_ERR("'%s' given twice", kv[i].key);
				return -EINVAL;
			}
	}
	return 0;
}

static int need_u64(const struct kv *kv, size_t n, const char *key, uint64_t *out, char *err)
{
	const char *v = kv_get(kv, n, key);

	if (!v) {
		SET_ERR("missing %s=", key);
		return -EINVAL;
	}
	if (parse_u64(v, out)) {
		SET_ERR("%s=%s: expected a number", key, v);
		return -EINVAL;
	}
	return 0;
}

static int get_stream(struct tfs_ctlfile_session *se, const struct kv *kv, size_t n,
		      struct stream **s, char *err)
{
	uint64_t id;
	int rc = need_u64(kv, n, "stream", &id, err);

	if (rc)
		return rc;
	*s = find_stream(se, id, err);
	return *s ? 0 : -ENOENT;
}

/* Append "ok ..." for a leased slot. */
static int reply_batch(struct tfs_buf *r, struct stream *s, unsigned slot)
{
	const size_t rows = tfs_staging_rows(s->ring, slot);
	struct tfs_staging_loc loc;
	uint64_t bytes = 0;
	int rc;

	tfs_staging_locate(s->ring, slot, &loc);
	for (size_t c = 0; c < s->ncols; c++)
		bytes += rows * s->ver->manifest.cols[s->cols[c]].row_bytes;
	rc = tfs_buf_printf(r, "ok stream=%u slot=%u rows=%zu pos=%" PRIu64 " bytes=%" PRIu64,
			    s->id, slot, rows, s->slot_pos[slot], bytes);
	if (!rc && loc.device == TFS_STAGING_HOST)
		rc = tfs_buf_printf(r, " file=%s file_bytes=%" PRIu64, loc.path, loc.file_bytes);
	if (!rc && loc.device != TFS_STAGING_HOST) {
		rc = tfs_buf_printf(r, " device=cuda:%d ipc=", loc.device);
		for (size_t i = 0; !rc && i < sizeof(loc.ipc_mem); i++)
			rc = tfs_buf_printf(r, "%02x", loc.ipc_mem[i]);
		if (!rc)
			rc = tfs_buf_printf(r, " event=");
		for (size_t i = 0; !rc && i < sizeof(loc.ipc_event); i++)
			rc = tfs_buf_printf(r, "%02x", loc.ipc_event[i]);
	}
	for (size_t c = 0; !rc && c < s->ncols; c++) {
		const struct tfs_column *col = &s->ver->manifest.cols[s->cols[c]];

		rc = tfs_buf_printf(r, " col=%s offset=%" PRIu64 " dtype=%s shape=%zu", col->name,
				    loc.col_off[c], col->dtype.descr, rows);
		for (unsigned d = 0; !rc && d < col->ndim; d++)
			rc = tfs_buf_printf(r, ",%" PRIu64, col->shape[d]);
	}
	return rc ? rc : tfs_buf_printf(r, "\n");
}

static void stats_now(struct tfs_ctlfile *ctl, struct tfs_ctl_stats *st,
		      struct tfs_ctlfile_session *se)
{
	struct tfs_staging_stats ss;

	tfs_staging_stats(&ss);
	pthread_mutex_lock(&ctl->lock);
	st->sessions = ctl->nsessions;
	st->streams = ctl->nstreams;
	pthread_mutex_unlock(&ctl->lock);
	st->slots = ss.slots;
	st->slots_leased = ss.leased;
	st->batches = ss.batches;
	st->rows = ss.rows;
	st->bytes = ss.bytes;
	st->requests = __atomic_load_n(&ctl->requests, __ATOMIC_RELAXED);
	st->errors = __atomic_load_n(&ctl->errors, __ATOMIC_RELAXED);
	st->session_streams = 0;
	st->session_leased = 0;
	if (!se)
		return;
	for (unsigned i = 0; i < MAX_STREAMS; i++)
		if (se->streams[i]) {
			st->session_streams++;
			st->session_leased += tfs_staging_leased(se->streams[i]->ring);
		}
}

static const char *const open_keys[] = { "cols", "device", "depth", "batch", "ahead", NULL };
static const char *const stage_keys[] = { "stream", "rows", "range", "slot", NULL };
static const char *const next_keys[] = { "stream", "batch", NULL };
static const char *const release_keys[] = { "stream", "slot", NULL };
static const char *const stream_keys[] = { "stream", NULL };
static const char *const seek_keys[] = { "stream", "pos", NULL };
static const char *const no_keys[] = { NULL };

static int text_open(struct tfs_ctlfile_session *se, const char *target, const struct kv *kv,
		     size_t nkv, struct tfs_buf *r, char *err)
{
	struct open_args a = { .target = target, .ahead = -1 };
	char *cols = NULL, *save = NULL, hex[TFS_ID_HEX];
	const char *v;
	struct stream *s;
	char dev[24];
	uint64_t x;
	int rc = kv_check(kv, nkv, "open", open_keys, err);

	if (rc)
		return rc;
	if (!target) {
		SET_ERR("open needs a target: DATASET/REF[/views/PARAMS]");
		return -EINVAL;
	}
	v = kv_get(kv, nkv, "cols");
	if (!v || !*v) {
		SET_ERR("open needs cols=NAME[,NAME...]");
		return -EINVAL;
	}
	cols = strdup(v);
	if (!cols)
		return -ENOMEM;
	for (char *c = strtok_r(cols, ",", &save); c; c = strtok_r(NULL, ",", &save)) {
		if (a.ncols == TFS_CTL_MAX_COLS) {
			SET_ERR("at most %d columns per stream", TFS_CTL_MAX_COLS);
			rc = -EINVAL;
			goto out;
		}
		a.cols[a.ncols++] = c;
	}
	a.device = kv_get(kv, nkv, "device");
	if (kv_get(kv, nkv, "depth")) {
		if ((rc = need_u64(kv, nkv, "depth", &x, err)))
			goto out;
		if (!x || x > TFS_STAGING_MAX_DEPTH) {
			SET_ERR("depth=%" PRIu64 ": expected 1..%d", x, TFS_STAGING_MAX_DEPTH);
			rc = -EINVAL;
			goto out;
		}
		a.depth = (unsigned)x;
	}
	if (kv_get(kv, nkv, "batch")) {
		if ((rc = need_u64(kv, nkv, "batch", &a.batch, err)))
			goto out;
		if (!a.batch) {
			SET_ERR("batch must be at least 1");
			rc = -EINVAL;
			goto out;
		}
	}
	if (kv_get(kv, nkv, "ahead")) {
		if ((rc = need_u64(kv, nkv, "ahead", &x, err)))
			goto out;
		a.ahead = x > MAX_AHEAD ? MAX_AHEAD + 1 : (long)x;
	}
	rc = do_open(se, &a, &s, err);
	if (rc)
		goto out;
	tfs_id_hex(&s->ver->commit.id, hex);
	if (s->device == TFS_STAGING_HOST)
		snprintf(dev, sizeof(dev), "host");
	else
		snprintf(dev, sizeof(dev), "cuda:%d", s->device);
	rc = tfs_buf_printf(r,
			    "ok stream=%u rows=%" PRIu64 " slots=%u batch=%" PRIu64
			    " device=%s commit=%s slot_bytes=%" PRIu64 "\n",
			    s->id, s->n, s->depth, s->max_batch, dev, hex,
			    tfs_staging_slot_bytes(s->ring));
out:
	free(cols);
	return rc;
}

/* rows=I,J,K into a fresh array. */
static int parse_rows(const char *v, uint64_t max, uint64_t **rows, uint64_t *n, char *err)
{
	size_t cap = 1;
	char *copy, *save = NULL;
	int rc = 0;

	for (const char *p = v; *p; p++)
		cap += *p == ',';
	if (cap > max) {
		SET_ERR("%zu rows: more than the stream's slots hold (batch=%" PRIu64 " at open)",
			cap, max);
		return -E2BIG;
	}
	copy = strdup(v);
	*rows = malloc(cap * sizeof(**rows));
	*n = 0;
	if (!copy || !*rows) {
		rc = -ENOMEM;
		goto out;
	}
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (parse_u64(t, &(*rows)[*n])) {
			SET_ERR("rows: '%s' is not a row number", t);
			rc = -EINVAL;
			goto out;
		}
		(*n)++;
	}
out:
	free(copy);
	if (rc) {
		free(*rows);
		*rows = NULL;
	}
	return rc;
}

static int text_stage(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
		      struct tfs_buf *r, char *err)
{
	const char *rows_s = kv_get(kv, nkv, "rows"), *range = kv_get(kv, nkv, "range");
	uint64_t *rows = NULL, n = 0, start = 0, slot = UINT64_MAX;
	struct stream *s;
	unsigned out;
	int rc = kv_check(kv, nkv, "stage", stage_keys, err);

	if (!rc)
		rc = get_stream(se, kv, nkv, &s, err);
	if (rc)
		return rc;
	if (!rows_s == !range) {
		SET_ERR("stage needs rows=I,J,... or range=A:B");
		return -EINVAL;
	}
	if (kv_get(kv, nkv, "slot") && (rc = need_u64(kv, nkv, "slot", &slot, err)))
		return rc;
	if (slot != UINT64_MAX && slot >= s->depth) {
		SET_ERR("slot %" PRIu64 ": stream %u has slots 0..%u", slot, s->id, s->depth - 1);
		return -EINVAL;
	}
	if (rows_s) {
		rc = parse_rows(rows_s, s->max_batch, &rows, &n, err);
	} else {
		const char *colon = strchr(range, ':');
		char a[32];
		uint64_t b;

		rc = -EINVAL;
		if (colon && (size_t)(colon - range) < sizeof(a)) {
			memcpy(a, range, (size_t)(colon - range));
			a[colon - range] = 0;
			if (!parse_u64(a, &start) && !parse_u64(colon + 1, &b) && b > start) {
				n = b - start;
				rc = 0;
			}
		}
		if (rc)
			SET_ERR("range=%s: expected A:B with A < B (rows A..B-1)", range);
	}
	if (!rc)
		rc = do_stage(s, rows, start, n, slot == UINT64_MAX ? -1 : (int)slot, &out, err);
	free(rows);
	return rc ? rc : reply_batch(r, s, out);
}

static int text_next(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
		     struct tfs_buf *r, char *err)
{
	struct stream *s;
	uint64_t batch;
	unsigned slot;
	int rc = kv_check(kv, nkv, "next", next_keys, err);

	if (!rc)
		rc = get_stream(se, kv, nkv, &s, err);
	if (!rc)
		rc = need_u64(kv, nkv, "batch", &batch, err);
	if (!rc)
		rc = do_next(s, batch, &slot, err);
	return rc ? rc : reply_batch(r, s, slot);
}

static int text_release(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
			struct tfs_buf *r, char *err)
{
	const char *slot_s = kv_get(kv, nkv, "slot");
	struct stream *s;
	uint64_t slot = 0;
	int rc = kv_check(kv, nkv, "release", release_keys, err);

	if (!rc)
		rc = get_stream(se, kv, nkv, &s, err);
	if (rc)
		return rc;
	if (!slot_s) {
		SET_ERR("release needs slot=N or slot=all");
		return -EINVAL;
	}
	if (strcmp(slot_s, "all") && (rc = need_u64(kv, nkv, "slot", &slot, err)))
		return rc;
	rc = do_release(s, strcmp(slot_s, "all") ? (slot > INT32_MAX ? INT32_MAX : (int)slot) : -1,
			err);
	return rc ? rc : tfs_buf_printf(r, "ok\n");
}

static int text_stats(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
		      struct tfs_buf *r, char *err)
{
	struct tfs_ctl_stats st;
	int rc = kv_check(kv, nkv, "stats", no_keys, err);

	if (rc)
		return rc;
	stats_now(se->ctl, &st, se);
	return tfs_buf_printf(
		r,
		"ok sessions=%" PRIu64 " streams=%" PRIu64 " slots=%" PRIu64 " leased=%" PRIu64
		" batches=%" PRIu64 " rows=%" PRIu64 " bytes=%" PRIu64 " requests=%" PRIu64
		" errors=%" PRIu64 " session_streams=%" PRIu64 " session_leased=%" PRIu64 "\n",
		st.sessions, st.streams, st.slots, st.slots_leased, st.batches, st.rows, st.bytes,
		st.requests, st.errors, st.session_streams, st.session_leased);
}

/* One request line (NUL-terminated, no newline, modified in place) -> one reply line. */
static int handle_line(struct tfs_ctlfile_session *se, char *line, struct tfs_buf *r)
{
	struct tfs_ctlfile *ctl = se->ctl;
	char *tok[MAX_TOKENS], *save = NULL, err[ERR_MAX] = "";
	const char *verb, *arg = NULL;
	struct kv kv[MAX_TOKENS];
	size_t ntok = 0, nkv = 0;
	struct stream *s;
	uint64_t x;
	int rc = 0;

	__atomic_add_fetch(&ctl->requests, 1, __ATOMIC_RELAXED);
	for (char *t = strtok_r(line, " \t\r", &save); t; t = strtok_r(NULL, " \t\r", &save)) {
		if (ntok == MAX_TOKENS) {
			SET_ERR("more than %d words in a request", MAX_TOKENS);
			rc = -EINVAL;
			goto out;
		}
		tok[ntok++] = t;
	}
	if (!ntok) {
		SET_ERR("empty request: expected open, stage, next, seek, release, close or stats");
		rc = -EINVAL;
		goto out;
	}
	verb = tok[0];
	for (size_t i = 1; i < ntok; i++) {
		char *eq = strchr(tok[i], '=');

		/* open's target is the one word without '=' (a view name has '=' after a '/'). */
		if (i == 1 && !strcmp(verb, "open") && (!eq || strchr(tok[i], '/'))) {
			arg = tok[i];
			continue;
		}
		if (!eq || eq == tok[i]) {
			SET_ERR("'%s': expected KEY=VALUE", tok[i]);
			rc = -EINVAL;
			goto out;
		}
		*eq = 0;
		kv[nkv++] = (struct kv){ tok[i], eq + 1 };
	}
	if (!strcmp(verb, "open")) {
		rc = text_open(se, arg, kv, nkv, r, err);
	} else if (!strcmp(verb, "stage")) {
		rc = text_stage(se, kv, nkv, r, err);
	} else if (!strcmp(verb, "next")) {
		rc = text_next(se, kv, nkv, r, err);
	} else if (!strcmp(verb, "release")) {
		rc = text_release(se, kv, nkv, r, err);
	} else if (!strcmp(verb, "close")) {
		rc = kv_check(kv, nkv, "close", stream_keys, err);
		if (!rc)
			rc = need_u64(kv, nkv, "stream", &x, err);
		if (!rc)
			rc = do_close(se, x, err);
		if (!rc)
			rc = tfs_buf_printf(r, "ok\n");
	} else if (!strcmp(verb, "seek")) {
		rc = kv_check(kv, nkv, "seek", seek_keys, err);
		if (!rc)
			rc = get_stream(se, kv, nkv, &s, err);
		if (!rc)
			rc = need_u64(kv, nkv, "pos", &x, err);
		if (!rc)
			rc = do_seek(s, x, err);
		if (!rc)
			rc = tfs_buf_printf(r, "ok\n");
	} else if (!strcmp(verb, "stats")) {
		rc = text_stats(se, kv, nkv, r, err);
	} else {
		SET_ERR("unknown request '%.32s': expected open, stage, next, seek, release, close "
			"or stats",
			verb);
		rc = -EINVAL;
	}
out:
	if (!rc)
		return 0;
	__atomic_add_fetch(&ctl->errors, 1, __ATOMIC_RELAXED);
	if (!err[0])
		snprintf(err, sizeof(err), "%s", strerror(-rc));
	/* One line of printable ASCII, whatever the request held. */
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	tfs_debug("control session %u: error %s %s", se->id, errno_name(-rc), err);
	return tfs_buf_printf(r, "error %s %s\n", errno_name(-rc), err);
}

ssize_t tfs_ctlfile_write(struct tfs_ctlfile_session *se, const char *buf, size_t len)
{
	char *copy = malloc(len + 1), *line, *nl;
	ssize_t rc = (ssize_t)len;

	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	copy[len] = 0;
	/* A NUL byte would cut a line short: make it a character that fails to parse instead. */
	for (size_t i = 0; i < len; i++)
		copy[i] = copy[i] ? copy[i] : '?';
	pthread_mutex_lock(&se->lock);
	if (se->out.len - se->out_off > MAX_OUT) {
		rc = -ENOBUFS; /* read the replies first */
		goto out;
	}
	/* Every line is a request; so is a last line without its newline. */
	for (line = copy; line < copy + len; line = nl + 1) {
		nl = memchr(line, '\n', (size_t)(copy + len - line));
		if (!nl)
			nl = copy + len;
		*nl = 0;
		if (!line[strspn(line, " \t\r")])
			continue; /* blank lines are not requests */
		if (handle_line(se, line, &se->out)) {
			rc = -ENOMEM;
			break;
		}
	}
out:
	pthread_mutex_unlock(&se->lock);
	free(copy);
	return rc;
}

ssize_t tfs_ctlfile_read(struct tfs_ctlfile_session *se, char *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&se->lock);
	n = se->out.len - se->out_off;
	n = n < len ? n : len;
	if (n)
		memcpy(buf, se->out.data + se->out_off, n);
	se->out_off += n;
	if (se->out_off == se->out.len) {
		se->out.len = 0;
		se->out_off = 0;
	}
	pthread_mutex_unlock(&se->lock);
	return (ssize_t)n;
}

/* --- ioctls --------------------------------------------------------------------------------- */

/* A fixed-size string field must hold its NUL. */
static int field_ok(const char *f, size_t cap)
{
	return memchr(f, 0, cap) != NULL;
}

static void fill_batch(struct stream *s, unsigned slot, struct tfs_ctl_batch *b)
{
	const size_t rows = tfs_staging_rows(s->ring, slot);
	struct tfs_staging_loc loc;

	tfs_staging_locate(s->ring, slot, &loc);
	memset(b, 0, sizeof(*b));
	b->stream = s->id;
	b->slot = slot;
	b->rows = rows;
	b->pos = s->slot_pos[slot];
	b->device = loc.device;
	b->ncols = (uint32_t)s->ncols;
	if (loc.path)
		snprintf(b->path, sizeof(b->path), "%s", loc.path);
	b->file_bytes = loc.file_bytes;
	memcpy(b->ipc_mem, loc.ipc_mem, sizeof(b->ipc_mem));
	memcpy(b->ipc_event, loc.ipc_event, sizeof(b->ipc_event));
	for (size_t c = 0; c < s->ncols; c++) {
		const struct tfs_column *col = &s->ver->manifest.cols[s->cols[c]];
		struct tfs_ctl_col *o = &b->cols[c];

		snprintf(o->name, sizeof(o->name), "%s", col->name);
		snprintf(o->dtype, sizeof(o->dtype), "%s", col->dtype.descr);
		o->ndim = col->ndim + 1;
		o->shape[0] = rows;
		for (unsigned d = 0; d < col->ndim && d + 1 < TFS_CTL_MAX_DIMS; d++)
			o->shape[d + 1] = col->shape[d];
		o->offset = loc.col_off[c];
		o->bytes = rows * col->row_bytes;
	}
}

static int ioc_open(struct tfs_ctlfile_session *se, struct tfs_ctl_open *o, char *err)
{
	struct open_args a = { .target = o->target };
	struct stream *s;
	char hex[TFS_ID_HEX];
	int rc;

	if (!field_ok(o->target, sizeof(o->target)) || !field_ok(o->device, sizeof(o->device)) ||
	    o->ncols > TFS_CTL_MAX_COLS) {
		SET_ERR("malformed open: unterminated target or device, or ncols > %d",
			TFS_CTL_MAX_COLS);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < o->ncols; i++) {
		if (!field_ok(o->cols[i], sizeof(o->cols[i]))) {
			SET_ERR("malformed open: column %u is not terminated", i);
			return -EINVAL;
		}
		a.cols[a.ncols++] = o->cols[i];
	}
	a.device = o->device[0] ? o->device : NULL;
	if (o->depth > TFS_STAGING_MAX_DEPTH) {
		SET_ERR("depth=%u: expected 1..%d", o->depth, TFS_STAGING_MAX_DEPTH);
		return -EINVAL;
	}
	a.depth = o->depth;
	a.batch = o->batch;
	a.ahead = o->ahead == UINT32_MAX ? -1
		  : o->ahead > MAX_AHEAD ? MAX_AHEAD + 1
					 : (long)o->ahead;
	rc = do_open(se, &a, &s, err);
	if (rc)
		return rc;
	o->stream = s->id;
	o->slots = s->depth;
	o->rows = s->n;
	o->max_batch = s->max_batch;
	o->slot_bytes = tfs_staging_slot_bytes(s->ring);
	tfs_id_hex(&s->ver->commit.id, hex);
	snprintf(o->commit, sizeof(o->commit), "%s", hex);
	return 0;
}

static int ioc_stage(struct tfs_ctlfile_session *se, const struct tfs_ctl_stage *in,
		     struct tfs_ctl_stage *out, char *err)
{
	struct stream *s = find_stream(se, in->stream, err);
	unsigned slot;
	int rc;

	if (!s)
		return -ENOENT;
	switch (in->mode) {
	case TFS_CTL_ROWS:
		if (in->nrows > TFS_CTL_MAX_ROWS) {
			SET_ERR("nrows=%u: at most %d rows per ioctl (use a range or the text "
				"protocol)",
				in->nrows, TFS_CTL_MAX_ROWS);
			return -E2BIG;
		}
		rc = do_stage(s, in->u.rows, 0, in->nrows, in->slot, &slot, err);
		break;
	case TFS_CTL_RANGE:
		rc = do_stage(s, NULL, in->start, in->count, in->slot, &slot, err);
		break;
	case TFS_CTL_NEXT:
		rc = do_next(s, in->count, &slot, err);
		break;
	default:
		SET_ERR("mode %u: expected TFS_CTL_ROWS, TFS_CTL_RANGE or TFS_CTL_NEXT", in->mode);
		return -EINVAL;
	}
	if (!rc)
		fill_batch(s, slot, &out->u.batch);
	return rc;
}

struct ioc {
	unsigned cmd;
	size_t size;
};

static const struct ioc iocs[] = {
	{ TFS_CTL_IOC_OPEN, sizeof(struct tfs_ctl_open) },
	{ TFS_CTL_IOC_STAGE, sizeof(struct tfs_ctl_stage) },
	{ TFS_CTL_IOC_RELEASE, sizeof(struct tfs_ctl_release) },
	{ TFS_CTL_IOC_CLOSE, sizeof(struct tfs_ctl_close) },
	{ TFS_CTL_IOC_STATS, sizeof(struct tfs_ctl_stats) },
	{ TFS_CTL_IOC_SEEK, sizeof(struct tfs_ctl_seek) },
};

int tfs_ctlfile_ioctl(struct tfs_ctlfile_session *se, unsigned cmd, const void *in, size_t in_len,
		      void *out, size_t out_len)
{
	struct tfs_ctl_status *st = out;
	const struct tfs_ctl_status *ist = in;
	char err[ERR_MAX] = "";
	struct stream *s;
	size_t size = 0;
	int rc;

	for (size_t i = 0; i < sizeof(iocs) / sizeof(iocs[0]); i++)
		if (iocs[i].cmd == cmd)
			size = iocs[i].size;
	if (!size)
		return -ENOTTY;
	if (in_len != size || out_len != size)
		return -EINVAL;
	__atomic_add_fetch(&se->ctl->requests, 1, __ATOMIC_RELAXED);
	memcpy(out, in, size);
	pthread_mutex_lock(&se->lock);
	if (ist->abi != 0 && ist->abi != TFS_CTL_ABI) {
		SET_ERR("ABI version %u: this daemon speaks %d", ist->abi, TFS_CTL_ABI);
		rc = -EPROTO;
	} else if (cmd == TFS_CTL_IOC_OPEN) {
		rc = ioc_open(se, out, err);
	} else if (cmd == TFS_CTL_IOC_STAGE) {
		rc = ioc_stage(se, in, out, err);
	} else if (cmd == TFS_CTL_IOC_RELEASE) {
		const struct tfs_ctl_release *r = in;

		rc = (s = find_stream(se, r->stream, err)) ? do_release(s, r->slot, err) : -ENOENT;
	} else if (cmd == TFS_CTL_IOC_CLOSE) {
		rc = do_close(se, ((const struct tfs_ctl_close *)in)->stream, err);
	} else if (cmd == TFS_CTL_IOC_SEEK) {
		const struct tfs_ctl_seek *k = in;

		rc = (s = find_stream(se, k->stream, err)) ? do_seek(s, k->pos, err) : -ENOENT;
	} else {
		stats_now(se->ctl, out, se);
		rc = 0;
	}
	pthread_mutex_unlock(&se->lock);
	if (rc) {
		__atomic_add_fetch(&se->ctl->errors, 1, __ATOMIC_RELAXED);
		if (!err[0])
			snprintf(err, sizeof(err), "%s", strerror(-rc));
	}
	st->status = rc;
	st->abi = TFS_CTL_ABI;
	snprintf(st->msg, sizeof(st->msg), "%s", err);
	return 0;
}

int tfs_ctlfile_stats_json(struct tfs_ctlfile *ctl, struct tfs_buf *out)
{
	struct tfs_staging_stats ss;
	struct tfs_ctl_stats st;

	tfs_staging_stats(&ss);
	stats_now(ctl, &st, NULL);
	return tfs_buf_printf(out,
			      "  \"staging\": {\"sessions\": %" PRIu64 ", \"streams\": %" PRIu64
			      ", \"slots\": %" PRIu64 ", \"slots_leased\": %" PRIu64
			      ", \"batches\": %" PRIu64 ", \"rows\": %" PRIu64
			      ", \"bytes\": %" PRIu64 ", \"gather_s\": %.3f, \"requests\": %" PRIu64
			      ", \"errors\": %" PRIu64 "},\n",
			      st.sessions, st.streams, st.slots, st.slots_leased, st.batches,
			      st.rows, st.bytes, (double)ss.fill_ns / 1e9, st.requests, st.errors);
}

int tfs_ctlfile_metrics(struct tfs_ctlfile *ctl, struct tfs_buf *out)
{
	struct tfs_staging_stats ss;
	struct tfs_ctl_stats st;
	const struct {
		const char *name, *type, *help;
	} m[] = {
		{ "sessions", "gauge", "Control-file sessions open." },
		{ "streams", "gauge", "Staging streams open." },
		{ "slots", "gauge", "Staging slots allocated." },
		{ "slots_leased", "gauge", "Staging slots leased to loaders now." },
		{ "batches_total", "counter", "Batches staged." },
		{ "rows_total", "counter", "Rows staged." },
		{ "bytes_total", "counter", "Bytes staged." },
		{ "requests_total", "counter", "Control-file requests." },
		{ "errors_total", "counter", "Control-file requests answered with an error." },
	};
	uint64_t v[sizeof(m) / sizeof(m[0])];
	int rc = 0;

	tfs_staging_stats(&ss);
	stats_now(ctl, &st, NULL);
	v[0] = st.sessions, v[1] = st.streams, v[2] = st.slots, v[3] = st.slots_leased;
	v[4] = st.batches, v[5] = st.rows, v[6] = st.bytes, v[7] = st.requests, v[8] = st.errors;
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]) && !rc; i++)
		rc = tfs_buf_printf(out,
				    "# HELP tensorfs_staging_%s %s\n# TYPE tensorfs_staging_%s %s\n"
				    "tensorfs_staging_%s %" PRIu64 "\n",
				    m[i].name, m[i].help, m[i].name, m[i].type, m[i].name, v[i]);
	if (!rc)
		rc = tfs_buf_printf(out,
				    "# HELP tensorfs_staging_gather_seconds_total Time spent gathering "
				    "rows into slots.\n# TYPE tensorfs_staging_gather_seconds_total "
				    "counter\ntensorfs_staging_gather_seconds_total %.6f\n",
				    (double)ss.fill_ns / 1e9);
	return rc;
}
