/* SPDX-License-Identifier: MIT */
/* sigv4: AWS Signature Version 4 (header-based authorisation) as S3 expects it. */
#ifndef TFS_SIGV4_H
#define TFS_SIGV4_H

#include <stddef.h>
#include <time.h>

#include "util.h"

/* SHA-256 of the empty string, the payload hash of a request without a body. */
#define TFS_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define TFS_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define TFS_SIGV4_DATE_LEN 17 /* "YYYYMMDDTHHMMSSZ" + NUL */

struct tfs_sigv4_header {
	const char *name; /* any case: canonicalised to lower case */
	const char *value;
};

/* One request to sign. Every header in `headers` is signed; the caller must include `host`
 * (exactly as sent) and `x-amz-date`, and for S3 `x-amz-content-sha256` (same value as
 * payload_hash) and, with temporary credentials, `x-amz-security-token`. Duplicate names are
 * joined with ',' in the order given. */
struct tfs_sigv4_request {
	const char *method;
	/* The path as sent on the wire. It is percent-decoded and encoded again once with AWS's
	 * rules (S3's canonical URI: one encoding, no dot-segment normalisation), so a raw path
	 * ("/a b") and its encoding ("/a%20b") sign the same. */
	const char *path;
	/* The query string as sent, without '?' (NULL or "" for none). Each name and value is
	 * decoded, encoded again and the pairs are sorted by name, then value. '+' is a literal
	 * plus, never a space. */
	const char *query;
	const struct tfs_sigv4_header *headers;
	size_t nheaders;
	/* Lowercase hex SHA-256 of the body, or TFS_SIGV4_UNSIGNED. */
	const char *payload_hash;
};

/* Credentials and scope. The secret never leaves this module except inside the signature. */
struct tfs_sigv4_key {
	const char *access_key;
	const char *secret_key;
	const char *region;  /* "us-east-1" */
	const char *service; /* "s3" */
};

/* The Authorization header value ("AWS4-HMAC-SHA256 Credential=..., SignedHeaders=...,
 * Signature=...") for a request made at amz_date ("YYYYMMDDTHHMMSSZ") into out. Returns 0,
 * -EINVAL for a malformed date or request, -ENOSPC when cap is too small, -ENOMEM. */
int tfs_sigv4_authorization(const struct tfs_sigv4_request *r, const struct tfs_sigv4_key *k,
			    const char *amz_date, char *out, size_t cap);

/* Credentials for tfs_sigv4_s3_sign; session_token NULL for long-term keys. */
struct tfs_sigv4_creds {
	const char *access_key;
	const char *secret_key;
	const char *session_token;
};

/* Sign an S3 request the way the s3 backend sends it: the signed headers are Host (as given:
 * "host[:port]"), x-amz-date (from now), x-amz-content-sha256 (payload_hash),
 * x-amz-security-token (with a session token) and the extra headers. Appends every header to
 * send, Authorization last, to out as NUL-terminated "Name: value" strings. */
int tfs_sigv4_s3_sign(const char *method, const char *host, const char *path, const char *query,
		      const struct tfs_sigv4_header *extra, size_t nextra, const char *payload_hash,
		      const char *region, const struct tfs_sigv4_creds *c, time_t now,
		      struct tfs_buf *out);

/* The canonical request (the first step of signing) appended to out, for tests and debugging. */
int tfs_sigv4_canonical_request(const struct tfs_sigv4_request *r, struct tfs_buf *out);

/* Lowercase hex SHA-256 of data. */
void tfs_sigv4_sha256_hex(const void *data, size_t len, char out[65]);

/* t (seconds since the epoch) as "YYYYMMDDTHHMMSSZ". */
void tfs_sigv4_amz_date(time_t t, char out[TFS_SIGV4_DATE_LEN]);

/* Percent-encode n bytes of s with AWS's rules (A-Z a-z 0-9 - _ . ~ kept, everything else as
 * %XX in upper case; '/' kept when keep_slash), appended to out. */
int tfs_sigv4_uri_encode(struct tfs_buf *out, const char *s, size_t n, int keep_slash);

#endif
