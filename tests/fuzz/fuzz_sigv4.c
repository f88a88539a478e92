/* SPDX-License-Identifier: MIT */
/* Fuzz target for SigV4 canonicalisation of untrusted paths, queries and headers. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "sigv4.h"

#define MAX_HEADERS 8

/* Field i of the input: fields are separated by NUL bytes; missing ones are empty. */
static const char *field(char **fields, size_t nfields, size_t i)
{
	return i < nfields ? fields[i] : "";
}

/* Line k (0-based) of a canonical request, copied out; NULL if it has fewer lines. */
static char *line_of(const struct tfs_buf *b, unsigned k)
{
	const char *p = (const char *)b->data, *end = p + b->len, *nl;

	for (; k; k--) {
		nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			return NULL;
		p = nl + 1;
	}
	nl = memchr(p, '\n', (size_t)(end - p));
	return strndup(p, (size_t)((nl ? nl : end) - p));
}

static int only_canonical_chars(const char *s, int allow_slash, int allow_query_seps)
{
	for (; *s; s++) {
		const unsigned char c = (unsigned char)*s;

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || c == '%')
			continue;
		if ((allow_slash && c == '/') || (allow_query_seps && (c == '&' || c == '=')))
			continue;
		return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_sigv4_header hdrs[MAX_HEADERS];
	char *fields[2 + 2 * MAX_HEADERS], *copy, *path = NULL, *query = NULL, *path2 = NULL,
						  *query2 = NULL;
	struct tfs_buf creq = { 0 }, creq2 = { 0 };
	size_t nfields = 0, nh = 0;
	char auth[1024];
	int rc;

	/* path \0 query \0 name \0 value \0 name \0 value ... */
	copy = malloc(len + 1);
	if (!copy)
		return 0;
	memcpy(copy, data, len);
	copy[len] = 0;
	for (char *p = copy; nfields < sizeof(fields) / sizeof(fields[0]);) {
		fields[nfields++] = p;
		p += strlen(p);
		if (p == copy + len)
			break;
		p++;
	}
	for (size_t i = 2; i + 1 < nfields && nh < MAX_HEADERS; i += 2)
		hdrs[nh++] = (struct tfs_sigv4_header){ fields[i], fields[i + 1] };

	struct tfs_sigv4_request r = {
		.method = "GET",
		.path = field(fields, nfields, 0),
		.query = field(fields, nfields, 1),
		.headers = hdrs,
		.nheaders = nh,
		.payload_hash = TFS_SIGV4_UNSIGNED,
	};
	rc = tfs_sigv4_canonical_request(&r, &creq);
	FUZZ_CHECK(rc == 0);
	FUZZ_CHECK(creq.len >= 4 && !memcmp(creq.data, "GET\n", 4));

	/* Line 1 is the canonical path, line 2 the canonical query: only unreserved characters
	 * and %XX escapes (plus '/', and '&' and '=' between query pairs). */
	path = line_of(&creq, 1);
	query = line_of(&creq, 2);
	FUZZ_CHECK(path && query);
	FUZZ_CHECK(path[0] != 0);
	FUZZ_CHECK(only_canonical_chars(path, 1, 0));
	FUZZ_CHECK(only_canonical_chars(query, 0, 1));

	/* Canonicalisation is idempotent: the canonical path and query sign the same. */
	r.path = path;
	r.query = query;
	r.nheaders = 0;
	FUZZ_CHECK(tfs_sigv4_canonical_request(&r, &creq2) == 0);
	path2 = line_of(&creq2, 1);
	query2 = line_of(&creq2, 2);
	FUZZ_CHECK(path2 && query2);
	FUZZ_CHECK(!strcmp(path, path2));
	FUZZ_CHECK(!strcmp(query, query2));

	/* Signing the whole request works or says why, never overflows out. */
	r.path = field(fields, nfields, 0);
	r.query = field(fields, nfields, 1);
	r.nheaders = nh;
	rc = tfs_sigv4_authorization(&r,
				     &(struct tfs_sigv4_key){ .access_key = "AKIDEXAMPLE",
							      .secret_key = "secret",
							      .region = "us-east-1",
							      .service = "s3" },
				     "20240101T000000Z", auth, sizeof(auth));
	FUZZ_CHECK(rc == 0 || rc == -ENOSPC);
	FUZZ_CHECK(memchr(auth, 0, sizeof(auth)));
	if (!rc)
		FUZZ_CHECK(!strncmp(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/", 48));

	free(path);
	free(query);
	free(path2);
	free(query2);
	tfs_buf_free(&creq);
	tfs_buf_free(&creq2);
	free(copy);
	return 0;
}
