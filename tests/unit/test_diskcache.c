/* SPDX-License-Identifier: MIT */
/* Unit tests for core/diskcache: hits, remounts, damage, budget, bypass and concurrency. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "diskcache.h"
#include "format.h"
#include "object.h"
#include "store.h"
#include "util.h"
#include "tmpdir_fixture.h"

static char tmpfs_mnt[300]; /* non-empty while a test's tmpfs may be mounted */

/* A file:// lake with dataset "ds", and where its disk cache goes. */
struct lake {
	char path[256];
	char url[300];
	char cache[300];
};

/* A stored object and its exact stored bytes. */
struct obj {
	struct tfs_id id;
	char hex[TFS_ID_HEX];
	char key[TFS_KEY_MAX];
	struct tfs_buf bytes;
};

/* --- helpers ---------------------------------------------------------------------------------- */

static void fill_random(uint8_t *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		p[i] = (uint8_t)((x * 0x2545F4914F6CDD1Dull) >> 56);
	}
}

static void make_lake(const char *name, struct lake *l)
{
	struct tfs_store *s;

	snprintf(l->path, sizeof(l->path), "%s/%s", tmpdir, name);
	snprintf(l->url, sizeof(l->url), "file://%s", l->path);
	snprintf(l->cache, sizeof(l->cache), "%s/%s-cache", tmpdir, name);
	assert_int_equal(tfs_store_open(l->url, TFS_STORE_CREATE, &s), 0);
	assert_int_equal(tfs_dataset_create(s, "ds"), 0);
	tfs_store_close(s);
}

/* Store a raw-coded chunk object of raw_len pseudo-random bytes (stored size raw_len + 48). */
static void put_obj(const struct lake *l, uint64_t seed, size_t raw_len, struct obj *o)
{
	uint8_t *raw = malloc(raw_len ? raw_len : 1);
	struct tfs_store *s;
	struct tfs_id id;

	assert_non_null(raw);
	memset(o, 0, sizeof(*o));
	fill_random(raw, raw_len, seed);
	assert_int_equal(
		tfs_object_encode(TFS_OBJ_CHUNK, TFS_CODEC_RAW, 0, raw, raw_len, &o->bytes), 0);
	free(raw);
	assert_int_equal(o->bytes.len, raw_len + TFS_OBJ_HEADER_SIZE);
	assert_int_equal(tfs_store_open(l->url, 0, &s), 0);
	assert_int_equal(tfs_object_put_encoded(s, "ds", o->bytes.data, o->bytes.len, &id), 0);
	tfs_store_close(s);
	o->id = id;
	tfs_id_hex(&id, o->hex);
	tfs_object_key("ds", &id, o->key);
}

static void put_objs(const struct lake *l, struct obj *o, size_t n, size_t raw_len, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		put_obj(l, seed + i, raw_len ? raw_len : 1024 + (i * 7919) % 32768, &o[i]);
}

static void free_objs(struct obj *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tfs_buf_free(&o[i].bytes);
}

static struct tfs_store *wrap_dir(const struct lake *l, const char *dir, uint64_t budget)
{
	struct tfs_store *inner, *s;

	assert_int_equal(tfs_store_open(l->url, 0, &inner), 0);
	assert_int_equal(tfs_diskcache_wrap(inner, dir, budget, &s), 0);
	assert_non_null(s);
	assert_ptr_equal(tfs_diskcache_inner(s), inner);
	assert_string_equal(s->url, inner->url);
	return s;
}

static struct tfs_store *wrap(const struct lake *l, uint64_t budget)
{
	return wrap_dir(l, l->cache, budget);
}

static uint64_t inner_gets(struct tfs_store *s)
{
	struct tfs_store_counters c;

	tfs_store_counters(tfs_diskcache_inner(s), &c);
	return c.gets;
}

static struct tfs_diskcache_stats stats_of(struct tfs_store *s)
{
	struct tfs_diskcache_stats st;

	assert_int_equal(tfs_diskcache_stats(s, &st), 0);
	return st;
}

/* Get key through s and compare with the object's bytes. 1 if correct, 0 otherwise. */
static int get_matches(struct tfs_store *s, const char *key, const struct tfs_buf *want)
{
	struct tfs_buf b = { 0 };
	int ok = tfs_store_get_object(s, key, 0, &b) == 0 && b.len == want->len &&
		 !memcmp(b.data, want->data, want->len);

	tfs_buf_free(&b);
	return ok;
}

static void assert_get(struct tfs_store *s, const struct obj *o)
{
	if (!get_matches(s, o->key, &o->bytes))
		fail_msg("wrong bytes for %s", o->key);
}

static void cache_file(const struct lake *l, const struct obj *o, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", l->cache, o->hex);
}

static int is_cached(const struct lake *l, const struct obj *o)
{
	char f[512];
	struct stat sb;

	cache_file(l, o, f, sizeof(f));
	return stat(f, &sb) == 0;
}

/* Total bytes of regular files in dir, and their count. */
static uint64_t dir_bytes(const char *dir, size_t *count)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t total = 0;
	size_t n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		struct stat sb;

		if (fstatat(dirfd(d), de->d_name, &sb, 0) == 0 && S_ISREG(sb.st_mode)) {
			total += (uint64_t)sb.st_size;
			n++;
		}
	}
	closedir(d);
	if (count)
		*count = n;
	return total;
}

static void read_whole(const char *file, struct tfs_buf *b)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	struct stat sb;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	b->len = 0;
	assert_int_equal(tfs_buf_reserve(b, (size_t)sb.st_size), 0);
	assert_int_equal(tfs_pread_full(fd, b->data, (size_t)sb.st_size, 0), 0);
	b->len = (size_t)sb.st_size;
	close(fd);
}

static void set_mtime(const char *file, time_t sec)
{
	struct timespec ts[2] = { { .tv_sec = sec }, { .tv_sec = sec } };

	assert_int_equal(utimensat(AT_FDCWD, file, ts, 0), 0);
}

/* --- tests ------------------------------------------------------------------------------------ */

static void test_miss_then_hit(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	char other[TFS_KEY_MAX];

	(void)state;
	make_lake("hit", &l);
	put_obj(&l, 1, 100000, &o);
	s = wrap(&l, 1 << 20);
	st = stats_of(s);
	assert_int_equal(st.budget, 1 << 20);
	assert_int_equal(st.bytes_used, 0);

	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	st = stats_of(s);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);
	assert_int_equal(st.hits, 0);
	assert_int_equal(st.bytes_used, o.bytes.len);
	assert_true(is_cached(&l, &o));

	/* Second read: from the file, identical bytes, no request to the store. */
	assert_get(s, &o);
	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	st = stats_of(s);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.fills, 1);

	/* Content addressing: the same id under another dataset is served from the same file. */
	tfs_object_key("other-ds", &o.id, other);
	assert_true(get_matches(s, other, &o.bytes));
	assert_int_equal(inner_gets(s), 1);

	/* A missing object is the inner store's answer. */
	{
		struct tfs_buf b = { 0 };
		struct tfs_id missing;
		char key[TFS_KEY_MAX];

		tfs_id_of("nothing", 7, &missing);
		tfs_object_key("ds", &missing, key);
		assert_int_equal(tfs_store_get_object(s, key, 0, &b), -ENOENT);
		assert_int_equal(stats_of(s).misses, 2);
		tfs_buf_free(&b);
	}
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_survives_remount(void **state)
{
	struct lake l;
	struct obj o[3];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;

	(void)state;
	make_lake("remount", &l);
	put_objs(&l, o, 3, 5000, 10);
	s = wrap(&l, 1 << 20);
	for (int i = 0; i < 3; i++)
		assert_get(s, &o[i]);
	assert_int_equal(inner_gets(s), 3);
	tfs_store_close(s);

	/* A fresh inner store and wrapper over the same directory: everything is a hit. */
	s = wrap(&l, 1 << 20);
	st = stats_of(s);
	assert_int_equal(st.bytes_used, 3 * o[0].bytes.len);
	for (int i = 0; i < 3; i++)
		assert_get(s, &o[i]);
	assert_int_equal(inner_gets(s), 0);
	st = stats_of(s);
	assert_int_equal(st.hits, 3);
	assert_int_equal(st.misses, 0);
	assert_int_equal(st.fills, 0);
	tfs_store_close(s);
	free_objs(o, 3);
}

static void test_remount_orders_by_mtime(void **state)
{
	struct lake l;
	struct obj o[4];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	static const time_t when[4] = { 1000000, 3000000, 2000000, 4000000 };
	char f[512];

	(void)state;
	make_lake("mtime", &l);
	put_objs(&l, o, 4, 4000, 20);
	s = wrap(&l, 1 << 20);
	for (int i = 0; i < 4; i++)
		assert_get(s, &o[i]);
	tfs_store_close(s);
	for (int i = 0; i < 4; i++) {
		cache_file(&l, &o[i], f, sizeof(f));
		set_mtime(f, when[i]);
	}

	/* A smaller budget at the next mount: the two oldest by mtime (0, then 2) go at once. */
	s = wrap(&l, 2 * o[0].bytes.len + 100);
	st = stats_of(s);
	assert_int_equal(st.evictions, 2);
	assert_int_equal(st.bytes_used, 2 * o[0].bytes.len);
	assert_false(is_cached(&l, &o[0]));
	assert_true(is_cached(&l, &o[1]));
	assert_false(is_cached(&l, &o[2]));
	assert_true(is_cached(&l, &o[3]));

	/* A hit refreshes the file's mtime, so the order survives the next remount too. */
	assert_get(s, &o[1]);
	assert_int_equal(inner_gets(s), 0);
	{
		struct stat sb;

		cache_file(&l, &o[1], f, sizeof(f));
		assert_int_equal(stat(f, &sb), 0);
		assert_true(sb.st_mtime > when[3]);
	}
	tfs_store_close(s);
	free_objs(o, 4);
}

static void test_damaged_file_refetched(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf now = { 0 };
	char f[512];
	uint64_t gets, bad = 0;

	(void)state;
	make_lake("damage", &l);
	put_obj(&l, 3, 20000, &o);
	s = wrap(&l, 1 << 20);
	assert_get(s, &o);
	cache_file(&l, &o, f, sizeof(f));

	/* Each kind of damage: flips in the header and the payload, truncations, an extension. */
	for (int kind = 0; kind < 7; kind++) {
		int fd = open(f, O_RDWR | O_CLOEXEC);
		uint8_t byte;

		assert_true(fd >= 0);
		switch (kind) {
		case 0: /* payload byte */
		case 1: /* header byte */
		case 2: /* last byte */
		{
			off_t at = kind == 0 ? 5000 : kind == 1 ? 3 : (off_t)o.bytes.len - 1;

			assert_int_equal(pread(fd, &byte, 1, at), 1);
			byte ^= 0x10;
			assert_int_equal(pwrite(fd, &byte, 1, at), 1);
			break;
		}
		case 3:
			assert_int_equal(ftruncate(fd, (off_t)o.bytes.len / 2), 0);
			break;
		case 4:
			assert_int_equal(ftruncate(fd, 20), 0); /* shorter than a header */
			break;
		case 5:
			assert_int_equal(ftruncate(fd, 0), 0);
			break;
		case 6:
			assert_int_equal(pwrite(fd, "x", 1, (off_t)o.bytes.len), 1);
			break;
		}
		close(fd);
		gets = inner_gets(s);
		assert_get(s, &o);
		assert_int_equal(inner_gets(s), gets + 1);
		assert_int_equal(stats_of(s).bad_files, ++bad);
		/* Repaired: the file is the object again, and served without a request. */
		read_whole(f, &now);
		assert_int_equal(now.len, o.bytes.len);
		assert_memory_equal(now.data, o.bytes.data, o.bytes.len);
		assert_get(s, &o);
		assert_int_equal(inner_gets(s), gets + 1);
	}
	assert_int_equal(stats_of(s).bytes_used, o.bytes.len);
	tfs_buf_free(&now);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_damaged_at_source_not_cached(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf b = { 0 };
	static const char junk[] = "not an object at all";

	(void)state;
	make_lake("source", &l);
	put_obj(&l, 4, 3000, &o);
	s = wrap(&l, 1 << 20);
	/* Replace the stored object with junk behind the cache's back. */
	assert_int_equal(tfs_store_put(tfs_diskcache_inner(s), o.key, junk, sizeof(junk) - 1), 0);
	for (int i = 1; i <= 2; i++) {
		/* Checked as it arrives: fetched again once, then EIO, and never kept. */
		struct tfs_store_counters c;

		assert_int_equal(tfs_store_get_object(s, o.key, 0, &b), -EBADMSG);
		tfs_store_counters(tfs_diskcache_inner(s), &c);
		assert_int_equal(c.gets, (uint64_t)i);
		assert_int_equal(c.retries, (uint64_t)i); /* the refetch */
		assert_int_equal(c.bytes_read, 2 * (uint64_t)i * (sizeof(junk) - 1));
		assert_false(is_cached(&l, &o));
	}
	/* A plain get hands over what is there, unchecked and not kept. */
	assert_int_equal(tfs_store_get(s, o.key, &b), 0);
	assert_int_equal(b.len, sizeof(junk) - 1);
	assert_memory_equal(b.data, junk, b.len);
	assert_false(is_cached(&l, &o));
	assert_int_equal(stats_of(s).fills, 0);
	assert_int_equal(stats_of(s).bytes_used, 0);
	tfs_buf_free(&b);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_budget_evicts_least_recent(void **state)
{
	struct lake l;
	struct obj o[12];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	uint64_t one, budget;
	size_t files;

	(void)state;
	make_lake("budget", &l);
	put_objs(&l, o, 12, 4000, 40);
	one = o[0].bytes.len;
	budget = 3 * one + one / 2; /* room for three */
	s = wrap(&l, budget);

	assert_get(s, &o[0]);
	assert_get(s, &o[1]);
	assert_get(s, &o[2]);
	assert_get(s, &o[0]); /* 0 is now more recent than 1 */
	assert_get(s, &o[3]); /* evicts 1 */
	assert_false(is_cached(&l, &o[1]));
	assert_true(is_cached(&l, &o[0]));
	assert_true(is_cached(&l, &o[2]));
	assert_true(is_cached(&l, &o[3]));
	st = stats_of(s);
	assert_int_equal(st.evictions, 1);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.bytes_used, 3 * one);

	/* Stream through everything: the directory never holds more than the budget. */
	for (int round = 0; round < 3; round++)
		for (int i = 0; i < 12; i++) {
			assert_get(s, &o[i]);
			assert_true(dir_bytes(l.cache, NULL) <= budget);
		}
	st = stats_of(s);
	assert_true(st.bytes_used <= budget);
	assert_int_equal(dir_bytes(l.cache, &files), st.bytes_used);
	assert_int_equal(files, 3);
	assert_true(st.evictions >= 30);
	assert_int_equal(st.evictions + 3, st.fills);

	/* An object larger than the whole budget is served but never cached. */
	{
		struct obj big;

		put_obj(&l, 99, (size_t)budget, &big);
		assert_get(s, &big);
		assert_get(s, &big);
		assert_false(is_cached(&l, &big));
		assert_int_equal(stats_of(s).bypassed, 0);
		assert_true(is_cached(&l, &o[11]));
		free_objs(&big, 1);
	}
	tfs_store_close(s);
	free_objs(o, 12);
}

static int count_entries(void *arg, const char *name, int is_dir)
{
	(void)name;
	(void)is_dir;
	(*(int *)arg)++;
	return 0;
}

static void test_other_keys_go_to_inner(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	struct tfs_buf b = { 0 };
	char bad_key[TFS_KEY_MAX + 8];
	uint64_t gets;
	size_t files;
	int n = 0;
	static const char head1[] =
		"1111111111111111111111111111111111111111111111111111111111111111\n";

	(void)state;
	make_lake("keys", &l);
	put_obj(&l, 5, 1000, &o);
	s = wrap(&l, 1 << 20);

	/* Markers and refs: every read is a request, and a ref change is seen at once. */
	for (int i = 1; i <= 3; i++) {
		assert_int_equal(tfs_store_get(s, "ds/tensorfs-dataset", &b), 0);
		assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &b), 0);
		assert_int_equal(inner_gets(s), 2 * (uint64_t)i);
	}
	assert_int_equal(tfs_store_put(s, "ds/refs/heads/main", head1, sizeof(head1) - 1), 0);
	assert_int_equal(tfs_store_get(s, "ds/refs/heads/main", &b), 0);
	assert_int_equal(b.len, sizeof(head1) - 1);
	assert_memory_equal(b.data, head1, b.len);

	/* Keys that only look like object keys. */
	gets = inner_gets(s);
	{
		const char *fmts[] = {
			"ds/objects/%.2s/%s/x", /* deeper */
			"ds/objects/%.2s%s",	/* no slash */
			"ds/object/%.2s/%s",	/* wrong directory */
			"/objects/%.2s/%s",	/* no dataset */
			".ds/objects/%.2s/%s",	/* invalid dataset name */
			"a/b/objects/%.2s/%s",	/* dataset with a slash */
		};

		for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
			snprintf(bad_key, sizeof(bad_key), fmts[i], o.hex, o.hex + 2);
			assert_true(tfs_store_get(s, bad_key, &b) < 0);
		}
		/* Upper-case hex and a short id. */
		snprintf(bad_key, sizeof(bad_key), "%s", o.key);
		for (char *p = bad_key + strlen("ds/objects/"); *p; p++)
			if (*p >= 'a' && *p <= 'f')
				*p = (char)(*p - 'a' + 'A');
		assert_true(tfs_store_get(s, bad_key, &b) < 0);
		snprintf(bad_key, sizeof(bad_key), "%s", o.key);
		bad_key[strlen(bad_key) - 1] = 0;
		assert_true(tfs_store_get(s, bad_key, &b) < 0);
		assert_int_equal(inner_gets(s), gets + sizeof(fmts) / sizeof(fmts[0]) + 2);
		/* Asked for as objects, they are refused without a request. */
		assert_int_equal(tfs_store_get_object(s, bad_key, 0, &b), -EINVAL);
		assert_int_equal(inner_gets(s), gets + sizeof(fmts) / sizeof(fmts[0]) + 2);
	}
	dir_bytes(l.cache, &files);
	assert_int_equal(files, 0);
	assert_int_equal(stats_of(s).misses, 0);

	/* Everything else is forwarded too. */
	{
		struct tfs_store_counters c;
		uint8_t part[16];
		uint64_t size;

		assert_int_equal(tfs_store_get_range(s, o.key, 48, part, sizeof(part)), 16);
		assert_memory_equal(part, o.bytes.data + 48, sizeof(part));
		assert_int_equal(tfs_store_head(s, o.key, &size), 0);
		assert_int_equal(size, o.bytes.len);
		snprintf(bad_key, sizeof(bad_key), "ds/objects/%.2s", o.hex);
		assert_int_equal(tfs_store_list(s, bad_key, count_entries, &n), 0);
		assert_true(n >= 1);
		assert_int_equal(tfs_store_put_new(s, "ds/extra", "x", 1), 0);
		assert_int_equal(tfs_store_put_new(s, "ds/extra", "x", 1), -EEXIST);
		assert_int_equal(tfs_store_del(s, "ds/extra"), 0);
		assert_int_equal(tfs_store_del(s, "ds/extra"), -ENOENT);
		tfs_store_counters(tfs_diskcache_inner(s), &c);
		assert_int_equal(c.ranged_gets, 1);
		assert_int_equal(c.heads, 1);
		assert_int_equal(c.lists, 1);
		assert_int_equal(c.deletes, 2);
	}
	assert_false(is_cached(&l, &o));
	tfs_buf_free(&b);
	tfs_store_close(s);
	free_objs(&o, 1);
}

static void test_not_a_wrapper(void **state)
{
	struct lake l;
	struct tfs_store *s;
	struct tfs_diskcache_stats st;

	(void)state;
	make_lake("plain", &l);
	assert_int_equal(tfs_store_open(l.url, 0, &s), 0);
	assert_int_equal(tfs_diskcache_stats(s, &st), -EINVAL);
	assert_ptr_equal(tfs_diskcache_inner(s), s);
	assert_int_equal(tfs_diskcache_wrap(NULL, l.cache, 1, &s), -EINVAL);
	tfs_store_close(s);
}

static void test_unusable_dir_bypasses(void **state)
{
	struct lake l;
	struct obj o[3];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	char file[512], dir[600];
	int fd;

	(void)state;
	make_lake("unusable", &l);
	put_objs(&l, o, 3, 2000, 60);
	snprintf(file, sizeof(file), "%s/a-regular-file", tmpdir);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(dir, sizeof(dir), "%s/cache", file);

	s = wrap_dir(&l, dir, 1 << 20);
	for (int round = 1; round <= 2; round++)
		for (int i = 0; i < 3; i++)
			assert_get(s, &o[i]);
	st = stats_of(s);
	assert_int_equal(st.misses, 6);
	assert_int_equal(st.bypassed, 6);
	assert_int_equal(st.fills, 0);
	assert_int_equal(st.hits, 0);
	assert_int_equal(inner_gets(s), 6);
	tfs_store_close(s);
	free_objs(o, 3);
}

static void test_disk_full_bypasses(void **state)
{
	struct lake l;
	struct obj o[6];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	size_t files;

	(void)state;
	make_lake("full", &l);
	put_objs(&l, o, 6, 20 * 1024, 70);
	assert_int_equal(mkdir(l.cache, 0700), 0);
	if (mount("tmpfs", l.cache, "tmpfs", 0, "size=64k") < 0) {
		print_message("cannot mount a tmpfs (%s): disk-full test skipped\n",
			      strerror(errno));
		free_objs(o, 6);
		skip();
	}
	snprintf(tmpfs_mnt, sizeof(tmpfs_mnt), "%s", l.cache);

	/* A budget far above what the filesystem holds: fills hit ENOSPC. */
	s = wrap(&l, 1 << 24);
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 6; i++)
			assert_get(s, &o[i]);
	st = stats_of(s);
	assert_true(st.fills >= 1);
	assert_true(st.bypassed >= 1);
	assert_int_equal(st.hits + st.misses, 12);
	assert_int_equal(st.misses, inner_gets(s));
	/* No temporary file is left behind, and what is there is exactly what is counted. */
	assert_int_equal(dir_bytes(l.cache, &files), st.bytes_used);
	assert_int_equal(files, st.fills);
	tfs_store_close(s);

	assert_int_equal(umount2(l.cache, MNT_DETACH), 0);
	tmpfs_mnt[0] = 0;
	free_objs(o, 6);
}

static void test_leftovers_and_foreign_files(void **state)
{
	struct lake l;
	struct obj o;
	struct tfs_store *s;
	char f[512];
	struct stat sb;
	int fd;

	(void)state;
	make_lake("leftovers", &l);
	put_obj(&l, 8, 1000, &o);
	assert_int_equal(mkdir(l.cache, 0700), 0);
	/* A crashed writer's old temporary, a fresh one (maybe another process's) and a stranger.
	 */
	static const char *names[] = { ".tmp-1-1", ".tmp-2-2", "README" };
	for (int i = 0; i < 3; i++) {
		snprintf(f, sizeof(f), "%s/%s", l.cache, names[i]);
		fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		assert_true(fd >= 0);
		assert_int_equal(tfs_write_full(fd, "0123456789", 10), 0);
		close(fd);
	}
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[0]);
	set_mtime(f, 1000);

	s = wrap(&l, 1 << 20);
	assert_int_equal(stat(f, &sb), -1);
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[1]);
	assert_int_equal(stat(f, &sb), 0);
	snprintf(f, sizeof(f), "%s/%s", l.cache, names[2]);
	assert_int_equal(stat(f, &sb), 0);
	assert_int_equal(stats_of(s).bytes_used, 0);
	assert_get(s, &o);
	assert_get(s, &o);
	assert_int_equal(inner_gets(s), 1);
	tfs_store_close(s);
	free_objs(&o, 1);
}

/* --- concurrency ------------------------------------------------------------------------------ */

struct worker {
	pthread_t thread;
	struct tfs_store *s;
	const struct obj *objs;
	size_t nobjs;
	unsigned seed;
	int iters;
	int errors;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tfs_buf b = { 0 };

	for (int i = 0; i < w->iters; i++) {
		const struct obj *o = &w->objs[(size_t)rand_r(&w->seed) % w->nobjs];

		if (tfs_store_get_object(w->s, o->key, 0, &b) || b.len != o->bytes.len ||
		    memcmp(b.data, o->bytes.data, b.len))
			w->errors++;
	}
	tfs_buf_free(&b);
	return NULL;
}

static void run_workers(struct worker *w, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_int_equal(pthread_create(&w[i].thread, NULL, worker_main, &w[i]), 0);
	for (size_t i = 0; i < n; i++)
		pthread_join(w[i].thread, NULL);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(w[i].errors, 0);
}

static void test_concurrent_small_budget(void **state)
{
	enum { NOBJ = 50, NTHREADS = 8, ITERS = 400 };
	struct lake l;
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct worker w[NTHREADS];
	struct tfs_store *s;
	struct tfs_diskcache_stats st;
	uint64_t budget = 200 * 1024;

	(void)state;
	assert_non_null(o);
	make_lake("threads", &l);
	put_objs(&l, o, NOBJ, 0, 100);
	s = wrap(&l, budget);
	for (unsigned i = 0; i < NTHREADS; i++)
		w[i] = (struct worker){
			.s = s, .objs = o, .nobjs = NOBJ, .seed = i + 1, .iters = ITERS
		};
	run_workers(w, NTHREADS);
	st = stats_of(s);
	assert_int_equal(st.hits + st.misses, NTHREADS * ITERS);
	assert_int_equal(st.misses, inner_gets(s));
	assert_true(st.hits > 0);
	assert_true(st.evictions > 0);
	assert_int_equal(st.bad_files, 0);
	assert_int_equal(st.bypassed, 0);
	assert_true(st.bytes_used <= budget);
	assert_true(dir_bytes(l.cache, NULL) <= budget);
	tfs_store_close(s);

	/* And again after a remount, with the same files. */
	s = wrap(&l, budget);
	for (unsigned i = 0; i < NTHREADS; i++)
		w[i] = (struct worker){
			.s = s, .objs = o, .nobjs = NOBJ, .seed = 100 + i, .iters = ITERS / 4
		};
	run_workers(w, NTHREADS);
	assert_true(stats_of(s).bytes_used <= budget);
	tfs_store_close(s);
	free_objs(o, NOBJ);
	free(o);
}

static void test_two_wrappers_share_a_dir(void **state)
{
	enum { NOBJ = 30, PER = 4, ITERS = 300 };
	struct lake l;
	struct obj *o = calloc(NOBJ, sizeof(*o));
	struct worker w[2 * PER];
	struct tfs_store *s[2];
	struct tfs_diskcache_stats st[2];
	uint64_t budget = 150 * 1024;

	(void)state;
	assert_non_null(o);
	make_lake("shared", &l);
	put_objs(&l, o, NOBJ, 0, 200);
	s[0] = wrap(&l, budget);
	s[1] = wrap(&l, budget);
	for (unsigned i = 0; i < 2 * PER; i++)
		w[i] = (struct worker){ .s = s[i % 2],
					.objs = o + (i % 2) * (NOBJ / 3), /* overlapping */
					.nobjs = 2 * NOBJ / 3,
					.seed = 7 * i + 3,
					.iters = ITERS };
	run_workers(w, 2 * PER);
	for (int k = 0; k < 2; k++) {
		st[k] = stats_of(s[k]);
		assert_int_equal(st[k].hits + st[k].misses, PER * ITERS);
		assert_int_equal(st[k].misses, inner_gets(s[k]));
		assert_true(st[k].bytes_used <= budget);
	}
	assert_true(st[0].hits + st[1].hits > 0);
	/* Each accounts for what it knows; together they never hold more than both budgets. */
	assert_true(dir_bytes(l.cache, NULL) <= 2 * budget);

	/* Files one wrapper filled are hits for the other. */
	{
		uint64_t gets = inner_gets(s[1]);

		assert_get(s[0], &o[0]);
		assert_get(s[1], &o[0]);
		assert_int_equal(inner_gets(s[1]), gets);
	}
	tfs_store_close(s[0]);
	tfs_store_close(s[1]);
	free_objs(o, NOBJ);
	free(o);
}

/* --- main ------------------------------------------------------------------------------------- */

static int group_setup(void **state)
{
	(void)state;
	return tmpdir_make("diskcache");
}

static int group_teardown(void **state)
{
	(void)state;
	if (tmpfs_mnt[0])
		umount2(tmpfs_mnt, MNT_DETACH);
	return tmpdir_remove();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_miss_then_hit),
		cmocka_unit_test(test_survives_remount),
		cmocka_unit_test(test_remount_orders_by_mtime),
		cmocka_unit_test(test_damaged_file_refetched),
		cmocka_unit_test(test_damaged_at_source_not_cached),
		cmocka_unit_test(test_budget_evicts_least_recent),
		cmocka_unit_test(test_other_keys_go_to_inner),
		cmocka_unit_test(test_not_a_wrapper),
		cmocka_unit_test(test_unusable_dir_bypasses),
		cmocka_unit_test(test_disk_full_bypasses),
		cmocka_unit_test(test_leftovers_and_foreign_files),
		cmocka_unit_test(test_concurrent_small_budget),
		cmocka_unit_test(test_two_wrappers_share_a_dir),
	};

	if (getenv("TFS_TEST_FILTER"))
		cmocka_set_test_filter(getenv("TFS_TEST_FILTER"));
	return cmocka_run_group_tests_name("diskcache", tests, group_setup, group_teardown);
}
