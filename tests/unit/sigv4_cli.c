/* SPDX-License-Identifier: MIT */
/* sigv4_cli: prints the headers core/sigv4 signs an S3 request with, for the botocore test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigv4.h"
#include "util.h"

/* sigv4_cli METHOD URL PAYLOAD_HASH EPOCH REGION [NAME:VALUE ...]
 * Credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN. */
int main(int argc, char **argv)
{
	struct tfs_sigv4_creds c = { getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY"),
				     getenv("AWS_SESSION_TOKEN") };
	struct tfs_sigv4_header extra[32];
	struct tfs_buf out = { 0 };
	char host[256], *path, *query = NULL, *url;
	const char *start, *slash;
	size_t nextra = 0;
	int rc;

	if (argc < 6 || argc - 6 > 32 || !c.access_key || !c.secret_key ||
	    !strstr(argv[2], "://")) {
		fprintf(stderr, "usage: sigv4_cli METHOD URL PAYLOAD_HASH EPOCH REGION "
				"[NAME:VALUE ...] (keys in AWS_* variables)\n");
		return 2;
	}
	url = strdup(argv[2]);
	if (!url)
		return 1;
	start = strstr(url, "://") + 3;
	slash = start + strcspn(start, "/?");
	if ((size_t)(slash - start) >= sizeof(host))
		return 2;
	memcpy(host, start, (size_t)(slash - start));
	host[slash - start] = 0;
	path = *slash == '/' ? (char *)slash : (char *)"/";
	if ((query = strchr(slash, '?')))
		*query++ = 0;
	for (int i = 6; i < argc; i++) {
		char *colon = strchr(argv[i], ':');

		if (!colon)
			return 2;
		*colon = 0;
		extra[nextra++] = (struct tfs_sigv4_header){ argv[i], colon + 1 };
	}
	rc = tfs_sigv4_s3_sign(argv[1], host, path, query, extra, nextra, argv[3], argv[5], &c,
			       (time_t)strtoll(argv[4], NULL, 10), &out);
	if (rc) {
		fprintf(stderr, "sigv4_cli: signing failed (%d)\n", rc);
		return 1;
	}
	for (size_t i = 0; i < out.len; i += strlen((char *)out.data + i) + 1)
		printf("%s\n", (char *)out.data + i);
	tfs_buf_free(&out);
	free(url);
	return 0;
}
