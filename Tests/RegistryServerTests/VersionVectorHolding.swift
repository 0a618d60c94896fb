@testable import RegistryCore

extension VersionVector {
    /// A vector holding each log through its sequence, for tests that state vectors directly.
    static func holding(_ entries: [(LogID, UInt64)]) -> VersionVector {
        var vector = VersionVector()
        for (log, sequence) in entries { vector.recordAll(through: sequence, in: log) }
        return vector
    }
}
