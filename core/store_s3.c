/* SPDX-License-Identifier: MIT */
/* store_s3: the s3:// backend for AWS S3 and S3-compatible servers (MinIO, Ceph, R2, s3rver):
 * signed (SigV4) GET/Range/HEAD/PUT/DELETE, ListObjectsV2, multipart uploads for large
 * objects, and refs moved with conditional writes or, where the server ignores them, under a
 * best-effort lock object. */
#include "store.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "config.h"
#include "http.h"
#include "sigv4.h"

#define MULTIPART_THRESHOLD (64ull << 20) /* larger objects go up in parts */
#define MULTIPART_PART (16ull << 20)
#define LOCK_STALE_S 30	   /* a lock object older than this is abandoned */
#define LOCK_ATTEMPTS 40   /* bounded wait for a lock held by someone else */
#define LOCK_SETTLE_MS 100 /* between writing a lock and checking it is still ours */

struct s3_store {
	struct tfs_store base;
	struct tfs_http *http;
	struct tfs_config_remote cfg; /* holds the credentials: never logged */
	char *bucket;
	char *prefix;	 /* "" or "a/b" (no leading or trailing '/') */
	char *origin;	 /* "http://127.0.0.1:9000" or "https://bucket.s3.region.amazonaws.com" */
	char *host;	 /* the Host header: origin without the scheme */
	char *path_base; /* "/bucket" (path style) or "" */
	pthread_mutex_t probe_lock;
	int conditional; /* protected by probe_lock: -1 not probed yet, 0 ignored, 1 honoured */
};

static struct s3_store *s3_of(struct tfs_store *s)
{
	return (struct s3_store *)s;
}

static int key_ok(const char *key)
{
	if (key[0] == '/' || strlen(key) > 900)
		return 0;
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL)
		if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == 0))
			return 0;
	return 1;
}

/* The object key in the bucket for a store key. */
static int full_key(const struct s3_store *s, const char *key, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s%s%s", s->prefix, *s->prefix && *key ? "/" : "", key);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* One signed request. */
struct s3_call {
	struct s3_store *s;
	const char *method;
	struct tfs_buf path; /* the wire path: path_base + "/" + encoded key */
	const char *query;   /* encoded, or NULL */
	char payload[65];
	struct tfs_sigv4_header extra[4];
	size_t nextra;
};

static int s3_headers(void *arg, struct tfs_buf *h)
{
	struct s3_call *c = arg;
	struct s3_store *s = c->s;
	int rc = 0;

	if (s->cfg.access_key) {
		struct tfs_sigv4_creds cr = { s->cfg.access_key, s->cfg.secret_key,
					      s->cfg.session_token };

		return tfs_sigv4_s3_sign(c->method, s->host, (char *)c->path.data, c->query,
					 c->extra, c->nextra, c->payload, s->cfg.region, &cr,
					 time(NULL), h);
	}
	for (size_t i = 0; i < c->nextra && !rc; i++) {
		rc = tfs_buf_printf(h, "%s: %s", c->extra[i].name, c->extra[i].value);
		if (!rc)
			rc = tfs_buf_append(h, "", 1);
	}
	return rc;
}

static int call_init(struct s3_call *c, struct s3_store *s, const char *method, const char *fkey,
		     const char *query, const void *body, size_t len)
{
	int rc;

	memset(c, 0, sizeof(*c));
	c->s = s;
	c->method = method;
	c->query = query;
	if (body || !strcmp(method, "PUT") || !strcmp(method, "POST"))
		tfs_sigv4_sha256_hex(body ? body : "", len, c->payload);
	else
		strcpy(c->payload, TFS_SIGV4_EMPTY_SHA256);
	rc = tfs_buf_printf(&c->path, "%s/", s->path_base);
	if (!rc && fkey)
		rc = tfs_sigv4_uri_encode(&c->path, fkey, strlen(fkey), 1);
	return rc;
}

static void call_add(struct s3_call *c, const char *name, const char *value)
{
	c->extra[c->nextra++] = (struct tfs_sigv4_header){ name, value };
}

/* Perform c; req carries the body destination and range. */
static int call_do(struct s3_call *c, struct tfs_http_req *req, const void *body, size_t len,
		   const char *what, struct tfs_http_resp *resp)
{
	struct tfs_buf url = { 0 };
	int rc = tfs_buf_printf(&url, "%s%s%s%s", c->s->origin, (char *)c->path.data,
				c->query ? "?" : "", c->query ? c->query : "");

	if (!rc) {
		req->method = c->method;
		req->url = (char *)url.data;
		req->headers = s3_headers;
		req->headers_arg = c;
		req->body = body;
		req->body_len = len;
		req->what = what;
		rc = tfs_http_do(c->s->http, req, resp);
	}
	tfs_buf_free(&url);
	tfs_buf_free(&c->path);
	return rc;
}

static void what_of(char *buf, size_t cap, const char *method, const struct s3_store *s,
		    const char *key)
{
	snprintf(buf, cap, "%s %.300s/%.600s", method, s->base.url, key);
}

/* A request on key (relative to the store's prefix): c is ready for call_add and call_do, and w
 * names the request in log lines. */
static int key_call(struct s3_call *c, struct s3_store *s, const char *method, const char *key,
		    const void *body, size_t len, char *w, size_t wcap)
{
	char fk[1024];
	int rc = full_key(s, key, fk, sizeof(fk));

	if (!rc)
		rc = call_init(c, s, method, fk, NULL, body, len);
	if (!rc)
		what_of(w, wcap, method, s, key);
	return rc;
}

/* The S3 error code of an error reply (<Code>...</Code>) for log lines. */
static void error_code(const struct tfs_buf *body, char *out, size_t cap)
{
	const char *p = body && body->data ? strstr((char *)body->data, "<Code>") : NULL;
	const char *e = p ? strstr(p, "</Code>") : NULL;

	out[0] = 0;
	if (p && e && (size_t)(e - p - 6) < cap)
		snprintf(out, cap, " (%.*s)", (int)(e - p - 6), p + 6);
}

/* Map a final status to -errno, with one log line for the unexpected ones. */
static int status_rc(const char *what, const struct tfs_http_resp *resp, const struct tfs_buf *b)
{
	int rc = tfs_http_status_errno(resp->status);
	char code[96];

	if (rc && rc != -ENOENT) {
		error_code(b, code, sizeof(code));
		tfs_err("%s: HTTP status %ld%s", what, resp->status, code);
	}
	return rc;
}

/* --- reads ----------------------------------------------------------------------------------- */

struct range_ctx {
	struct s3_store *s;
	const char *key; /* full key */
	const char *what;
	uint64_t size; /* the object's when known, else 0 */
	int object;    /* a content-addressed object: its own checksum vouches for it */
};

/* A whole object against its ETag when that is the MD5 of the content (single-part uploads on
 * S3 and most compatible servers): 1 good, 0 damaged, -1 cannot tell. */
static int etag_check(const char *etag, const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	char hex[2 * 16 + 1];
	unsigned int mdlen = 0;
	size_t n = strlen(etag);

	if (n != 34 || etag[0] != '"' || etag[33] != '"' ||
	    strspn(etag + 1, "0123456789abcdef") != 32)
		return -1;
	if (!EVP_Digest(data, len, md, &mdlen, EVP_md5(), NULL) || mdlen != 16)
		return -1;
	for (int i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", md[i]);
	return !memcmp(hex, etag + 1, 32);
}

static ssize_t fetch_range(void *arg, uint64_t off, void *dst, size_t len, int64_t *total)
{
	struct range_ctx *r = arg;
	struct tfs_http_resp resp;
	char range[64];
	int rc;

	*total = -1;
	if (len == 0)
		return 0;
	snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	for (int attempt = 0;; attempt++) {
		struct tfs_http_req req = {
			.dst = dst, .dst_cap = len, .range_off = off, .ranged = 1
		};
		struct s3_call c;

		rc = call_init(&c, r->s, "GET", r->key, NULL, NULL, 0);
		if (rc)
			return rc;
		call_add(&c, "Range", range);
		rc = call_do(&c, &req, NULL, 0, r->what, &resp);
		if (rc)
			return rc;
		if (resp.status == 416)
			return 0; /* at or past the end */
		rc = status_rc(r->what, &resp, NULL);
		if (rc)
			return rc;
		if (resp.status == 206)
			*total = resp.range_total;
		else if (resp.content_length >= 0)
			*total = resp.content_length;
		/* Objects carry their own checksums (checked above this); refs and markers do not,
		 * so a whole one is checked against its MD5 ETag, refetched once if damaged. */
		if (off || *total != (int64_t)resp.body_len || r->object ||
		    etag_check(resp.etag, dst, resp.body_len) != 0)
			return (ssize_t)resp.body_len;
		if (attempt == 1) {
			tfs_err("%s: content does not match its ETag again after a refetch",
				r->what);
			return -EIO;
		}
		tfs_warn("%s: content does not match its ETag; fetching it again", r->what);
		__atomic_add_fetch(&r->s->base.count.retries, 1, __ATOMIC_RELAXED);
	}
}

/* A whole value, by parts, or by parallel ranges when its size is known (urgent). */
static int get_whole(struct tfs_store *st, const char *key, uint64_t size, int object,
		     struct tfs_buf *out)
{
	struct s3_store *s = s3_of(st);
	char fk[1024], w[1200];
	struct range_ctx r = { s, fk, w, size, object };
	int rc;

	out->len = 0;
	if (!key_ok(key))
		return -EINVAL;
	rc = full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	what_of(w, sizeof(w), "GET", s, key);
	return tfs_http_get_whole(s->http, fetch_range, &r, size, out);
}

static int s3_get(struct tfs_store *st, const char *key, struct tfs_buf *out)
{
	return get_whole(st, key, 0, 0, out);
}

static int s3_get_object(struct tfs_store *st, const char *key, uint64_t urgent_size,
			 struct tfs_buf *out, int *verified)
{
	*verified = 0;
	return get_whole(st, key, urgent_size, 1, out);
}

static ssize_t s3_get_range(struct tfs_store *st, const char *key, uint64_t off, void *buf,
			    size_t len)
{
	struct s3_store *s = s3_of(st);
	char fk[1024], w[1200];
	struct range_ctx r = { s, fk, w, 0, 0 };
	int64_t total;
	int rc;

	if (!key_ok(key))
		return -EINVAL;
	rc = full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	what_of(w, sizeof(w), "GET", s, key);
	return fetch_range(&r, off, buf, len, &total);
}

static int s3_stat(struct tfs_store *st, const char *key, uint64_t *size, int64_t *mtime)
{
	struct s3_store *s = s3_of(st);
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct s3_call c;
	char w[1200];
	int rc;

	if (!key_ok(key))
		return -EINVAL;
	rc = key_call(&c, s, "HEAD", key, NULL, 0, w, sizeof(w));
	if (rc)
		return rc;
	rc = call_do(&c, &req, NULL, 0, w, &resp);
	if (!rc)
		rc = status_rc(w, &resp, NULL);
	if (rc)
		return rc;
	return tfs_http_resp_size(&resp, w, size, mtime);
}

static int s3_head(struct tfs_store *st, const char *key, uint64_t *size)
{
	return s3_stat(st, key, size, NULL);
}

/* GET a small object with its ETag (for compare-and-swap). */
static int get_etag(struct s3_store *s, const char *key, struct tfs_buf *out, char *etag,
		    size_t cap)
{
	struct tfs_http_req req = { .out = out };
	struct tfs_http_resp resp;
	struct s3_call c;
	char w[1200];
	int rc;

	/* The ETag goes into an If-Match: it must be the tag of exactly this content, or a
	 * compare-and-swap could overwrite a version it never saw. A body that disagrees with an
	 * MD5 ETag (a server whose metadata and data are not updated as one) is read again. */
	for (int attempt = 0;; attempt++) {
		rc = key_call(&c, s, "GET", key, NULL, 0, w, sizeof(w));
		if (rc)
			return rc;
		rc = call_do(&c, &req, NULL, 0, w, &resp);
		if (!rc)
			rc = status_rc(w, &resp, out);
		if (rc || etag_check(resp.etag, out->data, out->len) != 0)
			break;
		if (attempt == 2) {
			tfs_err("%s: content and ETag disagree on every read", w);
			return -EIO;
		}
		tfs_http_backoff(s->http, (unsigned)attempt);
	}
	if (!rc)
		snprintf(etag, cap, "%s", resp.etag);
	return rc;
}

/* --- writes ---------------------------------------------------------------------------------- */

static int multipart_put(struct s3_store *s, const char *key, const void *data, size_t len);

/* PUT with optional extra headers (conditions). Returns the final status in *status. */
static int put_cond(struct s3_store *s, const char *key, const void *data, size_t len,
		    const char *hname, const char *hvalue, long *status)
{
	struct tfs_buf body = { 0 };
	struct tfs_http_req req = { .out = &body };
	struct tfs_http_resp resp;
	struct s3_call c;
	char w[1200];
	int rc;

	rc = key_call(&c, s, "PUT", key, data, len, w, sizeof(w));
	if (rc)
		return rc;
	if (hname)
		call_add(&c, hname, hvalue);
	rc = call_do(&c, &req, data, len, w, &resp);
	if (!rc) {
		*status = resp.status;
		if (resp.status != 412 && resp.status != 409)
			rc = status_rc(w, &resp, &body);
	}
	tfs_buf_free(&body);
	return rc;
}

static int s3_put(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	long status;

	if (!key_ok(key))
		return -EINVAL;
	if (len > MULTIPART_THRESHOLD)
		return multipart_put(s3_of(st), key, data, len);
	return put_cond(s3_of(st), key, data, len, NULL, NULL, &status);
}

static int s3_del_key(struct s3_store *s, const char *key)
{
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct s3_call c;
	char w[1200];
	int rc;

	rc = key_call(&c, s, "DELETE", key, NULL, 0, w, sizeof(w));
	if (rc)
		return rc;
	rc = call_do(&c, &req, NULL, 0, w, &resp);
	return rc ? rc : status_rc(w, &resp, NULL);
}

static int s3_del(struct tfs_store *st, const char *key)
{
	if (!key_ok(key))
		return -EINVAL;
	return s3_del_key(s3_of(st), key);
}

/* Does the server honour If-None-Match: * on PUT? Asked once per store: write a probe object
 * twice with the condition; a server that lets the second write through ignores it. */
static int conditional_ok(struct s3_store *s)
{
	char key[128];
	long st1 = 0, st2 = 0;
	int rc, c;

	pthread_mutex_lock(&s->probe_lock);
	c = s->conditional;
	if (c >= 0)
		goto out;
	snprintf(key, sizeof(key), ".tensorfs-probe-%d-%llx", (int)getpid(),
		 (unsigned long long)tfs_now_ns());
	rc = put_cond(s, key, "probe\n", 6, "If-None-Match", "*", &st1);
	if (!rc)
		rc = put_cond(s, key, "probe\n", 6, "If-None-Match", "*", &st2);
	s3_del_key(s, key);
	if (rc && rc != -EOPNOTSUPP && rc != -EIO) {
		c = -1; /* could not tell (no access?): ask again next time */
		goto out;
	}
	c = !rc && st1 < 300 && st2 == 412;
	s->conditional = c;
	if (!c)
		tfs_debug("%s: the server ignores conditional writes; refs are moved under a lock "
			  "object instead (best effort, see README)",
			  s->base.url);
out:
	pthread_mutex_unlock(&s->probe_lock);
	return c;
}

/* Refresh an existing object's modification time (a self-copy), so that a concurrent gc's grace
 * period covers it again; best effort. */
static void touch(struct s3_store *s, const char *key)
{
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_buf src = { 0 };
	struct s3_call c;
	char fk[1024], w[1200];

	if (full_key(s, key, fk, sizeof(fk)) || tfs_buf_printf(&src, "/%s/", s->bucket) ||
	    tfs_sigv4_uri_encode(&src, fk, strlen(fk), 1) ||
	    call_init(&c, s, "PUT", fk, NULL, NULL, 0)) {
		tfs_buf_free(&src);
		return;
	}
	call_add(&c, "x-amz-copy-source", (char *)src.data);
	call_add(&c, "x-amz-metadata-directive", "REPLACE");
	what_of(w, sizeof(w), "COPY", s, key);
	if (!call_do(&c, &req, NULL, 0, w, &resp) && resp.status >= 300)
		tfs_debug("%s: could not refresh the modification time (HTTP %ld)", w, resp.status);
	tfs_buf_free(&src);
}

static int s3_put_new(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	struct s3_store *s = s3_of(st);
	uint64_t size;
	long status = 0;
	int rc;

	if (!key_ok(key))
		return -EINVAL;
	if (len <= MULTIPART_THRESHOLD && conditional_ok(s) == 1) {
		rc = put_cond(s, key, data, len, "If-None-Match", "*", &status);
		if (rc)
			return rc;
		if (status < 300)
			return 0;
		/* 412: it exists; 409: someone is writing it right now. */
		rc = s3_head(st, key, &size);
		if (rc == -ENOENT)
			return -EAGAIN;
		if (rc)
			return rc;
		touch(s, key);
		return -EEXIST;
	}
	rc = s3_head(st, key, &size);
	if (rc == 0) {
		touch(s, key);
		return -EEXIST;
	}
	if (rc != -ENOENT)
		return rc;
	return s3_put(st, key, data, len);
}

/* --- compare-and-swap ------------------------------------------------------------------------ */

static int content_matches(int rc, const struct tfs_buf *cur, const void *old, size_t old_len)
{
	if (rc == -ENOENT)
		return old == NULL;
	return old && cur->len == old_len && !memcmp(cur->data, old, old_len);
}

static int cas_conditional(struct s3_store *s, const char *key, const void *old, size_t old_len,
			   const void *data, size_t len)
{
	struct tfs_buf cur = { 0 };
	char etag[132];
	long status = 0;
	int rc;

	rc = get_etag(s, key, &cur, etag, sizeof(etag));
	if (rc && rc != -ENOENT)
		goto out;
	if (!content_matches(rc, &cur, old, old_len)) {
		rc = -EAGAIN;
		goto out;
	}
	if (rc == -ENOENT)
		rc = put_cond(s, key, data, len, "If-None-Match", "*", &status);
	else
		rc = put_cond(s, key, data, len, "If-Match", etag, &status);
	if (!rc && (status == 412 || status == 409))
		rc = -EAGAIN;
out:
	tfs_buf_free(&cur);
	return rc;
}

static void lock_key(const char *key, char *out, size_t cap)
{
	const char *slash = strrchr(key, '/');

	snprintf(out, cap, "%.*s%s.lock", slash ? (int)(slash - key) : 0, key, slash ? "/" : "");
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Take the lock object: write a token unless a fresh lock is there, wait, read it back. */
static int lock_take(struct s3_store *s, const char *lk, const char *token)
{
	struct tfs_buf cur = { 0 };
	char etag[132];
	long status;
	int rc = -EAGAIN;

	for (unsigned a = 0; a < LOCK_ATTEMPTS; a++) {
		int got = get_etag(s, lk, &cur, etag, sizeof(etag));

		if (got && got != -ENOENT) {
			rc = got;
			break;
		}
		if (!got) {
			long long t = 0;
			char *sp = memchr(cur.data, ' ', cur.len);

			if (sp)
				t = strtoll(sp + 1, NULL, 10);
			if (cur.len >= strlen(token) &&
			    !strncmp((char *)cur.data, token, strlen(token))) {
				rc = 0; /* ours, and it survived the settle time */
				break;
			}
			if (t && (long long)time(NULL) - t < LOCK_STALE_S) {
				tfs_http_backoff(s->http, a < 4 ? a : 4);
				continue;
			}
			/* Abandoned by a writer that died: take it over. */
		}
		rc = put_cond(s, lk, token, strlen(token), NULL, NULL, &status);
		if (rc)
			break;
		rc = -EAGAIN;
		sleep_ms(LOCK_SETTLE_MS);
	}
	tfs_buf_free(&cur);
	return rc;
}

static void lock_drop(struct s3_store *s, const char *lk, const char *token)
{
	struct tfs_buf cur = { 0 };
	char etag[132];

	if (!get_etag(s, lk, &cur, etag, sizeof(etag)) && cur.len >= strlen(token) &&
	    !strncmp((char *)cur.data, token, strlen(token)))
		s3_del_key(s, lk);
	tfs_buf_free(&cur);
}

static int cas_locked(struct s3_store *s, const char *key, const void *old, size_t old_len,
		      const void *data, size_t len)
{
	struct tfs_buf cur = { 0 };
	char lk[1024], token[96], etag[132];
	long status;
	int rc;

	lock_key(key, lk, sizeof(lk));
	snprintf(token, sizeof(token), "%d-%llx %lld\n", (int)getpid(),
		 (unsigned long long)tfs_now_ns(), (long long)time(NULL));
	rc = lock_take(s, lk, token);
	if (rc) {
		if (rc == -EAGAIN)
			tfs_err("%s/%s: busy (another writer holds %s); try again", s->base.url,
				key, lk);
		return rc;
	}
	rc = get_etag(s, key, &cur, etag, sizeof(etag));
	if (rc && rc != -ENOENT)
		goto out;
	if (!content_matches(rc, &cur, old, old_len)) {
		rc = -EAGAIN;
		goto out;
	}
	rc = put_cond(s, key, data, len, NULL, NULL, &status);
	if (rc)
		goto out;
	/* Read back: a writer that did not see our lock would show here. */
	rc = get_etag(s, key, &cur, etag, sizeof(etag));
	if (!rc && (cur.len != len || memcmp(cur.data, data, len)))
		rc = -EAGAIN;
out:
	lock_drop(s, lk, token);
	tfs_buf_free(&cur);
	return rc;
}

static int s3_cas(struct tfs_store *st, const char *key, const void *old, size_t old_len,
		  const void *data, size_t len)
{
	struct s3_store *s = s3_of(st);

	if (!key_ok(key))
		return -EINVAL;
	if (conditional_ok(s) == 1)
		return cas_conditional(s, key, old, old_len, data, len);
	return cas_locked(s, key, old, old_len, data, len);
}

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
static int abort_upload(struct s3_store *s, const char *fk, const struct tfs_buf *id)
{
	struct tfs_buf q = { 0 };
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct s3_call c;
	char w[1200];
	int rc = tfs_buf_printf(&q, "uploadId=");

	what_of(w, sizeof(w), "DELETE (abort upload)", s, fk);
	if (!rc)
		rc = tfs_sigv4_uri_encode(&q, (char *)id->data, id->len, 0);
	if (!rc)
		rc = call_init(&c, s, "DELETE", fk, (char *)q.data, NULL, 0);
	if (!rc)
		rc = call_do(&c, &req, NULL, 0, w, &resp);
	if (!rc)
		rc = status_rc(w, &resp, NULL);
	tfs_buf_free(&q);
	return rc == -ENOENT ? 0 : rc;
}

/* The parts of one multipart upload. */
struct upload {
	struct s3_store *s;
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
	struct s3_call c;
	int rc = tfs_buf_printf(&q, "partNumber=%zu&uploadId=", i + 1);

	if (!rc)
		rc = tfs_sigv4_uri_encode(&q, (char *)u->id->data, u->id->len, 0);
	if (!rc)
		rc = call_init(&c, u->s, "PUT", u->fk, (char *)q.data, u->data + off, n);
	if (!rc)
		rc = call_do(&c, &req, u->data + off, n, u->what, &resp);
	if (!rc)
		rc = status_rc(u->what, &resp, NULL);
	if (!rc && !resp.etag[0]) {
		tfs_err("%s: part %zu: no ETag in the reply", u->what, i + 1);
		rc = -EIO;
	}
	if (!rc)
		memcpy(u->etags[i], resp.etag, sizeof(resp.etag));
	tfs_buf_free(&q);
	return rc;
}

static int multipart_put(struct s3_store *s, const char *key, const void *data, size_t len)
{
	struct tfs_buf body = { 0 }, id = { 0 }, q = { 0 }, done = { 0 };
	struct tfs_http_req req = { .out = &body };
	struct tfs_http_resp resp;
	struct s3_call c;
	char fk[1024], w[1200];
	struct upload u = { .s = s, .fk = fk, .what = w, .id = &id, .data = data, .len = len };
	int rc;

	u.nparts = (size_t)((len + MULTIPART_PART - 1) / MULTIPART_PART);
	rc = full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	u.etags = calloc(u.nparts, sizeof(*u.etags));
	if (!u.etags)
		return -ENOMEM;
	what_of(w, sizeof(w), "PUT (multipart)", s, key);
	rc = call_init(&c, s, "POST", fk, "uploads=", "", 0);
	if (!rc)
		rc = call_do(&c, &req, "", 0, w, &resp);
	if (!rc)
		rc = status_rc(w, &resp, &body);
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
		rc = call_init(&c, s, "POST", fk, (char *)q.data, done.data, done.len);
	if (!rc)
		rc = call_do(&c, &req, done.data, done.len, w, &resp);
	if (!rc)
		rc = status_rc(w, &resp, &body);
	/* S3 may answer 200 and still fail the completion in the body. */
	if (!rc && body.data && strstr((char *)body.data, "<Error>")) {
		char code[96];

		error_code(&body, code, sizeof(code));
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
static int dir_key(const struct s3_store *s, const char *prefix, char *out, size_t cap, size_t *len)
{
	int rc = full_key(s, prefix, out, cap);

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
static int list_page(struct s3_store *s, const char *query, const char *w, struct tfs_buf *body)
{
	struct tfs_http_req req = { .out = body };
	struct tfs_http_resp resp;
	struct s3_call c;
	int rc = call_init(&c, s, "GET", NULL, query, NULL, 0);

	if (!rc)
		rc = call_do(&c, &req, NULL, 0, w, &resp);
	if (rc)
		return rc;
	if (tfs_http_status_errno(resp.status) == -EOPNOTSUPP)
		return -EOPNOTSUPP;
	return status_rc(w, &resp, body);
}

/* A paginated listing: GET /bucket/?QUERY page after page, QUERY being the base query, the
 * key prefix, then the markers the previous page gave. */
struct pager {
	struct s3_store *s;
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

static int s3_list(struct tfs_store *st, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	struct s3_store *s = s3_of(st);
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

	if (*prefix && !key_ok(prefix))
		return -EINVAL;
	rc = dir_key(s, prefix, fk, sizeof(fk), &ls.pg.plen);
	if (rc)
		return rc;
	what_of(w, sizeof(w), "LIST", s, prefix);
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
static int sweep_uploads(struct s3_store *s, const char *prefix, int64_t older_than)
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
	what_of(w, sizeof(w), "LIST (multipart uploads)", s, prefix);
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
static int sweep_locks(struct s3_store *s, const char *prefix, int64_t older_than)
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
		rc = s3_stat(&s->base, key, &size, &mtime);
		if (rc == -ENOENT)
			continue;
		if (rc)
			return rc;
		if (mtime > older_than || mtime > stale)
			continue;
		rc = s3_del_key(s, key);
		if (rc && rc != -ENOENT)
			return rc;
		n++;
	}
	return n;
}

static int s3_sweep(struct tfs_store *st, const char *prefix, int64_t older_than)
{
	struct s3_store *s = s3_of(st);
	int up, locks;

	if (!key_ok(prefix))
		return -EINVAL;
	up = sweep_uploads(s, prefix, older_than);
	locks = sweep_locks(s, prefix, older_than);
	if (up < 0)
		return up;
	if (locks < 0)
		return locks;
	return up + locks;
}

/* --- open and close -------------------------------------------------------------------------- */

/* Parse s3://[remote@]bucket[/prefix]. */
static int parse_url(const char *url, char **remote, char **bucket, char **prefix)
{
	const char *p = url + 5, *at, *slash;
	size_t n;

	*remote = *bucket = *prefix = NULL;
	slash = strchr(p, '/');
	at = strchr(p, '@');
	if (at && (!slash || at < slash)) {
		*remote = strndup(p, (size_t)(at - p));
		if (!*remote)
			return -ENOMEM;
		if (!tfs_name_valid(*remote)) {
			tfs_err("%s: '%s' is not a valid remote name", url, *remote);
			return -EINVAL;
		}
		p = at + 1;
	}
	n = slash ? (size_t)(slash - p) : strlen(p);
	if (n < 1 || n > 255) {
		tfs_err("%s: expected s3://[REMOTE@]BUCKET[/PREFIX]", url);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++)
		if (!(p[i] >= 'a' && p[i] <= 'z') && !(p[i] >= '0' && p[i] <= '9') &&
		    !(p[i] >= 'A' && p[i] <= 'Z') && !strchr("-._", p[i])) {
			tfs_err("%s: '%.*s' is not a valid bucket name", url, (int)n, p);
			return -EINVAL;
		}
	*bucket = strndup(p, n);
	p += n;
	while (*p == '/')
		p++;
	*prefix = strdup(p);
	if (!*bucket || !*prefix)
		return -ENOMEM;
	n = strlen(*prefix);
	while (n && (*prefix)[n - 1] == '/')
		(*prefix)[--n] = 0;
	if (n && !key_ok(*prefix)) {
		tfs_err("%s: '%s' is not a valid prefix", url, *prefix);
		return -EINVAL;
	}
	return 0;
}

static int make_origin(struct s3_store *s)
{
	const char *ep = s->cfg.endpoint, *auth;
	char origin[600];
	size_t alen;
	int path_style = s->cfg.path_style;

	if (!ep) {
		/* AWS: virtual-hosted style unless the bucket name would break TLS (dots). */
		path_style |= strchr(s->bucket, '.') != NULL;
		if (path_style)
			snprintf(origin, sizeof(origin), "https://s3.%s.amazonaws.com",
				 s->cfg.region);
		else
			snprintf(origin, sizeof(origin), "https://%s.s3.%s.amazonaws.com",
				 s->bucket, s->cfg.region);
	} else {
		if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
			tfs_err("endpoint %s: expected http://HOST[:PORT] or https://HOST[:PORT]",
				ep);
			return -EINVAL;
		}
		auth = strstr(ep, "://") + 3;
		alen = strcspn(auth, "/?#");
		if (!alen || alen > 255) {
			tfs_err("endpoint %s: no host", ep);
			return -EINVAL;
		}
		if (path_style)
			snprintf(origin, sizeof(origin), "%.*s%.*s", (int)(auth - ep), ep,
				 (int)alen, auth);
		else
			snprintf(origin, sizeof(origin), "%.*s%s.%.*s", (int)(auth - ep), ep,
				 s->bucket, (int)alen, auth);
	}
	s->path_base = malloc(strlen(s->bucket) + 2);
	if (s->path_base) {
		if (path_style)
			sprintf(s->path_base, "/%s", s->bucket);
		else
			s->path_base[0] = 0;
	}
	s->origin = strdup(origin);
	s->host = s->origin ? strdup(strstr(s->origin, "://") + 3) : NULL;
	return s->origin && s->host && s->path_base ? 0 : -ENOMEM;
}

static void s3_use_pool(struct tfs_store *st, struct tfs_workpool *pool)
{
	tfs_http_use_pool(s3_of(st)->http, pool);
}

static void s3_cancel(struct tfs_store *st)
{
	tfs_http_cancel(s3_of(st)->http);
}

static void s3_close(struct tfs_store *st)
{
	struct s3_store *s = s3_of(st);

	if (!s)
		return;
	if (s->base.count.retries)
		tfs_info("%s: %llu request attempts were retried", s->base.url,
			 (unsigned long long)s->base.count.retries);
	tfs_http_destroy(s->http);
	tfs_config_remote_free(&s->cfg);
	pthread_mutex_destroy(&s->probe_lock);
	free(s->bucket);
	free(s->prefix);
	free(s->origin);
	free(s->host);
	free(s->path_base);
	free(s->base.url);
	free(s);
}

static int s3_open(const char *url, unsigned flags, struct tfs_store **out)
{
	struct tfs_config_http hc;
	struct s3_store *s;
	char *remote = NULL;
	size_t n;
	int rc;

	(void)flags; /* a prefix needs no creating */
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &tfs_store_s3_ops;
	s->conditional = -1;
	pthread_mutex_init(&s->probe_lock, NULL);
	rc = parse_url(url, &remote, &s->bucket, &s->prefix);
	if (!rc)
		rc = tfs_config_remote(remote, &s->cfg);
	if (!rc)
		rc = tfs_config_http(&hc);
	if (!rc)
		rc = make_origin(s);
	if (rc)
		goto fail;
	if (s->cfg.conditional_writes >= 0)
		s->conditional = s->cfg.conditional_writes;
	s->base.url = strdup(url);
	if (!s->base.url) {
		rc = -ENOMEM;
		goto fail;
	}
	n = strlen(s->base.url);
	while (n > 5 && s->base.url[n - 1] == '/')
		s->base.url[--n] = 0;
	rc = tfs_http_create(&hc, &s->base.count.retries, &s->http);
	if (rc)
		goto fail;
	if (!s->cfg.access_key)
		tfs_debug("%s: no credentials configured; sending unsigned requests", url);
	free(remote);
	*out = &s->base;
	return 0;
fail:
	free(remote);
	s3_close(&s->base);
	return rc;
}

const struct tfs_store_ops tfs_store_s3_ops = {
	.scheme = "s3",
	.open = s3_open,
	.close = s3_close,
	.cancel = s3_cancel,
	.use_pool = s3_use_pool,
	.get = s3_get,
	.get_object = s3_get_object,
	.get_range = s3_get_range,
	.head = s3_head,
	.stat = s3_stat,
	.put = s3_put,
	.put_new = s3_put_new,
	.cas = s3_cas,
	.list = s3_list,
	.del = s3_del,
	.sweep = s3_sweep,
};
