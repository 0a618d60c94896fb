// restart_floor: the least a restart from a snapshot of N devices can cost on this machine, for
// bench/storage.sh to put beside registryd's restart. It does only the work no design avoids:
//
//   read   the snapshot file's bytes once (or the journal files' in turn, for a replay), from the
//          page cache, with a 64-bit sum over them (a stand-in for the checksum);
//   index  N random 16-byte device IDs and 2N random 20-byte claim keys (a first install's
//          keychain UUID and IDFV) inserted into two open-addressing tables sized in advance
//          (linear probing, at most 3/4 full, on huge pages as registryd's), and N 40-byte slot
//          records appended: the memory the restored registry must be written into. A device
//          bucket holds 32 bits of the ID's hash and the slot number (the slot holds the ID), a
//          claim bucket the key and the slot number. The device IDs come in slot order, so they
//          land at random. The claims land at random too, as a journal's replay brings them; with
//          `--claims-in-table-order`, in their table's order, as a snapshot lists them (sorted
//          before the clock starts), so they land front to back.
//
//   cc -O2 -o restart_floor bench/restart_floor.c && restart_floor [--claims-in-table-order] N FILE...
//
// Prints `read_s=… index_s=…`. registryd reads and decodes a snapshot on one thread while another
// restores, so its floor is the larger of the two; a journal's replay does both on one thread,
// so its floor is their sum. Both are printed (bench/storage.sh, bench/replay.sh).
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static uint64_t splitmix(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t mix(uint64_t a, uint64_t b) {
    __uint128_t product = (__uint128_t)(a ^ 0xA0761D6478BD642Full) * (b ^ 0xE7037ED1A0B428DBull);
    return (uint64_t)product ^ (uint64_t)(product >> 64);
}

static void *zeroed(size_t bytes) {
    void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) { perror("mmap"); exit(1); }
    madvise(memory, bytes, MADV_HUGEPAGE);
    return memory;
}

static size_t capacity_for(size_t entries) {
    size_t capacity = 1024;
    while (capacity * 3 < entries * 4) capacity <<= 1;
    return capacity;
}

struct device_bucket { uint32_t tag; uint32_t stored; };
struct claim_bucket { uint64_t high, low; uint32_t vendor_kind; uint32_t stored; };
struct slot { uint64_t high, low, created; uint32_t origin, vendor, canonical, app; };
struct claim { uint64_t high, low; uint32_t kind, owner; size_t home; };

static int by_home(const void *a, const void *b) {
    size_t x = ((const struct claim *)a)->home, y = ((const struct claim *)b)->home;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int ordered = argc > 1 && strcmp(argv[1], "--claims-in-table-order") == 0;
    argv += ordered;
    argc -= ordered;
    if (argc < 3) { fprintf(stderr, "usage: restart_floor [--claims-in-table-order] N FILE...\n"); return 64; }
    char *end;
    size_t n = strtoull(argv[1], &end, 10);
    if (*end != '\0' || n == 0) { fprintf(stderr, "restart_floor: N must be a positive number, not %s\n", argv[1]); return 64; }

    double started = now();
    size_t block = 1 << 20;
    uint64_t *buffer = malloc(block), sum = 0;
    if (!buffer) { perror("malloc"); return 71; }
    for (int file = 2; file < argc; file++) {
        int fd = open(argv[file], O_RDONLY);
        if (fd < 0) { perror(argv[file]); return 66; }
        ssize_t got;
        while ((got = read(fd, buffer, block)) > 0)
            for (ssize_t i = 0; i < got / 8; i++) sum += buffer[i] * 0x9E3779B97F4A7C15ull;
        close(fd);
    }
    double read_s = now() - started;

    size_t device_capacity = capacity_for(n), claim_capacity = capacity_for(2 * n);
    // The claims as a snapshot lists them (in their table's order), or as a replay brings them.
    struct claim *listed = malloc(2 * n * sizeof *listed);
    if (!listed) { perror("malloc"); return 71; }
    uint64_t random = 42;
    for (size_t i = 0; i < 2 * n; i++) {
        uint64_t high = splitmix(&random), low = splitmix(&random);
        uint32_t kind = 1 + (uint32_t)(i & 1);
        listed[i] = (struct claim){high, low, kind, (uint32_t)(i / 2), mix(high ^ kind, low) & (claim_capacity - 1)};
    }
    if (ordered) qsort(listed, 2 * n, sizeof *listed, by_home);

    started = now();
    struct device_bucket *devices = zeroed(device_capacity * sizeof *devices);
    struct claim_bucket *claims = zeroed(claim_capacity * sizeof *claims);
    struct slot *slots = zeroed(n * sizeof *slots);
    for (size_t i = 0; i < n; i++) {
        uint64_t high = splitmix(&random), low = splitmix(&random);
        uint64_t hash = mix(high, low);
        size_t at = hash & (device_capacity - 1);
        while (devices[at].stored) at = (at + 1) & (device_capacity - 1);
        devices[at] = (struct device_bucket){(uint32_t)(hash >> 32), (uint32_t)i + 1};
        slots[i] = (struct slot){high, low, i, 0, 0, (uint32_t)i, UINT32_MAX};
    }
    for (size_t i = 0; i < 2 * n; i++) {
        size_t place = listed[i].home;
        while (claims[place].stored) place = (place + 1) & (claim_capacity - 1);
        claims[place] = (struct claim_bucket){listed[i].high, listed[i].low, listed[i].kind, listed[i].owner + 1};
    }
    double index_s = now() - started;
    printf("read_s=%.2f index_s=%.2f sum=%llu\n", read_s, index_s, (unsigned long long)(sum & 1));
    return 0;
}
