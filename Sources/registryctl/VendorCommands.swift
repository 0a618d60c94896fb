import ArgumentParser
import RegistryClient
import RegistryCore
import RegistryWire

/// `registryctl vendor`: the cluster's vendor rules.
struct VendorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vendor",
        abstract: "List and change the cluster's vendor rules.",
        discussion: """
            A vendor rule names the bundle-ID prefixes that form one vendor (com.acme and \
            net.acmecdn, say) and its binding policy. The rules are the cluster's: a change takes \
            effect on every node without a restart, once it has replicated. A node's config file \
            seeds them at a new cluster's first start only (docs/identity.md). A change that would \
            file devices already registered under another vendor is refused with their count, \
            unless you ask for the move with --move: then the vendors whose devices it files \
            elsewhere join the vendor they go to, for good, on every node. A move takes whole \
            vendors into one vendor. The node first catches up with every other member, so that \
            it counts the devices registered anywhere; a change is refused (UNAVAILABLE) while a \
            member is not reached.
            """,
        subcommands: [List.self, Add.self, Change.self, Remove.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the vendor rules in force.")

        @OptionGroup var global: GlobalOptions

        func run() async throws {
            await global.withClient({ (client) async throws(RegistryClientError) in try await client.vendors() }, print: VendorRulesView.init)
        }
    }

    /// Whether a change may move devices between vendors.
    struct Move: ParsableArguments {
        @Flag(
            help: """
                Move the devices the change files under another vendor: their vendors join the one \
                they go to, for good (refused when a vendor's devices would split, or go into more \
                than one vendor).
                """)
        var move = false
    }

    /// A rule's fields, as `add` and `set` take them.
    struct Rule: ParsableArguments {
        @Option(help: "The vendor's name: letters, digits and '-', or one of its prefixes. [default: the first prefix]")
        var name: String?
        @Option(name: .customLong("prefix"), help: "A bundle-ID prefix of at least two labels, e.g. com.acme; repeat for more.")
        var prefixes: [String] = []
        @Option(name: .customLong("max-devices"), help: "The most devices per account (1...1000).")
        var maxDevices: UInt32 = 1
        @Option(name: .customLong("active-within-days"), help: "Count only devices active within this many days (1...3650). [default: all count]")
        var activeWithinDays: UInt32?
        @Option(name: .customLong("past-limit"), help: "What a bind past the limit does: reject or replace.")
        var pastLimit: String = "reject"
        @Option(
            help: "What a keychain UUID seen with two IDFVs in use does: flag (mark the device), split (give the later IDFV a device of its own) or off.")
        var clones: String = "flag"
        @Option(name: .customLong("clone-window-days"), help: "The earlier IDFV counts as in use again within this many days after the later one appeared (1...3650).")
        var cloneWindowDays: UInt32 = 7

        func validate() throws {
            guard ClonePolicy.Action(rawValue: clones) != nil else { throw ValidationError("--clones is flag, split or off, not \(clones)") }
            guard (1...UInt32(ClonePolicy.maxWindowDays)).contains(cloneWindowDays) else {
                throw ValidationError("--clone-window-days must be 1 to \(ClonePolicy.maxWindowDays)")
            }
            guard !prefixes.isEmpty else { throw ValidationError("give at least one --prefix") }
            guard BindingPolicy.PastLimit(rawValue: pastLimit) != nil else { throw ValidationError("--past-limit is reject or replace, not \(pastLimit)") }
            guard maxDevices > 0 else { throw ValidationError("--max-devices must be 1 to 1000") }
        }

        var message: VendorRuleMessage {
            VendorRuleMessage(
                name: name ?? "", prefixes: prefixes, maxDevices: maxDevices, activeWithinDays: activeWithinDays ?? 0,
                pastLimit: BindingPolicy.PastLimit(rawValue: pastLimit) ?? .reject,
                cloneAction: ((try? ClonePolicy(action: ClonePolicy.Action(rawValue: clones) ?? .flag)) ?? .default).wireAction,
                cloneWindowDays: cloneWindowDays)
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a vendor rule.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var rule: Rule
        @OptionGroup var move: Move

        func run() async throws {
            let request = VendorRequestMessage.add(rule.message, move: move.move)
            await global.withClient({ (client) async throws(RegistryClientError) in try await client.vendors(request) }, print: VendorRulesView.init)
        }
    }

    struct Change: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "Replace a vendor's rule (every field: give them all).")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var rule: Rule
        @OptionGroup var move: Move

        func validate() throws {
            guard rule.name != nil else { throw ValidationError("give the vendor's --name") }
        }

        func run() async throws {
            let request = VendorRequestMessage.set(rule.message, move: move.move)
            await global.withClient({ (client) async throws(RegistryClientError) in try await client.vendors(request) }, print: VendorRulesView.init)
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Remove a vendor's rule: its bundles fall back to the default vendor.",
            discussion: "Refused while devices are registered under its bundles, unless --move joins the vendor to the one they fall back to (all of them to one vendor).")

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The vendor's name.") var name: String
        @OptionGroup var move: Move

        func run() async throws {
            let request = VendorRequestMessage.remove(name: name, move: move.move)
            await global.withClient({ (client) async throws(RegistryClientError) in try await client.vendors(request) }, print: VendorRulesView.init)
        }
    }
}

/// The vendor rules as registryctl prints them.
struct VendorRulesView: Printable {
    struct Rule: Encodable {
        let name: String
        let prefixes: [String]
        let maxDevices: UInt32
        let activeWithinDays: UInt32?
        let pastLimit: String
        let clones: String
        let cloneWindowDays: UInt32
    }

    struct Alias: Encodable {
        let name: String
        let filedUnder: String
    }

    let defaultScope: String
    let rules: [Rule]
    let aliases: [Alias]

    init(_ message: VendorRulesMessage) {
        defaultScope = message.defaultScope
        aliases = message.aliases.map { Alias(name: $0.name, filedUnder: $0.filedUnder) }
        rules = message.rules.map {
            Rule(
                name: $0.name, prefixes: $0.prefixes, maxDevices: $0.maxDevices, activeWithinDays: $0.activeWithinDays == 0 ? nil : $0.activeWithinDays,
                pastLimit: $0.pastLimit.rawValue,
                clones: ((try? ClonePolicy.reading(action: $0.cloneAction, windowDays: 1))?.action ?? .flag).rawValue,
                cloneWindowDays: $0.cloneWindowDays == 0 ? UInt32(ClonePolicy.defaultWindowDays) : $0.cloneWindowDays)
        }
    }

    var rows: [(String, String)] { [("vendors", "\(rules.count)"), ("default vendor", defaultScope)] }

    var trailer: [String] {
        rules.flatMap { rule in
            let window = rule.activeWithinDays.map { ", active within \($0) days" } ?? ""
            return ["", "\(rule.name): \(rule.prefixes.joined(separator: ", "))", "  \(rule.maxDevices) device\(rule.maxDevices == 1 ? "" : "s") per account\(window), \(rule.pastLimit) past it",
                "  clones: \(rule.clones)\(rule.clones == "off" ? "" : " within \(rule.cloneWindowDays) days")"]
        } + (aliases.isEmpty ? [] : ["", "moved vendors:"] + aliases.map { "  \($0.name) is filed under \($0.filedUnder)" })
    }
}
