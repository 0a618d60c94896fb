// floor: what this machine charges for durable request/response at a fixed rate, with no
// registry at all. It answers "how much may a server's request path cost here and still meet the
// open-loop target?": a bound for registryd, measured with the same traffic shape on the same cores.
//
//   floor server PORT JOURNAL_FILE WORK_NS [inline|pipelined]   (PORT 0 picks a free one; logged on stderr)
//   floor client PORT RATE SECONDS WARMUP_SECONDS CONNECTIONS REQUEST_BYTES REPLY_BYTES JOURNAL_BYTES
//
// The server's reading thread waits on epoll, reads every ready connection, cuts the stream into
// frames (a 4-byte big-endian length, then the payload, as registryd's protocol does) and spins
// WORK_NS of CPU per frame (standing in for decoding and deciding). Each frame brings JOURNAL_BYTES
// for a preallocated journal file; a round (the frames of one epoll wake-up) is made durable with
// one pwrite and one fdatasync (group commit, as registryd does) and then answered. "inline" (the
// default) does that on the reading thread, so nothing crosses threads; "pipelined" hands the round
// to one committer thread, which syncs and answers it while the next round is read.
// The client is one thread that sends a frame every 1/RATE seconds round-robin over its
// connections (uniform spacing, as registryload's open loop) and measures each answer from the
// frame's intended send time, so a late sender is charged too. It prints percentiles of that
// latency and of its own sending lag, then one line of key=value pairs for scripts. The server,
// stopped with SIGTERM or SIGINT, prints its commits' pwrite + fdatasync times the same way.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define JOURNAL_FILE_BYTES (64L << 20)
#define MAX_CONNECTIONS 256
#define HEADER_BYTES 24 /* intended ns, sequence, reply bytes, journal bytes */

static void fail(const char *what) {
    fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static unsigned long parse(const char *text, const char *name) {
    char *end;
    errno = 0;
    unsigned long value = strtoul(text, &end, 10);
    if (errno || *end || end == text) {
        fprintf(stderr, "floor: %s must be a whole number, not '%s'\n", name, text);
        exit(64);
    }
    return value;
}

/// Writes all of `bytes`, retrying at once while a non-blocking socket's buffer is full. Returns
/// false if `deadline` (monotonic nanoseconds; 0 for none) passes first: a client whose server
/// stopped reading would otherwise spin here for ever, while the server, unread, spins writing
/// its answers back (an overloaded floor did that in a bench run).
static bool write_all_until(int fd, const uint8_t *bytes, size_t count, uint64_t deadline) {
    while (count > 0) {
        ssize_t written = write(fd, bytes, count);
        if (written < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                if (deadline && now_ns() > deadline) return false;
                continue;
            }
            fail("write");
        }
        bytes += written;
        count -= (size_t)written;
    }
    return true;
}

static void write_all(int fd, const uint8_t *bytes, size_t count) { write_all_until(fd, bytes, count, 0); }

/// Grows `buffer` (an array of `capacity` elements) to hold at least `needed` elements: to twice
/// its capacity, or to `needed` when that is more.
#define RESERVE(buffer, capacity, needed)                                          \
    do {                                                                           \
        if ((needed) > (capacity)) {                                               \
            size_t grown_ = (capacity) * 2 > (needed) ? (capacity) * 2 : (needed); \
            (buffer) = realloc((buffer), grown_ * sizeof *(buffer));               \
            if (!(buffer)) fail("realloc");                                        \
            (capacity) = grown_;                                                   \
        }                                                                          \
    } while (0)

struct stream {
    int fd;
    uint8_t *buffer;
    size_t used, capacity;
};

/// Reads what `s` has ready (non-blocking) onto its buffer; returns 0 once the peer closed.
static int fill(struct stream *s) {
    for (;;) {
        RESERVE(s->buffer, s->capacity, s->used + 65536);
        ssize_t got = read(s->fd, s->buffer + s->used, s->capacity - s->used);
        if (got > 0) { s->used += (size_t)got; continue; }
        if (got == 0) return 0;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return 1;
        fail("read");
    }
}

/// The next whole frame's payload in `s` at `*offset`, advancing it; NULL when none is whole.
static uint8_t *next_frame(struct stream *s, size_t *offset, uint32_t *length) {
    if (s->used - *offset < 4) return NULL;
    uint32_t be;
    memcpy(&be, s->buffer + *offset, 4);
    *length = ntohl(be);
    if (s->used - *offset - 4 < *length) return NULL;
    uint8_t *payload = s->buffer + *offset + 4;
    *offset += 4 + *length;
    return payload;
}

static void consume(struct stream *s, size_t offset) {
    memmove(s->buffer, s->buffer + offset, s->used - offset);
    s->used -= offset;
}

static void spin(uint64_t ns) {
    uint64_t until = now_ns() + ns;
    while (now_ns() < until) { }
}

/// The frames read since the last commit: their journal bytes, and who to answer with what.
struct round {
    uint8_t *journal;
    size_t journal_used, journal_capacity;
    struct answer { int fd; uint8_t header[HEADER_BYTES]; } *answers;
    size_t answer_count, answer_capacity;
};

/// Adds a frame's journal record (its payload, repeated to `journal_bytes`) and its answer.
static void round_add(struct round *r, int fd, const uint8_t *payload, uint32_t length, uint32_t journal_bytes) {
    RESERVE(r->journal, r->journal_capacity, r->journal_used + journal_bytes);
    for (uint32_t done = 0; done < journal_bytes;) {
        uint32_t part = journal_bytes - done < length ? journal_bytes - done : length;
        memcpy(r->journal + r->journal_used + done, payload, part);
        done += part;
    }
    r->journal_used += journal_bytes;
    RESERVE(r->answers, r->answer_capacity, r->answer_count + 1);
    r->answers[r->answer_count].fd = fd;
    memcpy(r->answers[r->answer_count].header, payload, HEADER_BYTES);
    r->answer_count++;
}

/// Moves every frame of `from` onto the end of `into`, leaving `from` empty (its buffers kept).
static void round_append(struct round *into, struct round *from) {
    RESERVE(into->journal, into->journal_capacity, into->journal_used + from->journal_used);
    memcpy(into->journal + into->journal_used, from->journal, from->journal_used);
    into->journal_used += from->journal_used;
    RESERVE(into->answers, into->answer_capacity, into->answer_count + from->answer_count);
    memcpy(into->answers + into->answer_count, from->answers, from->answer_count * sizeof *from->answers);
    into->answer_count += from->answer_count;
    from->journal_used = 0;
    from->answer_count = 0;
}

/// How long each commit's pwrite and fdatasync took, in microseconds, as registryd's commit time
/// measures its own: written by the one thread that commits, read once the server is stopping.
#define COMMIT_SAMPLES (1 << 22)
static uint32_t commit_micros[COMMIT_SAMPLES];
static size_t commit_count;

static void record_commit(uint64_t ns) {
    size_t count = __atomic_load_n(&commit_count, __ATOMIC_RELAXED);
    if (count == COMMIT_SAMPLES) return;
    commit_micros[count] = (uint32_t)(ns / 1000);
    __atomic_store_n(&commit_count, count + 1, __ATOMIC_RELEASE);
}

static int compare_micros(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/// Prints the commit times' percentiles on stderr, as "floor: commits N p50_us=… p99_us=… max_us=…".
static void print_commits(void) {
    size_t count = __atomic_load_n(&commit_count, __ATOMIC_ACQUIRE);
    qsort(commit_micros, count, sizeof *commit_micros, compare_micros);
#define AT(p) (count ? commit_micros[(size_t)((p) * (double)(count - 1))] : 0)
    fprintf(stderr, "floor: commits %zu p50_us=%u p90_us=%u p99_us=%u p999_us=%u max_us=%u\n", count, AT(.5), AT(.9), AT(.99), AT(.999), AT(1));
#undef AT
}

static volatile sig_atomic_t stopping;
static void stop(int signal) { (void)signal; stopping = 1; }

/// The journal file and where the next round goes in it (wrapping at its preallocated end).
struct journal { int fd; long offset; uint8_t *reply; };

/// Makes `r` durable with one pwrite and one fdatasync, answers its frames, and empties it.
static void commit_round(struct journal *j, struct round *r) {
    if (j->offset + (long)r->journal_used > JOURNAL_FILE_BYTES) j->offset = 0;
    uint64_t started = now_ns();
    if (pwrite(j->fd, r->journal, r->journal_used, j->offset) != (ssize_t)r->journal_used) fail("pwrite");
    if (fdatasync(j->fd) != 0) fail("fdatasync");
    record_commit(now_ns() - started);
    j->offset += (long)r->journal_used;
    for (size_t i = 0; i < r->answer_count; i++) {
        uint32_t reply_bytes;
        memcpy(&reply_bytes, r->answers[i].header + 16, 4);
        if (reply_bytes < HEADER_BYTES) reply_bytes = HEADER_BYTES;
        if (reply_bytes > (1 << 20) - 4) reply_bytes = (1 << 20) - 4;
        uint32_t be = htonl(reply_bytes);
        memcpy(j->reply, &be, 4);
        memcpy(j->reply + 4, r->answers[i].header, HEADER_BYTES);
        // A client that has gone away is no longer owed its answer.
        uint8_t *bytes = j->reply;
        size_t left = 4 + reply_bytes;
        while (left > 0) {
            ssize_t sent = send(r->answers[i].fd, bytes, left, MSG_NOSIGNAL);
            if (sent < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (sent < 0) break;
            bytes += sent;
            left -= (size_t)sent;
        }
    }
    r->journal_used = 0;
    r->answer_count = 0;
}

/// Pipelined mode: the reading thread hands rounds over here, and one committer thread makes
/// each durable and answers it while the next one is being read.
struct handover {
    pthread_mutex_t lock;
    pthread_cond_t filled;
    struct round pending;
    struct journal journal;
};

static void *committer(void *argument) {
    struct handover *h = argument;
    struct round taken = { 0 };
    for (;;) {
        pthread_mutex_lock(&h->lock);
        while (h->pending.answer_count == 0) pthread_cond_wait(&h->filled, &h->lock);
        struct round swap = h->pending;
        h->pending = taken;
        taken = swap;
        pthread_mutex_unlock(&h->lock);
        commit_round(&h->journal, &taken);
    }
    return NULL;
}

static int server(int argc, char **argv) {
    if (argc != 5 && argc != 6) { fprintf(stderr, "usage: floor server PORT JOURNAL_FILE WORK_NS [inline|pipelined]\n"); return 64; }
    int port = (int)parse(argv[2], "PORT");
    uint64_t work_ns = parse(argv[4], "WORK_NS");
    int pipelined = argc == 6 && strcmp(argv[5], "pipelined") == 0;
    if (argc == 6 && !pipelined && strcmp(argv[5], "inline") != 0) {
        fprintf(stderr, "floor: the mode must be inline or pipelined, not '%s'\n", argv[5]);
        return 64;
    }
    int journal = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (journal < 0) fail("open the journal");
    // Preallocate by writing, so that a commit's fdatasync never has metadata to journal.
    static uint8_t zeros[1 << 20];
    for (long done = 0; done < JOURNAL_FILE_BYTES; done += sizeof zeros) write_all(journal, zeros, sizeof zeros);
    if (fsync(journal) != 0) fail("fsync");

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0) fail("bind");
    if (listen(listener, 64) != 0) fail("listen");
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = { .events = EPOLLIN, .data.u32 = MAX_CONNECTIONS };
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    socklen_t length = sizeof address;
    getsockname(listener, (struct sockaddr *)&address, &length);
    fprintf(stderr, "floor: listening on 127.0.0.1:%d (%s commits)\n", ntohs(address.sin_port), pipelined ? "pipelined" : "inline");

    static struct handover handover = { .lock = PTHREAD_MUTEX_INITIALIZER, .filled = PTHREAD_COND_INITIALIZER };
    handover.journal = (struct journal){ .fd = journal, .offset = 0, .reply = calloc(1, 1 << 20) };
    // SIGTERM and SIGINT stay blocked except while the reading thread waits in epoll_pwait, so they
    // always interrupt that wait (never the committer thread, which inherits the block); it then
    // prints the commit times and exits.
    struct sigaction on_stop = { .sa_handler = stop };
    sigaction(SIGTERM, &on_stop, NULL);
    sigaction(SIGINT, &on_stop, NULL);
    sigset_t stops, waiting;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stops, &waiting);
    if (pipelined) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, committer, &handover) != 0) fail("pthread_create");
    }
    struct stream streams[MAX_CONNECTIONS] = { 0 };
    struct round current = { 0 };
    for (;;) {
        struct epoll_event ready[64];
        int count = epoll_pwait(poller, ready, 64, -1, &waiting);
        if (stopping) {
            print_commits();
            return 0;
        }
        if (count < 0) { if (errno == EINTR) continue; fail("epoll_pwait"); }
        for (int i = 0; i < count; i++) {
            uint32_t index = ready[i].data.u32;
            if (index == MAX_CONNECTIONS) {
                int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
                if (fd < 0) continue;
                int slot = 0;
                while (slot < MAX_CONNECTIONS && streams[slot].fd) slot++;
                if (slot == MAX_CONNECTIONS) { close(fd); continue; }
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                fcntl(fd, F_SETFL, O_NONBLOCK);
                streams[slot].fd = fd;
                struct epoll_event added = { .events = EPOLLIN, .data.u32 = (uint32_t)slot };
                epoll_ctl(poller, EPOLL_CTL_ADD, fd, &added);
                continue;
            }
            struct stream *s = &streams[index];
            if (!fill(s)) {
                // Closed only once no answer is owed: the client waits for all of them first.
                epoll_ctl(poller, EPOLL_CTL_DEL, s->fd, NULL);
                close(s->fd);
                free(s->buffer);
                memset(s, 0, sizeof *s);
                continue;
            }
            size_t offset = 0;
            uint32_t frame_length;
            uint8_t *payload;
            while ((payload = next_frame(s, &offset, &frame_length))) {
                if (frame_length < HEADER_BYTES) { fprintf(stderr, "floor: a frame of %u bytes has no header\n", frame_length); exit(1); }
                uint32_t journal_bytes;
                memcpy(&journal_bytes, payload + 20, 4);
                spin(work_ns);
                round_add(&current, s->fd, payload, frame_length, journal_bytes);
            }
            consume(s, offset);
        }
        if (current.answer_count == 0) continue;
        if (!pipelined) {
            commit_round(&handover.journal, &current);
            continue;
        }
        // Hand the round over: append it to what the committer has not taken yet (when that is
        // nothing, by swapping buffers rather than copying).
        pthread_mutex_lock(&handover.lock);
        if (handover.pending.answer_count == 0) {
            struct round swap = handover.pending;
            handover.pending = current;
            current = swap;
        } else {
            round_append(&handover.pending, &current);
        }
        pthread_cond_signal(&handover.filled);
        pthread_mutex_unlock(&handover.lock);
    }
}

static int compare(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double percentile_ms(const uint64_t *sorted, size_t count, double p) {
    if (count == 0) return 0;
    size_t rank = (size_t)(p * (double)count);
    if (rank >= count) rank = count - 1;
    return (double)sorted[rank] / 1e6;
}

static int client(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: floor client PORT RATE SECONDS WARMUP_SECONDS CONNECTIONS REQUEST_BYTES REPLY_BYTES JOURNAL_BYTES\n");
        return 64;
    }
    int port = (int)parse(argv[2], "PORT");
    double rate = (double)parse(argv[3], "RATE");
    uint64_t seconds = parse(argv[4], "SECONDS"), warmup = parse(argv[5], "WARMUP_SECONDS");
    int connections = (int)parse(argv[6], "CONNECTIONS");
    uint32_t request_bytes = (uint32_t)parse(argv[7], "REQUEST_BYTES");
    uint32_t reply_bytes = (uint32_t)parse(argv[8], "REPLY_BYTES");
    uint32_t journal_bytes = (uint32_t)parse(argv[9], "JOURNAL_BYTES");
    if (rate <= 0 || connections < 1 || connections > MAX_CONNECTIONS || request_bytes < HEADER_BYTES) {
        fprintf(stderr, "floor: RATE must be positive, CONNECTIONS 1...%d, REQUEST_BYTES at least %d\n", MAX_CONNECTIONS, HEADER_BYTES);
        return 64;
    }
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct stream streams[MAX_CONNECTIONS] = { 0 };
    int one = 1;
    for (int i = 0; i < connections; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (connect(fd, (struct sockaddr *)&address, sizeof address) != 0) fail("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        streams[i].fd = fd;
        struct epoll_event added = { .events = EPOLLIN, .data.u32 = (uint32_t)i };
        epoll_ctl(poller, EPOLL_CTL_ADD, fd, &added);
        fcntl(fd, F_SETFL, O_NONBLOCK);
    }
    uint8_t *request = calloc(1, 4 + request_bytes);
    uint32_t be = htonl(request_bytes);
    memcpy(request, &be, 4);
    memcpy(request + 4 + 16, &reply_bytes, 4);
    memcpy(request + 4 + 20, &journal_bytes, 4);
    size_t planned = (size_t)(rate * (double)(seconds + warmup)) + 1;
    uint64_t *latencies = calloc(planned, sizeof *latencies), *lags = calloc(planned, sizeof *lags);
    size_t latency_count = 0, lag_count = 0;
    const uint64_t start = now_ns() + 100000000u, interval = (uint64_t)(1e9 / rate);
    const uint64_t measured_from = start + warmup * 1000000000u, end = measured_from + seconds * 1000000000u;
    uint64_t sent = 0, answered = 0;
    for (;;) {
        uint64_t now = now_ns();
        uint64_t intended = start + sent * interval;
        while (intended <= now && intended < end) {
            memcpy(request + 4, &intended, 8);
            memcpy(request + 12, &sent, 8);
            // Retried until written: a full socket buffer is the server's delay, charged to it.
            if (!write_all_until(streams[sent % connections].fd, request, 4 + request_bytes, end + 10000000000u)) {
                fprintf(stderr, "floor: the server stopped reading for over 10 s past the end (overloaded)\n");
                return 1;
            }
            if (intended >= measured_from) lags[lag_count++] = now - intended;
            sent++;
            intended = start + sent * interval;
        }
        if (intended >= end && answered == sent) break;
        if (now > end + 10000000000u) { fprintf(stderr, "floor: %lu answers missing after 10 s\n", (unsigned long)(sent - answered)); return 1; }
        uint64_t wait = intended > now ? intended - now : 0;
        if (intended >= end) wait = 100000000u;
        struct timespec timeout = { .tv_sec = (time_t)(wait / 1000000000u), .tv_nsec = (long)(wait % 1000000000u) };
        struct epoll_event ready[MAX_CONNECTIONS];
        int count = epoll_pwait2(poller, ready, MAX_CONNECTIONS, &timeout, NULL);
        if (count < 0) { if (errno == EINTR) continue; fail("epoll_pwait2"); }
        for (int i = 0; i < count; i++) {
            struct stream *s = &streams[ready[i].data.u32];
            if (!fill(s)) { fprintf(stderr, "floor: the server closed a connection\n"); return 1; }
            size_t offset = 0;
            uint32_t length;
            uint8_t *payload;
            uint64_t received = now_ns();
            while ((payload = next_frame(s, &offset, &length))) {
                uint64_t was_intended;
                memcpy(&was_intended, payload, 8);
                if (was_intended >= measured_from) latencies[latency_count++] = received - was_intended;
                answered++;
            }
            consume(s, offset);
        }
    }
    qsort(latencies, latency_count, sizeof *latencies, compare);
    qsort(lags, lag_count, sizeof *lags, compare);
    double achieved = (double)latency_count / (double)seconds;
    printf("requests     %zu measured over %lus (%.0f/s intended, %.0f/s achieved)\n", latency_count, (unsigned long)seconds, rate, achieved);
    printf("latency      p50 %.2fms p90 %.2fms p99 %.2fms p99.9 %.2fms max %.2fms\n",
           percentile_ms(latencies, latency_count, .5), percentile_ms(latencies, latency_count, .9),
           percentile_ms(latencies, latency_count, .99), percentile_ms(latencies, latency_count, .999),
           percentile_ms(latencies, latency_count, 1));
    printf("send lag     p50 %.3fms p99 %.3fms max %.3fms\n", percentile_ms(lags, lag_count, .5),
           percentile_ms(lags, lag_count, .99), percentile_ms(lags, lag_count, 1));
    printf("floor p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f achieved=%.0f\n",
           percentile_ms(latencies, latency_count, .5), percentile_ms(latencies, latency_count, .9),
           percentile_ms(latencies, latency_count, .99), percentile_ms(latencies, latency_count, .999),
           percentile_ms(latencies, latency_count, 1), achieved);
    return 0;
}

int main(int argc, char **argv) {
    // A parent may have blocked signals (a test runner does); the bench stops the server with SIGTERM.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (argc >= 2 && strcmp(argv[1], "server") == 0) return server(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "client") == 0) return client(argc, argv);
    fprintf(stderr, "usage: floor server ... | floor client ... (see the comment at the top of bench/floor.c)\n");
    return 64;
}
