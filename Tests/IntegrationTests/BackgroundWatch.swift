import Foundation

/// `registryctl watch ARGUMENTS` in the background: started, given 1.5 s to open its stream,
/// then read whole once it exits by itself (its `--count`) or 20 s passed.
struct BackgroundWatch {
    private let process = Process()
    private let output = Pipe()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: Binaries.path("registryctl"))
        process.arguments = ["watch"] + arguments
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        Thread.sleep(forTimeInterval: 1.5)
    }

    /// Waits for the watch to end (stopping it after 20 s); its exit status and output lines.
    func finish() -> (status: Int32, lines: [Substring]) {
        if !waitForExit(of: process, timeout: 20) { end(process, grace: 5) }
        process.waitUntilExit()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        return (process.terminationStatus, text.split(separator: "\n"))
    }
}
