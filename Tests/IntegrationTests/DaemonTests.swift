import Foundation
import RegistryClient
import RegistryCore
import RegistryServer
import RegistryWire
import Synchronization
import RegistryTestSupport
import Testing
import Platform

/// `registryd` as a process: crash durability, graceful stop, and refusal of bad start-up input.
@Suite(.serialized, .timeLimit(.minutes(5))) struct DaemonTests {
    @Test func killNineLosesNoAcknowledgedRegistration() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path
        var node = try DaemonProcess(dataDirectory: directory, arguments: ["--node-id", "node-crash"])
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "crash-test")

        // Keep registering, pipelined, and kill -9 the node in the middle of it.
        let acknowledged = ManagedAcknowledgements()
        let writer = Task {
            await withTaskGroup(of: Void.self) { group in
                for lane in 0..<8 {
                    group.addTask {
                        for index in 0..<2_000 {
                            let idfv = UUID128(high: UInt64(lane + 1) << 32 | UInt64(index + 1), low: 7).text
                            let request = RegisterRequest(bundleID: "com.crash.app\(index % 3)", idfv: idfv)
                            guard let result = try? await client.register(request) else { return }
                            acknowledged.append(idfv: idfv, deviceID: result.deviceID)
                        }
                    }
                }
            }
        }
        while acknowledged.count < 300 { try await Task.sleep(for: .milliseconds(5)) }
        #expect(node.stop(signal: SIGKILL) == SIGKILL)
        await writer.value
        await client.close()
        let acked = acknowledged.all
        #expect(acked.count >= 300)

        node = try DaemonProcess(dataDirectory: directory)
        defer { node.stop() }
        #expect(node.log.contains("node=node-crash"), "the data directory keeps its node ID")
        let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "verify")
        var lost = 0
        for (idfv, deviceID) in acked {
            let record = try? await reader.lookup(
                LookupRequest(scope: .vendor("com.crash"), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
            if record?.deviceID != deviceID { lost += 1 }
        }
        #expect(lost == 0, "\(lost) of \(acked.count) acknowledged registrations were lost")
        let stats = try await reader.stats()
        #expect(stats.logOperations >= UInt64(acked.count))
        // New writes continue the sequence, never reuse it.
        _ = try await reader.register(RegisterRequest(bundleID: "com.crash.app0", idfv: UUID().uuidString))
        #expect(try await reader.stats().logSequence == stats.logSequence + 1)
        await reader.close()
    }

    @Test func sigtermStopsGracefullyAndKeepsData() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path
        let node = try DaemonProcess(dataDirectory: directory)
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "t")
        let result = try await client.register(RegisterRequest(bundleID: "com.v.a", keychain: UUID().uuidString))
        #expect(node.stop(signal: SIGTERM) == 0)
        #expect(node.log.contains("storage closed"))
        await client.close()

        let again = try DaemonProcess(dataDirectory: directory)
        let reader = try await RegistryClient.connect(to: Endpoint(parsing: again.endpoint), clientName: "t")
        #expect(try await reader.resolve(deviceID: result.deviceID).deviceID == result.deviceID)
        await reader.close()
        #expect(again.stop(signal: SIGINT) == 0)
    }

    @Test func badStartupInputExitsWithATypedStatusAndMessage() throws {
        let registryd = Binaries.path("registryd")
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path

        let missing = try run(registryd, ["--data-dir", directory + "/absent", "--port", "0"])
        #expect(missing.status == 74 && missing.stderr.contains("does not exist"))

        let file = directory + "/file"
        _ = FileManager.default.createFile(atPath: file, contents: Data())
        let notDirectory = try run(registryd, ["--data-dir", file, "--port", "0"])
        #expect(notDirectory.status == 74 && notDirectory.stderr.contains("not a directory"))

        let config = directory + "/bad.json"
        try Data("{\"port\": 80,".utf8).write(to: URL(fileURLWithPath: config))
        let corrupt = try run(registryd, ["--config", config, "--data-dir", directory])
        #expect(corrupt.status == 78 && corrupt.stderr.contains("not valid JSON"))
        let corruptFromEnvironment = try run(registryd, ["--data-dir", directory], environment: ["REGISTRY_CONFIG": config])
        #expect(corruptFromEnvironment.status == 78)

        let unknownFlag = try run(registryd, ["--frobnicate"])
        #expect(unknownFlag.status == 64 && unknownFlag.stderr.contains("Unknown option"))
        let badNodeID = try run(registryd, ["--node-id", "Bad Name", "--data-dir", directory])
        #expect(badNodeID.status == 78 && badNodeID.stderr.contains("node ID"))
        let badPort = try run(registryd, ["--data-dir", directory], environment: ["REGISTRY_PORT": "http"])
        #expect(badPort.status == 78 && badPort.stderr.contains("REGISTRY_PORT"))
        let badThreads = try run(registryd, ["--data-dir", directory, "--event-loop-threads", "0"])
        #expect(badThreads.status == 78 && badThreads.stderr.contains("--event-loop-threads: event-loop threads 0 is not 1...256"), "\(badThreads.stderr)")
        let badThreadsFromEnvironment = try run(
            registryd, ["--data-dir", directory], environment: ["REGISTRY_EVENT_LOOP_THREADS": "many"])
        #expect(badThreadsFromEnvironment.status == 78 && badThreadsFromEnvironment.stderr.contains("REGISTRY_EVENT_LOOP_THREADS: event-loop threads \"many\" is not a whole number"), "\(badThreadsFromEnvironment.stderr)")

        let badExpectedDevices = try run(registryd, ["--data-dir", directory, "--expected-devices", "2000000000"])
        #expect(
            badExpectedDevices.status == 78
                && badExpectedDevices.stderr.contains("--expected-devices: expected devices 2000000000 is not 0...1073741824"))
        let badExpectedDevicesFromEnvironment = try run(
            registryd, ["--data-dir", directory], environment: ["REGISTRY_EXPECTED_DEVICES": "lots"])
        #expect(
            badExpectedDevicesFromEnvironment.status == 78
                && badExpectedDevicesFromEnvironment.stderr.contains("REGISTRY_EXPECTED_DEVICES: expected devices \"lots\" is not a whole number"))

        let badDelay = try run(registryd, ["--data-dir", directory, "--commit-delay-us", "20000"])
        #expect(
            badDelay.status == 78 && badDelay.stderr.contains("--commit-delay-us: commit delay 20000 is not 0...10000"),
            "\(badDelay.stderr)")
        let badDelayFromEnvironment = try run(registryd, ["--data-dir", directory], environment: ["REGISTRY_COMMIT_DELAY_US": "soon"])
        #expect(
            badDelayFromEnvironment.status == 78 && badDelayFromEnvironment.stderr.contains("REGISTRY_COMMIT_DELAY_US: commit delay \"soon\" is not a whole number"),
            "\(badDelayFromEnvironment.stderr)")

        let badSnapshots = try run(registryd, ["--data-dir", directory, "--snapshot-every-operations", "20000000000"])
        #expect(
            badSnapshots.status == 78 && badSnapshots.stderr.contains("--snapshot-every-operations: snapshot interval 20000000000 is not 0...10000000000"),
            "\(badSnapshots.stderr)")
        let badPeriod = try run(registryd, ["--data-dir", directory], environment: ["REGISTRY_SNAPSHOT_EVERY_SECONDS": "hourly"])
        #expect(
            badPeriod.status == 78 && badPeriod.stderr.contains("REGISTRY_SNAPSHOT_EVERY_SECONDS: snapshot period \"hourly\" is not a whole number"),
            "\(badPeriod.stderr)")

        // A data directory of an earlier version (an SQLite log) is refused with what to do.
        let older = directory + "/older"
        try FileManager.default.createDirectory(atPath: older, withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: older + "/registry.sqlite3", contents: Data())
        let refusedOlder = try run(registryd, ["--data-dir", older, "--port", "0"])
        #expect(refusedOlder.status == 74 && refusedOlder.stderr.contains("written by an earlier version"), "\(refusedOlder.stderr)")

        let help = try run(registryd, ["--help"])
        #expect(help.status == 0 && help.stdout.contains("Exit status"))
        // Every setting of the table has its flag and its environment variable in the help.
        for setting in NodeSetting.all {
            // A flag without a value is followed by its help, on the same line or the next.
            let shown = setting.fileType == .boolean ? ["--\(setting.flag) ", "--\(setting.flag)\n"] : ["--\(setting.flag) <"]
            #expect(shown.contains { help.stdout.contains($0) }, "--help lacks --\(setting.flag)")
            #expect(help.stdout.contains(setting.environment ?? "--"), "--help lacks \(setting.environment ?? "")")
        }

        // A misspelled config-file key is an error naming the key and the one it likely meant.
        try Data("{\"comitDelayMicros\": 100}".utf8).write(to: URL(fileURLWithPath: config))
        let misspelled = try run(registryd, ["--config", config, "--data-dir", directory])
        #expect(misspelled.status == 78 && misspelled.stderr.contains("unknown key \"comitDelayMicros\"; did you mean \"commitDelayMicros\"?"), "\(misspelled.stderr)")

        // Two nodes on one data directory: the second is refused.
        let first = try DaemonProcess(dataDirectory: directory)
        defer { first.stop() }
        let second = try run(registryd, ["--data-dir", directory, "--port", "0"])
        #expect(second.status == 74 && second.stderr.contains("in use"))
    }

    @Test func aReadOnlyDataDirectoryIsRefused() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let disk = try MountNamespace(tmpfsOver: temp.path, bytes: 1 << 20, readOnly: true)
        let result = try disk.runInside([Binaries.path("registryd"), "--data-dir", temp.path, "--port", "0"])
        #expect(result.status == 74, "\(result.stderr)")
        #expect(result.stderr.contains("is not usable") && result.stderr.contains("Read-only"), "\(result.stderr)")
    }

    /// A disk that fills while serving: the node refuses retryably, keeps everything it
    /// acknowledged, and stops (74); given room, it starts with all of it.
    @Test func aFullDiskRefusesRetryablyKeepsWhatWasAcknowledgedAndStopsTheNode() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        // Room for node.meta, the journal's first step of zeros (CommitJournal.fillStep, 1 MiB)
        // and a few thousand registrations more.
        let (directory, disk) = try smallDisk(in: temp, bytes: 2 << 20)
        let node = try DaemonProcess(dataDirectory: directory, launcher: disk.prefix)
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "disk-full")
        var acknowledged = [(String, String)]()
        var refusal: RegistryClientError?
        for index in 0..<100_000 {
            let idfv = UUID128(high: UInt64(index + 1), low: 99).text
            do {
                let result = try await client.register(RegisterRequest(bundleID: "com.full.app", idfv: idfv))
                acknowledged.append((idfv, result.deviceID))
            } catch {
                refusal = error
                break
            }
        }
        guard case .server(let error) = refusal else {
            Issue.record("expected a server refusal, got \(String(describing: refusal))")
            return
        }
        #expect(error.code == .unavailable && error.retryable, "\(error)")
        #expect(acknowledged.count >= 10)
        // The node refuses everything from now on, then stops with the storage status.
        if case .server(let again)? = await Result(catching: { () async throws(RegistryClientError) in try await client.stats() }).failure {
            #expect(again.code == .unavailable)
        }
        #expect(node.waitForExit(timeout: 60) == 74, "\(node.log)")
        #expect(node.log.contains("the operation log failed"))
        await client.close()

        // Given room, the node starts again with everything it acknowledged.
        let resized = try disk.resize(bytes: 64 << 20)
        #expect(resized.status == 0, "\(resized.stderr)")
        let restarted = try DaemonProcess(dataDirectory: directory, launcher: disk.prefix)
        defer { restarted.stop() }
        let lost = try await lostRegistrations(acknowledged, on: restarted)
        #expect(lost == 0, "\(lost) of \(acknowledged.count) acknowledged registrations were lost")
    }

    /// A node killed with commits in its journal, restarted on a disk with no room: it either
    /// starts (it needs only a new, empty journal file) with every acknowledged registration, or
    /// refuses with the storage status and says why; once space is freed it starts with them all.
    @Test func aCrashedNodeRestartedOnAFullDiskLosesNothingAcknowledged() async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let (directory, disk) = try smallDisk(in: temp, bytes: 16 << 20)
        let node = try DaemonProcess(dataDirectory: directory, launcher: disk.prefix)
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "crash")
        let acknowledged = try await withThrowingTaskGroup(of: (String, String).self) { group in
            for index in 0..<200 {
                let idfv = UUID128(high: UInt64(index + 1), low: 7).text
                group.addTask { (idfv, try await client.register(RegisterRequest(bundleID: "com.full.app", idfv: idfv)).deviceID) }
            }
            return try await group.reduce(into: [(String, String)]()) { $0.append($1) }
        }
        #expect(node.stop(signal: SIGKILL) == SIGKILL)
        await client.close()

        let filler = directory + "/filler"
        let fill = try disk.runInside(["/usr/bin/dd", "if=/dev/zero", "of=" + filler, "bs=64k"])
        #expect(fill.stderr.contains("No space left"), "\(fill.stderr)")
        do {
            let started = try DaemonProcess(dataDirectory: directory, launcher: disk.prefix)
            let lost = try await lostRegistrations(acknowledged, on: started)
            #expect(lost == 0, "\(lost) of \(acknowledged.count) acknowledged registrations were lost")
            started.stop(signal: SIGKILL)
        } catch DaemonProcess.DaemonError.exited(let status, let log) {
            #expect(status == 74 && log.contains("registryd: error:"), "\(log)")
        }

        let removed = try disk.runInside(["/usr/bin/rm", filler])
        #expect(removed.status == 0, "\(removed.stderr)")
        let restarted = try DaemonProcess(dataDirectory: directory, launcher: disk.prefix)
        defer { restarted.stop() }
        #expect(restarted.log.contains("recovered the node's state"), "\(restarted.log)")
        let lost = try await lostRegistrations(acknowledged, on: restarted)
        #expect(lost == 0, "\(lost) of \(acknowledged.count) acknowledged registrations were lost")
    }

    /// `kill -9` at seeded random moments of a pipelined load on a node that snapshots every
    /// 3,000 operations, so that kills land during commits and during snapshots' writes, round
    /// after round on one data directory: nothing acknowledged is lost, the version vector after
    /// each restart covers every acknowledged operation, and no sequence number is used twice.
    @Test(arguments: [11, 12] as [UInt64])
    func killNineAtRandomMomentsOverSeededRoundsLosesNothing(seed: UInt64) async throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        var random = SplitMix64(seed: seed)
        var acknowledged = [(String, String)]()
        var lastEpoch: UInt64 = 0
        for round in 0..<4 {
            let node = try DaemonProcess(dataDirectory: temp.path, arguments: ["--node-id", "node-kill", "--snapshot-every-operations", "3000"])
            let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "kill")
            // What survived the last kill: every start writes in a new epoch, and the earlier
            // epochs are held whole.
            let stats = try await client.stats()
            #expect(stats.logEpoch > lastEpoch && stats.logSequence == 0, "round \(round): epoch \(stats.logEpoch) after \(lastEpoch)")
            let held = stats.versionVector.reduce(UInt64(0)) { $0 + $1.sequence }
            #expect(held >= UInt64(acknowledged.count), "round \(round): vector \(stats.versionVector)")
            let lost = try await lostRegistrations(acknowledged, on: node, bundle: "com.kill.app")
            #expect(lost == 0, "round \(round): \(lost) of \(acknowledged.count) acknowledged registrations were lost")
            lastEpoch = stats.logEpoch
            let answered = ManagedAcknowledgements()
            let writer = Task {
                await withTaskGroup(of: Void.self) { group in
                    for lane in 0..<6 {
                        group.addTask {
                            for batch in 0..<2_000 {
                                // Unique per seed, round, lane, batch and item.
                                let idfvs = (0..<20).map { item in
                                    UUID128(high: seed << 48 | UInt64(round) << 40 | UInt64(lane) << 32 | UInt64(batch + 1), low: UInt64(item + 1)).text
                                }
                                guard let items = try? await client.registerBatch(idfvs.map { RegisterRequest(bundleID: "com.kill.app", idfv: $0) })
                                else { return }
                                for (idfv, item) in zip(idfvs, items) {
                                    if case .result(let result) = item { answered.append(idfv: idfv, deviceID: result.deviceID) }
                                }
                            }
                        }
                    }
                }
            }
            let wait = 200 + Int(random.next() % 1_500)
            try await Task.sleep(for: .milliseconds(wait))
            #expect(node.stop(signal: SIGKILL) == SIGKILL)
            await writer.value
            await client.close()
            acknowledged += answered.all
        }
        #expect(acknowledged.count > 100)
        let node = try DaemonProcess(dataDirectory: temp.path)
        defer { node.stop() }
        let lost = try await lostRegistrations(acknowledged, on: node, bundle: "com.kill.app")
        #expect(lost == 0, "\(lost) of \(acknowledged.count) acknowledged registrations were lost")
        let client = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "after")
        let before = try await client.stats().logSequence
        _ = try await client.register(RegisterRequest(bundleID: "com.kill.app", idfv: UUID().uuidString))
        #expect(try await client.stats().logSequence == before + 1, "new writes continue the sequence")
        await client.close()
    }

    /// A data directory inside `temp` on a tmpfs of `bytes`, seen only by processes the returned
    /// namespace runs.
    private func smallDisk(in temp: TemporaryDirectory, bytes: Int) throws -> (directory: String, disk: MountNamespace) {
        let directory = temp.path + "/small"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return (directory, try MountNamespace(tmpfsOver: directory, bytes: bytes))
    }

    /// How many of `acknowledged` (IDFV, device ID) pairs `node` does not answer as acknowledged,
    /// looked up 64 at a time over one pipelined connection.
    private func lostRegistrations(_ acknowledged: [(String, String)], on node: DaemonProcess, bundle: String = "com.full.app") async throws -> Int {
        let reader = try await RegistryClient.connect(to: Endpoint(parsing: node.endpoint), clientName: "verify")
        var lost = 0
        for start in stride(from: 0, to: acknowledged.count, by: 64) {
            lost += await withTaskGroup(of: Int.self) { group in
                for (idfv, deviceID) in acknowledged[start..<min(start + 64, acknowledged.count)] {
                    group.addTask {
                        let record = try? await reader.lookup(
                            LookupRequest(scope: .bundle(bundle), identifier: PresentedIdentifier(rawKind: 2, text: idfv)))
                        return record?.deviceID == deviceID ? 0 : 1
                    }
                }
                return await group.reduce(0, +)
            }
        }
        await reader.close()
        return lost
    }

    @Test func theWireContractHoldsForPythonProtobuf() throws {
        let temp = try TemporaryDirectory()
        defer { temp.remove() }
        let directory = temp.path
        let node = try DaemonProcess(dataDirectory: directory)
        defer { node.stop() }
        let script = Binaries.repository.appendingPathComponent("Tests/Interop/interop.py").path
        // Started without --cluster-secret, the node made a random one and keeps it here.
        let secret = try String(contentsOfFile: directory + "/cluster.secret", encoding: .utf8).trimmingCharacters(in: .newlines)
        let result = try run("/usr/bin/env", ["python3", script, node.endpoint, secret])
        #expect(result.status == 0, "interop failed (needs protoc and Python protobuf; `make test` installs both): \(result.stderr)")
        #expect(result.stdout.contains("\"ok\": true"))
    }
}

/// Acknowledged (identifier, device ID) pairs collected from many tasks.
final class ManagedAcknowledgements: Sendable {
    private let storage = Mutex<[(String, String)]>([])

    func append(idfv: String, deviceID: String) {
        storage.withLock { $0.append((idfv, deviceID)) }
    }

    var count: Int { storage.withLock { $0.count } }
    var all: [(String, String)] { storage.withLock { $0 } }
}

