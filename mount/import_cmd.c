/* SPDX-License-Identifier: MIT */
/* import_cmd: `tensorfs import`, every form: COL=SOURCE files, --images, --jsonl, --npz and
 * --webdataset, with the progress line and the summary of what was skipped. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "config.h"
#include "import.h"
#include "megatron.h"
#include "source.h"
#include "progress.h"
#include "session.h"
#include "store.h"
#include "util.h"

/* The last line of an import: the commit, or the part of a session recorded. */
static void print_done(const char *hex, const char *ds, const struct tfs_import_opts *o)
{
	if (o->session)
		printf("recorded part %" PRIu32 " of session %s of %s (manifest %s); commit "
		       "with `tensorfs commit URL --session %s`\n",
		       o->part, o->session, ds, hex, o->session);
	else
		printf("committed %s to %s/%s\n", hex, ds, o->branch ? o->branch : "main");
}

int tfs_cli_again_if_damaged(int rc, unsigned *tries, const char *url, struct tfs_progress *p)
{
	if (rc != -EBADMSG || (*tries)++)
		return 0;
	tfs_warn("%s: a source's bytes were damaged on the way; reading them again from the start",
		 url);
	if (p) {
		__atomic_store_n(&p->done, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&p->items, 0, __ATOMIC_RELAXED);
	}
	return 1;
}

/* The summary of a one-source import: rows, what was skipped and why, the commit. */
static int report(const char *url, const char *ds, int rc, const struct tfs_import_result *res,
		  const struct tfs_id *commit, const struct tfs_import_opts *o)
{
	char hex[TFS_ID_HEX];

	if (rc) {
		tfs_err("import into %s failed; the dataset is unchanged", url);
		return rc == -EAGAIN ? TFS_EXIT_RETRY : 1;
	}
	tfs_id_hex(commit, hex);
	printf("imported %" PRIu64 " row%s", res->rows, res->rows == 1 ? "" : "s");
	if (res->classes)
		printf(" of %zu class%s", res->classes, res->classes == 1 ? "" : "es");
	if (res->skipped)
		printf(", skipped %" PRIu64, res->skipped);
	for (uint64_t i = 0; i < res->skipped && i < TFS_IMPORT_SKIPS_KEPT; i++)
		printf("%s%s", i ? "; " : ": ", res->skips[i]);
	if (res->skipped > TFS_IMPORT_SKIPS_KEPT)
		printf("; ...");
	printf("\n");
	if (res->busy_peak)
		printf("worked on %u thread%s at once at most\n", res->busy_peak,
		       res->busy_peak == 1 ? "" : "s");
	print_done(hex, ds, o);
	return 0;
}

/* The single-source forms: `import URL --images DIR ...`, `--jsonl FILE`, `--npz FILE`, or
 * `--webdataset SHARD...` (the positional arguments after the URL). */
struct one_source {
	const char *dir, *jsonl, *npz, *megatron;
	const char *column;		    /* --column: --megatron's token column */
	const struct tfs_media_opts *media; /* --video or --audio: sources are the arguments */
	struct tfs_media_fields mf;	    /* --jsonl's --media FIELD=KIND */
	const char *tokens;		    /* --tokens: --jsonl's field of token ids */
	int webdataset;
	const char *const *shards; /* the arguments after the URL */
	size_t nshards;
	const char *const *fixed;
	size_t nfixed;
};

/* The import of src's one source into dataset ds of s. */
static int run_one(struct tfs_store *s, const char *ds, const struct one_source *src,
		   const struct tfs_images_opts *io, struct tfs_import_opts *o,
		   struct tfs_import_result *res, struct tfs_id *commit)
{
	if (src->dir)
		return tfs_import_images(s, ds, src->dir, io, o, res, commit);
	if (src->jsonl)
		return tfs_import_jsonl(s, ds, src->jsonl, src->fixed, src->nfixed, src->tokens,
					src->mf.n ? &src->mf : NULL, io->strict, o, res, commit);
	if (src->npz)
		return tfs_import_npz(s, ds, src->npz, o, res, commit);
	if (src->media)
		return tfs_import_media(s, ds, src->shards, src->nshards, src->media, o, res,
					commit);
	if (src->megatron)
		return tfs_import_megatron(s, ds, src->megatron,
					   src->column ? src->column : "tokens", o, res, commit);
	return tfs_import_webdataset(s, ds, src->shards, src->nshards, io->strict, o, res, commit);
}

static int import_one(const char *url, const struct one_source *src,
		      const struct tfs_images_opts *io, struct tfs_import_opts *o,
		      enum tfs_progress_mode pmode)
{
	struct tfs_import_result res;
	struct tfs_progress_line *pl;
	struct tfs_store *s = NULL;
	struct tfs_id commit;
	char *ds = NULL;
	unsigned tries = 0;
	int rc;

	if (!!src->dir + !!src->jsonl + !!src->npz + !!src->megatron + !!src->webdataset +
			    !!src->media !=
		    1 ||
	    (src->webdataset || src->media ? !src->nshards : src->nshards != 0)) {
		tfs_err("--images DIR, --jsonl FILE, --npz FILE, --megatron PREFIX, --webdataset "
			"SHARD.tar..., --video SOURCE... or --audio SOURCE... is the import's only "
			"source");
		return 2;
	}
	if (tfs_cli_open_dataset(url, 0, &s, &ds))
		return 1;
	pl = tfs_progress_line_start("import", src->dir ? "images" : "rows", o->progress, pmode);
	do
		rc = run_one(s, ds, src, io, o, &res, &commit);
	while (tfs_cli_again_if_damaged(rc, &tries, url, o->progress));
	tfs_progress_line_stop(pl);
	rc = report(url, ds, rc, &res, &commit, o);
	free(ds);
	tfs_store_close(s);
	return rc;
}

/* An option's value that must be a decimal number of 64 bits; -1 (said) when it is not. */
static int u64_arg(const char *opt, const char *arg, const char *what, uint64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoull(arg, &end, 10);
	if (*end || end == arg || arg[0] == '-' || errno) {
		tfs_err("%s %s: expected %s", opt, arg, what);
		return -1;
	}
	return 0;
}

/* Whether --jsonl's --media fields decode pixels (images or video frames). */
static int pixel_fields(const struct tfs_media_fields *mf)
{
	for (size_t i = 0; i < mf->n; i++)
		if (mf->kind[i] == 'i' || mf->kind[i] == 'v')
			return 1;
	return 0;
}

int tfs_cmd_import(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "message", required_argument, NULL, 'm' },
		{ "branch", required_argument, NULL, 'b' },
		{ "chunk-size", required_argument, NULL, 'c' },
		{ "codec", required_argument, NULL, 'C' },
		{ "images", required_argument, NULL, 'I' },
		{ "size", required_argument, NULL, 'S' },
		{ "resize", no_argument, NULL, 'R' },
		{ "crop", no_argument, NULL, 'X' },
		{ "pad", no_argument, NULL, 'D' },
		{ "draft", no_argument, NULL, 'd' },
		{ "labels-from-dirs", no_argument, NULL, 'L' },
		{ "shuffle", required_argument, NULL, 'u' },
		{ "strict", no_argument, NULL, 's' },
		{ "jsonl", required_argument, NULL, 'J' },
		{ "fixed", required_argument, NULL, 'F' },
		{ "npz", required_argument, NULL, 'Z' },
		{ "webdataset", no_argument, NULL, 'W' },
		{ "megatron", required_argument, NULL, 'G' },
		{ "column", required_argument, NULL, 'N' },
		{ "tokens", required_argument, NULL, 'T' },
		{ "eos", required_argument, NULL, 'O' },
		{ "video", no_argument, NULL, 'V' },
		{ "audio", no_argument, NULL, 'A' },
		{ "clip", required_argument, NULL, 'k' },
		{ "stride", required_argument, NULL, 'K' },
		{ "fps", required_argument, NULL, 'r' },
		{ "rate", required_argument, NULL, 'H' },
		{ "mono", no_argument, NULL, 'o' },
		{ "media", required_argument, NULL, 'E' },
		{ "level", required_argument, NULL, 'l' },
		{ "frame-size", required_argument, NULL, 'f' },
		{ "filter", required_argument, NULL, 'y' },
		{ "threads", required_argument, NULL, 't' },
		{ "progress", no_argument, NULL, 'P' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "session", required_argument, NULL, 'e' },
		{ "part", required_argument, NULL, 'p' },
		{ NULL, 0, NULL, 0 },
	};
	struct tfs_progress progress = { 0 };
	struct tfs_import_opts o = { .codec = TFS_CODEC_ZSTD, .level = 3, .progress = &progress };
	enum tfs_progress_mode pmode = TFS_PROGRESS_AUTO;
	struct tfs_progress_line *pl;
	struct tfs_import_src *src = NULL;
	struct tfs_images_opts io = { .fit = TFS_FIT_RESIZE };
	const char *images = NULL, *jsonl = NULL, *npz = NULL, *megatron = NULL, *column = NULL;
	const char *tokens = NULL;
	struct tfs_media_opts mo = { 0 };
	struct tfs_media_fields mf = { 0 };
	char media_names[TFS_MEDIA_FIELDS_MAX][256];
	int media = 0; /* 'V' or 'A' */
	double clip = 0, stride = 0;
	const char *fixed[64];
	size_t nfixed = 0;
	int webdataset = 0, have_part = 0, have_eos = 0;
	int delta = -1;	     /* --filter: unset, none or delta */
	int level_given = 0; /* --level */
	char eos_column[256];
	struct tfs_store *s = NULL;
	struct tfs_id commit;
	size_t n = 0;
	char *ds = NULL, hex[TFS_ID_HEX];
	unsigned tries = 0;
	int opt, rc = 1;

	tfs_cli_keep_freed_memory();
	while ((opt = getopt_long(argc, argv, "m:b:q", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			o.message = optarg;
			break;
		case 'P':
			pmode = TFS_PROGRESS_ON;
			break;
		case 'q':
			pmode = TFS_PROGRESS_OFF;
			break;
		case 'b':
			o.branch = optarg;
			break;
		case 'c':
			if (tfs_parse_size(optarg, &o.chunk_bytes) || o.chunk_bytes == 0 ||
			    o.chunk_bytes > (1ull << 31)) {
				tfs_err("--chunk-size %s: expected a size like 256k, 4M (up to 2G)",
					optarg);
				return 2;
			}
			break;
		case 'C': {
			const struct tfs_codec *c = tfs_codec_by_name(optarg);

			if (!c) {
				tfs_err("--codec %s: expected zstd or raw", optarg);
				return 2;
			}
			o.codec = c->id;
			break;
		}
		case 'l':
			o.level = atoi(optarg);
			level_given = 1;
			if (o.level < -7 || o.level > 19) {
				tfs_err("--level %s: expected -7..19", optarg);
				return 2;
			}
			break;
		case 'f': {
			uint64_t frame;

			if (tfs_parse_size(optarg, &frame) || (frame && frame < TFS_FRAME_MIN) ||
			    frame > (1ull << 31)) {
				tfs_err("--frame-size %s: expected 0 (one frame a chunk) or a size "
					"from 4k to 2G, like 128k",
					optarg);
				return 2;
			}
			tfs_chunk_frame_set((size_t)frame);
			break;
		}
		case 'y':
			if (strcmp(optarg, "delta") && strcmp(optarg, "none")) {
				tfs_err("--filter %s: expected delta or none", optarg);
				return 2;
			}
			delta = !strcmp(optarg, "delta");
			break;
		case 't':
			o.threads = (unsigned)atoi(optarg);
			break;
		case 'e':
			o.session = optarg;
			break;
		case 'p': {
			char *end;
			unsigned long part = strtoul(optarg, &end, 10);

			if (*end || end == optarg || part >= TFS_SESSION_MAX_PARTS) {
				tfs_err("--part %s: expected a part number, 0 to %u", optarg,
					TFS_SESSION_MAX_PARTS - 1);
				return 2;
			}
			o.part = (uint32_t)part;
			have_part = 1;
			break;
		}
		case 'I':
			images = optarg;
			break;
		case 'S':
			if (sscanf(optarg, "%ux%u", &io.h, &io.w) != 2 || !io.h || !io.w ||
			    io.h > 65535 || io.w > 65535) {
				tfs_err("--size %s: expected HxW, like 224x224", optarg);
				return 2;
			}
			break;
		case 'R':
			io.fit = TFS_FIT_RESIZE;
			break;
		case 'X':
			io.fit = TFS_FIT_CROP;
			break;
		case 'D':
			io.fit = TFS_FIT_PAD;
			break;
		case 'd':
			io.draft = 1;
			break;
		case 'L':
			io.labels = 1;
			break;
		case 'u':
			if (u64_arg("--shuffle", optarg, "a seed, 0 to 2^64 - 1", &io.shuffle_seed))
				return 2;
			io.shuffle = 1;
			break;
		case 's':
			io.strict = 1;
			break;
		case 'J':
			jsonl = optarg;
			break;
		case 'Z':
			npz = optarg;
			break;
		case 'W':
			webdataset = 1;
			break;
		case 'G':
			megatron = optarg;
			break;
		case 'N':
			column = optarg;
			break;
		case 'T':
			tokens = optarg;
			break;
		case 'O':
			if (u64_arg("--eos", optarg, "a token id", &o.eos))
				return 2;
			have_eos = 1;
			break;
		case 'V':
		case 'A':
			media = opt;
			break;
		case 'k':
		case 'K':
		case 'r':
		case 'H': {
			char *end;
			const double x = strtod(optarg, &end);

			if (*end || !(x > 0) || x > 1e9) {
				tfs_err("'%s': expected a positive number", optarg);
				return 2;
			}
			if (opt == 'k')
				clip = x;
			else if (opt == 'K')
				stride = x;
			else if (opt == 'r')
				mo.vo.fps = x;
			else
				mo.ao.rate = (uint32_t)x;
			break;
		}
		case 'o':
			mo.ao.mono = 1;
			break;
		case 'E': {
			const char *eq = strchr(optarg, '=');
			const char *k = eq ? eq + 1 : "";

			if (!eq || eq == optarg || mf.n == TFS_MEDIA_FIELDS_MAX ||
			    (size_t)(eq - optarg) >= sizeof(media_names[0]) ||
			    (strcmp(k, "image") && strcmp(k, "video") && strcmp(k, "audio"))) {
				tfs_err("--media %s: expected FIELD=image, FIELD=video or "
					"FIELD=audio (at most %d)",
					optarg, TFS_MEDIA_FIELDS_MAX);
				return 2;
			}
			snprintf(media_names[mf.n], sizeof(media_names[0]), "%.*s",
				 (int)(eq - optarg), optarg);
			mf.name[mf.n] = media_names[mf.n];
			mf.kind[mf.n++] = k[0] == 'i' ? 'i' : k[0] == 'v' ? 'v' : 'a';
			break;
		}
		case 'F':
			if (nfixed == sizeof(fixed) / sizeof(fixed[0])) {
				tfs_err("--fixed: at most 64 columns");
				return 2;
			}
			fixed[nfixed++] = optarg;
			break;
		default:
			return tfs_cli_usage(2);
		}
	}
	if (argc - optind < 1)
		return tfs_cli_usage(2); /* no URL */
	{
		/* A tree's files by URL are fetched ahead of the decoders, each a round trip
		 * (tens of ms on S3) for a decode of one or two: 8 GETs a thread keep them busy
		 * where a mount's default (32) would not, on many cores. */
		const unsigned inflight = 8 * tfs_import_threads(&o);

		tfs_config_http_default_inflight(inflight > 32 ? inflight : 32);
	}
	if (!o.session != !have_part || (o.session && (o.branch || o.message))) {
		tfs_err("--session ID and --part I go together, without --branch or -m (they are "
			"the commit's: tensorfs commit URL --session ID)");
		return 2;
	}
	if (io.shuffle && !images && !media) {
		tfs_err("--shuffle SEED imports a tree's files in a random order: give it with "
			"--images DIR, --video DIR or --audio DIR");
		return 2;
	}
	if (io.draft && (!images || !io.w || io.fit == TFS_FIT_PAD)) {
		tfs_err("--draft decodes images smaller for a --size they are resized or cropped "
			"to: "
			"give --images DIR --size HxW (with --resize or --crop)");
		return 2;
	}
	if (media) {
		mo.video = media == 'V';
		mo.vo.w = io.w;
		mo.vo.h = io.h;
		mo.vo.fit = io.fit;
		mo.labels = io.labels;
		mo.strict = io.strict;
		mo.shuffle = io.shuffle;
		mo.shuffle_seed = io.shuffle_seed;
		if (mo.video) {
			mo.clip = (uint64_t)clip;
			mo.stride = stride ? (uint64_t)stride : mo.clip;
			if ((clip && clip != (double)mo.clip) || (stride && !clip)) {
				tfs_err("--clip T --stride S: frames, whole numbers");
				return 2;
			}
		} else {
			mo.clip_s = clip;
			mo.stride_s = stride ? stride : clip;
			if (io.w || mo.vo.fps) {
				tfs_err("--size and --fps are --video's");
				return 2;
			}
		}
		if (!mo.video && stride && !clip) {
			tfs_err("--stride goes with --clip");
			return 2;
		}
	} else if (mf.n) {
		/* --jsonl --media: the decoders' options */
		mo.vo.w = io.w;
		mo.vo.h = io.h;
		mo.vo.fit = io.fit;
		mf.io = &io;
		mf.mo = &mo;
		if (!jsonl) {
			tfs_err("--media FIELD=KIND goes with --jsonl FILE");
			return 2;
		}
	} else if (clip || stride || mo.vo.fps || mo.ao.rate || mo.ao.mono) {
		tfs_err("--clip, --stride, --fps, --rate and --mono are --video's and --audio's");
		return 2;
	}
	if (column && !megatron) {
		tfs_err("--column names --megatron's token column");
		return 2;
	}
	/* Pixels decoded here are images by construction (--images, --video, WebDataset's
	 * images, --jsonl's image and video fields): their lines are filtered unless told.
	 * Filtered pixels at level 1 take 1.7-2% more bytes than at 3, in half the time (and
	 * decode 1.1-1.4x faster): their columns are written at level 1 unless told, the others
	 * (labels, paths, captions) at the import's level. */
	if (delta > 0 && o.codec != TFS_CODEC_ZSTD) {
		tfs_err("--filter delta: the filter is for zstd, and --codec raw stores rows as "
			"they are");
		return 2;
	}
	if (delta < 0)
		delta = images || media == 'V' || webdataset || pixel_fields(&mf);
	tfs_chunk_delta_set(delta);
	o.filter_level = level_given ? o.level : 1;
	if (tokens && (images || npz || megatron || webdataset || media)) {
		tfs_err("--tokens names --jsonl's field of token ids, or a COL=DIR/ source of "
			"token "
			"documents");
		return 2;
	}
	if (have_eos && !tokens && !megatron) {
		tfs_err("--eos records the end-of-document id of a token column: it goes with "
			"--tokens or --megatron");
		return 2;
	}
	if (have_eos) {
		/* The token column: --megatron's, or --tokens' (FIELD[:DTYPE] or COL). */
		snprintf(eos_column, sizeof(eos_column), "%.*s",
			 megatron ? (int)strlen(column ? column : "tokens")
				  : (int)strcspn(tokens, ":"),
			 megatron ? (column ? column : "tokens") : tokens);
		o.eos_column = eos_column;
	}
	if (images || jsonl || npz || megatron || webdataset || media) {
		const struct one_source one = {
			.dir = images,
			.jsonl = jsonl,
			.npz = npz,
			.megatron = megatron,
			.column = column,
			.tokens = tokens,
			.media = media ? &mo : NULL,
			.mf = mf,
			.webdataset = webdataset,
			.shards = (const char *const *)argv + optind + 1,
			.nshards = (size_t)(argc - optind - 1),
			.fixed = fixed,
			.nfixed = nfixed,
		};

		return import_one(argv[optind], &one, &io, &o, pmode);
	}
	if (argc - optind < 2)
		return tfs_cli_usage(2);
	src = calloc((size_t)(argc - optind - 1), sizeof(*src));
	if (!src)
		return 1;
	for (int i = optind + 1; i < argc; i++) {
		char *eq = strchr(argv[i], '=');

		struct stat sb;
		size_t len;

		if (!eq || eq == argv[i] || !eq[1]) {
			tfs_err("'%s': expected COLUMN=FILE.npy, COLUMN=FILE.txt or COLUMN=DIR/",
				argv[i]);
			rc = 2;
			goto out;
		}
		*eq = 0;
		src[n].column = argv[i];
		src[n].path = eq + 1;
		/* By what the path is: a directory of .npy files, a text file, or an NPY file. */
		len = strlen(src[n].path);
		if (tfs_source_is_url(src[n].path) && src[n].path[len - 1] == '/') {
			tfs_err("'%s': a directory of .npy files is read from a local path; URLs "
				"name files (.npy, .txt) or, with --images, trees",
				src[n].path);
			rc = 2;
			goto out;
		}
		if (!stat(src[n].path, &sb) && S_ISDIR(sb.st_mode))
			src[n].form = TFS_SRC_NPY_DIR;
		src[n].tokens = tokens && !strcmp(tokens, src[n].column);
		if (src[n].tokens && src[n].form != TFS_SRC_NPY_DIR) {
			tfs_err("--tokens %s: token documents come from a directory of .npy arrays "
				"(%s=DIR/)",
				tokens, tokens);
			rc = 2;
			goto out;
		} else if (len > 4 && !strcmp(src[n].path + len - 4, ".txt"))
			src[n].form = TFS_SRC_TEXT;
		n++;
	}
	if (tfs_cli_open_dataset(argv[optind], 0, &s, &ds))
		goto out;
	pl = tfs_progress_line_start("import", "rows", &progress, pmode);
	do
		rc = tfs_import(s, ds, src, n, &o, &commit);
	while (tfs_cli_again_if_damaged(rc, &tries, argv[optind], o.progress));
	tfs_progress_line_stop(pl);
	if (rc == -ENODATA) {
		printf("no commit: the sources hold 0 rows for existing columns, so %s/%s is "
		       "unchanged\n",
		       ds, o.branch ? o.branch : "main");
		rc = 0;
		goto out;
	}
	if (rc) {
		tfs_err("import into %s failed; the dataset is unchanged", argv[optind]);
		rc = rc == -EAGAIN ? TFS_EXIT_RETRY : 1;
		goto out;
	}
	tfs_id_hex(&commit, hex);
	print_done(hex, ds, &o);
	rc = 0;
out:
	free(src);
	free(ds);
	tfs_store_close(s);
	return rc;
}
