/* SPDX-License-Identifier: MIT */
/* ctlioctl: the control file's ioctls, the binary form of its requests for C callers. */
#include "ctlsession.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* A fixed-size string field must hold its NUL. */
static int field_ok(const char *f, size_t cap)
{
	return memchr(f, 0, cap) != NULL;
}

static void fill_batch(struct tfs_ctl_stream *s, unsigned slot, struct tfs_ctl_batch *b)
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
		const struct tfs_column *col = tfs_ctl_col(s, c);
		struct tfs_ctl_col *o = &b->cols[c];

		snprintf(o->name, sizeof(o->name), "%s", col->name);
		snprintf(o->dtype, sizeof(o->dtype), "%s", col->dtype.descr);
		o->offset = loc.col_off[c];
		o->bytes = tfs_staging_col_bytes(s->ring, slot, c);
		if (col->kind != TFS_COL_FIXED) {
			o->kind = col->kind == TFS_COL_RAGGED ? TFS_CTL_RAGGED
				  : col->kind == TFS_COL_TEXT ? TFS_CTL_TEXT
							      : TFS_CTL_BYTES;
			o->ndim = col->kind == TFS_COL_RAGGED ? col->ndim : 0;
			o->data = loc.data_off[c];
			o->shapes = col->kind == TFS_COL_RAGGED ? loc.shapes_off[c] : 0;
			continue;
		}
		o->ndim = col->ndim + 1;
		o->shape[0] = rows;
		for (unsigned d = 0; d < col->ndim && d + 1 < TFS_CTL_MAX_DIMS; d++)
			o->shape[d + 1] = col->shape[d];
	}
}

static int ioc_open(struct tfs_ctlfile_session *se, struct tfs_ctl_open *o, char *err)
{
	struct tfs_ctl_open_args a = { .target = o->target };
	struct tfs_ctl_stream *s;
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
	a.room = o->room;
	if (o->depth > TFS_STAGING_MAX_DEPTH) {
		SET_ERR("depth=%u: expected 1..%d", o->depth, TFS_STAGING_MAX_DEPTH);
		return -EINVAL;
	}
	a.depth = o->depth;
	a.batch = o->batch;
	a.ahead = o->ahead == UINT32_MAX ? -1
		  : o->ahead > MAX_AHEAD ? MAX_AHEAD + 1
					 : (long)o->ahead;
	rc = tfs_ctl_stream_open(se, &a, &s, err);
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
	struct tfs_ctl_stream *s = tfs_ctl_stream_find(se, in->stream, err);
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
		rc = tfs_ctl_stream_stage(s, in->u.rows, 0, in->nrows, in->slot, &slot, err);
		break;
	case TFS_CTL_RANGE:
		rc = tfs_ctl_stream_stage(s, NULL, in->start, in->count, in->slot, &slot, err);
		break;
	case TFS_CTL_NEXT:
		rc = tfs_ctl_stream_next(s, -1, in->count, &slot, err);
		break;
	default:
		SET_ERR("mode %u: expected TFS_CTL_ROWS, TFS_CTL_RANGE or TFS_CTL_NEXT", in->mode);
		return -EINVAL;
	}
	if (!rc)
		fill_batch(s, slot, &out->u.batch);
	return rc;
}

static int ioc_next(struct tfs_ctlfile_session *se, const struct tfs_ctl_next *in,
		    struct tfs_ctl_next *out, char *err)
{
	struct tfs_ctl_stream *s = tfs_ctl_stream_find(se, in->stream, err);
	unsigned slot;
	int rc;

	if (!s)
		return -ENOENT;
	if (in->release < -1) {
		SET_ERR("release=%d: a slot, or -1 for none", in->release);
		return -EINVAL;
	}
	rc = tfs_ctl_stream_next(s, in->release, in->batch, &slot, err);
	if (!rc)
		fill_batch(s, slot, &out->out);
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
	{ TFS_CTL_IOC_NEXT, sizeof(struct tfs_ctl_next) },
};

int tfs_ctlfile_ioctl(struct tfs_ctlfile_session *se, unsigned cmd, const void *in, size_t in_len,
		      void *out, size_t out_len)
{
	struct tfs_ctl_status *st = out;
	const struct tfs_ctl_status *ist = in;
	char err[ERR_MAX] = "";
	struct tfs_ctl_stream *s;
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
	} else if (cmd == TFS_CTL_IOC_NEXT) {
		rc = ioc_next(se, in, out, err);
	} else if (cmd == TFS_CTL_IOC_RELEASE) {
		const struct tfs_ctl_release *r = in;

		rc = (s = tfs_ctl_stream_find(se, r->stream, err))
			     ? tfs_ctl_stream_release(s, r->slot, err)
			     : -ENOENT;
	} else if (cmd == TFS_CTL_IOC_CLOSE) {
		rc = tfs_ctl_stream_close(se, ((const struct tfs_ctl_close *)in)->stream, err);
	} else if (cmd == TFS_CTL_IOC_SEEK) {
		const struct tfs_ctl_seek *k = in;

		rc = (s = tfs_ctl_stream_find(se, k->stream, err))
			     ? tfs_ctl_stream_seek(s, k->pos, err)
			     : -ENOENT;
	} else {
		tfs_ctl_stats_now(se->ctl, out, se);
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
