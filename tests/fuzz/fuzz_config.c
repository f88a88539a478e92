/* SPDX-License-Identifier: MIT */
/* Fuzz target for configuration files (core/config.c, inih underneath): the input is the file;
 * the default remote, a named one ("r") and the [http] settings are read from it. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz_common.h"
#include "util.h"

static char path[64];

static void cleanup(void)
{
	unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct tfs_config_remote r;
	struct tfs_config_http h;
	int fd, rc;

	if (!path[0]) {
		/* Parse errors are logged: not to the terminal, thousands of times a second. */
		tfs_log_set_level(TFS_LOG_ERROR);
		if (tfs_log_open("/dev/null"))
			abort();
		snprintf(path, sizeof(path), "/tmp/tfs-fuzz-config-%d.ini", (int)getpid());
		atexit(cleanup);
		/* The environment must not fill in what the file leaves out. */
		unsetenv("AWS_ACCESS_KEY_ID");
		unsetenv("AWS_SECRET_ACCESS_KEY");
		unsetenv("AWS_SESSION_TOKEN");
		unsetenv("AWS_ENDPOINT_URL");
		unsetenv("TENSORFS_CONFIG");
	}
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, data, len) != (ssize_t)len || close(fd))
		abort();
	if (tfs_config_set_path(path))
		return 0;
	for (int i = 0; i < 2; i++) {
		rc = tfs_config_remote(i ? "r" : NULL, &r);
		FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT || rc == -ENOMEM);
		if (!rc) {
			FUZZ_CHECK(r.region != NULL);
			FUZZ_CHECK(r.path_style == 0 || r.path_style == 1);
			FUZZ_CHECK(r.conditional_writes >= -1 && r.conditional_writes <= 1);
			/* A secret without its key id (or the reverse) is never half used. */
			FUZZ_CHECK(!r.secret_key || r.access_key);
			tfs_config_remote_free(&r);
		}
	}
	rc = tfs_config_http(&h);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT || rc == -EACCES || rc == -ENOMEM);
	if (!rc) {
		FUZZ_CHECK(h.timeout_ms > 0 && h.connect_timeout_ms > 0);
		FUZZ_CHECK(h.max_inflight > 0 && h.parallel > 0 && h.part_size > 0);
		FUZZ_CHECK(memchr(h.ca_file, 0, sizeof(h.ca_file)) != NULL);
	}
	tfs_config_set_path(NULL);
	return 0;
}
