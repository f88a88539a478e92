/* SPDX-License-Identifier: MIT */
/* s3call: what the s3:// backend's files share: the store, one signed request, the key rules and
 * the mapping of a reply's status to -errno. store_s3.c does reads, writes, compare-and-swap and
 * open; s3xml.c the requests whose bodies are XML (multipart uploads, listings, the sweep). */
#ifndef TFS_S3CALL_H
#define TFS_S3CALL_H

#include <pthread.h>
#include <stddef.h>

#include "config.h"
#include "http.h"
#include "sigv4.h"
#include "store.h"

#define MULTIPART_THRESHOLD (64ull << 20) /* larger objects go up in parts */
#define MULTIPART_PART (16ull << 20)
#define LOCK_STALE_S 30	   /* a lock object older than this is abandoned */
#define LOCK_ATTEMPTS 40   /* bounded wait for a lock held by someone else */
#define LOCK_SETTLE_MS 100 /* between writing a lock and checking it is still ours */

struct tfs_s3_store {
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

static inline struct tfs_s3_store *tfs_s3_of(struct tfs_store *s)
{
	return (struct tfs_s3_store *)s;
}

/* One signed request. */
struct tfs_s3_call {
	struct tfs_s3_store *s;
	const char *method;
	struct tfs_buf path; /* the wire path: path_base + "/" + encoded key */
	const char *query;   /* encoded, or NULL */
	char payload[65];
	struct tfs_sigv4_header extra[4];
	size_t nextra;
};

/* A key the backend takes: relative, not too long, no ".." component. */
int tfs_s3_key_ok(const char *key);
/* The object key in the bucket for a store key. */
int tfs_s3_full_key(const struct tfs_s3_store *s, const char *key, char *out, size_t cap);
/* A request: method on fkey (a full key, or NULL for the bucket) with query (encoded, or NULL)
 * and body (hashed for the signature). */
int tfs_s3_call_init(struct tfs_s3_call *c, struct tfs_s3_store *s, const char *method,
		     const char *fkey, const char *query, const void *body, size_t len);
void tfs_s3_call_add(struct tfs_s3_call *c, const char *name, const char *value);
/* Perform c (and free what init took); req carries the body destination and range. */
int tfs_s3_call_do(struct tfs_s3_call *c, struct tfs_http_req *req, const void *body, size_t len,
		   const char *what, struct tfs_http_resp *resp);
/* "METHOD URL/KEY" for log lines. */
void tfs_s3_what(char *buf, size_t cap, const char *method, const struct tfs_s3_store *s,
		 const char *key);
/* A request on key (relative to the store's prefix): c is ready for call_add and call_do, and w
 * names the request in log lines. */
int tfs_s3_key_call(struct tfs_s3_call *c, struct tfs_s3_store *s, const char *method,
		    const char *key, const void *body, size_t len, char *w, size_t wcap);
/* Map a final status to -errno, with one log line for the unexpected ones. */
int tfs_s3_status_rc(const char *what, const struct tfs_http_resp *resp, const struct tfs_buf *b);

/* store_s3.c */
int tfs_s3_stat(struct tfs_store *st, const char *key, uint64_t *size, int64_t *mtime);
int tfs_s3_del_key(struct tfs_s3_store *s, const char *key);

/* s3xml.c */
int tfs_s3_multipart_put(struct tfs_s3_store *s, const char *key, const void *data, size_t len);
int tfs_s3_list(struct tfs_store *st, const char *prefix, tfs_store_list_fn fn, void *arg);
int tfs_s3_sweep(struct tfs_store *st, const char *prefix, int64_t older_than, int dry_run);

#endif
