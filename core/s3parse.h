/* SPDX-License-Identifier: MIT */
/* s3parse: S3's XML replies read, apart from the requests that fetch them (s3xml.c), so that
 * they can be fuzzed: an element's text, a listing page, a page of multipart uploads, an error's
 * code. Replies are untrusted: every function stays within [body, end) and checks what it hands
 * on. */
#ifndef TFS_S3PARSE_H
#define TFS_S3PARSE_H

#include <stdint.h>

#include "store.h"
#include "util.h"

/* The text of the first <tag>...</tag> in [p, end), XML entities decoded, into out
 * (NUL-terminated). Returns the position after the closing tag, or NULL when there is none. */
const char *tfs_xml_get(const char *p, const char *end, const char *tag, struct tfs_buf *out);

/* Seconds since the epoch of an ISO 8601 UTC time ("2026-11-21T14:00:00.000Z"), or -1. */
int64_t tfs_iso8601_parse(const char *v);

/* One ListObjectsV2 page under the full key prefix fk (plen bytes, ending in '/' unless empty):
 * fn(arg, name, is_dir) for each object ("<Contents><Key>") and each directory
 * ("<CommonPrefixes><Prefix>") directly under it, by name relative to it: never empty, never
 * holding '/', never starting with '.'. *more: the page says more follow, and then token holds
 * the next page's continuation token (-EPROTO when it is missing). v: scratch. */
int tfs_s3_listing_parse(const char *body, const char *end, const char *fk, size_t plen,
			 tfs_store_list_fn fn, void *arg, struct tfs_buf *v, struct tfs_buf *token,
			 int *more);

/* One ListMultipartUploads page: fn(arg, key, upload id, start time or -1) for each complete
 * <Upload>; *more and the next page's markers (-EPROTO when missing) as above. scratch: 3. */
typedef int (*tfs_s3_upload_fn)(void *arg, const char *key, const struct tfs_buf *id,
				int64_t started);
int tfs_s3_uploads_parse(const char *body, const char *end, tfs_s3_upload_fn fn, void *arg,
			 struct tfs_buf *scratch, struct tfs_buf *key_marker,
			 struct tfs_buf *upload_marker, int *more);

/* The S3 error code of an error reply, as " (Code)", or "": letters and digits only, so that a
 * server cannot write what it likes into a log line. */
void tfs_s3_error_code(const struct tfs_buf *body, char *out, size_t cap);

#endif
