/* SPDX-License-Identifier: MIT */
/* Unit tests for core/source.c's check of a fetched object against its MD5 ETag, over a store of
 * this file's own whose replies may have a byte flipped: an object of many ranges passes whole,
 * read once through a small window or held whole; a range damaged on the way (one in the
 * middle, or the last, fetched first for a reader from the end) fails tfs_source_verify and
 * every read after it with -EBADMSG; an ETag that is not an MD5, or a link over TLS, checks
 * nothing; and a source closed while its bytes are hashed returns. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <openssl/evp.h>

#include "source.h"

#define MiB (1u << 20)

/* An object of `len` bytes under key "obj", its ETag its MD5 (md5) or not; a reply that covers
 * byte `flip` has it flipped. */
struct fake_store {
	struct tfs_store s;
	uint8_t *obj;
	size_t len;
	char tag[40];
	int md5;
	int64_t flip; /* -1: none */
	unsigned delay_us;
};

static ssize_t fake_get_range_of(struct tfs_store *st, const char *key, uint64_t off, void *buf,
				 size_t len, struct tfs_store_version *v)
{
	struct fake_store *f = (struct fake_store *)st;

	assert_string_equal(key, "obj");
	if (f->delay_us)
		usleep(f->delay_us);
	if (off >= f->len)
		return 0;
	if (len > f->len - off)
		len = f->len - off;
	memcpy(buf, f->obj + off, len);
	if (f->flip >= 0 && (uint64_t)f->flip >= off && (uint64_t)f->flip < off + len)
		((uint8_t *)buf)[f->flip - (int64_t)off] ^= 0x20;
	v->size = (int64_t)f->len;
	snprintf(v->tag, sizeof(v->tag), "%s", f->tag);
	v->tag_md5 = f->md5;
	return (ssize_t)len;
}

static int fake_head(struct tfs_store *st, const char *key, uint64_t *size)
{
	(void)key;
	*size = ((struct fake_store *)st)->len;
	return 0;
}

static void fake_close(struct tfs_store *st)
{
	struct fake_store *f = (struct fake_store *)st;

	free(f->obj);
	free(f->s.url);
	free(f);
}

static const struct tfs_store_ops fake_ops = {
	.scheme = "fake",
	.close = fake_close,
	.get_range_of = fake_get_range_of,
	.head = fake_head,
};

/* A store holding `mib` MiB and a few bytes of a pattern. */
static struct fake_store *fake(unsigned mib, int md5, int tls, int64_t flip)
{
	struct fake_store *f = calloc(1, sizeof(*f));
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	assert_non_null(f);
	f->s.ops = &fake_ops;
	f->s.url = strdup("fake://bucket");
	f->s.tls = tls;
	f->len = (size_t)mib * MiB + 12345;
	f->obj = malloc(f->len);
	assert_non_null(f->obj);
	for (size_t i = 0; i < f->len; i++)
		f->obj[i] = (uint8_t)(i * 2654435761u >> 13);
	assert_true(EVP_Digest(f->obj, f->len, d, &n, EVP_md5(), NULL) && n == 16);
	f->tag[0] = '"';
	for (unsigned i = 0; i < 16; i++)
		sprintf(f->tag + 1 + 2 * i, "%02x", d[i]);
	strcpy(f->tag + 33, "\"");
	if (!md5)
		f->tag[5] ^= 1; /* 32 hex digits still, and not the MD5: a KMS key's */
	f->md5 = md5;
	f->flip = flip;
	return f;
}

/* Read src front to back as an importer does (releasing what a source read once was read); the
 * first read's -errno, or 0. */
static int read_all(struct tfs_source *src, const struct fake_store *f, int once)
{
	uint8_t *buf = malloc(MiB);
	int rc = 0;

	assert_non_null(buf);
	for (size_t off = 0; !rc && off < f->len; off += MiB / 4) {
		const size_t n = f->len - off < MiB / 4 ? f->len - off : MiB / 4;

		rc = tfs_source_pread(src, buf, n, off);
		if (!rc && once)
			tfs_source_release(src, off + n);
	}
	free(buf);
	return rc;
}

static char config[] = "/tmp/tfs-test-source-XXXXXX"; /* an empty configuration file */

static int setup(void **state)
{
	const int fd = mkstemp(config);

	(void)state;
	if (fd < 0)
		return -1;
	close(fd);
	setenv("TENSORFS_CONFIG", config, 1);
	setenv("TENSORFS_HTTP_PART_SIZE", "1M", 1);
	setenv("TENSORFS_HTTP_PARALLEL", "3", 1);
	setenv("TENSORFS_HTTP_WINDOW", "2M", 1);
	setenv("TMPDIR", "/tmp", 1);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return unlink(config);
}

static void test_an_object_that_arrives_whole_passes(void **state)
{
	(void)state;
	for (int once = 0; once < 2; once++) {
		struct fake_store *f = fake(9, 1, 0, -1);
		struct tfs_source *src;

		assert_int_equal(tfs_source_open_in(&f->s, "obj", once ? TFS_SOURCE_ONCE : 0, &src),
				 0);
		assert_int_equal(read_all(src, f, once), 0);
		assert_int_equal(tfs_source_verify(src), 0);
		assert_int_equal(tfs_source_whole(src), !once); /* read once: given back as read */
		tfs_source_close(src);
	}
}

static void test_a_damaged_range_fails_the_check_and_every_read_after(void **state)
{
	(void)state;
	for (int once = 0; once < 2; once++) {
		struct fake_store *f = fake(6, 1, 0, 3 * MiB + 77);
		struct tfs_source *src;
		uint8_t b;
		int rc;

		assert_int_equal(tfs_source_open_in(&f->s, "obj", once ? TFS_SOURCE_ONCE : 0, &src),
				 0);
		/* The bytes read may be the damaged ones: only the whole tells, and reads fail
		 * from the moment it has. */
		rc = read_all(src, f, once);
		assert_true(rc == 0 || rc == -EBADMSG);
		assert_int_equal(tfs_source_verify(src), -EBADMSG);
		assert_int_equal(tfs_source_pread(src, &b, 1, f->len - 1), -EBADMSG);
		tfs_source_close(src);
	}
}

static void test_the_last_range_fetched_first_is_checked_too(void **state)
{
	struct fake_store *f = fake(5, 1, 0, 5 * MiB + 12000);
	struct tfs_source *src;
	uint8_t tail[64];

	(void)state;
	assert_int_equal(tfs_source_open_in(&f->s, "obj", TFS_SOURCE_TAIL_FIRST, &src), 0);
	/* A zip's reader: its end first, then the rest. */
	assert_int_equal(tfs_source_pread(src, tail, sizeof(tail), f->len - sizeof(tail)), 0);
	assert_int_equal(tfs_source_verify(src), -EBADMSG);
	tfs_source_close(src);
}

static void test_nothing_is_checked_without_an_md5_or_over_tls(void **state)
{
	(void)state;
	for (int tls = 0; tls < 2; tls++) {
		struct fake_store *f = fake(4, tls, tls, 2 * MiB + 5); /* an MD5 over TLS */
		struct tfs_source *src;

		assert_int_equal(tfs_source_open_in(&f->s, "obj", TFS_SOURCE_ONCE, &src), 0);
		assert_int_equal(read_all(src, f, 1), 0); /* a byte wrong, which nothing tells */
		assert_int_equal(tfs_source_verify(src), 0);
		tfs_source_close(src);
	}
}

static void test_a_source_closed_while_it_is_hashed_returns(void **state)
{
	(void)state;
	for (int i = 0; i < 4; i++) {
		struct fake_store *f = fake(8, 1, 0, -1);
		struct tfs_source *src;
		uint8_t b[4096];

		f->delay_us = 2000 * (unsigned)i;
		assert_int_equal(
			tfs_source_open_in(&f->s, "obj", i & 1 ? TFS_SOURCE_ONCE : 0, &src), 0);
		assert_int_equal(tfs_source_pread(src, b, sizeof(b), (uint64_t)i * MiB), 0);
		tfs_source_close(src); /* the fetch and the hasher end; nothing leaks */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_an_object_that_arrives_whole_passes),
		cmocka_unit_test(test_a_damaged_range_fails_the_check_and_every_read_after),
		cmocka_unit_test(test_the_last_range_fetched_first_is_checked_too),
		cmocka_unit_test(test_nothing_is_checked_without_an_md5_or_over_tls),
		cmocka_unit_test(test_a_source_closed_while_it_is_hashed_returns),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
