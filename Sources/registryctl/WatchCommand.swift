import ArgumentParser
import Foundation
import RegistryClient
import RegistryCore
import RegistryWire

/// `registryctl watch`: the change feed, one line per event.
struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Stream the registry's changes: devices created, merged and forgotten, accounts bound and unbound.",
        discussion: """
            Prints one line per event, in the node's order, and the cursor after each batch. With -o json each \
            line is one JSON object: an event, or {"cursor": "…"} after a batch. Keep the last cursor and pass it \
            to --from to go on where you stopped, on any node of the cluster; --also names more nodes to go on \
            from when this one goes away. Delivery is at least once: an event may come again after a reconnect \
            (its "operation" names the operation it came of). A cursor follows the filters it was made with: \
            resume with the same --vendor and --kind. Exits 5 when the cursor is too old for the node (read the \
            state again, and watch from now), and 0 after --count events (printing a cursor only when it covers \
            no event left unprinted). --timeout bounds each connection attempt, not the stream; a node that sends \
            nothing for --idle-timeout (it sends progress every --watch-progress, a second by default; one set \
            above a third of it is given three of its intervals) is given up for the next one.
            """)

    @OptionGroup var global: GlobalOptions
    @Option(name: .customLong("vendor"), help: "Only this vendor's events (repeat for more). [default: every vendor the token reaches]")
    var vendors: [String] = []
    @Option(name: .customLong("kind"), help: "Only this kind: created, merged, bound, unbound, forgotten, clone_suspected or split (repeat for more). [default: all]")
    var kinds: [String] = []
    @Option(name: .customLong("from"), help: "Resume after this cursor, as an earlier watch printed it. [default: from now]")
    var from: String?
    @Option(name: .customLong("also"), help: "More nodes to go on from, host:port,...")
    var also: String?
    @Option(help: "Stop after this many events.")
    var count: Int?
    @Flag(name: .customLong("progress"), help: "Print the cursor after batches without events too.")
    var progress = false
    @Option(name: .customLong("idle-timeout"), help: "Seconds a node may send nothing, not even progress, before the watch goes on from another. [default: 30]")
    var idleTimeout: Double?

    func validate() throws {
        for kind in kinds where FeedEventKind(name: kind) == nil {
            throw ValidationError("unknown kind \(kind.debugDescription): expected \(FeedEventKind.allCases.map(\.description).joined(separator: ", "))")
        }
        if let from {
            do {
                _ = try WatchCursor(text: from)
            } catch {
                throw ValidationError("--from: \(error)")
            }
        }
        if let count, count < 1 { throw ValidationError("--count must be at least 1") }
        if let idleTimeout, !(0.01...86_400).contains(idleTimeout) {
            throw ValidationError("--idle-timeout must be 0.01...86400 seconds")
        }
    }

    /// Failed attempts on each endpoint, in a row, before the watch gives up (exit 69): with the
    /// watch's delays (0.2 s doubling to 2 s a round), about 9 s for one endpoint, enough for a
    /// node's restart.
    static let attemptsPerEndpoint = 8

    func run() async throws {
        let first = global.endpoint ?? ProcessInfo.processInfo.environment["REGISTRY_ENDPOINT"] ?? "127.0.0.1:7400"
        let endpoints: [Endpoint]
        do {
            endpoints = try ([first] + (also?.split(separator: ",").map(String.init) ?? [])).map { text throws(RegistryClientError) in
                try Endpoint(parsing: text)
            }
        } catch {
            exitWith(error)
        }
        let token = try global.token()
        let watch = RegistryWatch(
            endpoints: endpoints, vendors: vendors, kinds: kinds.compactMap(FeedEventKind.init(name:)),
            from: try from.map { try WatchCursor(text: $0) }, clientName: "registryctl", token: token, tls: try global.tls(),
            maxAttempts: endpoints.count * Self.attemptsPerEndpoint, connectTimeout: .milliseconds(Int64((try global.seconds()) * 1_000)),
            idleTimeout: .milliseconds(Int64((idleTimeout ?? 30) * 1_000)))
        let json = global.format == .json
        var printed = 0
        do {
            for try await update in watch {
                for (index, event) in update.events.enumerated() {
                    print(json ? WatchLine.json(event) : WatchLine.text(event))
                    printed += 1
                    if let count, printed >= count {
                        // The cursor only when it covers no event left unprinted.
                        if index == update.events.count - 1 {
                            print(json ? WatchLine.json(cursor: update.cursor) : "cursor \(update.cursor.text)")
                        }
                        fflush(nil)
                        return
                    }
                }
                if !update.events.isEmpty || progress {
                    print(json ? WatchLine.json(cursor: update.cursor) : "cursor \(update.cursor.text)")
                }
                fflush(nil)
            }
        } catch let error as RegistryClientError {
            if case .server(let wire) = error, wire.code == .cursorExpired {
                FileHandle.standardError.write(Data("registryctl: \(error)\n".utf8))
                Foundation.exit(ExitStatus.cursorExpired)
            }
            exitWith(error)
        }
    }
}

/// How `registryctl watch` prints an event.
enum WatchLine {
    static func kindName(_ raw: Int32) -> String {
        FeedEventKind(rawValue: raw).map(\.description) ?? "kind-\(raw)"
    }

    static func text(_ event: WatchEventMessage) -> String {
        var line = "\(Output.time(event.millis))  \(kindName(event.kind).padding(toLength: 15, withPad: " ", startingAt: 0))  \(event.vendor)  \(event.deviceID)"
        if !event.otherDeviceIDs.isEmpty { line += "  " + event.otherDeviceIDs.joined(separator: ",") }
        if !event.accountID.isEmpty { line += "  account \(event.accountID)" }
        if event.kind == FeedEventKind.unbound.rawValue { line += "  (\(event.unbindReason))" }
        return line + "  op \(event.operation.origin)/\(event.operation.epoch):\(event.operation.sequence)"
    }

    /// One JSON object, keys sorted.
    static func json(_ event: WatchEventMessage) -> String {
        var object: [String: Any] = [
            "kind": kindName(event.kind), "vendor": event.vendor, "device_id": event.deviceID,
            "operation": "\(event.operation.origin)/\(event.operation.epoch):\(event.operation.sequence)", "time": Output.time(event.millis),
        ]
        if !event.otherDeviceIDs.isEmpty { object["other_device_ids"] = event.otherDeviceIDs }
        if !event.accountID.isEmpty {
            object["account_key"] = event.accountID
            object["bound_device_ids"] = event.boundDeviceIDs
        }
        if event.kind == FeedEventKind.unbound.rawValue { object["reason"] = "\(event.unbindReason)" }
        return encode(object)
    }

    static func json(cursor: WatchCursor) -> String {
        encode(["cursor": cursor.text])
    }

    private static func encode(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
