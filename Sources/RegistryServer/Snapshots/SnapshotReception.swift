import RegistryWire

/// The receiving side of one snapshot transfer, as a plain value: chunks must come in order,
/// without gaps or overlaps, all of one transfer and size, up to a bound on the size.
struct SnapshotReception: Equatable, Sendable {
    let transferID: UInt64
    let totalBytes: UInt64
    private(set) var receivedBytes: UInt64 = 0

    /// The largest snapshot a node takes from a peer (it is written to disk, not held in memory).
    static let maxBytes: UInt64 = 1 << 40

    /// Starts a transfer with its first chunk (not yet counted: pass it to ``accept(_:)``).
    init(first chunk: SnapshotChunk) throws(WireError) {
        guard chunk.offset == 0 else {
            throw Self.refusal("transfer \(chunk.transferID) starts at byte \(chunk.offset), not 0")
        }
        guard chunk.totalBytes > 0, chunk.totalBytes <= Self.maxBytes else {
            throw Self.refusal("transfer \(chunk.transferID) claims \(chunk.totalBytes) bytes (1...\(Self.maxBytes) allowed)")
        }
        transferID = chunk.transferID
        totalBytes = chunk.totalBytes
    }

    /// Counts `chunk` as received; true when it is the last. Throws the refusal for a chunk out
    /// of order, of another transfer, or past the end.
    mutating func accept(_ chunk: SnapshotChunk) throws(WireError) -> Bool {
        guard chunk.transferID == transferID, chunk.totalBytes == totalBytes else {
            throw Self.refusal("a chunk of transfer \(chunk.transferID) (\(chunk.totalBytes) bytes) during transfer \(transferID) (\(totalBytes) bytes)")
        }
        guard chunk.offset == receivedBytes else {
            throw Self.refusal("transfer \(transferID): a chunk at byte \(chunk.offset), expected \(receivedBytes)")
        }
        guard !chunk.data.isEmpty, UInt64(chunk.data.count) <= totalBytes - receivedBytes else {
            throw Self.refusal("transfer \(transferID): a chunk of \(chunk.data.count) bytes at \(receivedBytes) of \(totalBytes)")
        }
        receivedBytes += UInt64(chunk.data.count)
        return receivedBytes == totalBytes
    }

    private static func refusal(_ message: String) -> WireError {
        WireError(code: .unexpectedPeerFrame, message: message)
    }
}
