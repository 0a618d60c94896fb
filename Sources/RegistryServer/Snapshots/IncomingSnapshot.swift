import Dispatch
import RegistryCore
import RegistryStorage
import RegistryWire

/// Writes a snapshot that a peer sends, chunk by chunk, to
/// ``RegistryEngine/incomingSnapshotPath``, then has the engine check and install it
/// (``RegistryEngine/installIncomingSnapshot()``). A node takes one at a time
/// (``RegistryEngine/snapshotIntakeBusy``). The file work runs on a serial queue of its own, off
/// the event loop; completions are called there, in the order the calls were made.
///
/// `@unchecked Sendable`: `handle` and `released` are touched only on `queue`.
final class IncomingSnapshot: @unchecked Sendable {
    private let engine: RegistryEngine
    private let queue = DispatchQueue(label: "registry.snapshot-intake")
    private var handle: FileHandle?
    private var released = false

    private init(engine: RegistryEngine) {
        self.engine = engine
    }

    /// Claims the node's intake; nil while another peer's snapshot is being received or installed.
    static func begin(engine: RegistryEngine) -> IncomingSnapshot? {
        guard engine.snapshotIntakeBusy.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            return nil
        }
        return IncomingSnapshot(engine: engine)
    }

    /// Writes `chunk` at its offset (the first one replaces what an unfinished transfer left).
    func write(_ chunk: SnapshotChunk, completion: @escaping @Sendable (WireError?) -> Void) {
        queue.async {
            let fs = self.engine.fs
            let path = self.engine.incomingSnapshotPath
            do {
                if self.handle == nil {
                    try? fs.remove(path)
                    self.handle = try fs.open(path, create: true)
                }
                try fs.write(self.handle!, chunk.data, at: Int(chunk.offset))
                completion(nil)
            } catch {
                completion(RegistryEngine.snapshotRefused("cannot write the snapshot: \(error)", retryable: true))
            }
        }
    }

    /// Syncs the file, installs it, and frees the intake; `completion` gets what the node then
    /// holds, or why the snapshot was refused.
    func finish(completion: @escaping @Sendable (Result<VersionVector, WireError>) -> Void) {
        queue.async {
            defer { self.release() }
            guard let handle = self.handle else {
                return completion(.failure(RegistryEngine.snapshotRefused("no snapshot was written", retryable: true)))
            }
            self.handle = nil
            do {
                try self.engine.fs.sync(handle)
                self.engine.fs.close(handle)
            } catch {
                self.engine.fs.close(handle)
                return completion(.failure(RegistryEngine.snapshotRefused("cannot sync the snapshot: \(error)", retryable: true)))
            }
            completion(self.engine.installIncomingSnapshot())
        }
    }

    /// Gives up on the transfer (its connection closed): deletes the partial file and frees the
    /// intake. Nothing, once it is finished.
    func abandon() {
        queue.async {
            guard !self.released else { return }
            if let handle = self.handle { self.engine.fs.close(handle) }
            self.handle = nil
            try? self.engine.fs.remove(self.engine.incomingSnapshotPath)
            self.release()
        }
    }

    private func release() {
        guard !released else { return }
        released = true
        engine.snapshotIntakeBusy.store(false, ordering: .releasing)
    }
}
