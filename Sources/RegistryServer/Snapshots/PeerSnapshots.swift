import RegistryCore
import RegistryStorage
import RegistryWire

/// Snapshot files between nodes: a sender opens its newest snapshot for a peer that lacks what
/// its journal trimmed; a receiver writes the one a peer sends beside its own, loads it, and puts
/// it in place of them.
extension Snapshotter {
    /// Where a snapshot from a peer is written while it arrives, in the data directory.
    static let incomingName = "incoming-snapshot.part"

    var incomingPath: String { directory + "/" + Self.incomingName }

    /// The newest snapshot file, open for reading; nil when there is none. It covers everything
    /// the journal trimmed (trimming waits for every kept snapshot).
    func openNewest() throws(StorageError) -> OpenedSnapshot? {
        guard let label = try SnapshotFile.labels(in: directory, on: fs).first else { return nil }
        let name = SnapshotFile.name(label: label)
        let handle = try fs.open(directory + "/" + name, create: false)
        do {
            return OpenedSnapshot(fs: fs, handle: handle, name: name, bytes: try fs.size(handle))
        } catch {
            fs.close(handle)
            throw error
        }
    }

    /// Claims the node's intake for one peer's snapshot; false while another is being received
    /// or installed.
    func claimIntake() -> Bool {
        intakeBusy.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Frees the intake that ``claimIntake()`` took.
    func releaseIntake() {
        intakeBusy.store(false, ordering: .releasing)
    }

    /// Starts the incoming file afresh (what an unfinished transfer left is replaced) for a
    /// snapshot of `totalBytes`. Refuses one that would leave the file system less than
    /// ``spareBytes`` (retryable: the sender tries again later, when space may have been freed).
    func createIncoming(totalBytes: UInt64) throws(IncomingSnapshotError) -> FileHandle {
        try? fs.remove(incomingPath)
        let available: UInt64
        do throws(StorageError) {
            available = try fs.availableBytes(in: directory)
        } catch {
            throw .storage(error)
        }
        guard totalBytes <= available, available - totalBytes >= spareBytes else {
            throw .noRoom(totalBytes: totalBytes, available: available, spare: spareBytes)
        }
        do throws(StorageError) {
            return try fs.open(incomingPath, create: true)
        } catch {
            throw .storage(error)
        }
    }

    /// Writes a chunk of the incoming file at its offset.
    func writeIncoming(_ handle: FileHandle, _ data: [UInt8], at offset: Int) throws(StorageError) {
        try fs.write(handle, data, at: offset)
    }

    /// Syncs the incoming file, written whole, and closes it.
    func sealIncoming(_ handle: FileHandle) throws(StorageError) {
        defer { fs.close(handle) }
        try fs.sync(handle)
    }

    /// Deletes the incoming file, if any, closing `handle` first.
    func discardIncoming(_ handle: FileHandle? = nil) {
        if let handle { fs.close(handle) }
        try? fs.remove(incomingPath)
    }

    /// Loads the incoming file, written whole and synced, into tables from `tables`. A damaged
    /// file is deleted.
    func loadIncoming(tables: any TableAllocator) throws(StorageError) -> SnapshotStore.Loaded {
        do {
            return try SnapshotStore.load(path: incomingPath, label: 0, on: fs, expectedDevices: expectedDevices, claimSeed: claimSeed, tables: tables)
        } catch {
            discardIncoming()
            throw error
        }
    }

    /// Makes the incoming file the node's only snapshot, labelled `label`: renamed into place,
    /// the others deleted, the directory synced after each step.
    func placeIncoming(label: UInt64) throws(StorageError) {
        try fs.rename(incomingPath, to: directory + "/" + SnapshotFile.name(label: label))
        try fs.syncDirectory(directory)
        for old in try SnapshotFile.labels(in: directory, on: fs) where old != label {
            try fs.remove(directory + "/" + SnapshotFile.name(label: old))
        }
        try fs.syncDirectory(directory)
    }
}

/// A snapshot file open for sending to a peer.
struct OpenedSnapshot: Sendable {
    fileprivate let fs: any FileSystem
    fileprivate let handle: FileHandle
    /// Its file name, for logs.
    let name: String
    let bytes: Int

    /// `count` bytes from `offset`; a file that ends sooner is damaged.
    func read(at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        let data = try fs.read(handle, at: offset, count: count)
        guard data.count == count else { throw StorageError.corrupt("\(name) ended at \(offset + data.count) bytes") }
        return data
    }

    func close() {
        fs.close(handle)
    }
}

/// Why a snapshot from a peer cannot be written.
enum IncomingSnapshotError: Error, CustomStringConvertible {
    /// The data directory's file system has `available` bytes free, and the snapshot of
    /// `totalBytes` would leave less than `spare` of them.
    case noRoom(totalBytes: UInt64, available: UInt64, spare: UInt64)
    case storage(StorageError)

    var description: String {
        switch self {
        case .noRoom(let totalBytes, let available, let spare):
            return "a snapshot of \(totalBytes) bytes does not fit: the data directory has \(available) bytes free, and keeps \(spare) for the journal"
        case .storage(let error): return "\(error)"
        }
    }
}
