import Foundation
import RegistryTestSupport
import Testing

import Platform

/// `bench/floor.c`, the bare server and client that `make bench` uses to show what this machine
/// allows: built with the system C compiler and run for a second, so that the bench cannot find
/// it broken.
@Suite("bench floor instrument")
struct FloorInstrumentTests {
    /// Compiles `bench/floor.c` into `directory` (with `cc`, else the Swift toolchain's `clang`, as
    /// `bench/run.sh` does) and returns the executable's path.
    private static func build(into directory: TemporaryDirectory) throws -> String {
        let source = Binaries.repository.appendingPathComponent("bench/floor.c").path
        let executable = directory.path + "/floor"
        let compiled = try run(
            "/bin/sh", ["-c", "\"$(command -v cc || command -v clang)\" -O2 -Wall -Wextra -Werror -pthread -o \"$0\" \"$1\"", executable, source])
        try #require(compiled.status == 0, "cc failed: \(compiled.stderr)")
        return executable
    }

    @Test(arguments: ["inline", "pipelined"])
    func theFloorAnswersEveryFrameAndJournalsIt(mode: String) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let floor = try Self.build(into: directory)
        let logPath = directory.path + "/server.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: floor)
        server.arguments = ["server", "0", directory.path + "/journal", "1000", mode]
        server.standardError = FileHandle(forWritingAtPath: logPath)
        server.standardOutput = FileHandle.nullDevice
        try server.run()
        defer {
            if server.isRunning { kill(server.processIdentifier, SIGKILL) }
            server.waitUntilExit()
        }
        var port: Int?
        let deadline = Date().addingTimeInterval(30)
        while port == nil, Date() < deadline, server.isRunning {
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            port = listeningPort(in: log)
            if port != nil { #expect(log.contains("(\(mode) commits)"), "\(log)") }
            usleep(20_000)
        }
        let listening = try #require(port, "the floor server did not start")

        // 200 frames a second for one measured second after a one-second warm-up, over 2 connections.
        let client = try run(floor, ["client", String(listening), "200", "1", "1", "2", "1000", "600", "1500"], timeout: 30)
        #expect(client.status == 0, "\(client.stderr)")
        #expect(client.stdout.contains("requests     200 measured over 1s"), "\(client.stdout)")
        let summary = try #require(client.stdout.split(separator: "\n").first { $0.hasPrefix("floor ") })
        let fields = Dictionary(uniqueKeysWithValues: summary.split(separator: " ").dropFirst().map { field in
            let pair = field.split(separator: "=")
            return (String(pair[0]), Double(pair[1]) ?? -1)
        })
        let p50 = try #require(fields["p50_ms"])
        let p99 = try #require(fields["p99_ms"])
        #expect(p50 > 0 && p50 <= p99, "\(summary)")
        #expect(fields["achieved"] == 200)
        // The journal was preallocated (64 MiB) and written over, not appended to.
        let size = try FileManager.default.attributesOfItem(atPath: directory.path + "/journal")[.size] as? Int
        #expect(size == 64 << 20)
        #expect(server.isRunning, "the server exited: \((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "")")
        // It stops on SIGTERM even though this test process blocks that signal for its children,
        // and prints its commits' times: at least one commit, at most one per frame sent.
        server.terminate()
        let stopBy = Date().addingTimeInterval(10)
        while server.isRunning, Date() < stopBy { usleep(10_000) }
        #expect(!server.isRunning, "SIGTERM did not stop the floor server")
        if !server.isRunning { #expect(server.terminationStatus == 0) }
        let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        let commitLine = try #require(log.split(separator: "\n").first { $0.hasPrefix("floor: commits ") }, "\(log)")
        let commits = try #require(Int(commitLine.split(separator: " ")[2]))
        #expect(commits >= 1 && commits <= 400, "\(commitLine)")
        #expect(commitLine.contains(" p99_us="), "\(commitLine)")
    }

    @Test func theFloorRefusesBadArguments() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let floor = try Self.build(into: directory)
        let badRate = try run(floor, ["client", "1", "fast", "1", "1", "1", "100", "100", "100"])
        #expect(badRate.status == 64)
        #expect(badRate.stderr.contains("RATE must be a whole number, not 'fast'"))
        let tooFewBytes = try run(floor, ["client", "1", "100", "1", "1", "1", "10", "100", "100"])
        #expect(tooFewBytes.status == 64)
        #expect(tooFewBytes.stderr.contains("REQUEST_BYTES at least 24"))
        let badMode = try run(floor, ["server", "0", directory.path + "/journal", "0", "async"])
        #expect(badMode.status == 64)
        #expect(badMode.stderr.contains("the mode must be inline or pipelined, not 'async'"))
        let unknown = try run(floor, ["serve"])
        #expect(unknown.status == 64)
        #expect(unknown.stderr.contains("usage: floor server"))
    }
}
