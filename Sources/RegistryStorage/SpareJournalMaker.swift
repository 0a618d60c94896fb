import Platform
#if os(Linux)
import CLinuxFile
#endif
import Dispatch
import Synchronization

/// Makes spare journal files ahead of need, in the background: a journal file's worth of zeros,
/// written back and synced, then renamed to `spare-zeros-<nanoseconds>.journal` for one of the
/// ``CommitJournal``'s next rotations. It makes one when the journal asks
/// (``makeIfMissing(droppingFilesBelow:)``) and none is left, and, while the node is quiet, one at
/// a time until the directory holds ``keeping`` (``topUp()``).
///
/// Why: an `fdatasync` after an append must also commit the file's new size and blocks through
/// the filesystem's metadata journal; after writing over blocks the file already has, it need
/// not. On this project's VM a group commit's journal write and `fdatasync` took 0.15 ms at p50
/// instead of 0.22-0.26 ms, and at 360,000 registrations/s the open loop's p99 was 1.40-2.53 ms
/// (median 1.71, six runs) against 2.32-17.7 ms (median 3.5) when every file after a run's
/// first was appended to.
///
/// The zeros go out 1 MiB at a time, each written back (`sync_file_range`) before the next,
/// with a 3.2 ms pause between; one `fdatasync` at the end commits the blocks' allocation. The
/// size weighs two costs. A commit's `fdatasync` flushes the disk's cache and so waits for
/// whatever the disk is writing, which favours small chunks; but on this project's VM every
/// request to the virtual disk also costs the guest CPU time that the hypervisor takes while it
/// serves the request (steal), which favours few. With 64 KiB chunks (a thousand requests per
/// file, first chosen when 1 MiB chunks measured p99 3.5-4.1 ms against 1.2-4.4 ms without a
/// maker at 287,620 registrations/s), a later day's open loop at 385,000 registrations/s in
/// batches of 100 lost 1.3-2.0% of the machine to steal, the generator sent up to 3.5 ms late at
/// p99, and the p99 was 7.9-11.1 ms, against 0.0-0.1% steal and 1.9-2.5 ms with 1 MiB chunks
/// (three runs each, alternating; 512 KiB: 2.8-3.0 ms and one run with a 0.2 s stall; 2 and
/// 4 MiB: 5-9 ms, the commits then waiting behind the zeros). The pause keeps the zeros' share
/// of the disk as it was (200 µs per 64 KiB). A file takes about 0.3 s on an idle disk, within
/// the 0.5 s a node at its closed-loop maximum (600,000 registrations/s) takes to fill the three
/// quarters of a file that are left when the maker starts; a rotation that finds no spare
/// appends to a new file. Zeros read back as the end of a journal file, like any record not
/// numbered for it (see ``JournalEntry/read(_:at:file:)``).
///
/// Before each spare it drops the finished journal files from the page cache. Nothing reads
/// them while the node runs, yet their pages stayed cached, so every spare's zeros went into
/// pages the kernel had not used lately, and on this project's VM the first write to such a
/// page costs a fault in the hypervisor: on a node sized for 23M devices at 366,095
/// registrations/s, the copy of zeros into new pages took 7.5% of the machine's CPU by the
/// third 15-second run (12-19M devices), and the machine was 70% busy against 59-60% with the
/// files dropped (two sequences of three runs each); the page cache stayed at 1 GB instead of
/// growing to 4 GB.
///
/// A spare is made only while the file system has room for ``freeFilesNeeded`` journal files
/// besides it: it takes its space up to three quarters of a file before the journal needs it, and
/// on a nearly full disk that space must stay for the commits (an appended file needs new
/// blocks).
///
/// A failure only costs the optimisation: the half-made file is removed and the next rotation
/// appends to a new file, as it would without a spare.
///
/// Why keep more than one: the zeros cost the disk as much as the journal itself. A node at
/// 463,000 registrations/s fills a 64 MiB file about once a second, so it also writes about
/// 64 MiB of zeros a second, and every commit's `fdatasync` waits behind them. In an open loop at
/// that rate on a node sized for its devices, three alternating pairs of 15-second runs, keeping
/// one spare and keeping 24 made before the run: the median of the runs' per-second p99s was
/// 3.5-5.8 ms against 2.3-2.6 ms, and the commits' p99 1.2-1.5 ms against 0.5-1.0 ms; but the
/// runs' p99 was 4.0-6.3 ms against 2.9-6.0 ms, because stalls of 10-50 ms that come and go
/// with the machine, and not with the zeros, hit both. Spares kept
/// from quiet times (``keeping``, `--journal-spares`) let a burst of that many files go without
/// zeros; retired files refill them, so a node that is quiet at times writes no zeros at all once
/// it has its spares. Each costs a journal file's disk space for as long as it is kept.
///
/// `@unchecked Sendable`: `directoryPath`, `bytes`, `admission` (itself `Sendable`),
/// `minimumFreeBytes`, `beforeAdding` and `onNoRoom` are immutable; the mutable `state` is a
/// `Mutex`; and `firstUndropped`, `lackedRoom` and the file work are touched only by closures on
/// `queue` (serial), after `init` set them.
public final class SpareJournalMaker: @unchecked Sendable {
    private struct State {
        var making = false
        var cancelled = false
    }

    static let temporaryName = "spare.journal.tmp"
    /// The most the disk is ever writing for the maker at once.
    static let chunkBytes = 1 << 20
    /// The pause after each chunk, leaving the disk to the commits in between.
    static let pauseMicros: UInt32 = 3_200

    /// The most the maker drops from the page cache in one call. Dropping a whole 64 MiB file
    /// at once held a CPU for 4-5 ms inside the kernel, where nothing preempts it; on a node at
    /// 450,000 registrations/s that happened once a second, and the commit thread, ready to
    /// answer, waited up to 6 ms for a CPU meanwhile (`perf sched`). A 1 MiB piece takes
    /// 0.1-0.25 ms, and a pause of ``dropPauseMicros`` follows each.
    static let dropChunkBytes = 1 << 20
    /// The pause after each piece dropped from the page cache (no disk request is made).
    static let dropPauseMicros: UInt32 = 200

    /// Journal files' worth of free space needed to make a spare.
    public static let freeFilesNeeded = 4

    private let directoryPath: String
    private let bytes: Int
    /// Decides whether a finished spare may join the directory; the journal mover's
    /// ``CommitJournal/retire(in:below:spares:)`` asks the same one, so that together they never
    /// keep more than ``keeping``.
    public let admission: SpareAdmission
    /// Spares the directory should hold: ``topUp()`` makes them up to this many.
    public var keeping: Int { admission.keeping }
    /// Runs on the maker's queue once a spare's zeros are synced, before it asks to add it (tests
    /// use it to add spares meanwhile).
    private let beforeAdding: @Sendable () -> Void
    /// Free bytes the file system must have for a spare to be made.
    public let minimumFreeBytes: Int
    /// Called on the maker's queue when it makes no spare for lack of room, once until a spare
    /// is made again (the node logs it).
    private let onNoRoom: @Sendable () -> Void
    /// Whether the last decision found no room (only touched on ``queue``).
    private var lackedRoom = false
    private let queue = DispatchQueue(label: "registry.spare-journal", qos: .utility)
    private let state = Mutex(State())
    /// The first journal file still in the page cache as far as the maker knows.
    private var firstUndropped: UInt64

    /// A maker of spares of `bytes` bytes in the directory at `directoryPath`, for a journal
    /// whose first file this run is `firstFile`, keeping up to `keeping` (at least one). Removes a
    /// half-made spare that a crash left behind.
    public convenience init(
        directoryPath: String, bytes: Int = CommitJournal.rotationBytes, firstFile: UInt64, keeping: Int = 1,
        minimumFreeBytes: Int? = nil
    ) {
        self.init(
            directoryPath: directoryPath, bytes: bytes, firstFile: firstFile, admission: SpareAdmission(keeping: keeping),
            minimumFreeBytes: minimumFreeBytes)
    }

    /// A maker as above whose finished spares join the directory through `admission`, shared
    /// with whatever retires the journal's files meanwhile.
    public convenience init(
        directoryPath: String, bytes: Int = CommitJournal.rotationBytes, firstFile: UInt64, admission: SpareAdmission,
        minimumFreeBytes: Int? = nil, onNoRoom: @escaping @Sendable () -> Void = {}
    ) {
        self.init(
            directoryPath: directoryPath, bytes: bytes, firstFile: firstFile, admission: admission,
            minimumFreeBytes: minimumFreeBytes, beforeAdding: {}, onNoRoom: onNoRoom)
    }

    /// A maker as above that runs `beforeAdding` after each spare's zeros are synced (for tests).
    init(
        directoryPath: String, bytes: Int, firstFile: UInt64, admission: SpareAdmission, minimumFreeBytes: Int?,
        beforeAdding: @escaping @Sendable () -> Void, onNoRoom: @escaping @Sendable () -> Void = {}
    ) {
        self.onNoRoom = onNoRoom
        self.directoryPath = directoryPath
        self.bytes = bytes
        self.admission = admission
        self.minimumFreeBytes = minimumFreeBytes ?? Self.freeFilesNeeded * bytes
        self.firstUndropped = firstFile
        self.beforeAdding = beforeAdding
        unlink(directoryPath + "/" + Self.temporaryName)
    }

    /// Makes a spare unless one exists or is being made, first dropping the journal files
    /// numbered below `current` from the page cache (those it has not dropped or passed over).
    /// While a spare is left no zeros need their memory, so the files are passed over instead:
    /// freed at a file a second, with nothing to reuse it, the memory went back to the hypervisor
    /// (free page reporting) and commits stalled for 15-55 ms (node keeping 24 spares at 463,000
    /// registrations/s: p99 12-28 ms in six runs when dropping, 1.6-3.5 ms in four when not). The
    /// kernel reclaims those pages like any other cache when it needs them.
    func makeIfMissing(droppingFilesBelow current: UInt64) {
        startMaking {
            if self.spareCount > 0 {
                self.firstUndropped = max(self.firstUndropped, current)
                return
            }
            self.dropFromPageCache(filesBelow: current)
            self.make(ifFewerThan: 1)
        }
    }

    /// Makes one more spare when the directory holds fewer than ``keeping`` and none is being
    /// made. Called while the node is quiet, again and again, so that a node that gets busy
    /// meanwhile finishes at most the one under way.
    public func topUp() {
        guard spareCount < keeping else { return }
        startMaking { self.make(ifFewerThan: self.keeping) }
    }

    /// The spares the directory holds.
    public var spareCount: Int { CommitJournal.spareNames(inDirectoryAt: directoryPath).count }

    /// Runs `work` on the maker's queue unless something runs there already or it was cancelled.
    private func startMaking(_ work: @escaping @Sendable () -> Void) {
        let start = state.withLock { state -> Bool in
            guard !state.making, !state.cancelled else { return false }
            state.making = true
            return true
        }
        guard start else { return }
        queue.async {
            work()
            self.state.withLock { $0.making = false }
        }
    }

    /// Stops a spare being made (removing the half-made file) and waits until nothing runs.
    /// Afterwards no more are made.
    func cancelAndWait() {
        state.withLock { $0.cancelled = true }
        queue.sync {}
    }

    /// True while a spare is being made (for tests).
    var isMaking: Bool { state.withLock { $0.making } }

    private var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The pieces in which a file of `fileBytes` bytes leaves the page cache, in order: at most
    /// ``dropChunkBytes`` each, covering the file exactly.
    static func dropRanges(fileBytes: Int) -> [Range<Int>] {
        stride(from: 0, to: fileBytes, by: dropChunkBytes).map { $0..<min($0 + dropChunkBytes, fileBytes) }
    }

    /// Asks the kernel to forget the cached pages of the finished journal files from
    /// `firstUndropped` up to `current`: nothing reads them while the node runs, and their pages
    /// are clean (synced). Their memory is then what the next spare's pages reuse. It goes
    /// ``dropChunkBytes`` at a time (see there).
    private func dropFromPageCache(filesBelow current: UInt64) {
        while firstUndropped < current, !isCancelled {
            dropFromPageCache(fileAt: CommitJournal.path(inDirectoryAt: directoryPath, number: firstUndropped))
            firstUndropped += 1
        }
    }

    /// Drops one file's pages, ``dropChunkBytes`` at a time with a pause after each; a file
    /// that cannot be opened is left alone.
    private func dropFromPageCache(fileAt path: String) {
        #if os(Linux)
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return }
        for range in Self.dropRanges(fileBytes: Int(status.st_size)) where !isCancelled {
            _ = posix_fadvise(descriptor, off_t(range.lowerBound), off_t(range.count), POSIX_FADV_DONTNEED)
            usleep(Self.dropPauseMicros)
        }
        #endif
    }

    /// Makes a spare when the directory holds fewer than `wanted` and has room for it.
    private func make(ifFewerThan wanted: Int) {
        guard spareCount < wanted else { return }
        guard hasRoom() else {
            if !lackedRoom { onNoRoom() }
            lackedRoom = true
            return
        }
        lackedRoom = false
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let spare = directoryPath + "/spare-zeros-" + String(now.tv_sec * 1_000_000_000 + now.tv_nsec) + ".journal"
        let temporary = directoryPath + "/" + Self.temporaryName
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { return }
        guard writeZeros(to: descriptor), fdatasync(descriptor) == 0 else {
            close(descriptor)
            unlink(temporary)
            return
        }
        close(descriptor)
        beforeAdding()
        // Spares retired meanwhile may have filled the directory: then these zeros are not kept.
        guard admission.add(renaming: temporary, to: spare, inDirectoryAt: directoryPath, ifFewerThan: wanted) == .added else {
            unlink(temporary)
            return
        }
        // The rename is made durable by the rotation that uses the spare (it syncs the directory).
    }

    /// True when the file system has at least ``minimumFreeBytes`` available (to this
    /// process's user). When it cannot say, no: the spare is only an optimisation.
    private func hasRoom() -> Bool {
        var info = statvfs()
        guard statvfs(directoryPath, &info) == 0 else { return false }
        let available = UInt64(info.f_bavail).multipliedReportingOverflow(by: UInt64(info.f_frsize))
        return available.overflow || available.partialValue >= UInt64(minimumFreeBytes)
    }

    /// Writes a chunk back to the disk and waits for it, leaving the blocks' allocation to the
    /// one `fdatasync` at the end: syncing each chunk would make the filesystem commit its
    /// metadata journal every time, and commits would wait behind those.
    private func writeBack(_ descriptor: Int32, from offset: Int, bytes: Int) -> Bool {
        #if os(Linux)
        return registry_write_back_range(descriptor, Int64(offset), Int64(bytes)) == 0
        #else
        return fdatasync(descriptor) == 0
        #endif
    }

    private func writeZeros(to descriptor: Int32) -> Bool {
        let zeros = [UInt8](repeating: 0, count: Self.chunkBytes)
        var offset = 0
        while offset < bytes {
            if isCancelled { return false }
            let count = min(Self.chunkBytes, bytes - offset)
            let written = zeros.withUnsafeBytes { pwrite(descriptor, $0.baseAddress!, count, off_t(offset)) }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            offset += written
            guard writeBack(descriptor, from: offset - written, bytes: written) else { return false }
            usleep(Self.pauseMicros)
        }
        return true
    }
}
