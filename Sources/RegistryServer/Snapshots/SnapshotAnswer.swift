import RegistryStorage
import RegistryWire

extension ServerBody {
    /// The answer to a snapshot request (`registryctl snapshot`) that ended with `outcome`: nil
    /// when one was being taken already.
    init(snapshotOutcome outcome: Result<Snapshotter.Taken, StorageError>?) {
        switch outcome {
        case .success(let taken):
            self = .snapshotTaken(
                SnapshotTaken(
                    operations: taken.operations, bytes: UInt64(taken.bytes), durationMillis: taken.millis,
                    journalFilesRemoved: UInt64(taken.filesRemoved)))
        case .failure(let error):
            self = .error(WireError(code: .unavailable, message: "the snapshot failed: \(error)", retryable: true))
        case nil:
            self = .error(WireError(code: .unavailable, message: "a snapshot is being taken already; ask again once it is done", retryable: true))
        }
    }
}
