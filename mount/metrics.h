/* SPDX-License-Identifier: MIT */
/* metrics: read a mount's .tensorfs/metrics (Prometheus text format) for `tensorfs top/stats`. */
#ifndef TFS_METRICS_H
#define TFS_METRICS_H

#include <stddef.h>

struct tfs_metric {
	char *name;
	char *labels; /* the text between the braces, "" without; e.g. dataset="a",version="main" */
	double value;
};

struct tfs_metrics {
	struct tfs_metric *v;
	size_t n;
};

/* Parse exposition text: comment lines are skipped, each other line is a sample. A line that
 * is not `NAME[{LABELS}] VALUE [TIMESTAMP]` fails the parse with -EINVAL. */
int tfs_metrics_parse(const char *text, size_t len, struct tfs_metrics *out);
/* Read and parse <mountpoint>/.tensorfs/metrics. */
int tfs_metrics_read(const char *mountpoint, struct tfs_metrics *out);
void tfs_metrics_free(struct tfs_metrics *m);

/* The value of the sample name{labels} (labels NULL: the sum over every sample of name); 0 when
 * there is none. */
double tfs_metrics_get(const struct tfs_metrics *m, const char *name, const char *labels);
/* The value of label key in a sample's label text, unescaped, into buf; "" when absent. */
const char *tfs_metrics_label(const char *labels, const char *key, char *buf, size_t cap);

#endif
