/* SPDX-License-Identifier: MIT */
/* replay: a fuzz target's LLVMFuzzerTestOneInput run once on every file of the directories (or
 * files) given, without libFuzzer. `make unit` replays every target's seed corpus, regression
 * inputs included, with the regular compiler: under ASan+UBSan with SANITIZE=1, and with no
 * clang needed. A crash, sanitizer report or broken invariant ends the run, naming the input. */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
/* Present in builds with a sanitizer: called when it reports and exits. */
void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static const char *current; /* the input being run */

static void name_input(void)
{
	static const char what[] = "replay: the input was ";

	if (!current)
		return;
	if (write(2, what, sizeof(what) - 1) < 0 || write(2, current, strlen(current)) < 0 ||
	    write(2, "\n", 1) < 0)
		return;
}

static void on_fatal(int sig)
{
	name_input();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) {
		perror(path);
		if (f)
			fclose(f);
		return -1;
	}
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		perror(path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	current = path;
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	current = NULL;
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	static const int fatal[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL };
	unsigned long n = 0;
	int bad = 0;

	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		signal(fatal[i], on_fatal);
	if (__sanitizer_set_death_callback)
		__sanitizer_set_death_callback(name_input);
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct dirent **names;
		struct stat sb;
		int k;

		if (stat(argv[i], &sb)) {
			perror(argv[i]);
			return 1;
		}
		if (!S_ISDIR(sb.st_mode)) {
			bad |= run_file(argv[i]);
			n++;
			continue;
		}
		k = scandir(argv[i], &names, NULL, by_name);
		if (k < 0) {
			perror(argv[i]);
			return 1;
		}
		for (int j = 0; j < k; j++) {
			char path[4096];

			snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
			if (names[j]->d_name[0] != '.' && !stat(path, &sb) && S_ISREG(sb.st_mode)) {
				bad |= run_file(path);
				n++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("%s: %lu inputs replayed\n", argv[0], n);
	return bad ? 1 : 0;
}
