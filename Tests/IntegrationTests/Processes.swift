import Foundation
import Platform

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

/// The port in a server's "listening on HOST:PORT" log line (registryd's, or the bench's floor
/// server's), once it is there.
func listeningPort(in log: String) -> Int? {
    port(after: "listening on ", in: log)
}

/// The port of the first "<phrase>HOST:PORT" in `log` (a text or JSON log line).
func port(after phrase: String, in log: String) -> Int? {
    guard let range = log.range(of: phrase) else { return nil }
    let address = log[range.upperBound...].prefix { !$0.isWhitespace && $0 != "\"" }
    guard let colon = address.lastIndex(of: ":") else { return nil }
    return Int(address[address.index(after: colon)...].prefix { $0.isNumber })
}

/// The outcome of a finished command.
struct CommandResult {
    let status: Int32
    let stdout: String
    let stderr: String
}

/// Waits up to `timeout` for `process` to exit; true when it has.
func waitForExit(of process: Process, timeout: TimeInterval) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning, Date() < deadline { usleep(10_000) }
    return !process.isRunning
}

/// Ends `process`: sends it `signal`, and when it has not exited `grace` later, SIGKILL to its
/// whole process group (Foundation starts each child in a group of its own, which takes in what
/// the child forked, such as a node's snapshot child); then reaps it. Its exit status.
@discardableResult
func end(_ process: Process, signal: Int32 = SIGTERM, grace: TimeInterval) -> Int32 {
    let pid = process.processIdentifier
    // 0 would signal this test process's own group.
    precondition(pid > 0, "ending a process that never started")
    kill(pid, signal)
    if !waitForExit(of: process, timeout: grace) {
        if getpgid(pid) == pid { kill(-pid, SIGKILL) }
        kill(pid, SIGKILL)
    }
    process.waitUntilExit()
    return process.terminationStatus
}

/// A child's standard output and error, in two temporary files rather than pipes: a chatty child
/// never blocks on a full pipe, and they can be read within a bound, whoever else holds a copy of
/// a pipe's end. ``remove()`` deletes them.
struct OutputFiles {
    let outPath = NSTemporaryDirectory() + "registry-out-" + UUID().uuidString
    var errPath: String { outPath + ".err" }

    /// Creates both files and makes them `process`'s standard output and error.
    init(for process: Process) {
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardInput = FileHandle.nullDevice
    }

    /// Waits up to `timeout` for `process`'s first line of output; false when it exited, or the
    /// time passed, first.
    func waitForFirstLine(of process: Process, timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !stdout.contains("\n"), process.isRunning, Date() < deadline { usleep(20_000) }
        return stdout.contains("\n")
    }

    /// What the child wrote so far.
    var stdout: String { String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self) }
    var stderr: String { String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self) }

    func remove() {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
}

/// Runs a command to completion (bounded by `timeout`) and captures its output.
func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:], timeout: TimeInterval = 60) throws -> CommandResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let output = OutputFiles(for: process)
    defer { output.remove() }
    try process.run()
    if !waitForExit(of: process, timeout: timeout) { end(process, grace: 5) }
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: output.stdout, stderr: output.stderr)
}

/// A `registryd` child process on an ephemeral loopback port, its log in a file.
final class DaemonProcess {
    let process = Process()
    let logPath: String
    private(set) var port = 0

    /// Starts `registryd` and waits (up to 30 s) for its "listening on" line; throws
    /// ``DaemonError/exited(status:log:)`` when it exits first.
    ///
    /// `launcher` is a command prefix that runs it, such as a ``MountNamespace``'s `nsenter`.
    /// `port` 0 lets the node pick a free one.
    init(dataDirectory: String, port requested: Int = 0, arguments: [String] = [], launcher: [String] = []) throws {
        logPath = dataDirectory + ".log"
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        let command = launcher + [Binaries.path("registryd"), "--data-dir", dataDirectory, "--port", "\(requested)", "--host", "127.0.0.1"]
            + arguments
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let logHandle = FileHandle(forWritingAtPath: logPath)
        logHandle?.seekToEndOfFile()
        process.standardError = logHandle
        // A restart appends to the same log: only what this run writes counts.
        let earlier = self.log.utf8.count
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline, process.isRunning {
            if let port = listeningPort(in: String(decoding: self.log.utf8.dropFirst(earlier), as: UTF8.self)) {
                self.port = port
                return
            }
            usleep(20_000)
        }
        if process.isRunning {
            end(process, grace: 30)
            throw DaemonError.didNotStart(log)
        }
        process.waitUntilExit()
        throw DaemonError.exited(status: process.terminationStatus, log: log)
    }

    enum DaemonError: Error {
        case didNotStart(String)
        case exited(status: Int32, log: String)
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The process's resident memory (VmRSS), nil once it has gone.
    var residentBytes: Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "")
        else { return nil }
        return kilobytes * 1024
    }
    var endpoint: String { "127.0.0.1:\(port)" }

    /// Sends `signal` and waits for the exit status; past 30 s, kills the node and what it
    /// forked (``end(_:signal:grace:)``).
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        end(process, signal: signal, grace: 30)
    }

    /// Waits (up to `timeout`) for the process to exit by itself; nil if it is still running.
    func waitForExit(timeout: TimeInterval) -> Int32? {
        guard IntegrationTests.waitForExit(of: process, timeout: timeout) else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { stop(signal: SIGKILL) }
    }
}

extension Result {
    /// The error, when this is a failure.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }

    /// Runs an async throwing body into a Result.
    init(catching body: () async throws(Failure) -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

/// A private mount namespace with a tmpfs over a directory, so a test can fill a disk (or make
/// one read-only) without touching the machine's. A sleeping shell keeps it alive; commands run
/// inside it through ``prefix`` (`nsenter`). Needs root, as CI has.
final class MountNamespace {
    let directory: String
    private let holder = Process()
    private let pid: Int32

    /// `readOnly` mounts it read-only: even root cannot write there.
    init(tmpfsOver directory: String, bytes: Int, readOnly: Bool = false) throws {
        self.directory = directory
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        holder.arguments = [
            "--mount", "--fork", "--kill-child", "/bin/sh", "-c",
            "mount -t tmpfs -o \(readOnly ? "ro," : "")size=\(bytes) tmpfs \"$1\" && echo $$ && exec sleep 600", "sh", directory,
        ]
        let output = OutputFiles(for: holder)
        defer { output.remove() }
        try holder.run()
        // The sleeper's pid, once the tmpfs is mounted (at most 30 s).
        _ = output.waitForFirstLine(of: holder, timeout: 30)
        guard let pid = Int32(output.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            if holder.isRunning { end(holder, signal: SIGKILL, grace: 5) } else { holder.waitUntilExit() }
            throw MountError.notMounted(output.stderr)
        }
        self.pid = pid
    }

    enum MountError: Error {
        case notMounted(String)
    }

    /// Runs the command after it inside the namespace.
    var prefix: [String] { ["/usr/bin/nsenter", "--target", "\(pid)", "--mount", "--"] }

    /// Runs `command` to completion inside the namespace.
    func runInside(_ command: [String]) throws -> CommandResult {
        try run(prefix[0], Array(prefix.dropFirst()) + command)
    }

    /// Changes the tmpfs's size; its files stay.
    func resize(bytes: Int) throws -> CommandResult {
        try runInside(["/usr/bin/mount", "-o", "remount,size=\(bytes)", directory])
    }

    deinit {
        // unshare --fork ignores SIGTERM while it waits; ending the sleeper ends it.
        kill(pid, SIGKILL)
        if !waitForExit(of: holder, timeout: 10) { end(holder, signal: SIGKILL, grace: 5) }
        holder.waitUntilExit()
    }
}

