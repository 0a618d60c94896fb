import Platform
import Synchronization

/// Decides, one file at a time, whether another spare journal file may join a data directory,
/// so that it never holds more than ``keeping``.
///
/// Two threads add spares: the ``SpareJournalMaker`` when it finishes a file of zeros, and the
/// journal mover when ``CommitJournal/retire(in:below:spares:)`` keeps a retired file. Each used
/// to count the spares and then rename its file, so a spare finished between a retire's count and
/// its rename made one more than asked. Both now count and rename under one lock here. (A
/// rotation taking a spare only lowers the count, so it needs no lock.)
public final class SpareAdmission: Sendable {
    /// What became of a file offered as a spare.
    public enum Outcome: Equatable, Sendable {
        /// It was renamed to the spare's name.
        case added
        /// The directory already held enough spares; the file was left as it was.
        case full
        /// The file was not there (another start-up or a test removed it).
        case gone
        /// The rename failed with this `errno`.
        case failed(errno: Int32)
    }

    /// The most spares the directory should hold (at least one).
    public let keeping: Int
    private let lock = Mutex(())

    /// An admission keeping at most `keeping` spares (at least one).
    public init(keeping: Int) {
        self.keeping = max(keeping, 1)
    }

    /// Renames the file at `path` to `spare` when the directory at `directoryPath` holds fewer
    /// than `limit` spares (and never more than ``keeping``); otherwise leaves it.
    public func add(renaming path: String, to spare: String, inDirectoryAt directoryPath: String, ifFewerThan limit: Int? = nil) -> Outcome {
        let wanted = min(limit ?? keeping, keeping)
        return lock.withLock { _ in
            guard CommitJournal.spareNames(inDirectoryAt: directoryPath).count < wanted else { return .full }
            if rename(path, spare) == 0 { return .added }
            return errno == ENOENT ? .gone : .failed(errno: errno)
        }
    }
}
