/* SPDX-License-Identifier: MIT */
/* http: libcurl easy handles pooled per client over one CURLSH (connections, DNS, TLS sessions),
 * a counting limit on requests in flight, and the retry loop. libcurl codes stop here: callers
 * see HTTP statuses and -errno. */
#include "http.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "object.h"

struct tfs_http {
	struct tfs_config_http cfg;
	uint64_t *retries; /* atomic, owned by the store */
	CURLSH *share;
	pthread_mutex_t share_lock[CURL_LOCK_DATA_LAST];
	pthread_mutex_t lock;
	pthread_cond_t cond; /* signalled when a slot frees up */
	CURL **idle;	     /* protected by lock: handles ready for reuse */
	size_t nidle;	     /* protected by lock */
	unsigned inflight;   /* protected by lock: requests holding a handle */
	int cancelled;	     /* atomic: tfs_http_cancel was called */
	struct tfs_workpool
		*pool; /* atomic: parallel ranges run here; NULL: threads of their own */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void share_lock_fn(CURL *c, curl_lock_data data, curl_lock_access access, void *arg)
{
	struct tfs_http *h = arg;

	(void)c;
	(void)access;
	pthread_mutex_lock(&h->share_lock[data]);
}

static void share_unlock_fn(CURL *c, curl_lock_data data, void *arg)
{
	struct tfs_http *h = arg;

	(void)c;
	pthread_mutex_unlock(&h->share_lock[data]);
}

int tfs_http_create(const struct tfs_config_http *cfg, uint64_t *retries, struct tfs_http **out)
{
	struct tfs_http *h;

	pthread_once(&global_once, global_init);
	if (global_rc != CURLE_OK) {
		tfs_err("libcurl initialisation failed: %s", curl_easy_strerror(global_rc));
		return -EIO;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->cfg = *cfg;
	h->retries = retries;
	h->idle = calloc(cfg->max_inflight, sizeof(*h->idle));
	h->share = curl_share_init();
	if (!h->idle || !h->share) {
		curl_share_cleanup(h->share);
		free(h->idle);
		free(h);
		return -ENOMEM;
	}
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&h->share_lock[i], NULL);
	pthread_mutex_init(&h->lock, NULL);
	pthread_cond_init(&h->cond, NULL);
	curl_share_setopt(h->share, CURLSHOPT_LOCKFUNC, share_lock_fn);
	curl_share_setopt(h->share, CURLSHOPT_UNLOCKFUNC, share_unlock_fn);
	curl_share_setopt(h->share, CURLSHOPT_USERDATA, h);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
	curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	*out = h;
	return 0;
}

void tfs_http_cancel(struct tfs_http *h)
{
	__atomic_store_n(&h->cancelled, 1, __ATOMIC_RELEASE);
}

static int cancelled(const struct tfs_http *h)
{
	return __atomic_load_n(&h->cancelled, __ATOMIC_ACQUIRE);
}

/* libcurl calls this about once a second and on every transfer step: abort when cancelled. */
static int progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return cancelled(arg);
}

void tfs_http_destroy(struct tfs_http *h)
{
	if (!h)
		return;
	assert(h->inflight == 0);
	for (size_t i = 0; i < h->nidle; i++)
		curl_easy_cleanup(h->idle[i]);
	curl_share_cleanup(h->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&h->share_lock[i]);
	pthread_mutex_destroy(&h->lock);
	pthread_cond_destroy(&h->cond);
	free(h->idle);
	free(h);
}

const struct tfs_config_http *tfs_http_config(const struct tfs_http *h)
{
	return &h->cfg;
}

/* Wait for a slot under the in-flight limit and take a handle. */
static CURL *handle_get(struct tfs_http *h)
{
	CURL *c = NULL;

	pthread_mutex_lock(&h->lock);
	while (h->inflight >= h->cfg.max_inflight)
		pthread_cond_wait(&h->cond, &h->lock);
	h->inflight++;
	if (h->nidle)
		c = h->idle[--h->nidle];
	pthread_mutex_unlock(&h->lock);
	if (c) {
		curl_easy_reset(c);
	} else if (!(c = curl_easy_init())) {
		pthread_mutex_lock(&h->lock);
		h->inflight--;
		pthread_cond_signal(&h->cond);
		pthread_mutex_unlock(&h->lock);
	}
	return c;
}

/* Give a handle back; a handle whose transfer failed is dropped with its connection. */
static void handle_put(struct tfs_http *h, CURL *c, int keep)
{
	pthread_mutex_lock(&h->lock);
	if (keep && h->nidle < h->cfg.max_inflight) {
		h->idle[h->nidle++] = c;
		c = NULL;
	}
	h->inflight--;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->lock);
	if (c)
		curl_easy_cleanup(c);
}

struct xfer {
	const struct tfs_http_req *req;
	struct tfs_http_resp *resp;
	uint64_t skip;	  /* body bytes still to drop (a 200 reply to a ranged request) */
	uint64_t skipped; /* bytes dropped so far */
	int full;	  /* dst is full: the transfer was stopped on purpose */
	int nomem;
	long retry_after; /* seconds, -1 when absent */
	size_t upload_off;
	char errbuf[CURL_ERROR_SIZE]; /* libcurl's own words on a failure */
};

static size_t write_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	const struct tfs_http_req *r = x->req;
	size_t n = size * nmemb, take;

	if (x->resp->status >= 300 && !r->out)
		return n; /* an error document: not the caller's bytes */
	if (x->skip) {
		size_t s = n < x->skip ? n : (size_t)x->skip;

		x->skip -= s;
		x->skipped += s;
		p += s;
		if (s == n)
			return size * nmemb;
		n -= s;
	}
	if (r->out) { /* an error document too: the caller may want its <Code> */
		if (tfs_buf_append(r->out, p, n)) {
			x->nomem = 1;
			return 0;
		}
		x->resp->body_len += n;
		return size * nmemb;
	}
	if (!r->dst) {
		x->skipped += n; /* a reply the caller does not want (a copy's result): counted */
		return size * nmemb;
	}
	take = r->dst_cap - x->resp->body_len;
	if (take > n)
		take = n;
	memcpy((uint8_t *)r->dst + x->resp->body_len, p, take);
	x->resp->body_len += take;
	if (x->resp->body_len == r->dst_cap && take < n) {
		x->full = 1;
		return 0; /* stop: everything asked for is here */
	}
	return size * nmemb;
}

static size_t read_cb(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb, left = x->req->body_len - x->upload_off;

	if (n > left)
		n = left;
	memcpy(p, (const uint8_t *)x->req->body + x->upload_off, n);
	x->upload_off += n;
	return n;
}

static int seek_cb(void *arg, curl_off_t off, int origin)
{
	struct xfer *x = arg;

	if (origin != SEEK_SET || off < 0 || (size_t)off > x->req->body_len)
		return CURL_SEEKFUNC_FAIL;
	x->upload_off = (size_t)off;
	return CURL_SEEKFUNC_OK;
}

static int64_t parse_http_date(const char *v)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (!strptime(v, "%a, %d %b %Y %H:%M:%S", &tm))
		return -1;
	return (int64_t)timegm(&tm);
}

static size_t header_cb(char *p, size_t size, size_t nitems, void *arg)
{
	struct xfer *x = arg;
	struct tfs_http_resp *r = x->resp;
	size_t n = size * nitems;
	char line[512], *v;

	if (n >= sizeof(line))
		return n; /* nothing we read is that long */
	memcpy(line, p, n);
	line[n] = 0;
	while (n && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		line[--n] = 0;
	if (!strncmp(line, "HTTP/", 5)) {
		/* A new response (after a 100 Continue, too): forget the previous one's fields. */
		char *sp = strchr(line, ' ');

		r->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		r->content_length = r->range_total = r->last_modified = -1;
		r->etag[0] = r->sse[0] = 0;
		x->retry_after = -1;
		x->skip = x->req->ranged && r->status == 200 ? x->req->range_off : 0;
		x->skipped = 0;
		r->body_len = 0;
		return size * nitems;
	}
	v = strchr(line, ':');
	if (!v)
		return size * nitems;
	*v++ = 0;
	while (*v == ' ' || *v == '\t')
		v++;
	if (!strcasecmp(line, "content-length")) {
		r->content_length = strtoll(v, NULL, 10);
	} else if (!strcasecmp(line, "content-range")) {
		char *slash = strchr(v, '/');

		if (slash && slash[1] != '*')
			r->range_total = strtoll(slash + 1, NULL, 10);
	} else if (!strcasecmp(line, "etag")) {
		snprintf(r->etag, sizeof(r->etag), "%s", v);
	} else if (!strcasecmp(line, "x-amz-server-side-encryption")) {
		snprintf(r->sse, sizeof(r->sse), "%s", v);
	} else if (!strcasecmp(line, "x-amz-server-side-encryption-customer-algorithm")) {
		snprintf(r->sse, sizeof(r->sse), "SSE-C");
	} else if (!strcasecmp(line, "last-modified")) {
		r->last_modified = parse_http_date(v);
	} else if (!strcasecmp(line, "retry-after")) {
		x->retry_after = strtol(v, NULL, 10);
	}
	return size * nitems;
}

static uint64_t rnd_next(void)
{
	static _Thread_local uint64_t s;

	if (!s)
		s = tfs_now_ns() ^ ((uint64_t)(uintptr_t)&s << 17) ^ (uint64_t)getpid();
	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	return s;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static uint64_t backoff_ms(const struct tfs_config_http *cfg, unsigned attempt)
{
	uint64_t cap = cfg->backoff_ms;

	for (unsigned i = 0; i < attempt && cap < cfg->backoff_max_ms; i++)
		cap *= 2;
	if (cap > cfg->backoff_max_ms)
		cap = cfg->backoff_max_ms;
	/* "Full jitter": spreads the retries of many clients that failed together. */
	return cap / 2 + rnd_next() % (cap / 2 + 1);
}

void tfs_http_backoff(const struct tfs_http *h, unsigned attempt)
{
	sleep_ms(backoff_ms(&h->cfg, attempt));
}

int tfs_http_resp_size(const struct tfs_http_resp *resp, const char *what, uint64_t *size,
		       int64_t *mtime)
{
	if (resp->content_length < 0) {
		tfs_err("%s: no Content-Length in the reply", what);
		return -EIO;
	}
	*size = (uint64_t)resp->content_length;
	if (mtime)
		*mtime = resp->last_modified;
	return 0;
}

int tfs_http_status_errno(long status)
{
	if (status < 400)
		return 0;
	switch (status) {
	case 404:
	case 410:
		return -ENOENT;
	case 401:
	case 403:
		return -EACCES;
	case 405:
	case 501:
		return -EOPNOTSUPP;
	case 412:
		return -EAGAIN;
	case 416:
		return -ERANGE;
	default:
		return -EIO;
	}
}

static int status_retryable(long s)
{
	return s == 408 || s == 429 || s == 500 || s == 502 || s == 503 || s == 504;
}

/* Transport failures worth another attempt, and the -errno when they persist. */
static int curl_retryable(CURLcode c, int *err)
{
	switch (c) {
	case CURLE_OPERATION_TIMEDOUT:
		*err = -ETIMEDOUT;
		return 1;
	case CURLE_COULDNT_CONNECT:
		*err = -ECONNREFUSED;
		return 1;
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
		*err = -ECONNRESET;
		return 1;
	case CURLE_COULDNT_RESOLVE_HOST:
		*err = -EHOSTUNREACH;
		return 0;
	case CURLE_OUT_OF_MEMORY:
		*err = -ENOMEM;
		return 0;
	default:
		*err = -EIO;
		return 0;
	}
}

#define RECV_BUFFER (512L << 10)

static int setup(CURL *c, const struct tfs_http *h, const struct tfs_http_req *req, struct xfer *x,
		 struct curl_slist *hl)
{
	long stall_s = (h->cfg.stall_ms + 999) / 1000;

	curl_easy_setopt(c, CURLOPT_SHARE, h->share);
	/* The shared connection cache keeps at most this many idle connections; libcurl's default
	 * (5, restored by every curl_easy_reset) would close and reopen connections, each paying a
	 * handshake and slow start, as soon as more requests than that are in flight. */
	curl_easy_setopt(c, CURLOPT_MAXCONNECTS, (long)h->cfg.max_inflight);
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, x->errbuf);
	if (h->cfg.ca_file[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, h->cfg.ca_file);
	/* Bodies are MiBs: receive them in large reads, not libcurl's default 16 KiB. */
	curl_easy_setopt(c, CURLOPT_BUFFERSIZE, RECV_BUFFER);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, progress_cb);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, (void *)h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, h->cfg.connect_timeout_ms);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, h->cfg.timeout_ms);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, stall_s > 0 ? stall_s : 1L);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	/* Never let a body be decoded behind our back: Content-Length must be the bytes we get. */
	curl_easy_setopt(c, CURLOPT_HTTP_CONTENT_DECODING, 0L);
	if (!strcmp(req->method, "HEAD")) {
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	} else if (!strcmp(req->method, "PUT")) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_SEEKFUNCTION, seek_cb);
		curl_easy_setopt(c, CURLOPT_SEEKDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
	} else if (!strcmp(req->method, "POST")) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, req->body ? req->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	} else if (strcmp(req->method, "GET")) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
	}
	return 0;
}

/* Build the header list for one attempt. */
static int build_headers(const struct tfs_http_req *req, struct curl_slist **out)
{
	struct tfs_buf b = { 0 };
	struct curl_slist *l = NULL, *t;
	int rc = 0;

	if (req->headers)
		rc = req->headers(req->headers_arg, &b);
	/* No "Expect: 100-continue" round trip, no form content type on POST. */
	if (!rc)
		rc = tfs_buf_append(&b, "Expect:", 8);
	if (!rc && !strcmp(req->method, "POST"))
		rc = tfs_buf_append(&b, "Content-Type: application/xml", 30);
	for (size_t i = 0; !rc && i < b.len; i += strlen((char *)b.data + i) + 1) {
		t = curl_slist_append(l, (char *)b.data + i);
		if (!t)
			rc = -ENOMEM;
		else
			l = t;
	}
	if (b.data)
		explicit_bzero(b.data, b.len); /* may hold a session token */
	tfs_buf_free(&b);
	if (rc)
		curl_slist_free_all(l);
	else
		*out = l;
	return rc;
}

/* A complete 2xx body is exactly Content-Length bytes (less what a ranged read skipped or did
 * not want); anything else was cut short on the way. */
static int body_complete(const struct tfs_http_req *req, const struct tfs_http_resp *resp,
			 const struct xfer *x)
{
	if (!strcmp(req->method, "HEAD") || resp->status >= 300 || x->full ||
	    resp->content_length < 0)
		return 1;
	if (req->dst && resp->body_len == req->dst_cap)
		return 1;
	return (uint64_t)resp->content_length == resp->body_len + x->skipped;
}

int tfs_http_do(struct tfs_http *h, const struct tfs_http_req *req, struct tfs_http_resp *resp)
{
	unsigned attempts = h->cfg.retries + 1;
	char last[CURL_ERROR_SIZE] = "";
	long retry_after = -1;
	int err = -EIO;
	unsigned a;

	for (a = 0; a < attempts; a++) {
		struct curl_slist *hl = NULL;
		struct xfer x = { .req = req, .resp = resp, .retry_after = -1 };
		CURLcode cc;
		CURL *c;
		int retry = 0, keep = 1, rc;

		if (cancelled(h))
			return -ECANCELED;
		memset(resp, 0, sizeof(*resp));
		resp->content_length = resp->range_total = resp->last_modified = -1;
		if (req->out)
			req->out->len = 0;
		if (a) {
			uint64_t ms = backoff_ms(&h->cfg, a - 1);

			if (retry_after > 0 && (uint64_t)retry_after * 1000 < h->cfg.backoff_max_ms)
				ms = (uint64_t)retry_after * 1000;
			sleep_ms(ms);
			if (h->retries)
				__atomic_add_fetch(h->retries, 1, __ATOMIC_RELAXED);
		}
		rc = build_headers(req, &hl);
		if (rc)
			return rc;
		c = handle_get(h);
		if (!c) {
			curl_slist_free_all(hl);
			return -ENOMEM;
		}
		setup(c, h, req, &x, hl);
		cc = curl_easy_perform(c);
		if (cc == CURLE_WRITE_ERROR && x.full)
			cc = CURLE_OK;
		if (x.nomem) {
			handle_put(h, c, 0);
			curl_slist_free_all(hl);
			return -ENOMEM;
		}
		if (cc != CURLE_OK) {
			retry = curl_retryable(cc, &err);
			snprintf(last, sizeof(last), "%s",
				 x.errbuf[0] ? x.errbuf : curl_easy_strerror(cc));
			keep = 0;
		} else if (status_retryable(resp->status)) {
			retry = 1;
			err = -EIO;
			snprintf(last, sizeof(last), "server busy or failing");
		} else if (!body_complete(req, resp, &x)) {
			/* curl normally reports this as a partial file; be sure anyway. */
			retry = 1;
			err = -EIO;
			snprintf(last, sizeof(last), "body length differs from Content-Length");
			keep = 0;
		}
		retry_after = x.retry_after;
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL); /* x ends with this attempt */
		handle_put(h, c, keep);
		curl_slist_free_all(hl);
		if (cc != CURLE_OK && cancelled(h))
			return -ECANCELED; /* asked for: not a failure to report */
		if (!retry && cc == CURLE_OK)
			return 0;
		if (!retry) {
			a++;
			break;
		}
		tfs_debug("%s: attempt %u failed (%s%s%ld), retrying",
			  req->what ? req->what : req->url, a + 1, last,
			  resp->status ? ", status " : "", resp->status);
		if (cc == CURLE_OK && a + 1 == attempts)
			return 0; /* out of retries: the caller maps the final status */
	}
	tfs_err("%s: %s after %u attempt%s", req->what ? req->what : req->url, last, a,
		a == 1 ? "" : "s");
	return err;
}

void tfs_http_use_pool(struct tfs_http *h, struct tfs_workpool *pool)
{
	__atomic_store_n(&h->pool, pool, __ATOMIC_RELEASE);
}

struct tfs_workpool *tfs_http_pool(struct tfs_http *h)
{
	return __atomic_load_n(&h->pool, __ATOMIC_ACQUIRE);
}
