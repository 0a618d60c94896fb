import Foundation

/// The revision the report names: `$REGISTRYLOAD_GIT_REVISION` when set (the Makefile sets it),
/// otherwise `git rev-parse HEAD` in the working directory, otherwise "unknown".
enum GitRevision {
    static func current() -> String {
        if let given = ProcessInfo.processInfo.environment["REGISTRYLOAD_GIT_REVISION"], !given.isEmpty { return given }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git", "rev-parse", "HEAD"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            return "unknown"
        }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return process.terminationStatus == 0 && !text.isEmpty ? text : "unknown"
    }
}
