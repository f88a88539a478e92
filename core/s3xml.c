/* SPDX-License-Identifier: MIT */
/* s3xml: the s3:// backend's requests whose replies are XML: multipart uploads, ListObjectsV2
 * listings, and the sweep of abandoned uploads and lock objects. */
#include "s3call.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- multipart upload ------------------------------------------------------------------------ */

/* The text of the first <tag>...</tag> in [p, end), XML entities decoded, into out. */
static const char *xml_get(const char *p, const char *end, const char *tag, struct tfs_buf *out)
{
	char open[64], close[64];
	const char *a, *b;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	a = memmem(p, (size_t)(end - p), open, strlen(open));
	if (!a)
		return NULL;
	a += strlen(open);
	b = memmem(a, (size_t)(end - a), close, strlen(close));
	if (!b)
		return NULL;
	out->len = 0;
	for (const char *c = a; c < b; c++) {
		static const struct {
			const char *ent;
			char ch;
		} ents[] = { { "&amp;", '&' },
			     { "&lt;", '<' },
			     { "&gt;", '>' },
			     { "&quot;", '"' },
			     { "&apos;", '\'' } };
		char ch = *c;

		if (*c == '&') {
			for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++)
				if (!strncmp(c, ents[i].ent, strlen(ents[i].ent))) {
					ch = ents[i].ch;
					c += strlen(ents[i].ent) - 1;
					break;
				}
		}
		if (tfs_buf_append(out, &ch, 1))
			return NULL;
	}
	if (tfs_buf_append(out, "", 0))
		return NULL;
	return b + strlen(close);
}

/* Abort one multipart upload (fk: the full key). */
static int abort_upload(struct tfs_s3_store *s, const char *fk, const struct tfs_buf *id)
{
	struct tfs_buf q = { 0 };
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char w[1200];
	int rc = tfs_buf_printf(&q, "uploadId=");

	tfs_s3_what(w, sizeof(w), "DELETE (abort upload)", s, fk);
	if (!rc)
		rc = tfs_sigv4_uri_encode(&q, (char *)id->data, id->len, 0);
	if (!rc)
		rc = tfs_s3_call_init(&c, s, "DELETE", fk, (char *)q.data, NULL, 0);
	if (!rc)
		rc = tfs_s3_call_do(&c, &req, NULL, 0, w, &resp);
	if (!rc)
		rc = tfs_s3_status_rc(w, &resp, NULL);
	tfs_buf_free(&q);
	return rc == -ENOENT ? 0 : rc;
}

/* The parts of one multipart upload. */
struct upload {
	struct tfs_s3_store *s;
	const char *fk, *what;
	const struct tfs_buf *id;
	const uint8_t *data;
	size_t len, nparts;
	char (*etags)[132]; /* per part, filled by its sender */
};

static int put_part(void *arg, size_t i)
{
	struct upload *u = arg;
	const size_t off = i * MULTIPART_PART;
	const size_t n = u->len - off < MULTIPART_PART ? u->len - off : MULTIPART_PART;
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_buf q = { 0 };
	struct tfs_s3_call c;
	int rc = tfs_buf_printf(&q, "partNumber=%zu&uploadId=", i + 1);

	if (!rc)
		rc = tfs_sigv4_uri_encode(&q, (char *)u->id->data, u->id->len, 0);
	if (!rc)
		rc = tfs_s3_call_init(&c, u->s, "PUT", u->fk, (char *)q.data, u->data + off, n);
	if (!rc)
		rc = tfs_s3_call_do(&c, &req, u->data + off, n, u->what, &resp);
	if (!rc)
		rc = tfs_s3_status_rc(u->what, &resp, NULL);
	if (!rc && !resp.etag[0]) {
		tfs_err("%s: part %zu: no ETag in the reply", u->what, i + 1);
		rc = -EIO;
	}
	if (!rc)
		memcpy(u->etags[i], resp.etag, sizeof(resp.etag));
	tfs_buf_free(&q);
	return rc;
}

int tfs_s3_multipart_put(struct tfs_s3_store *s, const char *key, const void *data, size_t len)
{
	struct tfs_buf body = { 0 }, id = { 0 }, q = { 0 }, done = { 0 };
	struct tfs_http_req req = { .out = &body };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char fk[1024], w[1200];
	struct upload u = { .s = s, .fk = fk, .what = w, .id = &id, .data = data, .len = len };
	int rc;

	u.nparts = (size_t)((len + MULTIPART_PART - 1) / MULTIPART_PART);
	rc = tfs_s3_full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	u.etags = calloc(u.nparts, sizeof(*u.etags));
	if (!u.etags)
		return -ENOMEM;
	tfs_s3_what(w, sizeof(w), "PUT (multipart)", s, key);
	rc = tfs_s3_call_init(&c, s, "POST", fk, "uploads=", "", 0);
	if (!rc)
		rc = tfs_s3_call_do(&c, &req, "", 0, w, &resp);
	if (!rc)
		rc = tfs_s3_status_rc(w, &resp, &body);
	if (rc)
		goto out;
	if (!xml_get((char *)body.data, (char *)body.data + body.len, "UploadId", &id) || !id.len) {
		tfs_err("%s: no UploadId in the reply", w);
		rc = -EIO;
		goto out;
	}
	/* The parts go up `parallel` at a time, as ranged GETs come down. */
	rc = tfs_http_parallel(tfs_http_pool(s->http), TFS_WORK_NORMAL, u.nparts,
			       tfs_http_config(s->http)->parallel, put_part, &u);
	if (!rc)
		rc = tfs_buf_printf(&done, "<CompleteMultipartUpload>");
	for (size_t i = 0; i < u.nparts && !rc; i++)
		rc = tfs_buf_printf(&done,
				    "<Part><PartNumber>%zu</PartNumber><ETag>%s</ETag></Part>",
				    i + 1, u.etags[i]);
	if (!rc)
		rc = tfs_buf_printf(&done, "</CompleteMultipartUpload>");
	q.len = 0;
	if (!rc)
		rc = tfs_buf_printf(&q, "uploadId=");
	if (!rc)
		rc = tfs_sigv4_uri_encode(&q, (char *)id.data, id.len, 0);
	if (!rc)
		rc = tfs_s3_call_init(&c, s, "POST", fk, (char *)q.data, done.data, done.len);
	if (!rc)
		rc = tfs_s3_call_do(&c, &req, done.data, done.len, w, &resp);
	if (!rc)
		rc = tfs_s3_status_rc(w, &resp, &body);
	/* S3 may answer 200 and still fail the completion in the body. */
	if (!rc && body.data && strstr((char *)body.data, "<Error>")) {
		char code[96];

		tfs_s3_error_code(&body, code, sizeof(code));
		tfs_err("%s: completing the upload failed%s", w, code);
		rc = -EIO;
	}
	if (rc && id.len)
		abort_upload(s, fk, &id); /* best effort: gc sweeps what is left */
out:
	free(u.etags);
	tfs_buf_free(&body);
	tfs_buf_free(&id);
	tfs_buf_free(&q);
	tfs_buf_free(&done);
	return rc;
}

/* --- listing --------------------------------------------------------------------------------- */

/* The full key of a "directory" prefix, with its trailing '/' ("" stays ""); *len its length. */
static int dir_key(const struct tfs_s3_store *s, const char *prefix, char *out, size_t cap,
		   size_t *len)
{
	int rc = tfs_s3_full_key(s, prefix, out, cap);

	if (rc)
		return rc;
	*len = strlen(out);
	if (*len && *len + 1 >= cap)
		return -ENAMETOOLONG;
	if (*len) {
		out[(*len)++] = '/';
		out[*len] = 0;
	}
	return 0;
}

/* One page of a bucket listing: GET /bucket/?query into body. Returns 0 or -errno, logged but
 * for -EOPNOTSUPP (501 or 405: the server does not implement that listing), left to the caller. */
static int list_page(struct tfs_s3_store *s, const char *query, const char *w, struct tfs_buf *body)
{
	struct tfs_http_req req = { .out = body };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	int rc = tfs_s3_call_init(&c, s, "GET", NULL, query, NULL, 0);

	if (!rc)
		rc = tfs_s3_call_do(&c, &req, NULL, 0, w, &resp);
	if (rc)
		return rc;
	if (tfs_http_status_errno(resp.status) == -EOPNOTSUPP)
		return -EOPNOTSUPP;
	return tfs_s3_status_rc(w, &resp, body);
}

/* A paginated listing: GET /bucket/?QUERY page after page, QUERY being the base query, the
 * key prefix, then the markers the previous page gave. */
struct pager {
	struct tfs_s3_store *s;
	const char *base; /* "list-type=2&delimiter=%2F&prefix=" */
	const char *fk;	  /* the full key prefix */
	size_t plen;	  /* its length */
	const char *what; /* for messages */
	/* Append the next page's markers to q (nothing before the first page). */
	int (*markers)(struct pager *pg, struct tfs_buf *q);
	/* Handle one page; set *more when another follows (and keep its markers). */
	int (*page)(struct pager *pg, const char *body, const char *end, int *more);
	int pages;
};

/* Run the pages. Returns 0, -EOPNOTSUPP for a server without that listing (not logged), or
 * -errno. */
static int list_pages(struct pager *pg)
{
	struct tfs_buf body = { 0 }, q = { 0 };
	int rc = 0, more = 1;

	while (more && !rc && pg->pages++ < 100000) {
		q.len = 0;
		rc = tfs_buf_printf(&q, "%s", pg->base);
		if (!rc)
			rc = tfs_sigv4_uri_encode(&q, pg->fk, pg->plen, 0);
		if (!rc && pg->pages > 1)
			rc = pg->markers(pg, &q);
		if (!rc)
			rc = list_page(pg->s, (char *)q.data, pg->what, &body);
		if (!rc)
			rc = pg->page(pg, (char *)body.data, (char *)body.data + body.len, &more);
	}
	tfs_buf_free(&body);
	tfs_buf_free(&q);
	return rc;
}

/* Append "&name=" and the URI-encoded value. */
static int add_marker(struct tfs_buf *q, const char *name, const struct tfs_buf *v)
{
	int rc = tfs_buf_printf(q, "&%s=", name);

	return rc ? rc : tfs_sigv4_uri_encode(q, (const char *)v->data, v->len, 0);
}

static int is_truncated(const char *body, const char *end)
{
	return memmem(body, (size_t)(end - body), "<IsTruncated>true</IsTruncated>", 31) != NULL;
}

struct listing {
	struct pager pg;
	tfs_store_list_fn fn;
	void *arg;
	struct tfs_buf tok, v;
};

static int listing_markers(struct pager *pg, struct tfs_buf *q)
{
	return add_marker(q, "continuation-token", &((struct listing *)pg)->tok);
}

/* Files: <Contents><Key>...</Key>...</Contents>; directories: <CommonPrefixes><Prefix>.../
 * </Prefix></CommonPrefixes>. */
static int listing_page(struct pager *pg, const char *body, const char *end, int *more)
{
	struct listing *ls = (struct listing *)pg;
	const char *fk = pg->fk;
	const size_t plen = pg->plen;
	struct tfs_buf *v = &ls->v;
	const char *p;
	int rc = 0;

	for (p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<Contents>", 10);

		if (!blk || !(p = xml_get(blk, end, "Key", v)))
			break;
		if (v->len > plen && !strncmp((char *)v->data, fk, plen) &&
		    !strchr((char *)v->data + plen, '/') && v->data[plen] != '.')
			rc = ls->fn(ls->arg, (char *)v->data + plen, 0);
	}
	for (p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<CommonPrefixes>", 16);

		if (!blk || !(p = xml_get(blk, end, "Prefix", v)))
			break;
		if (v->len > plen + 1 && !strncmp((char *)v->data, fk, plen) &&
		    v->data[v->len - 1] == '/' && v->data[plen] != '.') {
			v->data[--v->len] = 0;
			if (!strchr((char *)v->data + plen, '/'))
				rc = ls->fn(ls->arg, (char *)v->data + plen, 1);
		}
	}
	*more = is_truncated(body, end);
	if (!rc && *more && !xml_get(body, end, "NextContinuationToken", &ls->tok)) {
		tfs_err("%s: truncated listing without a continuation token", pg->what);
		rc = -EIO;
	}
	return rc;
}

int tfs_s3_list(struct tfs_store *st, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	char fk[1024], w[1200];
	struct listing ls = { .pg = { .s = s,
				      .base = "list-type=2&delimiter=%2F&prefix=",
				      .fk = fk,
				      .what = w,
				      .markers = listing_markers,
				      .page = listing_page },
			      .fn = fn,
			      .arg = arg };
	int rc;

	if (*prefix && !tfs_s3_key_ok(prefix))
		return -EINVAL;
	rc = dir_key(s, prefix, fk, sizeof(fk), &ls.pg.plen);
	if (rc)
		return rc;
	tfs_s3_what(w, sizeof(w), "LIST", s, prefix);
	rc = list_pages(&ls.pg);
	if (rc == -EOPNOTSUPP)
		tfs_err("%s: the server does not implement ListObjectsV2", w);
	tfs_buf_free(&ls.tok);
	tfs_buf_free(&ls.v);
	return rc;
}

/* --- sweep ----------------------------------------------------------------------------------- */

/* Seconds since the epoch of an ISO 8601 UTC time ("2026-11-21T14:00:00.000Z"), or -1. */
static int64_t parse_iso8601(const char *v)
{
	struct tm tm = { 0 };
	const char *end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);

	return end ? (int64_t)timegm(&tm) : -1;
}

struct upload_sweep {
	struct pager pg;
	int64_t older_than;
	int aborted;
	struct tfs_buf key, id, t, kmark, umark;
};

static int uploads_markers(struct pager *pg, struct tfs_buf *q)
{
	struct upload_sweep *us = (struct upload_sweep *)pg;
	int rc = add_marker(q, "key-marker", &us->kmark);

	return rc ? rc : add_marker(q, "upload-id-marker", &us->umark);
}

static int uploads_page(struct pager *pg, const char *body, const char *end, int *more)
{
	struct upload_sweep *us = (struct upload_sweep *)pg;
	int rc = 0;

	for (const char *p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<Upload>", 8);
		const char *bend = blk ? memmem(blk, (size_t)(end - blk), "</Upload>", 9) : NULL;
		int64_t started;

		if (!bend)
			break;
		p = bend + 9;
		if (!xml_get(blk, bend, "Key", &us->key) ||
		    !xml_get(blk, bend, "UploadId", &us->id) ||
		    !xml_get(blk, bend, "Initiated", &us->t))
			continue;
		started = parse_iso8601((char *)us->t.data);
		if (started < 0 || started > us->older_than ||
		    strncmp((char *)us->key.data, pg->fk, pg->plen))
			continue;
		rc = abort_upload(pg->s, (char *)us->key.data, &us->id);
		if (!rc)
			us->aborted++;
	}
	*more = is_truncated(body, end);
	if (!rc && *more &&
	    (!xml_get(body, end, "NextKeyMarker", &us->kmark) ||
	     !xml_get(body, end, "NextUploadIdMarker", &us->umark))) {
		tfs_err("%s: truncated listing without its markers", pg->what);
		rc = -EIO;
	}
	return rc;
}

/* Multipart uploads under prefix begun before older_than: a writer killed mid-upload leaves its
 * parts stored (and billed) until the upload is aborted. Returns how many were aborted, or
 * -errno. A server that cannot list uploads (501) has none to show: 0, with a log line. */
static int sweep_uploads(struct tfs_s3_store *s, const char *prefix, int64_t older_than)
{
	char fk[1024], w[1200];
	struct upload_sweep us = { .pg = { .s = s,
					   .base = "uploads=&prefix=",
					   .fk = fk,
					   .what = w,
					   .markers = uploads_markers,
					   .page = uploads_page },
				   .older_than = older_than };
	int rc = dir_key(s, prefix, fk, sizeof(fk), &us.pg.plen);

	if (rc)
		return rc;
	tfs_s3_what(w, sizeof(w), "LIST (multipart uploads)", s, prefix);
	rc = list_pages(&us.pg);
	if (rc == -EOPNOTSUPP) {
		tfs_info("%s: the server does not list multipart uploads; none swept", w);
		rc = 0;
	}
	tfs_buf_free(&us.key);
	tfs_buf_free(&us.id);
	tfs_buf_free(&us.t);
	tfs_buf_free(&us.kmark);
	tfs_buf_free(&us.umark);
	return rc ? rc : us.aborted;
}

/* Ref lock objects left by writers that died while moving a ref (see lock_take): removed once
 * they are older than the cutoff and abandoned by the lock protocol's own rule. */
static int sweep_locks(struct tfs_s3_store *s, const char *prefix, int64_t older_than)
{
	static const char *const kinds[] = { "heads", "tags" };
	const int64_t stale = (int64_t)time(NULL) - LOCK_STALE_S;
	int n = 0;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		char key[1024];
		uint64_t size;
		int64_t mtime;
		int rc;

		if (snprintf(key, sizeof(key), "%s/refs/%s/.lock", prefix, kinds[i]) >=
		    (int)sizeof(key))
			return -ENAMETOOLONG;
		rc = tfs_s3_stat(&s->base, key, &size, &mtime);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if (mtime > older_than || mtime > stale)
			continue;
		rc = tfs_s3_del_key(s, key);
		if (rc && rc != -ENOENT)
			return rc;
		n++;
	}
	return n;
}

int tfs_s3_sweep(struct tfs_store *st, const char *prefix, int64_t older_than)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	int up, locks;

	if (!tfs_s3_key_ok(prefix))
		return -EINVAL;
	up = sweep_uploads(s, prefix, older_than);
	locks = sweep_locks(s, prefix, older_than);
	if (up < 0)
		return up;
	if (locks < 0)
		return locks;
	return up + locks;
}
