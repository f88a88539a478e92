/* SPDX-License-Identifier: MIT */
/* Unit tests for core/config: INI remotes, precedence over the environment, refusal of
 * group/other-readable files with secrets, HTTP settings. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

static char dir[64], path[128];

static void write_file(const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup(void **state)
{
	(void)state;
	strcpy(dir, "/tmp/tfs-config-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/config.ini", dir);
	assert_int_equal(tfs_config_set_path(path), 0);
	for (const char *const *v =
		     (const char *const[]){ "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
					    "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
					    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
					    "TENSORFS_HTTP_RETRIES", "TENSORFS_HTTP_CA_FILE",
					    "AWS_CA_BUNDLE", NULL };
	     *v; v++)
		unsetenv(*v);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(path);
	rmdir(dir);
	tfs_config_set_path(NULL);
	return 0;
}

static const char cfg_text[] = "; comment\n"
			       "[s3]\n"
			       "region = eu-west-3\n"
			       "\n"
			       "[remote \"minio\"]\n"
			       "endpoint = http://127.0.0.1:9000\n"
			       "access_key = AKMINIO\n"
			       "secret_key = minio-secret\n"
			       "conditional_writes = false\n"
			       "\n"
			       "[remote.r2]\n"
			       "endpoint = https://acct.r2.example.com\n"
			       "path_style = false\n"
			       "aws_access_key_id = AKR2\n"
			       "aws_secret_access_key = r2-secret\n"
			       "\n"
			       "[http]\n"
			       "retries = 3\n"
			       "part_size = 2M\n";

static void test_remotes_and_precedence(void **state)
{
	struct tfs_config_remote r;

	(void)state;
	write_file(cfg_text, 0600);
	assert_int_equal(tfs_config_remote("minio", &r), 0);
	assert_string_equal(r.name, "minio");
	assert_string_equal(r.endpoint, "http://127.0.0.1:9000");
	assert_string_equal(r.region, "eu-west-3"); /* from [s3] */
	assert_string_equal(r.access_key, "AKMINIO");
	assert_string_equal(r.secret_key, "minio-secret");
	assert_null(r.session_token);
	assert_int_equal(r.path_style, 1); /* custom endpoint */
	assert_int_equal(r.conditional_writes, 0);
	tfs_config_remote_free(&r);

	assert_int_equal(tfs_config_remote("r2", &r), 0);
	assert_int_equal(r.path_style, 0);
	assert_string_equal(r.access_key, "AKR2");
	assert_int_equal(r.conditional_writes, -1);
	tfs_config_remote_free(&r);

	/* The environment beats [s3], a named remote beats the environment. */
	setenv("AWS_REGION", "ap-south-1", 1);
	setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "env-secret", 1);
	setenv("AWS_SESSION_TOKEN", "env-token", 1);
	assert_int_equal(tfs_config_remote(NULL, &r), 0);
	assert_null(r.name);
	assert_null(r.endpoint);
	assert_string_equal(r.region, "ap-south-1");
	assert_string_equal(r.access_key, "AKENV");
	assert_string_equal(r.session_token, "env-token");
	assert_int_equal(r.path_style, 0);
	tfs_config_remote_free(&r);
	assert_int_equal(tfs_config_remote("minio", &r), 0);
	assert_string_equal(r.access_key, "AKMINIO");
	tfs_config_remote_free(&r);
	unsetenv("AWS_REGION");
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");

	assert_int_equal(tfs_config_remote("nosuch", &r), -ENOENT);
}

static void test_secret_file_permissions(void **state)
{
	struct tfs_config_remote r;
	struct tfs_config_http h;

	(void)state;
	write_file(cfg_text, 0644);
	assert_int_equal(tfs_config_remote("minio", &r), -EACCES);
	assert_int_equal(tfs_config_http(&h), -EACCES);
	write_file(cfg_text, 0640);
	assert_int_equal(tfs_config_remote("minio", &r), -EACCES);
	/* Without secrets, a world-readable file is fine. */
	write_file("[s3]\nregion = us-west-2\n", 0644);
	assert_int_equal(tfs_config_remote(NULL, &r), 0);
	assert_string_equal(r.region, "us-west-2");
	tfs_config_remote_free(&r);
}

static void test_errors(void **state)
{
	struct tfs_config_remote r;

	(void)state;
	write_file("[s3]\nendpont = x\n", 0600);
	assert_int_equal(tfs_config_remote(NULL, &r), -EINVAL);
	write_file("[nonsense]\nx = y\n", 0600);
	assert_int_equal(tfs_config_remote(NULL, &r), -EINVAL);
	write_file("[s3]\npath_style = maybe\n", 0600);
	assert_int_equal(tfs_config_remote(NULL, &r), -EINVAL);
	write_file("[s3]\naccess_key = only-half\n", 0600);
	assert_int_equal(tfs_config_remote(NULL, &r), -EINVAL);
	unlink(path);
	assert_int_equal(tfs_config_remote(NULL, &r), -ENOENT); /* an explicit file must exist */
}

static void test_http_settings(void **state)
{
	struct tfs_config_http h;

	(void)state;
	write_file(cfg_text, 0600);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.retries, 3);
	assert_int_equal(h.part_size, 2u << 20);
	assert_int_equal(h.timeout_ms, 60000);
	assert_int_equal(h.max_inflight, 32);
	assert_int_equal(h.window, 0); /* 4 x parallel x part_size */
	/* A command's own default for max_inflight, where none is set; a setting still wins. */
	tfs_config_http_default_inflight(128);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.max_inflight, 128);
	setenv("TENSORFS_HTTP_MAX_INFLIGHT", "12", 1);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.max_inflight, 12);
	unsetenv("TENSORFS_HTTP_MAX_INFLIGHT");
	tfs_config_http_default_inflight(32);
	setenv("TENSORFS_HTTP_WINDOW", "96M", 1);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.window, 96u << 20);
	setenv("TENSORFS_HTTP_WINDOW", "0", 1);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.window, 0);
	setenv("TENSORFS_HTTP_WINDOW", "512K", 1); /* under a MiB */
	assert_int_equal(tfs_config_http(&h), -EINVAL);
	unsetenv("TENSORFS_HTTP_WINDOW");
	setenv("TENSORFS_HTTP_RETRIES", "0", 1);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_int_equal(h.retries, 0);
	setenv("TENSORFS_HTTP_RETRIES", "lots", 1);
	assert_int_equal(tfs_config_http(&h), -EINVAL);
	unsetenv("TENSORFS_HTTP_RETRIES");
}

static void test_http_ca_file(void **state)
{
	struct tfs_config_http h;
	char text[300], rel[64];

	(void)state;
	write_file("[http]\nretries = 2\n", 0600);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_string_equal(h.ca_file, ""); /* the system's store */
	/* From the file, made absolute; the environment wins over it, TENSORFS_ over AWS_. */
	snprintf(text, sizeof(text), "[http]\nca_file = %s\n", path);
	write_file(text, 0600);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_string_equal(h.ca_file, path);
	assert_int_equal(chdir(dir), 0);
	snprintf(rel, sizeof(rel), "./config.ini");
	setenv("AWS_CA_BUNDLE", rel, 1);
	assert_int_equal(tfs_config_http(&h), 0);
	assert_string_equal(h.ca_file, path);
	setenv("TENSORFS_HTTP_CA_FILE", "/nonexistent/ca.pem", 1);
	assert_int_equal(tfs_config_http(&h), -ENOENT);
	unsetenv("TENSORFS_HTTP_CA_FILE");
	unsetenv("AWS_CA_BUNDLE");
	assert_int_equal(chdir("/"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_remotes_and_precedence, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secret_file_permissions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_settings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_http_ca_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
