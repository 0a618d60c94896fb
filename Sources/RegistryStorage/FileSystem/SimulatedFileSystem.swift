import Synchronization

/// A disk in memory that keeps POSIX's durability contract and nothing more: a write is durable
/// once its file is synced, and a name (a file created, renamed or removed) once its directory
/// is. ``crash(tearing:)`` throws away everything that was not durable, as a power cut would, so
/// that a test can crash storage between any two calls and then recover from what is left.
///
/// With a random source, a crash may also keep part of what was not durable: a prefix of the
/// writes since a file's last sync, the last of them cut short, as a disk that wrote some of its
/// queue before the power went. Seeded, every crash is reproducible.
public final class SimulatedFileSystem: FileSystem {
    private struct Node {
        /// The file's bytes as of its last sync.
        var durable: [UInt8] = []
        /// Writes since the last sync, in order.
        var pending: [(offset: Int, bytes: [UInt8])] = []
        /// What reads see now: durable with pending applied.
        var current: [UInt8] = []
    }

    private struct State {
        var nodes: [Int: Node] = [:]
        /// Path to node, as reads see it, and as the last directory syncs left it.
        var names: [String: Int] = [:]
        var durableNames: [String: Int] = [:]
        var open: [Int32: Int] = [:]
        var nextNode = 1
        var nextHandle: Int32 = 3
        /// How many syncs of files and directories were made (for tests).
        var syncs = 0
    }

    private let state = Mutex(State())
    /// The bytes its files may hold in all (as they read now); a write past it fails as a full
    /// disk's does.
    public let capacityBytes: UInt64

    public init(capacityBytes: UInt64 = .max) {
        self.capacityBytes = capacityBytes
    }

    public func open(_ path: String, create: Bool) throws(StorageError) -> FileHandle {
        try state.withLock { (state) throws(StorageError) -> FileHandle in
            let node: Int
            if let existing = state.names[path] {
                node = existing
            } else {
                guard create else { throw StorageError.io(path: path, reason: "open failed: No such file or directory") }
                node = state.nextNode
                state.nextNode += 1
                state.nodes[node] = Node()
                state.names[path] = node
            }
            let handle = state.nextHandle
            state.nextHandle += 1
            state.open[handle] = node
            return FileHandle(path: path, number: handle)
        }
    }

    /// ``open(_:create:)``: there is no cache to bypass, and the durability contract is the same.
    public func openBypassingCache(_ path: String) throws(StorageError) -> FileHandle {
        try open(path, create: true)
    }

    /// False: there is no cache.
    public func isBypassingCache(_ file: FileHandle) -> Bool { false }

    public func write(_ file: FileHandle, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(StorageError) {
        let copy = [UInt8](bytes)
        try state.withLock { (state) throws(StorageError) in
            let node = try Self.node(of: file, in: state)
            if capacityBytes != .max {
                let growth = UInt64(max(0, offset + copy.count - state.nodes[node]!.current.count))
                guard growth <= capacityBytes - min(capacityBytes, Self.used(in: state)) else {
                    throw StorageError.io(path: file.path, reason: "write failed: No space left on device")
                }
            }
            state.nodes[node]!.pending.append((offset, copy))
            Self.apply(copy, at: offset, to: &state.nodes[node]!.current)
        }
    }

    public func read(_ file: FileHandle, at offset: Int, count: Int) throws(StorageError) -> [UInt8] {
        try state.withLock { (state) throws(StorageError) -> [UInt8] in
            let bytes = state.nodes[try Self.node(of: file, in: state)]!.current
            guard offset < bytes.count else { return [] }
            return Array(bytes[offset..<min(bytes.count, offset + count)])
        }
    }

    public func read(_ file: FileHandle, at offset: Int, into buffer: UnsafeMutableRawBufferPointer) throws(StorageError) -> Int {
        let bytes = try read(file, at: offset, count: buffer.count)
        bytes.withUnsafeBytes { buffer.copyMemory(from: $0) }
        return bytes.count
    }

    public func size(_ file: FileHandle) throws(StorageError) -> Int {
        try state.withLock { (state) throws(StorageError) -> Int in state.nodes[try Self.node(of: file, in: state)]!.current.count }
    }

    public func sync(_ file: FileHandle) throws(StorageError) {
        try state.withLock { (state) throws(StorageError) in
            let node = try Self.node(of: file, in: state)
            state.nodes[node]!.durable = state.nodes[node]!.current
            state.nodes[node]!.pending = []
            state.syncs += 1
        }
    }

    public func close(_ file: FileHandle) {
        state.withLock { _ = $0.open.removeValue(forKey: file.number) }
    }

    public func rename(_ source: String, to destination: String) throws(StorageError) {
        try state.withLock { (state) throws(StorageError) in
            guard let node = state.names.removeValue(forKey: source) else {
                throw StorageError.io(path: source, reason: "rename failed: No such file or directory")
            }
            state.names[destination] = node
        }
    }

    public func remove(_ path: String) throws(StorageError) {
        state.withLock { _ = $0.names.removeValue(forKey: path) }
    }

    public func list(_ directory: String) throws(StorageError) -> [String] {
        state.withLock { state in
            state.names.keys.compactMap { path in Self.parent(of: path) == directory ? String(path.dropFirst(directory.count + 1)) : nil }
        }
    }

    public func syncDirectory(_ directory: String) throws(StorageError) {
        state.withLock { state in
            for path in state.durableNames.keys where Self.parent(of: path) == directory && state.names[path] == nil {
                state.durableNames.removeValue(forKey: path)
            }
            for (path, node) in state.names where Self.parent(of: path) == directory { state.durableNames[path] = node }
            state.syncs += 1
        }
    }

    /// What is left of ``capacityBytes``: the directory does not matter, as there is one disk.
    public func availableBytes(in directory: String) throws(StorageError) -> UInt64 {
        state.withLock { state in capacityBytes - min(capacityBytes, Self.used(in: state)) }
    }

    /// The bytes the files hold, as they read now: those with a name, and those removed and
    /// still open (as on a POSIX file system, their blocks are freed when the last handle closes).
    private static func used(in state: State) -> UInt64 {
        Set(state.names.values).union(state.open.values).reduce(0) { $0 + UInt64(state.nodes[$1]!.current.count) }
    }

    /// Syncs of files and directories so far.
    public var syncCount: Int { state.withLock { $0.syncs } }

    /// A power cut: every open file is closed, every name not made durable by a directory sync
    /// is undone, and every file loses what was written since its last sync. With `random`, each
    /// file may keep a prefix of those writes instead, the last of them possibly cut short.
    public func crash(tearing random: inout (some RandomNumberGenerator)?) {
        state.withLock { state in
            state.open = [:]
            state.names = state.durableNames
            for key in state.nodes.keys.sorted() {
                var node = state.nodes[key]!
                var kept = node.durable
                if var generator = random, !node.pending.isEmpty {
                    let whole = Int.random(in: 0...node.pending.count, using: &generator)
                    for write in node.pending.prefix(whole) { Self.apply(write.bytes, at: write.offset, to: &kept) }
                    if whole < node.pending.count {
                        let torn = node.pending[whole]
                        let part = Int.random(in: 0...torn.bytes.count, using: &generator)
                        Self.apply(Array(torn.bytes.prefix(part)), at: torn.offset, to: &kept)
                    }
                    random = generator
                }
                node = Node(durable: kept, pending: [], current: kept)
                state.nodes[key] = node
            }
        }
    }

    /// Another disk holding what this one holds durably now: a copy taken as a backup (or a VM
    /// snapshot) would be, to be put back later.
    public func durableCopy() -> SimulatedFileSystem {
        let copy = SimulatedFileSystem(capacityBytes: capacityBytes)
        state.withLock { state in
            copy.state.withLock { target in
                target.names = state.durableNames
                target.durableNames = state.durableNames
                for (key, node) in state.nodes { target.nodes[key] = Node(durable: node.durable, pending: [], current: node.durable) }
                target.nextNode = state.nextNode
            }
        }
        return copy
    }

    /// A power cut that keeps nothing that was not durable.
    public func crash() {
        var none: SystemRandomNumberGenerator? = nil
        crash(tearing: &none)
    }

    private static func node(of file: FileHandle, in state: State) throws(StorageError) -> Int {
        guard let node = state.open[file.number] else {
            throw StorageError.io(path: file.path, reason: "the file is not open (closed, or lost at a simulated crash)")
        }
        return node
    }

    private static func apply(_ bytes: [UInt8], at offset: Int, to target: inout [UInt8]) {
        if target.count < offset + bytes.count { target += repeatElement(0, count: offset + bytes.count - target.count) }
        target.replaceSubrange(offset..<(offset + bytes.count), with: bytes)
    }

    private static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return String(path[..<slash])
    }
}
