/* SPDX-License-Identifier: MIT */
/* diskcache_fixture: a file:// lake of raw chunk objects and a disk cache wrapped around it, for
 * the disk cache's unit test programs, which include cmocka.h and tmpdir_fixture.h first. Static
 * inline: each program uses the part it needs. */
#ifndef TFS_DISKCACHE_FIXTURE_H
#define TFS_DISKCACHE_FIXTURE_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskcache.h"
#include "fill_fixture.h"
#include "format.h"
#include "object.h"
#include "store.h"
#include "util.h"

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

static inline void make_lake(const char *name, struct lake *l)
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
static inline void put_obj(const struct lake *l, uint64_t seed, size_t raw_len, struct obj *o)
{
	uint8_t *raw = malloc(raw_len ? raw_len : 1);
	struct tfs_store *s;
	struct tfs_id id;

	assert_non_null(raw);
	memset(o, 0, sizeof(*o));
	fill_random(raw, raw_len, seed * 0x9E3779B97F4A7C15ull);
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

static inline void put_objs(const struct lake *l, struct obj *o, size_t n, size_t raw_len,
			    uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		put_obj(l, seed + i, raw_len ? raw_len : 1024 + (i * 7919) % 32768, &o[i]);
}

static inline void free_objs(struct obj *o, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tfs_buf_free(&o[i].bytes);
}

static inline struct tfs_store *wrap_dir(const struct lake *l, const char *dir, uint64_t budget)
{
	struct tfs_store *inner, *s;

	assert_int_equal(tfs_store_open(l->url, 0, &inner), 0);
	assert_int_equal(tfs_diskcache_wrap(inner, dir, budget, &s), 0);
	assert_non_null(s);
	assert_ptr_equal(tfs_diskcache_inner(s), inner);
	assert_string_equal(s->url, inner->url);
	return s;
}

static inline struct tfs_store *wrap(const struct lake *l, uint64_t budget)
{
	return wrap_dir(l, l->cache, budget);
}

static inline uint64_t inner_gets(struct tfs_store *s)
{
	struct tfs_store_counters c;

	tfs_store_counters(tfs_diskcache_inner(s), &c);
	return c.gets;
}

static inline struct tfs_diskcache_stats stats_of(struct tfs_store *s)
{
	struct tfs_diskcache_stats st;

	assert_int_equal(tfs_diskcache_stats(s, &st), 0);
	return st;
}

/* Get key through s and compare with the object's bytes. 1 if correct, 0 otherwise. */
static inline int get_matches(struct tfs_store *s, const char *key, const struct tfs_buf *want)
{
	struct tfs_buf b = { 0 };
	int ok = tfs_store_get_object(s, key, 0, &b) == 0 && b.len == want->len &&
		 !memcmp(b.data, want->data, want->len);

	tfs_buf_free(&b);
	return ok;
}

static inline void assert_get(struct tfs_store *s, const struct obj *o)
{
	if (!get_matches(s, o->key, &o->bytes))
		fail_msg("wrong bytes for %s", o->key);
}

static inline void cache_file(const struct lake *l, const struct obj *o, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", l->cache, o->hex);
}

static inline int is_cached(const struct lake *l, const struct obj *o)
{
	char f[512];
	struct stat sb;

	cache_file(l, o, f, sizeof(f));
	return stat(f, &sb) == 0;
}

/* Total bytes of regular files in dir, and their count. */
static inline uint64_t dir_bytes(const char *dir, size_t *count)
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

static inline void read_whole(const char *file, struct tfs_buf *b)
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

static inline void set_mtime(const char *file, time_t sec)
{
	struct timespec ts[2] = { { .tv_sec = sec }, { .tv_sec = sec } };

	assert_int_equal(utimensat(AT_FDCWD, file, ts, 0), 0);
}

#endif
