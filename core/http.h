/* SPDX-License-Identifier: MIT */
/* http: the libcurl client under the http(s):// and s3:// stores: one connection pool per
 * store, bounded in-flight requests, timeouts and retries with jittered exponential backoff.
 * Large objects are fetched as parallel ranges by httpparts.h. */
#ifndef TFS_HTTP_H
#define TFS_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "util.h"
#include "workpool.h"

struct tfs_http;

/* Called before every attempt to produce the request headers, appended to hdrs as
 * NUL-terminated "Name: value" strings (so that a signature is fresh on each attempt). */
typedef int (*tfs_http_headers_fn)(void *arg, struct tfs_buf *hdrs);

struct tfs_http_req {
	const char *method; /* GET HEAD PUT POST DELETE */
	const char *url;
	tfs_http_headers_fn headers;
	void *headers_arg;
	const void *body; /* PUT and POST */
	size_t body_len;
	/* The response body goes into out (reset on every attempt), or into dst (at most dst_cap
	 * bytes: a longer body is cut there and the transfer stopped), or nowhere. */
	struct tfs_buf *out;
	void *dst;
	size_t dst_cap;
	/* For a ranged GET: the offset asked for, so that a server that ignores Range (200 with
	 * the whole object) still fills dst with the right bytes. */
	uint64_t range_off;
	int ranged;
	const char *what; /* "GET s3://bucket/key" for log lines; never holds a secret */
};

struct tfs_http_resp {
	long status;
	size_t body_len;	/* bytes delivered to out or dst */
	int64_t content_length; /* -1 when absent */
	int64_t range_total;	/* total size from Content-Range, -1 when absent */
	int64_t last_modified;	/* seconds since the epoch, -1 when absent */
	char etag[132];		/* as sent, quotes included; "" when absent */
	/* S3's server-side encryption as the reply names it (x-amz-server-side-encryption: AES256,
	 * aws:kms, ...; "SSE-C" for a customer's key), "" when it names none: an object encrypted
	 * with a KMS or customer key has an ETag that is not the MD5 of its bytes. */
	char sse[24];
};

/* A client with its own connection pool (shared connections, DNS and TLS sessions).
 * `retries` (may be NULL) is incremented atomically for every retried attempt. */
int tfs_http_create(const struct tfs_config_http *cfg, uint64_t *retries, struct tfs_http **out);
void tfs_http_destroy(struct tfs_http *h);
/* From now on every request (those in flight included) fails at once with -ECANCELED. */
void tfs_http_cancel(struct tfs_http *h);
const struct tfs_config_http *tfs_http_config(const struct tfs_http *h);

/* Perform a request, retrying transport failures (connect errors, resets, timeouts, stalls,
 * bodies shorter than their Content-Length) and statuses 408, 429, 500, 502, 503 and 504 with
 * jittered exponential backoff up to the configured number of retries. Returns 0 when a final
 * response arrived (resp->status says which), -ETIMEDOUT / -ECONNRESET / -EIO when every
 * attempt failed in transport (logged once, with req->what), -ENOMEM. */
int tfs_http_do(struct tfs_http *h, const struct tfs_http_req *req, struct tfs_http_resp *resp);

/* The -errno for a final HTTP status: 404/410 -ENOENT, 401/403 -EACCES, 405/501 -EOPNOTSUPP,
 * 412 -EAGAIN, 416 -ERANGE, anything else >= 400 -EIO; 0 below 400. */
int tfs_http_status_errno(long status);

/* The size (and, when mtime is not NULL, the Last-Modified time) a HEAD reply states; -EIO with
 * a log line naming `what` when it has no Content-Length. */
int tfs_http_resp_size(const struct tfs_http_resp *resp, const char *what, uint64_t *size,
		       int64_t *mtime);

/* Run ranged parts on pool (the lake's workers) from now on; NULL: on threads of their own. The
 * pool must outlive its use: set NULL again before destroying it. */
void tfs_http_use_pool(struct tfs_http *h, struct tfs_workpool *pool);
struct tfs_workpool *tfs_http_pool(struct tfs_http *h);

/* Sleep for the jittered backoff of attempt n (0-based) under h's settings; for callers that
 * retry at a higher level (a lock wait). */
void tfs_http_backoff(const struct tfs_http *h, unsigned attempt);

#endif
