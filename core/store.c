/* SPDX-License-Identifier: MIT */
/* store: backend registry, URL handling, and the one checked read of a stored object. */
#include "store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object.h"

static const struct tfs_store_ops *const backends[] = {
	&tfs_store_file_ops,
	&tfs_store_s3_ops,
	&tfs_store_http_ops,
	&tfs_store_https_ops,
};

int tfs_store_open(const char *url, unsigned flags, struct tfs_store **out)
{
	const char *colon = strstr(url, "://");
	size_t n;

	if (url[0] == '/')
		return tfs_store_file_ops.open(url, flags, out);
	if (!colon) {
		tfs_err("%s: not a store URL (expected file:///absolute/path, s3://bucket/prefix "
			"or "
			"http(s)://host/path)",
			url);
		return -EINVAL;
	}
	n = (size_t)(colon - url);
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (strlen(backends[i]->scheme) == n && !strncmp(url, backends[i]->scheme, n))
			return backends[i]->open(url, flags, out);
	tfs_err("%s: unsupported store scheme '%.*s'", url, (int)n, url);
	return -EPROTONOSUPPORT;
}

int tfs_store_get_object(struct tfs_store *s, const char *key, uint64_t urgent_size,
			 struct tfs_buf *out)
{
	int rc;

	/* One get, however many attempts it takes (a refetch counts as a retry). */
	TFS_STORE_COUNT(s, gets, 1);
	if (urgent_size)
		TFS_STORE_COUNT(s, urgent_gets, 1);
	for (int attempt = 0;; attempt++) {
		const uint64_t t0 = tfs_now_ns();
		int verified = 0;

		rc = s->ops->get_object ? s->ops->get_object(s, key, urgent_size, out, &verified)
					: s->ops->get(s, key, out);
		TFS_STORE_COUNT(s, read_ns, tfs_now_ns() - t0);
		if (rc)
			return rc;
		TFS_STORE_COUNT(s, bytes_read, out->len);
		rc = verified ? 0 : tfs_object_check(out->data, out->len);
		if (rc != -EIO)
			return rc;
		if (attempt == 1) {
			tfs_err("%s/%s: object fails its checksum again after a refetch; giving up",
				s->url, key);
			return -EBADMSG;
		}
		tfs_warn("%s/%s: object fails its checksum (%zu bytes); fetching it again", s->url,
			 key, out->len);
		TFS_STORE_COUNT(s, retries, 1);
	}
}

int tfs_store_tag_md5_is(const char *tag, const unsigned char md5[16])
{
	char hex[2 * 16 + 1];

	for (unsigned i = 0; i < 16; i++)
		snprintf(hex + 2 * i, 3, "%02x", md5[i]);
	return !memcmp(hex, tag + 1, 32);
}

void tfs_store_counters(const struct tfs_store *s, struct tfs_store_counters *out)
{
	const uint64_t *src = (const uint64_t *)&s->count;
	uint64_t *dst = (uint64_t *)out;

	for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

void tfs_store_close(struct tfs_store *s)
{
	if (s)
		s->ops->close(s);
}

int tfs_url_split(const char *url, char **lake_url, char **dataset)
{
	size_t n = strlen(url);
	const char *slash, *scheme_end = strstr(url, "://");
	const char *min = scheme_end ? scheme_end + 3 : url;

	while (n > 1 && url[n - 1] == '/')
		n--;
	/* One spelling of each lake: "." and ".." would reach outside it (file://LAKE/../NAME),
	 * and an empty segment names the same place as none. The first segment is a file path's
	 * root (empty), a bucket or a host. */
	for (const char *seg = strchr(min, '/'); seg && seg < url + n;) {
		const char *next = memchr(seg + 1, '/', (size_t)(url + n - seg - 1));
		const size_t len = (size_t)((next ? next : url + n) - seg - 1);

		if (!len || (len == 1 && seg[1] == '.') ||
		    (len == 2 && !strncmp(seg + 1, "..", 2))) {
			tfs_err("%.*s: a lake URL has no '.', '..' or empty path segments", (int)n,
				url);
			return -EINVAL;
		}
		seg = next;
	}
	slash = NULL;
	for (size_t i = n; i > (size_t)(min - url); i--)
		if (url[i - 1] == '/') {
			slash = url + i - 1;
			break;
		}
	if (!slash || slash + 1 >= url + n)
		return -EINVAL;
	*dataset = strndup(slash + 1, (size_t)(url + n - slash - 1));
	/* A lake at the file-system root keeps its one '/'. */
	*lake_url = strndup(url, slash == min ? (size_t)(slash - url + 1) : (size_t)(slash - url));
	if (!*dataset || !*lake_url) {
		free(*dataset);
		free(*lake_url);
		return -ENOMEM;
	}
	if (!tfs_name_valid(*dataset)) {
		free(*dataset);
		free(*lake_url);
		return -EINVAL;
	}
	return 0;
}

static void *ender_main(void *arg)
{
	struct tfs_put_ender *e = arg;

	e->rc = tfs_store_put_new_end(e->s, e->puts, e->n);
	return NULL;
}

int tfs_put_ender_wait(struct tfs_put_ender *e)
{
	int rc;

	if (!e->running)
		return 0;
	pthread_join(e->thread, NULL);
	rc = e->rc;
	free(e->puts);
	*e = (struct tfs_put_ender){ 0 };
	return rc;
}

int tfs_put_ender_start(struct tfs_put_ender *e, struct tfs_store *s, struct tfs_store_put **puts,
			size_t n)
{
	int rc = tfs_put_ender_wait(e), rc2;

	if (!n) {
		free(puts);
		return rc;
	}
	*e = (struct tfs_put_ender){ .s = s, .puts = puts, .n = n };
	if (!pthread_create(&e->thread, NULL, ender_main, e)) {
		e->running = 1;
		return rc;
	}
	rc2 = tfs_store_put_new_end(s, puts, n);
	free(puts);
	*e = (struct tfs_put_ender){ 0 };
	return rc ? rc : rc2;
}
