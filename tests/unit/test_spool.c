/* SPDX-License-Identifier: MIT */
/* Unit tests for core/spool.c: a spooling buffer's bytes read back exactly in memory and past
 * its hold (in an unlinked file in $TMPDIR, nothing named left there), appended whole or
 * written in place; a zeroed one freed; no spool directory: held in memory, said once, up to a
 * quarter of memory; a spool file's room reserved, or refused when there is none. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "spool.h"
#include "tmpdir_fixture.h"

static char spooldir[128];

static int setup(void **state)
{
	(void)state;
	if (tmpdir_make("spool"))
		return -1;
	snprintf(spooldir, sizeof(spooldir), "%s/spool", tmpdir);
	if (mkdir(spooldir, 0700))
		return -1;
	return setenv("TMPDIR", spooldir, 1);
}

static int teardown(void **state)
{
	(void)state;
	unsetenv("TMPDIR");
	rmdir(spooldir);
	return tmpdir_remove();
}

/* Entries in the spool directory (. and .. aside). */
static int spool_entries(void)
{
	DIR *d = opendir(spooldir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static uint8_t byte_at(uint64_t i)
{
	return (uint8_t)(i * 2654435761u >> 13);
}

/* n bytes in pieces of `piece`, alternately appended and written in place. */
static void fill(struct tfs_spool *sp, uint64_t n, size_t piece)
{
	uint64_t at = 0;

	for (unsigned k = 0; at < n; k++) {
		const size_t len = n - at < piece ? (size_t)(n - at) : piece;
		uint8_t *p;

		if (k % 2) {
			void *room;

			assert_int_equal(tfs_spool_room(sp, len + 7, &room), 0);
			p = room;
			for (size_t i = 0; i < len; i++)
				p[i] = byte_at(at + i);
			assert_int_equal(tfs_spool_commit(sp, len), 0); /* less than the room */
		} else {
			p = malloc(len);
			assert_non_null(p);
			for (size_t i = 0; i < len; i++)
				p[i] = byte_at(at + i);
			assert_int_equal(tfs_spool_append(sp, p, len), 0);
			free(p);
		}
		at += len;
	}
	assert_int_equal(sp->len, n);
}

static void check(struct tfs_spool *sp, uint64_t n)
{
	const uint8_t *data;

	assert_int_equal(tfs_spool_view(sp, &data), 0);
	assert_non_null(data);
	for (uint64_t i = 0; i < n; i++) {
		if (data[i] != byte_at(i))
			fail_msg("byte %llu differs", (unsigned long long)i);
		if (i % (1u << 20) == 0)
			tfs_spool_done(sp, data + i); /* pages read leave; the rest reads on */
	}
}

static void test_in_memory(void **state)
{
	struct tfs_spool sp;

	(void)state;
	tfs_spool_init(&sp, 1u << 20);
	fill(&sp, 1000000, 4096);
	assert_false(sp.in_file);
	check(&sp, 1000000);
	tfs_spool_free(&sp);
	assert_int_equal(spool_entries(), 0);
}

static void test_past_the_hold_in_a_file(void **state)
{
	struct tfs_spool sp;
	struct stat st;

	(void)state;
	tfs_spool_init(&sp, 1u << 20);
	fill(&sp, 40u << 20, 300001);
	assert_true(sp.in_file);
	assert_null(sp.mem); /* what was in memory moved to the file */
	assert_int_equal(fstat(sp.fd, &st), 0);
	assert_int_equal(st.st_nlink, 0); /* unlinked */
	assert_int_equal(st.st_size, 40u << 20);
	assert_int_equal(spool_entries(), 0);
	check(&sp, 40u << 20);
	tfs_spool_free(&sp);
}

static void test_zeroed_and_empty(void **state)
{
	struct tfs_spool sp;
	const uint8_t *data = (const uint8_t *)"x";

	(void)state;
	memset(&sp, 0, sizeof(sp));
	tfs_spool_free(&sp); /* a zeroed one holds nothing: descriptor 0 is not closed */
	assert_int_not_equal(fcntl(0, F_GETFD), -1);
	tfs_spool_init(&sp, 0);
	assert_int_equal(tfs_spool_view(&sp, &data), 0);
	assert_null(data);
	tfs_spool_free(&sp);
	/* Room for nothing, asked of an empty one (an audio frame that resamples to no sample), is
	 * somewhere: not NULL plus 0, undefined in C. */
	{
		void *to = NULL;

		tfs_spool_init(&sp, 1u << 20);
		assert_int_equal(tfs_spool_room(&sp, 0, &to), 0);
		assert_non_null(to);
		assert_int_equal(tfs_spool_commit(&sp, 0), 0);
		tfs_spool_free(&sp);
	}
}

static void test_no_spool_dir_holds_in_memory(void **state)
{
	char none[160];
	struct tfs_spool sp;

	(void)state;
	snprintf(none, sizeof(none), "%s/none", tmpdir);
	setenv("TMPDIR", none, 1);
	tfs_spool_init(&sp, 4096);
	fill(&sp, 3u << 20, 65536);
	assert_false(sp.in_file);
	assert_true(sp.no_file);
	assert_true(sp.hold >= (3u << 20)); /* a quarter of memory */
	{
		const uint64_t hold = sp.hold;
		void *room;

		sp.hold = sp.len + 10; /* as if memory's quarter were reached: refused, kept */
		assert_int_equal(tfs_spool_append(&sp, "0123456789a", 11), -ENOSPC);
		assert_int_equal(tfs_spool_room(&sp, 11, &room), -ENOSPC);
		assert_int_equal(sp.len, 3u << 20);
		sp.hold = hold;
	}
	check(&sp, 3u << 20);
	tfs_spool_free(&sp);
	assert_true(log_contains("cannot spool decoded data to disk"));
	assert_true(log_contains(none));
	setenv("TMPDIR", spooldir, 1);
}

static void test_spool_file_reserves_its_room(void **state)
{
	char why[256] = "";
	struct stat st;
	int fd;

	(void)state;
	fd = tfs_spool_file(5u << 20, why, sizeof(why));
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 5u << 20);
	assert_true(st.st_blocks * 512 >= (5u << 20));
	close(fd);
	/* more than any disk holds: refused, saying so */
	fd = tfs_spool_file(UINT64_MAX / 4, why, sizeof(why));
	assert_true(fd < 0);
	assert_non_null(strstr(why, "no room for"));
	assert_non_null(strstr(why, spooldir));
	assert_int_equal(spool_entries(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_memory),
		cmocka_unit_test(test_past_the_hold_in_a_file),
		cmocka_unit_test(test_zeroed_and_empty),
		cmocka_unit_test(test_no_spool_dir_holds_in_memory),
		cmocka_unit_test(test_spool_file_reserves_its_room),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
