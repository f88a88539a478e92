/* SPDX-License-Identifier: MIT */
/* config: INI files (inih) and environment variables merged into remote and HTTP settings. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* Set once at start-up, before any thread opens a store. */
static char *config_path;

int tfs_config_set_path(const char *path)
{
	char *p = path ? strdup(path) : NULL;

	if (path && !p)
		return -ENOMEM;
	free(config_path);
	config_path = p;
	return 0;
}

struct kv {
	char *section; /* normalised: "s3", "http", "remote.<name>" */
	char *key;
	char *value;
};

struct ini {
	struct kv *v;
	size_t n, cap;
	const char *file; /* being parsed */
	int has_secret;	  /* of the file being parsed */
	int bad;	  /* a problem was logged already */
};

static void ini_free(struct ini *c)
{
	for (size_t i = 0; i < c->n; i++) {
		explicit_bzero(c->v[i].value, strlen(c->v[i].value));
		free(c->v[i].section);
		free(c->v[i].key);
		free(c->v[i].value);
	}
	free(c->v);
	memset(c, 0, sizeof(*c));
}

static const char *const remote_keys[] = {
	"endpoint",	 "region",     "access_key",	     "secret_key",
	"session_token", "path_style", "conditional_writes", NULL,
};
static const char *const http_keys[] = {
	"timeout_ms",	"connect_timeout_ms", "stall_ms", "retries", "backoff_ms", "backoff_max_ms",
	"max_inflight", "part_size",	      "parallel", "window",  "ca_file",	   NULL,
};

static int in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return 1;
	return 0;
}

/* "remote \"x\"", "remote x" and "remote.x" all name remote x. */
static char *normalise_section(const char *s)
{
	char buf[256];
	const char *name;
	size_t n;

	if (strncmp(s, "remote", 6) || !(s[6] == '.' || s[6] == ' ' || s[6] == '\t'))
		return strdup(s);
	name = s + 7;
	while (*name == ' ' || *name == '\t')
		name++;
	n = strlen(name);
	if (n >= 2 && name[0] == '"' && name[n - 1] == '"') {
		name++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(buf) - 8)
		return NULL;
	snprintf(buf, sizeof(buf), "remote.%.*s", (int)n, name);
	return strdup(buf);
}

static int ini_handler_fn(void *user, const char *section, const char *name, const char *value)
{
	struct ini *c = user;
	char *sec = normalise_section(section), *key = strdup(name);
	int ok = 0;

	if (!sec || !key)
		goto out;
	/* Accept the AWS CLI spellings too. */
	if (!strcmp(key, "aws_access_key_id"))
		strcpy(key, "access_key");
	else if (!strcmp(key, "aws_secret_access_key"))
		strcpy(key, "secret_key");
	else if (!strcmp(key, "aws_session_token"))
		strcpy(key, "session_token");
	if (!strcmp(sec, "s3") || !strncmp(sec, "remote.", 7)) {
		if (!in_list(remote_keys, key)) {
			tfs_err("%s: unknown key '%s' in [%s]", c->file, name, section);
			goto out;
		}
		if (!strcmp(key, "secret_key") || !strcmp(key, "session_token"))
			c->has_secret = 1;
	} else if (!strcmp(sec, "http")) {
		if (!in_list(http_keys, key)) {
			tfs_err("%s: unknown key '%s' in [http]", c->file, name);
			goto out;
		}
	} else {
		tfs_err("%s: unknown section [%s] (expected [s3], [http] or [remote \"NAME\"])",
			c->file, section);
		goto out;
	}
	if (TFS_GROW(c->v, &c->cap, c->n + 1))
		goto out;
	c->v[c->n].value = strdup(value);
	if (!c->v[c->n].value)
		goto out;
	c->v[c->n].section = sec;
	c->v[c->n].key = key;
	c->n++;
	return 1;
out:
	c->bad = 1;
	free(sec);
	free(key);
	return ok;
}

/* Parse one file into c. A missing default file is no error. */
static int load_file(struct ini *c, const char *path, int must_exist)
{
	struct stat sb;
	FILE *f;
	int fd, rc, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		if (!must_exist && (e == ENOENT || e == ENOTDIR || e == EACCES))
			return 0;
		tfs_err("config file %s: %s", path, strerror(e));
		return -e;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		tfs_err("config file %s: not a regular file", path);
		close(fd);
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	c->file = path;
	c->has_secret = 0;
	c->bad = 0;
	rc = ini_parse_file(f, ini_handler_fn, c);
	fclose(f);
	if (rc) {
		if (rc > 0)
			tfs_err("config file %s: error at line %d", path, rc);
		else
			tfs_err("config file %s: cannot parse", path);
		return rc == -2 ? -ENOMEM : -EINVAL;
	}
	if (c->has_secret && (sb.st_mode & (S_IRGRP | S_IROTH | S_IWGRP | S_IWOTH))) {
		tfs_err("config file %s holds secret keys but is accessible by group or others "
			"(mode %04o); refusing to use it: chmod 600 %s",
			path, (unsigned)(sb.st_mode & 07777), path);
		return -EACCES;
	}
	return 0;
}

static int load(struct ini *c)
{
	const char *explicit_path = config_path ? config_path : getenv("TENSORFS_CONFIG");
	const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
	char user[PATH_MAX];
	int rc;

	memset(c, 0, sizeof(*c));
	if (explicit_path && *explicit_path)
		rc = load_file(c, explicit_path, 1);
	else {
		rc = load_file(c, "/etc/tensorfs.ini", 0);
		if (!rc && ((xdg && *xdg) || (home && *home))) {
			if (xdg && *xdg)
				snprintf(user, sizeof(user), "%s/tensorfs/config.ini", xdg);
			else
				snprintf(user, sizeof(user), "%s/.config/tensorfs/config.ini",
					 home);
			rc = load_file(c, user, 0);
		}
	}
	if (rc)
		ini_free(c);
	return rc;
}

/* The last value of section.key, or NULL. */
static const char *get(const struct ini *c, const char *section, const char *key)
{
	for (size_t i = c->n; i-- > 0;)
		if (!strcmp(c->v[i].section, section) && !strcmp(c->v[i].key, key))
			return c->v[i].value;
	return NULL;
}

static int has_section(const struct ini *c, const char *section)
{
	for (size_t i = 0; i < c->n; i++)
		if (!strcmp(c->v[i].section, section))
			return 1;
	return 0;
}

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* First non-NULL of: the remote's section, the environment, the [s3] section. */
static int pick(const struct ini *c, const char *remote_sec, const char *key, const char *env1,
		const char *env2, char **out)
{
	const char *v = remote_sec ? get(c, remote_sec, key) : NULL;

	if (!v && env1)
		v = env(env1);
	if (!v && env2)
		v = env(env2);
	if (!v)
		v = get(c, "s3", key);
	if (!v)
		return 0;
	*out = strdup(v);
	return *out ? 0 : -ENOMEM;
}

static int parse_bool(const char *v, int *out)
{
	if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") ||
	    !strcmp(v, "1"))
		*out = 1;
	else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") ||
		 !strcmp(v, "0"))
		*out = 0;
	else if (!strcasecmp(v, "auto"))
		*out = -1;
	else
		return -EINVAL;
	return 0;
}

void tfs_config_remote_free(struct tfs_config_remote *r)
{
	if (!r)
		return;
	if (r->secret_key)
		explicit_bzero(r->secret_key, strlen(r->secret_key));
	if (r->session_token)
		explicit_bzero(r->session_token, strlen(r->session_token));
	free(r->name);
	free(r->endpoint);
	free(r->region);
	free(r->access_key);
	free(r->secret_key);
	free(r->session_token);
	memset(r, 0, sizeof(*r));
}

int tfs_config_remote(const char *name, struct tfs_config_remote *out)
{
	char sec[300];
	const char *rs = NULL, *v;
	struct ini c;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = load(&c);
	if (rc)
		return rc;
	if (name) {
		snprintf(sec, sizeof(sec), "remote.%s", name);
		if (!has_section(&c, sec)) {
			tfs_err("no remote '%s' in the configuration (expected a [remote \"%s\"] "
				"section in %s)",
				name, name,
				config_path		    ? config_path
				: getenv("TENSORFS_CONFIG") ? getenv("TENSORFS_CONFIG")
							    : "/etc/tensorfs.ini or "
							      "~/.config/tensorfs/config.ini");
			rc = -ENOENT;
			goto out;
		}
		rs = sec;
		out->name = strdup(name);
		if (!out->name) {
			rc = -ENOMEM;
			goto out;
		}
	}
	rc = pick(&c, rs, "endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL", &out->endpoint);
	if (!rc)
		rc = pick(&c, rs, "region", "AWS_REGION", "AWS_DEFAULT_REGION", &out->region);
	if (!rc)
		rc = pick(&c, rs, "access_key", "AWS_ACCESS_KEY_ID", NULL, &out->access_key);
	if (!rc)
		rc = pick(&c, rs, "secret_key", "AWS_SECRET_ACCESS_KEY", NULL, &out->secret_key);
	if (!rc)
		rc = pick(&c, rs, "session_token", "AWS_SESSION_TOKEN", NULL, &out->session_token);
	if (!rc && !out->region && !(out->region = strdup("us-east-1")))
		rc = -ENOMEM;
	if (rc)
		goto out;
	/* A custom endpoint (MinIO, Ceph, s3rver) usually wants path-style addressing. */
	out->path_style = out->endpoint != NULL;
	v = rs ? get(&c, rs, "path_style") : NULL;
	if (!v)
		v = get(&c, "s3", "path_style");
	if (v && (parse_bool(v, &out->path_style) || out->path_style < 0)) {
		tfs_err("configuration: path_style = %s: expected true or false", v);
		rc = -EINVAL;
		goto out;
	}
	out->conditional_writes = -1;
	v = rs ? get(&c, rs, "conditional_writes") : NULL;
	if (!v)
		v = get(&c, "s3", "conditional_writes");
	if (v && parse_bool(v, &out->conditional_writes)) {
		tfs_err("configuration: conditional_writes = %s: expected auto, true or false", v);
		rc = -EINVAL;
		goto out;
	}
	if (!out->access_key != !out->secret_key) {
		tfs_err("configuration: an access key needs its secret key and the other way "
			"round");
		rc = -EINVAL;
	}
out:
	ini_free(&c);
	if (rc)
		tfs_config_remote_free(out);
	return rc;
}

/* A number from the environment or the [http] section; 0 when absent, -EINVAL if malformed. */
static int http_num(const struct ini *c, const char *key, uint64_t min, uint64_t max, uint64_t *val)
{
	char envname[64];
	const char *v;
	uint64_t n;
	int size = !strcmp(key, "part_size") || !strcmp(key, "window");

	snprintf(envname, sizeof(envname), "TENSORFS_HTTP_%s", key);
	for (char *p = envname; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	v = env(envname);
	if (!v)
		v = get(c, "http", key);
	if (!v)
		return 0;
	if (size) {
		if (tfs_parse_size(v, &n))
			goto bad;
	} else {
		char *end;

		errno = 0;
		n = strtoull(v, &end, 10);
		if (errno || *end || end == v)
			goto bad;
	}
	if ((n < min && !(n == 0 && !strcmp(key, "window"))) || n > max) /* window 0: default */
		goto bad;
	*val = n;
	return 0;
bad:
	tfs_err("HTTP setting %s = %s: expected a number from %llu to %llu", key, v,
		(unsigned long long)min, (unsigned long long)max);
	return -EINVAL;
}

/* The CA bundle to trust, made absolute (a daemon changes directory): "" when none is set. */
static int http_ca_file(const struct ini *c, char *out, size_t cap)
{
	const char *v = env("TENSORFS_HTTP_CA_FILE");
	char *abs;
	int rc = 0;

	if (!v)
		v = env("AWS_CA_BUNDLE");
	if (!v)
		v = get(c, "http", "ca_file");
	out[0] = 0;
	if (!v)
		return 0;
	abs = realpath(v, NULL);
	if (!abs || access(abs, R_OK)) {
		rc = -errno;
		tfs_err("HTTP setting ca_file = %s: %s", v, strerror(errno));
	} else if (strlen(abs) >= cap) {
		rc = -ENAMETOOLONG;
		tfs_err("HTTP setting ca_file = %s: path too long", v);
	} else {
		strcpy(out, abs);
	}
	free(abs);
	return rc;
}

static unsigned default_inflight = 32; /* set before any thread reads it */

void tfs_config_http_default_inflight(unsigned n)
{
	default_inflight = n < 1 ? 1 : n > 1024 ? 1024 : n;
}

int tfs_config_http(struct tfs_config_http *out)
{
	struct ini c;
	uint64_t v[10] = { 60000, 5000, 10000, 6, 100, 5000, default_inflight, 8ull << 20, 8, 0 };
	char ca[sizeof(out->ca_file)];
	static const uint64_t lo[10] = { 100, 100, 100, 0, 1, 1, 1, 1ull << 20, 1, 1ull << 20 };
	static const uint64_t hi[10] = { 3600000, 600000, 3600000,    100, 60000,
					 600000,  1024,	  1ull << 30, 64,  1ull << 50 };
	int rc = load(&c);

	if (rc)
		return rc;
	for (int i = 0; i < 10 && !rc; i++)
		rc = http_num(&c, http_keys[i], lo[i], hi[i], &v[i]);
	if (!rc)
		rc = http_ca_file(&c, ca, sizeof(ca));
	ini_free(&c);
	if (rc)
		return rc;
	*out = (struct tfs_config_http){
		.timeout_ms = (long)v[0],
		.connect_timeout_ms = (long)v[1],
		.stall_ms = (long)v[2],
		.retries = (unsigned)v[3],
		.backoff_ms = (unsigned)v[4],
		.backoff_max_ms = (unsigned)v[5],
		.max_inflight = (unsigned)v[6],
		.part_size = v[7],
		.parallel = (unsigned)v[8],
		.window = v[9],
	};
	memcpy(out->ca_file, ca, sizeof(ca));
	return 0;
}
