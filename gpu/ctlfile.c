/* SPDX-License-Identifier: MIT */
/* ctlfile: the sessions of <mount>/.tensorfs/control and their streams, served by gpu/staging
 * rings; the requests come through ctltext.c (text lines) and ctlioctl.c (ioctls). */
#include "ctlsession.h"

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
#include "viewspans.h"

/* --- the control file ----------------------------------------------------------------------- */

/* Is pid a tensorfs daemon still running? Not when it is gone, exiting (killed: its threads
 * are still being torn down), a zombie (killed and not yet reaped), or another program that got
 * its number since. */
static int daemon_alive(long pid)
{
	const unsigned pf_exiting = 0x4; /* the kernel's PF_EXITING, in /proc/PID/stat's flags */
	char path[64], buf[256], *comm, *end, state;
	unsigned flags;
	FILE *f;
	size_t n;

	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 1; /* cannot tell: keep its files */
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	comm = strchr(buf, '(');
	end = strrchr(buf, ')');
	if (!comm || !end || end < comm || !end[1] || !end[2])
		return 1;
	/* After the name: state ppid pgrp session tty_nr tpgid flags ... */
	if (sscanf(end + 2, "%c %*d %*d %*d %*d %*d %u", &state, &flags) != 2)
		return 1;
	if (state == 'Z' || state == 'X' || (flags & pf_exiting))
		return 0;
	*end = 0;
	return !strncmp(comm + 1, "tensorfs", 8) || !strcmp(comm + 1, "mount.tensorfs");
}

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
		if (daemon_alive(pid))
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
	uint64_t keep = cfg->keep_given ? cfg->max_keep : TFS_CTL_DEFAULT_KEEP;
	struct tfs_ctlfile *ctl = calloc(1, sizeof(*ctl));
	if (!ctl)
		return -ENOMEM;
	ctl->lake = cfg->lake;
	ctl->max_sessions = cfg->max_sessions ? cfg->max_sessions : TFS_CTL_DEFAULT_SESSIONS;
	ctl->max_streams = cfg->max_streams ? cfg->max_streams : TFS_CTL_DEFAULT_STREAMS;
	ctl->max_staging = cfg->max_staging;
	ctl->cache_gpu = cfg->cache_gpu;
	ctl->cache_gpu_headroom = cfg->cache_gpu_headroom;
	if (cfg->cuda_init > 0)
		tfs_staging_prepare(cfg->cuda_init - 1, tfs_lake_cache(cfg->lake));
	if (!ctl->max_staging) {
		long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

		ctl->max_staging = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 2
							 : (uint64_t)8 << 30;
	}
	ctl->shm_dir = strdup(cfg->shm_dir ? cfg->shm_dir : DEFAULT_SHM_DIR);
	/* As given (absolute): resolving it would stat the mount, which waits for this daemon. */
	ctl->mountpoint = cfg->mountpoint ? strdup(cfg->mountpoint) : NULL;
	if (!ctl->shm_dir || (cfg->mountpoint && !ctl->mountpoint)) {
		free(ctl->shm_dir);
		free(ctl->mountpoint);
		free(ctl);
		return -ENOMEM;
	}
	keep = keep < ctl->max_staging ? keep : ctl->max_staging;
	if (keep) {
		const int e = tfs_ringkeep_create(keep, TFS_CTL_KEEP_MS, &ctl->keep);

		if (e) {
			free(ctl->shm_dir);
			free(ctl->mountpoint);
			free(ctl);
			return e;
		}
	}
	pthread_mutex_init(&ctl->lock, NULL);
	remove_stale_files(ctl->shm_dir);
	*out = ctl;
	return 0;
}

static void stream_free(struct tfs_ctl_stream *s);

static void session_free(struct tfs_ctlfile_session *s)
{
	for (unsigned i = 0; i < MAX_STREAMS; i++)
		stream_free(s->streams[i]);
	tfs_buf_free(&s->out);
	tfs_buf_free(&s->in);
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
	tfs_ringkeep_free(ctl->keep);	/* after the streams that kept their slots there */
	tfs_staging_cuda_cache_close(); /* after every ring that could read from them */
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
	pthread_mutex_lock(&ctl->lock);
	if (ctl->nsessions >= ctl->max_sessions) {
		pthread_mutex_unlock(&ctl->lock);
		free(s);
		tfs_warn("control file: %u sessions open, the limit (-o staging_sessions=%u): "
			 "refused with EBUSY",
			 ctl->max_sessions, ctl->max_sessions);
		return -EBUSY;
	}
	pthread_mutex_init(&s->lock, NULL);
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
	pthread_mutex_unlock(&ctl->lock);
	session_free(s); /* its streams give their room back, their slot files go */
	/* Counted closed once its files are gone: whoever sees the count drop sees them gone. */
	pthread_mutex_lock(&ctl->lock);
	ctl->nsessions--;
	pthread_mutex_unlock(&ctl->lock);
}

/* --- streams -------------------------------------------------------------------------------- */

/* Also the one place a stream's count and slot bytes go back to the control file's limits. */
static void stream_free(struct tfs_ctl_stream *s)
{
	if (!s)
		return;
	if (s->ring)
		tfs_ctl_drop_ahead(s, 0);
	/* Its slots freed or kept (counted by the keep) before their bytes go back to the limit:
	 * live and kept slots never exceed it together. */
	tfs_staging_destroy(s->ring);
	if (s->counted) {
		pthread_mutex_lock(&s->ctl->lock);
		s->ctl->nstreams--;
		s->ctl->staging_bytes -= s->bytes;
		pthread_mutex_unlock(&s->ctl->lock);
	}
	tfs_reader_close(s->reader); /* after the ring that reads through it */
	tfs_lake_view_put(s->lake, s->lview);
	tfs_version_put(s->ver);
	free(s->rows);
	free(s->slot_pos);
	free(s);
}

/* A stream over a view publishes the view's order to the cache's eviction (MIN, when the mount
 * evicts by plans): the chunks of every column it stages, by view row, with the rows of one
 * warm-up window ahead of the cursor (and the batches being made ahead) protected. Near the
 * end, the fixed columns' next epoch is warmed. */
static int stream_plan(struct tfs_ctl_stream *s, uint64_t row_bytes)
{
	const struct tfs_view_spans *sp[TFS_CTL_MAX_COLS] = { 0 };
	int rc = 0;

	for (size_t i = 0; !rc && i < s->ncols; i++) {
		const struct tfs_column *c = tfs_ctl_col(s, i);

		if (c->kind != TFS_COL_FIXED)
			rc = tfs_lake_view_spans(s->lake, s->lview, s->cols[i], 0, &sp[i]);
		else
			tfs_reader_warm_columns(s->reader, &s->cols[i], 1);
	}
	if (!rc)
		rc = tfs_reader_plan(s->reader, s->cols, sp, s->ncols, row_bytes,
				     s->max_batch * s->depth);
	return rc;
}

/* "DATASET/REF[/views/PARAMS]" or "DATASET/commits/ID[/views/PARAMS]", or such a directory's
 * absolute path under the mount. */
static int resolve_target(struct tfs_ctlfile *ctl, const char *target, struct tfs_version **vout,
			  struct tfs_lake_view **view, char *err)
{
	struct tfs_version *v = NULL;
	const char *rel = target;
	char *vparams = NULL;
	size_t ml;
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
	if (!strncmp(rel, "mixes/", 6)) {
		SET_ERR("%s: a mixture's views are read as files (views/PARAMS/tokens.npy ...); "
			"streams stage a dataset's versions and views",
			target);
		return -EINVAL;
	}
	/* The same version and view the mount's directories show, shared through the lake. */
	rc = tfs_lake_resolve(ctl->lake, rel, &v, &vparams, err, ERR_MAX);
	if (!rc && vparams)
		rc = tfs_lake_view_get(ctl->lake, v, vparams, view, err, ERR_MAX);
	free(vparams);
	if (rc) {
		tfs_version_put(v);
		return rc;
	}
	*vout = v;
	return 0;
}

/* Column names of v, for a message. */
static void column_list(const struct tfs_version *v, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = 0;
	for (size_t i = 0; i < v->manifest.ncols && len < cap; i++)
		if (v->manifest.cols[i].part == TFS_PART_NONE)
			len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? ", " : "",
						v->manifest.cols[i].name);
}

/* Bytes a slot gives each row of column c, before the room for rows of any size. */
static uint64_t slot_row_bytes(const struct tfs_column *c)
{
	if (c->kind == TFS_COL_FIXED)
		return c->row_bytes;
	return sizeof(uint64_t) * (1 + (c->kind == TFS_COL_RAGGED ? c->ndim : 0));
}

/* The most row bytes of column col (not fixed) that any max_batch rows in a row of the stream's
 * order hold: a window slid over the stream, reading the offsets once (O(rows)). */
static int largest_batch(struct tfs_ctl_stream *s, size_t col, uint64_t *out)
{
	uint64_t *win = malloc(s->max_batch * sizeof(*win)), sum = 0, best = 0;
	struct tfs_spans sp;
	int rc = 0;

	if (!win)
		return -ENOMEM;
	tfs_spans_init(&sp, s->ver, tfs_lake_cache(s->lake), col);
	for (uint64_t i = 0; i < s->n; i++) {
		const uint64_t r = s->view ? s->view->rows[i] : i;
		uint64_t a, b;

		rc = tfs_spans_get(&sp, r, &a, &b);
		if (rc)
			break;
		if (i >= s->max_batch)
			sum -= win[i % s->max_batch];
		win[i % s->max_batch] = b - a;
		sum += b - a;
		best = sum > best ? sum : best;
	}
	tfs_spans_done(&sp);
	free(win);
	*out = best;
	return rc;
}

/* Each column of another kind than fixed gets room for row bytes in a slot: `room` when the
 * loader asked, else what the largest batch of `next` needs. */
static int rooms(struct tfs_ctl_stream *s, uint64_t room, uint64_t *out, char *err)
{
	for (size_t i = 0; i < s->ncols; i++) {
		const struct tfs_column *c = tfs_ctl_col(s, i);
		int rc;

		out[i] = 0;
		if (c->kind == TFS_COL_FIXED)
			continue;
		if (room) {
			out[i] = room;
			continue;
		}
		rc = largest_batch(s, s->cols[i], &out[i]);
		if (rc) {
			SET_ERR("cannot read the offsets of column '%s': %s", c->name,
				strerror(-rc));
			return rc;
		}
		out[i] = out[i] ? out[i] : 1;
		if (out[i] > TFS_STAGING_MAX_SLOT_BYTES) {
			SET_ERR("batch=%" PRIu64 ": %" PRIu64 " rows of column '%s' in a row hold "
				"up to %" PRIu64 " bytes, more than a slot (%llu MiB); ask for a "
				"smaller batch",
				s->max_batch, s->max_batch, c->name, out[i],
				TFS_STAGING_MAX_SLOT_BYTES >> 20);
			return -E2BIG;
		}
	}
	return 0;
}

/* A pack view's column `name` (tokens, segments or doc) described as the fixed column it is
 * staged as (tokens as `dtype` when given: int32 or int64); its tfs_pack_file, or -EINVAL. */
static int pack_column(const struct tfs_ctl_stream *s, const char *name, const char *dtype,
		       struct tfs_column *out, char *err)
{
	static const char *const names[] = { "tokens", "segments", "doc" };
	struct tfs_dtype dt;
	uint64_t len;
	int f = -1, big;

	for (int i = 0; i < TFS_PACK_NFILES; i++)
		if (!strcmp(name, names[i]))
			f = i;
	if (f < 0) {
		SET_ERR("unknown column '%s' of a pack view (tokens, segments, doc)", name);
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	out->name = (char *)names[f]; /* static: the description is never freed */
	tfs_pack_file_type(s->pack, (enum tfs_pack_file)f, &dt, &len);
	if (f == TFS_PACK_TOKENS && dtype) {
		if (strcmp(dtype, "int32") && strcmp(dtype, "int64")) {
			SET_ERR("dtype=%s: tokens are staged as int32 or int64", dtype);
			return -EINVAL;
		}
		tfs_dtype_parse(strcmp(dtype, "int32") ? "<i8" : "<i4", &dt, &big, err, ERR_MAX);
	}
	out->kind = TFS_COL_FIXED;
	out->part = TFS_PART_NONE;
	out->dtype = dt;
	out->ndim = 1;
	out->shape[0] = len;
	out->row_bytes = len * dt.itemsize;
	return f;
}

int tfs_ctl_stream_open(struct tfs_ctlfile_session *se, const struct tfs_ctl_open_args *a,
			struct tfs_ctl_stream **out, char *err)
{
	struct tfs_ctlfile *ctl = se->ctl;
	struct tfs_staging_config cfg = { 0 };
	struct tfs_ctl_stream *s = NULL;
	unsigned slot_id = 0;
	uint64_t row_bytes = 0, slot_bytes, keep_room = 0;
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
	s->ctl = ctl;
	s->lake = ctl->lake;
	s->device = TFS_STAGING_HOST;
	if (a->device) {
		rc = tfs_staging_parse_device(a->device, &s->device, err, ERR_MAX);
		if (rc == -EINVAL)
			SET_ERR("device '%s': expected host, cuda:N or a CUDA device's PCI bus id "
				"(0000:3b:00.0)",
				a->device);
		if (rc)
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
	/* By default every slot but the loader's is being filled: fills run side by side on the
	 * pool, so a batch that takes longer to assemble than to consume is made in time. */
	s->ahead_max = s->depth - 1 < MAX_AHEAD ? s->depth - 1 : MAX_AHEAD;
	if (a->ahead >= 0)
		s->ahead_max = (unsigned)a->ahead;
	/* Before the target: a missing device is the clearer message, and cheaper. */
	rc = tfs_staging_probe(s->device, err, ERR_MAX);
	if (rc)
		goto fail;
	rc = resolve_target(ctl, a->target, &s->ver, &s->lview, err);
	s->view = s->lview ? s->lview->view : NULL;
	if (rc)
		goto fail;
	s->n = s->view ? s->view->n : s->ver->manifest.rows;
	s->pack = s->view ? s->view->pack : NULL;
	if (a->dtype && !s->pack) {
		SET_ERR("dtype= applies to a pack= view's tokens");
		rc = -EINVAL;
		goto fail;
	}
	for (size_t i = 0; i < a->ncols; i++) {
		int c = s->pack ? pack_column(s, a->cols[i], a->dtype, &s->pcols[i], err)
				: tfs_version_column(s->ver, a->cols[i]);

		if (s->pack && c < 0) {
			rc = c;
			goto fail;
		}
		if (c >= 0 && !s->pack && s->ver->manifest.cols[c].part != TFS_PART_NONE)
			c = -1; /* parts are not columns of their own */
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
		row_bytes += slot_row_bytes(tfs_ctl_col(s, i));
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
	/* Slots hold what a batch can: no more rows than the stream has (batch=2^27 over 1,000
	 * rows reserves slots of 1,000 rows). `next` takes any batch up to the one asked for. */
	s->asked_batch = s->max_batch;
	if (s->n && s->max_batch > s->n)
		s->max_batch = s->n;
	if (row_bytes && s->max_batch > TFS_STAGING_MAX_SLOT_BYTES / row_bytes) {
		SET_ERR("batch=%" PRIu64 " rows of %" PRIu64 " bytes: more than a slot's %llu MiB",
			s->max_batch, row_bytes, TFS_STAGING_MAX_SLOT_BYTES >> 20);
		rc = -E2BIG;
		goto fail;
	}
	rc = rooms(s, a->room, cfg.room, err);
	if (rc)
		goto fail;
	slot_bytes = s->max_batch * row_bytes;
	for (size_t i = 0; i < s->ncols; i++)
		slot_bytes += cfg.room[i];
	if (slot_bytes * s->depth > MAX_STREAM_BYTES) {
		SET_ERR("depth=%u slots of batch=%" PRIu64 " rows: more than %llu GiB per stream",
			s->depth, s->max_batch, MAX_STREAM_BYTES >> 30);
		rc = -E2BIG;
		goto fail;
	}
	/* Counted against the limits of all sessions before any memory is taken. */
	pthread_mutex_lock(&ctl->lock);
	if (ctl->nstreams >= ctl->max_streams) {
		SET_ERR("%u streams open in all sessions, the limit (-o staging_streams=%u)",
			ctl->max_streams, ctl->max_streams);
		rc = -EBUSY;
	} else if (slot_bytes * s->depth > ctl->max_staging - ctl->staging_bytes) {
		SET_ERR("%" PRIu64 " bytes of slots asked, %" PRIu64 " of the limit of %" PRIu64
			" in use (-o staging_mem=SIZE)",
			slot_bytes * s->depth, ctl->staging_bytes, ctl->max_staging);
		rc = -ENOSPC;
	} else {
		ctl->nstreams++;
		ctl->staging_bytes += slot_bytes * s->depth;
		s->bytes = slot_bytes * s->depth;
		s->counted = 1;
		/* Kept slots (ringkeep.h) count against the limit too: the room left beside the
		 * live streams' is all they may hold once this one makes slots of its own. */
		keep_room = ctl->max_staging - ctl->staging_bytes;
	}
	pthread_mutex_unlock(&ctl->lock);
	if (rc)
		goto fail;
	s->rows = malloc(s->max_batch * sizeof(*s->rows));
	s->slot_pos = calloc(s->depth, sizeof(*s->slot_pos));
	if (!s->rows || !s->slot_pos) {
		rc = -ENOMEM;
		goto fail;
	}
	snprintf(tag, sizeof(tag), "%ld-%u-%u", (long)getpid(), se->id, s->id);
	cfg.ver = s->ver;
	cfg.cache = tfs_lake_cache(ctl->lake);
	cfg.ncols = s->ncols;
	memcpy(cfg.cols, s->cols, sizeof(cfg.cols));
	cfg.max_rows = s->max_batch;
	cfg.pad_bad_rows = s->view && s->view->on_error != TFS_ON_ERROR_FAIL;
	/* A pack's samples are made of documents: the bad bytes in them are padded or EIO. */
	s->skip = s->view && !s->pack && s->view->on_error == TFS_ON_ERROR_SKIP;
	cfg.pack = s->pack;
	cfg.pack_cols = s->pcols;
	for (size_t i = 0; i < s->ncols; i++)
		s->row_bytes += tfs_ctl_col(s, i)->row_bytes;
	/* A pack's rows are samples, not the version's: its reader follows no view order. */
	rc = s->pack ? tfs_reader_open(s->ver, cfg.cache, cfg.pad_bad_rows, &s->reader)
		     : tfs_reader_open_lake(ctl->lake, s->ver, s->lview, cfg.pad_bad_rows,
					    &s->reader);
	if (rc)
		goto fail;
	cfg.reader = s->reader;
	cfg.depth = s->depth;
	cfg.device = s->device;
	cfg.cache_gpu = ctl->cache_gpu;
	cfg.cache_gpu_headroom = ctl->cache_gpu_headroom;
	cfg.shm_dir = ctl->shm_dir;
	cfg.tag = tag;
	cfg.uid = se->uid;
	cfg.gid = se->gid;
	cfg.pool = tfs_lake_pool(ctl->lake);
	cfg.keep = ctl->keep;
	cfg.keep_room = keep_room;
	rc = tfs_staging_create(&cfg, &s->ring, err, ERR_MAX);
	if (!rc && s->view && !s->pack)
		rc = stream_plan(s, slot_bytes / s->max_batch);
	if (rc)
		goto fail;
	se->streams[slot_id - 1] = s;
	se->nstreams++;
	*out = s;
	return 0;
fail:
	if (rc == -ENOMEM && !err[0])
		SET_ERR("out of memory");
	stream_free(s);
	return rc;
}

struct tfs_ctl_stream *tfs_ctl_stream_find(struct tfs_ctlfile_session *se, uint64_t id, char *err)
{
	if (id >= 1 && id <= MAX_STREAMS && se->streams[id - 1])
		return se->streams[id - 1];
	SET_ERR("no stream %" PRIu64 " in this session", id);
	return NULL;
}

int tfs_ctl_stream_close(struct tfs_ctlfile_session *se, uint64_t id, char *err)
{
	struct tfs_ctl_stream *s = tfs_ctl_stream_find(se, id, err);

	if (!s)
		return -ENOENT;
	se->streams[s->id - 1] = NULL;
	se->nstreams--;
	stream_free(s);
	return 0;
}

void tfs_ctl_stats_now(struct tfs_ctlfile *ctl, struct tfs_ctl_stats *st,
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

const char *tfs_ctl_errno_name(int e)
{
	const char *n = strerrorname_np(e);

	return n ? n : "EIO";
}

int tfs_ctlfile_stats_json(struct tfs_ctlfile *ctl, struct tfs_buf *out)
{
	struct tfs_staging_stats ss;
	struct tfs_ringkeep_stats ks;
	struct tfs_ctl_stats st;

	tfs_staging_stats(&ss);
	tfs_ctl_stats_now(ctl, &st, NULL);
	tfs_ringkeep_stats(ctl->keep, &ks);
	return tfs_buf_printf(
		out,
		"  \"staging\": {\"sessions\": %" PRIu64 ", \"streams\": %" PRIu64
		", \"slots\": %" PRIu64 ", \"slots_leased\": %" PRIu64 ", \"batches\": %" PRIu64
		", \"rows\": %" PRIu64 ", \"bytes\": %" PRIu64
		", \"gather_s\": %.3f, \"requests\": %" PRIu64 ", \"errors\": %" PRIu64
		", \"gpu_cache\": {\"budget\": %" PRIu64 ", \"held\": %" PRIu64
		", \"bytes\": %" PRIu64 ", \"entries\": %" PRIu64 ", \"hits\": %" PRIu64
		", \"misses\": %" PRIu64 ", \"evictions\": %" PRIu64 ", \"given_back\": %" PRIu64
		"}, \"kept\": {\"budget\": %" PRIu64 ", \"rings\": %" PRIu64 ", \"bytes\": %" PRIu64
		", \"reused\": %" PRIu64 ", \"dropped\": %" PRIu64 "}},\n",
		st.sessions, st.streams, st.slots, st.slots_leased, st.batches, st.rows, st.bytes,
		(double)ss.fill_ns / 1e9, st.requests, st.errors, ss.gpu.budget, ss.gpu.held,
		ss.gpu.bytes, ss.gpu.entries, ss.gpu.hits, ss.gpu.misses, ss.gpu.evictions,
		ss.gpu.given_back, ks.budget, ks.rings, ks.bytes, ks.reused, ks.dropped);
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
		{ "kept_bytes", "gauge", "Bytes of slots kept after their streams closed." },
		{ "kept_reused_total", "counter", "Streams that took kept slots." },
		{ "gpu_cache_held_bytes", "gauge", "Bytes of GPU memory the chunk cache holds." },
		{ "gpu_cache_given_back_total", "counter",
		  "Segments of GPU memory the chunk cache gave back to other allocations." },
	};
	uint64_t v[sizeof(m) / sizeof(m[0])];
	struct tfs_ringkeep_stats ks;
	int rc = 0;

	tfs_staging_stats(&ss);
	tfs_ctl_stats_now(ctl, &st, NULL);
	tfs_ringkeep_stats(ctl->keep, &ks);
	v[0] = st.sessions, v[1] = st.streams, v[2] = st.slots, v[3] = st.slots_leased;
	v[4] = st.batches, v[5] = st.rows, v[6] = st.bytes, v[7] = st.requests, v[8] = st.errors;
	v[9] = ks.bytes, v[10] = ks.reused, v[11] = ss.gpu.held, v[12] = ss.gpu.given_back;
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]) && !rc; i++)
		rc = tfs_buf_printf(out,
				    "# HELP tensorfs_staging_%s %s\n# TYPE tensorfs_staging_%s %s\n"
				    "tensorfs_staging_%s %" PRIu64 "\n",
				    m[i].name, m[i].help, m[i].name, m[i].type, m[i].name, v[i]);
	if (!rc)
		rc = tfs_buf_printf(
			out,
			"# HELP tensorfs_staging_gather_seconds_total Time spent gathering "
			"rows into slots.\n# TYPE tensorfs_staging_gather_seconds_total "
			"counter\ntensorfs_staging_gather_seconds_total %.6f\n",
			(double)ss.fill_ns / 1e9);
	return rc;
}
