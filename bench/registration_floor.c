// registration_floor: the least CPU a node can spend on a registration here, for issue 42's first
// target. It speaks enough of registryd's client protocol for registryload (a hello, then
// RegisterRequest and RegisterBatchRequest frames; anything else is answered UNKNOWN_MESSAGE) and
// does, for each registration, only what a node cannot skip:
//
//   - cut the stream into frames (a 4-byte big-endian length, then a ClientFrame) and walk the
//     protobuf wire bytes by hand, as registryd's RegisterRequestsReader does;
//   - check the bundle ID's grammar and lower-case it, intern it, and take its vendor (the text
//     before its last label: a floor needs no vendor rules or Public Suffix List);
//   - parse each identifier's UUID text and key it: HMAC-SHA256 under a secret key with both pads'
//     SHA-256 states computed once (two block-function runs, OpenSSL's, which use the CPU's SHA
//     extensions), cut to 128 bits;
//   - look both claims up in one open-addressing table keyed by (vendor, keyed hash); a first
//     install mints its device ID as a keyed SipHash-2-4-128 of (vendor, IDFV), so that every node
//     mints the same one, and inserts the device, its index by ID and both claims (tables that
//     double at 3/4 load, as a node that was not told its size must);
//   - append one journal record (sequence, HLC, length, then the registration as a protobuf
//     Operation, the shape registryd journals and replicates), and make each round of reads
//     durable with one pwrite of a CRC32C-sealed entry and one fdatasync (group commit) before
//     answering it;
//   - encode the RegisterBatchResult (device ID text, created, vendor) and write it.
//
// It keeps no change feed, no metrics, no replication state, no snapshots and no causal tokens,
// and one thread does everything, so nothing crosses threads. bench/cpu-compare.sh runs it in the
// place of a registryd build (its BASE argument `floor`), with the same load, and reads its CPU
// from /proc the same way.
//
//   registration_floor PORT JOURNAL_FILE      (stops on SIGTERM or SIGINT)
//
// Its second mode is the least a node can spend on another node's registration (issue 42's third
// target, which holds a replicated operation to half a client registration). `send` streams a
// journal the first mode wrote to `replica`, which, for each record, does only what a node that
// takes it from a peer cannot skip:
//
//   - cut the stream into frames (a 4-byte big-endian length, then one journal entry's records)
//     and walk each record's protobuf Operation by hand;
//   - intern its bundle, vendor and origin node, and check its claims' kinds;
//   - look its device up by ID and its claims by (vendor, keyed value), a batch's buckets asked
//     for first as above; a device it does not hold joins the device table and the index by ID,
//     a claim it does not hold joins the claim table. Its tables are sized once, for the count
//     `send` announces first (registryd sizes its indexes from its peers' hellos the same way);
//   - check that each record's sequence follows the one before, and join its HLC to the clock;
//   - copy the records, as received, into the journal, and make what one read of the socket
//     brought durable with one pwrite and one fdatasync (a group commit: registryd's commit
//     pipeline, too, commits together the batches that wait for it).
//
// It keys nothing (the values arrive keyed), mints nothing, answers nothing and journals nothing it
// encoded. At the end of the stream it prints the operations it took and its own CPU time
// (getrusage) and exits; bench/catchup.sh reports it beside registryd's node catching up.
//
//   registration_floor send JOURNAL_FILE PORT
//   registration_floor replica PORT JOURNAL_FILE
#define _GNU_SOURCE
#define OPENSSL_SUPPRESS_DEPRECATED  // SHA256_Transform: the block function, without EVP's context
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nmmintrin.h>
#include <openssl/sha.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME_BYTES (1u << 20)
#define MAX_BATCH 1000
#define JOURNAL_STEP (256L << 20)  // fallocate this much ahead of the journal's end

static void die(const char *what) {
  perror(what);
  exit(1);
}

static void *grow(void *buffer, size_t bytes) {
  void *grown = realloc(buffer, bytes);
  if (!grown) die("realloc");
  return grown;
}

// ---- growable byte buffers and the protobuf wire format ----

typedef struct {
  uint8_t *bytes;
  size_t count, capacity;
} Bytes;

static void reserve(Bytes *b, size_t more) {
  if (b->count + more <= b->capacity) return;
  size_t capacity = b->capacity ? b->capacity : 4096;
  while (capacity < b->count + more) capacity *= 2;
  b->bytes = grow(b->bytes, capacity);
  b->capacity = capacity;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, n++;
  return n;
}

// The put_ functions write into room already reserved.
static void put_varint(Bytes *b, uint64_t v) {
  while (v >= 0x80) b->bytes[b->count++] = (uint8_t)(v | 0x80), v >>= 7;
  b->bytes[b->count++] = (uint8_t)v;
}

static void put_raw(Bytes *b, const void *data, size_t n) {
  memcpy(b->bytes + b->count, data, n);
  b->count += n;
}

// A length-delimited field's key and length: the body follows.
static void put_field(Bytes *b, unsigned field, size_t length) {
  put_varint(b, field << 3 | 2);
  put_varint(b, length);
}

static size_t field_size(size_t length) { return 1 + varint_size(length) + length; }

typedef struct {
  const uint8_t *at, *end;
} Reader;

static bool read_varint(Reader *r, uint64_t *value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && r->at < r->end; shift += 7) {
    uint8_t byte = *r->at++;
    v |= (uint64_t)(byte & 0x7F) << shift;
    if (byte < 0x80) return *value = v, true;
  }
  return false;
}

// Reads a field's key; a length-delimited field's body lands in `body`, a varint in `value`.
// Other wire types are skipped. False on bytes that are not protobuf.
static bool read_field(Reader *r, unsigned *field, Reader *body, uint64_t *value) {
  uint64_t key, length;
  if (!read_varint(r, &key)) return false;
  *field = (unsigned)(key >> 3);
  switch (key & 7) {
  case 0: return read_varint(r, value);
  case 1: if (r->end - r->at < 8) return false; r->at += 8; *field = 0; return true;
  case 5: if (r->end - r->at < 4) return false; r->at += 4; *field = 0; return true;
  case 2:
    if (!read_varint(r, &length) || length > (uint64_t)(r->end - r->at)) return false;
    body->at = r->at, body->end = r->at + length, r->at += length;
    *value = UINT64_MAX;  // tells a body from a varint
    return true;
  default: return false;
  }
}

// ---- keys: HMAC-SHA256 of identifiers, SipHash-2-4-128 for minting ----

static SHA256_CTX hmac_inner, hmac_outer;
static uint64_t mint_k0, mint_k1;

static void keys_init(void) {
  uint8_t key[48];
  if (getrandom(key, sizeof key, 0) != sizeof key) die("getrandom");
  uint8_t pad[64] = {0};
  memcpy(pad, key, 32);
  for (int i = 0; i < 64; i++) pad[i] ^= 0x36;
  SHA256_Init(&hmac_inner);
  SHA256_Transform(&hmac_inner, pad);
  for (int i = 0; i < 64; i++) pad[i] ^= 0x36 ^ 0x5C;
  SHA256_Init(&hmac_outer);
  SHA256_Transform(&hmac_outer, pad);
  memcpy(&mint_k0, key + 32, 8);
  memcpy(&mint_k1, key + 40, 8);
}

static void store_be64(uint8_t *p, uint64_t v) {
  for (int i = 7; i >= 0; i--) p[i] = (uint8_t)v, v >>= 8;
}

// The first 128 bits of HMAC(key, kind ‖ uuid), as two words.
static void keyed_hash(uint8_t kind, const uint8_t uuid[16], uint64_t out[2]) {
  uint8_t block[64] = {0};
  block[0] = kind;
  memcpy(block + 1, uuid, 16);
  block[17] = 0x80;
  store_be64(block + 56, (64 + 17) * 8);
  SHA256_CTX inner = hmac_inner;
  SHA256_Transform(&inner, block);
  memset(block, 0, sizeof block);
  for (int i = 0; i < 8; i++) {
    block[4 * i] = (uint8_t)(inner.h[i] >> 24), block[4 * i + 1] = (uint8_t)(inner.h[i] >> 16);
    block[4 * i + 2] = (uint8_t)(inner.h[i] >> 8), block[4 * i + 3] = (uint8_t)inner.h[i];
  }
  block[32] = 0x80;
  store_be64(block + 56, (64 + 32) * 8);
  SHA256_CTX outer = hmac_outer;
  SHA256_Transform(&outer, block);
  out[0] = (uint64_t)outer.h[0] << 32 | outer.h[1];
  out[1] = (uint64_t)outer.h[2] << 32 | outer.h[3];
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
// One SipRound, as an expression.
#define SIPROUND                                                                                   \
  (v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32), v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2, \
   v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0, v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32))

// SipHash-2-4 with 128 bits of output (the reference's 128-bit variant) of `n` bytes.
static void siphash128(const uint8_t *in, size_t n, uint8_t out[16]) {
  uint64_t v0 = mint_k0 ^ 0x736f6d6570736575ULL, v1 = mint_k1 ^ 0x646f72616e646f6dULL ^ 0xee;
  uint64_t v2 = mint_k0 ^ 0x6c7967656e657261ULL, v3 = mint_k1 ^ 0x7465646279746573ULL;
  size_t whole = n & ~(size_t)7;
  for (size_t i = 0; i < whole; i += 8) {
    uint64_t m;
    memcpy(&m, in + i, 8);
    v3 ^= m, SIPROUND, SIPROUND, v0 ^= m;
  }
  uint64_t last = (uint64_t)n << 56;
  for (size_t i = whole; i < n; i++) last |= (uint64_t)in[i] << (8 * (i - whole));
  v3 ^= last, SIPROUND, SIPROUND, v0 ^= last;
  v2 ^= 0xee, SIPROUND, SIPROUND, SIPROUND, SIPROUND;
  uint64_t first = v0 ^ v1 ^ v2 ^ v3;
  v1 ^= 0xdd, SIPROUND, SIPROUND, SIPROUND, SIPROUND;
  uint64_t second = v0 ^ v1 ^ v2 ^ v3;
  memcpy(out, &first, 8);
  memcpy(out + 8, &second, 8);
  out[6] = (out[6] & 0x0F) | 0x80;  // UUIDv8
  out[8] = (out[8] & 0x3F) | 0x80;  // RFC 9562's variant
}

// ---- the state: bundles and vendors, devices, the device-ID index, claims ----

typedef struct {
  char text[256];
  uint8_t length, vendor_length;  // the vendor is the text's first vendor_length bytes
  uint32_t vendor;
} Bundle;

static Bundle *bundles;
static uint32_t bundle_count, bundle_capacity;
static uint32_t *bundle_slots, bundle_slot_mask;  // open addressing over bundle numbers + 1

static uint64_t text_hash(const char *s, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a: bundles are few and not chosen by attackers here
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ULL;
  return h;
}

static uint32_t vendor_of(const char *text, size_t vendor_length);

// The bundle numbered by its text (already lower-cased), interned on first sight.
static uint32_t intern_bundle(const char *text, size_t n, size_t vendor_length) {
  if ((bundle_count + 1) * 4 > (bundle_slot_mask + 1) * 3) {
    uint32_t slots = (bundle_slot_mask + 1) * 2;
    uint32_t *fresh = calloc(slots, sizeof *fresh);
    for (uint32_t b = 0; b < bundle_count; b++) {
      uint32_t i = (uint32_t)text_hash(bundles[b].text, bundles[b].length) & (slots - 1);
      while (fresh[i]) i = (i + 1) & (slots - 1);
      fresh[i] = b + 1;
    }
    free(bundle_slots);
    bundle_slots = fresh, bundle_slot_mask = slots - 1;
  }
  uint32_t i = (uint32_t)text_hash(text, n) & bundle_slot_mask;
  for (; bundle_slots[i]; i = (i + 1) & bundle_slot_mask) {
    Bundle *b = &bundles[bundle_slots[i] - 1];
    if (b->length == n && memcmp(b->text, text, n) == 0) return bundle_slots[i] - 1;
  }
  if (bundle_count == bundle_capacity) {
    bundle_capacity = bundle_capacity ? bundle_capacity * 2 : 64;
    bundles = grow(bundles, bundle_capacity * sizeof *bundles);
  }
  Bundle *b = &bundles[bundle_count];
  memcpy(b->text, text, n);
  b->length = (uint8_t)n, b->vendor_length = (uint8_t)vendor_length;
  b->vendor = vendor_of(text, vendor_length);
  bundle_slots[i] = bundle_count + 1;
  return bundle_count++;
}

// Vendors numbered by first sight, found by a linear search of the few there are.
static char (*vendors)[256];
static uint32_t vendor_count, vendor_capacity;

static uint32_t vendor_of(const char *text, size_t n) {
  for (uint32_t v = 0; v < vendor_count; v++)
    if (strlen(vendors[v]) == n && memcmp(vendors[v], text, n) == 0) return v;
  if (vendor_count == vendor_capacity) {
    vendor_capacity = vendor_capacity ? vendor_capacity * 2 : 64;
    vendors = grow(vendors, vendor_capacity * sizeof *vendors);
  }
  memcpy(vendors[vendor_count], text, n);
  vendors[vendor_count][n] = 0;
  return vendor_count++;
}

typedef struct {
  uint8_t id[16];
  uint64_t created_hlc, last_seen_hlc;
  uint32_t vendor, app;  // the app it was last seen in
  uint32_t origin;       // the node that created it (a replica's merge order needs it), 0 here
} Device;

typedef struct {
  uint64_t hash[2];
  uint32_t vendor, device;  // device numbers start at 1: 0 is an empty bucket
} Claim;

static Device *devices;  // devices[0] is unused
static uint32_t device_count, device_capacity;
static Claim *claims;
static uint64_t claim_count, claim_mask;
static uint32_t *by_id;  // device numbers, open addressing by the ID's first word
static uint64_t by_id_mask;

// Zeroed memory from the kernel, which hands out its pages as they are first touched.
// Tables in huge pages, where the kernel has them (registryd's tables are too): a random probe
// then misses the TLB far less often, and a table is zeroed in 2 MiB faults, not 4 KiB ones.
static void *zeroed(size_t bytes) {
  void *memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) die("mmap");
  madvise(memory, bytes, MADV_HUGEPAGE);
  return memory;
}

static uint64_t claim_bucket(const uint64_t hash[2], uint32_t vendor) {
  return (hash[0] ^ (uint64_t)vendor * 0x9E3779B97F4A7C15ULL) & claim_mask;
}

static uint64_t id_word(const uint8_t id[16]) {
  uint64_t word;
  memcpy(&word, id, 8);
  return word;
}

static void insert_claim(Claim claim) {
  uint64_t i = claim_bucket(claim.hash, claim.vendor);
  while (claims[i].device) i = (i + 1) & claim_mask;
  claims[i] = claim;
}

static void insert_by_id(uint32_t device) {
  uint64_t i = id_word(devices[device].id) & by_id_mask;
  while (by_id[i]) i = (i + 1) & by_id_mask;
  by_id[i] = device;
}

static void state_init(void) {
  device_capacity = 1 << 16;
  devices = zeroed(device_capacity * sizeof *devices);
  device_count = 1;
  claim_mask = (1 << 17) - 1;
  claims = zeroed((claim_mask + 1) * sizeof *claims);
  by_id_mask = (1 << 17) - 1;
  by_id = zeroed((by_id_mask + 1) * sizeof *by_id);
  bundle_slot_mask = 63;
  bundle_slots = calloc(64, sizeof *bundle_slots);
}

// Makes room for one more device and `more_claims` more claims, doubling a table at 3/4 load.
static void state_reserve(int more_claims) {
  if (device_count == device_capacity) {
    size_t old = device_capacity * sizeof *devices;
    devices = mremap(devices, old, 2 * old, MREMAP_MAYMOVE);
    if (devices == MAP_FAILED) die("mremap");
    device_capacity *= 2;
  }
  if ((claim_count + (uint64_t)more_claims) * 4 > (claim_mask + 1) * 3) {
    Claim *old = claims;
    uint64_t old_buckets = claim_mask + 1;
    claim_mask = 2 * old_buckets - 1;
    claims = zeroed(2 * old_buckets * sizeof *claims);
    for (uint64_t i = 0; i < old_buckets; i++)
      if (old[i].device) insert_claim(old[i]);
    munmap(old, old_buckets * sizeof *claims);
  }
  if ((uint64_t)(device_count + 1) * 4 > (by_id_mask + 1) * 3) {
    uint32_t *old = by_id;
    uint64_t old_buckets = by_id_mask + 1;
    by_id_mask = 2 * old_buckets - 1;
    by_id = zeroed(2 * old_buckets * sizeof *by_id);
    for (uint64_t i = 0; i < old_buckets; i++)
      if (old[i]) insert_by_id(old[i]);
    munmap(old, old_buckets * sizeof *by_id);
  }
}

static uint32_t find_claim(const uint64_t hash[2], uint32_t vendor) {
  for (uint64_t i = claim_bucket(hash, vendor); claims[i].device; i = (i + 1) & claim_mask)
    if (claims[i].hash[0] == hash[0] && claims[i].hash[1] == hash[1] && claims[i].vendor == vendor) return claims[i].device;
  return 0;
}

// ---- registrations ----

enum { KIND_KEYCHAIN = 1, KIND_IDFV = 2 };
enum { ERROR_INVALID_BUNDLE_ID = 1, ERROR_INVALID_IDENTIFIER = 2, ERROR_MISSING_IDENTIFIER = 3, ERROR_BATCH_TOO_LARGE = 6,
       ERROR_UNKNOWN_MESSAGE = 7 };

typedef struct {
  uint32_t device;  // 0 when the registration was refused
  uint32_t error;
  bool created;
} Outcome;

static uint64_t hlc, sequence;

static uint64_t next_hlc(void) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  uint64_t wall = ((uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000) << 16;
  hlc = wall > hlc ? wall : hlc + 1;
  return hlc;
}

// Each byte's value as a hex digit, or -1.
static int8_t hex_values[256];

static void hex_init(void) {
  memset(hex_values, -1, sizeof hex_values);
  for (int d = 0; d < 10; d++) hex_values['0' + d] = (int8_t)d;
  for (int d = 0; d < 6; d++) hex_values['a' + d] = hex_values['A' + d] = (int8_t)(10 + d);
}

static int hex_value(uint8_t c) { return hex_values[c]; }

// 8-4-4-4-12 hex digits, either case; never all zero.
static bool parse_uuid(const uint8_t *text, size_t n, uint8_t out[16]) {
  if (n != 36) return false;
  uint8_t any = 0;
  for (size_t i = 0, o = 0; i < 36; i++) {
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (text[i] != '-') return false;
      continue;
    }
    int high = hex_value(text[i]), low = hex_value(text[i + 1]);
    if (high < 0 || low < 0) return false;
    any |= out[o++] = (uint8_t)(high << 4 | low);
    i++;
  }
  return any != 0;
}

// ASCII letters, digits and '-', labels split by '.', at least two, none empty, at most 255 bytes.
// Lower-cases into `out`; the vendor is everything before the last label.
static bool check_bundle(const uint8_t *text, size_t n, char out[256], size_t *vendor_length) {
  if (n == 0 || n > 255) return false;
  size_t last_dot = 0;
  bool label_empty = true;
  for (size_t i = 0; i < n; i++) {
    uint8_t c = text[i];
    if (c == '.') {
      if (label_empty) return false;
      last_dot = i, label_empty = true;
    } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
      label_empty = false;
    } else if (c >= 'A' && c <= 'Z') {
      c |= 0x20, label_empty = false;
    } else {
      return false;
    }
    out[i] = (char)c;
  }
  if (label_empty || last_dot == 0) return false;
  *vendor_length = last_dot;
  return true;
}

static Bytes journal;  // this round's records, after room for the entry header

// Appends the registration's journal record: sequence u64, HLC u64, payload length u32, then
// Operation { registration = 1 { device = 1 { device_id = 1, created_hlc = 2, origin_node_id = 3,
// vendor = 4 }, bundle_id = 2, claims = 3 { kind = 1, value = 2 }..., seen_hlc = 5 } }.
static void journal_record(uint32_t device, uint32_t bundle, const uint8_t kinds[], const uint64_t hashes[][2], int claimed,
                           uint64_t seen) {
  static const char origin[] = "floor";
  const Device *d = &devices[device];
  const Bundle *b = &bundles[bundle];
  size_t ref = field_size(16) + 1 + varint_size(d->created_hlc) + field_size(sizeof origin - 1) + field_size(b->vendor_length);
  size_t claim = 2 + field_size(16);
  size_t registration = field_size(ref) + field_size(b->length) + claimed * field_size(claim) + 1 + varint_size(seen);
  size_t payload = field_size(registration);
  reserve(&journal, 20 + payload);
  uint64_t header[2] = {++sequence, seen};
  uint32_t length = (uint32_t)payload;
  put_raw(&journal, header, 16);
  put_raw(&journal, &length, 4);
  put_field(&journal, 1, registration);
  put_field(&journal, 1, ref);
  put_field(&journal, 1, 16), put_raw(&journal, d->id, 16);
  put_varint(&journal, 2 << 3), put_varint(&journal, d->created_hlc);
  put_field(&journal, 3, sizeof origin - 1), put_raw(&journal, origin, sizeof origin - 1);
  put_field(&journal, 4, b->vendor_length), put_raw(&journal, b->text, b->vendor_length);
  put_field(&journal, 2, b->length), put_raw(&journal, b->text, b->length);
  for (int i = 0; i < claimed; i++) {
    uint8_t value[16];
    store_be64(value, hashes[i][0]), store_be64(value + 8, hashes[i][1]);
    put_field(&journal, 3, claim);
    put_varint(&journal, 1 << 3), put_varint(&journal, kinds[i]);
    put_field(&journal, 2, 16), put_raw(&journal, value, 16);
  }
  put_varint(&journal, 5 << 3), put_varint(&journal, seen);
}

// A registration read and keyed, not yet applied.
typedef struct {
  uint32_t error;  // nonzero when refused
  uint32_t bundle, vendor;
  int identifiers;
  uint8_t kinds[4];
  uint64_t hashes[4][2];
  uint8_t minted[16];  // the ID a first install gets
} Keyed;

// The first pass over one RegisterRequest { bundle_id = 1, identifiers = 2 { kind = 1, value = 2 } }:
// reads and checks it, keys its identifiers, mints the ID a first install would get, and asks the
// CPU for the buckets the second pass reads. A batch reads all its registrations first, so that
// those cache misses overlap instead of following one another (registryd's `warm(for:)` does
// the same).
static Keyed read_registration(Reader request) {
  Keyed keyed = {0};
  Reader body = {0}, bundle_text = {0};
  uint64_t value;
  unsigned field;
  uint8_t uuids[4][16];
  int idfv = -1;
  while (request.at < request.end) {
    if (!read_field(&request, &field, &body, &value)) return keyed.error = ERROR_INVALID_IDENTIFIER, keyed;
    if (field == 1 && value == UINT64_MAX) bundle_text = body;
    if (field != 2 || value != UINT64_MAX) continue;
    if (keyed.identifiers == 4) return keyed.error = ERROR_INVALID_IDENTIFIER, keyed;
    Reader identifier = body, text = {0};
    uint64_t kind = 0;
    while (identifier.at < identifier.end) {
      if (!read_field(&identifier, &field, &body, &value)) return keyed.error = ERROR_INVALID_IDENTIFIER, keyed;
      if (field == 1 && value != UINT64_MAX) kind = value;
      if (field == 2 && value == UINT64_MAX) text = body;
    }
    if ((kind != KIND_KEYCHAIN && kind != KIND_IDFV) || !parse_uuid(text.at, (size_t)(text.end - text.at), uuids[keyed.identifiers]))
      return keyed.error = ERROR_INVALID_IDENTIFIER, keyed;
    if (kind == KIND_IDFV) idfv = keyed.identifiers;
    keyed.kinds[keyed.identifiers++] = (uint8_t)kind;
  }
  char lowered[256];
  size_t vendor_length;
  if (!check_bundle(bundle_text.at, (size_t)(bundle_text.end - bundle_text.at), lowered, &vendor_length))
    return keyed.error = ERROR_INVALID_BUNDLE_ID, keyed;
  if (idfv < 0) return keyed.error = ERROR_MISSING_IDENTIFIER, keyed;
  keyed.bundle = intern_bundle(lowered, (size_t)(bundle_text.end - bundle_text.at), vendor_length);
  keyed.vendor = bundles[keyed.bundle].vendor;
  for (int i = 0; i < keyed.identifiers; i++) {
    keyed_hash(keyed.kinds[i], uuids[i], keyed.hashes[i]);
    __builtin_prefetch(&claims[claim_bucket(keyed.hashes[i], keyed.vendor)]);
  }
  uint8_t message[256 + 16];
  memcpy(message, lowered, vendor_length);
  message[vendor_length] = 0;
  memcpy(message + vendor_length + 1, uuids[idfv], 16);
  siphash128(message, vendor_length + 17, keyed.minted);
  __builtin_prefetch(&by_id[id_word(keyed.minted) & by_id_mask]);
  return keyed;
}

// The second pass: finds the device that holds any of the identifiers, or makes one with the
// minted ID, adds the identifiers it did not hold, and journals the registration.
static Outcome apply_registration(const Keyed *keyed) {
  Outcome outcome = {.error = keyed->error};
  if (keyed->error) return outcome;
  uint32_t found = 0, holders[4];
  for (int i = 0; i < keyed->identifiers; i++) {
    holders[i] = find_claim(keyed->hashes[i], keyed->vendor);
    if (!found) found = holders[i];
  }
  uint64_t seen = next_hlc();
  state_reserve(keyed->identifiers);
  if (!found) {
    found = device_count++;
    Device *d = &devices[found];
    memcpy(d->id, keyed->minted, 16);
    d->created_hlc = seen, d->vendor = keyed->vendor;
    insert_by_id(found);
    outcome.created = true;
  }
  // Identifiers no device held yet join the device (one held by another device stays there: a
  // floor does not merge).
  for (int i = 0; i < keyed->identifiers; i++) {
    if (holders[i]) continue;
    insert_claim((Claim){{keyed->hashes[i][0], keyed->hashes[i][1]}, keyed->vendor, found});
    claim_count++;
  }
  devices[found].last_seen_hlc = seen, devices[found].app = keyed->bundle;
  journal_record(found, keyed->bundle, keyed->kinds, keyed->hashes, keyed->identifiers, seen);
  outcome.device = found;
  return outcome;
}

// ---- answers ----

static void device_text(const uint8_t id[16], uint8_t out[36]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0, o = 0; i < 16; i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
    out[o++] = (uint8_t)digits[id[i] >> 4];
    out[o++] = (uint8_t)digits[id[i] & 15];
  }
}

// RegisterResult { device_id = 1, created = 2, vendor = 3 } or Error { code = 1, message = 2 }.
static size_t result_size(Outcome o) {
  if (!o.device) return 2 + field_size(sizeof "refused" - 1);
  return field_size(36) + (o.created ? 2 : 0) + field_size(bundles[devices[o.device].app].vendor_length);
}

static void put_result(Bytes *out, Outcome o) {
  if (!o.device) {
    put_varint(out, 1 << 3), put_varint(out, o.error);
    put_field(out, 2, sizeof "refused" - 1), put_raw(out, "refused", sizeof "refused" - 1);
    return;
  }
  const Device *d = &devices[o.device];
  const Bundle *b = &bundles[d->app];
  put_field(out, 1, 36);
  device_text(d->id, out->bytes + out->count);
  out->count += 36;
  if (o.created) put_varint(out, 2 << 3), put_varint(out, 1);
  put_field(out, 3, b->vendor_length), put_raw(out, b->text, b->vendor_length);
}

// A ServerFrame: the 4-byte length, request_id = 1, then one body field of `body_size` bytes,
// whose contents the caller puts.
static void put_frame_start(Bytes *out, uint64_t request_id, unsigned body_field, size_t body_size) {
  size_t payload = 1 + varint_size(request_id) + field_size(body_size);
  reserve(out, 4 + payload);
  uint32_t length = __builtin_bswap32((uint32_t)payload);
  put_raw(out, &length, 4);
  put_varint(out, 1 << 3), put_varint(out, request_id);
  put_field(out, body_field, body_size);
}

static void answer_error(Bytes *out, uint64_t request_id, uint32_t code) {
  static const char message[] = "the registration floor serves registrations only";
  size_t body = 2 + field_size(sizeof message - 1);
  put_frame_start(out, request_id, 15, body);
  put_varint(out, 1 << 3), put_varint(out, code);
  put_field(out, 2, sizeof message - 1), put_raw(out, message, sizeof message - 1);
}

// HelloAccepted { version = 1 { 1, 2 }, node_id = 2, server_version = 4, limits = 5 { max_frame_bytes,
// max_batch_size, max_in_flight } }.
static void answer_hello(Bytes *out, uint64_t request_id) {
  uint8_t limits[32], accepted[96];
  Bytes l = {limits, 0, sizeof limits}, a = {accepted, 0, sizeof accepted};
  put_varint(&l, 1 << 3), put_varint(&l, MAX_FRAME_BYTES);
  put_varint(&l, 2 << 3), put_varint(&l, MAX_BATCH);
  put_varint(&l, 3 << 3), put_varint(&l, 1024);
  put_field(&a, 1, 4), put_raw(&a, (uint8_t[]){1 << 3, 1, 2 << 3, 2}, 4);
  put_field(&a, 2, 5), put_raw(&a, "floor", 5);
  put_field(&a, 4, 18), put_raw(&a, "registration-floor", 18);
  put_field(&a, 5, l.count), put_raw(&a, limits, l.count);
  put_frame_start(out, request_id, 2, a.count);
  put_raw(out, accepted, a.count);
}

// ---- frames ----

static Keyed read_batch[MAX_BATCH];
static Outcome outcomes[MAX_BATCH];

// One ClientFrame { request_id = 1, hello = 2, register_device = 3, register_batch = 4 {
// registrations = 1 }, ... }: its answer goes to `out`, its records to the journal.
static void serve_frame(Reader frame, Bytes *out) {
  uint64_t request_id = 0, value;
  unsigned field, body_field = 0;
  Reader body = {0}, chosen = {0};
  while (frame.at < frame.end) {
    if (!read_field(&frame, &field, &body, &value)) return answer_error(out, request_id, ERROR_UNKNOWN_MESSAGE);
    if (field == 1 && value != UINT64_MAX) request_id = value;
    else if (field >= 2 && value == UINT64_MAX && !body_field) body_field = field, chosen = body;
  }
  if (body_field == 2) return answer_hello(out, request_id);
  if (body_field == 3) {
    read_batch[0] = read_registration(chosen);
    Outcome o = apply_registration(&read_batch[0]);
    put_frame_start(out, request_id, o.device ? 3 : 15, result_size(o));
    return put_result(out, o);
  }
  if (body_field != 4) return answer_error(out, request_id, ERROR_UNKNOWN_MESSAGE);
  int count = 0;
  Reader batch = chosen;
  while (batch.at < batch.end) {
    if (!read_field(&batch, &field, &body, &value)) return answer_error(out, request_id, ERROR_UNKNOWN_MESSAGE);
    if (field != 1 || value != UINT64_MAX) continue;
    if (count == MAX_BATCH) return answer_error(out, request_id, ERROR_BATCH_TOO_LARGE);
    read_batch[count++] = read_registration(body);
  }
  for (int i = 0; i < count; i++) outcomes[i] = apply_registration(&read_batch[i]);
  // RegisterBatchResult { items = 1 { result = 1 | error = 2 } }
  size_t items = 0;
  for (int i = 0; i < count; i++) items += field_size(field_size(result_size(outcomes[i])));
  put_frame_start(out, request_id, 4, items);
  reserve(out, items);
  for (int i = 0; i < count; i++) {
    size_t result = result_size(outcomes[i]);
    put_field(out, 1, field_size(result));
    put_field(out, outcomes[i].device ? 1 : 2, result);
    put_result(out, outcomes[i]);
  }
}

typedef struct {
  int fd;
  Bytes in, out;
  size_t sent;
  bool answered;  // has answers waiting for this round's commit
  bool writing;   // waits for EPOLLOUT
} Connection;

static int epoll_fd, journal_fd;
static off_t journal_offset, journal_allocated;
static Connection **round_connections;
static size_t round_count, round_capacity;

static void close_connection(Connection *c) {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  c->fd = -1;  // freed after the round, which may still list it
}

// Reads what the socket has and serves every whole frame in it.
static void read_connection(Connection *c) {
  for (;;) {
    reserve(&c->in, 65536);
    ssize_t n = read(c->fd, c->in.bytes + c->in.count, c->in.capacity - c->in.count);
    if (n > 0) { c->in.count += (size_t)n; continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    return close_connection(c);  // closed, or an error
  }
  size_t at = 0;
  while (c->in.count - at >= 4) {
    uint32_t length;
    memcpy(&length, c->in.bytes + at, 4);
    length = __builtin_bswap32(length);
    if (length > MAX_FRAME_BYTES) return close_connection(c);
    if (c->in.count - at - 4 < length) break;
    serve_frame((Reader){c->in.bytes + at + 4, c->in.bytes + at + 4 + length}, &c->out);
    at += 4 + length;
  }
  memmove(c->in.bytes, c->in.bytes + at, c->in.count - at);
  c->in.count -= at;
  if (c->out.count > c->sent && !c->answered) {
    c->answered = true;
    if (round_count == round_capacity) {
      round_capacity = round_capacity ? round_capacity * 2 : 64;
      round_connections = grow(round_connections, round_capacity * sizeof *round_connections);
    }
    round_connections[round_count++] = c;
  }
}

static void write_connection(Connection *c) {
  while (c->sent < c->out.count) {
    ssize_t n = write(c->fd, c->out.bytes + c->sent, c->out.count - c->sent);
    if (n > 0) { c->sent += (size_t)n; continue; }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!c->writing) {
        struct epoll_event event = {.events = EPOLLIN | EPOLLOUT, .data.ptr = c};
        epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
        c->writing = true;
      }
      return;
    }
    return close_connection(c);
  }
  c->out.count = c->sent = 0;
  if (c->writing) {
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, c->fd, &event);
    c->writing = false;
  }
}

// Makes the round's records durable: one entry (magic, payload length, CRC32C of the payload,
// then the records), one pwrite, one fdatasync.
static void commit_round(void) {
  if (journal.count <= 16) return;
  uint64_t crc = 0xFFFFFFFF;
  size_t i = 16;
  for (; i + 8 <= journal.count; i += 8) {
    uint64_t word;
    memcpy(&word, journal.bytes + i, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  for (; i < journal.count; i++) crc = _mm_crc32_u8((uint32_t)crc, journal.bytes[i]);
  uint32_t header[4] = {0x464C5252 /* "RRLF" */, (uint32_t)(journal.count - 16), (uint32_t)crc, 0};
  memcpy(journal.bytes, header, 16);
  while (journal_offset + (off_t)journal.count > journal_allocated) {
    if (fallocate(journal_fd, 0, journal_allocated, JOURNAL_STEP) != 0) die("fallocate");
    journal_allocated += JOURNAL_STEP;
  }
  for (size_t done = 0; done < journal.count;) {
    ssize_t n = pwrite(journal_fd, journal.bytes + done, journal.count - done, journal_offset + (off_t)done);
    if (n < 0 && errno != EINTR) die("pwrite");
    if (n > 0) done += (size_t)n;
  }
  if (fdatasync(journal_fd) != 0) die("fdatasync");
  journal_offset += (off_t)journal.count;
  journal.count = 16;
}

static void open_journal(const char *path) {
  journal_fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (journal_fd < 0) die(path);
  reserve(&journal, 1 << 20);
  journal.count = 16;
}

static int listen_on(const char *port, int flags) {
  int listener = socket(AF_INET, SOCK_STREAM | flags, 0), one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 128) != 0) die("listen");
  return listener;
}

// ---- a replica: records taken from a peer ----

static uint64_t load_be64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | p[i];
  return v;
}

// One peer's record read, not yet applied.
typedef struct {
  uint8_t id[16];
  uint64_t created_hlc, seen;
  uint32_t vendor, bundle, origin;
  int claimed;
  uint8_t kinds[4];
  uint64_t hashes[4][2];
} Replicated;

#define REPLICA_BATCH 256
#define MAX_ENTRY_BYTES (64u << 20)
static Replicated replicated[REPLICA_BATCH];

// Sizes the tables once for `records` first installs of two claims each, below 3/4 load.
static void state_size(uint64_t records) {
  if (records + 1 > device_capacity) {
    size_t old = device_capacity * sizeof *devices;
    while (records + 1 > device_capacity) device_capacity *= 2;
    devices = mremap(devices, old, device_capacity * sizeof *devices, MREMAP_MAYMOVE);
    if (devices == MAP_FAILED) die("mremap");
  }
  uint64_t claim_buckets = claim_mask + 1, id_buckets = by_id_mask + 1;
  while (2 * records * 4 > claim_buckets * 3) claim_buckets *= 2;
  while ((records + 1) * 4 > id_buckets * 3) id_buckets *= 2;
  munmap(claims, (claim_mask + 1) * sizeof *claims);
  munmap(by_id, (by_id_mask + 1) * sizeof *by_id);
  claim_mask = claim_buckets - 1, by_id_mask = id_buckets - 1;
  claims = zeroed(claim_buckets * sizeof *claims);
  by_id = zeroed(id_buckets * sizeof *by_id);
}

// Origin nodes numbered by first sight; the last one is remembered, as a peer's records name few.
static char origin_texts[16][64];
static uint8_t origin_lengths[16];
static uint32_t origin_count, last_origin;

static bool origin_of(Reader text, uint32_t *origin) {
  size_t n = (size_t)(text.end - text.at);
  if (n == 0 || n > 64) return false;
  if (origin_count && origin_lengths[last_origin] == n && memcmp(origin_texts[last_origin], text.at, n) == 0)
    return *origin = last_origin, true;
  for (uint32_t o = 0; o < origin_count; o++)
    if (origin_lengths[o] == n && memcmp(origin_texts[o], text.at, n) == 0) return *origin = last_origin = o, true;
  if (origin_count == 16) return false;
  memcpy(origin_texts[origin_count], text.at, n);
  origin_lengths[origin_count] = (uint8_t)n;
  return *origin = last_origin = origin_count++, true;
}

// Reads Operation { registration = 1 { device = 1 { device_id = 1, created_hlc = 2, origin_node_id
// = 3, vendor = 4 }, bundle_id = 2, claims = 3 { kind = 1, value = 2 }..., seen_hlc = 5 } } and
// asks the CPU for the buckets applying it reads. False on anything else.
static bool read_replicated(Reader operation, Replicated *r) {
  Reader body = {0}, registration = {0}, device = {0}, vendor = {0}, bundle = {0}, origin = {0};
  uint64_t value;
  unsigned field;
  bool has_id = false;
  memset(r, 0, sizeof *r);
  while (operation.at < operation.end) {
    if (!read_field(&operation, &field, &body, &value)) return false;
    if (field == 1 && value == UINT64_MAX) registration = body;
  }
  if (!registration.at) return false;
  while (registration.at < registration.end) {
    if (!read_field(&registration, &field, &body, &value)) return false;
    if (field == 1 && value == UINT64_MAX) device = body;
    else if (field == 2 && value == UINT64_MAX) bundle = body;
    else if (field == 5 && value != UINT64_MAX) r->seen = value;
    else if (field == 3 && value == UINT64_MAX) {
      if (r->claimed == 4) return false;
      Reader claim = body, claim_value = {0};
      uint64_t kind = 0;
      while (claim.at < claim.end) {
        if (!read_field(&claim, &field, &body, &value)) return false;
        if (field == 1 && value != UINT64_MAX) kind = value;
        if (field == 2 && value == UINT64_MAX) claim_value = body;
      }
      if (claim_value.end - claim_value.at != 16 || (kind != KIND_KEYCHAIN && kind != KIND_IDFV)) return false;
      r->kinds[r->claimed] = (uint8_t)kind;
      r->hashes[r->claimed][0] = load_be64(claim_value.at), r->hashes[r->claimed][1] = load_be64(claim_value.at + 8);
      r->claimed++;
    }
  }
  while (device.at < device.end) {
    if (!read_field(&device, &field, &body, &value)) return false;
    if (field == 1 && value == UINT64_MAX && body.end - body.at == 16) memcpy(r->id, body.at, 16), has_id = true;
    else if (field == 2 && value != UINT64_MAX) r->created_hlc = value;
    else if (field == 3 && value == UINT64_MAX) origin = body;
    else if (field == 4 && value == UINT64_MAX) vendor = body;
  }
  size_t vendor_length = (size_t)(vendor.end - vendor.at), bundle_length = (size_t)(bundle.end - bundle.at);
  if (!has_id || !vendor.at || !bundle.at || vendor_length > bundle_length || bundle_length > 255 || !origin.at ||
      !origin_of(origin, &r->origin))
    return false;
  // A bundle's grammar is checked where it was first registered; a replica that checked each new
  // one again would do so once a bundle, which is nothing here.
  r->bundle = intern_bundle((const char *)bundle.at, bundle_length, vendor_length);
  r->vendor = bundles[r->bundle].vendor;
  for (int i = 0; i < r->claimed; i++) __builtin_prefetch(&claims[claim_bucket(r->hashes[i], r->vendor)]);
  __builtin_prefetch(&by_id[id_word(r->id) & by_id_mask]);
  return true;
}

static uint32_t find_by_id(const uint8_t id[16]) {
  for (uint64_t i = id_word(id) & by_id_mask; by_id[i]; i = (i + 1) & by_id_mask)
    if (memcmp(devices[by_id[i]].id, id, 16) == 0) return by_id[i];
  return 0;
}

// Joins one record into the state: the device if it is new, the claims it does not hold, the
// latest sighting.
static void apply_replicated(const Replicated *r) {
  uint32_t holders[4];
  for (int i = 0; i < r->claimed; i++) holders[i] = find_claim(r->hashes[i], r->vendor);
  uint32_t found = find_by_id(r->id);
  state_reserve(r->claimed);
  if (!found) {
    found = device_count++;
    Device *d = &devices[found];
    memcpy(d->id, r->id, 16);
    d->created_hlc = r->created_hlc, d->vendor = r->vendor, d->origin = r->origin;
    insert_by_id(found);
  }
  for (int i = 0; i < r->claimed; i++) {
    if (holders[i]) continue;
    insert_claim((Claim){{r->hashes[i][0], r->hashes[i][1]}, r->vendor, found});
    claim_count++;
  }
  if (r->seen >= devices[found].last_seen_hlc) devices[found].last_seen_hlc = r->seen, devices[found].app = r->bundle;
}

// Takes one frame of records (sequence u64, HLC u64, length u32, then the Operation): reads a
// batch of them, then applies it, and copies the frame into this round's journal entry. Each
// record's sequence must follow the one before (one origin's log, as `send` streams it), and its
// HLC joins this node's clock.
static uint64_t take_frame(const uint8_t *at, const uint8_t *end) {
  uint64_t taken = 0;
  reserve(&journal, (size_t)(end - at));
  put_raw(&journal, at, (size_t)(end - at));
  while (at < end) {
    int count = 0;
    for (; count < REPLICA_BATCH && at < end; count++) {
      uint32_t length;
      uint64_t header[2];
      if (end - at < 20) die("replica: a record cut short");
      memcpy(header, at, 16);
      if (header[0] != sequence + 1) die("replica: a record out of sequence");
      sequence = header[0], hlc = header[1] > hlc ? header[1] : hlc;
      memcpy(&length, at + 16, 4);
      if ((size_t)(end - at - 20) < length) die("replica: a record cut short");
      if (!read_replicated((Reader){at + 20, at + 20 + length}, &replicated[count])) die("replica: a record that is not a registration");
      at += 20 + length;
    }
    for (int i = 0; i < count; i++) apply_replicated(&replicated[i]);
    taken += (uint64_t)count;
  }
  return taken;
}

static int replica_main(const char *port, const char *journal_path) {
  state_init();
  open_journal(journal_path);
  int listener = listen_on(port, 0);
  fprintf(stderr, "registration_floor replica: listening on 127.0.0.1:%s\n", port);
  int fd = accept(listener, NULL, NULL);
  if (fd < 0) die("accept");
  Bytes in = {0};
  uint64_t announced = 0, taken = 0;
  bool sized = false;
  for (bool open = true; open;) {
    reserve(&in, 1 << 20);
    ssize_t n = read(fd, in.bytes + in.count, in.capacity - in.count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("read");
    if (n == 0) open = false;
    in.count += (size_t)n;
    size_t at = 0;
    if (!sized && in.count >= 8) memcpy(&announced, in.bytes, 8), state_size(announced), sized = true, at = 8;
    while (sized && in.count - at >= 4) {
      uint32_t length;
      memcpy(&length, in.bytes + at, 4);
      length = __builtin_bswap32(length);
      if (length > MAX_ENTRY_BYTES) die("replica: a frame too large");
      if (in.count - at - 4 < length) {
        reserve(&in, length + 4);
        break;
      }
      taken += take_frame(in.bytes + at + 4, in.bytes + at + 4 + length);
      at += 4 + length;
    }
    memmove(in.bytes, in.bytes + at, in.count - at);
    in.count -= at;
    commit_round();
  }
  if (in.count) die("replica: the stream ended inside a frame");
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  printf("operations %llu announced %llu user %.6f system %.6f\n", (unsigned long long)taken, (unsigned long long)announced,
         usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6, usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6);
  return taken == announced ? 0 : 1;
}

// Streams the entries of a journal the first mode wrote: the count of their records, then each
// entry's records as a frame. Returns once the replica closed the connection.
static int send_main(const char *journal_path, const char *port) {
  int file = open(journal_path, O_RDONLY);
  if (file < 0) die(journal_path);
  off_t size = lseek(file, 0, SEEK_END);
  const uint8_t *bytes = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, file, 0) : NULL;
  if (size > 0 && bytes == MAP_FAILED) die("mmap");
  uint64_t records = 0;
  off_t end = 0;
  for (off_t at = 0; at + 16 <= size;) {
    uint32_t header[4];
    memcpy(header, bytes + at, 16);
    if (header[0] != 0x464C5252 || at + 16 + (off_t)header[1] > size) break;
    for (off_t r = at + 16; r + 20 <= at + 16 + (off_t)header[1];) {
      uint32_t length;
      memcpy(&length, bytes + r + 16, 4);
      r += 20 + length, records++;
    }
    at += 16 + header[1], end = at;
  }
  // The replica may not listen yet: tried for up to 10 s (a probe of its port would be taken for
  // the stream).
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int fd = -1;
  for (int attempt = 0; fd < 0; attempt++) {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) == 0) break;
    if (errno != ECONNREFUSED || attempt == 200) die("connect");
    close(fd), fd = -1;
    nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
  }
  Bytes out = {0};
  reserve(&out, 8 + (size_t)end);
  put_raw(&out, &records, 8);
  for (off_t at = 0; at < end;) {
    uint32_t header[4];
    memcpy(header, bytes + at, 16);
    uint32_t length = __builtin_bswap32(header[1]);
    put_raw(&out, &length, 4);
    put_raw(&out, bytes + at + 16, header[1]);
    at += 16 + header[1];
  }
  for (size_t done = 0; done < out.count;) {
    ssize_t n = write(fd, out.bytes + done, out.count - done);
    if (n < 0 && errno != EINTR) die("write");
    if (n > 0) done += (size_t)n;
  }
  shutdown(fd, SHUT_WR);
  char drain[64];
  while (read(fd, drain, sizeof drain) > 0) {}
  fprintf(stderr, "registration_floor send: %llu records\n", (unsigned long long)records);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "replica") == 0) return replica_main(argv[2], argv[3]);
  if (argc == 4 && strcmp(argv[1], "send") == 0) return send_main(argv[2], argv[3]);
  if (argc != 3) {
    fprintf(stderr, "usage: registration_floor PORT JOURNAL_FILE\n"
                    "       registration_floor send JOURNAL_FILE PORT\n"
                    "       registration_floor replica PORT JOURNAL_FILE\n");
    return 2;
  }
  keys_init();
  hex_init();
  state_init();
  open_journal(argv[2]);
  int listener = listen_on(argv[1], SOCK_NONBLOCK), one = 1;
  epoll_fd = epoll_create1(0);
  struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};  // NULL: the listener
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, listener, &event);
  fprintf(stderr, "registration_floor: listening on 127.0.0.1:%s\n", argv[1]);

  struct epoll_event events[256];
  for (;;) {
    int ready = epoll_wait(epoll_fd, events, 256, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) die("epoll_wait");
    for (int e = 0; e < ready; e++) {
      Connection *c = events[e].data.ptr;
      if (!c) {
        int fd;
        while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          Connection *fresh = calloc(1, sizeof *fresh);
          fresh->fd = fd;
          struct epoll_event readable = {.events = EPOLLIN, .data.ptr = fresh};
          epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &readable);
        }
        continue;
      }
      if (c->fd >= 0 && (events[e].events & EPOLLOUT)) write_connection(c);
      if (c->fd >= 0 && (events[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) read_connection(c);
    }
    commit_round();
    for (size_t i = 0; i < round_count; i++) {
      Connection *c = round_connections[i];
      c->answered = false;
      if (c->fd >= 0) write_connection(c);
    }
    round_count = 0;
    // A closed connection's memory is kept: registryload closes its few only at the end.
  }
}
