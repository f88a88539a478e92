/* SPDX-License-Identifier: MIT */
/* jsonmedia: a JSON Lines import's media fields, and a block's media files fetched ahead. */
#include "jsonmedia.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fetchahead.h"
#include "jsonalloc.h"
#include "source.h"

int tfs_jmedia_mark(struct tfs_jfield *f, size_t nf, const struct tfs_media_fields *media)
{
	for (size_t k = 0; media && k < media->n; k++) {
		size_t i = 0;

		while (i < nf && strcmp(f[i].name, media->name[k]))
			i++;
		if (i == nf || f[i].kind != TFS_JK_TEXT) {
			tfs_err("--media %s: no text field of that name (a path a record)",
				media->name[k]);
			return -EINVAL;
		}
		f[i].media = media->kind[k];
	}
	return 0;
}

int tfs_jmedia_tree(const char *base, const struct tfs_jfield *f, size_t nf, struct tfs_store **out,
		    unsigned *inflight)
{
	struct tfs_config_http cfg;
	size_t i = 0;
	int rc;

	*out = NULL;
	*inflight = 0;
	while (i < nf && !f[i].media)
		i++;
	if (i == nf || !tfs_source_is_url(base))
		return 0;
	rc = tfs_config_http(&cfg);
	if (!rc)
		rc = tfs_source_open_tree(base, out);
	*inflight = cfg.max_inflight < 32 ? cfg.max_inflight : 32;
	return rc;
}

/* A file fetched ahead: the line and field that name it, and its name in names. */
struct want {
	uint64_t line;
	size_t field;
	size_t name;
};

struct tfs_jmedia {
	struct tfs_fetchahead *fa;
	struct want *w;
	size_t n, cap;
	size_t next;	      /* the files before it were taken */
	struct tfs_buf names; /* the files' names, each NUL-terminated */
	struct tfs_buf file;  /* the file last taken */
};

static const char *want_name(void *arg, size_t i)
{
	const struct tfs_jmedia *jm = arg;

	return (const char *)jm->names.data + jm->w[i].name;
}

/* Note the media files of one line's object. */
static int want_line(struct tfs_jmedia *jm, uint64_t line, json_t *obj, const struct tfs_jfield *f,
		     size_t nf)
{
	for (size_t i = 0; i < nf; i++) {
		const char *rel =
			f[i].media ? json_string_value(json_object_get(obj, f[i].name)) : NULL;
		int rc;

		if (!rel || rel[0] == '/' || !rel[0])
			continue; /* not a path under the tree: read as tfs_media_value reads it */
		rc = TFS_GROW(jm->w, &jm->cap, jm->n + 1);
		if (!rc) {
			jm->w[jm->n] = (struct want){ line, i, jm->names.len };
			rc = tfs_buf_append(&jm->names, rel, strlen(rel) + 1);
		}
		if (rc)
			return rc;
		jm->n++;
	}
	return 0;
}

int tfs_jmedia_begin(struct tfs_store *tree, unsigned inflight, const char *p, const char *end,
		     const struct tfs_jfield *f, size_t nf, uint64_t hold, struct tfs_jmedia **out)
{
	struct tfs_jlines l = { p, end, 0 };
	struct tfs_jmedia *jm;
	const char *line;
	size_t n;
	int rc = 0;

	*out = NULL;
	if (!tree)
		return 0;
	jm = calloc(1, sizeof(*jm));
	if (!jm)
		return -ENOMEM;
	/* The lines read for their files' names; parsed again, for their rows, as they are used. */
	while (!rc && tfs_jlines_next(&l, &line, &n)) {
		json_t *obj;

		if (tfs_jline_blank(line, n))
			continue;
		tfs_jsonalloc_begin();
		obj = tfs_jline_parse(line, n, NULL, 0);
		if (json_is_object(obj))
			rc = want_line(jm, l.lineno, obj, f, nf);
		json_decref(obj);
		tfs_jsonalloc_end();
	}
	if (!rc && jm->n)
		rc = tfs_fetchahead_start(tree, jm->n, want_name, jm, tfs_fetchahead_get_small,
					  inflight, 2 * inflight, hold, &jm->fa);
	if (rc) {
		tfs_jmedia_end(jm);
		return rc;
	}
	*out = jm;
	return 0;
}

/* The fetch of line's field i: 1 with its bytes in jm->file, 0 when none was fetched for it
 * (not a path under the tree), or its GET's -errno. Files fetched for lines and fields before
 * it and not used (their records were bad) are dropped. */
static int take(struct tfs_jmedia *jm, uint64_t line, size_t i)
{
	while (jm->next < jm->n && (jm->w[jm->next].line < line ||
				    (jm->w[jm->next].line == line && jm->w[jm->next].field < i)))
		tfs_fetchahead_take(jm->fa, jm->next++, &jm->file);
	if (jm->next == jm->n || jm->w[jm->next].line != line || jm->w[jm->next].field != i)
		return 0;
	return tfs_fetchahead_take(jm->fa, jm->next++, &jm->file) ?: 1;
}

int tfs_jmedia_row(struct tfs_jmedia *jm, uint64_t line, json_t *obj, const struct tfs_jfield *f,
		   size_t nf, const char *base, const struct tfs_media_fields *mf,
		   struct tfs_buf *media, char *why, size_t why_cap, const char **bad)
{
	*bad = NULL;
	for (size_t i = 0; i < nf; i++) {
		const char *rel = json_string_value(json_object_get(obj, f[i].name));
		int got = 0, rc;

		if (!f[i].media)
			continue;
		media[i].len = 0;
		if (jm)
			got = take(jm, line, i);
		if (got == -EFBIG) /* a large file: read by its path, as it arrives */
			got = 0;
		if (got == -ENOENT) { /* the record names a file that is not there */
			snprintf(why, why_cap, "%.100s: %s", rel, strerror(ENOENT));
			*bad = why;
			return 0;
		}
		if (got < 0) {
			tfs_err("%s/%s: cannot fetch: %s", base, rel, strerror(-got));
			return got;
		}
		rc = tfs_media_value(base, rel, f[i].media, mf, got ? &jm->file : NULL, &media[i],
				     why, why_cap);
		if (rc == -EINVAL) {
			*bad = why;
			return 0;
		}
		if (rc)
			return rc; /* not the record's fault (logged): the import ends */
	}
	return 0;
}

void tfs_jmedia_end(struct tfs_jmedia *jm)
{
	if (!jm)
		return;
	tfs_fetchahead_stop(jm->fa);
	tfs_buf_free(&jm->names);
	tfs_buf_free(&jm->file);
	free(jm->w);
	free(jm);
}
