/* SPDX-License-Identifier: MIT */
/* store_s3: the s3:// backend for AWS S3 and S3-compatible servers (MinIO, Ceph, R2, s3rver):
 * signed (SigV4) GET/Range/HEAD/PUT/DELETE, and refs moved with conditional writes or, where the
 * server ignores them, under a best-effort lock object; listings, multipart uploads of large
 * objects and the sweep are in s3xml.c, the signed request in s3call.c. */
#include "s3call.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "httpparts.h"

/* --- reads ----------------------------------------------------------------------------------- */

struct range_ctx {
	struct tfs_s3_store *s;
	const char *key; /* full key */
	const char *what;
	uint64_t size; /* the object's when known, else 0 */
	int object;    /* a content-addressed object: its own checksum vouches for it */
	struct tfs_store_version *v; /* NULL, or what the reply says of the object */
	/* NULL, or what the reply to the range at 0 says (fetched first, alone, by get_whole) */
	struct tfs_store_version *first;
	unsigned ranges; /* atomic: the ranges fetched, with first */
};

/* Reads of a whole ref or marker whose body disagrees with its MD5 ETag, backing off between
 * them: a server whose metadata and data are not updated as one (s3rver) can serve a value being
 * overwritten torn, and a value read again once the write is done is whole. */
#define ETAG_READS 3

/* Whether a reply's ETag is the MD5 of the object's bytes: on S3 and most compatible servers it
 * is for an object put in one request, unless a KMS or customer key encrypts it. A multipart
 * upload's ends in "-N", the number of parts. */
static int etag_is_md5(const struct tfs_http_resp *resp)
{
	const char *e = resp->etag;

	return strlen(e) == 34 && e[0] == '"' && e[33] == '"' && tfs_is_lower_hex(e + 1, 32) &&
	       strncmp(resp->sse, "aws:kms", 7) && strcmp(resp->sse, "SSE-C");
}

/* A whole object against its ETag tag, where tag_md5 says that is its MD5: 1 good, 0 damaged,
 * -1 cannot tell. */
static int etag_check(const char *tag, int tag_md5, const void *data, size_t len)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (!tag_md5 || !EVP_Digest(data, len, md, &mdlen, EVP_md5(), NULL) || mdlen != 16)
		return -1;
	return tfs_store_tag_md5_is(tag, md);
}

/* A whole value that disagreed with its MD5 ETag on read `attempt`: -EIO (logged) after
 * ETAG_READS reads, else 0 once it is time to read it again (counted as a retry). */
static int read_again(struct tfs_s3_store *s, const char *what, int attempt)
{
	if (attempt == ETAG_READS - 1) {
		tfs_err("%s: content does not match its ETag on %d reads", what, ETAG_READS);
		return -EIO;
	}
	tfs_warn("%s: content does not match its ETag; fetching it again", what);
	__atomic_add_fetch(&s->base.count.retries, 1, __ATOMIC_RELAXED);
	tfs_http_backoff(s->http, (unsigned)attempt);
	return 0;
}

static ssize_t fetch_range(void *arg, uint64_t off, void *dst, size_t len, int64_t *total)
{
	struct range_ctx *r = arg;
	struct tfs_http_resp resp;
	char range[64];
	int rc, md5;

	*total = -1;
	if (len == 0)
		return 0;
	snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
		 (unsigned long long)(off + len - 1));
	for (int attempt = 0;; attempt++) {
		struct tfs_http_req req = {
			.dst = dst, .dst_cap = len, .range_off = off, .ranged = 1
		};
		struct tfs_s3_call c;

		rc = tfs_s3_call_init(&c, r->s, "GET", r->key, NULL, NULL, 0);
		if (rc)
			return rc;
		tfs_s3_call_add(&c, "Range", range);
		rc = tfs_s3_call_do(&c, &req, NULL, 0, r->what, &resp);
		if (rc)
			return rc;
		if (resp.status == 416)
			return 0; /* at or past the end */
		rc = tfs_s3_status_rc(r->what, &resp, NULL);
		if (rc)
			return rc;
		if (resp.status == 206)
			*total = resp.range_total;
		else if (resp.content_length >= 0)
			*total = resp.content_length;
		md5 = etag_is_md5(&resp);
		if (r->first)
			__atomic_add_fetch(&r->ranges, 1, __ATOMIC_RELAXED);
		if (r->v || (r->first && !off)) {
			struct tfs_store_version *v = r->v ? r->v : r->first;

			snprintf(v->tag, sizeof(v->tag), "%s", resp.etag);
			v->tag_md5 = md5;
		}
		/* Objects carry their own checksums (checked above this); refs and markers do not,
		 * so a whole one is checked against its MD5 ETag, refetched once if damaged. */
		if (off || *total != (int64_t)resp.body_len || r->object ||
		    etag_check(resp.etag, md5, dst, resp.body_len) != 0)
			return (ssize_t)resp.body_len;
		rc = read_again(r->s, r->what, attempt);
		if (rc)
			return rc;
	}
}

/* A whole value, by parts, or by parallel ranges when its size is known (urgent). A value that
 * is not an object and came in many ranges over plain HTTP is checked whole against its MD5 ETag
 * (a value of one range was, by fetch_range), and fetched again when damaged, as fetch_range
 * does; TLS authenticates what it carries (source.c's rule). */
static int get_whole(struct tfs_store *st, const char *key, uint64_t size, int object,
		     struct tfs_buf *out)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	char fk[1024], w[1200];
	struct tfs_store_version first;
	struct range_ctx r = { s, fk, w, size, object, NULL, object ? NULL : &first, 0 };
	int rc;

	out->len = 0;
	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	rc = tfs_s3_full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	tfs_s3_what(w, sizeof(w), "GET", s, key);
	for (int attempt = 0;; attempt++) {
		first.tag_md5 = 0;
		r.ranges = 0;
		rc = tfs_http_get_whole(s->http, fetch_range, &r, size, out);
		if (rc || object || r.ranges < 2 || s->base.tls ||
		    etag_check(first.tag, first.tag_md5, out->data, out->len) != 0)
			return rc;
		rc = read_again(s, w, attempt);
		if (rc)
			return rc;
	}
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

static ssize_t s3_get_range_of(struct tfs_store *st, const char *key, uint64_t off, void *buf,
			       size_t len, struct tfs_store_version *v)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	char fk[1024], w[1200];
	struct range_ctx r = { s, fk, w, 0, 0, v, NULL, 0 };
	int64_t total;
	ssize_t got;
	int rc;

	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	rc = tfs_s3_full_key(s, key, fk, sizeof(fk));
	if (rc)
		return rc;
	tfs_s3_what(w, sizeof(w), "GET", s, key);
	got = fetch_range(&r, off, buf, len, &total);
	if (v)
		v->size = total;
	return got;
}

static ssize_t s3_get_range(struct tfs_store *st, const char *key, uint64_t off, void *buf,
			    size_t len)
{
	return s3_get_range_of(st, key, off, buf, len, NULL);
}

int tfs_s3_stat(struct tfs_store *st, const char *key, uint64_t *size, int64_t *mtime)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char w[1200];
	int rc;

	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	rc = tfs_s3_key_call(&c, s, "HEAD", key, NULL, 0, w, sizeof(w));
	if (rc)
		return rc;
	rc = tfs_s3_call_do(&c, &req, NULL, 0, w, &resp);
	if (!rc)
		rc = tfs_s3_status_rc(w, &resp, NULL);
	if (rc)
		return rc;
	return tfs_http_resp_size(&resp, w, size, mtime);
}

static int s3_head(struct tfs_store *st, const char *key, uint64_t *size)
{
	return tfs_s3_stat(st, key, size, NULL);
}

/* GET a small object with its ETag (for compare-and-swap). */
static int get_etag(struct tfs_s3_store *s, const char *key, struct tfs_buf *out, char *etag,
		    size_t cap)
{
	struct tfs_http_req req = { .out = out };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char w[1200];
	int rc;

	/* The ETag goes into an If-Match: it must be the tag of exactly this content, or a
	 * compare-and-swap could overwrite a version it never saw. A body that disagrees with an
	 * MD5 ETag (a server whose metadata and data are not updated as one) is read again. */
	for (int attempt = 0;; attempt++) {
		rc = tfs_s3_key_call(&c, s, "GET", key, NULL, 0, w, sizeof(w));
		if (rc)
			return rc;
		rc = tfs_s3_call_do(&c, &req, NULL, 0, w, &resp);
		if (!rc)
			rc = tfs_s3_status_rc(w, &resp, out);
		if (rc || etag_check(resp.etag, etag_is_md5(&resp), out->data, out->len) != 0)
			break;
		rc = read_again(s, w, attempt);
		if (rc)
			return rc;
	}
	if (!rc)
		snprintf(etag, cap, "%s", resp.etag);
	return rc;
}

/* --- writes ---------------------------------------------------------------------------------- */

/* PUT with optional extra headers (conditions). Returns the final status in *status. */
static int put_cond(struct tfs_s3_store *s, const char *key, const void *data, size_t len,
		    const char *hname, const char *hvalue, long *status)
{
	struct tfs_buf body = { 0 };
	struct tfs_http_req req = { .out = &body };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char w[1200];
	int rc;

	rc = tfs_s3_key_call(&c, s, "PUT", key, data, len, w, sizeof(w));
	if (rc)
		return rc;
	if (hname)
		tfs_s3_call_add(&c, hname, hvalue);
	rc = tfs_s3_call_do(&c, &req, data, len, w, &resp);
	if (!rc) {
		*status = resp.status;
		if (resp.status != 412 && resp.status != 409)
			rc = tfs_s3_status_rc(w, &resp, &body);
	}
	tfs_buf_free(&body);
	return rc;
}

static int s3_put(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	long status;

	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	if (len > MULTIPART_THRESHOLD)
		return tfs_s3_multipart_put(tfs_s3_of(st), key, data, len);
	return put_cond(tfs_s3_of(st), key, data, len, NULL, NULL, &status);
}

int tfs_s3_del_key(struct tfs_s3_store *s, const char *key)
{
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_s3_call c;
	char w[1200];
	int rc;

	rc = tfs_s3_key_call(&c, s, "DELETE", key, NULL, 0, w, sizeof(w));
	if (rc)
		return rc;
	rc = tfs_s3_call_do(&c, &req, NULL, 0, w, &resp);
	return rc ? rc : tfs_s3_status_rc(w, &resp, NULL);
}

static int s3_del(struct tfs_store *st, const char *key)
{
	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	return tfs_s3_del_key(tfs_s3_of(st), key);
}

/* Does the server honour If-None-Match: * on PUT? Asked once per store: write a probe object
 * twice with the condition; a server that lets the second write through ignores it. */
static int conditional_ok(struct tfs_s3_store *s)
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
	tfs_s3_del_key(s, key);
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
static void touch(struct tfs_s3_store *s, const char *key)
{
	struct tfs_http_req req = { 0 };
	struct tfs_http_resp resp;
	struct tfs_buf src = { 0 };
	struct tfs_s3_call c;
	char fk[1024], w[1200];

	if (tfs_s3_full_key(s, key, fk, sizeof(fk)) || tfs_buf_printf(&src, "/%s/", s->bucket) ||
	    tfs_sigv4_uri_encode(&src, fk, strlen(fk), 1) ||
	    tfs_s3_call_init(&c, s, "PUT", fk, NULL, NULL, 0)) {
		tfs_buf_free(&src);
		return;
	}
	tfs_s3_call_add(&c, "x-amz-copy-source", (char *)src.data);
	tfs_s3_call_add(&c, "x-amz-metadata-directive", "REPLACE");
	tfs_s3_what(w, sizeof(w), "COPY", s, key);
	if (!tfs_s3_call_do(&c, &req, NULL, 0, w, &resp) && resp.status >= 300)
		tfs_debug("%s: could not refresh the modification time (HTTP %ld)", w, resp.status);
	tfs_buf_free(&src);
}

static int s3_put_new(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	struct tfs_s3_store *s = tfs_s3_of(st);
	uint64_t size;
	long status = 0;
	int rc;

	if (!tfs_s3_key_ok(key))
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

static int cas_conditional(struct tfs_s3_store *s, const char *key, const void *old, size_t old_len,
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
static int lock_take(struct tfs_s3_store *s, const char *lk, const char *token)
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

static void lock_drop(struct tfs_s3_store *s, const char *lk, const char *token)
{
	struct tfs_buf cur = { 0 };
	char etag[132];

	if (!get_etag(s, lk, &cur, etag, sizeof(etag)) && cur.len >= strlen(token) &&
	    !strncmp((char *)cur.data, token, strlen(token)))
		tfs_s3_del_key(s, lk);
	tfs_buf_free(&cur);
}

static int cas_locked(struct tfs_s3_store *s, const char *key, const void *old, size_t old_len,
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
	struct tfs_s3_store *s = tfs_s3_of(st);

	if (!tfs_s3_key_ok(key))
		return -EINVAL;
	if (conditional_ok(s) == 1)
		return cas_conditional(s, key, old, old_len, data, len);
	return cas_locked(s, key, old, old_len, data, len);
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
	if (n && !tfs_s3_key_ok(*prefix)) {
		tfs_err("%s: '%s' is not a valid prefix", url, *prefix);
		return -EINVAL;
	}
	return 0;
}

static int make_origin(struct tfs_s3_store *s)
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
	s->base.tls = !strncmp(origin, "https://", 8);
	s->host = s->origin ? strdup(strstr(s->origin, "://") + 3) : NULL;
	return s->origin && s->host && s->path_base ? 0 : -ENOMEM;
}

static void s3_use_pool(struct tfs_store *st, struct tfs_workpool *pool)
{
	tfs_http_use_pool(tfs_s3_of(st)->http, pool);
}

static void s3_cancel(struct tfs_store *st)
{
	tfs_http_cancel(tfs_s3_of(st)->http);
}

static void s3_close(struct tfs_store *st)
{
	struct tfs_s3_store *s = tfs_s3_of(st);

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
	struct tfs_s3_store *s;
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
	.get_range_of = s3_get_range_of,
	.head = s3_head,
	.stat = tfs_s3_stat,
	.put = s3_put,
	.put_new = s3_put_new,
	.cas = s3_cas,
	.list = tfs_s3_list,
	.del = s3_del,
	.sweep = tfs_s3_sweep,
};
