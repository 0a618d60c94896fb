import ArgumentParser
import RegistryClient
import RegistryWire

/// `registryctl account`: accounts bound to devices.
struct Account: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Bind accounts to devices, unbind them, and show them.",
        discussion: """
            An account is the vendor backend's own name for a user (1 to 256 bytes, no NUL); the \
            registry keeps only its keyed hash, the account key. Each vendor's binding policy says \
            how many devices an account may have and what a bind past that does (docs/identity.md).
            """,
        subcommands: [Show.self, Bind.self, Unbind.self])

    /// The vendor and the account or device a command names.
    struct Scope: ParsableArguments {
        @Option(help: "A bundle ID of the vendor, e.g. com.vendor.app1.") var bundle: String?
        @Option(help: "A vendor scope, e.g. com.vendor or a configured vendor name.") var vendor: String?

        func validate() throws {
            guard (bundle == nil) != (vendor == nil) else { throw ValidationError("give exactly one of --bundle or --vendor") }
        }

        var scope: LookupRequest.Scope { bundle.map { .bundle($0) } ?? .vendor(vendor ?? "") }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show an account's devices, or a device's accounts.",
            discussion: "Give one of --account, --account-key or --device. Exits 3 when there is nothing to show.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var scope: Scope
        @Option(help: "The account's name, as the vendor's backend gives it.") var account: String?
        @Option(name: .customLong("account-key"), help: "The account's key, as an earlier answer printed it.") var accountKey: String?
        @Option(help: "A device ID: every account whose binds named it or a device merged with it.") var device: String?

        func validate() throws {
            guard [account, accountKey, device].compactMap({ $0 }).count == 1 else {
                throw ValidationError("give exactly one of --account, --account-key or --device")
            }
        }

        func run() async throws {
            let subject: AccountQuery.Subject =
                if let account { .account(account) } else if let accountKey { .accountKey(accountKey) } else { .device(device ?? "") }
            await global.withClient(
                { (client) async throws(RegistryClientError) in
                    let accounts = try await client.accounts(AccountQuery(scope: scope.scope, subject: subject))
                    guard !accounts.isEmpty else { throw .server(WireError(code: .notFound, message: "no binding names it")) }
                    return accounts
                }, print: AccountsView.init)
        }
    }

    /// The account, the device and the write concern of a bind or an unbind.
    struct Change: ParsableArguments {
        @Option(help: "The account's name, as the vendor's backend gives it.") var account: String
        @Option(help: "The device ID.") var device: String
        @Option(name: .customLong("ack-replicas"), help: "Peers that must hold the change before the answer. [default: the node's]")
        var ackReplicas: UInt32?

        /// Sends the bind (or, with `unbind`, the unbind) and prints its answer.
        func send(unbind: Bool, scope: LookupRequest.Scope, global: GlobalOptions) async {
            await global.withClient(ackReplicas: ackReplicas,
                { (client) async throws(RegistryClientError) in
                    unbind
                        ? try await client.unbind(account: account, deviceID: device, scope: scope)
                        : try await client.bind(account: account, deviceID: device, scope: scope)
                }, print: BindView.init)
        }
    }

    struct Bind: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Bind an account to a device.",
            discussion: """
                Prints the outcome (bound, already-bound, or rejected past the vendor's limit) and the \
                account's devices after it. A rejected bind changes nothing and exits 0: unbind a device first.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var scope: Scope
        @OptionGroup var change: Change

        func run() async throws { await change.send(unbind: false, scope: scope.scope, global: global) }
    }

    struct Unbind: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unbind an account from a device.",
            discussion: "Unbinding a device that is not bound changes nothing and prints not-bound.")

        @OptionGroup var global: GlobalOptions
        @OptionGroup var scope: Scope
        @OptionGroup var change: Change

        func run() async throws { await change.send(unbind: true, scope: scope.scope, global: global) }
    }
}

/// One account as registryctl prints it.
struct AccountView: Encodable {
    let vendor: String
    let accountKey: String
    let bound: [Bound]
    let unbound: [Unbound]

    struct Bound: Encodable {
        let deviceId: String
        let since: String
        let lastActive: String
    }

    struct Unbound: Encodable {
        let deviceId: String
        let reason: String
        let replacedBy: String?
        let at: String
    }

    init(_ account: AccountBindingsMessage) {
        vendor = account.vendor
        accountKey = account.accountKey
        bound = account.bound.map {
            Bound(deviceId: $0.deviceID, since: Output.time($0.sinceMillis), lastActive: Output.time($0.lastActiveMillis))
        }
        unbound = account.unbound.map {
            Unbound(deviceId: $0.deviceID, reason: $0.reason.description, replacedBy: $0.replacedBy.isEmpty ? nil : $0.replacedBy, at: Output.time($0.atMillis))
        }
    }

    var lines: [String] {
        var lines = ["account \(accountKey) in \(vendor)"]
        lines += bound.map { "  bound    \($0.deviceId)  since \($0.since), active \($0.lastActive)" }
        lines += unbound.map { "  \($0.reason.padding(toLength: 8, withPad: " ", startingAt: 0)) \($0.deviceId)  at \($0.at)" + ($0.replacedBy.map { " by \($0)" } ?? "") }
        return lines
    }
}

/// `registryctl account show`.
struct AccountsView: Printable {
    let accounts: [AccountView]

    init(_ accounts: [AccountBindingsMessage]) {
        self.accounts = accounts.map(AccountView.init)
    }

    var rows: [(String, String)] { [("accounts", "\(accounts.count)")] }
    var trailer: [String] { accounts.flatMap { [""] + $0.lines } }
}

/// `registryctl account bind` and `unbind`.
struct BindView: Printable {
    let outcome: String
    let replacedDeviceId: String?
    let account: AccountView?

    init(_ result: BindResultMessage) {
        outcome = result.outcome.description
        replacedDeviceId = result.replacedDeviceID.isEmpty ? nil : result.replacedDeviceID
        account = result.account.map(AccountView.init)
    }

    var rows: [(String, String)] {
        [("outcome", outcome)] + (replacedDeviceId.map { [("replaced", $0)] } ?? [])
    }

    var trailer: [String] { account.map { [""] + $0.lines } ?? [] }
}
