/* replay.c: runs a fuzz target's seed corpus without libFuzzer.
 *
 * Linked with one tests/fuzz/fuzz_NAME.c (whose LLVMFuzzerTestOneInput does
 * its own checks and aborts on a bug), it feeds the target every file of
 * FUZZ_CORPUS (tests/fuzz/corpus/NAME, set at build time) or of the folders
 * and files given as arguments: each input whole, then cut short at every
 * length (truncation is the commonest damage a decoder meets).  It prints
 * "ok - fuzz_NAME corpus: N inputs" in tests/run.sh's format.  It names each
 * file on stderr before running it, so after a crash (the process dies:
 * run.sh counts its exit as a failure) the last name is the input to replay.
 * `make test` builds and runs one per target with the plain compiler, so the
 * corpora are replayed where clang is missing; `make fuzz` explores beyond
 * them. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef FUZZ_CORPUS
#error "build with -DFUZZ_CORPUS='\"tests/fuzz/corpus/NAME\"'"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { S_PATH_MAX = 1024, S_INPUT_MAX = 1 << 20 };

typedef struct {
    const char *name;   /* the target, for messages */
    long inputs;        /* inputs run */
    int errors;         /* files that could not be read */
} replay_t;

/* Feeds one file to the target: whole, then every proper prefix.  The
 * prefix runs on a copy of exactly that length, so reading past its end is
 * a real overread (one a sanitizer build reports). */
static void s_run_file(replay_t *self, const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = malloc(S_INPUT_MAX);
    size_t n = f && buf ? fread(buf, 1, S_INPUT_MAX, f) : 0;
    if (!f || !buf || ferror(f)) {
        printf("  %s: cannot read %s\n", self->name, path);
        self->errors++;
    } else {
        fprintf(stderr, "  %s: %s\n", self->name, path);
        LLVMFuzzerTestOneInput(buf, n);
        self->inputs++;
        for (size_t len = 0; len < n; len++) {
            uint8_t *cut = malloc(len ? len : 1);
            if (!cut) abort();
            memcpy(cut, buf, len);
            LLVMFuzzerTestOneInput(cut, len);
            self->inputs++;
            free(cut);
        }
    }
    if (f) fclose(f);
    free(buf);
}

/* A file, or every regular file of a folder in name order (so a run is
 * the same everywhere). */
static void s_run_path(replay_t *self, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        printf("  %s: no such corpus %s\n", self->name, path);
        self->errors++;
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        s_run_file(self, path);
        return;
    }
    struct dirent **names;
    int n = scandir(path, &names, NULL, alphasort);
    if (n < 0) {
        printf("  %s: cannot list %s\n", self->name, path);
        self->errors++;
        return;
    }
    for (int i = 0; i < n; i++) {
        char file[S_PATH_MAX];
        snprintf(file, sizeof file, "%s/%s", path, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(file, &st) == 0 && S_ISREG(st.st_mode))
            s_run_file(self, file);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/');
    replay_t self = { .name = base ? base + 1 : argv[0] };
    if (argc == 1)
        s_run_path(&self, FUZZ_CORPUS);
    for (int i = 1; i < argc; i++)
        s_run_path(&self, argv[i]);
    if (self.errors || self.inputs == 0) {
        printf("FAIL - %s corpus: %ld inputs run, %d unreadable\n", self.name, self.inputs, self.errors);
        return 1;
    }
    printf("ok - %s corpus: %ld inputs, each whole and cut at every length\n", self.name, self.inputs);
    return 0;
}
