/* SPDX-License-Identifier: MIT */
/* mix: mixture versions as text objects, and the head that names the newest. */
#include "mix.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "verobj.h"
#include "util.h"

#define MIX_MAGIC "tensorfs-mix 1"

void tfs_mix_free(struct tfs_mix *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->src[i].dataset);
		free(m->src[i].column);
		free(m->src[i].weight);
	}
	free(m->src);
	free(m->name);
	memset(m, 0, sizeof(*m));
}

int tfs_mix_weight(const char *s, double *w)
{
	char *end;

	if (!*s || strspn(s, "0123456789.eE+-") != strlen(s))
		return -EINVAL;
	*w = strtod(s, &end);
	return *end || !(*w > 0) || *w > 1e300 ? -EINVAL : 0;
}

int tfs_mix_parse(const char *text, size_t len, const char *what, struct tfs_mix *m)
{
	char *copy = malloc(len + 1), *save = NULL, *line;
	int rc = -EIO, ended = 0, head = 0;

	memset(m, 0, sizeof(*m));
	if (!copy)
		return -ENOMEM;
	memcpy(copy, text, len);
	copy[len] = 0;
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char a[256], b[128], c[256], d[64];

		if (ended)
			goto bad;
		if (!head) {
			if (strcmp(line, MIX_MAGIC))
				goto bad;
			head = 1;
		} else if (!strncmp(line, "name ", 5) && !m->name) {
			if (!tfs_name_valid(line + 5) || !(m->name = strdup(line + 5)))
				goto bad;
		} else if (!strncmp(line, "parent ", 7)) {
			m->has_parent = strcmp(line + 7, "-") != 0;
			if (m->has_parent && tfs_id_parse(line + 7, &m->parent))
				goto bad;
		} else if (sscanf(line, "time %" SCNu64, &m->time) == 1) {
		} else if (sscanf(line, "seed %" SCNu64, &m->seed) == 1) {
		} else if (sscanf(line, "source %255s %127s %255s %63s", a, b, c, d) == 4) {
			struct tfs_mix_source *g, *x;

			if (m->n == TFS_MIX_MAX_SOURCES)
				goto bad;
			g = realloc(m->src, (m->n + 1) * sizeof(*g));
			if (!g)
				goto bad;
			m->src = g;
			x = &m->src[m->n++];
			memset(x, 0, sizeof(*x));
			x->dataset = strdup(a);
			x->column = strcmp(c, "-") ? strdup(c) : NULL;
			x->weight = strdup(d);
			if (!x->dataset || !x->weight || (strcmp(c, "-") && !x->column) ||
			    !tfs_name_valid(a) || tfs_id_parse(b, &x->commit) ||
			    tfs_mix_weight(d, &x->w))
				goto bad;
		} else if (!strcmp(line, "end")) {
			ended = 1;
		} else {
			goto bad;
		}
	}
	if (ended && m->name && m->n)
		rc = 0;
bad:
	free(copy);
	if (rc) {
		tfs_err("%s: not a mixture version", what);
		tfs_mix_free(m);
	}
	return rc;
}

int tfs_mix_text(const struct tfs_mix *m, struct tfs_buf *out)
{
	char hex[TFS_ID_HEX];
	int rc;

	if (m->has_parent)
		tfs_id_hex(&m->parent, hex);
	rc = tfs_buf_printf(out,
			    MIX_MAGIC "\nname %s\nparent %s\ntime %" PRIu64 "\nseed %" PRIu64 "\n",
			    m->name, m->has_parent ? hex : "-", m->time, m->seed);
	for (size_t i = 0; !rc && i < m->n; i++) {
		tfs_id_hex(&m->src[i].commit, hex);
		rc = tfs_buf_printf(out, "source %s %s %s %s\n", m->src[i].dataset, hex,
				    m->src[i].column ? m->src[i].column : "-", m->src[i].weight);
	}
	return rc ? rc : tfs_buf_printf(out, "end\n");
}

static void prefix_of(const char *name, char *out)
{
	snprintf(out, TFS_KEY_MAX, ".mixes/%s", name);
}

int tfs_mix_load(struct tfs_store *s, const char *name, const struct tfs_id *id,
		 struct tfs_mix *out)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	int rc;

	prefix_of(name, prefix);
	rc = tfs_verobj_load(s, prefix, id, &b);
	if (!rc)
		rc = tfs_mix_parse((char *)b.data, b.len, prefix, out);
	if (!rc)
		out->id = *id;
	tfs_buf_free(&b);
	return rc;
}

int tfs_mix_head(struct tfs_store *s, const char *name, struct tfs_mix *out)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_id id;
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	prefix_of(name, prefix);
	rc = tfs_verobj_head(s, prefix, &id);
	return rc ? rc : tfs_mix_load(s, name, &id, out);
}

int tfs_mix_commit(struct tfs_store *s, struct tfs_mix *m, int create)
{
	char prefix[TFS_KEY_MAX];
	struct tfs_buf text = { 0 };
	struct tfs_id head;
	int rc;

	prefix_of(m->name, prefix);
	rc = tfs_verobj_head(s, prefix, &head);
	if (rc && rc != -ENOENT)
		return rc;
	if (create && !rc)
		return -EEXIST;
	if (!create && rc)
		return rc;
	/* What tfs_mix_parse would refuse is never written: the mixture would be unreadable. */
	for (size_t i = 0; i < m->n; i++)
		if (tfs_mix_weight(m->src[i].weight, &m->src[i].w))
			return -EINVAL;
	m->has_parent = !create;
	m->parent = head;
	m->time = (uint64_t)time(NULL);
	rc = tfs_mix_text(m, &text);
	if (!rc)
		rc = tfs_verobj_put(s, prefix, text.data, text.len, create ? NULL : &head, &m->id);
	if (rc == -EAGAIN && create)
		rc = -EEXIST;
	tfs_buf_free(&text);
	return rc;
}

int tfs_mix_list(struct tfs_store *s, tfs_store_list_fn fn, void *arg)
{
	return tfs_verobj_list(s, ".mixes", fn, arg);
}

int tfs_mix_any(struct tfs_store *s)
{
	return tfs_verobj_any(s, ".mixes");
}
