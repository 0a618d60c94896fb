import Foundation
import LoadGeneration

/// The live progress line on standard error: rewritten in place on a terminal, one plain line
/// per second otherwise.
final class ProgressPrinter: Sendable {
    private let intendedRate: Double?
    private let warmup: UInt64
    private let start: UInt64
    private let terminal = isatty(STDERR_FILENO) == 1

    init(intendedRate: Double?, warmup: UInt64, start: UInt64) {
        self.intendedRate = intendedRate
        self.warmup = warmup
        self.start = start
    }

    func print(_ interval: ShardTotals) {
        let elapsed = Double(monotonicNanos() - start) / 1e9
        let phase = monotonicNanos() - start < warmup ? " warm-up" : ""
        let intended = intendedRate.map { "intended \(Int($0))/s " } ?? ""
        let p99 = DurationText.format(nanoseconds: interval.latency.value(atPercentile: 99))
        let seconds = (elapsed * 10).rounded() / 10
        let line = "[\(seconds)s\(phase)] \(intended)achieved \(interval.acknowledged)/s p99 \(p99) errors \(interval.failed)"
        write(terminal ? "\r\u{1B}[2K" + line : line + "\n")
    }

    func end() {
        if terminal { write("\n") }
    }

    private func write(_ text: String) {
        FileHandle.standardError.write(Data(text.utf8))
    }
}
