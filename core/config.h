/* SPDX-License-Identifier: MIT */
/* config: remote-store settings (S3 remotes, credentials, HTTP client tuning) from the
 * environment and an INI file. */
#ifndef TFS_CONFIG_H
#define TFS_CONFIG_H

#include <stdint.h>

/* The settings of one S3 remote. Strings are owned (tfs_config_remote_free); NULL when unset.
 * The secrets (secret_key, session_token) are never logged by this module or its callers. */
struct tfs_config_remote {
	char *name;	/* the remote's name, NULL for the unnamed default */
	char *endpoint; /* "http://127.0.0.1:9000"; NULL: AWS (https://s3.<region>.amazonaws.com) */
	char *region;	/* never NULL after tfs_config_remote: default "us-east-1" */
	char *access_key; /* NULL: anonymous (unsigned) requests */
	char *secret_key;
	char *session_token;
	int path_style;		/* 1: http://endpoint/bucket/key; 0: http://bucket.endpoint/key */
	int conditional_writes; /* -1 probe the server, 0 never, 1 trust If-Match/If-None-Match */
};

/* HTTP client settings shared by the http(s):// and s3:// backends. */
struct tfs_config_http {
	long timeout_ms;	 /* one attempt, whole transfer (default 60000) */
	long connect_timeout_ms; /* default 5000 */
	long stall_ms;		 /* abort an attempt that receives nothing for this long (10000) */
	unsigned retries;	 /* attempts after the first (default 6) */
	unsigned backoff_ms;	 /* first retry delay cap; doubles per attempt (default 100) */
	unsigned backoff_max_ms; /* default 5000 */
	unsigned max_inflight;	 /* concurrent requests per store (default 32) */
	uint64_t part_size;	 /* ranged-GET part for large objects (default 8 MiB) */
	unsigned parallel;	 /* concurrent parts of one large GET (default 8) */
	uint64_t window;	 /* how far the fetch of an import source read once may run ahead
				  * of the import (0, the default: 4 x parallel x part_size) */
	char ca_file[1024];	 /* absolute path of a PEM bundle to verify TLS servers with; "":
				  * the system's store */
};

/* Use this file instead of the default locations (/etc/tensorfs.ini, then
 * $XDG_CONFIG_HOME/tensorfs/config.ini or ~/.config/tensorfs/config.ini, later values winning).
 * NULL restores the defaults. $TENSORFS_CONFIG names a file the same way when this is not
 * called. The path is copied; call before any store is opened. Returns 0 or -ENOMEM. */
int tfs_config_set_path(const char *path);

/* Settings for remote `name` (NULL: the default). Precedence, per field: the named remote's
 * section, then the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 * AWS_REGION or AWS_DEFAULT_REGION, AWS_ENDPOINT_URL), then the [s3] section, then built-in
 * defaults. Returns 0, -ENOENT for an unknown remote name, -EACCES for a file that holds a
 * secret and is readable by group or others, -EINVAL for a malformed file (each logged once). */
int tfs_config_remote(const char *name, struct tfs_config_remote *out);
void tfs_config_remote_free(struct tfs_config_remote *r);

/* HTTP client settings: the [http] section, overridden by $TENSORFS_HTTP_TIMEOUT_MS,
 * _CONNECT_TIMEOUT_MS, _STALL_MS, _RETRIES, _BACKOFF_MS, _BACKOFF_MAX_MS, _MAX_INFLIGHT,
 * _PART_SIZE, _PARALLEL, _CA_FILE (ca_file also from $AWS_CA_BUNDLE, after _CA_FILE and before
 * the file). Returns 0, a file error as above, or -ENOENT/-EACCES for a ca_file that cannot be
 * read (logged). */
int tfs_config_http(struct tfs_config_http *out);
/* The max_inflight that tfs_config_http gives from now on where none is set (32 unless
 * changed): a command that fetches many files at once (an import of a tree by URL) asks for
 * more, once, before it opens a store. */
void tfs_config_http_default_inflight(unsigned n);

#endif
