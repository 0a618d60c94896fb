import RegistryCore
import RegistryStorage
import RegistryWire

/// Operations as the journal stores them: each run of one (origin, epoch) becomes a
/// ``LogSegment`` of protobuf-encoded records.
enum OperationSegments {
    /// Records per segment at most, so that even a huge batch writes segments of about a
    /// megabyte rather than one huge blob.
    static let maxRecords = 4096

    /// Encodes `operations`, in order, with `encoder` (whose arena only this call uses).
    static func encode(_ operations: [LoggedOperation], with encoder: OperationEncoder) throws(StorageError) -> [LogSegment] {
        var segments = [LogSegment]()
        // Each operation is read in place through the array: binding it to a loop variable would
        // copy it, retaining and releasing every one of its strings and arrays.
        for index in operations.indices {
            let origin = operations[index].origin.value
            let epoch = operations[index].epoch
            let startsSegment = segments.last.map { $0.origin != origin || $0.epoch != epoch || $0.count == maxRecords }
            if startsSegment ?? true {
                segments.append(LogSegment(origin: origin, epoch: epoch, reservingBytes: 200 * min(operations.count, maxRecords)))
            }
            let sequence = operations[index].sequence
            do {
                try segments[segments.count - 1].append(sequence: sequence, hlc: operations[index].timestamp.rawValue) {
                    (bytes: inout [UInt8]) throws(CodecError) in
                    try encoder.encode(operations[index].operation, appendingTo: &bytes)
                }
            } catch {
                throw .corrupt("cannot encode operation \(sequence): \(error)")
            }
        }
        return segments
    }
}
