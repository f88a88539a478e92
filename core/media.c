/* SPDX-License-Identifier: MIT */
/* media: a demuxer and a decoder a file; frames converted by swscale (as ffmpeg's scale filter
 * does) and picked by timestamp (as its fps filter does); samples converted by swresample. */
#include "media.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>

#define MAX_FRAMES (1u << 20) /* frames a video may give at most */

struct dec {
	AVFormatContext *fmt;
	AVCodecContext *cc;
	AVPacket *pkt;
	AVFrame *frame;
	int stream;
};

static void dec_close(struct dec *d)
{
	av_frame_free(&d->frame);
	av_packet_free(&d->pkt);
	avcodec_free_context(&d->cc);
	avformat_close_input(&d->fmt);
}

static int av_fail(char *err, size_t cap, const char *what, int averr)
{
	char msg[128];

	av_strerror(averr, msg, sizeof(msg));
	snprintf(err, cap, "%s: %s", what, msg);
	return -EINVAL;
}

static void quiet(void)
{
	av_log_set_level(AV_LOG_QUIET); /* problems are reported by the caller, naming the file */
}

static int dec_open(struct dec *d, const char *path, enum AVMediaType type, char *err, size_t cap)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const AVCodec *codec = NULL;
	int rc;

	pthread_once(&once, quiet);
	memset(d, 0, sizeof(*d));
	rc = avformat_open_input(&d->fmt, path, NULL, NULL);
	if (rc < 0)
		return av_fail(err, cap, "cannot open", rc);
	rc = avformat_find_stream_info(d->fmt, NULL);
	if (rc < 0)
		return av_fail(err, cap, "cannot read its streams", rc);
	d->stream = av_find_best_stream(d->fmt, type, -1, -1, &codec, 0);
	if (d->stream < 0 || !codec) {
		snprintf(err, cap, "no %s stream a decoder here takes",
			 type == AVMEDIA_TYPE_VIDEO ? "video" : "audio");
		return -EINVAL;
	}
	d->cc = avcodec_alloc_context3(codec);
	d->pkt = av_packet_alloc();
	d->frame = av_frame_alloc();
	if (!d->cc || !d->pkt || !d->frame)
		return -ENOMEM;
	rc = avcodec_parameters_to_context(d->cc, d->fmt->streams[d->stream]->codecpar);
	/* One thread a file: files are decoded in parallel, and the frames do not depend on it. */
	d->cc->thread_count = 1;
	if (rc >= 0)
		rc = avcodec_open2(d->cc, codec, NULL);
	return rc < 0 ? av_fail(err, cap, "cannot open its decoder", rc) : 0;
}

/* The next decoded frame (1), the end (0), or an error. */
static int dec_next(struct dec *d, char *err, size_t cap)
{
	for (;;) {
		int rc = avcodec_receive_frame(d->cc, d->frame);

		if (rc >= 0)
			return 1;
		if (rc == AVERROR_EOF)
			return 0;
		if (rc != AVERROR(EAGAIN))
			return av_fail(err, cap, "damaged", rc);
		rc = av_read_frame(d->fmt, d->pkt);
		if (rc == AVERROR_EOF) {
			avcodec_send_packet(d->cc, NULL); /* drain */
			continue;
		}
		if (rc < 0)
			return av_fail(err, cap, "cannot read", rc);
		if (d->pkt->stream_index == d->stream) {
			rc = avcodec_send_packet(d->cc, d->pkt);
			if (rc < 0 && rc != AVERROR(EAGAIN)) {
				av_packet_unref(d->pkt);
				return av_fail(err, cap, "damaged", rc);
			}
		}
		av_packet_unref(d->pkt);
	}
}

/* --- video ------------------------------------------------------------------------------------ */

struct vout {
	struct tfs_video *v;
	uint64_t cap;
	uint8_t *cur; /* the frame held for the fps pick (h x w x 3), or NULL */
	double cur_t;
};

static int push_frame(struct vout *o, const uint8_t *px, double t)
{
	struct tfs_video *v = o->v;
	const size_t fb = (size_t)v->w * v->h * 3;

	if (v->n == MAX_FRAMES)
		return -E2BIG;
	if (v->n == o->cap) {
		const uint64_t cap = o->cap ? 2 * o->cap : 64;
		uint8_t *g = realloc(v->px, cap * fb + 1);
		double *gt = realloc(v->t, cap * sizeof(*gt));

		if (g)
			v->px = g;
		if (gt)
			v->t = gt;
		if (!g || !gt)
			return -ENOMEM;
		o->cap = cap;
	}
	memcpy(v->px + v->n * fb, px, fb);
	v->t[v->n++] = t;
	return 0;
}

/* The frame in d, converted to the output's size and fit, into dst (h x w x 3). */
static int convert(struct dec *d, struct SwsContext **sws, const struct tfs_video_opts *o,
		   uint32_t w, uint32_t h, uint8_t *dst, uint8_t *tmp)
{
	const AVFrame *f = d->frame;
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
		to = tmp;
	} else if (o->w && o->fit == TFS_FIT_PAD) {
		sw = (uint32_t)f->width;
		sh = (uint32_t)f->height;
		to = tmp;
	}
	*sws = sws_getCachedContext(*sws, f->width, f->height, f->format, (int)sw, (int)sh,
				    AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL, NULL, NULL);
	if (!*sws)
		return -EINVAL;
	stride = (int)sw * 3;
	sws_scale(*sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, &to, &stride);
	if (o->w && o->fit == TFS_FIT_CROP) {
		for (uint32_t y = 0; y < h; y++)
			memcpy(dst + (size_t)y * w * 3, tmp + ((size_t)(y + top) * sw + left) * 3,
			       (size_t)w * 3);
	} else if (o->w && o->fit == TFS_FIT_PAD) {
		memset(dst, 0, (size_t)w * h * 3);
		for (uint32_t y = 0; y < h && y < sh; y++)
			memcpy(dst + (size_t)y * w * 3, tmp + (size_t)y * sw * 3,
			       (size_t)(sw < w ? sw : w) * 3);
	}
	return 0;
}

int tfs_video_decode(const char *path, const struct tfs_video_opts *o, struct tfs_video *out,
		     char *err, size_t err_cap)
{
	struct dec d;
	struct SwsContext *sws = NULL;
	struct vout vo = { out, 0, NULL, 0 };
	uint8_t *tmp = NULL, *frame = NULL;
	int64_t start = AV_NOPTS_VALUE, emitted = 0, end = AV_NOPTS_VALUE;
	AVRational tb, rate;
	int rc, got;

	memset(out, 0, sizeof(*out));
	rc = dec_open(&d, path, AVMEDIA_TYPE_VIDEO, err, err_cap);
	if (rc)
		goto out;
	tb = d.fmt->streams[d.stream]->time_base;
	rate = o->fps > 0 ? av_d2q(o->fps, 1000000) : d.fmt->streams[d.stream]->avg_frame_rate;
	out->fps = o->fps > 0 ? o->fps : rate.num && rate.den ? av_q2d(rate) : 0;
	while ((got = dec_next(&d, err, err_cap)) == 1) {
		const int64_t ts = d.frame->best_effort_timestamp != AV_NOPTS_VALUE
					   ? d.frame->best_effort_timestamp
					   : d.frame->pts;
		double t;

		if (!out->w) { /* the size of the first frame sets the video's */
			out->w = o->w ? o->w : (uint32_t)d.frame->width;
			out->h = o->w ? o->h : (uint32_t)d.frame->height;
			if ((uint64_t)out->w * out->h > TFS_IMAGE_MAX_PIXELS) {
				snprintf(err, err_cap, "%ux%u pixels a frame, past the limit",
					 out->w, out->h);
				rc = -EINVAL;
				goto out;
			}
			frame = malloc((size_t)out->w * out->h * 3 + 1);
			tmp = malloc((size_t)d.frame->width * d.frame->height * 3 * 2 + 1);
			if (!frame || !tmp) {
				rc = -ENOMEM;
				goto out;
			}
		}
		if (d.frame->width * d.frame->height * 2 > 0 && !o->w &&
		    ((uint32_t)d.frame->width != out->w || (uint32_t)d.frame->height != out->h)) {
			snprintf(err, err_cap,
				 "its frame size changes (%dx%d after %ux%u): give --size",
				 d.frame->width, d.frame->height, out->w, out->h);
			rc = -EINVAL;
			goto out;
		}
		if (start == AV_NOPTS_VALUE)
			start = ts == AV_NOPTS_VALUE ? 0 : ts;
		/* Where the video ends: the last frame's time plus its duration. */
		if (ts != AV_NOPTS_VALUE)
			end = ts + (d.frame->pkt_duration > 0
					    ? d.frame->pkt_duration
					    : (rate.num ? av_rescale_q(1, av_inv_q(rate), tb) : 0));
		t = ts == AV_NOPTS_VALUE ? (double)out->n / (out->fps > 0 ? out->fps : 25)
					 : (double)(ts - start) * av_q2d(tb);
		rc = convert(&d, &sws, o, out->w, out->h, frame, tmp);
		if (rc) {
			snprintf(err, err_cap, "cannot convert its pixel format");
			goto out;
		}
		if (o->fps > 0) {
			/* ffmpeg's fps filter: a frame's slot is its time in output frames, rounded
			 * to the nearest; the frame held fills every slot before the new one's. */
			const int64_t k = ts == AV_NOPTS_VALUE
						  ? emitted
						  : av_rescale_q_rnd(ts - start, tb, av_inv_q(rate),
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
					  : av_rescale_q_rnd(end - start, tb, av_inv_q(rate),
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
out:
	if (rc == -E2BIG)
		snprintf(err, err_cap, "more than %u frames", MAX_FRAMES);
	sws_freeContext(sws);
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
	free(v->px);
	free(v->t);
	memset(v, 0, sizeof(*v));
}

/* --- audio ------------------------------------------------------------------------------------ */

int tfs_audio_decode(const char *path, const struct tfs_audio_opts *o, struct tfs_audio *out,
		     char *err, size_t err_cap)
{
	struct dec d;
	SwrContext *swr = NULL;
	AVChannelLayout in_layout = { 0 }, out_layout = { 0 };
	uint64_t cap = 0;
	int rc, got;

	memset(out, 0, sizeof(*out));
	rc = dec_open(&d, path, AVMEDIA_TYPE_AUDIO, err, err_cap);
	if (rc)
		goto out;
	rc = av_channel_layout_copy(&in_layout, &d.cc->ch_layout) < 0 ? -ENOMEM : 0;
	if (!rc && in_layout.order == AV_CHANNEL_ORDER_UNSPEC)
		av_channel_layout_default(&in_layout, in_layout.nb_channels);
	if (!rc && o->mono)
		av_channel_layout_default(&out_layout, 1);
	else if (!rc)
		rc = av_channel_layout_copy(&out_layout, &in_layout) < 0 ? -ENOMEM : 0;
	out->rate = o->rate ? o->rate : (uint32_t)d.cc->sample_rate;
	out->channels = (uint32_t)out_layout.nb_channels;
	if (!rc &&
	    swr_alloc_set_opts2(&swr, &out_layout, AV_SAMPLE_FMT_FLT, (int)out->rate, &in_layout,
				d.cc->sample_fmt, d.cc->sample_rate, 0, NULL) < 0)
		rc = -EINVAL;
	if (!rc && swr_init(swr) < 0) {
		snprintf(err, err_cap, "cannot resample it");
		rc = -EINVAL;
	}
	while (!rc && (got = dec_next(&d, err, err_cap)) >= 0) {
		const int in = got ? d.frame->nb_samples : 0;
		const int room = swr_get_out_samples(swr, in);
		int made;

		if (room < 0) {
			rc = -EINVAL;
			break;
		}
		if (out->n + (uint64_t)room > cap) {
			const uint64_t c = (out->n + (uint64_t)room) * 2 + 4096;
			float *g = realloc(out->s, c * out->channels * sizeof(float));

			if (!g) {
				rc = -ENOMEM;
				break;
			}
			out->s = g;
			cap = c;
		}
		{
			uint8_t *to = (uint8_t *)(out->s + out->n * out->channels);

			made = swr_convert(swr, &to, room,
					   got ? (const uint8_t **)d.frame->extended_data : NULL,
					   in);
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
out:
	swr_free(&swr);
	av_channel_layout_uninit(&in_layout);
	av_channel_layout_uninit(&out_layout);
	dec_close(&d);
	if (rc)
		tfs_audio_free(out);
	return rc;
}

void tfs_audio_free(struct tfs_audio *a)
{
	free(a->s);
	memset(a, 0, sizeof(*a));
}
