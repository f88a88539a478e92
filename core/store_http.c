/* SPDX-License-Identifier: MIT */
/* store_http: read-only http:// and https:// lakes on any static web server with Range support.
 * Listings come from ".tensorfs-index" files (tensorfs index) or, failing that, from the
 * server's HTML directory listing (nginx autoindex, Apache, python -m http.server). */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "http.h"
#include "httpparts.h"
#include "lakeindex.h"
#include "sigv4.h"

struct http_store {
	struct tfs_store base;
	struct tfs_http *http;
	char *root; /* base URL without a trailing '/' */
};

static struct http_store *hs_of(struct tfs_store *s)
{
	return (struct http_store *)s;
}

static int key_ok(const char *key)
{
	if (key[0] == '/' || strlen(key) > 4096)
		return 0;
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL)
		if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == 0))
			return 0;
	return 1;
}

/* root + "/" + key, the key percent-encoded ('/' kept). */
static int key_url(const struct http_store *s, const char *key, int dir, struct tfs_buf *u)
{
	int rc = tfs_buf_printf(u, "%s/", s->root);

	if (!rc)
		rc = tfs_sigv4_uri_encode(u, key, strlen(key), 1);
	if (!rc && dir && *key)
		rc = tfs_buf_append(u, "/", 1);
	return rc;
}

static void what(char *buf, size_t cap, const char *method, const struct http_store *s,
		 const char *key)
{
	snprintf(buf, cap, "%s %.240s/%.240s", method, s->base.url, key);
}

struct range_hdr {
	uint64_t off;
	size_t len;
};

static int range_headers(void *arg, struct tfs_buf *h)
{
	const struct range_hdr *r = arg;
	int rc = tfs_buf_printf(h, "Range: bytes=%llu-%llu", (unsigned long long)r->off,
				(unsigned long long)(r->off + r->len - 1));

	return rc ? rc : tfs_buf_append(h, "", 1);
}

struct range_ctx {
	struct http_store *s;
	const char *key;
	uint64_t size; /* the object's when known, else 0 */
	char *tag;     /* NULL, or where the reply's ETag goes (sizeof tfs_store_version.tag) */
};

static ssize_t fetch_range(void *arg, uint64_t off, void *dst, size_t len, int64_t *total)
{
	struct range_ctx *c = arg;
	struct range_hdr rh = { off, len };
	struct tfs_buf u = { 0 };
	struct tfs_http_resp resp;
	char w[512];
	int rc;

	*total = -1;
	if (len == 0)
		return 0;
	rc = key_url(c->s, c->key, 0, &u);
	if (rc)
		return rc;
	what(w, sizeof(w), "GET", c->s, c->key);
	rc = tfs_http_do(c->s->http,
			 &(struct tfs_http_req){ .method = "GET",
						 .url = (char *)u.data,
						 .headers = range_headers,
						 .headers_arg = &rh,
						 .dst = dst,
						 .dst_cap = len,
						 .range_off = off,
						 .ranged = 1,
						 .what = w },
			 &resp);
	tfs_buf_free(&u);
	if (rc)
		return rc;
	if (resp.status == 416) {
		*total = resp.range_total;
		return 0; /* at or past the end */
	}
	rc = tfs_http_status_errno(resp.status);
	if (rc) {
		if (rc != -ENOENT)
			tfs_err("%s: HTTP status %ld", w, resp.status);
		return rc;
	}
	if (resp.status == 206)
		*total = resp.range_total;
	else if (resp.content_length >= 0)
		*total = resp.content_length;
	if (c->tag)
		snprintf(c->tag, sizeof(((struct tfs_store_version *)0)->tag), "%s", resp.etag);
	return (ssize_t)resp.body_len;
}

static int http_get_object(struct tfs_store *st, const char *key, uint64_t urgent_size,
			   struct tfs_buf *out, int *verified)
{
	struct range_ctx c = { hs_of(st), key, urgent_size, NULL };

	*verified = 0;
	if (!key_ok(key))
		return -EINVAL;
	return tfs_http_get_whole(c.s->http, fetch_range, &c, urgent_size, out);
}

static int http_get(struct tfs_store *st, const char *key, struct tfs_buf *out)
{
	int verified;

	return http_get_object(st, key, 0, out, &verified);
}

static ssize_t http_get_range_of(struct tfs_store *st, const char *key, uint64_t off, void *buf,
				 size_t len, struct tfs_store_version *v)
{
	struct range_ctx c = { hs_of(st), key, 0, v ? v->tag : NULL };
	int64_t total;
	ssize_t got;

	if (!key_ok(key))
		return -EINVAL;
	got = fetch_range(&c, off, buf, len, &total);
	if (v)
		v->size = total;
	return got;
}

static ssize_t http_get_range(struct tfs_store *st, const char *key, uint64_t off, void *buf,
			      size_t len)
{
	return http_get_range_of(st, key, off, buf, len, NULL);
}

static int http_stat(struct tfs_store *st, const char *key, uint64_t *size, int64_t *mtime)
{
	struct http_store *s = hs_of(st);
	struct tfs_buf u = { 0 };
	struct tfs_http_resp resp;
	char w[512];
	int rc;

	if (!key_ok(key))
		return -EINVAL;
	rc = key_url(s, key, 0, &u);
	if (rc)
		return rc;
	what(w, sizeof(w), "HEAD", s, key);
	rc = tfs_http_do(
		s->http,
		&(struct tfs_http_req){ .method = "HEAD", .url = (char *)u.data, .what = w },
		&resp);
	tfs_buf_free(&u);
	if (rc)
		return rc;
	rc = tfs_http_status_errno(resp.status);
	if (rc) {
		if (rc != -ENOENT)
			tfs_err("%s: HTTP status %ld", w, resp.status);
		return rc;
	}
	return tfs_http_resp_size(&resp, w, size, mtime);
}

static int http_head(struct tfs_store *st, const char *key, uint64_t *size)
{
	return http_stat(st, key, size, NULL);
}

static int http_readonly(struct tfs_store *st, const char *key, const void *data, size_t len)
{
	(void)key;
	(void)data;
	(void)len;
	tfs_err("%s: http(s) lakes are read-only", st->url);
	return -EROFS;
}

static int http_cas(struct tfs_store *st, const char *key, const void *old, size_t old_len,
		    const void *data, size_t len)
{
	(void)old;
	(void)old_len;
	return http_readonly(st, key, data, len);
}

static int http_del(struct tfs_store *st, const char *key)
{
	return http_readonly(st, key, NULL, 0);
}

static int http_list(struct tfs_store *st, const char *prefix, tfs_store_list_fn fn, void *arg)
{
	struct http_store *s = hs_of(st);
	struct tfs_buf u = { 0 }, body = { 0 };
	struct tfs_http_resp resp;
	char w[512], key[4200];
	int rc;

	if (*prefix && !key_ok(prefix))
		return -EINVAL;
	snprintf(key, sizeof(key), "%s%s" TFS_LAKEINDEX_NAME, prefix, *prefix ? "/" : "");
	rc = http_get(st, key, &body);
	if (!rc) {
		rc = tfs_lakeindex_parse((char *)body.data, body.len, fn, arg);
		if (rc == -EINVAL)
			tfs_err("%s/%s: not a tensorfs index", st->url, key);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	/* No index: try the server's own directory listing. */
	rc = key_url(s, prefix, 1, &u);
	if (rc)
		goto out;
	what(w, sizeof(w), "GET", s, prefix);
	rc = tfs_http_do(s->http,
			 &(struct tfs_http_req){
				 .method = "GET", .url = (char *)u.data, .out = &body, .what = w },
			 &resp);
	if (rc)
		goto out;
	if (resp.status == 404) {
		rc = -ENOENT;
		goto out;
	}
	if (resp.status >= 300) {
		tfs_err("%s: cannot list %s/%s: no %s there and no directory listing (HTTP %ld); "
			"run `tensorfs index` on the lake",
			st->url, st->url, prefix, TFS_LAKEINDEX_NAME, resp.status);
		rc = -EOPNOTSUPP;
		goto out;
	}
	rc = tfs_lakeindex_parse_html((char *)body.data, body.len, fn, arg);
out:
	tfs_buf_free(&u);
	tfs_buf_free(&body);
	return rc;
}

static int http_open(const char *url, unsigned flags, struct tfs_store **out,
		     const struct tfs_store_ops *ops)
{
	struct tfs_config_http cfg;
	struct http_store *s;
	size_t n;
	int rc;

	if (flags & TFS_STORE_CREATE) {
		tfs_err("%s: http(s) lakes are read-only; write to the lake's file:// or s3:// "
			"location",
			url);
		return -EROFS;
	}
	{
		const char *host = strstr(url, "://");

		if (!host || !host[3] || host[3] == '/' || host[3] == '@') {
			tfs_err("%s: expected http(s)://HOST[:PORT]/PATH", url);
			return -EINVAL;
		}
	}
	rc = tfs_config_http(&cfg);
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = ops;
	s->base.url = strdup(url);
	s->base.tls = !strncmp(url, "https://", 8);
	s->root = strdup(url);
	if (!s->base.url || !s->root) {
		rc = -ENOMEM;
		goto fail;
	}
	n = strlen(s->root);
	while (n > 0 && s->root[n - 1] == '/')
		s->root[--n] = 0;
	n = strlen(s->base.url);
	while (n > 0 && s->base.url[n - 1] == '/')
		s->base.url[--n] = 0;
	{
		/* "http://user:password@host/...": keep the password out of every log line. */
		char *auth = strstr(s->base.url, "://") + 3, *at = strchr(auth, '@');
		char *slash = strchr(auth, '/');

		if (at && (!slash || at < slash))
			memmove(auth, at + 1, strlen(at + 1) + 1);
		if (!*auth || *auth == '/') {
			tfs_err("%s: expected http(s)://HOST[:PORT]/PATH", s->base.url);
			rc = -EINVAL;
			goto fail;
		}
	}
	rc = tfs_http_create(&cfg, &s->base.count.retries, &s->http);
	if (rc)
		goto fail;
	*out = &s->base;
	return 0;
fail:
	free(s->base.url);
	free(s->root);
	free(s);
	return rc;
}

static int http_open_plain(const char *url, unsigned flags, struct tfs_store **out)
{
	return http_open(url, flags, out, &tfs_store_http_ops);
}

static int https_open(const char *url, unsigned flags, struct tfs_store **out)
{
	return http_open(url, flags, out, &tfs_store_https_ops);
}

static void http_use_pool(struct tfs_store *st, struct tfs_workpool *pool)
{
	tfs_http_use_pool(hs_of(st)->http, pool);
}

static void http_cancel(struct tfs_store *st)
{
	tfs_http_cancel(hs_of(st)->http);
}

static void http_close(struct tfs_store *st)
{
	struct http_store *s = hs_of(st);

	if (s->base.count.retries)
		tfs_info("%s: %llu request attempts were retried", s->base.url,
			 (unsigned long long)s->base.count.retries);
	tfs_http_destroy(s->http);
	free(s->root);
	free(s->base.url);
	free(s);
}

#define HTTP_OPS                                                                            \
	.close = http_close, .get = http_get, .get_object = http_get_object,                \
	.get_range = http_get_range, .get_range_of = http_get_range_of, .head = http_head,  \
	.stat = http_stat, .put = http_readonly, .put_new = http_readonly, .cas = http_cas, \
	.list = http_list, .del = http_del, .sweep = NULL, .cancel = http_cancel,           \
	.use_pool = http_use_pool

const struct tfs_store_ops tfs_store_http_ops = {
	.scheme = "http",
	.open = http_open_plain,
	HTTP_OPS,
};

const struct tfs_store_ops tfs_store_https_ops = {
	.scheme = "https",
	.open = https_open,
	HTTP_OPS,
};
