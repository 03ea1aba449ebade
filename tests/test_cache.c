/* The compilation cache and the CPU compiler driver: keys, entries and their trailer, damaged,
 * swapped, truncated or foreign entries (and things that are not files) deleted and rebuilt,
 * the ELF check before dlopen, cache directories others can write refused, LRU eviction,
 * processes compiling one kernel at once, warm starts from disk, hits in memory, compile
 * errors, and running with the cache off or unwritable. Children are forked (or the test
 * re-executes itself) wherever a fresh process matters, since a process keeps what it loaded. */
#define _GNU_SOURCE /* mkdtemp */
#include <dirent.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/jit.h"
#include "backends/cpu/jit_internal.h"
#include "cache/cache.h"
#include "harness.h"

static char tmp_dir[64];
static char cache_dir[128];

/* A small kernel, different for each id: kfn(2) == 2 * id + 1. */
static const char *source_for(int id) {
    static char bufs[4][256];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "float kfn(float x) { return x * %d.0f + 1.0f; }\n", id);
    return b;
}

static kn_ccache_key jit_key(const char *source) {
    const char *parts[] = {source, "cpu", kn_jit_arch(), kn_jit_compiler_id()};
    return kn_ccache_key_of(parts, 4);
}

static const char *entry_path(kn_ccache_key key, const char *ext) {
    static char path[256];
    char hex[33];
    kn_ccache_key_hex(key, hex);
    snprintf(path, sizeof path, "%s/%s%s", cache_dir, hex, ext);
    return path;
}

static bool exists(const char *path) { return access(path, F_OK) == 0; }

/* Files in dir whose name starts with prefix and contains infix. */
static int count_in(const char *dir, const char *prefix, const char *infix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strstr(e->d_name, infix) != NULL;
    if (d) closedir(d);
    return n;
}

static int count_files(const char *prefix, const char *infix) { return count_in(cache_dir, prefix, infix); }

/* Compile directories left in $TMPDIR (the test points it at tmp_dir). */
static int compile_dirs_left(void) {
    DIR *d = opendir(tmp_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, "kiln-jit-", 9) == 0;
    if (d) closedir(d);
    return n;
}

static void sleep_ms(int ms) { nanosleep(&(struct timespec){0, ms * 1000000L}, NULL); }

/* ---- children ----------------------------------------------------------------------------- */

typedef struct child_result {
    kn_status status;
    float value; /* kfn(2) */
    kn_stats stats;
    char message[512];
} child_result;

typedef struct child {
    pid_t pid;
    int result_fd;
} child;

/* Forks a child that waits until the barrier pipe (if any) is closed, then loads source's kfn
 * with fresh counters and reports what happened. */
static child start_load(const char *source, const int *barrier) {
    int fds[2];
    if (pipe(fds) != 0) test_fail(__FILE__, __LINE__, "pipe failed");
    pid_t pid = fork();
    if (pid == 0) {
        alarm(300); /* a child that hangs (a FIFO waiting for a writer) fails instead of the suite */
        close(fds[0]);
        char c;
        if (barrier) {
            close(barrier[1]);
            while (read(barrier[0], &c, 1) > 0) {}
        }
        child_result r = {0};
        kn_stats_reset();
        void *fn = NULL;
        r.status = kn_jit_load(source, 1, (const char *const[]){"kfn"}, &fn);
        r.value = r.status == KN_OK ? ((float (*)(float))fn)(2.0f) : NAN;
        kn_stats_get(&r.stats);
        snprintf(r.message, sizeof r.message, "%s", kn_last_error());
        _exit(write(fds[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[1]);
    return (child){pid, fds[0]};
}

static bool finish(child c, child_result *r) {
    size_t got = 0;
    for (ssize_t n; got < sizeof *r && (n = read(c.result_fd, (char *)r + got, sizeof *r - got)) > 0;) got += (size_t)n;
    close(c.result_fd);
    int status = 0;
    waitpid(c.pid, &status, 0);
    bool ok = got == sizeof *r && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok && r->status != KN_OK) fprintf(stderr, "  child: %s\n", r->message);
    return ok;
}

static bool load_in_child(const char *source, child_result *r) { return finish(start_load(source, NULL), r); }

/* Runs this test binary again as `--load id` with env ("NAME=VALUE") added to its environment;
 * its exit code, and its stdout and stderr in self_output. */
static const char *self_path;
static char self_output[4096];
static int run_self(int id, const char *env) {
    char arg[16], out_path[128];
    snprintf(arg, sizeof arg, "%d", id);
    snprintf(out_path, sizeof out_path, "%s/self.out", tmp_dir);
    int rc = run_program(self_path, (const char *const[]){"--load", arg, NULL}, NULL, out_path, NULL,
                         (const char *const[]){env, NULL});
    FILE *f = fopen(out_path, "rb");
    size_t n = f ? fread(self_output, 1, sizeof self_output - 1, f) : 0;
    self_output[n] = '\0';
    if (f) fclose(f);
    if (rc != 0) fprintf(stderr, "  --load %d (%s) exited %d: %s\n", id, env, rc, self_output);
    return rc;
}

/* `--load id`: loads source_for(id) in this fresh process; 0 if kfn computes the right value. */
static int load_main(int id) {
    void *fn = NULL;
    if (kn_jit_load(source_for(id), 1, (const char *const[]){"kfn"}, &fn) != KN_OK) {
        fprintf(stderr, "load failed: %s\n", kn_last_error());
        return 1;
    }
    return ((float (*)(float))fn)(2.0f) == 2.0f * (float)id + 1.0f ? 0 : 2;
}

/* ---- keys and entries --------------------------------------------------------------------- */

static void test_key_is_stable_and_every_part_changes_it(void) {
    const char *parts[] = {"src", "cpu", "x86_64", "cc -O3"};
    kn_ccache_key k = kn_ccache_key_of(parts, 4), again = kn_ccache_key_of(parts, 4);
    CHECK(k.hi == again.hi && k.lo == again.lo);
    for (int i = 0; i < 4; i++) {
        const char *changed[4] = {parts[0], parts[1], parts[2], parts[3]};
        changed[i] = "other";
        kn_ccache_key c = kn_ccache_key_of(changed, 4);
        CHECK_MSG(c.hi != k.hi || c.lo != k.lo, "changing part %d kept the key", i);
    }
    kn_ccache_key fewer = kn_ccache_key_of(parts, 3);
    CHECK(fewer.hi != k.hi || fewer.lo != k.lo);
    /* Where one part ends and the next begins is part of the key. */
    kn_ccache_key ab_c = kn_ccache_key_of((const char *[]){"ab", "c"}, 2);
    kn_ccache_key a_bc = kn_ccache_key_of((const char *[]){"a", "bc"}, 2);
    CHECK(ab_c.hi != a_bc.hi || ab_c.lo != a_bc.lo);
    char hex[33];
    kn_ccache_key_hex((kn_ccache_key){0x0123456789abcdefULL, 0xfedcba9876543210ULL}, hex);
    CHECK(strcmp(hex, "0123456789abcdeffedcba9876543210") == 0);
}

/* Whether key has a valid entry with extension ext (read, then dropped). */
static bool readable(kn_ccache_key key, const char *ext) {
    void *payload = NULL;
    size_t n = 0;
    bool ok = kn_ccache_read(key, ext, &payload, &n);
    free(payload);
    return ok;
}

static int64_t corrupt_count(void) {
    kn_stats s;
    kn_stats_get(&s);
    return s.cache_corrupt;
}

static void test_store_then_read_round_trip(void) {
    kn_ccache_key key = kn_ccache_key_of((const char *[]){"round trip"}, 1);
    const char payload[] = "payload bytes";
    CHECK(!readable(key, ".bin"));
    CHECK(kn_ccache_store(key, ".bin", payload, sizeof payload) == KN_OK);
    void *got = NULL;
    size_t n = 0;
    CHECK(kn_ccache_read(key, ".bin", &got, &n) && n == sizeof payload && got && memcmp(got, payload, n) == 0);
    free(got);
    /* The file is the payload, then the trailer. */
    const char *path = entry_path(key, ".bin");
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == (off_t)sizeof payload + KN_CCACHE_TRAILER_BYTES);
    FILE *f = fopen(path, "rb");
    char head[sizeof payload] = {0};
    CHECK(f && fread(head, 1, sizeof head, f) == sizeof head && memcmp(head, payload, sizeof payload) == 0);
    if (f) fclose(f);
    CHECK(count_files("", ".tmp.") == 0);
}

static void store_bytes(kn_ccache_key key, size_t n) {
    char *payload = calloc(n, 1);
    CHECK(kn_ccache_store(key, ".bin", payload, n) == KN_OK);
    free(payload);
}

/* Damages the entry at path: flips the byte at offset, or truncates it to offset bytes. */
static void damage(const char *path, long offset, bool truncate_it) {
    if (truncate_it) {
        CHECK(truncate(path, offset) == 0);
        return;
    }
    int fd = open(path, O_RDWR);
    unsigned char b = 0;
    CHECK(fd >= 0 && pread(fd, &b, 1, offset) == 1);
    b ^= 0x40;
    CHECK(pwrite(fd, &b, 1, offset) == 1);
    close(fd);
}

static void test_damaged_entries_are_deleted_and_counted(void) {
    for (int truncate_it = 0; truncate_it < 2; truncate_it++) {
        kn_ccache_key key = kn_ccache_key_of((const char *[]){"damaged", truncate_it ? "cut" : "flipped"}, 2);
        store_bytes(key, 100);
        damage(entry_path(key, ".bin"), 50, truncate_it);
        kn_stats_reset();
        CHECK(!readable(key, ".bin"));
        CHECK(!exists(entry_path(key, ".bin")));
        CHECK(corrupt_count() == 1);
    }
}

/* A whole, checksummed entry renamed (or copied) over another key's name is not that key's:
 * the trailer names the key it was stored under. */
static void test_entry_under_another_keys_name_is_deleted(void) {
    kn_ccache_key mine = kn_ccache_key_of((const char *[]){"swapped", "mine"}, 2);
    kn_ccache_key other = kn_ccache_key_of((const char *[]){"swapped", "other"}, 2);
    store_bytes(other, 100);
    char from[256];
    snprintf(from, sizeof from, "%s", entry_path(other, ".bin"));
    CHECK(rename(from, entry_path(mine, ".bin")) == 0);
    kn_stats_reset();
    CHECK(!readable(mine, ".bin"));
    CHECK(!exists(entry_path(mine, ".bin")));
    CHECK(corrupt_count() == 1);
}

/* Entries are code every kiln process runs: one that others can write, and anything at an
 * entry's name that is not a regular file (a symlink is not followed), is removed and
 * counted, never read through. */
static void test_what_is_not_a_private_regular_file_is_removed(void) {
    kn_ccache_key key = kn_ccache_key_of((const char *[]){"not a file"}, 1);
    const char *path = entry_path(key, ".bin");
    char elsewhere[300];
    snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere.bin", tmp_dir);
    for (int kind = 0; kind < 3; kind++) { /* a FIFO: test_fifo_entry_is_removed_without_blocking */
        if (kind == 0) { /* a symlink to a valid entry of this very key */
            store_bytes(key, 100);
            CHECK(rename(path, elsewhere) == 0 && symlink(elsewhere, path) == 0);
        } else if (kind == 1) {
            CHECK(mkdir(path, 0700) == 0);
        } else {
            store_bytes(key, 100);
            CHECK(chmod(path, 0666) == 0);
        }
        kn_stats_reset();
        CHECK_MSG(!readable(key, ".bin"), "kind %d was read as an entry", kind);
        struct stat st;
        CHECK_MSG(lstat(path, &st) != 0, "kind %d is still there", kind);
        CHECK(corrupt_count() == 1);
    }
    CHECK(exists(elsewhere)); /* the symlink went, not what it pointed at */
    unlink(elsewhere);
    /* A directory that is not empty cannot go; it stays a miss, and stores report it. */
    char inside[300];
    snprintf(inside, sizeof inside, "%s/x", path);
    CHECK(mkdir(path, 0700) == 0 && mkdir(inside, 0700) == 0);
    CHECK(!readable(key, ".bin"));
    CHECK_ERROR(kn_ccache_store(key, ".bin", "x", 1) == KN_OK, KN_ERR_IO, "renaming the temporary file");
    rmdir(inside);
    rmdir(path);
}

/* Under a umask that leaves files group-writable, entries are still made private (a read
 * refuses an entry others can write). */
static void test_entries_are_private_whatever_the_umask(void) {
    kn_ccache_key key = kn_ccache_key_of((const char *[]){"umask"}, 1);
    mode_t old = umask(002);
    store_bytes(key, 10);
    umask(old);
    struct stat st;
    CHECK(stat(entry_path(key, ".bin"), &st) == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH)));
    CHECK(readable(key, ".bin"));
}

static void test_eviction_keeps_the_most_recently_used(void) {
    CHECK(kn_ccache_clear() >= 0);
    kn_ccache_key k[4];
    for (int i = 0; i < 4; i++) k[i] = kn_ccache_key_of((const char *[]){"evict", source_for(i)}, 2);
    kn_ccache_set_max_bytes(3 * 1024 + 512); /* three entries of 1024 bytes with their trailers fit */
    const size_t payload = 1024 - KN_CCACHE_TRAILER_BYTES;
    for (int i = 0; i < 3; i++) {
        store_bytes(k[i], payload);
        sleep_ms(30); /* file times may only advance once per clock tick */
    }
    CHECK(readable(k[0], ".bin")); /* 0 is now newer than 1 */
    sleep_ms(30);
    store_bytes(k[3], payload);
    CHECK(exists(entry_path(k[0], ".bin")));
    CHECK(!exists(entry_path(k[1], ".bin")));
    CHECK(exists(entry_path(k[2], ".bin")));
    CHECK(exists(entry_path(k[3], ".bin")));
    kn_ccache_disk_stats s;
    CHECK(kn_ccache_disk_stats_get(&s) == KN_OK && s.entries == 3 && s.bytes == 3 * 1024 &&
          s.max_bytes == 3 * 1024 + 512);
    /* An entry larger than the whole bound is still kept once stored. */
    kn_ccache_set_max_bytes(100);
    store_bytes(k[1], payload);
    CHECK(exists(entry_path(k[1], ".bin")) && count_files("", ".bin") == 1);
    kn_ccache_set_max_bytes(0);
    CHECK(kn_ccache_disk_stats_get(&s) == KN_OK && s.max_bytes == 1024LL << 20);
}

static void test_stale_temporary_files_are_removed(void) {
    kn_ccache_key key = kn_ccache_key_of((const char *[]){"temps"}, 1);
    char stale[300], fresh[300];
    snprintf(stale, sizeof stale, "%s.tmp.1.1", entry_path(key, ".so"));
    snprintf(fresh, sizeof fresh, "%s.tmp.1.2", entry_path(key, ".so"));
    for (int clear = 0; clear < 2; clear++) {
        fclose(fopen(stale, "wb"));
        fclose(fopen(fresh, "wb"));
        struct timespec two_hours_ago[2] = {{time(NULL) - 7200, 0}, {time(NULL) - 7200, 0}};
        CHECK(utimensat(AT_FDCWD, stale, two_hours_ago, 0) == 0);
        if (clear)
            CHECK(kn_ccache_clear() >= 0);
        else
            store_bytes(key, 10); /* a store evicts */
        CHECK(!exists(stale));
        CHECK(exists(fresh)); /* may belong to a writer at work */
        kn_ccache_disk_stats s;
        CHECK(kn_ccache_disk_stats_get(&s) == KN_OK && (clear ? s.entries == 0 : s.entries >= 1));
        unlink(fresh);
    }
    CHECK(count_files("", ".tmp.") == 0);
}

/* ---- the compiler driver ------------------------------------------------------------------ */

static int64_t ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return llabs((long long)ia - ib);
}

static void test_prelude_gives_generated_code_kilns_math(void) {
    CHECK(strstr(kn_jit_prelude, "kn_expf") && !strstr(kn_jit_prelude, "#include \""));
    size_t n = strlen(kn_jit_prelude);
    char *src = malloc(n + 128);
    snprintf(src, n + 128, "%s\nfloat jit_exp(float x) { return kn_expf(x); }\n", kn_jit_prelude);
    void *fn = NULL;
    CHECK(kn_jit_load(src, 1, (const char *const[]){"jit_exp"}, &fn) == KN_OK);
    free(src);
    if (!fn) return;
    float (*jit_exp)(float) = (float (*)(float))fn;
    int64_t worst = 0;
    for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
        int64_t u = ulps(jit_exp(x), (float)exp((double)x));
        if (u > worst) worst = u;
    }
    CHECK_MSG(worst <= 2, "kn_expf from the prelude is %lld ulps from exp", (long long)worst);
}

static void test_second_load_in_a_process_hits_memory(void) {
    const char *src = source_for(100);
    void *fn = NULL, *again = NULL;
    kn_stats_reset();
    CHECK(kn_jit_load(src, 1, (const char *const[]){"kfn"}, &fn) == KN_OK);
    CHECK(kn_jit_load(src, 1, (const char *const[]){"kfn"}, &again) == KN_OK);
    kn_stats s;
    kn_stats_get(&s);
    CHECK(fn && fn == again);
    CHECK(s.compiles == 1 && s.cache_misses == 1 && s.cache_memory_hits == 1 && s.cache_disk_hits == 0);
    CHECK(s.compile_seconds > 0);
    CHECK(fn && ((float (*)(float))fn)(2.0f) == 201.0f);
    CHECK(compile_dirs_left() == 0);
}

static void test_warm_start_loads_from_disk(void) {
    const char *src = source_for(101);
    child_result first, second;
    CHECK(load_in_child(src, &first) && first.status == KN_OK && first.value == 203.0f);
    CHECK(first.stats.compiles == 1 && first.stats.cache_misses == 1 && first.stats.cache_disk_hits == 0);
    /* The entry is the shared object with the trailer after it, and dlopen takes it as it is. */
    CHECK(load_in_child(src, &second) && second.status == KN_OK && second.value == 203.0f);
    CHECK(second.stats.compiles == 0 && second.stats.cache_misses == 0 && second.stats.cache_disk_hits == 1);
}

static void test_damaged_object_is_rebuilt(void) {
    const char *src = source_for(102);
    const char *path = entry_path(jit_key(src), ".so");
    for (int truncate_it = 0; truncate_it < 2; truncate_it++) {
        child_result first, rebuilt;
        CHECK(load_in_child(src, &first) && first.status == KN_OK);
        struct stat st;
        CHECK(stat(path, &st) == 0);
        damage(path, st.st_size / 2, truncate_it);
        CHECK(load_in_child(src, &rebuilt) && rebuilt.status == KN_OK && rebuilt.value == 205.0f);
        CHECK(rebuilt.stats.cache_corrupt == 1 && rebuilt.stats.compiles == 1 && rebuilt.stats.cache_disk_hits == 0);
        CHECK(readable(jit_key(src), ".so")); /* stored whole again */
    }
}

/* A child that loads src must rebuild its entry: right value, one compile, one corrupt entry
 * counted, and a valid entry on disk after. */
static void check_rebuilt(const char *src, float want, const char *what) {
    child_result r;
    bool ran = load_in_child(src, &r);
    CHECK_MSG(ran, "%s: the child crashed or hung", what);
    if (!ran) return;
    CHECK_MSG(r.status == KN_OK && r.value == want, "%s: status %d, kfn(2) = %g, want %g", what, (int)r.status,
              (double)r.value, (double)want);
    CHECK_MSG(r.stats.cache_corrupt == 1 && r.stats.compiles == 1 && r.stats.cache_disk_hits == 0,
              "%s: %lld corrupt, %lld compiles, %lld disk hits", what, (long long)r.stats.cache_corrupt,
              (long long)r.stats.compiles, (long long)r.stats.cache_disk_hits);
    CHECK_MSG(readable(jit_key(src), ".so"), "%s: not stored again", what);
}

/* The payload of src's entry (loading src in a child first, so that there is one). */
static void *object_of(const char *src, size_t *n) {
    child_result r;
    CHECK(load_in_child(src, &r) && r.status == KN_OK);
    void *payload = NULL;
    CHECK(kn_ccache_read(jit_key(src), ".so", &payload, n));
    return payload;
}

/* Another source's object under this source's name defines the same symbol and computes the
 * wrong thing; it used to be loaded by every later process. */
static void test_swapped_object_is_rebuilt_not_run(void) {
    const char *src = source_for(110), *other = source_for(111);
    free(object_of(src, &(size_t){0}));
    free(object_of(other, &(size_t){0}));
    char from[256];
    snprintf(from, sizeof from, "%s", entry_path(jit_key(other), ".so"));
    CHECK(rename(from, entry_path(jit_key(src), ".so")) == 0);
    check_rebuilt(src, 221.0f, "swapped entry");
}

/* A truncated shared object with a valid trailer: dlopen would map segments past its end. */
static void test_truncated_object_with_a_valid_trailer_is_rebuilt(void) {
    const char *src = source_for(112);
    size_t n = 0;
    void *object = object_of(src, &n);
    CHECK(object && kn_ccache_store(jit_key(src), ".so", object, n / 2) == KN_OK);
    free(object);
    check_rebuilt(src, 225.0f, "truncated object");
}

/* A valid entry whose object lacks the symbol asked for is rebuilt, not reported as a source
 * that defines no such symbol (fused mode would then run its ops one by one forever). */
static void test_object_lacking_its_symbols_is_rebuilt(void) {
    const char *src = source_for(113), *other = "int not_kfn(void) { return 1; }\n";
    void *fn = NULL, *object = NULL;
    size_t n = 0;
    CHECK(kn_jit_load(other, 1, (const char *const[]){"not_kfn"}, &fn) == KN_OK);
    CHECK(kn_ccache_read(jit_key(other), ".so", &object, &n));
    CHECK(object && kn_ccache_store(jit_key(src), ".so", object, n) == KN_OK);
    free(object);
    check_rebuilt(src, 227.0f, "object without kfn");
}

/* A FIFO at the entry's name: opening it for reading used to wait for a writer forever. */
static void test_fifo_entry_is_removed_without_blocking(void) {
    const char *src = source_for(114);
    CHECK(mkfifo(entry_path(jit_key(src), ".so"), 0600) == 0);
    check_rebuilt(src, 229.0f, "FIFO entry");
}

static void test_object_check_refuses_what_dlopen_would_crash_on(void) {
    size_t n = 0;
    unsigned char *object = object_of(source_for(115), &n);
    if (!object) return;
    char why[256];
    CHECK(kn_jit_check_object(object, n, why, sizeof why));
    unsigned char *bad = malloc(n);
    /* (what is changed, the reason's words) */
    struct {
        int what;
        const char *needle;
    } cases[] = {{0, "too short"}, {1, "not an ELF file"},        {2, "another machine"}, {3, "not a shared object"},
                 {4, "program header table"}, {5, "past the end"}, {6, "segment"},         {7, "segment"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        memcpy(bad, object, n);
        size_t len = n;
        Elf64_Ehdr *h = (Elf64_Ehdr *)bad;
        Elf64_Phdr *ph = (Elf64_Phdr *)(bad + h->e_phoff);
        switch (cases[c].what) {
        case 0: len = 20; break;
        case 1: bad[1] = 'X'; break;
        case 2: h->e_machine ^= 0x100; break;
        case 3: h->e_type = ET_REL; break;
        case 4: h->e_phentsize = 7; break;
        case 5: h->e_phoff = n - 8; break;
        case 6: len = n / 2; break; /* a segment reaches past the end */
        case 7: ph[h->e_phnum - 1].p_offset = (Elf64_Off)n; ph[h->e_phnum - 1].p_filesz = 1; break;
        }
        why[0] = '\0';
        CHECK_MSG(!kn_jit_check_object(bad, len, why, sizeof why) && strstr(why, cases[c].needle),
                  "case %zu: accepted, or said \"%s\"", c, why);
    }
    free(bad);
    free(object);
}

static void test_processes_compiling_at_once_leave_one_entry(void) {
    const char *src = source_for(103);
    int barrier[2];
    CHECK(pipe(barrier) == 0);
    child c[4];
    for (int i = 0; i < 4; i++) c[i] = start_load(src, barrier);
    close(barrier[0]);
    close(barrier[1]); /* all start now */
    for (int i = 0; i < 4; i++) {
        child_result r;
        CHECK(finish(c[i], &r) && r.status == KN_OK && r.value == 207.0f);
    }
    char hex[33];
    kn_ccache_key_hex(jit_key(src), hex);
    CHECK(count_files(hex, "") == 1);
    CHECK(count_files("", ".tmp.") == 0);
    CHECK(readable(jit_key(src), ".so"));
}

static void test_compile_error_names_the_compilers_message(void) {
    void *fn = NULL;
    kn_stats_reset();
    CHECK_ERROR(kn_jit_load("int kfn(void) { return no_such_name; }\n", 1, (const char *const[]){"kfn"}, &fn) ==
                    KN_OK,
                KN_ERR_ARG, "no_such_name");
    CHECK_ERROR(kn_jit_load("int kfn(void) { return no_such_name; }\n", 1, (const char *const[]){"kfn"}, &fn) ==
                    KN_OK,
                KN_ERR_ARG, "kernel.c:1");
    kn_stats s;
    kn_stats_get(&s);
    CHECK(s.compiles == 2); /* a failure is not remembered: the next call tries again */
    CHECK_ERROR(kn_jit_load(source_for(104), 1, (const char *const[]){"nothing"}, &fn) == KN_OK, KN_ERR_ARG,
                "no symbol 'nothing'");
    CHECK_ERROR(kn_jit_load(NULL, 0, NULL, NULL) == KN_OK, KN_ERR_NULL, "kiln jit");
}

static void test_cache_off_still_loads(void) {
    CHECK(run_self(105, "KILN_CACHE=0") == 0);
    CHECK(!exists(entry_path(jit_key(source_for(105)), ".so")));
    CHECK(compile_dirs_left() == 0);
}

static void test_unwritable_cache_still_loads(void) {
    /* Even root cannot make a directory under a character device. */
    CHECK(run_self(106, "KILN_CACHE_DIR=/dev/null/kiln") == 0);
    CHECK(compile_dirs_left() == 0);
}

/* A cache directory others can write is a way to run code in every kiln process: an entry
 * planted there (the right key, a valid trailer, the wrong code) is never loaded, nothing is
 * stored there, and the process compiles uncached and says why. The sticky bit does not help
 * (others can still create the names kiln has yet to write). */
static void test_cache_dir_others_can_write_is_refused(void) {
    const int id = 120;
    const mode_t modes[] = {0777, 0775, 01777, 0755 /* and owned by another user */};
    for (int i = 0; i < 4; i++) {
        if (i == 3 && geteuid() != 0) continue; /* only root can give a directory away */
        char dir[160], env[200];
        snprintf(dir, sizeof dir, "%s/shared%d", tmp_dir, i);
        snprintf(env, sizeof env, "KILN_CACHE_DIR=%s", dir);
        CHECK(mkdir(dir, 0700) == 0 && chmod(dir, modes[i]) == 0);
        /* Another source's object under this source's key, moved there from our cache. */
        size_t n = 0;
        void *object = object_of(source_for(121), &n);
        CHECK(object && kn_ccache_store(jit_key(source_for(id)), ".so", object, n) == KN_OK);
        free(object);
        char planted[300];
        snprintf(planted, sizeof planted, "%s/%s", dir, strrchr(entry_path(jit_key(source_for(id)), ".so"), '/') + 1);
        CHECK(rename(entry_path(jit_key(source_for(id)), ".so"), planted) == 0);
        if (i == 3) CHECK(chown(dir, 65534, 65534) == 0);
        CHECK_MSG(run_self(id, env) == 0, "mode %04o: the planted entry ran", (unsigned)modes[i]);
        CHECK(strstr(self_output, "not using the compilation cache") && strstr(self_output, dir));
        CHECK(strstr(self_output, i == 3 ? "owned by uid 65534" : i == 1 ? "writable by its group" : "writable by others"));
        CHECK(count_in(dir, "", ".so") == 1 && exists(planted)); /* nothing stored, nothing deleted */
    }
}

/* The cache directory kiln makes is writable by its user alone, even under a umask that would
 * leave it group-writable, so that the refusal above never hits kiln's own directory. */
static void test_cache_dir_made_under_a_group_umask_is_used(void) {
    char dir[160], env[200];
    snprintf(dir, sizeof dir, "%s/made/kiln", tmp_dir);
    snprintf(env, sizeof env, "KILN_CACHE_DIR=%s", dir);
    mode_t old = umask(002);
    int rc = run_self(122, env);
    umask(old);
    CHECK(rc == 0 && !strstr(self_output, "not using"));
    struct stat st;
    CHECK(stat(dir, &st) == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH)));
    CHECK(count_in(dir, "", ".so") == 1);
}

/* A compiler that leaves a truncated object (a full disk, a killed compiler) gives an error
 * naming it, and nothing is stored for later processes to crash on. */
static void test_truncated_compiler_output_is_neither_loaded_nor_stored(void) {
    char script[160], env[200];
    snprintf(script, sizeof script, "%s/truncating-cc", tmp_dir);
    FILE *f = fopen(script, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("#!/bin/sh\ncc \"$@\" || exit\n"
          "if [ -f kernel.so ]; then head -c 2000 kernel.so > cut && mv cut kernel.so; fi\n",
          f);
    fclose(f);
    CHECK(chmod(script, 0755) == 0);
    snprintf(env, sizeof env, "KILN_CC=%s", script);
    int entries = count_files("", ".so");
    CHECK(run_self(123, env) == 1 && strstr(self_output, "compiler's output") && strstr(self_output, "damaged"));
    CHECK(count_files("", ".so") == entries);
}

typedef struct thread_arg {
    const char *source;
    void *fn;
    kn_status status;
} thread_arg;

static void *thread_load(void *p) {
    thread_arg *a = p;
    a->status = kn_jit_load(a->source, 1, (const char *const[]){"kfn"}, &a->fn);
    return NULL;
}

static void test_threads_loading_one_source_compile_it_once(void) {
    thread_arg args[4];
    pthread_t t[4];
    kn_stats_reset();
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){source_for(107), NULL, KN_OK};
        pthread_create(&t[i], NULL, thread_load, &args[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++) CHECK(args[i].status == KN_OK && args[i].fn == args[0].fn);
    kn_stats s;
    kn_stats_get(&s);
    CHECK(s.compiles == 1 && s.cache_memory_hits == 3);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--load") == 0) return load_main(atoi(argv[2]));
    self_path = argv[0];
    snprintf(tmp_dir, sizeof tmp_dir, "%s", "/tmp/kiln_cache_XXXXXX");
    if (!mkdtemp(tmp_dir)) return perror("mkdtemp"), 1;
    /* A directory that does not exist yet: the first store makes it, parents and all. */
    snprintf(cache_dir, sizeof cache_dir, "%s/a/kiln", tmp_dir);
    setenv("KILN_CACHE_DIR", cache_dir, 1);
    setenv("TMPDIR", tmp_dir, 1); /* where compiles happen, to see that they clean up */
    RUN(test_key_is_stable_and_every_part_changes_it);
    RUN(test_store_then_read_round_trip);
    RUN(test_damaged_entries_are_deleted_and_counted);
    RUN(test_entry_under_another_keys_name_is_deleted);
    RUN(test_what_is_not_a_private_regular_file_is_removed);
    RUN(test_entries_are_private_whatever_the_umask);
    RUN(test_eviction_keeps_the_most_recently_used);
    RUN(test_stale_temporary_files_are_removed);
    RUN(test_prelude_gives_generated_code_kilns_math);
    RUN(test_second_load_in_a_process_hits_memory);
    RUN(test_warm_start_loads_from_disk);
    RUN(test_damaged_object_is_rebuilt);
    RUN(test_swapped_object_is_rebuilt_not_run);
    RUN(test_truncated_object_with_a_valid_trailer_is_rebuilt);
    RUN(test_object_lacking_its_symbols_is_rebuilt);
    RUN(test_fifo_entry_is_removed_without_blocking);
    RUN(test_object_check_refuses_what_dlopen_would_crash_on);
    RUN(test_truncated_compiler_output_is_neither_loaded_nor_stored);
    RUN(test_processes_compiling_at_once_leave_one_entry);
    RUN(test_threads_loading_one_source_compile_it_once);
    RUN(test_compile_error_names_the_compilers_message);
    RUN(test_cache_off_still_loads);
    RUN(test_unwritable_cache_still_loads);
    RUN(test_cache_dir_others_can_write_is_refused);
    RUN(test_cache_dir_made_under_a_group_umask_is_used);
    remove_tree(tmp_dir);
    return test_summary();
}
