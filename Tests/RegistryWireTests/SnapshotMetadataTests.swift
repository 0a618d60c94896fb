import RegistryCore
import Testing
@testable import RegistryWire

/// A snapshot's header, read as untrusted bytes (a damaged disk, or a peer's snapshot): what it
/// says the snapshot covers must be a vector a node can hold.
@Suite struct SnapshotMetadataTests {
    func metadata(_ positions: [(String, UInt64, UInt64)]) -> SnapshotMetadata {
        var vector = VersionVector()
        for (origin, epoch, sequence) in positions { vector.recordAll(through: sequence, in: LogID(origin: NodeID(trusted: origin), epoch: epoch)) }
        return SnapshotMetadata(nodeID: NodeID(trusted: "node-a"), epoch: 3, clock: HLCTimestamp(rawValue: 1 << 20), versionVector: vector, devices: 10)
    }

    @Test func aHeaderRoundTripsUpToTheLargestSequence() throws {
        let written = metadata([("node-a", 3, 12), ("node-b", 1, VersionVector.largestSequence)])
        #expect(try SnapshotCodec.decodeMetadata(SnapshotCodec.encode(written)) == written)
    }

    /// A sequence past the largest, or an epoch 0, is refused with a typed error: taken in, such a
    /// vector made the label of the installed snapshot, a sum of its sequences, trap.
    @Test func aSequencePastTheLargestOrAnEpochZeroIsRefused() {
        for bad in [
            metadata([("node-a", 3, 12), ("node-b", 1, UInt64.max)]), metadata([("node-b", 1, VersionVector.largestSequence + 1)]),
            metadata([("node-b", 0, 5)]),
        ] {
            #expect(throws: CodecError.self) { try SnapshotCodec.decodeMetadata(SnapshotCodec.encode(bad)) }
        }
    }
}
