import Platform
import RegistryCore
import RegistryStorage
import RegistryWire

/// A snapshot of the serving state as it was at one moment, read by a forked copy of the node
/// (``ForkedWriter``) while the node goes on serving: the child encodes every record of the state
/// (``RegistryState/forEachSnapshotRecordInForkedChild(afterReadingIndexes:_:)``) into the
/// snapshot file's own blocks, sealed (``SnapshotBlock``), and sends them through a pipe; the
/// snapshotter's thread checks each block's head and writes it into the file as it came
/// (``copy(into:)``, ``SnapshotWriter/appendSealed(_:)``). There is no second
/// state to build: the kernel copies only the pages the node writes while the child reads. The
/// node writes the indexes' tables at random, so the child lets go of them first (the claim
/// index once it has copied its claims out in the index's order), and until then the node holds the claims new
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
            var block = SnapshotBlock()
            registry.forEachSnapshotRecordInForkedChild(afterReadingIndexes: { childLetGo?.raise() }) { record in
                guard !sink.failed else { return }
                block.append(recordBytes: SnapshotCodec.encodedSize(of: record)) { SnapshotCodec.write(record, to: $0) }
                if block.isFull { send(&block, to: &sink) }
            }
            if !block.isEmpty { send(&block, to: &sink) }
            return !sink.failed
        }
        if case .failure = forked { registry.releaseHeldClaims() }
        return forked.map { ForkedSnapshot(child: $0, metadata: metadata, childLetGo: childLetGo) }
    }

    /// The child's: seals `block`, writes it to the pipe whole, and empties it.
    private static func send(_ block: inout SnapshotBlock, to sink: inout PipeSink) {
        block.seal()
        _ = block.withUnsafeBytes { sink.write($0) }
        block.reset()
    }

    /// Appends every block the child sends to `writer`, then waits for the child; throws when the
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
            try readBlocks(silenceMillis: silenceMillis) { (block) throws(StorageError) in
                if firstBytesAt == nil { firstBytesAt = SystemClock.monotonicNanos() }
                try writer.appendSealed(block)
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

    /// Calls `block` with each sealed block (``SnapshotBlock``) the child sends, until the stream
    /// ends. The blocks are read straight into one buffer and handed on from there, so the node
    /// copies each byte once on its way from the pipe to the file.
    private func readBlocks(silenceMillis: Int32, _ block: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) {
        let source = "snapshot child \(child.pid)"
        let headBytes = SnapshotFile.blockHeaderBytes
        var buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 16)
        defer { buffer.deallocate() }
        var filled = 0
        var silence = ChildSilence(windowMillis: silenceMillis)
        // The child's state is read at most once a second while it sends, so the CPU time
        // ChildSilence counts from its last bytes may include up to a second before them.
        var stateReadAt: UInt64 = 0
        while true {
            let outcome = child.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), timeoutMillis: silenceMillis)
            switch outcome {
            case .bytes(let count):
                filled += count
                let now = SystemClock.monotonicNanos()
                if now - stateReadAt >= 1_000_000_000, let state = ProcessState.of(child.pid) {
                    silence.sent(state)
                    stateReadAt = now
                }
            case .end:
                guard filled == 0 else { throw .corrupt("\(source): its stream ends inside a block") }
                return
            case .silent:
                // Slow is not stuck (ChildSilence); a child whose state cannot be read is.
                if let state = ProcessState.of(child.pid), !silence.isStuck(now: state) { continue }
                throw .io(path: source, reason: "wrote nothing for \(silenceMillis) ms, and is blocked or ran that long without writing")
            case .failed(let reason):
                throw .io(path: source, reason: reason)
            }
            var start = 0
            while filled - start >= headBytes {
                let rest = UnsafeRawBufferPointer(rebasing: buffer[start..<filled])
                guard let head = SnapshotFile.BlockHead(rest) else { throw .corrupt("\(source): its stream is out of step (no block begins at byte \(start) of what it sent)") }
                guard head.payloadLength <= SnapshotFile.largestBlock else { throw .corrupt("\(source): a block of \(head.payloadLength) bytes") }
                let length = headBytes + head.payloadLength
                if length > buffer.count {
                    let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 16)
                    larger.copyMemory(from: rest)
                    buffer.deallocate()
                    buffer = larger
                    filled -= start
                    start = 0
                }
                guard filled - start >= length else { break }
                try block(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + length)]))
                start += length
            }
            if start > 0 {
                buffer.baseAddress!.copyMemory(from: buffer.baseAddress! + start, byteCount: filled - start)
                filled -= start
            }
        }
    }
}
