import RegistryCore
import RegistryStorage

extension LogKey {
    /// The storage layer's key of `log` (it names origins by their text).
    init(_ log: VersionVector.Log) {
        self.init(origin: log.origin.value, epoch: log.epoch)
    }
}
