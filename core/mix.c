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

/* A weight: a positive finite decimal number. */
static int weight_value(const char *s, double *w)
{
	char *end;

	if (!*s || strspn(s, "0123456789.eE+-") != strlen(s))
		return -1;
	*w = strtod(s, &end);
	return *end || !(*w > 0) || *w > 1e300 ? -1 : 0;
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
			    weight_value(d, &x->w))
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

static void version_key(const char *name, const struct tfs_id *id, char *out)
{
	char hex[TFS_ID_HEX];

	tfs_id_hex(id, hex);
	snprintf(out, TFS_KEY_MAX, ".mixes/%s/versions/%s", name, hex);
}

int tfs_mix_load(struct tfs_store *s, const char *name, const struct tfs_id *id,
		 struct tfs_mix *out)
{
	char key[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	struct tfs_id got;
	int rc;

	version_key(name, id, key);
	rc = tfs_store_get(s, key, &b);
	if (!rc) {
		tfs_id_of(b.data, b.len, &got);
		rc = tfs_id_eq(&got, id) ? tfs_mix_parse((char *)b.data, b.len, key, out) : -EIO;
		if (!tfs_id_eq(&got, id))
			tfs_err("%s: damaged (its bytes do not hash to its name)", key);
	}
	if (!rc)
		out->id = *id;
	tfs_buf_free(&b);
	return rc;
}

static int read_head(struct tfs_store *s, const char *name, struct tfs_id *id)
{
	char key[TFS_KEY_MAX];
	struct tfs_buf b = { 0 };
	int rc;

	if (!tfs_name_valid(name))
		return -ENOENT;
	snprintf(key, sizeof(key), ".mixes/%s/HEAD", name);
	rc = tfs_store_get(s, key, &b);
	if (!rc && (b.len < TFS_ID_HEX - 1 || tfs_id_parse((char *)b.data, id))) {
		tfs_err("%s: damaged", key);
		rc = -EIO;
	}
	tfs_buf_free(&b);
	return rc;
}

int tfs_mix_head(struct tfs_store *s, const char *name, struct tfs_mix *out)
{
	struct tfs_id id;
	int rc = read_head(s, name, &id);

	return rc ? rc : tfs_mix_load(s, name, &id, out);
}

int tfs_mix_commit(struct tfs_store *s, struct tfs_mix *m, int create)
{
	char key[TFS_KEY_MAX], oldhex[TFS_ID_HEX], newhex[TFS_ID_HEX];
	struct tfs_buf text = { 0 };
	struct tfs_id head;
	int rc = read_head(s, m->name, &head);

	if (rc && rc != -ENOENT)
		return rc;
	if (create && !rc)
		return -EEXIST;
	if (!create && rc)
		return rc;
	m->has_parent = !create;
	m->parent = head;
	m->time = (uint64_t)time(NULL);
	rc = tfs_mix_text(m, &text);
	if (!rc) {
		tfs_id_of(text.data, text.len, &m->id);
		version_key(m->name, &m->id, key);
		rc = tfs_store_put(s, key, text.data, text.len);
	}
	if (!rc) {
		snprintf(key, sizeof(key), ".mixes/%s/HEAD", m->name);
		tfs_id_hex(&m->id, newhex);
		newhex[TFS_ID_HEX - 1] = '\n';
		if (!create) {
			tfs_id_hex(&head, oldhex);
			oldhex[TFS_ID_HEX - 1] = '\n';
		}
		rc = tfs_store_cas(s, key, create ? NULL : oldhex, TFS_ID_HEX, newhex, TFS_ID_HEX);
		if (rc == -EAGAIN && create)
			rc = -EEXIST;
	}
	tfs_buf_free(&text);
	return rc;
}

struct list_ctx {
	tfs_store_list_fn fn;
	void *arg;
};

static int list_one(void *arg, const char *name, int is_dir)
{
	struct list_ctx *c = arg;

	return is_dir && tfs_name_valid(name) ? c->fn(c->arg, name, 1) : 0;
}

int tfs_mix_list(struct tfs_store *s, tfs_store_list_fn fn, void *arg)
{
	struct list_ctx c = { fn, arg };
	int rc = tfs_store_list(s, ".mixes", list_one, &c);

	return rc == -ENOENT ? 0 : rc;
}
