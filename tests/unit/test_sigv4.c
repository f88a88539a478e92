/* SPDX-License-Identifier: MIT */
/* Unit tests for core/sigv4 against AWS's published examples: the SigV4 test suite (service
 * "service", 2015-08-30) and the four S3 header-authorisation examples (examplebucket). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sigv4.h"
#include "util.h"

#define SUITE_DATE "20150830T123600Z"
#define S3_DATE "20130524T000000Z"

static const struct tfs_sigv4_key suite_key = {
	.access_key = "AKIDEXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
	.region = "us-east-1",
	.service = "service",
};

static const struct tfs_sigv4_key s3_key = {
	.access_key = "AKIAIOSFODNN7EXAMPLE",
	.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
	.region = "us-east-1",
	.service = "s3",
};

/* The hash of the bodies the suite signs: empty, or "Param1=value1". */
static const char *body_hash(const char *body)
{
	static char h[65];

	tfs_sigv4_sha256_hex(body, strlen(body), h);
	return h;
}

struct vec {
	const char *name, *method, *path, *query, *body;
	struct tfs_sigv4_header h[6];
	size_t nh;
	const char *signed_headers, *signature;
};

#define HOST                                    \
	{                                       \
		"Host", "example.amazonaws.com" \
	}
#define XDATE                            \
	{                                \
		"X-Amz-Date", SUITE_DATE \
	}

static const struct vec suite[] = {
	{ "get-vanilla",
	  "GET",
	  "/",
	  NULL,
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31" },
	{ "get-vanilla-query-order-key-case",
	  "GET",
	  "/",
	  "Param2=value2&Param1=value1",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500" },
	{ "get-vanilla-empty-query-key",
	  "GET",
	  "/",
	  "Param1=value1",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb" },
	{ "get-vanilla-query-unreserved",
	  "GET",
	  "/",
	  "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz="
	  "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197" },
	{ "get-vanilla-utf8-query",
	  "GET",
	  "/",
	  "%E1%88%B4=bar",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04" },
	{ "get-unreserved",
	  "GET",
	  "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
	  NULL,
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f" },
	/* The raw path "/\u1234" and its wire form must sign alike. */
	{ "get-utf8",
	  "GET",
	  "/\xe1\x88\xb4",
	  NULL,
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85" },
	{ "get-utf8 (encoded)",
	  "GET",
	  "/%E1%88%B4",
	  NULL,
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85" },
	{ "get-header-key-duplicate",
	  "GET",
	  "/",
	  NULL,
	  "",
	  { HOST,
	    { "My-Header1", "value2" },
	    { "My-Header1", "value2" },
	    { "My-Header1", "value1" },
	    XDATE },
	  5,
	  "host;my-header1;x-amz-date",
	  "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea" },
	{ "get-header-value-order",
	  "GET",
	  "/",
	  NULL,
	  "",
	  { HOST, { "My-Header1", "value4,value1,value3,value2" }, XDATE },
	  3,
	  "host;my-header1;x-amz-date",
	  "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01" },
	{ "get-header-value-trim",
	  "GET",
	  "/",
	  NULL,
	  "",
	  { HOST, { "My-Header1", " value1" }, { "My-Header2", " \"a   b   c\"" }, XDATE },
	  4,
	  "host;my-header1;my-header2;x-amz-date",
	  "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736" },
	{ "post-vanilla",
	  "POST",
	  "/",
	  NULL,
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b" },
	{ "post-header-key-case",
	  "POST",
	  "/",
	  NULL,
	  "",
	  { { "HOST", "example.amazonaws.com" }, { "x-amz-DATE", SUITE_DATE } },
	  2,
	  "host;x-amz-date",
	  "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b" },
	{ "post-header-value-case",
	  "POST",
	  "/",
	  NULL,
	  "",
	  { HOST, { "My-Header1", "VALUE1" }, XDATE },
	  3,
	  "host;my-header1;x-amz-date",
	  "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d" },
	{ "post-vanilla-query",
	  "POST",
	  "/",
	  "Param1=value1",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11" },
	{ "post-vanilla-query-nonunreserved",
	  "POST",
	  "/",
	  "%40%23%24%25%5E=&%2B=%2F%2C%3F%3E%3C%60%22%3B%3A%5C%7C%5D%5B%7B%7D",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e" },
	{ "post-vanilla-query-space",
	  "POST",
	  "/",
	  "p=",
	  "",
	  { HOST, XDATE },
	  2,
	  "host;x-amz-date",
	  "e71688addb58a26418614085fb730ba3faa623b461c17f48f2fbdb9361b94a9b" },
	{ "post-x-www-form-urlencoded",
	  "POST",
	  "/",
	  NULL,
	  "Param1=value1",
	  { { "Content-Type", "application/x-www-form-urlencoded" }, HOST, XDATE },
	  3,
	  "content-type;host;x-amz-date",
	  "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a" },
	{ "post-x-www-form-urlencoded-parameters",
	  "POST",
	  "/",
	  NULL,
	  "Param1=value1",
	  { { "Content-Type", "application/x-www-form-urlencoded; charset=utf8" }, HOST, XDATE },
	  3,
	  "content-type;host;x-amz-date",
	  "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe" },
};

static void check_auth(const char *name, const struct tfs_sigv4_request *r,
		       const struct tfs_sigv4_key *k, const char *date, const char *scope,
		       const char *signed_headers, const char *signature)
{
	char auth[512], want[512];

	assert_int_equal(tfs_sigv4_authorization(r, k, date, auth, sizeof(auth)), 0);
	snprintf(want, sizeof(want),
		 "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s", k->access_key,
		 scope, signed_headers, signature);
	if (strcmp(auth, want)) {
		struct tfs_buf c = { 0 };

		tfs_sigv4_canonical_request(r, &c);
		fail_msg("%s:\n got  %s\n want %s\ncanonical request:\n%s", name, auth, want,
			 (char *)c.data);
	}
}

static void test_suite_vectors(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(suite) / sizeof(suite[0]); i++) {
		const struct vec *v = &suite[i];
		struct tfs_sigv4_request r = {
			.method = v->method,
			.path = v->path,
			.query = v->query,
			.headers = v->h,
			.nheaders = v->nh,
			.payload_hash = body_hash(v->body),
		};

		check_auth(v->name, &r, &suite_key, SUITE_DATE,
			   "20150830/us-east-1/service/aws4_request", v->signed_headers,
			   v->signature);
	}
}

#define S3HOST                                           \
	{                                                \
		"Host", "examplebucket.s3.amazonaws.com" \
	}
#define S3DATE                        \
	{                             \
		"x-amz-date", S3_DATE \
	}
#define S3EMPTY                                                \
	{                                                      \
		"x-amz-content-sha256", TFS_SIGV4_EMPTY_SHA256 \
	}

static void test_s3_get_object_range(void **state)
{
	const struct tfs_sigv4_header h[] = {
		S3HOST,
		{ "Range", "bytes=0-9" },
		S3EMPTY,
		S3DATE,
	};
	struct tfs_sigv4_request r = { "GET", "/test.txt", NULL, h, 4, TFS_SIGV4_EMPTY_SHA256 };
	struct tfs_buf c = { 0 };

	(void)state;
	check_auth("GET /test.txt", &r, &s3_key, S3_DATE, "20130524/us-east-1/s3/aws4_request",
		   "host;range;x-amz-content-sha256;x-amz-date",
		   "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	/* The canonical request is exactly the documented one. */
	assert_int_equal(tfs_sigv4_canonical_request(&r, &c), 0);
	assert_string_equal((char *)c.data,
			    "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
			    "range:bytes=0-9\nx-amz-content-sha256:" TFS_SIGV4_EMPTY_SHA256
			    "\nx-amz-date:20130524T000000Z\n\n"
			    "host;range;x-amz-content-sha256;x-amz-date\n" TFS_SIGV4_EMPTY_SHA256);
	tfs_buf_free(&c);
}

static void test_s3_put_object(void **state)
{
	const char *body = "Welcome to Amazon S3.";
	char hash[65];
	const struct tfs_sigv4_header h[] = {
		{ "Date", "Fri, 24 May 2013 00:00:00 GMT" },
		S3HOST,
		S3DATE,
		{ "x-amz-storage-class", "REDUCED_REDUNDANCY" },
		{ "x-amz-content-sha256", hash },
	};
	struct tfs_sigv4_request r = { "PUT", "/test$file.text", NULL, h, 5, hash };

	(void)state;
	tfs_sigv4_sha256_hex(body, strlen(body), hash);
	assert_string_equal(hash,
			    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	check_auth("PUT /test$file.text", &r, &s3_key, S3_DATE,
		   "20130524/us-east-1/s3/aws4_request",
		   "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
		   "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
	/* Sent encoded, it signs the same. */
	r.path = "/test%24file.text";
	check_auth("PUT /test%24file.text", &r, &s3_key, S3_DATE,
		   "20130524/us-east-1/s3/aws4_request",
		   "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class",
		   "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_s3_get_lifecycle_and_list(void **state)
{
	const struct tfs_sigv4_header h[] = { S3HOST, S3EMPTY, S3DATE };
	struct tfs_sigv4_request r = { "GET", "/", "lifecycle", h, 3, TFS_SIGV4_EMPTY_SHA256 };

	(void)state;
	check_auth("GET ?lifecycle", &r, &s3_key, S3_DATE, "20130524/us-east-1/s3/aws4_request",
		   "host;x-amz-content-sha256;x-amz-date",
		   "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
	/* Parameter order on the wire does not matter. */
	r.query = "prefix=J&max-keys=2";
	check_auth("GET ?max-keys=2&prefix=J", &r, &s3_key, S3_DATE,
		   "20130524/us-east-1/s3/aws4_request", "host;x-amz-content-sha256;x-amz-date",
		   "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void test_encode_and_errors(void **state)
{
	struct tfs_buf b = { 0 };
	struct tfs_sigv4_request r = { "GET", "/", NULL, NULL, 0, TFS_SIGV4_EMPTY_SHA256 };
	char out[16], date[TFS_SIGV4_DATE_LEN];

	(void)state;
	assert_int_equal(tfs_sigv4_uri_encode(&b, "a b/c~d+e=", 10, 1), 0);
	assert_string_equal((char *)b.data, "a%20b/c~d%2Be%3D");
	b.len = 0;
	assert_int_equal(tfs_sigv4_uri_encode(&b, "a/b", 3, 0), 0);
	assert_string_equal((char *)b.data, "a%2Fb");
	tfs_buf_free(&b);
	assert_int_equal(tfs_sigv4_authorization(&r, &s3_key, "2013-05-24", out, sizeof(out)),
			 -EINVAL);
	assert_int_equal(tfs_sigv4_authorization(&r, &s3_key, S3_DATE, out, sizeof(out)), -ENOSPC);
	tfs_sigv4_amz_date(1369353600, date); /* 2013-05-24 00:00:00 UTC */
	assert_string_equal(date, S3_DATE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_suite_vectors),
		cmocka_unit_test(test_s3_get_object_range),
		cmocka_unit_test(test_s3_put_object),
		cmocka_unit_test(test_s3_get_lifecycle_and_list),
		cmocka_unit_test(test_encode_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
