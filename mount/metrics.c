/* SPDX-License-Identifier: MIT */
/* metrics: a reader of the Prometheus text exposition format, as .tensorfs/metrics writes it. */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

void tfs_metrics_free(struct tfs_metrics *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].name);
		free(m->v[i].labels);
	}
	free(m->v);
	m->v = NULL;
	m->n = 0;
}

static int is_name_char(char c, int first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* One sample line (NUL-terminated, no newline). */
static int parse_line(const char *s, struct tfs_metric *out)
{
	const char *p = s, *lb = NULL, *le = NULL;
	char *end;

	if (!is_name_char(*p, 1))
		return -EINVAL;
	while (is_name_char(*p, 0))
		p++;
	const char *name_end = p;

	if (*p == '{') {
		int quoted = 0;

		lb = ++p;
		for (; *p && (quoted || *p != '}'); p++) {
			if (quoted && *p == '\\' && p[1])
				p++;
			else if (*p == '"')
				quoted = !quoted;
		}
		if (*p != '}')
			return -EINVAL;
		le = p++;
	}
	if (*p != ' ' && *p != '\t')
		return -EINVAL;
	errno = 0;
	out->value = strtod(p, &end);
	if (end == p || errno == ERANGE || (*end && *end != ' ' && *end != '\t'))
		return -EINVAL;
	out->name = strndup(s, (size_t)(name_end - s));
	out->labels = lb ? strndup(lb, (size_t)(le - lb)) : strdup("");
	if (!out->name || !out->labels) {
		free(out->name);
		free(out->labels);
		return -ENOMEM;
	}
	return 0;
}

int tfs_metrics_parse(const char *text, size_t len, struct tfs_metrics *out)
{
	size_t cap = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < len && !rc;) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t n = nl ? (size_t)(nl - (text + i)) : len - i;
		char *line = strndup(text + i, n);

		i += n + 1;
		if (!line) {
			rc = -ENOMEM;
			break;
		}
		if (*line && *line != '#') {
			rc = TFS_GROW(out->v, &cap, out->n + 1);
			if (!rc)
				rc = parse_line(line, &out->v[out->n]);
			if (!rc)
				out->n++;
		}
		free(line);
	}
	if (rc)
		tfs_metrics_free(out);
	return rc;
}

int tfs_metrics_read(const char *mountpoint, struct tfs_metrics *out)
{
	char path[4096];
	struct tfs_buf b = { 0 };
	char chunk[65536];
	ssize_t n;
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/.tensorfs/metrics", mountpoint);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while ((n = read(fd, chunk, sizeof(chunk))) > 0 && !rc)
		rc = tfs_buf_append(&b, chunk, (size_t)n);
	if (n < 0)
		rc = -errno;
	close(fd);
	if (!rc)
		rc = tfs_metrics_parse((const char *)b.data, b.len, out);
	tfs_buf_free(&b);
	return rc;
}

double tfs_metrics_get(const struct tfs_metrics *m, const char *name, const char *labels)
{
	double sum = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (strcmp(m->v[i].name, name))
			continue;
		if (!labels)
			sum += m->v[i].value;
		else if (!strcmp(m->v[i].labels, labels))
			return m->v[i].value;
	}
	return sum;
}

const char *tfs_metrics_label(const char *labels, const char *key, char *buf, size_t cap)
{
	size_t klen = strlen(key);
	const char *p = labels;

	if (!cap)
		return buf;
	buf[0] = 0;
	while (*p) {
		const char *eq = strchr(p, '=');
		size_t o = 0;

		if (!eq || eq[1] != '"')
			break;
		int match = (size_t)(eq - p) == klen && !strncmp(p, key, klen);

		for (p = eq + 2; *p && *p != '"'; p++) {
			char c = *p;

			if (c == '\\' && p[1]) {
				c = *++p == 'n' ? '\n' : *p;
			}
			if (match && o + 1 < cap)
				buf[o++] = c;
		}
		if (match) {
			buf[o] = 0;
			return buf;
		}
		if (*p == '"')
			p++;
		if (*p == ',')
			p++;
	}
	return buf;
}
