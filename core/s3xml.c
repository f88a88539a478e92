/* SPDX-License-Identifier: MIT */
/* s3xml: the s3:// backend's requests whose replies are XML: multipart uploads, ListObjectsV2
 * listings, and the sweep of abandoned uploads and lock objects. */
#include "s3call.h"
#include "s3parse.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "httpparts.h"

/* --- multipart upload ------------------------------------------------------------------------ */

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
	if (!tfs_xml_get((char *)body.data, (char *)body.data + body.len, "UploadId", &id) ||
	    !id.len) {
		tfs_err("%s: no UploadId in the reply", w);
		rc = -EIO;
		goto out;
	}
	/* The parts go up `parallel` at a time, as ranged GETs come down. */
	rc = tfs_parallel(tfs_http_pool(s->http), TFS_WORK_NORMAL, u.nparts,
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

static int listing_page(struct pager *pg, const char *body, const char *end, int *more)
{
	struct listing *ls = (struct listing *)pg;
	int rc = tfs_s3_listing_parse(body, end, pg->fk, pg->plen, ls->fn, ls->arg, &ls->v,
				      &ls->tok, more);

	if (rc == -EPROTO) {
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

struct upload_sweep {
	struct pager pg;
	int64_t older_than;
	int dry_run; /* count, abort none */
	int aborted;
	struct tfs_buf scratch[3], kmark, umark; /* scratch: a key, an upload id, a time */
};

static int uploads_markers(struct pager *pg, struct tfs_buf *q)
{
	struct upload_sweep *us = (struct upload_sweep *)pg;
	int rc = add_marker(q, "key-marker", &us->kmark);

	return rc ? rc : add_marker(q, "upload-id-marker", &us->umark);
}

/* An upload under the prefix begun before older_than: aborted. */
static int upload_one(void *arg, const char *key, const struct tfs_buf *id, int64_t started)
{
	struct upload_sweep *us = arg;
	int rc;

	if (started < 0 || started > us->older_than || strncmp(key, us->pg.fk, us->pg.plen))
		return 0;
	rc = us->dry_run ? 0 : abort_upload(us->pg.s, key, id);
	if (!rc)
		us->aborted++;
	return rc;
}

static int uploads_page(struct pager *pg, const char *body, const char *end, int *more)
{
	struct upload_sweep *us = (struct upload_sweep *)pg;
	int rc = tfs_s3_uploads_parse(body, end, upload_one, us, us->scratch, &us->kmark,
				      &us->umark, more);

	if (rc == -EPROTO) {
		tfs_err("%s: truncated listing without its markers", pg->what);
		rc = -EIO;
	}
	return rc;
}

/* Multipart uploads under prefix begun before older_than: a writer killed mid-upload leaves its
 * parts stored (and billed) until the upload is aborted. Returns how many were aborted, or
 * -errno. A server that cannot list uploads (501) has none to show: 0, with a log line. */
static int sweep_uploads(struct tfs_s3_store *s, const char *prefix, int64_t older_than,
			 int dry_run)
{
	char fk[1024], w[1200];
	struct upload_sweep us = { .pg = { .s = s,
					   .base = "uploads=&prefix=",
					   .fk = fk,
					   .what = w,
					   .markers = uploads_markers,
					   .page = uploads_page },
				   .older_than = older_than,
				   .dry_run = dry_run };
	int rc = dir_key(s, prefix, fk, sizeof(fk), &us.pg.plen);

	if (rc)
		return rc;
	tfs_s3_what(w, sizeof(w), "LIST (multipart uploads)", s, prefix);
	rc = list_pages(&us.pg);
	if (rc == -EOPNOTSUPP) {
		tfs_info("%s: the server does not list multipart uploads; none swept", w);
		rc = 0;
	}
	for (int i = 0; i < 3; i++)
		tfs_buf_free(&us.scratch[i]);
	tfs_buf_free(&us.kmark);
	tfs_buf_free(&us.umark);
	return rc ? rc : us.aborted;
}

/* Ref lock objects left by writers that died while moving a ref (see lock_take): removed once
 * they are older than the cutoff and abandoned by the lock protocol's own rule. */
static int sweep_locks(struct tfs_s3_store *s, const char *prefix, int64_t older_than, int dry_run)
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
		rc = dry_run ? 0 : tfs_s3_del_key(s, key);
		if (rc && rc != -ENOENT)
			return rc;
		n++;
	}
	return n;
}

int tfs_s3_sweep(struct tfs_store *st, const char *prefix, int64_t older_than, int dry_run)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	int up, locks;

	if (!tfs_s3_key_ok(prefix))
		return -EINVAL;
	up = sweep_uploads(s, prefix, older_than, dry_run);
	locks = sweep_locks(s, prefix, older_than, dry_run);
	if (up < 0)
		return up;
	if (locks < 0)
		return locks;
	return up + locks;
}
