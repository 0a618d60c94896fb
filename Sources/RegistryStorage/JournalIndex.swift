import RegistryCore
import Synchronization

/// What each journal file holds, kept in memory: for every log, the first and last sequence the
/// file has of it, and how many of the file's bytes are durable. The writer adds to it after each
/// commit; readers follow the log with it (reading only what is durable), and trimming decides
/// with it which files a snapshot covers. Thread-safe.
public final class JournalIndex: Sendable {
    /// One file.
    public struct File: Equatable, Sendable {
        public let number: UInt64
        /// Bytes of the file that hold whole, synced records.
        public var durableBytes: Int
        /// True once the file ends with its rotation marker: nothing more goes into it.
        public var sealed: Bool
        /// For each log in the file, its first and last sequence there.
        public var ranges: [LogID: ClosedRange<UInt64>]

        public init(number: UInt64, durableBytes: Int = 0, sealed: Bool = false, ranges: [LogID: ClosedRange<UInt64>] = [:]) {
            self.number = number
            self.durableBytes = durableBytes
            self.sealed = sealed
            self.ranges = ranges
        }
    }

    private struct State {
        var files: [File] = []
        /// For each log, the highest sequence of it that trimming removed, or that lay below the
        /// files found at start-up: a reader asking for it must take a snapshot instead.
        var trimmedThrough: [LogID: UInt64] = [:]
    }

    private let state: Mutex<State>

    /// An index of `files`, oldest first, whose logs are known to be trimmed up to `trimmedThrough`.
    public init(files: [File] = [], trimmedThrough: [LogID: UInt64] = [:]) {
        state = Mutex(State(files: files.sorted { $0.number < $1.number }, trimmedThrough: trimmedThrough))
    }

    /// The files, oldest first.
    public var files: [File] { state.withLock { $0.files } }

    /// The file numbered `number`, nil when it is not (or no longer) in the journal.
    public func file(_ number: UInt64) -> File? {
        state.withLock { state in state.files.first { $0.number == number } }
    }

    /// The highest sequence of `log` that is no longer in the journal (0 when none).
    public func trimmedThrough(_ log: LogID) -> UInt64 {
        state.withLock { $0.trimmedThrough[log] ?? 0 }
    }

    /// A new file the writer has started.
    func started(_ number: UInt64) {
        state.withLock { state in
            if !state.files.contains(where: { $0.number == number }) { state.files.append(File(number: number)) }
        }
    }

    /// The writer made a commit of `segments` durable in file `number`, which now holds
    /// `durableBytes` (its rotation marker included when `sealed`).
    func committed(_ segments: [JournalEntryWriter.Span], in number: UInt64, durableBytes: Int, sealed: Bool = false) {
        state.withLock { state in
            guard let index = state.files.firstIndex(where: { $0.number == number }) else { return }
            state.files[index].durableBytes = durableBytes
            state.files[index].sealed = state.files[index].sealed || sealed
            for segment in segments where segment.count > 0 {
                let key = segment.log
                let old = state.files[index].ranges[key]
                state.files[index].ranges[key] = (old?.lowerBound ?? segment.firstSequence)...segment.lastSequence
            }
        }
    }

    /// Removes the files numbered below `number` from the index (they were deleted), and records
    /// what of each log went with them.
    func removed(below number: UInt64) {
        state.withLock { state in
            for file in state.files where file.number < number {
                for (log, range) in file.ranges { state.trimmedThrough[log] = max(state.trimmedThrough[log] ?? 0, range.upperBound) }
            }
            state.files.removeAll { $0.number < number }
        }
    }

    /// Records that operations of `log` through `sequence` are not in the journal (a snapshot from
    /// a peer covers them): readers asking for them must take a snapshot.
    public func markTrimmed(_ log: LogID, through sequence: UInt64) {
        state.withLock { $0.trimmedThrough[log] = max($0.trimmedThrough[log] ?? 0, sequence) }
    }

    /// Total durable bytes in the journal's files.
    public var durableBytes: Int { state.withLock { $0.files.reduce(0) { $0 + $1.durableBytes } } }
}
