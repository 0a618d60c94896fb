"""Puts a profile's samples into classes, for docs/performance.md ("Where a batched registration's
CPU goes"): each sample goes to the first class whose every pattern some frame of its stack holds
(a substring of the symbol; Swift's mangled names hold the type and function names), else to
"other" with its leaf frame.

    perf record -F 999 -g -p PID -o perf.data -- sleep 8
    perf script -i perf.data -F comm,pid,tid,ip,sym,dso > perf.txt
    python3 bench/perf_classes.py registration|replay perf.txt

(`-F comm,tid,ip,sym` reads the same; `bench/flamegraph.py` needs the pid and dso too.)
"""
import collections
import sys

# (class, patterns): the first class whose patterns all match takes the sample.
CLASSES = {
    "registration": [
        # First: the forked child runs RegistryState's code (it walks the claim index), which
        # the state's class below would take, and a fork's page faults would go to zeroing.
        ("snapshots", ["ForkedSnapshot"]),
        ("the kernel zeroing new pages for the index tables (index-populate)", ["DetachedThread", "clear_page_erms"]),
        ("the kernel zeroing new pages elsewhere", ["clear_page_erms"]),
        ("the journal: copying into the page cache", ["copy_folio_from_iter"]),
        ("the journal: fdatasync and the rest of its write path", ["LogWriter"]),
        ("keyed hashing (HMAC-SHA256)", ["IdentifierHMAC"]),
        ("the state: register, its indexes and facts", ["RegistryCore0A5StateV"]),
        ("deciding (NodeState.decide, less the state and the hashing)", ["NodeStateV6decide"]),
        ("reading requests", ["RegisterRequestsReader"]),
        ("reading requests", ["protobuf_c_message_unpack"]),
        ("encoding answers", ["ServerFrame"]),
        ("recording the change feed", ["WatchHub"]),
        ("recording the change feed", ["FeedStaging"]),
        ("snapshots", ["Snapshotter"]),
        ("the commit pipeline's rest", ["CommitPipeline"]),
        ("the request path's rest: NIO, the engine, completions", ["ConnectionHandler"]),
        ("the request path's rest: NIO, the engine, completions", ["NIOPosix"]),
    ],
    "replay": [
        ("the kernel zeroing new pages", ["clear_page_erms"]),
        ("other page faults", ["exc_page_fault"]),
        ("the claim index's lookups", ["BucketTableC4find", "ClaimKey"]),
        ("the device index's lookups", ["BucketTableC4find", "UUID128"]),
        ("moving an index's old buckets", ["moveSomeOldBuckets"]),
        ("bundle IDs and vendors", ["BundleID"]),
        ("bundle IDs and vendors", ["Interner"]),
        ("applying: the state's rest", ["RegistryCore0A5StateV"]),
        ("recording the change feed", ["ChangeFeedV7publish"]),
        ("decoding operations", ["OperationCodec"]),
        ("decoding operations", ["RegistrationOpReader"]),
        ("decoding operations", ["protobuf_c"]),
        ("reading the journal's files", ["PosixFileSystem"]),
        ("the replayer's rest", ["Replayer"]),
    ],
}


def parsed_samples(path):
    """Each sample as (header, frames), from `perf script` with `-F comm,...,ip,sym[,dso]`: the
    header is the sample's first line (its comm, pid/tid and so on, as asked for), and each frame,
    leaf first, is its symbol with the dso after it in parentheses when asked for."""
    header, stack = None, []
    for line in open(path, errors="replace"):
        if not line.strip():
            if header is not None:
                yield header, stack
            header, stack = None, []
        elif not line[0].isspace():
            header = line.strip()
        else:
            parts = line.split(None, 1)
            stack.append(parts[1].strip() if len(parts) > 1 else "?")
    if header is not None:
        yield header, stack


def samples(path):
    """Each sample's stack, leaf first (``parsed_samples``' frames)."""
    for _, stack in parsed_samples(path):
        yield stack


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CLASSES:
        sys.exit("usage: perf_classes.py registration|replay PERF_SCRIPT_OUTPUT")
    classes = CLASSES[sys.argv[1]]
    counts, total = collections.Counter(), 0
    for stack in samples(sys.argv[2]):
        total += 1
        for name, patterns in classes:
            if all(any(pattern in frame for frame in stack) for pattern in patterns):
                counts[name] += 1
                break
        else:
            counts["other: " + (stack[0][:60] if stack else "?")] += 1
    print(f"{total} samples")
    for name, count in counts.most_common(30):
        print(f"{100 * count / max(1, total):6.2f}%  {name}")


if __name__ == "__main__":
    main()
