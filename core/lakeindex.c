/* SPDX-License-Identifier: MIT */
/* lakeindex: writes and parses ".tensorfs-index" listing files. */
#include "lakeindex.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "util.h"

#define INDEX_MAGIC "tensorfs-index 1\n"

struct collect {
	struct tfs_buf text; /* the index being built */
	struct tfs_buf dirs; /* NUL-separated child directories, for the caller to descend */
};

static int collect_one(void *arg, const char *name, int is_dir)
{
	struct collect *c = arg;
	int rc;

	if (name[0] == '.' || strchr(name, '\n') || strchr(name, '/'))
		return 0;
	rc = tfs_buf_printf(&c->text, "%s%s\n", name, is_dir ? "/" : "");
	if (!rc && is_dir)
		rc = tfs_buf_append(&c->dirs, name, strlen(name) + 1);
	return rc;
}

/* Index one prefix; its child directories are left in dirs when wanted. */
static int index_prefix(struct tfs_store *s, const char *prefix, struct tfs_buf *dirs)
{
	struct collect c = { 0 };
	char key[1024];
	int rc;

	rc = tfs_buf_printf(&c.text, INDEX_MAGIC);
	if (!rc)
		rc = tfs_store_list(s, prefix, collect_one, &c);
	if (rc)
		goto out;
	if ((size_t)snprintf(key, sizeof(key), "%s%s" TFS_LAKEINDEX_NAME, prefix,
			     *prefix ? "/" : "") >= sizeof(key)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	rc = tfs_store_put(s, key, c.text.data, c.text.len);
	if (!rc && dirs) {
		*dirs = c.dirs;
		c.dirs = (struct tfs_buf){ 0 };
	}
out:
	tfs_buf_free(&c.text);
	tfs_buf_free(&c.dirs);
	return rc;
}

int tfs_lakeindex_write(struct tfs_store *s)
{
	static const char *const sub[] = { "", "/refs", "/refs/heads", "/refs/tags" };
	struct tfs_buf datasets = { 0 };
	int rc, written = 0;

	rc = index_prefix(s, "", &datasets);
	if (rc)
		goto out;
	written++;
	for (size_t i = 0; i < datasets.len; i += strlen((char *)datasets.data + i) + 1) {
		const char *ds = (char *)datasets.data + i;
		char marker[512], prefix[512];
		uint64_t size;

		snprintf(marker, sizeof(marker), "%s/tensorfs-dataset", ds);
		if (!tfs_name_valid(ds) || tfs_store_head(s, marker, &size))
			continue; /* not a dataset */
		for (size_t k = 0; k < sizeof(sub) / sizeof(sub[0]); k++) {
			snprintf(prefix, sizeof(prefix), "%s%s", ds, sub[k]);
			rc = index_prefix(s, prefix, NULL);
			if (rc == -ENOENT)
				continue; /* no tags yet */
			if (rc)
				goto out;
			written++;
		}
	}
	rc = written;
out:
	tfs_buf_free(&datasets);
	return rc;
}

int tfs_lakeindex_parse(const char *text, size_t len, tfs_store_list_fn fn, void *arg)
{
	size_t m = strlen(INDEX_MAGIC);
	char name[256];

	if (len < m || memcmp(text, INDEX_MAGIC, m))
		return -EINVAL;
	for (size_t i = m; i < len;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = (nl ? (size_t)(nl - text) : len) - i;
		int is_dir = n && text[i + n - 1] == '/';
		int rc;

		if (n - (size_t)is_dir > 0 && n - (size_t)is_dir < sizeof(name)) {
			memcpy(name, text + i, n - (size_t)is_dir);
			name[n - (size_t)is_dir] = 0;
			/* Not hidden, not deeper, no NUL inside. */
			if (name[0] != '.' && !strchr(name, '/') &&
			    strlen(name) == n - (size_t)is_dir) {
				rc = fn(arg, name, is_dir);
				if (rc)
					return rc;
			}
		}
		i += n + 1;
	}
	return 0;
}

/* The first place of needle (ASCII letters in any case) in [p, p + len), or NULL. */
static const char *memmem_nocase(const char *p, size_t len, const char *needle, size_t n)
{
	for (size_t i = 0; i + n <= len; i++)
		if (!strncasecmp(p + i, needle, n))
			return p + i;
	return NULL;
}

int tfs_lakeindex_parse_html(const char *html, size_t len, tfs_store_list_fn fn, void *arg)
{
	const char *p = html, *end = html + len;

	while (p < end && (p = memmem_nocase(p, (size_t)(end - p), "href=", 5))) {
		char name[256], q;
		const char *v = p + 5, *e;
		size_t n = 0;
		int is_dir, rc;

		p = v;
		q = v < end && (*v == '"' || *v == '\'') ? *v++ : 0;
		e = v;
		while (e < end && *e && (q ? *e != q : (*e != ' ' && *e != '>')))
			e++;
		if (e == v || *v == '/' || *v == '?' || *v == '#' || *v == '.' ||
		    memchr(v, ':', (size_t)(e - v)))
			continue;
		for (const char *c = v; c < e && n < sizeof(name) - 1; c++) {
			if (*c == '%' && c + 2 < e && tfs_hex_digit(c[1]) >= 0 &&
			    tfs_hex_digit(c[2]) >= 0) {
				name[n++] = (char)(tfs_hex_digit(c[1]) * 16 + tfs_hex_digit(c[2]));
				c += 2;
			} else if (*c == '&' && c + 4 < e && !memcmp(c, "&amp;", 5)) {
				name[n++] = '&';
				c += 4;
			} else {
				name[n++] = *c;
			}
		}
		name[n] = 0;
		is_dir = n && name[n - 1] == '/';
		if (is_dir)
			name[--n] = 0;
		if (!n || strlen(name) != n || strchr(name, '/') || name[0] == '.')
			continue; /* empty, a NUL inside (%00), deeper, or hidden */
		rc = fn(arg, name, is_dir);
		if (rc)
			return rc;
	}
	return 0;
}
