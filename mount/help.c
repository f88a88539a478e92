/* SPDX-License-Identifier: MIT */
/* help: the usage text, the one source of what every command takes, and `tensorfs help
 * [COMMAND]` / `tensorfs COMMAND --help`: that command's lines of it, an example and the notes
 * that apply to every command. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage_text[] =
	"usage: tensorfs [--config FILE] COMMAND [ARGS]\n"
	"\n"
	"  create URL                      create a dataset (URL = LAKE_URL/DATASET)\n"
	"  import URL COL=SOURCE ...       append rows to columns and commit; SOURCE is\n"
	"                                  FILE.npy (its rows), FILE.txt (a text column,\n"
	"                                  a row a line) or DIR/ (.npy files, a row each)\n"
	"         [--tokens COL [--eos ID]]\n"
	"                                  COL=DIR/ of 1-D integer arrays: token documents\n"
	"  import URL --images DIR         decode JPEG/PNG files into image, path (and label)\n"
	"         [--size HxW [--resize | --crop | --pad]] [--labels-from-dirs] [--strict]\n"
	"         [--shuffle SEED]         rows in a random order of the files (fixed by\n"
	"                                  SEED), not sorted: classes mixed in every chunk\n"
	"  import URL --jsonl FILE         JSON Lines: a column per field\n"
	"         [--fixed COL] [--tokens FIELD[:uint16|uint32] [--eos ID]]\n"
	"         [--media FIELD=image|video|audio] [--strict]\n"
	"  import URL --npz FILE           an .npz file: a column per array\n"
	"  import URL --video SOURCE...    decode videos (FFmpeg) into video, path, start_s,\n"
	"                                  fps (and label) columns: a clip of T frames a row\n"
	"         [--clip T [--stride S]] [--fps F] [--size HxW [--resize|--crop|--pad]]\n"
	"         [--labels-from-dirs] [--shuffle SEED] [--strict]\n"
	"  import URL --audio SOURCE...    decode audio into float32 audio, path, start_s, rate\n"
	"         [--rate HZ] [--mono] [--clip SECONDS [--stride SECONDS]] [--labels-from-dirs]\n"
	"         [--shuffle SEED]         a directory's files in a random order, as --images\n"
	"  import URL --megatron PREFIX    Megatron-LM's PREFIX.bin + PREFIX.idx: a token\n"
	"                                  column (default: tokens)\n"
	"         [--column NAME] [--eos ID]\n"
	"                                  --eos: the end-of-document token, recorded on\n"
	"                                  the column (its pack views' eos unless they say)\n"
	"  import URL --webdataset SHARD.tar ...\n"
	"                                  WebDataset samples: a column per extension\n"
	"         [--strict]\n"
	"                                  any FILE, DIR or SHARD may be an s3:// or\n"
	"                                  http(s):// URL (DIR/ of .npy files: local only)\n"
	"         [-m MSG] [--branch B] [--chunk-size SIZE] [--codec zstd|raw]\n"
	"         [--level N] [--frame-size SIZE] [--threads N] [--progress | --quiet]\n"
	"         [--filter delta|none]    uint8 rows of images (HxW, HxWxC, TxHxWxC):\n"
	"                                  each byte stored less the one a line above\n"
	"                                  it, which zstd keeps in 2/3 of the bytes or\n"
	"                                  so, at --level 1 unless told; --images,\n"
	"                                  --video, --webdataset and --jsonl's image and\n"
	"                                  video fields: delta unless none\n"
	"         [--session ID --part I]  write the rows as part I of a write session\n"
	"                                  instead of committing (any machine, any order)\n"
	"  commit URL --session ID [--parts N] [-m MSG] [--branch B]\n"
	"                                  commit a session's parts, in part order, at once\n"
	"  session ls URL                  the sessions being written: parts, rows, age\n"
	"  session abort URL ID            forget a session (gc removes its chunks)\n"
	"  sql URL[@REF] \"SELECT ... FROM t ...\" [--csv | --json] [--stats]\n"
	"                                  SQL (SQLite) over a version's columns: table t,\n"
	"                                  rowid = row number, NAME_shape and NAME_len of\n"
	"                                  tensors; filters on scalars read only their columns\n"
	"         [--near COL=Q.npy [--k K] [--metric cosine|l2|ip] [--per-query] [--nprobe P]]\n"
	"         [--vector NAME=V.npy] [--save NAME]\n"
	"  query save URL[@REF] NAME \"SELECT rowid ...\" [--near ...]\n"
	"                                  save the rows a query selects, pinned to the\n"
	"                                  commit: REF/queries/NAME/ in the mount\n"
	"  query ls URL | query show|log|rm URL NAME\n"
	"  vector index URL[@REF] COLUMN --ivf NLIST [--pq M] [--metric cosine|l2|ip]\n"
	"                                  an IVF index of an embedding column (FAISS), kept\n"
	"                                  beside it for its commit: sql --near --nprobe P\n"
	"  vector ls URL                   the indexed columns\n"
	"  export URL COLUMN --megatron PREFIX [--ref REF]\n"
	"                                  write a token column as PREFIX.bin + PREFIX.idx\n"
	"  mix create|update LAKE_URL NAME DATASET[@REF][:COL]=WEIGHT ... [--seed N]\n"
	"                                  record a weighted mixture of token columns\n"
	"                                  (pinned to commits); the mount shows it as\n"
	"                                  mixes/NAME/views/pack=S,.../\n"
	"  mix ls LAKE_URL | mix show|log LAKE_URL NAME\n"
	"                                  the mixtures; one's newest version, or all\n"
	"  ls LAKE_URL                     list the datasets of a lake\n"
	"  info URL [--ref REF] [--json]   show a dataset version's schema\n"
	"  mount LAKE_URL MOUNTPOINT [-f] [-d] [--force] [-o OPT[,OPT...]]\n"
	"                                  mount a lake (daemonises unless -f; --force\n"
	"                                  first unmounts a dead mount left there)\n"
	"      options: cache_mem=SIZE (default 512M), ref_ttl=SECONDS (default 5),\n"
	"               evict=min (drop the chunk view readers need furthest ahead),\n"
	"               epoch_warm=1 (load the next epoch's first window of a shuffled\n"
	"               view ahead, as a reader nears the end of an epoch),\n"
	"               prefetch_threads=N (default: one per CPU for local lakes; for\n"
	"               remote ones 3/4 of [http] max_inflight, 24; 0 disables),\n"
	"               readahead_kb=N (kernel readahead, default 1024, needs root),\n"
	"               splice (reply through a pipe instead of writev),\n"
	"               cache_dir=DIR,cache_disk=SIZE (disk cache of fetched objects,\n"
	"               default size 8G),\n"
	"               config=FILE (remotes and credentials, see README),\n"
	"               log=FILE, threads=N, nonempty (mount over a non-empty\n"
	"               directory), and libfuse options such as allow_other\n"
	"  branch URL NAME [--from REF]    create a branch (default: from main)\n"
	"  tag URL NAME [--at REF]         create a tag; tags never move\n"
	"  log URL [REF] [-n N]            history of a ref (default main), newest first\n"
	"  diff URL REF1 REF2              columns and row ranges that differ\n"
	"  update URL COL ROWSTART=FILE.npy [-m MSG] [--branch B]\n"
	"                                  overwrite rows of a column and commit\n"
	"  drop URL COL [-m MSG] [--branch B]\n"
	"                                  remove a column and commit\n"
	"  view URL [--ref REF] [--seed N] [--epoch N] [--rank R --world W] [--block N]\n"
	"       [--start N] [--drop-last] [--where EXPR] [-n N]\n"
	"                                  a view's row count and first rows, without mounting\n"
	"  verify URL [--progress | --quiet]\n"
	"                                  re-read and check everything every ref reaches\n"
	"  gc URL [--grace SECONDS] [--dry-run] [--progress | --quiet]\n"
	"                                  delete objects no ref reaches (default grace 86400)\n"
	"                                  and sessions not written to within the grace\n"
	"  index LAKE_URL                  write the listing files a lake served over\n"
	"                                  http(s):// needs (run again after writes)\n"
	"  top MOUNTPOINT [-d SECONDS] [-n COUNT]\n"
	"                                  a live view of a mount's reads, cache, prefetch,\n"
	"                                  store and staging (one line per interval when\n"
	"                                  not on a terminal); keys: s sort, q quit\n"
	"  stats MOUNTPOINT [--json]       the mount's counters once (--json: as\n"
	"                                  .tensorfs/stats; Prometheus: .tensorfs/metrics)\n"
	"  version                         print the version\n"
	"\n"
	"LAKE_URL: file:///absolute/path, s3://[REMOTE@]BUCKET[/PREFIX] or http(s)://HOST/PATH\n"
	"(read-only). Unmount with `fusermount3 -u MOUNTPOINT`.\n"
	"REF: a branch, a tag, a commit id or its first 4+ hex digits, then any ~N (N-th\n"
	"parent) and ^ (parent): main~2, v1^, 3fa9c2e1~1.\n"
	"import, verify and gc show a progress line when stderr is a terminal; --progress\n"
	"shows it anyway (a line a second), --quiet never.\n";

/* An example a command. */
static const struct {
	const char *name, *text;
} examples[] = {
	{ "create", "tensorfs create file:///data/lake/cifar" },
	{ "import",
	  "tensorfs import file:///data/lake/cifar image=images.npy label=labels.npy -m initial\n"
	  "tensorfs import file:///data/lake/imnet --images train/ --size 224x224 --crop "
	  "--labels-from-dirs\n"
	  "tensorfs import file:///data/lake/clips --video videos/ --clip 16 --size 112x112" },
	{ "sql",
	  "tensorfs sql file:///data/lake/web \"SELECT label, count(*) FROM t GROUP BY "
	  "label\"\n"
	  "tensorfs sql file:///data/lake/web \"SELECT rowid, caption FROM t WHERE label = 3\" "
	  "--near emb=q.npy --k 10" },
	{ "query", "tensorfs query save file:///data/lake/web good \"SELECT rowid FROM t WHERE "
		   "json_extract(meta, '$.quality') = 'high'\"" },
	{ "vector", "tensorfs vector index file:///data/lake/web emb --ivf 1024 --metric cosine" },
	{ "export",
	  "tensorfs export file:///data/lake/owt tokens --megatron /data/owt_text_document" },
	{ "mix", "tensorfs mix create file:///data/lake lm web=0.7 code@v2:tokens=0.3 --seed 3" },
	{ "mount", "tensorfs mount file:///data/lake /mnt/lake -o cache_mem=8G" },
	{ "view", "tensorfs view file:///data/lake/cifar --seed 7 --rank 0 --world 8 -n 5" },
	{ "gc", "tensorfs gc file:///data/lake/cifar --dry-run" },
	{ "log", "tensorfs log file:///data/lake/cifar main -n 5" },
};

/* Whether line (up to its newline) starts a command: two spaces, then a lower-case word. */
static int starts_command(const char *line, const char *name)
{
	const size_t n = name ? strlen(name) : 0;

	if (strncmp(line, "  ", 2) || line[2] < 'a' || line[2] > 'z')
		return 0;
	return !name ||
	       (!strncmp(line + 2, name, n) && (line[2 + n] == ' ' || line[2 + n] == '\n'));
}

/* Write the command's lines of the usage text (those that start it, and every line after
 * them up to the next command's) to out, when out is not NULL; return how many there were. */
static int command_lines(const char *name, FILE *out)
{
	const char *p = usage_text, *tail = strstr(usage_text, "\n\nLAKE_URL:");
	int mine = 0, lines = 0;

	while (p && *p && p < tail) {
		const char *nl = strchr(p, '\n');
		const size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);

		if (starts_command(p, NULL))
			mine = starts_command(p, name);
		if (mine) {
			if (out)
				fwrite(p, 1, len, out);
			lines++;
		}
		p += len;
	}
	return lines;
}

int tfs_cmd_help(const char *name)
{
	const char *tail = strstr(usage_text, "\n\nLAKE_URL:");

	if (!name) {
		fputs(usage_text, stdout);
		return 0;
	}
	if (!strcmp(name, "--man")) {
		tfs_cmd_help_man(stdout);
		return 0;
	}
	if (!command_lines(name, NULL)) {
		fprintf(stderr, "tensorfs: no command '%s'\n", name);
		return tfs_cli_usage(2);
	}
	printf("usage:\n");
	command_lines(name, stdout);
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++)
		if (!strcmp(examples[i].name, name))
			printf("\nexample:\n%s\n", examples[i].text);
	if (tail)
		fputs(tail + 1, stdout);
	return 0;
}

/* --- the man page's COMMANDS section ---------------------------------------------------------- */

/* Where a usage line's description starts: the column after the synopsis. */
#define DESC_COL 34

/* Text for roff: backslashes and dashes escaped, a control character at the start guarded. */
static void roff_text(const char *p, size_t n, FILE *out)
{
	if (n && (*p == '.' || *p == '\''))
		fputs("\\&", out);
	for (size_t i = 0; i < n; i++)
		if (p[i] == '\\')
			fputs("\\e", out);
		else if (p[i] == '-')
			fputs("\\-", out);
		else
			fputc(p[i], out);
}

/* p[0, n) without the spaces around it. */
static void trim(const char **p, size_t *n)
{
	while (*n && **p == ' ')
		(*p)++, (*n)--;
	while (*n && (*p)[*n - 1] == ' ')
		(*n)--;
}

static void man_example(const char *name, size_t n, FILE *out)
{
	for (size_t i = 0; i < sizeof(examples) / sizeof(examples[0]); i++) {
		if (strlen(examples[i].name) != n || strncmp(examples[i].name, name, n))
			continue;
		fputs(".IP\nExample:\n.nf\n", out);
		roff_text(examples[i].text, strlen(examples[i].text), out);
		fputs("\n.fi\n", out);
	}
}

/* The command word of a line that starts a command, and its length. */
static size_t command_word(const char *line, const char **word)
{
	*word = line + 2;
	return strcspn(*word, " \n");
}

void tfs_cmd_help_man(FILE *out)
{
	const char *p = strstr(usage_text, "\n\n") + 2, *tail = strstr(usage_text, "\n\nLAKE_URL:");
	const char *cmd = NULL;
	size_t cmd_len = 0;
	int in_body = 0, after_syn = 0;

	fputs(".\\\" Made from the usage text of mount/help.c by `tensorfs help --man`.\n.nh\n",
	      out);
	while (p < tail) {
		const char *nl = strchr(p, '\n'), *syn = p, *desc = NULL;
		const size_t len = (size_t)(nl - p);
		size_t syn_len = len, desc_len = 0;
		const int starts = starts_command(p, NULL);

		/* A synopsis (from column 2, or "[" continuing one), a description, or both. */
		if (len > DESC_COL && p[DESC_COL - 1] == ' ' && p[DESC_COL] != ' ' &&
		    p[DESC_COL - 2] == ' ') {
			desc = p + DESC_COL;
			desc_len = len - DESC_COL;
			syn_len = DESC_COL;
		}
		trim(&syn, &syn_len);
		if (!desc && !starts && (!syn_len || *syn != '[')) {
			/* All description. */
			desc = syn;
			desc_len = syn_len;
			syn_len = 0;
		}
		if (starts) {
			const char *w;
			const size_t wl = command_word(p, &w);

			if (cmd && (wl != cmd_len || strncmp(w, cmd, wl)))
				man_example(cmd, cmd_len, out);
			cmd = w;
			cmd_len = wl;
			fputs(".TP\n\\fB", out);
			in_body = 0;
		} else if (syn_len) {
			fputs(in_body ? ".br\n\\fB" : ".TQ\n\\fB", out);
		}
		if (syn_len) {
			roff_text(syn, syn_len, out);
			fputs("\\fP\n", out);
		}
		if (desc_len) {
			if (in_body && (syn_len || after_syn))
				fputs(".br\n", out);
			roff_text(desc, desc_len, out);
			fputc('\n', out);
			in_body = 1;
		}
		after_syn = syn_len && !desc_len;
		p = nl + 1;
	}
	if (cmd)
		man_example(cmd, cmd_len, out);
	fputs(".hy\n", out);
}

/* The command being run, for its usage errors; NULL before one is known. */
static const char *command;

void tfs_cli_command(const char *name)
{
	command = name;
}

int tfs_cli_usage(int rc)
{
	FILE *out = rc ? stderr : stdout;

	if (command && command_lines(command, NULL)) {
		fputs("usage:\n", out);
		command_lines(command, out);
		fputs("(tensorfs help: every command)\n", out);
		return rc;
	}
	fputs(usage_text, out);
	return rc;
}
