/* SPDX-License-Identifier: MIT */
/* ctltext: the control file's text protocol: one request a line, one reply line each. */
#include "ctlsession.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

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
		      struct tfs_ctl_stream **s, char *err)
{
	uint64_t id;
	int rc = need_u64(kv, n, "stream", &id, err);

	if (rc)
		return rc;
	*s = tfs_ctl_stream_find(se, id, err);
	return *s ? 0 : -ENOENT;
}

/* Append "ok ..." for a leased slot. */
static int reply_batch(struct tfs_buf *r, struct tfs_ctl_stream *s, unsigned slot)
{
	const size_t rows = tfs_staging_rows(s->ring, slot);
	struct tfs_staging_loc loc;
	uint64_t bytes = 0;
	int rc;

	tfs_staging_locate(s->ring, slot, &loc);
	for (size_t c = 0; c < s->ncols; c++)
		bytes += tfs_staging_col_bytes(s->ring, slot, c);
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
		const struct tfs_column *col = tfs_ctl_col(s, c);

		if (col->kind != TFS_COL_FIXED) {
			rc = tfs_buf_printf(r,
					    " col=%s kind=%s dtype=%s offsets=%" PRIu64
					    " data=%" PRIu64 " data_bytes=%" PRIu64,
					    col->name, tfs_col_kind_name(col->kind),
					    col->dtype.descr, loc.col_off[c], loc.data_off[c],
					    tfs_staging_col_bytes(s->ring, slot, c));
			if (!rc && col->kind == TFS_COL_RAGGED)
				rc = tfs_buf_printf(r, " shapes=%" PRIu64 " rank=%u",
						    loc.shapes_off[c], col->ndim);
			continue;
		}
		rc = tfs_buf_printf(r, " col=%s offset=%" PRIu64 " dtype=%s shape=%zu", col->name,
				    loc.col_off[c], col->dtype.descr, rows);
		for (unsigned d = 0; !rc && d < col->ndim; d++)
			rc = tfs_buf_printf(r, ",%" PRIu64, col->shape[d]);
	}
	return rc ? rc : tfs_buf_printf(r, "\n");
}

static const char *const open_keys[] = { "cols",  "device", "depth", "batch",
					 "ahead", "room",   "dtype", NULL };
static const char *const stage_keys[] = { "stream", "rows", "range", "slot", NULL };
static const char *const next_keys[] = { "stream", "batch", "release", NULL };
static const char *const release_keys[] = { "stream", "slot", NULL };
static const char *const stream_keys[] = { "stream", NULL };
static const char *const seek_keys[] = { "stream", "pos", NULL };
static const char *const no_keys[] = { NULL };

static int text_open(struct tfs_ctlfile_session *se, const char *target, const struct kv *kv,
		     size_t nkv, struct tfs_buf *r, char *err)
{
	struct tfs_ctl_open_args a = { .target = target, .ahead = -1 };
	char *cols = NULL, *save = NULL, hex[TFS_ID_HEX];
	const char *v;
	struct tfs_ctl_stream *s;
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
	a.dtype = kv_get(kv, nkv, "dtype");
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
	v = kv_get(kv, nkv, "room");
	if (v && (tfs_parse_size(v, &a.room) || !a.room)) {
		SET_ERR("room=%s: expected a size in bytes (K, M, G suffixes), at least 1", v);
		rc = -EINVAL;
		goto out;
	}
	rc = tfs_ctl_stream_open(se, &a, &s, err);
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
	struct tfs_ctl_stream *s;
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
		rc = tfs_ctl_stream_stage(s, rows, start, n, slot == UINT64_MAX ? -1 : (int)slot,
					  &out, err);
	free(rows);
	return rc ? rc : reply_batch(r, s, out);
}

static int text_next(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
		     struct tfs_buf *r, char *err)
{
	struct tfs_ctl_stream *s;
	uint64_t batch, done = 0;
	unsigned slot;
	int give = -1; /* release=K: the loader is done with slot K, told in the same request */
	int rc = kv_check(kv, nkv, "next", next_keys, err);

	if (!rc)
		rc = get_stream(se, kv, nkv, &s, err);
	if (!rc)
		rc = need_u64(kv, nkv, "batch", &batch, err);
	if (!rc && kv_get(kv, nkv, "release")) {
		rc = need_u64(kv, nkv, "release", &done, err);
		give = done > INT_MAX ? INT_MAX : (int)done; /* no such slot: not leased */
	}
	if (!rc)
		rc = tfs_ctl_stream_next(s, give, batch, &slot, err);
	return rc ? rc : reply_batch(r, s, slot);
}

static int text_release(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
			struct tfs_buf *r, char *err)
{
	const char *slot_s = kv_get(kv, nkv, "slot");
	struct tfs_ctl_stream *s;
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
	if (strcmp(slot_s, "all") && slot >= s->depth) {
		/* As sent: the number may not fit what the stream's call takes. */
		SET_ERR("slot %s: stream %u has slots 0..%u", slot_s, s->id, s->depth - 1);
		return -EINVAL;
	}
	rc = tfs_ctl_stream_release(s, strcmp(slot_s, "all") ? (int)slot : -1, err);
	return rc ? rc : tfs_buf_printf(r, "ok\n");
}

static int text_stats(struct tfs_ctlfile_session *se, const struct kv *kv, size_t nkv,
		      struct tfs_buf *r, char *err)
{
	struct tfs_ctl_stats st;
	int rc = kv_check(kv, nkv, "stats", no_keys, err);

	if (rc)
		return rc;
	tfs_ctl_stats_now(se->ctl, &st, se);
	return tfs_buf_printf(
		r,
		"ok sessions=%" PRIu64 " streams=%" PRIu64 " slots=%" PRIu64 " leased=%" PRIu64
		" batches=%" PRIu64 " rows=%" PRIu64 " bytes=%" PRIu64 " requests=%" PRIu64
		" errors=%" PRIu64 " session_streams=%" PRIu64 " session_leased=%" PRIu64 "\n",
		st.sessions, st.streams, st.slots, st.slots_leased, st.batches, st.rows, st.bytes,
		st.requests, st.errors, st.session_streams, st.session_leased);
}

/* One request line (NUL-terminated, no newline, modified in place) -> one reply line. */
/* Count an error and queue its reply line: "error NAME message". */
static int reply_error(struct tfs_ctlfile_session *se, int rc, char *err, struct tfs_buf *r)
{
	__atomic_add_fetch(&se->ctl->errors, 1, __ATOMIC_RELAXED);
	if (!err[0])
		snprintf(err, ERR_MAX, "%s", strerror(-rc));
	/* One line of printable ASCII, whatever the request held. */
	for (char *p = err; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	tfs_debug("control session %u: error %s %s", se->id, tfs_ctl_errno_name(-rc), err);
	return tfs_buf_printf(r, "error %s %s\n", tfs_ctl_errno_name(-rc), err);
}

static int handle_line(struct tfs_ctlfile_session *se, char *line, struct tfs_buf *r)
{
	struct tfs_ctlfile *ctl = se->ctl;
	char *tok[MAX_TOKENS], *save = NULL, err[ERR_MAX] = "";
	const char *verb, *arg = NULL;
	struct kv kv[MAX_TOKENS];
	size_t ntok = 0, nkv = 0;
	struct tfs_ctl_stream *s;
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
			rc = tfs_ctl_stream_close(se, x, err);
		if (!rc)
			rc = tfs_buf_printf(r, "ok\n");
	} else if (!strcmp(verb, "seek")) {
		rc = kv_check(kv, nkv, "seek", seek_keys, err);
		if (!rc)
			rc = get_stream(se, kv, nkv, &s, err);
		if (!rc)
			rc = need_u64(kv, nkv, "pos", &x, err);
		if (!rc)
			rc = tfs_ctl_stream_seek(s, x, err);
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
	return rc ? reply_error(se, rc, err, r) : 0;
}

/* Hand one whole request line (its newline cut off) to handle_line. */
static int handle_whole_line(struct tfs_ctlfile_session *se, char *line, size_t len)
{
	/* A NUL byte would cut a line short: make it a character that fails to parse instead. */
	for (size_t i = 0; i < len; i++)
		line[i] = line[i] ? line[i] : '?';
	line[len] = 0;
	if (!line[strspn(line, " \t\r")])
		return 0; /* blank lines are not requests */
	return handle_line(se, line, &se->out);
}

ssize_t tfs_ctlfile_write(struct tfs_ctlfile_session *se, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	ssize_t rc = (ssize_t)len;
	char err[ERR_MAX];

	pthread_mutex_lock(&se->lock);
	if (se->out.len - se->out_off > MAX_OUT) {
		rc = -ENOBUFS; /* read the replies first */
		goto out;
	}
	/* A request is a whole line: bytes up to a newline wait in se->in for the rest, however
	 * the writer cut its writes. */
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t seg = (size_t)((nl ? nl : end) - p);
		int e = 0;

		if (se->in_discard) {
			se->in_discard = !nl; /* the over-long line ends at its newline */
		} else if (se->in.len + seg > TFS_CTL_LINE_MAX) {
			/* One error reply for the line, whose rest is then dropped unread. */
			se->in.len = 0;
			se->in_discard = !nl;
			__atomic_add_fetch(&se->ctl->requests, 1, __ATOMIC_RELAXED);
			SET_ERR("request line longer than %u bytes", TFS_CTL_LINE_MAX);
			e = reply_error(se, -E2BIG, err, &se->out);
		} else if (tfs_buf_append(&se->in, p, seg)) {
			e = -ENOMEM;
		} else if (nl) {
			e = handle_whole_line(se, (char *)se->in.data, se->in.len);
			se->in.len = 0;
		}
		if (e) {
			rc = e;
			break;
		}
		p += seg + (nl ? 1 : 0);
	}
out:
	pthread_mutex_unlock(&se->lock);
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
