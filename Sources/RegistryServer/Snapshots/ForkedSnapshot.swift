import Platform
import RegistryCore
import RegistryStorage
import RegistryWire

/// A snapshot of the serving state as it was at one moment, read by a forked copy of the node
/// (``ForkedWriter``) while the node goes on serving: the child encodes every record of the state
/// (``RegistryState/forEachSnapshotRecordInForkedChild(afterReadingIndexes:_:)``) into a pipe, and the
/// snapshotter's thread writes them into the snapshot file (``copy(into:)``). There is no second
/// state to build: the kernel copies only the pages the node writes while the child reads. The
/// node writes the indexes' tables at random, so the child lets go of them first (the claim
/// index once it has put its claims in owner order), and until then the node holds the claims new
/// to it in a table of their own (``RegistryState/holdNewClaims(until:)``).
///
/// The fork happens under the engine's lock, so the state is exactly what ``metadata``'s version
/// vector says, which may include operations applied but not yet durable: the snapshot is put
/// under its name only once the journal holds them (``Snapshotter``).
struct ForkedSnapshot: Sendable {
    let child: ForkedWriter
    let metadata: SnapshotMetadata
    /// Raised by the child once it has read the claim index and let go of its pages, or by the
    /// snapshot's thread when the child is gone: the node's claims held aside meanwhile then
    /// move into the claim index (``RegistryState/holdNewClaims(until:)``).
    private let childLetGo: ForkSignal?
    /// When the child was forked (``SystemClock/monotonicNanos()``).
    let forkedAt: UInt64

    init(child: ForkedWriter, metadata: SnapshotMetadata, childLetGo: ForkSignal? = nil) {
        self.child = child
        self.metadata = metadata
        self.childLetGo = childLetGo
        forkedAt = SystemClock.monotonicNanos()
    }

    /// Time the child may go without writing before it is taken for stuck and ended, when it is
    /// blocked or has had that much CPU time meanwhile (``ChildSilence``; a child waiting for a
    /// CPU is waited for): far more than reading the indexes or encoding one record takes.
    static let silenceMillis: Int32 = 60_000

    /// The longest record a frame may announce: no record comes near it, so a longer one means
    /// the stream is out of step.
    static let largestRecord = 64 << 20

    /// Forks the node; the child streams `registry`'s records. Call it holding the engine's lock,
    /// `metadata` describing `registry` as it is under that lock. New claims are held aside in
    /// `registry` until the child has let go of the claim index.
    static func start(_ registry: inout RegistryState, metadata: SnapshotMetadata) -> Result<ForkedSnapshot, ForkedWriter.Failure> {
        // Without a shared flag (no page to map) the hold ends at the next claim: the fork still
        // finds every claim in the claim index.
        let childLetGo = ForkSignal()
        registry.holdNewClaims(until: { childLetGo?.isRaised ?? true })
        let forked = ForkedWriter.start { input in
            // The child: encodes and writes, nothing else (see ForkedWriter on what it must not do),
            // in the CPU time nothing else wants. First, at the node's priority, it lets go of the
            // device index, which the node writes at random (each page written while shared is
            // copied under the engine's lock). The node holds its new claims aside until the child
            // has let go of the claim index, so the child's pace costs it no copies there.
            registry.dropDeviceIndexInForkedChild()
            Scheduling.runThisThreadWhenIdle()
            var sink = PipeSink(descriptor: input)
            var bytes = [UInt8]()
            registry.forEachSnapshotRecordInForkedChild(afterReadingIndexes: { childLetGo?.raise() }) { record in
                guard !sink.failed else { return }
                SnapshotCodec.encode(record, into: &bytes)
                sink.appendFramed(bytes)
            }
            return sink.flush()
        }
        if case .failure = forked { registry.releaseHeldClaims() }
        return forked.map { ForkedSnapshot(child: $0, metadata: metadata, childLetGo: childLetGo) }
    }

    /// Appends every record the child sends to `writer`, then waits for the child; throws when the
    /// stream breaks off, is malformed, falls silent for `silenceMillis` while stuck
    /// (``ChildSilence``), or the child fails.
    /// The child has ended when this returns or throws, and its pipe is closed. Returns how long
    /// after the fork the child's first bytes came: it writes nothing before it has read the
    /// indexes, so this is about how long the node held its new claims aside.
    @discardableResult
    func copy(into writer: SnapshotWriter, silenceMillis: Int32 = Self.silenceMillis) throws(StorageError) -> UInt64 {
        defer {
            childLetGo?.raise()
            child.close()
        }
        var firstBytesAt: UInt64?
        do throws(StorageError) {
            try readFrames(silenceMillis: silenceMillis) { (record) throws(StorageError) in
                if firstBytesAt == nil { firstBytesAt = SystemClock.monotonicNanos() }
                try writer.append(record)
            }
        } catch {
            child.stop()
            throw error
        }
        guard child.wait() else { throw .io(path: "snapshot child \(child.pid)", reason: "the forked snapshot writer failed") }
        return ((firstBytesAt ?? SystemClock.monotonicNanos()) - forkedAt) / 1_000_000
    }

    /// True once the child has read the indexes, and the node's hold may end (for tests).
    var childHasReadIndexes: Bool { childLetGo?.isRaised ?? true }

    /// Ends the child without reading what it sends (the snapshot is not needed).
    func abandon() {
        child.stop()
        childLetGo?.raise()
        child.close()
    }

    /// Calls `record` with each frame (`length u32 | bytes`, see ``PipeSink/appendFramed(_:)``)
    /// until the stream ends.
    private func readFrames(silenceMillis: Int32, _ record: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        let source = "snapshot child \(child.pid)"
        var pending = [UInt8]()
        var start = 0
        var chunk = [UInt8](repeating: 0, count: 1 << 20)
        var silence = ChildSilence(windowMillis: silenceMillis)
        // The child's state is read at most once a second while it sends, so the CPU time
        // ChildSilence counts from its last bytes may include up to a second before them.
        var stateReadAt: UInt64 = 0
        while true {
            let outcome = chunk.withUnsafeMutableBytes { child.read(into: $0, timeoutMillis: silenceMillis) }
            switch outcome {
            case .bytes(let count):
                pending.append(contentsOf: chunk[0..<count])
                let now = SystemClock.monotonicNanos()
                if now - stateReadAt >= 1_000_000_000, let state = ProcessState.of(child.pid) {
                    silence.sent(state)
                    stateReadAt = now
                }
            case .end:
                guard start == pending.count else { throw .corrupt("\(source): its stream ends inside a record") }
                return
            case .silent:
                // Slow is not stuck (ChildSilence); a child whose state cannot be read is.
                if let state = ProcessState.of(child.pid), !silence.isStuck(now: state) { continue }
                throw .io(path: source, reason: "wrote nothing for \(silenceMillis) ms, and is blocked or ran that long without writing")
            case .failed(let reason):
                throw .io(path: source, reason: reason)
            }
            let parsed = pending.withUnsafeBytes { bytes in
                Result { () throws(StorageError) in
                    while bytes.count - start >= 4 {
                        let length = Int(bytes.loadUnaligned(fromByteOffset: start, as: UInt32.self).littleEndian)
                        guard length <= Self.largestRecord else { throw .corrupt("\(source): a record of \(length) bytes") }
                        guard bytes.count - start - 4 >= length else { break }
                        try record(UnsafeRawBufferPointer(rebasing: bytes[(start + 4)..<(start + 4 + length)]))
                        start += 4 + length
                    }
                }
            }
            try parsed.get()
            pending.removeSubrange(0..<start)
            start = 0
        }
    }
}
