/* SPDX-License-Identifier: MIT */
/* s3parse: S3's XML replies read: elements, listing pages, upload pages, error codes. */
#include "s3parse.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The text of the first <tag>...</tag> in [p, end), XML entities decoded, into out. */
const char *tfs_xml_get(const char *p, const char *end, const char *tag, struct tfs_buf *out)
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

static int is_truncated(const char *body, const char *end)
{
	return memmem(body, (size_t)(end - body), "<IsTruncated>true</IsTruncated>", 31) != NULL;
}

int64_t tfs_iso8601_parse(const char *v)
{
	struct tm tm = { 0 };
	const char *end = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm);

	return end ? (int64_t)timegm(&tm) : -1;
}

/* A name directly under the prefix: not empty, no '/', not hidden, no NUL inside. */
static int direct_child(const struct tfs_buf *v, const char *fk, size_t plen)
{
	const char *name = (const char *)v->data + plen;

	return v->len > plen && !strncmp((const char *)v->data, fk, plen) &&
	       strlen(name) == v->len - plen && !strchr(name, '/') && name[0] != '.';
}

int tfs_s3_listing_parse(const char *body, const char *end, const char *fk, size_t plen,
			 tfs_store_list_fn fn, void *arg, struct tfs_buf *v, struct tfs_buf *token,
			 int *more)
{
	const char *p;
	int rc = 0;

	for (p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<Contents>", 10);

		if (!blk || !(p = tfs_xml_get(blk, end, "Key", v)))
			break;
		if (direct_child(v, fk, plen))
			rc = fn(arg, (char *)v->data + plen, 0);
	}
	for (p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<CommonPrefixes>", 16);

		if (!blk || !(p = tfs_xml_get(blk, end, "Prefix", v)))
			break;
		if (v->len > plen + 1 && v->data[v->len - 1] == '/') {
			v->data[--v->len] = 0;
			if (direct_child(v, fk, plen))
				rc = fn(arg, (char *)v->data + plen, 1);
		}
	}
	*more = is_truncated(body, end);
	if (!rc && *more && !tfs_xml_get(body, end, "NextContinuationToken", token))
		rc = -EPROTO;
	return rc;
}

int tfs_s3_uploads_parse(const char *body, const char *end, tfs_s3_upload_fn fn, void *arg,
			 struct tfs_buf *scratch, struct tfs_buf *key_marker,
			 struct tfs_buf *upload_marker, int *more)
{
	struct tfs_buf *key = &scratch[0], *id = &scratch[1], *t = &scratch[2];
	int rc = 0;

	for (const char *p = body; p && !rc;) {
		const char *blk = memmem(p, (size_t)(end - p), "<Upload>", 8);
		const char *bend = blk ? memmem(blk, (size_t)(end - blk), "</Upload>", 9) : NULL;

		if (!bend)
			break;
		p = bend + 9;
		if (!tfs_xml_get(blk, bend, "Key", key) ||
		    !tfs_xml_get(blk, bend, "UploadId", id) ||
		    !tfs_xml_get(blk, bend, "Initiated", t) ||
		    strlen((char *)key->data) != key->len)
			continue;
		rc = fn(arg, (char *)key->data, id, tfs_iso8601_parse((char *)t->data));
	}
	*more = is_truncated(body, end);
	if (!rc && *more &&
	    (!tfs_xml_get(body, end, "NextKeyMarker", key_marker) ||
	     !tfs_xml_get(body, end, "NextUploadIdMarker", upload_marker)))
		rc = -EPROTO;
	return rc;
}

void tfs_s3_error_code(const struct tfs_buf *body, char *out, size_t cap)
{
	const char *b = body && body->data ? (const char *)body->data : NULL;
	const char *p = b ? memmem(b, body->len, "<Code>", 6) : NULL;
	const char *e = p ? memmem(p, body->len - (size_t)(p - b), "</Code>", 7) : NULL;
	size_t n = e ? (size_t)(e - p - 6) : 0;

	out[0] = 0;
	if (!e || !n || n + 4 > cap)
		return;
	for (size_t i = 0; i < n; i++) {
		const char c = p[6 + i];

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.'))
			return;
	}
	snprintf(out, cap, " (%.*s)", (int)n, p + 6);
}
