// What sealing and checking a journal entry's checksum costs, per entry, measured with ordo-one's
// package-benchmark (`swift package benchmark --target JournalChecksum`; bench/checksum.sh runs it
// and writes the figures to BENCHMARKS.md). For an entry of 16 KiB (a commit of about 100
// registrations) and one of 1 MiB (a snapshot block's size), in one run:
// - `JournalChecksum.striped`, the checksum of the journal's entries ("RRJ3");
// - `JournalChecksum.of`, the single chain, what entries carried before ("RRJ2");
// - the floor: the same words read and added up, nothing else.
import Benchmark
import RegistryCore
import RegistryStorage

/// The bytes, random, made once; only the benchmark's one thread reads them.
private let sizes = [16 << 10, 1 << 20]
private let payloads: [[UInt8]] = sizes.map { size in
    var generator = SplitMix64(seed: UInt64(size))
    return (0..<size).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
}

private func label(_ size: Int) -> String { size >= 1 << 20 ? "\(size >> 20) MiB" : "\(size >> 10) KiB" }

/// The floor: every word loaded and added, four sums so that the adds do not wait on each other.
private func wordSum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var sums: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    var offset = 0
    while offset + 32 <= bytes.count {
        sums.0 &+= bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self)
        sums.1 &+= bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)
        sums.2 &+= bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)
        sums.3 &+= bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)
        offset += 32
    }
    return sums.0 &+ sums.1 &+ sums.2 &+ sums.3
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(metrics: [.wallClock], maxDuration: .seconds(2))
    for (size, payload) in zip(sizes, payloads) {
        Benchmark("striped, \(label(size))") { benchmark in
            for index in benchmark.scaledIterations {
                blackHole(payload.withUnsafeBytes { JournalChecksum.striped($0, seed: UInt64(index)) })
            }
        }
        Benchmark("single chain, \(label(size))") { benchmark in
            for index in benchmark.scaledIterations {
                blackHole(payload.withUnsafeBytes { JournalChecksum.of($0, seed: UInt64(index)) })
            }
        }
        Benchmark("floor: reading the words, \(label(size))") { benchmark in
            for index in benchmark.scaledIterations {
                blackHole(payload.withUnsafeBytes { wordSum($0) } &+ UInt64(index))
            }
        }
    }
}
