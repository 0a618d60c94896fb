import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Where the built executables are: beside this test binary, or `REGISTRY_BIN_DIR`.
enum Binaries {
    static let directory: URL = {
        if let override = ProcessInfo.processInfo.environment["REGISTRY_BIN_DIR"] { return URL(fileURLWithPath: override) }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var url = URL(fileURLWithPath: executable).deletingLastPathComponent()
        // On Linux the test binary sits in the build folder; elsewhere inside a bundle.
        while !FileManager.default.fileExists(atPath: url.appendingPathComponent("registryd").path), url.path != "/" {
            url.deleteLastPathComponent()
        }
        return url
    }()

    static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    /// The repository root, for Protos/ and Tests/Interop/.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
}

/// The outcome of a finished command.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Runs a command to completion (bounded by `timeout`) and captures its output.
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    // Files, not pipes: a chatty child can never block on a full pipe.
    let outPath = NSTemporaryDirectory() + "registry-out-" + UUID().uuidString
    let errPath = outPath + ".err"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    process.standardOutput = FileHandle(forWritingAtPath: outPath)
    process.standardError = FileHandle(forWritingAtPath: errPath)
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning, Date() < deadline { usleep(10_000) }
    if process.isRunning {
        process.terminate()
    }
    process.waitUntilExit()
    let stdoutData = FileManager.default.contents(atPath: outPath) ?? Data()
    let stderrData = FileManager.default.contents(atPath: errPath) ?? Data()
    return CommandResult(
        status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
        stderr: String(decoding: stderrData, as: UTF8.self))
}

/// A `registryd` child process on an ephemeral loopback port, its log in a file.
final class DaemonProcess {
    let process = Process()
    let logPath: String
    private(set) var port = 0

    /// Starts `registryd` and waits (up to 30 s) for its "listening on" line.
    init(dataDirectory: String, arguments: [String] = []) throws {
        logPath = dataDirectory + ".log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: Binaries.path("registryd"))
        process.arguments = ["--data-dir", dataDirectory, "--port", "0", "--host", "127.0.0.1"] + arguments
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process.isRunning {
            if let port = Self.listeningPort(in: log) {
                self.port = port
                return
            }
            usleep(20_000)
        }
        process.terminate()
        throw DaemonError.didNotStart(log)
    }

    enum DaemonError: Error {
        case didNotStart(String)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
    var endpoint: String { "127.0.0.1:\(port)" }

    private static func listeningPort(in log: String) -> Int? {
        guard let range = log.range(of: "listening on 127.0.0.1:") else { return nil }
        return Int(log[range.upperBound...].prefix { $0.isNumber })
    }

    /// Sends `signal` and waits (up to 30 s) for the exit status.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        let deadline = Date().addingTimeInterval(30)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { stop(signal: SIGKILL) }
    }
}
