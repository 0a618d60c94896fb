import Foundation

/// A fresh directory under the system temp dir, for one test; `remove()` deletes it.
public struct TemporaryDirectory: Sendable {
    public let path: String

    public init() throws {
        path = NSTemporaryDirectory() + "registry-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}
