/* SPDX-License-Identifier: MIT */
/* s3call: one signed request of the s3:// backend, the key rules, and status to -errno. */
#include "s3call.h"
#include "s3parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

int tfs_s3_key_ok(const char *key)
{
	if (key[0] == '/' || strlen(key) > 900)
		return 0;
	for (const char *p = key; p; p = strchr(p, '/'), p = p ? p + 1 : NULL)
		if (!strncmp(p, "..", 2) && (p[2] == '/' || p[2] == 0))
			return 0;
	return 1;
}

int tfs_s3_full_key(const struct tfs_s3_store *s, const char *key, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s%s%s", s->prefix, *s->prefix && *key ? "/" : "", key);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int s3_headers(void *arg, struct tfs_buf *h)
{
	struct tfs_s3_call *c = arg;
	struct tfs_s3_store *s = c->s;
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

int tfs_s3_call_init(struct tfs_s3_call *c, struct tfs_s3_store *s, const char *method,
		     const char *fkey, const char *query, const void *body, size_t len)
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

void tfs_s3_call_add(struct tfs_s3_call *c, const char *name, const char *value)
{
	c->extra[c->nextra++] = (struct tfs_sigv4_header){ name, value };
}

int tfs_s3_call_do(struct tfs_s3_call *c, struct tfs_http_req *req, const void *body, size_t len,
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

void tfs_s3_what(char *buf, size_t cap, const char *method, const struct tfs_s3_store *s,
		 const char *key)
{
	snprintf(buf, cap, "%s %.300s/%.600s", method, s->base.url, key);
}

int tfs_s3_key_call(struct tfs_s3_call *c, struct tfs_s3_store *s, const char *method,
		    const char *key, const void *body, size_t len, char *w, size_t wcap)
{
	char fk[1024];
	int rc = tfs_s3_full_key(s, key, fk, sizeof(fk));

	if (!rc)
		rc = tfs_s3_call_init(c, s, method, fk, NULL, body, len);
	if (!rc)
		tfs_s3_what(w, wcap, method, s, key);
	return rc;
}

int tfs_s3_status_rc(const char *what, const struct tfs_http_resp *resp, const struct tfs_buf *b)
{
	int rc = tfs_http_status_errno(resp->status);
	char code[96];

	if (rc && rc != -ENOENT) {
		tfs_s3_error_code(b, code, sizeof(code));
		tfs_err("%s: HTTP status %ld%s", what, resp->status, code);
	}
	return rc;
}
