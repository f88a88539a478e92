/* SPDX-License-Identifier: MIT */
/* source: local paths and URLs of import sources. */
#include "source.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util.h"

#define PIECE (8u << 20) /* bytes fetched per ranged GET */

int tfs_source_is_url(const char *path)
{
	return !strncmp(path, "s3://", 5) || !strncmp(path, "http://", 7) ||
	       !strncmp(path, "https://", 8);
}

/* Split URL into the store of its parent and the last component: s3://b/dir/x.tar is the store
 * s3://b/dir and the key x.tar. */
static int open_parent(const char *url, struct tfs_store **s, const char **key)
{
	const char *slash = strrchr(url, '/');
	const char *scheme_end = strstr(url, "://");
	char *parent;
	int rc;

	if (!slash || !scheme_end || slash <= scheme_end + 2 || !slash[1]) {
		tfs_err("%s: expected a URL of an object (s3://BUCKET/KEY, https://HOST/PATH)",
			url);
		return -EINVAL;
	}
	parent = strndup(url, (size_t)(slash - url));
	if (!parent)
		return -ENOMEM;
	rc = tfs_store_open(parent, 0, s);
	free(parent);
	*key = slash + 1;
	return rc;
}

/* Copy the object into fd, PIECE bytes at a time. */
static int fetch_into(struct tfs_store *s, const char *url, const char *key, int fd)
{
	uint64_t size, off = 0;
	uint8_t *buf;
	int rc = tfs_store_head(s, key, &size);

	if (rc) {
		tfs_err("%s: %s", url, rc == -ENOENT ? "no such object" : strerror(-rc));
		return rc;
	}
	buf = malloc(PIECE);
	if (!buf)
		return -ENOMEM;
	while (off < size) {
		const size_t want = size - off < PIECE ? (size_t)(size - off) : PIECE;
		ssize_t got = tfs_store_get_range(s, key, off, buf, want);

		if (got <= 0) {
			rc = got < 0 ? (int)got : -EIO;
			tfs_err("%s: read at byte %llu: %s", url, (unsigned long long)off,
				got < 0 ? strerror(-rc) : "the object ended early");
			break;
		}
		rc = tfs_write_full(fd, buf, (size_t)got);
		if (rc) {
			tfs_err("%s: cannot hold it in memory: %s", url, strerror(-rc));
			break;
		}
		off += (uint64_t)got;
	}
	free(buf);
	return rc;
}

int tfs_source_open_file(const char *path)
{
	struct tfs_store *s = NULL;
	const char *key;
	int fd, rc;

	if (!tfs_source_is_url(path)) {
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			tfs_err("%s: %s", path, strerror(errno));
			return rc;
		}
		return fd;
	}
	rc = open_parent(path, &s, &key);
	if (rc)
		return rc;
	fd = memfd_create("tensorfs-source", MFD_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		tfs_err("%s: memfd_create: %s", path, strerror(errno));
	} else {
		rc = fetch_into(s, path, key, fd);
		if (!rc && lseek(fd, 0, SEEK_SET) < 0)
			rc = -errno;
	}
	tfs_store_close(s);
	if (rc) {
		if (fd >= 0)
			close(fd);
		return rc;
	}
	return fd;
}

int tfs_source_open_tree(const char *path, struct tfs_store **out)
{
	char abs[PATH_MAX];
	int rc;

	if (tfs_source_is_url(path)) {
		char *root = strdup(path);
		size_t len;

		if (!root)
			return -ENOMEM;
		len = strlen(root);
		while (len > 1 && root[len - 1] == '/')
			root[--len] = 0;
		rc = tfs_store_open(root, 0, out);
		free(root);
		return rc;
	}
	if (!realpath(path, abs)) {
		rc = -errno;
		tfs_err("%s: %s", path, strerror(errno));
		return rc;
	}
	return tfs_store_open(abs, 0, out);
}
