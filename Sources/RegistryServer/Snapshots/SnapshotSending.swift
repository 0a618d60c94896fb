import RegistryWire

/// One snapshot file on its way to a receiver, as a plain value: which bytes go next, at most
/// ``window`` chunks unacknowledged, and whether the receiver has installed it. A sender starts
/// one when the receiver lacks operations its journal no longer holds (see ``PeerLink``).
struct SnapshotSending: Equatable, Sendable {
    /// An acknowledgement that does not fit what was sent: a protocol violation by the receiver.
    struct Violation: Error, Equatable {
        let reason: String
    }

    let transferID: UInt64
    let totalBytes: UInt64
    let chunkBytes: Int
    /// Chunks sent and not yet acknowledged, at most.
    let window: Int
    private(set) var sentBytes: UInt64 = 0
    private(set) var acknowledgedBytes: UInt64 = 0
    private(set) var installed = false

    init(transferID: UInt64, totalBytes: UInt64, chunkBytes: Int = 256 << 10, window: Int = 4) {
        precondition(totalBytes > 0 && chunkBytes > 0 && window > 0)
        self.transferID = transferID
        self.totalBytes = totalBytes
        self.chunkBytes = chunkBytes
        self.window = window
    }

    /// Every byte is sent and written; what is left is the receiver's installing it.
    var awaitingInstall: Bool { acknowledgedBytes == totalBytes && !installed }

    /// The next bytes to send, recorded as sent; nil when all are sent or the window is full.
    mutating func nextChunk() -> (offset: UInt64, count: Int)? {
        guard sentBytes < totalBytes, sentBytes - acknowledgedBytes < UInt64(window * chunkBytes) else { return nil }
        let count = Int(min(UInt64(chunkBytes), totalBytes - sentBytes))
        defer { sentBytes += UInt64(count) }
        return (sentBytes, count)
    }

    /// The receiver acknowledged; true once it says the snapshot is installed.
    mutating func acknowledged(_ ack: SnapshotAck) throws(Violation) -> Bool {
        guard ack.transferID == transferID else { throw Violation(reason: "an acknowledgement of transfer \(ack.transferID), not \(transferID)") }
        guard ack.receivedBytes >= acknowledgedBytes, ack.receivedBytes <= sentBytes else {
            throw Violation(reason: "an acknowledgement of \(ack.receivedBytes) bytes, with \(acknowledgedBytes)...\(sentBytes) possible")
        }
        guard !ack.installed || ack.receivedBytes == totalBytes else {
            throw Violation(reason: "installed after \(ack.receivedBytes) of \(totalBytes) bytes")
        }
        acknowledgedBytes = ack.receivedBytes
        installed = ack.installed
        return installed
    }
}
