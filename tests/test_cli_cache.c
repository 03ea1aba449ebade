/* `kiln cache`: path prints the directory, stats counts what a load stored (as text and as
 * JSON) and shows a refused directory, clear empties the cache, and bad usage exits 2 with a
 * message. */
#define _GNU_SOURCE /* mkdtemp */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/cpu/jit.h"
#include "harness.h"

static const char *kiln;
static char tmp_dir[64];
static char cache_dir[128];
static char out_path[160];
static char output[8192];

/* Runs kiln with args ("cache", ..., NULL) and env ("NAME=VALUE" entries, NULL-ended, or NULL)
 * with stdout and stderr into output; the exit code. */
static int run_env(const char *const *args, const char *const *env) {
    int rc = run_program(kiln, args, NULL, out_path, NULL, env);
    FILE *f = fopen(out_path, "rb");
    size_t n = f ? fread(output, 1, sizeof output - 1, f) : 0;
    output[n] = '\0';
    if (f) fclose(f);
    return rc;
}

static int run(const char *const *args) { return run_env(args, NULL); }

/* `kiln cache stats --json`'s entry count, or -1 if it does not parse. */
static int json_entries(void) {
    if (run((const char *[]){"cache", "stats", "--json", NULL}) != 0) return -1;
    cJSON *o = cJSON_Parse(output);
    const cJSON *entries = cJSON_GetObjectItem(o, "entries"), *dir = cJSON_GetObjectItem(o, "directory");
    int n = cJSON_IsNumber(entries) && cJSON_IsString(dir) && strcmp(dir->valuestring, cache_dir) == 0
                ? entries->valueint
                : -1;
    if (n < 0) fprintf(stderr, "  unexpected output: %s\n", output);
    cJSON_Delete(o);
    return n;
}

static void test_path_prints_the_directory(void) {
    CHECK(run((const char *[]){"cache", "path", NULL}) == 0);
    char want[160];
    snprintf(want, sizeof want, "%s\n", cache_dir);
    CHECK_MSG(strcmp(output, want) == 0, "kiln cache path printed \"%s\"", output);
}

static void test_stats_count_a_loaded_kernel_and_clear_empties(void) {
    CHECK(json_entries() == 0);
    void *fn = NULL;
    CHECK(kn_jit_load("int kfn(void) { return 42; }\n", 1, (const char *const[]){"kfn"}, &fn) == KN_OK);
    CHECK(json_entries() == 1);
    CHECK(run((const char *[]){"cache", "stats", NULL}) == 0 && strstr(output, "entries:   1") && strstr(output, cache_dir));
    CHECK(run((const char *[]){"cache", "clear", NULL}) == 0 && strstr(output, "removed 1 entries"));
    CHECK(json_entries() == 0);
}

/* A directory other users can write is refused (kiln compiles uncached); stats says so. */
static void test_stats_show_a_refused_directory(void) {
    char shared[160], env[200];
    snprintf(shared, sizeof shared, "%s/shared", tmp_dir);
    snprintf(env, sizeof env, "KILN_CACHE_DIR=%s", shared);
    CHECK(mkdir(shared, 0700) == 0 && chmod(shared, 0777) == 0);
    const char *const with[] = {env, NULL};
    CHECK(run_env((const char *[]){"cache", "stats", NULL}, with) == 0 &&
          strstr(output, "refused:   writable by others (mode 0777)") && strstr(output, "chmod go-w"));
    CHECK(run_env((const char *[]){"cache", "stats", "--json", NULL}, with) == 0);
    cJSON *o = cJSON_Parse(output);
    const cJSON *refused = cJSON_GetObjectItem(o, "refused");
    CHECK_MSG(cJSON_IsString(refused) && strstr(refused->valuestring, "writable by others"), "stats --json: %s", output);
    cJSON_Delete(o);
    /* The private cache is not refused. */
    CHECK(run((const char *[]){"cache", "stats", NULL}) == 0 && !strstr(output, "refused"));
    CHECK(run((const char *[]){"cache", "stats", "--json", NULL}) == 0);
    o = cJSON_Parse(output);
    CHECK_MSG(cJSON_IsNull(cJSON_GetObjectItem(o, "refused")), "stats --json: %s", output);
    cJSON_Delete(o);
}

static void test_bad_usage_exits_2(void) {
    CHECK(run((const char *[]){"cache", "frobnicate", NULL}) == 2 && strstr(output, "unknown subcommand 'frobnicate'"));
    CHECK(run((const char *[]){"cache", NULL}) == 2 && strstr(output, "usage: kiln cache"));
    CHECK(run((const char *[]){"cache", "stats", "--xml", NULL}) == 2 && strstr(output, "bad arguments to 'stats'"));
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: %s path/to/kiln\n", argv[0]), 2;
    kiln = argv[1];
    snprintf(tmp_dir, sizeof tmp_dir, "%s", "/tmp/kiln_cli_cache_XXXXXX");
    if (!mkdtemp(tmp_dir)) return perror("mkdtemp"), 1;
    snprintf(cache_dir, sizeof cache_dir, "%s/cache", tmp_dir);
    snprintf(out_path, sizeof out_path, "%s/out.txt", tmp_dir);
    setenv("KILN_CACHE_DIR", cache_dir, 1);
    RUN(test_path_prints_the_directory);
    RUN(test_stats_count_a_loaded_kernel_and_clear_empties);
    RUN(test_stats_show_a_refused_directory);
    RUN(test_bad_usage_exits_2);
    remove_tree(tmp_dir);
    return test_summary();
}
