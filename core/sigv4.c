/* SPDX-License-Identifier: MIT */
/* sigv4: AWS Signature Version 4, written out step by step (canonical request, string to sign,
 * derived key, signature) because libcurl 7.88's CURLOPT_AWS_SIGV4 does not encode the path,
 * does not sort or encode the query and does not add x-amz-content-sha256. */
#include "sigv4.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

static const char hexdig[] = "0123456789abcdef";

static void to_hex(const unsigned char *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdig[p[i] >> 4];
		out[2 * i + 1] = hexdig[p[i] & 15];
	}
	out[2 * n] = 0;
}

void tfs_sigv4_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256(data, len, md);
	to_hex(md, sizeof(md), out);
}

void tfs_sigv4_amz_date(time_t t, char out[TFS_SIGV4_DATE_LEN])
{
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, TFS_SIGV4_DATE_LEN, "%Y%m%dT%H%M%SZ", &tm);
}

static int unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

int tfs_sigv4_uri_encode(struct tfs_buf *out, const char *s, size_t n, int keep_slash)
{
	int rc = tfs_buf_reserve(out, n * 3);

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			out->data[out->len++] = c;
		} else {
			out->data[out->len++] = '%';
			out->data[out->len++] = (uint8_t) "0123456789ABCDEF"[c >> 4];
			out->data[out->len++] = (uint8_t) "0123456789ABCDEF"[c & 15];
		}
	}
	out->data[out->len] = 0;
	return 0;
}

/* Decode then encode once: the canonical form of a path or query component. */
static int canon_component(struct tfs_buf *out, const char *s, size_t n, int keep_slash)
{
	char *tmp = malloc(n + 1);
	size_t m;
	int rc;

	if (!tmp)
		return -ENOMEM;
	m = tfs_percent_decode(s, n, tmp);
	rc = tfs_sigv4_uri_encode(out, tmp, m, keep_slash);
	free(tmp);
	return rc;
}

struct qpair {
	char *name, *value; /* canonical (encoded) */
};

static int cmp_qpair(const void *a, const void *b)
{
	const struct qpair *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static int canon_query(struct tfs_buf *out, const char *q)
{
	struct qpair *v = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;

	if (!q || !*q)
		return 0;
	for (const char *p = q; *p;) {
		const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p), *eq;
		struct tfs_buf nb = { 0 }, vb = { 0 };

		eq = memchr(p, '=', (size_t)(end - p));
		if (end == p)
			goto next; /* "a&&b": an empty pair is no parameter */
		rc = TFS_GROW(v, &cap, n + 1);
		if (rc)
			goto out;
		rc = canon_component(&nb, p, (size_t)((eq ? eq : end) - p), 0);
		if (!rc && eq)
			rc = canon_component(&vb, eq + 1, (size_t)(end - eq - 1), 0);
		if (!rc)
			rc = tfs_buf_append(&nb, "", 0) ?: tfs_buf_append(&vb, "", 0);
		if (rc) {
			tfs_buf_free(&nb);
			tfs_buf_free(&vb);
			goto out;
		}
		v[n].name = (char *)tfs_buf_take(&nb, NULL);
		v[n].value = (char *)tfs_buf_take(&vb, NULL);
		n++;
	next:
		p = amp ? amp + 1 : end;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_qpair);
	for (size_t i = 0; i < n && !rc; i++)
		rc = tfs_buf_printf(out, "%s%s=%s", i ? "&" : "", v[i].name, v[i].value);
out:
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
	return rc;
}

struct hdr {
	char *name;	   /* lower case */
	const char *value; /* as given */
	size_t order;
};

static int cmp_hdr(const void *a, const void *b)
{
	const struct hdr *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	if (c)
		return c;
	return x->order < y->order ? -1 : x->order > y->order;
}

/* A header value with leading and trailing blanks removed and inner runs collapsed to one. */
static int append_trimmed(struct tfs_buf *out, const char *v)
{
	int space = 0, any = 0, rc = 0;

	for (; *v && !rc; v++) {
		if (*v == ' ' || *v == '\t' || *v == '\n' || *v == '\r') {
			space = any;
			continue;
		}
		if (space)
			rc = tfs_buf_append(out, " ", 1);
		space = 0;
		any = 1;
		if (!rc)
			rc = tfs_buf_append(out, v, 1);
	}
	return rc;
}

/* Canonical headers (out) and the signed-header list (signed_list). */
static int canon_headers(const struct tfs_sigv4_request *r, struct tfs_buf *out,
			 struct tfs_buf *signed_list)
{
	struct hdr *h = calloc(r->nheaders ? r->nheaders : 1, sizeof(*h));
	int rc = 0;

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < r->nheaders; i++) {
		h[i].name = strdup(r->headers[i].name);
		if (!h[i].name) {
			rc = -ENOMEM;
			goto out;
		}
		for (char *p = h[i].name; *p; p++)
			*p = (char)tolower((unsigned char)*p);
		h[i].value = r->headers[i].value ? r->headers[i].value : "";
		h[i].order = i;
	}
	if (r->nheaders > 1)
		qsort(h, r->nheaders, sizeof(*h), cmp_hdr);
	for (size_t i = 0; i < r->nheaders && !rc; i++) {
		int first = i == 0 || strcmp(h[i].name, h[i - 1].name);
		int last = i + 1 == r->nheaders || strcmp(h[i].name, h[i + 1].name);

		if (first) {
			rc = tfs_buf_printf(out, "%s:", h[i].name);
			if (!rc)
				rc = tfs_buf_printf(signed_list, "%s%s",
						    signed_list->len ? ";" : "", h[i].name);
		} else {
			rc = tfs_buf_append(out, ",", 1);
		}
		if (!rc)
			rc = append_trimmed(out, h[i].value);
		if (!rc && last)
			rc = tfs_buf_append(out, "\n", 1);
	}
out:
	for (size_t i = 0; i < r->nheaders; i++)
		free(h[i].name);
	free(h);
	return rc;
}

static int canonical(const struct tfs_sigv4_request *r, struct tfs_buf *out,
		     struct tfs_buf *signed_list)
{
	const char *path = r->path && *r->path ? r->path : "/";
	int rc;

	if (!r->method || !r->payload_hash)
		return -EINVAL;
	rc = tfs_buf_printf(out, "%s\n", r->method);
	if (!rc)
		rc = canon_component(out, path, strlen(path), 1);
	if (!rc)
		rc = tfs_buf_append(out, "\n", 1);
	if (!rc)
		rc = canon_query(out, r->query);
	if (!rc)
		rc = tfs_buf_append(out, "\n", 1);
	if (!rc)
		rc = canon_headers(r, out, signed_list);
	if (!rc)
		rc = tfs_buf_printf(out, "\n%s\n%s",
				    signed_list->data ? (char *)signed_list->data : "",
				    r->payload_hash);
	return rc;
}

int tfs_sigv4_canonical_request(const struct tfs_sigv4_request *r, struct tfs_buf *out)
{
	struct tfs_buf sl = { 0 };
	int rc = canonical(r, out, &sl);

	tfs_buf_free(&sl);
	return rc;
}

static int hmac(const void *key, size_t klen, const void *msg, size_t mlen,
		unsigned char out[SHA256_DIGEST_LENGTH])
{
	unsigned int n = SHA256_DIGEST_LENGTH;

	if (!HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &n))
		return -EIO;
	return 0;
}

static int date_ok(const char *d)
{
	if (!d || strlen(d) != TFS_SIGV4_DATE_LEN - 1 || d[8] != 'T' || d[15] != 'Z')
		return 0;
	for (int i = 0; i < 15; i++)
		if (i != 8 && !isdigit((unsigned char)d[i]))
			return 0;
	return 1;
}

int tfs_sigv4_authorization(const struct tfs_sigv4_request *r, const struct tfs_sigv4_key *k,
			    const char *amz_date, char *out, size_t cap)
{
	struct tfs_buf creq = { 0 }, sl = { 0 }, sts = { 0 };
	unsigned char key[SHA256_DIGEST_LENGTH], sig[SHA256_DIGEST_LENGTH];
	char creq_hash[65], sig_hex[65], date8[9], *kseed = NULL;
	size_t slen;
	int rc, n;

	if (!date_ok(amz_date) || !k->access_key || !k->secret_key || !k->region || !k->service)
		return -EINVAL;
	memcpy(date8, amz_date, 8);
	date8[8] = 0;
	rc = canonical(r, &creq, &sl);
	if (rc)
		goto out;
	tfs_sigv4_sha256_hex(creq.data, creq.len, creq_hash);
	rc = tfs_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amz_date,
			    date8, k->region, k->service, creq_hash);
	if (rc)
		goto out;
	slen = strlen(k->secret_key);
	kseed = malloc(slen + 5);
	if (!kseed) {
		rc = -ENOMEM;
		goto out;
	}
	memcpy(kseed, "AWS4", 4);
	memcpy(kseed + 4, k->secret_key, slen + 1);
	rc = hmac(kseed, slen + 4, date8, 8, key);
	if (!rc)
		rc = hmac(key, sizeof(key), k->region, strlen(k->region), key);
	if (!rc)
		rc = hmac(key, sizeof(key), k->service, strlen(k->service), key);
	if (!rc)
		rc = hmac(key, sizeof(key), "aws4_request", 12, key);
	if (!rc)
		rc = hmac(key, sizeof(key), sts.data, sts.len, sig);
	if (rc)
		goto out;
	to_hex(sig, sizeof(sig), sig_hex);
	n = snprintf(out, cap,
		     "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
		     "Signature=%s",
		     k->access_key, date8, k->region, k->service, sl.data ? (char *)sl.data : "",
		     sig_hex);
	if (n < 0 || (size_t)n >= cap)
		rc = -ENOSPC;
out:
	if (kseed) {
		OPENSSL_cleanse(kseed, slen + 4);
		free(kseed);
	}
	OPENSSL_cleanse(key, sizeof(key));
	tfs_buf_free(&creq);
	tfs_buf_free(&sl);
	tfs_buf_free(&sts);
	return rc;
}

int tfs_sigv4_s3_sign(const char *method, const char *host, const char *path, const char *query,
		      const struct tfs_sigv4_header *extra, size_t nextra, const char *payload_hash,
		      const char *region, const struct tfs_sigv4_creds *c, time_t now,
		      struct tfs_buf *out)
{
	struct tfs_sigv4_key k = { c->access_key, c->secret_key, region, "s3" };
	struct tfs_sigv4_header *h = calloc(nextra + 4, sizeof(*h));
	char date[TFS_SIGV4_DATE_LEN], auth[1024];
	size_t n = 0;
	int rc;

	if (!h)
		return -ENOMEM;
	tfs_sigv4_amz_date(now, date);
	h[n++] = (struct tfs_sigv4_header){ "Host", host };
	h[n++] = (struct tfs_sigv4_header){ "x-amz-date", date };
	h[n++] = (struct tfs_sigv4_header){ "x-amz-content-sha256", payload_hash };
	if (c->session_token && *c->session_token)
		h[n++] = (struct tfs_sigv4_header){ "x-amz-security-token", c->session_token };
	for (size_t i = 0; i < nextra; i++)
		h[n++] = extra[i];
	rc = tfs_sigv4_authorization(
		&(struct tfs_sigv4_request){ method, path, query, h, n, payload_hash }, &k, date,
		auth, sizeof(auth));
	for (size_t i = 0; i < n && !rc; i++) {
		rc = tfs_buf_printf(out, "%s: %s", h[i].name, h[i].value);
		if (!rc)
			rc = tfs_buf_append(out, "", 1);
	}
	if (!rc)
		rc = tfs_buf_printf(out, "Authorization: %s", auth);
	if (!rc)
		rc = tfs_buf_append(out, "", 1);
	free(h);
	return rc;
}
