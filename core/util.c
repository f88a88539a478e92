/* SPDX-License-Identifier: MIT */
/* util: growable buffers, logging, size parsing and name rules shared by every module. */
#include "util.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

void *tfs_grow(void *p, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 16, bytes;
	void *g;

	if (need <= *cap)
		return p;
	while (ncap < need)
		ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
	if (__builtin_mul_overflow(ncap, size, &bytes) || !(g = realloc(p, bytes)))
		return NULL;
	*cap = ncap;
	return g;
}

int tfs_buf_reserve(struct tfs_buf *b, size_t extra)
{
	size_t need;
	uint8_t *p;

	if (__builtin_add_overflow(b->len, extra, &need) || need == SIZE_MAX)
		return -ENOMEM;
	need += 1; /* room for a terminating NUL */
	/* At least 256 bytes at first: tfs_grow doubles from 16 up to there. */
	p = tfs_grow(b->data, &b->cap, need < 256 ? 256 : need, 1);
	if (!p)
		return -ENOMEM;
	b->data = p;
	return 0;
}

int tfs_buf_append(struct tfs_buf *b, const void *p, size_t n)
{
	int rc = tfs_buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int tfs_buf_printf(struct tfs_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n, rc;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	rc = tfs_buf_reserve(b, (size_t)n);
	if (rc)
		return rc;
	va_start(ap, fmt);
	vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
	return 0;
}

uint8_t *tfs_buf_take(struct tfs_buf *b, size_t *len)
{
	uint8_t *p = b->data;

	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return p;
}

void tfs_buf_free(struct tfs_buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file; /* protected by log_lock; NULL means stderr */
static int log_syslog; /* protected by log_lock */
static int log_tee;    /* errors also to stderr while logging elsewhere; protected by log_lock */
static enum tfs_log_level log_level = TFS_LOG_INFO;

int tfs_log_open(const char *path)
{
	FILE *f = fopen(path, "ae");
	int rc = 0;

	if (!f)
		return -errno;
	setvbuf(f, NULL, _IOLBF, 0);
	pthread_mutex_lock(&log_lock);
	if (log_file)
		fclose(log_file);
	log_file = f;
	pthread_mutex_unlock(&log_lock);
	return rc;
}

void tfs_log_use_syslog(int on)
{
	pthread_mutex_lock(&log_lock);
	log_syslog = on;
	if (on)
		openlog("tensorfs", LOG_PID, LOG_DAEMON);
	pthread_mutex_unlock(&log_lock);
}

void tfs_log_errors_to_stderr(int on)
{
	pthread_mutex_lock(&log_lock);
	log_tee = on;
	pthread_mutex_unlock(&log_lock);
}

void tfs_log_set_level(enum tfs_log_level lvl)
{
	log_level = lvl;
}

void tfs_log(enum tfs_log_level lvl, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	static const int prio[] = { LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG };
	char msg[1024];
	va_list ap;

	if (lvl > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	if (log_syslog && !log_file) {
		syslog(prio[lvl], "%s", msg);
	} else {
		FILE *f = log_file ? log_file : stderr;
		struct timespec ts;
		struct tm tm;
		char when[32];

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
		fprintf(f, "tensorfs[%d] %s.%03ldZ %s: %s\n", (int)getpid(), when,
			ts.tv_nsec / 1000000, names[lvl], msg);
		fflush(f);
	}
	if (log_tee && (log_file || log_syslog) && lvl == TFS_LOG_ERROR)
		fprintf(stderr, "tensorfs: %s\n", msg);
	pthread_mutex_unlock(&log_lock);
}

const char *tfs_size_str(double v, char *buf, size_t cap)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
	return buf;
}

int tfs_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mult = 1;

	if (!s || !*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (tolower((unsigned char)*end)) {
	case 0:
		break;
	case 'k':
		mult = 1ull << 10;
		break;
	case 'm':
		mult = 1ull << 20;
		break;
	case 'g':
		mult = 1ull << 30;
		break;
	case 't':
		mult = 1ull << 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end) {
		end++;
		if (!strcasecmp(end, "ib") || !strcasecmp(end, "b"))
			end += strlen(end);
		if (*end)
			return -EINVAL;
	}
	if (tfs_mul_u64(v, mult, out))
		return -EINVAL;
	return 0;
}

int tfs_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

size_t tfs_percent_decode(const char *s, size_t n, char *dst)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < n && (hi = tfs_hex_digit(s[i + 1])) >= 0 &&
		    (lo = tfs_hex_digit(s[i + 2])) >= 0) {
			dst[k++] = (char)(hi * 16 + lo);
			i += 2;
		} else {
			dst[k++] = s[i];
		}
	}
	dst[k] = 0;
	return k;
}

int tfs_opendirat(int dirfd, const char *path, DIR **out)
{
	int fd = openat(dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -errno;
	*out = fdopendir(fd);
	if (!*out) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return 0;
}

int tfs_utf8_valid(const void *p, size_t n)
{
	const uint8_t *s = p, *end = s + n;

	while (s < end) {
		uint32_t cp;
		size_t len;
		uint64_t w;

		/* Eight ASCII bytes at a time: most text is. */
		if (end - s >= 8 && (memcpy(&w, s, 8), !(w & 0x8080808080808080ull))) {
			s += 8;
			continue;
		}
		if (*s < 0x80) {
			s++;
			continue;
		}
		if (*s >= 0xc2 && *s <= 0xdf) {
			len = 2;
			cp = *s & 0x1f;
		} else if (*s >= 0xe0 && *s <= 0xef) {
			len = 3;
			cp = *s & 0x0f;
		} else if (*s >= 0xf0 && *s <= 0xf4) {
			len = 4;
			cp = *s & 0x07;
		} else {
			return 0;
		}
		if ((size_t)(end - s) < len)
			return 0;
		for (size_t i = 1; i < len; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		/* Overlong, surrogate or out of range. */
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		s += len;
	}
	return 1;
}

int tfs_is_lower_hex(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') || (p[i] >= 'a' && p[i] <= 'f')))
			return 0;
	return 1;
}

int tfs_name_valid(const char *name)
{
	size_t n = 0;

	if (!name || !*name || name[0] == '.' || name[0] == '-')
		return 0;
	for (const char *p = name; *p; p++, n++) {
		if (!isalnum((unsigned char)*p) && *p != '_' && *p != '.' && *p != '-')
			return 0;
	}
	return n <= 128;
}

int tfs_pread_full(int fd, void *buf, size_t n, uint64_t off)
{
	uint8_t *p = buf;

	while (n) {
		ssize_t r = pread(fd, p, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int tfs_pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t r = pwrite(fd, p, n, (off_t)off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO;
		p += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

int tfs_read_fd(int fd, struct tfs_buf *out)
{
	struct stat sb;
	int rc;

	out->len = 0;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -EISDIR;
	if ((uint64_t)sb.st_size > SIZE_MAX / 2)
		return -EFBIG;
	rc = tfs_buf_reserve(out, (size_t)sb.st_size);
	if (!rc)
		rc = tfs_pread_full(fd, out->data, (size_t)sb.st_size, 0);
	if (rc)
		return rc;
	out->len = (size_t)sb.st_size;
	out->data[out->len] = 0;
	return 0;
}

int tfs_write_full(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	while (n) {
		ssize_t r = write(fd, p, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

void tfs_format_utc(int64_t seconds, const char *fmt, char *out, size_t cap)
{
	time_t t = (time_t)seconds;
	struct tm tm;

	if ((int64_t)t != seconds || !gmtime_r(&t, &tm) || !strftime(out, cap, fmt, &tm))
		snprintf(out, cap, "@%lld", (long long)seconds);
}

uint64_t tfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void tfs_cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* tfs_now_ns's clock */
	pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
}

void tfs_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m, uint64_t at_ns)
{
	const struct timespec ts = { (time_t)(at_ns / 1000000000u), (long)(at_ns % 1000000000u) };

	pthread_cond_timedwait(c, m, &ts);
}

/* --- mountinfo ------------------------------------------------------------------------------ */

/* mountinfo escapes space, tab, newline and backslash as \ooo. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

int tfs_mountinfo_find(const char *path, struct tfs_mountinfo *out)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		char *save, *fld[5], *dash = strstr(line, " - "), *type, *src;
		unsigned maj, min;
		int n = 0;

		if (!dash)
			continue;
		*dash = 0;
		for (char *t = strtok_r(line, " ", &save); t && n < 5;
		     t = strtok_r(NULL, " ", &save))
			fld[n++] = t;
		if (n < 5)
			continue;
		unescape(fld[4]);
		if (strcmp(fld[4], path))
			continue;
		type = strtok_r(dash + 3, " \n", &save);
		src = type ? strtok_r(NULL, " \n", &save) : NULL;
		/* Later lines are mounts on top of earlier ones: keep the last. */
		snprintf(out->fstype, sizeof(out->fstype), "%s", type ? type : "");
		snprintf(out->source, sizeof(out->source), "%s", src ? src : "");
		if (src)
			unescape(out->source);
		out->dev[0] = 0;
		if (sscanf(fld[2], "%u:%u", &maj, &min) == 2)
			snprintf(out->dev, sizeof(out->dev), "%u:%u", maj, min);
		found = 1;
	}
	free(line);
	fclose(f);
	return found;
}
