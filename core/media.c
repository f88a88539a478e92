/* SPDX-License-Identifier: MIT */
/* media: a demuxer and a decoder a file; frames converted by swscale (as ffmpeg's scale filter
 * does) and picked by timestamp (as its fps filter does); samples converted by swresample.
 * FFmpeg is called through fflib's table (its libraries are loaded on first use). */
#include "media.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fflib.h"
#include "source.h"

#define MAX_FRAMES (1u << 20) /* frames a video may give at most */

struct dec {
	AVFormatContext *fmt;
	AVCodecContext *cc;
	AVPacket *pkt;
	AVFrame *frame;
	AVFrame *turned; /* the frame turned upright, when the stream says to */
	AVFrame *rgb;	 /* the frame as RGB first, for a format the turn cannot take */
	struct SwsContext *to_rgb;
	int stream;
	int turn; /* clockwise degrees the frames are turned by: 0, 90, 180 or 270 */
	/* A URL's object, demuxed as it arrives, or a file's bytes read already (mem): FFmpeg
	 * reads them through io. */
	struct tfs_source *src;
	const struct tfs_buf *mem;
	AVIOContext *io;
	uint64_t pos; /* where io reads next */
	int io_rc;    /* the fetch's -errno, once a read of it failed */
};

static void dec_close(struct dec *d)
{
	tfs_ff.sws_freeContext(d->to_rgb);
	tfs_ff.av_frame_free(&d->rgb);
	tfs_ff.av_frame_free(&d->turned);
	tfs_ff.av_frame_free(&d->frame);
	tfs_ff.av_packet_free(&d->pkt);
	tfs_ff.avcodec_free_context(&d->cc);
	tfs_ff.avformat_close_input(&d->fmt); /* not io: a context of the caller's own */
	if (d->io) {
		tfs_ff.av_free(d->io->buffer); /* FFmpeg's, perhaps replaced since */
		tfs_ff.avio_context_free(&d->io);
	}
	tfs_source_close(d->src);
	d->src = NULL;
}

/* A decode's result once a URL's object was checked whole (tfs_source_verify): bytes damaged on
 * the way are the fetch's failure, not the file's, whatever the demuxer made of them. */
static int dec_verify(const struct dec *d, int rc, char *err, size_t cap)
{
	const int v = d->src ? tfs_source_verify(d->src) : 0;

	if (!v || rc == -ELIBACC)
		return rc;
	snprintf(err, cap, "cannot fetch: %s",
		 v == -EBADMSG ? "its bytes were damaged on the way" : strerror(-v));
	return v;
}

static int av_fail(char *err, size_t cap, const char *what, int averr)
{
	char msg[128];

	tfs_ff.av_strerror(averr, msg, sizeof(msg));
	snprintf(err, cap, "%s: %s", what, msg);
	return -EINVAL;
}

/* A failure of FFmpeg's while it read d: the fetch's when that failed (the file is not to blame:
 * its -errno, not -EINVAL), else av_fail's. */
static int dec_fail(const struct dec *d, char *err, size_t cap, const char *what, int averr)
{
	if (!d->io_rc)
		return av_fail(err, cap, what, averr);
	snprintf(err, cap, "cannot fetch: %s", strerror(-d->io_rc));
	return d->io_rc;
}

static uint64_t io_size(const struct dec *d)
{
	return d->mem ? d->mem->len : tfs_source_size(d->src);
}

/* io's reads and seeks: the bytes in memory, or the source's, each read waiting for its own
 * range. */
static int io_read(void *opaque, uint8_t *buf, int len)
{
	struct dec *d = opaque;
	const uint64_t size = io_size(d);
	size_t n;
	int rc = 0;

	if (d->pos >= size)
		return AVERROR_EOF;
	n = size - d->pos < (uint64_t)len ? (size_t)(size - d->pos) : (size_t)len;
	if (d->mem)
		memcpy(buf, d->mem->data + d->pos, n);
	else
		rc = tfs_source_pread(d->src, buf, n, d->pos);
	if (rc) {
		d->io_rc = rc;
		return AVERROR(-rc);
	}
	d->pos += n;
	return (int)n;
}

static int64_t io_seek(void *opaque, int64_t off, int whence)
{
	struct dec *d = opaque;
	const int64_t size = (int64_t)io_size(d);
	int64_t to;

	switch (whence & ~AVSEEK_FORCE) {
	case AVSEEK_SIZE:
		return size;
	case SEEK_SET:
		to = off;
		break;
	case SEEK_CUR:
		to = (int64_t)d->pos + off;
		break;
	case SEEK_END:
		to = size + off;
		break;
	default:
		return AVERROR(EINVAL);
	}
	if (to < 0)
		return AVERROR(EINVAL);
	d->pos = (uint64_t)to;
	return to;
}

/* The buffer FFmpeg reads through: a read of io asks for this much at most. */
#define IO_BUFFER (256u << 10)

/* Open path for FFmpeg: its bytes read already (file) through io; a local file by FFmpeg
 * itself; a URL's object through io, fetched (its last parts first: an mp4's index may be at its
 * end) while it is demuxed. */
static int dec_input(struct dec *d, const char *path, const struct tfs_buf *file, char *err,
		     size_t cap)
{
	uint8_t *buf;
	int rc = 0;

	if (!file && !tfs_source_is_url(path)) {
		rc = tfs_ff.avformat_open_input(&d->fmt, path, NULL, NULL);
		return rc < 0 ? av_fail(err, cap, "cannot open", rc) : 0;
	}
	d->mem = file;
	if (!file)
		rc = tfs_source_open(path, TFS_SOURCE_TAIL_FIRST, &d->src);
	if (rc) {
		snprintf(err, cap, "cannot %s: %s", rc == -ENOENT ? "open" : "fetch",
			 strerror(-rc));
		return rc == -ENOENT ? -EINVAL : rc; /* no such object: as a local file */
	}
	buf = tfs_ff.av_malloc(IO_BUFFER);
	d->io = buf ? tfs_ff.avio_alloc_context(buf, IO_BUFFER, 0, d, io_read, NULL, io_seek)
		    : NULL;
	d->fmt = tfs_ff.avformat_alloc_context();
	if (!d->io || !d->fmt) {
		if (!d->io)
			tfs_ff.av_free(buf);
		return -ENOMEM;
	}
	d->fmt->pb = d->io;
	/* path names the file to the demuxer's probe (a raw stream's extension). When it fails,
	 * avformat_open_input frees fmt, not io. */
	rc = tfs_ff.avformat_open_input(&d->fmt, path, NULL, NULL);
	return rc < 0 ? dec_fail(d, err, cap, "cannot open", rc) : 0;
}

static int dec_open(struct dec *d, const char *path, const struct tfs_buf *file,
		    enum AVMediaType type, char *err, size_t cap)
{
	const AVCodec *codec = NULL;
	int rc;

	memset(d, 0, sizeof(*d));
	rc = dec_input(d, path, file, err, cap);
	if (rc)
		return rc;
	rc = tfs_ff.avformat_find_stream_info(d->fmt, NULL);
	if (rc < 0)
		return dec_fail(d, err, cap, "cannot read its streams", rc);
	d->stream = tfs_ff.av_find_best_stream(d->fmt, type, -1, -1, &codec, 0);
	if (d->stream < 0 || !codec) {
		snprintf(err, cap, "no %s stream a decoder here takes",
			 type == AVMEDIA_TYPE_VIDEO ? "video" : "audio");
		return -EINVAL;
	}
	d->cc = tfs_ff.avcodec_alloc_context3(codec);
	d->pkt = tfs_ff.av_packet_alloc();
	d->frame = tfs_ff.av_frame_alloc();
	if (!d->cc || !d->pkt || !d->frame)
		return -ENOMEM;
	rc = tfs_ff.avcodec_parameters_to_context(d->cc, d->fmt->streams[d->stream]->codecpar);
	/* One thread a file: files are decoded in parallel, and the frames do not depend on it. */
	d->cc->thread_count = 1;
	if (rc >= 0)
		rc = tfs_ff.avcodec_open2(d->cc, codec, NULL);
	return rc < 0 ? av_fail(err, cap, "cannot open its decoder", rc) : 0;
}

/* The next decoded frame (1), the end (0), or an error. */
static int dec_next(struct dec *d, char *err, size_t cap)
{
	for (;;) {
		int rc = tfs_ff.avcodec_receive_frame(d->cc, d->frame);

		if (rc >= 0)
			return 1;
		if (rc == AVERROR_EOF) /* a demuxer may take a failed read for the end */
			return d->io_rc ? dec_fail(d, err, cap, "", rc) : 0;
		if (rc != AVERROR(EAGAIN))
			return dec_fail(d, err, cap, "damaged", rc);
		rc = tfs_ff.av_read_frame(d->fmt, d->pkt);
		if (rc == AVERROR_EOF) {
			tfs_ff.avcodec_send_packet(d->cc, NULL); /* drain */
			continue;
		}
		if (rc < 0)
			return dec_fail(d, err, cap, "cannot read", rc);
		if (d->pkt->stream_index == d->stream) {
			rc = tfs_ff.avcodec_send_packet(d->cc, d->pkt);
			if (rc < 0 && rc != AVERROR(EAGAIN)) {
				tfs_ff.av_packet_unref(d->pkt);
				return dec_fail(d, err, cap, "damaged", rc);
			}
		}
		tfs_ff.av_packet_unref(d->pkt);
	}
}

/* --- video ------------------------------------------------------------------------------------ */

/* How the stream's display matrix turns its frames, as the ffmpeg command's autorotation reads
 * it: 90, 180 or 270 degrees clockwise, else 0 (a turn by another angle is not applied). */
static int stream_turn(const AVStream *st)
{
	const int32_t *m = NULL;
	double theta;

#if TFS_FF_CODECPAR_SIDE_DATA
	const AVPacketSideData *sd = tfs_ff.av_packet_side_data_get(
		st->codecpar->coded_side_data, st->codecpar->nb_coded_side_data,
		AV_PKT_DATA_DISPLAYMATRIX);

	if (sd && sd->size >= 9 * sizeof(int32_t))
		m = (const int32_t *)sd->data;
#else
	size_t size = 0;
	const uint8_t *sd = tfs_ff.av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);

	if (sd && size >= 9 * sizeof(int32_t))
		m = (const int32_t *)sd;
#endif
	if (!m)
		return 0;
	theta = -round(tfs_ff.av_display_rotation_get(m));
	if (isnan(theta))
		return 0;
	theta -= 360 * floor(theta / 360 + 0.9 / 360);
	return fabs(theta - 90) < 1    ? 90
	       : fabs(theta - 180) < 1 ? 180
	       : fabs(theta - 270) < 1 ? 270
				       : 0;
}

/* Turn frame in by turn degrees clockwise into out, plane by plane, as ffmpeg's transpose
 * (clock, cclock) and hflip + vflip filters do: the same bytes. -ENOTSUP for a format they
 * would not take as it is (a palette, or chroma subsampled unevenly for a quarter turn). */
static int turn_frame(const AVFrame *in, AVFrame *out, int turn)
{
	const AVPixFmtDescriptor *desc = tfs_ff.av_pix_fmt_desc_get(in->format);
	const int quarter = turn != 180;

	if (!desc ||
	    (desc->flags &
	     (AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL)) ||
	    (quarter && desc->log2_chroma_w != desc->log2_chroma_h))
		return -ENOTSUP;
	if (out->format != in->format || out->width != (quarter ? in->height : in->width) ||
	    out->height != (quarter ? in->width : in->height)) {
		tfs_ff.av_frame_unref(out);
		out->format = in->format;
		out->width = quarter ? in->height : in->width;
		out->height = quarter ? in->width : in->height;
		if (tfs_ff.av_frame_get_buffer(out, 0) < 0)
			return -ENOMEM;
	}
	for (int p = 0; p < 4 && in->data[p]; p++) {
		int elem = 0, chroma = 0, iw, ih, ow, oh;

		for (int c = 0; c < desc->nb_components; c++) {
			if (desc->comp[c].plane != p)
				continue;
			elem = desc->comp[c].step > elem ? desc->comp[c].step : elem;
			chroma |= (c == 1 || c == 2) && desc->nb_components >= 3 &&
				  !(desc->flags & AV_PIX_FMT_FLAG_RGB);
		}
		if (!elem)
			return -ENOTSUP;
		iw = chroma ? AV_CEIL_RSHIFT(in->width, desc->log2_chroma_w) : in->width;
		ih = chroma ? AV_CEIL_RSHIFT(in->height, desc->log2_chroma_h) : in->height;
		ow = quarter ? ih : iw;
		oh = quarter ? iw : ih;
		for (int r = 0; r < oh; r++) {
			uint8_t *dst = out->data[p] + (ptrdiff_t)r * out->linesize[p];

			for (int c = 0; c < ow; c++) {
				const int sr = turn == 90    ? ih - 1 - c
					       : turn == 270 ? c
							     : ih - 1 - r;
				const int sc = turn == 90    ? r
					       : turn == 270 ? iw - 1 - r
							     : iw - 1 - c;

				memcpy(dst + (size_t)c * elem,
				       in->data[p] + (ptrdiff_t)sr * in->linesize[p] +
					       (size_t)sc * elem,
				       (size_t)elem);
			}
		}
	}
	return 0;
}

/* The decoded frame upright: itself, or turned as the stream says (converted first when the
 * turn does not take its format; scaled: whether the frame is scaled after). */
static const AVFrame *upright(struct dec *d, int scaled, int *rc)
{
	const AVFrame *f = d->frame;

	*rc = 0;
	if (!d->turn)
		return f;
	if (!d->turned && !(d->turned = tfs_ff.av_frame_alloc())) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = turn_frame(f, d->turned, d->turn);
	if (*rc == -ENOTSUP) {
		/* As the ffmpeg command's graph converts it for the turn (its default scaler,
		 * bicubic): to RGB when nothing scales after the turn (the output's format
		 * reaches back to it), else 8-bit YUV to 4:4:4 and anything else to RGB. */
		const AVPixFmtDescriptor *desc = tfs_ff.av_pix_fmt_desc_get(f->format);
		const enum AVPixelFormat to =
			scaled && desc &&
					!(desc->flags &
					  (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL)) &&
					desc->nb_components >= 3 && desc->comp[0].depth == 8
				? AV_PIX_FMT_YUV444P
				: AV_PIX_FMT_RGB24;

		if (!d->rgb && !(d->rgb = tfs_ff.av_frame_alloc())) {
			*rc = -ENOMEM;
			return NULL;
		}
		if (d->rgb->width != f->width || d->rgb->height != f->height ||
		    d->rgb->format != to) {
			tfs_ff.av_frame_unref(d->rgb);
			d->rgb->format = to;
			d->rgb->width = f->width;
			d->rgb->height = f->height;
			if (tfs_ff.av_frame_get_buffer(d->rgb, 0) < 0) {
				*rc = -ENOMEM;
				return NULL;
			}
		}
		d->to_rgb = tfs_ff.sws_getCachedContext(d->to_rgb, f->width, f->height, f->format,
							f->width, f->height, to, SWS_BICUBIC, NULL,
							NULL, NULL);
		if (!d->to_rgb) {
			*rc = -EINVAL;
			return NULL;
		}
		tfs_ff.sws_scale(d->to_rgb, (const uint8_t *const *)f->data, f->linesize, 0,
				 f->height, d->rgb->data, d->rgb->linesize);
		*rc = turn_frame(d->rgb, d->turned, d->turn);
	}
	return *rc ? NULL : d->turned;
}

struct vout {
	struct tfs_video *v;
	uint64_t cap; /* room in v->t */
	uint8_t *cur; /* the frame held for the fps pick (h x w x 3), or NULL */
	double cur_t;
};

static int push_frame(struct vout *o, const uint8_t *px, double t)
{
	struct tfs_video *v = o->v;
	const size_t fb = (size_t)v->w * v->h * 3;
	int rc;

	if (v->n == MAX_FRAMES)
		return -E2BIG;
	if (v->n == o->cap) {
		const uint64_t cap = o->cap ? 2 * o->cap : 64;
		double *gt = realloc(v->t, cap * sizeof(*gt));

		if (!gt)
			return -ENOMEM;
		v->t = gt;
		o->cap = cap;
	}
	rc = tfs_spool_append(&v->held, px, fb);
	if (rc)
		return rc;
	v->t[v->n++] = t;
	return 0;
}

/* Frame f, converted to the output's size and fit, into dst (h x w x 3). */
static int convert(const AVFrame *f, struct SwsContext **sws, const struct tfs_video_opts *o,
		   uint32_t w, uint32_t h, uint8_t *dst, uint8_t **tmp, size_t *tmp_cap)
{
	uint32_t sw = w, sh = h, top = 0, left = 0;
	uint8_t *to = dst;
	int stride;

	if (o->w && o->fit == TFS_FIT_CROP) {
		/* The side that limits to its target, the other as torchvision's int(); then the
		 * centre, its offsets rounded half to even (as images). */
		if ((uint64_t)w * f->height >= (uint64_t)h * f->width) {
			sw = w;
			sh = (uint32_t)((double)w * f->height / f->width);
		} else {
			sh = h;
			sw = (uint32_t)((double)h * f->width / f->height);
		}
		top = (uint32_t)nearbyint((sh - h) / 2.0);
		left = (uint32_t)nearbyint((sw - w) / 2.0);
	} else if (o->w && o->fit == TFS_FIT_PAD) {
		sw = (uint32_t)f->width;
		sh = (uint32_t)f->height;
	}
	if (o->w && (o->fit == TFS_FIT_CROP || o->fit == TFS_FIT_PAD)) {
		/* Scaled whole first, then cut or placed: room for that, frame sizes may change. */
		const size_t need = (size_t)sw * sh * 3 + 1;

		if ((uint64_t)sw * sh > TFS_IMAGE_MAX_PIXELS)
			return -EINVAL;
		if (need > *tmp_cap) {
			uint8_t *g = realloc(*tmp, need);

			if (!g)
				return -ENOMEM;
			*tmp = g;
			*tmp_cap = need;
		}
		to = *tmp;
	}
	*sws = tfs_ff.sws_getCachedContext(*sws, f->width, f->height, f->format, (int)sw, (int)sh,
					   AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
	if (!*sws)
		return -EINVAL;
	stride = (int)sw * 3;
	tfs_ff.sws_scale(*sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, &to,
			 &stride);
	if (o->w && o->fit == TFS_FIT_CROP) {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3, *tmp + ((size_t)(y + top) * sw + left) * 3,
			       (size_t)w * 3);
	} else if (o->w && o->fit == TFS_FIT_PAD) {
		memset(dst, 0, (size_t)w * h * 3);
		for (uint32_t y = 0; y < h && y < sh; y++)
			memcpy(dst + (size_t)y * w * 3, *tmp + (size_t)y * sw * 3,
			       (size_t)(sw < w ? sw : w) * 3);
	}
	return 0;
}

int tfs_video_decode(const char *path, const struct tfs_buf *file, const struct tfs_video_opts *o,
		     struct tfs_video *out, char *err, size_t err_cap)
{
	struct dec d;
	struct SwsContext *sws = NULL;
	struct vout vo = { out, 0, NULL, 0 };
	uint8_t *tmp = NULL, *frame = NULL;
	size_t tmp_cap = 0;
	int64_t start = AV_NOPTS_VALUE, emitted = 0, end = AV_NOPTS_VALUE;
	AVRational tb, rate;
	int rc, got;

	memset(out, 0, sizeof(*out));
	tfs_spool_init(&out->held, TFS_MEDIA_HOLD);
	if (err_cap)
		err[0] = 0;
	rc = tfs_fflib_load(err, err_cap);
	if (rc)
		return rc; /* before anything the exit path would free with FFmpeg's functions */
	rc = dec_open(&d, path, file, AVMEDIA_TYPE_VIDEO, err, err_cap);
	if (rc)
		goto out;
	tb = d.fmt->streams[d.stream]->time_base;
	rate = o->fps > 0 ? tfs_ff.av_d2q(o->fps, 1000000)
			  : d.fmt->streams[d.stream]->avg_frame_rate;
	out->fps = o->fps > 0 ? o->fps : rate.num && rate.den ? av_q2d(rate) : 0;
	d.turn = stream_turn(d.fmt->streams[d.stream]);
	while ((got = dec_next(&d, err, err_cap)) == 1) {
		const int64_t ts = d.frame->best_effort_timestamp != AV_NOPTS_VALUE
					   ? d.frame->best_effort_timestamp
					   : d.frame->pts;
		const AVFrame *f = upright(&d, o->w != 0, &rc);
		double t;

		if (!f) {
			snprintf(err, err_cap, "cannot turn its frames upright: %s", strerror(-rc));
			goto out;
		}
		if (!out->w) { /* the size of the first frame sets the video's */
			out->w = o->w ? o->w : (uint32_t)f->width;
			out->h = o->w ? o->h : (uint32_t)f->height;
			if ((uint64_t)out->w * out->h > TFS_IMAGE_MAX_PIXELS) {
				snprintf(err, err_cap, "%ux%u pixels a frame, past the limit",
					 out->w, out->h);
				rc = -EINVAL;
				goto out;
			}
			if (!(frame = malloc((size_t)out->w * out->h * 3 + 1))) {
				rc = -ENOMEM;
				goto out;
			}
		}
		if (!o->w && ((uint32_t)f->width != out->w || (uint32_t)f->height != out->h)) {
			snprintf(err, err_cap,
				 "its frame size changes (%dx%d after %ux%u): give --size",
				 f->width, f->height, out->w, out->h);
			rc = -EINVAL;
			goto out;
		}
		if (start == AV_NOPTS_VALUE)
			start = ts == AV_NOPTS_VALUE ? 0 : ts;
		/* Where the video ends: the last frame's time plus its duration. */
		if (ts != AV_NOPTS_VALUE)
			end = ts + (d.frame->pkt_duration > 0
					    ? d.frame->pkt_duration
					    : (rate.num ? tfs_ff.av_rescale_q(1, av_inv_q(rate), tb)
							: 0));
		t = ts == AV_NOPTS_VALUE ? (double)out->n / (out->fps > 0 ? out->fps : 25)
					 : (double)(ts - start) * av_q2d(tb);
		rc = convert(f, &sws, o, out->w, out->h, frame, &tmp, &tmp_cap);
		if (rc) {
			snprintf(err, err_cap, "cannot convert its pixel format");
			goto out;
		}
		if (o->fps > 0) {
			/* ffmpeg's fps filter: a frame's slot is its time in output frames, rounded
			 * to the nearest; the frame held fills every slot before the new one's. */
			const int64_t k =
				ts == AV_NOPTS_VALUE
					? emitted
					: tfs_ff.av_rescale_q_rnd(ts - start, tb, av_inv_q(rate),
								  AV_ROUND_NEAR_INF);

			while (vo.cur && emitted < k && !rc) {
				rc = push_frame(&vo, vo.cur, (double)emitted / o->fps);
				emitted++;
			}
			if (!vo.cur && !(vo.cur = malloc((size_t)out->w * out->h * 3 + 1)))
				rc = -ENOMEM;
			if (!rc) {
				memcpy(vo.cur, frame, (size_t)out->w * out->h * 3);
				vo.cur_t = t;
			}
		} else {
			rc = push_frame(&vo, frame, t);
		}
		if (rc)
			goto out;
	}
	if (got < 0) {
		rc = got;
		goto out;
	}
	if (vo.cur) {
		/* The frame held fills the slots up to the end's, rounded (the fps filter's
		 * eof_action=round): at least its own. */
		const int64_t k = end == AV_NOPTS_VALUE
					  ? emitted + 1
					  : tfs_ff.av_rescale_q_rnd(end - start, tb, av_inv_q(rate),
								    AV_ROUND_NEAR_INF);

		while (!rc && emitted < k) {
			rc = push_frame(&vo, vo.cur, (double)emitted / o->fps);
			emitted++;
		}
	}
	if (!rc && !out->n) {
		snprintf(err, err_cap, "no frame");
		rc = -EINVAL;
	}
	if (!rc && (rc = tfs_spool_view(&out->held, &out->px)))
		snprintf(err, err_cap, "cannot map its frames: %s", strerror(-rc));
out:
	rc = dec_verify(&d, rc, err, err_cap);
	if (rc == -E2BIG) { /* the file's doing */
		snprintf(err, err_cap, "more than %u frames", MAX_FRAMES);
		rc = -EINVAL;
	} else if (rc && rc != -ELIBACC && !err[0]) /* the frames could not be held */
		snprintf(err, err_cap, "cannot hold its frames: %s", strerror(-rc));
	tfs_ff.sws_freeContext(sws);
	free(vo.cur);
	free(frame);
	free(tmp);
	dec_close(&d);
	if (rc)
		tfs_video_free(out);
	return rc;
}

void tfs_video_free(struct tfs_video *v)
{
	tfs_spool_free(&v->held);
	free(v->t);
	memset(v, 0, sizeof(*v));
}

/* --- audio ------------------------------------------------------------------------------------ */

int tfs_audio_decode(const char *path, const struct tfs_buf *file, const struct tfs_audio_opts *o,
		     struct tfs_audio *out, char *err, size_t err_cap)
{
	struct dec d;
	SwrContext *swr = NULL;
	AVChannelLayout in_layout = { 0 }, out_layout = { 0 };
	int rc, got;

	memset(out, 0, sizeof(*out));
	tfs_spool_init(&out->held, TFS_MEDIA_HOLD);
	if (err_cap)
		err[0] = 0;
	rc = tfs_fflib_load(err, err_cap);
	if (rc)
		return rc; /* before anything the exit path would free with FFmpeg's functions */
	rc = dec_open(&d, path, file, AVMEDIA_TYPE_AUDIO, err, err_cap);
	if (rc)
		goto out;
	rc = tfs_ff.av_channel_layout_copy(&in_layout, &d.cc->ch_layout) < 0 ? -ENOMEM : 0;
	if (!rc && in_layout.order == AV_CHANNEL_ORDER_UNSPEC)
		tfs_ff.av_channel_layout_default(&in_layout, in_layout.nb_channels);
	if (!rc && o->mono)
		tfs_ff.av_channel_layout_default(&out_layout, 1);
	else if (!rc)
		rc = tfs_ff.av_channel_layout_copy(&out_layout, &in_layout) < 0 ? -ENOMEM : 0;
	out->rate = o->rate ? o->rate : (uint32_t)d.cc->sample_rate;
	out->channels = (uint32_t)out_layout.nb_channels;
	if (!rc && tfs_ff.swr_alloc_set_opts2(&swr, &out_layout, AV_SAMPLE_FMT_FLT, (int)out->rate,
					      &in_layout, d.cc->sample_fmt, d.cc->sample_rate, 0,
					      NULL) < 0)
		rc = -EINVAL;
	if (!rc && tfs_ff.swr_init(swr) < 0) {
		snprintf(err, err_cap, "cannot resample it");
		rc = -EINVAL;
	}
	while (!rc && (got = dec_next(&d, err, err_cap)) >= 0) {
		const int in = got ? d.frame->nb_samples : 0;
		const int room = tfs_ff.swr_get_out_samples(swr, in);
		int made;

		if (room < 0) {
			rc = -EINVAL;
			break;
		}
		{
			const size_t sb = out->channels * sizeof(float);
			void *to;

			rc = tfs_spool_room(&out->held, (size_t)room * sb, &to);
			if (rc)
				break;
			made = tfs_ff.swr_convert(
				swr, (uint8_t **)&to, room,
				got ? (const uint8_t **)d.frame->extended_data : NULL, in);
			if (made >= 0)
				rc = tfs_spool_commit(&out->held, (size_t)made * sb);
			if (rc)
				break;
		}
		if (made < 0) {
			snprintf(err, err_cap, "cannot resample it");
			rc = -EINVAL;
			break;
		}
		out->n += (uint64_t)made;
		if (!got) /* the end: flushed */
			break;
	}
	if (!rc && got < 0)
		rc = got;
	if (!rc && !out->n) {
		snprintf(err, err_cap, "no sample");
		rc = -EINVAL;
	}
	if (!rc) {
		const uint8_t *s;

		rc = tfs_spool_view(&out->held, &s);
		if (rc)
			snprintf(err, err_cap, "cannot map its samples: %s", strerror(-rc));
		out->s = (const float *)s;
	}
out:
	rc = dec_verify(&d, rc, err, err_cap);
	if (rc && rc != -ELIBACC && !err[0])
		snprintf(err, err_cap, "cannot hold its samples: %s", strerror(-rc));
	tfs_ff.swr_free(&swr);
	tfs_ff.av_channel_layout_uninit(&in_layout);
	tfs_ff.av_channel_layout_uninit(&out_layout);
	dec_close(&d);
	if (rc)
		tfs_audio_free(out);
	return rc;
}

void tfs_audio_free(struct tfs_audio *a)
{
	tfs_spool_free(&a->held);
	memset(a, 0, sizeof(*a));
}
