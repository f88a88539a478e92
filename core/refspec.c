/* SPDX-License-Identifier: MIT */
/* refspec: names of versions with abbreviated commit ids and ancestor suffixes (refspec.h). */
#include "refspec.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX_MIN 4 /* hex digits an abbreviated id needs, as git */

#define SET_ERR(...) snprintf(err, err_cap, __VA_ARGS__)

/* An abbreviated id's search: the objects of one fan-out directory whose names continue the
 * prefix, and of them the commits. */
struct search {
	struct tfs_store *s;
	const char *ds;
	char hex[TFS_ID_HEX]; /* the prefix, lower case */
	size_t len;
	unsigned found;
	struct tfs_id id; /* the first commit found */
};

/* 1: the object id is a commit; 0: another kind of object; -ENOENT: no such object. */
static int is_commit(struct tfs_store *s, const char *ds, const struct tfs_id *id)
{
	uint8_t head[TFS_OBJ_HEADER_SIZE];
	char key[TFS_KEY_MAX];
	struct tfs_obj_header h;
	ssize_t got;

	tfs_object_key(ds, id, key);
	got = tfs_store_get_range(s, key, 0, head, sizeof(head));
	if (got < 0)
		return (int)got;
	return got == (ssize_t)sizeof(head) && !tfs_object_header(head, sizeof(head), &h) &&
	       h.type == TFS_OBJ_COMMIT;
}

static int match_one(void *arg, const char *name, int is_dir)
{
	struct search *q = arg;
	char full[TFS_ID_HEX];
	struct tfs_id id;
	int rc;

	/* name: the 62 hex digits after the directory's 2 */
	if (is_dir || strlen(name) != TFS_ID_HEX - 3 || strncmp(name, q->hex + 2, q->len - 2))
		return 0;
	snprintf(full, sizeof(full), "%.2s%s", q->hex, name);
	if (tfs_id_parse(full, &id))
		return 0;
	rc = is_commit(q->s, q->ds, &id);
	if (rc == -ENOENT)
		return 0; /* listed, then removed (gc) */
	if (rc < 0)
		return rc;
	if (rc && q->found++ == 0)
		q->id = id;
	return 0;
}

static int by_prefix(struct tfs_store *s, const char *ds, const char *base, struct tfs_id *id,
		     char *err, size_t err_cap)
{
	struct search q = { .s = s, .ds = ds, .len = strlen(base) };
	char dir[TFS_KEY_MAX];
	int rc;

	for (size_t i = 0; i < q.len; i++)
		q.hex[i] = (char)tolower((unsigned char)base[i]);
	snprintf(dir, sizeof(dir), "%s/objects/%.2s", ds, q.hex);
	rc = tfs_store_list(s, dir, match_one, &q);
	if (rc && rc != -ENOENT) {
		SET_ERR("'%s': the commits cannot be listed (%s)", base, strerror(-rc));
		return rc;
	}
	if (q.found > 1) {
		SET_ERR("'%s' is ambiguous: %u commits start with it; give more digits", base,
			q.found);
		return -EINVAL;
	}
	if (!q.found) {
		SET_ERR("no branch, tag or commit '%s'", base);
		return -ENOENT;
	}
	*id = q.id;
	return 0;
}

static int all_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return 0;
	return 1;
}

/* Go back n first parents from *id (what base names). */
static int ancestor(struct tfs_store *s, const char *ds, const char *spec, const char *base,
		    uint64_t n, struct tfs_id *id, char *err, size_t err_cap)
{
	for (uint64_t k = 0; k < n; k++) {
		struct tfs_commit c;
		int rc = tfs_commit_load(s, ds, id, &c);

		if (rc) {
			SET_ERR("'%s': a commit of its history cannot be read (%s)", spec,
				strerror(-rc));
			return rc == -ENOENT ? -EIO : rc;
		}
		if (!c.nparents) {
			if (k)
				SET_ERR("'%s': %s has only %" PRIu64 " ancestor%s", spec, base, k,
					k == 1 ? "" : "s");
			else
				SET_ERR("'%s': %s has no parent", spec, base);
			tfs_commit_free(&c);
			return -ENOENT;
		}
		*id = c.parents[0];
		tfs_commit_free(&c);
	}
	return 0;
}

int tfs_refspec_resolve(struct tfs_store *s, const char *ds, const char *spec, struct tfs_id *id,
			char *err, size_t err_cap)
{
	const size_t blen = strcspn(spec, "~^");
	const char *p = spec + blen;
	char base[TFS_ID_HEX + 128];
	uint64_t back = 0;
	int rc;

	if (!blen || blen >= sizeof(base)) {
		SET_ERR("no branch, tag or commit '%s'", spec);
		return -ENOENT;
	}
	memcpy(base, spec, blen);
	base[blen] = 0;
	/* The suffixes first: a malformed one names nothing, whatever the base. */
	while (*p) {
		uint64_t n = 1;

		if (*p == '~' && isdigit((unsigned char)p[1])) {
			char *end;

			errno = 0;
			n = strtoull(p + 1, &end, 10);
			if (errno) {
				SET_ERR("'%s': %s", spec, strerror(errno));
				return -ENOENT;
			}
			p = end;
		} else if (*p == '~' || *p == '^') {
			p++;
		} else {
			SET_ERR("'%s': expected ~N or ^ after '%.*s'", spec, (int)(p - spec), spec);
			return -ENOENT;
		}
		back = back + n < back ? UINT64_MAX : back + n;
	}
	if (blen == TFS_ID_HEX - 1 && !tfs_id_parse(base, id)) {
		/* A full id (no branch or tag is so named: tfs_ref_name_ok) names an object: a
		 * commit, or a chunk or manifest (no version). One read of its header tells. */
		rc = is_commit(s, ds, id);
		if (!rc) {
			SET_ERR("'%s' is an object of the dataset but not a commit", base);
			return -ENOENT;
		}
		rc = rc < 0 ? rc : 0;
	} else {
		rc = tfs_ref_resolve(s, ds, base, id);
	}
	if (rc == -ENOENT && blen >= PREFIX_MIN && blen < TFS_ID_HEX - 1 && all_hex(base, blen))
		rc = by_prefix(s, ds, base, id, err, err_cap);
	else if (rc == -ENOENT)
		SET_ERR("no branch, tag or commit '%s'", base);
	else if (rc)
		SET_ERR("'%s' cannot be read: %s", base, strerror(-rc));
	if (rc)
		return rc;
	return ancestor(s, ds, spec, base, back, id, err, err_cap);
}
