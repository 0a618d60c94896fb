import RegistryCore
import RegistryWire

/// A change of the cluster's vendor rules after the checks that need no state: the rule to set,
/// or the name of the one to remove, and whether the operator asked for the move it makes.
struct VendorIntent: Sendable, Equatable {
    enum Action: Sendable, Equatable {
        /// `adding`: the vendor must not have a rule yet; otherwise it must.
        case set(VendorRule, adding: Bool)
        case remove(name: String)
    }

    let action: Action
    /// Whether devices may move between vendors (``VendorMove``).
    let move: Bool
    /// Why a move cannot be carried out now, when it cannot (``LinkedPeers/holdMovesBackFromOldMembers(_:members:own:)``):
    /// the change is refused with it only if it would move devices.
    var moveRefusal: WireError? = nil
}

extension NodeState {
    /// Validates a vendor request: a list is a read; a change (``Prepared/vendorChange(_:)``) is a
    /// write whose rule is checked here.
    static func prepareVendor(_ request: VendorRequestMessage) -> Prepared {
        do throws(IdentityError) {
            switch request {
            case .list: return .read(.vendor(.list))
            case .add(let spec, let move): return .vendorChange(.success(VendorIntent(action: .set(try spec.validated(), adding: true), move: move)))
            case .set(let spec, let move): return .vendorChange(.success(VendorIntent(action: .set(try spec.validated(), adding: false), move: move)))
            case .remove(let name, let move): return .vendorChange(.success(VendorIntent(action: .remove(name: name.lowercased()), move: move)))
            case .unspecified: return .refused(WireError(code: .invalidArgument, message: "a vendor request names no action"))
            }
        } catch {
            return .vendorChange(.failure(WireError(error)))
        }
    }

    /// The rules in force, as answered.
    var vendorRulesMessage: VendorRulesMessage {
        var depth: UInt32 = 0
        if case .labels(let labels) = rules.defaultScope { depth = UInt32(labels) }
        return VendorRulesMessage(
            rules: rules.rules.map(VendorRuleMessage.init), defaultDepth: depth, defaultScope: "\(rules.defaultScope)",
            aliases: rules.aliases.canonical.sorted { $0.key < $1.key }.map { (name: $0.key, filedUnder: $0.value) })
    }

    /// Decides a change of the vendor rules: refuses one that names a vendor that is not there
    /// (or, adding, one that is), gives a prefix to two vendors, or would file devices already
    /// registered under another vendor unless the operator asked for the move (and then one whose
    /// move would not take whole vendors into one, ``VendorMove/planned(destinations:)``);
    /// otherwise logs it, with its move, and answers the rules after it.
    mutating func decideVendor(_ intent: VendorIntent, wallMillis: UInt64, operations: inout [LoggedOperation]) -> ServerBody {
        var list = rules.rules
        let name: String
        switch intent.action {
        case .set(let rule, let adding):
            name = rule.name
            let exists = list.contains { $0.name == name }
            if adding && exists {
                return .error(WireError(code: .invalidArgument, message: "vendor \(name) has a rule already; change it with set"))
            }
            if !adding && !exists { return .error(WireError(code: .notFound, message: "no vendor rule \(name); add one with add")) }
            list.removeAll { $0.name == name }
            list.append(rule)
        case .remove(let removed):
            name = removed
            guard list.contains(where: { $0.name == name }) else { return .error(WireError(code: .notFound, message: "no vendor rule \(name)")) }
            list.removeAll { $0.name == name }
        }
        let next: VendorRules
        let move: VendorMove?
        do {
            next = try VendorRules(rules: list, defaultScope: rules.defaultScope, aliases: rules.aliases)
            let moved = registry.devicesMoved(from: rules, to: next, changing: name)
            guard moved.devices == 0 || intent.move else {
                let shown = moved.bundles.prefix(5).map { "\($0) (to \(next.namedVendor(of: $0)))" }.joined(separator: ", ")
                return .error(
                    WireError(
                        code: .invalidArgument,
                        message:
                            "the change would move \(moved.devices) registered device\(moved.devices == 1 ? "" : "s") to another vendor, through bundle\(moved.bundles.count == 1 ? "" : "s") \(shown)\(moved.bundles.count > 5 ? " and \(moved.bundles.count - 5) more" : ""); ask for the move (registryctl vendor ... --move) to join their vendors to the one they go to"
                    ))
            }
            move = moved.devices == 0 ? nil : try VendorMove.planned(destinations: registry.destinations(from: rules, to: next, changing: name))
            if move != nil, let refusal = intent.moveRefusal { return .error(refusal) }
        } catch {
            return .error(WireError(error))
        }
        let now = clock.tick(wallMillis: wallMillis)
        let change: VendorRuleChange
        switch intent.action {
        case .set(let rule, _): change = VendorRuleChange(kind: .set, name: name, rule: rule, time: now, origin: nodeID, move: move)
        case .remove: change = VendorRuleChange(kind: .remove, name: name, rule: nil, time: now, origin: nodeID, move: move)
        }
        log(.vendorRule(change), at: now, operations: &operations)
        return .vendorRules(vendorRulesMessage)
    }

    /// At the start of a node that holds no change of the cluster's rules (its first start, or a
    /// cluster that never had any): logs the config file's rules as a seed, all under one clock
    /// tick that names this start. Returns whether it logged anything (a file without rules
    /// seeds nothing).
    mutating func seedVendorRules(wallMillis: UInt64, operations: inout [LoggedOperation]) -> Bool {
        guard registry.vendorRuleHistory.changes.isEmpty, !configuredRules.rules.isEmpty else { return false }
        let now = clock.tick(wallMillis: wallMillis)
        for rule in configuredRules.rules {
            log(.vendorRule(VendorRuleChange(kind: .seed, name: rule.name, rule: rule, time: now, origin: nodeID)), at: now, operations: &operations)
        }
        return true
    }
}
