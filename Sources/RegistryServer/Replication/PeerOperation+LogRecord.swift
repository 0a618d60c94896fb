import RegistryStorage
import RegistryWire

extension PeerOperation {
    /// A journal record as a peer batch carries it: the same fields, the payload as it is.
    init(_ record: LogRecord) {
        self.init(origin: record.origin, epoch: record.epoch, sequence: record.sequence, hlc: record.hlc, operation: record.payload)
    }
}
