/* SPDX-License-Identifier: MIT */
/* verobj: versions by content, and the HEAD that names the newest. */
#include "verobj.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "format.h"
#include "util.h"

/* PREFIX/WHAT[/ID]: 0, or -ENAMETOOLONG when it does not fit a key. */
static int key_of(const char *prefix, const char *what, const struct tfs_id *id, char *out)
{
	char hex[TFS_ID_HEX];
	int n;

	if (id)
		tfs_id_hex(id, hex);
	n = snprintf(out, TFS_KEY_MAX, "%s/%s%s%s", prefix, what, id ? "/" : "", id ? hex : "");
	return n < TFS_KEY_MAX ? 0 : -ENAMETOOLONG;
}

int tfs_verobj_head(struct tfs_store *s, const char *prefix, struct tfs_id *id)
{
	char key[TFS_KEY_MAX];

	return key_of(prefix, "HEAD", NULL, key) ?: tfs_id_line_read(s, key, id);
}

int tfs_verobj_load(struct tfs_store *s, const char *prefix, const struct tfs_id *id,
		    struct tfs_buf *out)
{
	char key[TFS_KEY_MAX];
	struct tfs_id got;
	int rc = key_of(prefix, "versions", id, key);

	if (!rc)
		rc = tfs_store_get(s, key, out);
	if (!rc) {
		tfs_id_of(out->data, out->len, &got);
		if (!tfs_id_eq(&got, id)) {
			tfs_err("%s: damaged (its bytes do not hash to its name)", key);
			rc = -EIO;
		}
	}
	return rc;
}

int tfs_verobj_put(struct tfs_store *s, const char *prefix, const void *text, size_t len,
		   const struct tfs_id *old, struct tfs_id *id)
{
	char key[TFS_KEY_MAX];
	int rc;

	tfs_id_of(text, len, id);
	rc = key_of(prefix, "versions", id, key);
	if (!rc)
		rc = tfs_store_put(s, key, text, len);
	if (rc)
		return rc;
	return key_of(prefix, "HEAD", NULL, key) ?: tfs_id_line_swap(s, key, old, id);
}

int tfs_verobj_remove(struct tfs_store *s, const char *prefix)
{
	char key[TFS_KEY_MAX];

	return key_of(prefix, "HEAD", NULL, key) ?: tfs_store_del(s, key);
}

struct list_ctx {
	struct tfs_store *s;
	const char *dir;
	tfs_store_list_fn fn;
	void *arg;
};

static int list_one(void *arg, const char *name, int is_dir)
{
	struct list_ctx *c = arg;
	char prefix[TFS_KEY_MAX];
	struct tfs_id id;

	/* A removed name keeps its versions but no HEAD: not listed. */
	if (!is_dir || !tfs_name_valid(name))
		return 0;
	snprintf(prefix, sizeof(prefix), "%s/%s", c->dir, name);
	return tfs_verobj_head(c->s, prefix, &id) ? 0 : c->fn(c->arg, name, 1);
}

int tfs_verobj_list(struct tfs_store *s, const char *dir, tfs_store_list_fn fn, void *arg)
{
	struct list_ctx c = { s, dir, fn, arg };
	int rc = tfs_store_list(s, dir, list_one, &c);

	return rc == -ENOENT ? 0 : rc;
}

static int first(void *arg, const char *name, int is_dir)
{
	(void)name, (void)is_dir;
	*(int *)arg = 1;
	return 1; /* enough */
}

int tfs_verobj_any(struct tfs_store *s, const char *dir)
{
	int any = 0;

	tfs_verobj_list(s, dir, first, &any);
	return any;
}
