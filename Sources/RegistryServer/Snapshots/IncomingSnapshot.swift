import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Receives a snapshot that a peer sends, chunk by chunk, into the snapshotter's incoming file
/// (``Snapshotter/createIncoming(totalBytes:)``), then has the engine check and install it
/// (``RegistryEngine/installIncomingSnapshot()``). A node takes one at a time
/// (``Snapshotter/claimIntake()``). The file work runs on a serial queue of its own, off the event
/// loop; completions are called there, in the order the calls were made.
///
/// `@unchecked Sendable`: `handle` and `released` are touched only on `queue`.
final class IncomingSnapshot: @unchecked Sendable {
    private let engine: RegistryEngine
    private let files: Snapshotter
    private let queue = DispatchQueue(label: "registry.snapshot-intake")
    private var handle: FileHandle?
    private var released = false

    private init(engine: RegistryEngine) {
        self.engine = engine
        self.files = engine.snapshots
    }

    /// Claims the node's intake; nil while another peer's snapshot is being received or installed.
    static func begin(engine: RegistryEngine) -> IncomingSnapshot? {
        engine.snapshots.claimIntake() ? IncomingSnapshot(engine: engine) : nil
    }

    /// Writes `chunk` at its offset (the first one replaces what an unfinished transfer left).
    func write(_ chunk: SnapshotChunk, completion: @escaping @Sendable (WireError?) -> Void) {
        queue.async {
            do {
                if self.handle == nil { self.handle = try self.files.createIncoming(totalBytes: chunk.totalBytes) }
                try self.files.writeIncoming(self.handle!, chunk.data, at: Int(chunk.offset))
                completion(nil)
            } catch {
                completion(RegistryEngine.snapshotRefused("cannot write the snapshot: \(error)", retryable: true))
            }
        }
    }

    /// Syncs the file, installs it, and frees the intake; `completion` gets what the node then
    /// holds, or why the snapshot was refused. The intake is free by the time `completion` runs,
    /// so a peer told of the outcome can start another transfer at once.
    func finish(completion: @escaping @Sendable (Result<VersionVector, WireError>) -> Void) {
        queue.async {
            let outcome = self.sealAndInstall()
            self.release()
            completion(outcome)
        }
    }

    private func sealAndInstall() -> Result<VersionVector, WireError> {
        guard let handle else { return .failure(RegistryEngine.snapshotRefused("no snapshot was written", retryable: true)) }
        self.handle = nil
        do {
            try files.sealIncoming(handle)
        } catch {
            return .failure(RegistryEngine.snapshotRefused("cannot sync the snapshot: \(error)", retryable: true))
        }
        return engine.installIncomingSnapshot()
    }

    /// Gives up on the transfer (its connection closed): deletes the partial file and frees the
    /// intake, then calls `done`. Nothing, once it is finished.
    func abandon(done: @escaping @Sendable () -> Void = {}) {
        queue.async {
            defer { done() }
            guard !self.released else { return }
            self.files.discardIncoming(self.handle)
            self.handle = nil
            self.release()
        }
    }

    private func release() {
        guard !released else { return }
        released = true
        files.releaseIntake()
    }
}
