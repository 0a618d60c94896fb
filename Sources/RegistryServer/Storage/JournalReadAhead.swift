import Platform
import RegistryCore
import RegistryStorage
import RegistryWire

/// Runs a replay on two threads: one of its own reads journal entries and decodes their
/// operations (``DecodedEntry``), while the caller's thread applies them in order. Reading and
/// decoding were about a quarter of a single-threaded replay (docs/performance.md, "Replaying
/// registrations").
///
/// The reading thread runs at most ``batchesAhead`` batches of about ``batchRecords`` records
/// ahead, which bounds the memory a slow apply lets pile up. Each batch is freed on the applying
/// thread once applied (docs/performance.md, "Applied batches freed where they are applied"). A
/// replay in the background runs on its caller's thread alone (see `readingAhead`).
enum JournalReadAhead {
    /// Records per batch handed over, about: a batch ends with the entry that reaches this.
    static var batchRecords: Int { 4096 }
    /// Batches the reading thread may have handed over and not yet had taken.
    static var batchesAhead: Int { 4 }

    private enum Batch<Finished: Sendable>: Sendable {
        case entries([DecodedEntry])
        case finished(Result<Finished, StorageError>)
    }

    /// Calls `read` on a thread of its own, handing it a function to give each entry it reads to;
    /// each entry is decoded there, then given to `apply` on the caller's thread, in order.
    /// Returns what `read` returns, or throws what `read` or `apply` threw first. After `apply`
    /// throws, the rest that `read` gives is dropped (it reads to its end: a failure is rare, and
    /// a reader that stops only when it is done needs no cancellation).
    ///
    /// - Parameters:
    ///   - held: records it holds are not decoded (``DecodedSegment/init(_:decoder:unlessHeldBy:)``).
    ///   - readingAhead: false runs `read` on the caller's thread, each entry decoded and applied
    ///     before the next is read: for a replay in the background (the snapshot taker's), whose
    ///     speed matters less than the CPU a second thread would take from requests.
    static func run<Finished: Sendable>(
        named name: String, skippingWhat held: VersionVector, readingAhead: Bool = true,
        reading read: @escaping @Sendable (_ give: (JournalEntry) throws(StorageError) -> Void) throws(StorageError) -> Finished,
        applying apply: (DecodedEntry) throws(StorageError) -> Void
    ) throws(StorageError) -> Finished {
        guard readingAhead else {
            var decoder = OperationDecoder()
            return try read { (entry) throws(StorageError) in try apply(DecodedEntry(entry, decoder: &decoder, unlessHeldBy: held)) }
        }
        let handoff = BoundedHandoff<Batch<Finished>>(capacity: batchesAhead)
        let reader: @Sendable () -> Void = {
            var decoder = OperationDecoder()
            var batch = [DecodedEntry]()
            var records = 0
            let result = Result { () throws(StorageError) in
                try read { (entry) throws(StorageError) in
                    let decoded = try DecodedEntry(entry, decoder: &decoder, unlessHeldBy: held)
                    batch.append(decoded)
                    records += decoded.count
                    if records >= batchRecords {
                        handoff.put(.entries(batch))
                        batch = []
                        records = 0
                    }
                }
            }
            if !batch.isEmpty { handoff.put(.entries(batch)) }
            handoff.put(.finished(result))
        }
        guard DetachedThread.start(named: name, reader) else {
            throw .io(path: name, reason: "no thread could be started to read the journal")
        }
        var failure: StorageError?
        while true {
            switch handoff.take() {
            case .entries(let entries):
                guard failure == nil else { continue }
                do {
                    for entry in entries { try apply(entry) }
                } catch {
                    failure = error
                }
            case .finished(let result):
                if let failure { throw failure }
                return try result.get()
            }
        }
    }
}
