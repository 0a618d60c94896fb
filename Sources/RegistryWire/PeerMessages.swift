import RegistryCore

/// One frame between two nodes after a peer handshake (`registry.v1.PeerFrame`, peer.proto).
public enum PeerFrame: Equatable, Sendable {
    case hello(PeerHello)
    case welcome(PeerWelcome)
    case batch(OperationBatch)
    case ack(BatchAck)
    case snapshotChunk(SnapshotChunk)
    case snapshotAck(SnapshotAck)
    /// Why the connection is refused or closed.
    case refusal(WireError)
    /// A body this version does not know, or none.
    case unknown
}

/// The sender's first peer frame: who it is and what it holds.
public struct PeerHello: Equatable, Sendable {
    public var clusterID: String
    public var nodeID: String
    public var epoch: UInt64
    public var version: ProtocolVersion
    public var versionVector: [LogPosition]
    public var mintingKeyFingerprint: UInt64
    /// Proves the sender holds the cluster secret, over the receiver's challenge (peer.proto).
    public var proof: [UInt8]
    /// What the receiver signs in its welcome.
    public var challenge: UInt64
    /// Names the sender's vendor rules; 0 says nothing.
    public var vendorRulesFingerprint: UInt64
    /// How many device records (devices and aliases) and claims the sender holds, for a
    /// receiver far behind to size its indexes by; 0 says nothing (peer.proto).
    public var deviceRecords: UInt64
    public var claims: UInt64

    public init(
        clusterID: String, nodeID: String, epoch: UInt64, version: ProtocolVersion = .current, versionVector: [LogPosition],
        mintingKeyFingerprint: UInt64, proof: [UInt8] = [], challenge: UInt64 = 0, vendorRulesFingerprint: UInt64 = 0,
        deviceRecords: UInt64 = 0, claims: UInt64 = 0
    ) {
        self.vendorRulesFingerprint = vendorRulesFingerprint
        self.deviceRecords = deviceRecords
        self.claims = claims
        self.proof = proof
        self.challenge = challenge
        self.clusterID = clusterID
        self.nodeID = nodeID
        self.epoch = epoch
        self.version = version
        self.versionVector = versionVector
        self.mintingKeyFingerprint = mintingKeyFingerprint
    }
}

/// The receiver's answer to a ``PeerHello``: what it holds, so the sender knows where to start.
public struct PeerWelcome: Equatable, Sendable {
    public var nodeID: String
    public var epoch: UInt64
    public var versionVector: [LogPosition]
    public var maxBatchOperations: UInt32
    /// Proves the receiver holds the cluster secret, over the sender's challenge.
    public var proof: [UInt8]
    /// The receiver's protocol version; 0.0 from receivers before 1.1, which did not say.
    public var version: ProtocolVersion

    public init(
        nodeID: String, epoch: UInt64, versionVector: [LogPosition], maxBatchOperations: UInt32, proof: [UInt8] = [],
        version: ProtocolVersion = .current
    ) {
        self.proof = proof
        self.version = version
        self.nodeID = nodeID
        self.epoch = epoch
        self.versionVector = versionVector
        self.maxBatchOperations = maxBatchOperations
    }
}

/// One logged operation in transit: its place in its origin's log, its HLC, and its encoded
/// `registry.v1.Operation`, as the origin's log holds it (decoded, and so checked, on arrival).
public struct PeerOperation: Equatable, Sendable {
    public var origin: String
    public var epoch: UInt64
    public var sequence: UInt64
    public var hlc: UInt64
    public var operation: ArraySlice<UInt8>

    public init(origin: String, epoch: UInt64, sequence: UInt64, hlc: UInt64, operation: ArraySlice<UInt8>) {
        self.origin = origin
        self.epoch = epoch
        self.sequence = sequence
        self.hlc = hlc
        self.operation = operation
    }

    /// The operation for sending: the bytes it came in when it came from a peer
    /// (``LoggedOperation/encoded``), encoded otherwise.
    public init(_ logged: LoggedOperation) {
        self.init(
            origin: logged.origin.value, epoch: logged.epoch, sequence: logged.sequence, hlc: logged.timestamp.rawValue,
            operation: logged.encoded ?? OperationCodec.encode(logged.operation)[...])
    }

    /// Decodes and checks the operation: a typed error for a bad node ID, epoch 0, sequence 0, or
    /// bytes that are not a valid operation.
    public func decoded() throws(CodecError) -> LoggedOperation {
        var decoder = OperationDecoder(remembering: 1)
        return try decoded(using: &decoder)
    }

    /// As ``decoded()``, through `decoder`, which remembers the texts the operations before it
    /// repeated (origins, vendors, bundle IDs): for a session's stream of batches.
    public func decoded(using decoder: inout OperationDecoder) throws(CodecError) -> LoggedOperation {
        let node: NodeID
        do {
            node = try decoder.nodeID(origin)
        } catch {
            throw .invalidOperation("origin \(origin.debugDescription): \(error)")
        }
        guard epoch > 0, sequence > 0 else {
            throw .invalidOperation("\(origin)/\(epoch)/\(sequence): epochs and sequences are numbered from 1")
        }
        return LoggedOperation(
            origin: node, epoch: epoch, sequence: sequence, timestamp: HLCTimestamp(rawValue: hlc),
            operation: try decoder.decode(operation), encoded: operation)
    }
}

/// Operations the receiver lacks, in order within each log.
public struct OperationBatch: Equatable, Sendable {
    public var batchID: UInt64
    public var operations: [PeerOperation]

    public init(batchID: UInt64, operations: [PeerOperation]) {
        self.batchID = batchID
        self.operations = operations
    }
}

/// The receiver holds every operation of batch `batchID` (and of the batches before it) durably.
public struct BatchAck: Equatable, Sendable {
    public var batchID: UInt64
    /// What the receiver now holds of every log.
    public var held: [LogPosition]

    public init(batchID: UInt64, held: [LogPosition]) {
        self.batchID = batchID
        self.held = held
    }
}

/// A piece of the sender's newest snapshot file, sent when the receiver lacks operations that the
/// sender's journal no longer holds. Chunks go in order from offset 0 to `totalBytes`.
public struct SnapshotChunk: Equatable, Sendable {
    public var transferID: UInt64
    public var offset: UInt64
    public var totalBytes: UInt64
    public var data: [UInt8]

    public init(transferID: UInt64, offset: UInt64, totalBytes: UInt64, data: [UInt8]) {
        self.transferID = transferID
        self.offset = offset
        self.totalBytes = totalBytes
        self.data = data
    }
}

/// The receiver wrote `receivedBytes` of a snapshot transfer; once `installed`, `held` is what it
/// now holds of every log, durably.
public struct SnapshotAck: Equatable, Sendable {
    public var transferID: UInt64
    public var receivedBytes: UInt64
    public var installed: Bool
    public var held: [LogPosition]

    public init(transferID: UInt64, receivedBytes: UInt64, installed: Bool = false, held: [LogPosition] = []) {
        self.transferID = transferID
        self.receivedBytes = receivedBytes
        self.installed = installed
        self.held = held
    }
}
